//! How to reach a server (design §24): its description, checked, and
//! the environment a child process gets (only what is named).

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use crate::error::McpError;

/// The default bound on connect, handshake and the whole tool listing.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The variables a child always gets when this process has them.
#[cfg(not(windows))]
const BASE_ENV: &[&str] = &["PATH", "HOME", "TMPDIR"];
#[cfg(windows)]
const BASE_ENV: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SystemRoot",
    "SystemDrive",
    "ComSpec",
    "TEMP",
    "TMP",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "HOME",
];

/// Where a server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A child process speaking over stdio: the program and its arguments.
    Command(Vec<String>),
    /// A streamable-HTTP server.
    Url(String),
}

/// An MCP server, as the operator describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// Its name: prefixes its tools' model-visible names and names it in
    /// reports.
    pub name: String,
    /// Where it is.
    pub endpoint: Endpoint,
    /// `NAME=value` entries set in a child's environment.
    pub env: Vec<String>,
    /// Names of this process's variables a child inherits.
    pub inherit_env: Vec<String>,
    /// The timeout of a tool whose rule sets none.
    pub default_timeout: Option<Duration>,
    /// The bound on connect, handshake and listing (`None`: 30 s).
    pub connect_timeout: Option<Duration>,
    /// The most bytes of a call's recorded content (`None`: 64 KiB).
    pub max_content_bytes: Option<usize>,
    /// The argument prefix that starts a supervisor between this process
    /// and a stdio server (see [`crate::supervise`](mod@crate::supervise); e.g. this binary's,
    /// [`crate::own_supervisor`]): the server is started as `<prefix>
    /// --lifeline <fd> -- <command>`. Used on Linux only; `None`: the
    /// server is this process's child, as is.
    pub supervisor: Option<Vec<String>>,
}

impl Server {
    /// A server started as a child process.
    pub fn command(name: &str, argv: &[&str]) -> Server {
        Server::new(
            name,
            Endpoint::Command(argv.iter().map(|a| (*a).to_owned()).collect()),
        )
    }

    /// A streamable-HTTP server.
    pub fn url(name: &str, url: &str) -> Server {
        Server::new(name, Endpoint::Url(url.to_owned()))
    }

    fn new(name: &str, endpoint: Endpoint) -> Server {
        Server {
            name: name.to_owned(),
            endpoint,
            env: Vec::new(),
            inherit_env: Vec::new(),
            default_timeout: None,
            connect_timeout: None,
            max_content_bytes: None,
            supervisor: None,
        }
    }

    /// Refuses a description that cannot work: no name, an empty command
    /// (or supervisor command), an endpoint that is not an http(s) URL, an `inherit_env` entry that
    /// is empty or holds `=`, an `env` entry that is not `NAME=value` with
    /// a name.
    ///
    /// ```
    /// use agentrt_mcp::Server;
    /// assert!(Server::command("fs", &["node", "server.js"]).validate().is_ok());
    /// assert!(Server::command("", &["node"]).validate().is_err());
    /// let mut s = Server::command("fs", &["node"]);
    /// s.env.push("=x".into());
    /// assert!(s.validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<(), McpError> {
        let bad = |detail: String| McpError::Server {
            server: self.name.clone(),
            detail,
        };
        if self.name.trim().is_empty() {
            return Err(bad("a server needs a name".into()));
        }
        match &self.endpoint {
            Endpoint::Command(argv) => {
                if argv.first().is_none_or(|p| p.is_empty()) {
                    return Err(bad("the command is empty".into()));
                }
                if let Some(prefix) = &self.supervisor
                    && prefix.first().is_none_or(|p| p.is_empty())
                {
                    return Err(bad("the supervisor's command is empty".into()));
                }
            }
            Endpoint::Url(url) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(bad(format!("the endpoint {url:?} is not an http(s) URL")));
                }
            }
        }
        for name in &self.inherit_env {
            if name.is_empty() || name.contains('=') {
                return Err(bad(format!(
                    "inherit_env entry {name:?} must be a variable name, without '='"
                )));
            }
        }
        for entry in &self.env {
            if entry
                .split_once('=')
                .is_none_or(|(name, _)| name.is_empty())
            {
                return Err(bad(format!("env entry {entry:?} must be NAME=value")));
            }
        }
        Ok(())
    }

    /// The environment a child gets, from `current` (this process's
    /// variables, as the OS holds them: `std::env::vars_os()`): only
    /// `PATH`, `HOME` and `TMPDIR` (Windows: its own short list) when set,
    /// then each `inherit_env` name that is set, then the `env` entries as
    /// written; a later entry replaces an earlier one of the same name
    /// (case-insensitively on Windows). Nothing else: no provider keys, no
    /// proxy settings, unless named.
    ///
    /// Names and values are OS strings: an inherited value that is not
    /// UTF-8 reaches the child byte for byte, and a variable whose name is
    /// not UTF-8 is never inherited (no configuration can name it).
    ///
    /// ```
    /// use std::ffi::OsString;
    /// use agentrt_mcp::Server;
    /// let mut s = Server::command("fs", &["node"]);
    /// s.inherit_env.push("LANG".into());
    /// s.env.push("HOME=/srv/fs".into());
    /// let current = [("PATH", "/bin"), ("HOME", "/root"), ("OPENAI_API_KEY", "sk-x"), ("LANG", "C")];
    /// let env = s.child_env(current.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))));
    /// let os = |k: &str, v: &str| (OsString::from(k), OsString::from(v));
    /// # #[cfg(not(windows))]
    /// assert_eq!(env, [os("PATH", "/bin"), os("HOME", "/srv/fs"), os("LANG", "C")]);
    /// ```
    pub fn child_env(
        &self,
        current: impl IntoIterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        let current: Vec<(OsString, OsString)> = current.into_iter().collect();
        let lookup = |name: &str| {
            current
                .iter()
                .find(|(k, _)| same_name(k, OsStr::new(name)))
                .map(|(_, v)| v.clone())
        };
        let mut out: Vec<(OsString, OsString)> = Vec::new();
        let mut set = |name: &str, value: OsString| {
            if let Some(slot) = out.iter_mut().find(|(k, _)| same_name(k, OsStr::new(name))) {
                slot.1 = value;
            } else {
                out.push((name.into(), value));
            }
        };
        for name in BASE_ENV
            .iter()
            .copied()
            .chain(self.inherit_env.iter().map(String::as_str))
        {
            if let Some(value) = lookup(name) {
                set(name, value);
            }
        }
        for entry in &self.env {
            if let Some((name, value)) = entry.split_once('=') {
                set(name, value.into());
            }
        }
        out
    }

    /// The connect bound in effect.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
            .filter(|t| !t.is_zero())
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// The content cap in effect.
    pub fn max_content_bytes(&self) -> usize {
        self.max_content_bytes
            .filter(|n| *n > 0)
            .unwrap_or(crate::call::DEFAULT_MAX_CONTENT_BYTES)
    }
}

