//! The command line (design §19): the first
//! argument that does not start with `-` is the command (`serve` when
//! none), `--config FILE` is required, nothing else may follow.

use std::path::PathBuf;

pub use crate::recheck::RecheckOptions;

/// A command and its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Serve one host over stdin and stdout, or hosts over HTTP.
    Serve(ServeOptions),
    /// Pin every server into its manifest.
    Pin,
    /// Load everything and print the reports.
    Check,
    /// Print the tools the pinned manifests offer, as a JSON array of
    /// tool specs (what `agentrt policy check --tools` reads).
    Tools,
    /// Re-check recorded calls under the configuration's policy.
    Recheck(RecheckOptions),
}

impl Command {
    /// The command's name.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Serve(_) => "serve",
            Command::Pin => "pin",
            Command::Check => "check",
            Command::Tools => "tools",
            Command::Recheck(_) => "recheck",
        }
    }
}

/// `serve`'s options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeOptions {
    /// Serve over streamable HTTP on this address (else stdio).
    pub http: Option<std::net::SocketAddr>,
    /// The owner-only file holding the bearer token (HTTP); one is made
    /// beside the configuration when none is given.
    pub token_file: Option<PathBuf>,
    /// `--allow-host NAME`, each time given (HTTP).
    pub allowed_hosts: Vec<String>,
    /// `--allow-origin ORIGIN`, each time given (HTTP).
    pub allowed_origins: Vec<String>,
    /// `--max-sessions N` (HTTP).
    pub max_sessions: Option<usize>,
    /// `--max-requests-per-session N` (HTTP).
    pub max_requests_per_session: Option<usize>,
}

