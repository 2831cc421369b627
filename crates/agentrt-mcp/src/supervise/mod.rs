//! A small supervisor of our own between this process and each stdio
//! server (design §24, process containment), so that a server started
//! through a launcher (`npx`, `sh -c`) leaves nothing behind even when this
//! process is SIGKILLed.
//!
//! A parent-death signal reaches only the direct child, and a process
//! that dies leaves its orphans to init, so neither keeps a launcher's
//! descendants in check. The supervisor, started by [`connect`] as the
//! direct child in place of the server, does:
//!
//! - it makes itself a child subreaper, so the launcher's descendants
//!   whose parent dies are re-parented to it, not to init;
//! - it starts the server as its child, in a process group of the
//!   server's own, with stdin, stdout and stderr passed straight through
//!   (it closes its own copies, so the server alone holds them: the
//!   server sees the end of its stdin when the connection closes it);
//! - it watches a *lifeline*: the read end of a pipe whose only write end
//!   this process holds. When this process dies, however it dies, the
//!   kernel closes the write end, the supervisor sees it, SIGKILLs the
//!   server's group and every descendant re-parented to it, reaps them
//!   and exits. [`Connection::close`] ends the lifeline the same way as
//!   its last stage;
//! - a SIGTERM, SIGINT or SIGHUP it receives is passed on once to the
//!   server's group (and to any re-parented descendant outside it), never
//!   turned into a SIGKILL: the close's SIGTERM stage reaches the server
//!   as it would without a supervisor;
//! - it exits when it has no child left, with the server's exit status
//!   (128 + the signal when a signal ended it).
//!
//! A program that uses this crate runs the supervisor from its own binary:
//! its `main` calls [`supervise_if_asked`] first, before it starts any
//! thread, and a [`Server`] names the argument prefix that starts it in
//! [`Server::supervisor`] ([`own_supervisor`] gives this binary's):
//!
//! ```no_run
//! use agentrt_mcp::{Server, own_supervisor, supervise_if_asked};
//!
//! fn main() {
//!     if let Some(code) = supervise_if_asked() {
//!         std::process::exit(code);
//!     }
//!     let mut server = Server::command("fs", &["npx", "-y", "some-mcp-server"]);
//!     server.supervisor = own_supervisor();
//!     // … connect(&server), load(&server, …) from a runtime, as usual.
//! }
//! ```
//!
//! What each platform gets: on Linux, all of the above. On other Unix
//! systems there is no supervisor ([`own_supervisor`] gives `None` and
//! [`Server::supervisor`] is not used): the server runs in its own process
//! group, which close signals in stages, and descendants that stay in the
//! group die with it; nothing is killed when this process is SIGKILLed.
//! On Windows, there is no group either: close ends the server alone.
//!
//! [`connect`]: crate::connect
//! [`Connection::close`]: crate::Connection::close
//! [`Server`]: crate::Server
//! [`Server::supervisor`]: crate::Server::supervisor

use std::ffi::{OsStr, OsString};

#[cfg(target_os = "linux")]
mod linux;

/// The first argument that makes a binary run as the supervisor (see
/// [`supervise_if_asked`]).
pub const SUPERVISE_ARG: &str = "__supervise";

/// The option naming the lifeline's file descriptor.
pub(crate) const LIFELINE_OPTION: &str = "--lifeline";

/// What the supervisor is asked to do: `--lifeline <fd> -- <server argv>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SupervisorArgs {
    /// The file descriptor of the lifeline's read end, inherited.
    pub lifeline: i32,
    /// The server's program and arguments.
    pub argv: Vec<OsString>,
}

/// Why the supervisor's arguments were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SupervisorArgsError {
    /// `--lifeline <fd>` does not come first.
    #[error("the arguments must start with --lifeline <fd>")]
    MissingLifeline,
    /// The lifeline is not a file descriptor number above stderr's.
    #[error("--lifeline {text:?} is not a file descriptor number above 2")]
    BadLifeline {
        /// The argument as given (lossily UTF-8).
        text: String,
    },
    /// `--` does not follow the lifeline.
    #[error("--lifeline <fd> must be followed by --")]
    MissingSeparator,
    /// Nothing follows `--`, or the program is empty.
    #[error("no server command follows --")]
    EmptyCommand,
}