/// Whether two variable names are the same (case-insensitively on
/// Windows).
fn same_name(a: &OsStr, b: &OsStr) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    #[test]
    #[cfg(not(windows))]
    fn a_child_gets_only_what_is_named_in_order_later_entries_winning() {
        let mut s = Server::command("fs", &["node", "server.js"]);
        s.inherit_env = vec!["LANG".into(), "MISSING".into(), "PATH".into()];
        s.env = vec!["A=1".into(), "LANG=fr".into(), "B=x=y".into(), "E=".into()];
        let current = env(&[
            ("TMPDIR", "/tmp"),
            ("PATH", "/bin"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("HTTPS_PROXY", "http://p"),
            ("LANG", "C"),
            ("RUST_LOG", "trace"),
        ]);
        assert_eq!(
            s.child_env(current),
            env(&[
                ("PATH", "/bin"),
                ("TMPDIR", "/tmp"),
                ("LANG", "fr"),
                ("A", "1"),
                ("B", "x=y"),
                ("E", ""),
            ])
        );
    }

    #[test]
    #[cfg(unix)]
    fn a_non_utf8_value_is_inherited_byte_for_byte_and_a_non_utf8_name_never() {
        use std::os::unix::ffi::{OsStrExt, OsStringExt};
        let bytes = |b: &[u8]| OsStr::from_bytes(b).to_os_string();
        let mut s = Server::command("fs", &["node"]);
        s.inherit_env = vec!["ODD".into()];
        let current = vec![
            (bytes(b"PATH"), bytes(b"/bin:/opt/\xff\xfe")),
            (bytes(b"ODD"), bytes(b"caf\xe9")),
            (bytes(b"NAME\xff"), bytes(b"1")),
            (bytes(b"OTHER"), bytes(b"\x80")),
        ];
        let child: Vec<(Vec<u8>, Vec<u8>)> = s
            .child_env(current)
            .into_iter()
            .map(|(k, v)| (k.into_vec(), v.into_vec()))
            .collect();
        assert_eq!(
            child,
            [
                (b"PATH".to_vec(), b"/bin:/opt/\xff\xfe".to_vec()),
                (b"ODD".to_vec(), b"caf\xe9".to_vec()),
            ]
        );
    }

    #[test]
    fn a_description_that_cannot_work_is_refused() {
        let cases: Vec<(Server, &str)> = vec![
            (Server::command(" ", &["node"]), "needs a name"),
            (Server::command("fs", &[]), "command is empty"),
            (Server::command("fs", &[""]), "command is empty"),
            (Server::url("fs", "ftp://x"), "not an http(s) URL"),
            (
                Server {
                    inherit_env: vec!["A=B".into()],
                    ..Server::command("fs", &["node"])
                },
                "without '='",
            ),
            (
                Server {
                    inherit_env: vec![String::new()],
                    ..Server::command("fs", &["node"])
                },
                "without '='",
            ),
            (
                Server {
                    env: vec!["NOEQUALS".into()],
                    ..Server::command("fs", &["node"])
                },
                "NAME=value",
            ),
        ];
        for (server, want) in cases {
            let e = server.validate().expect_err(want);
            assert!(e.to_string().contains(want), "{e}");
        }
        assert!(
            Server::url("fs", "https://mcp.example/mcp")
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn zero_bounds_mean_the_defaults() {
        let mut s = Server::command("fs", &["node"]);
        assert_eq!(s.connect_timeout(), Duration::from_secs(30));
        assert_eq!(s.max_content_bytes(), 64 * 1024);
        s.connect_timeout = Some(Duration::ZERO);
        s.max_content_bytes = Some(0);
        assert_eq!(s.connect_timeout(), Duration::from_secs(30));
        assert_eq!(s.max_content_bytes(), 64 * 1024);
        s.connect_timeout = Some(Duration::from_secs(2));
        s.max_content_bytes = Some(10);
        assert_eq!(
            (s.connect_timeout(), s.max_content_bytes()),
            (Duration::from_secs(2), 10)
        );
    }
}
