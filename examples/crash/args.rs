//! The command line of `crash-consumer`: two-dash long options and one
//! command word, in any order.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use agentrt::{SideEffect, gate::CrashPoint};

pub const USAGE: &str =
    "usage: crash-consumer --db PATH --effects FILE --class CLASS --run RUN COMMAND [options]

  COMMAND             start | resume | approve-pending
  --db PATH           the SQLite file (start creates it)
  --effects FILE      the file the tool appends one line to each time it runs
  --class CLASS       the tool's class: read_only | local_mutation | remote_mutation | destructive
  --run RUN           the run id
  --crash-at POINT    park at this crash point (step.started, step.decided, policy.allowed,
                      step.tool_started, tool.effect, step.tool_finished, run.resumed,
                      step.interrupted, attach.allowed) until killed
  --crash-nth N       park the N-th time the point is reached (default 1)
  --marker FILE       written with the point's name once parked (required with --crash-at)
  --lease-ttl-ms N    the lease time-to-live of this process (default 30000)
  --go FILE           wait until FILE exists before starting or resuming
  --ready FILE        created when this process waits for --go

exit codes: 0 done (one JSON line: status, reason, executed, owner), 2 usage,
3 run leased by another owner, 4 run-state refusal, 1 any other error";

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Start the run and drive it.
    Start,
    /// Resume the run (take it over after a crash, or run a granted approval).
    Resume,
    /// Approve the run's pending approval, if any, and exit.
    ApprovePending,
}

/// The parsed command line.
#[derive(Debug, Clone)]
pub struct Args {
    pub db: PathBuf,
    /// Required by `start` and `resume`.
    pub effects: Option<PathBuf>,
    /// Required by `start` and `resume`.
    pub class: Option<SideEffect>,
    pub run: String,
    pub command: Command,
    /// The crash point, the occurrence to park at, and the marker file.
    pub crash: Option<Crash>,
    pub lease_ttl: Option<Duration>,
    pub go: Option<PathBuf>,
    pub ready: Option<PathBuf>,
}

/// Where to park.
#[derive(Debug, Clone)]
pub struct Crash {
    pub point: CrashPoint,
    pub nth: usize,
    pub marker: PathBuf,
}

/// Help was asked for, or the arguments to run with.
pub enum Parsed {
    Help,
    Run(Args),
}

fn text(value: OsString, option: &str) -> Result<String, String> {
    value
        .into_string()
        .map_err(|v| format!("{option}: {v:?} is not UTF-8"))
}

fn positive(value: &str, option: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{option} needs a positive whole number, not {value:?}"
        )),
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Parsed, String> {
    let mut args = args.into_iter();
    let mut db = None;
    let mut effects = None;
    let mut class = None;
    let mut run = None;
    let mut command = None;
    let mut crash_at = None;
    let mut crash_nth = None;
    let mut marker = None;
    let mut lease_ttl = None;
    let mut go = None;
    let mut ready = None;
    while let Some(arg) = args.next() {
        let arg = text(arg, "argument")?;
        let mut value = |option: &str| -> Result<OsString, String> {
            args.next().ok_or_else(|| format!("{option} needs a value"))
        };
        match arg.as_str() {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--db" => db = Some(PathBuf::from(value("--db")?)),
            "--effects" => effects = Some(PathBuf::from(value("--effects")?)),
            "--marker" => marker = Some(PathBuf::from(value("--marker")?)),
            "--go" => go = Some(PathBuf::from(value("--go")?)),
            "--ready" => ready = Some(PathBuf::from(value("--ready")?)),
            "--run" => {
                let id = text(value("--run")?, "--run")?;
                if id.is_empty() {
                    return Err("--run needs a non-empty run id".into());
                }
                run = Some(id);
            }
            "--class" => {
                let name = text(value("--class")?, "--class")?;
                class = Some(
                    SideEffect::parse(&name)
                        .ok_or_else(|| format!("--class: unknown side-effect class {name:?}"))?,
                );
            }
            "--crash-at" => {
                let name = text(value("--crash-at")?, "--crash-at")?;
                crash_at = Some(
                    CrashPoint::from_name(&name)
                        .ok_or_else(|| format!("--crash-at: unknown crash point {name:?}"))?,
                );
            }
            "--crash-nth" => {
                let n = text(value("--crash-nth")?, "--crash-nth")?;
                let n = positive(&n, "--crash-nth")?;
                crash_nth = Some(usize::try_from(n).map_err(|_| "--crash-nth is too large")?);
            }
            "--lease-ttl-ms" => {
                let n = text(value("--lease-ttl-ms")?, "--lease-ttl-ms")?;
                lease_ttl = Some(Duration::from_millis(positive(&n, "--lease-ttl-ms")?));
            }
            "start" | "resume" | "approve-pending" => {
                if command.is_some() {
                    return Err(format!("a second command {arg:?}"));
                }
                command = Some(match arg.as_str() {
                    "start" => Command::Start,
                    "resume" => Command::Resume,
                    _ => Command::ApprovePending,
                });
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let command = command.ok_or("a command is needed: start, resume or approve-pending")?;
    if command != Command::ApprovePending {
        if effects.is_none() {
            return Err("--effects FILE is needed to start or resume".into());
        }
        if class.is_none() {
            return Err("--class CLASS is needed to start or resume".into());
        }
    }
    let crash = match (crash_at, marker) {
        (Some(point), Some(marker)) => Some(Crash {
            point,
            nth: crash_nth.unwrap_or(1),
            marker,
        }),
        (Some(_), None) => return Err("--crash-at needs --marker FILE".into()),
        (None, _) if crash_nth.is_some() => return Err("--crash-nth needs --crash-at".into()),
        (None, _) => None,
    };
    if ready.is_some() && go.is_none() {
        return Err("--ready needs --go".into());
    }
    Ok(Parsed::Run(Args {
        db: db.ok_or("--db PATH is needed")?,
        effects,
        class,
        run: run.ok_or("--run RUN is needed")?,
        command,
        crash,
        lease_ttl,
        go,
        ready,
    }))
}