/// Reads the supervisor's arguments (those after [`SUPERVISE_ARG`]).
///
/// ```
/// use std::ffi::OsString;
/// use agentrt_mcp::{SupervisorArgs, parse_supervisor_args};
///
/// let args: Vec<OsString> = ["--lifeline", "7", "--", "node", "server.js"].map(OsString::from).into();
/// assert_eq!(
///     parse_supervisor_args(&args),
///     Ok(SupervisorArgs { lifeline: 7, argv: vec!["node".into(), "server.js".into()] })
/// );
/// assert!(parse_supervisor_args(&[OsString::from("node")]).is_err());
/// ```
pub fn parse_supervisor_args(args: &[OsString]) -> Result<SupervisorArgs, SupervisorArgsError> {
    let (option, rest) = args
        .split_first()
        .ok_or(SupervisorArgsError::MissingLifeline)?;
    if option != OsStr::new(LIFELINE_OPTION) {
        return Err(SupervisorArgsError::MissingLifeline);
    }
    let (fd, rest) = rest
        .split_first()
        .ok_or(SupervisorArgsError::MissingLifeline)?;
    let text = fd.to_string_lossy();
    let lifeline = fd
        .to_str()
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<i32>().ok())
        .filter(|n| *n > 2)
        .ok_or_else(|| SupervisorArgsError::BadLifeline {
            text: text.into_owned(),
        })?;
    let (separator, argv) = rest
        .split_first()
        .ok_or(SupervisorArgsError::MissingSeparator)?;
    if separator != OsStr::new("--") {
        return Err(SupervisorArgsError::MissingSeparator);
    }
    if argv.first().is_none_or(|program| program.is_empty()) {
        return Err(SupervisorArgsError::EmptyCommand);
    }
    Ok(SupervisorArgs {
        lifeline,
        argv: argv.to_vec(),
    })
}

/// Runs the supervisor when this process was started as one (its first
/// argument is [`SUPERVISE_ARG`]) and gives its exit status; `None`
/// otherwise. Call it first in `main`, before any thread starts: the
/// supervisor changes the process's signal mask.
pub fn supervise_if_asked() -> Option<i32> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != OsStr::new(SUPERVISE_ARG) {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(run_supervisor(&rest))
}

/// Runs the supervisor with `args` (those after [`SUPERVISE_ARG`]) until
/// the server and its descendants are gone; its exit status. Refused
/// arguments exit 2 and a server that cannot start 127, each with a line
/// on stderr. Only on Linux; elsewhere it refuses to run (exit 2).
pub fn run_supervisor(args: &[OsString]) -> i32 {
    let parsed = match parse_supervisor_args(args) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("agentrt-mcp supervisor: {e}");
            return 2;
        }
    };
    run(parsed)
}

#[cfg(target_os = "linux")]
fn run(args: SupervisorArgs) -> i32 {
    linux::run(args)
}

#[cfg(not(target_os = "linux"))]
fn run(_args: SupervisorArgs) -> i32 {
    eprintln!("agentrt-mcp supervisor: supervising a server is only built on Linux");
    2
}

/// The argument prefix that starts this binary as the supervisor, for
/// [`Server::supervisor`](crate::Server::supervisor): on Linux,
/// `/proc/self/exe` (the very image of this process, even if its file was
/// replaced since) and [`SUPERVISE_ARG`]; `None` elsewhere. The binary's
/// `main` must call [`supervise_if_asked`].
pub fn own_supervisor() -> Option<Vec<String>> {
    if cfg!(target_os = "linux") {
        Some(vec!["/proc/self/exe".to_owned(), SUPERVISE_ARG.to_owned()])
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_arguments_are_the_lifeline_then_the_command() {
        assert_eq!(
            parse_supervisor_args(&args(&["--lifeline", "12", "--", "sh", "-c", "x"])),
            Ok(SupervisorArgs {
                lifeline: 12,
                argv: args(&["sh", "-c", "x"]),
            })
        );
        for (bad, want) in [
            (&[][..], SupervisorArgsError::MissingLifeline),
            (&["node"][..], SupervisorArgsError::MissingLifeline),
            (&["--lifeline"][..], SupervisorArgsError::MissingLifeline),
            (
                &["--lifeline", "2", "--", "x"][..],
                SupervisorArgsError::BadLifeline { text: "2".into() },
            ),
            (
                &["--lifeline", "+7", "--", "x"][..],
                SupervisorArgsError::BadLifeline { text: "+7".into() },
            ),
            (
                &["--lifeline", "99999999999", "--", "x"][..],
                SupervisorArgsError::BadLifeline {
                    text: "99999999999".into(),
                },
            ),
            (
                &["--lifeline", "7", "x"][..],
                SupervisorArgsError::MissingSeparator,
            ),
            (
                &["--lifeline", "7"][..],
                SupervisorArgsError::MissingSeparator,
            ),
            (
                &["--lifeline", "7", "--"][..],
                SupervisorArgsError::EmptyCommand,
            ),
            (
                &["--lifeline", "7", "--", ""][..],
                SupervisorArgsError::EmptyCommand,
            ),
        ] {
            assert_eq!(parse_supervisor_args(&args(bad)), Err(want), "{bad:?}");
        }
    }
}