impl ServeOptions {
    /// Whether any option of serving over HTTP is given.
    fn names_http(&self) -> bool {
        self.http.is_some()
            || self.token_file.is_some()
            || !self.allowed_hosts.is_empty()
            || !self.allowed_origins.is_empty()
            || self.max_sessions.is_some()
            || self.max_requests_per_session.is_some()
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Print the usage (to stderr) and succeed.
    Help,
    /// Run `command` with the configuration file `config`.
    Run {
        /// The command.
        command: Command,
        /// The configuration file.
        config: PathBuf,
    },
}

/// A command line that cannot run, with the one line saying why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Parsed, UsageError> {
    let bad = |m: String| Err(UsageError(m));
    let mut command: Option<&str> = None;
    let mut config: Option<PathBuf> = None;
    let (mut run, mut session, mut limit, mut current_tools, mut json) =
        (None, None, None, false, false);
    let mut serve = ServeOptions::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if !arg.starts_with('-') {
            if command.is_some() || config.is_some() {
                return bad(format!("unexpected argument {arg:?}"));
            }
            command = Some(arg);
            continue;
        }
        if matches!(arg, "-h" | "--help") {
            return Ok(Parsed::Help);
        }
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg, None),
        };
        let mut value = |name: &str| -> Result<String, UsageError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            let v = args
                .get(i)
                .ok_or_else(|| UsageError(format!("{name} needs a value")))?;
            i += 1;
            Ok(v.clone())
        };
        match flag {
            "--config" => {
                let v = value("--config")?;
                if v.is_empty() {
                    return bad("--config is empty".into());
                }
                config = Some(PathBuf::from(v));
            }
            "--run" => run = Some(value("--run")?),
            "--session" => session = Some(value("--session")?),
            "--limit" => {
                let v = value("--limit")?;
                let n: i64 = v
                    .parse()
                    .map_err(|_| UsageError(format!("--limit {v:?} is not a number")))?;
                if n <= 0 {
                    return bad(format!("--limit {n}: give a positive number"));
                }
                limit = Some(u32::try_from(n).unwrap_or(u32::MAX));
            }
            "--http" => {
                let v = value("--http")?;
                let addr = v.parse().map_err(|_| {
                    UsageError(format!(
                        "--http {v:?} is not an address like 127.0.0.1:8080"
                    ))
                })?;
                serve.http = Some(addr);
            }
            "--token-file" => {
                let v = value("--token-file")?;
                if v.is_empty() {
                    return bad("--token-file is empty".into());
                }
                serve.token_file = Some(PathBuf::from(v));
            }
            "--allow-host" => serve.allowed_hosts.push(value("--allow-host")?),
            "--allow-origin" => serve.allowed_origins.push(value("--allow-origin")?),
            "--max-sessions" | "--max-requests-per-session" => {
                let v = value(flag)?;
                let n =
                    v.parse::<usize>().ok().filter(|n| *n > 0).ok_or_else(|| {
                        UsageError(format!("{flag} {v:?}: give a positive number"))
                    })?;
                if flag == "--max-sessions" {
                    serve.max_sessions = Some(n);
                } else {
                    serve.max_requests_per_session = Some(n);
                }
            }
            "--current-tools" if inline.is_none() => current_tools = true,
            "--json" if inline.is_none() => json = true,
            _ => return bad(format!("unknown flag {arg:?}")),
        }
    }
    let command = match command.unwrap_or("serve") {
        "serve" => {
            if serve.http.is_none() && serve.names_http() {
                return bad("--token-file, --allow-host, --allow-origin, --max-sessions and --max-requests-per-session go with --http".into());
            }
            Command::Serve(std::mem::take(&mut serve))
        }
        "pin" => Command::Pin,
        "check" => Command::Check,
        "tools" => Command::Tools,
        "recheck" => {
            if run.is_some() && session.is_some() {
                return bad("give --run or --session, not both".into());
            }
            Command::Recheck(RecheckOptions {
                run: run.take(),
                session: session.take(),
                limit: limit.take().unwrap_or(50),
                current_tools,
                json,
            })
        }
        other => return bad(format!("unknown command {other:?}")),
    };
    if !matches!(command, Command::Recheck(_))
        && (run.is_some() || session.is_some() || limit.is_some() || current_tools || json)
    {
        return bad(format!(
            "--run, --session, --limit, --current-tools and --json belong to recheck, not {}",
            command.name()
        ));
    }
    if serve.names_http() {
        return bad(format!(
            "--http and its options belong to serve, not {}",
            command.name()
        ));
    }
    let Some(config) = config else {
        return bad("--config is required".into());
    };
    Ok(Parsed::Run { command, config })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Parsed, UsageError> {
        parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>())
    }

    fn run(command: Command) -> Result<Parsed, UsageError> {
        Ok(Parsed::Run {
            command,
            config: PathBuf::from("c.json"),
        })
    }

    #[test]
    fn the_first_plain_argument_is_the_command_serve_by_default() {
        let stdio = Command::Serve(ServeOptions::default());
        assert_eq!(p(&["--config", "c.json"]), run(stdio.clone()));
        assert_eq!(p(&["--config=c.json"]), run(stdio));
        assert_eq!(
            p(&[
                "serve",
                "--config",
                "c.json",
                "--http",
                "127.0.0.1:0",
                "--token-file",
                "t",
                "--allow-host",
                "proxy.example",
                "--allow-origin=https://app.example",
                "--allow-host",
                "other.example",
                "--max-sessions",
                "3",
                "--max-requests-per-session",
                "4"
            ]),
            run(Command::Serve(ServeOptions {
                http: Some("127.0.0.1:0".parse().unwrap()),
                token_file: Some(PathBuf::from("t")),
                allowed_hosts: vec!["proxy.example".into(), "other.example".into()],
                allowed_origins: vec!["https://app.example".into()],
                max_sessions: Some(3),
                max_requests_per_session: Some(4),
            }))
        );
        assert_eq!(p(&["pin", "--config", "c.json"]), run(Command::Pin));
        assert_eq!(p(&["check", "--config", "c.json"]), run(Command::Check));
        assert_eq!(p(&["tools", "--config", "c.json"]), run(Command::Tools));
        assert_eq!(
            p(&[
                "recheck",
                "--config",
                "c.json",
                "--session",
                "s",
                "--limit",
                "3",
                "--json"
            ]),
            run(Command::Recheck(RecheckOptions {
                run: None,
                session: Some("s".into()),
                limit: 3,
                current_tools: false,
                json: true,
            }))
        );
        assert_eq!(p(&["check", "-h"]), Ok(Parsed::Help));
    }

    #[test]
    fn a_command_line_that_cannot_run_says_why() {
        for (args, want) in [
            (&["pin"][..], "--config is required"),
            (&["--config"][..], "--config needs a value"),
            (&["--config", ""][..], "--config is empty"),
            (
                &["--config", "c.json", "extra"][..],
                "unexpected argument \"extra\"",
            ),
            (
                &["serve", "pin", "--config", "c"][..],
                "unexpected argument \"pin\"",
            ),
            (&["bake", "--config", "c"][..], "unknown command \"bake\""),
            (&["-config", "c"][..], "unknown flag \"-config\""),
            (
                &["recheck", "--config", "c", "--limit", "0"][..],
                "--limit 0",
            ),
            (
                &["recheck", "--config", "c", "--limit", "x"][..],
                "not a number",
            ),
            (
                &["recheck", "--config", "c", "--run", "r", "--session", "s"][..],
                "not both",
            ),
            (
                &["check", "--config", "c", "--json"][..],
                "belong to recheck",
            ),
            (
                &["serve", "--config", "c", "--allow-origin", "x"][..],
                "go with --http",
            ),
            (
                &[
                    "serve",
                    "--config",
                    "c",
                    "--http",
                    "127.0.0.1:1",
                    "--max-sessions",
                    "0",
                ][..],
                "--max-sessions \"0\": give a positive number",
            ),
            (
                &["check", "--config", "c", "--token-file", "t"][..],
                "belong to serve, not check",
            ),
        ] {
            match p(args) {
                Err(UsageError(m)) => assert!(m.contains(want), "{args:?}: {m}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
