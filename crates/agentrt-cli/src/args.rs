//! The command line, parsed and validated completely before anything is
//! opened: `agentrt [--db PATH] [--json] <command> [arguments]`.
//!
//! Hand-rolled, so every problem is one line of our own and the usage text
//! is printed exactly once by the caller.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

/// A usage problem: the one-line description (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

fn usage<T>(message: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(message.into()))
}

/// The environment the defaults come from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `AGENTRT_DB`.
    pub db: Option<OsString>,
    /// `USER`.
    pub user: Option<String>,
}

impl Env {
    /// The process environment.
    pub fn from_process() -> Env {
        Env {
            db: std::env::var_os("AGENTRT_DB"),
            user: std::env::var("USER").ok(),
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Print the usage text to stdout.
    Help,
    /// Run a command on a database.
    Run(Invocation),
    /// `keygen`: needs no database.
    Keygen(Keygen),
}

/// `keygen --out PREFIX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keygen {
    /// Writes `PREFIX.key` and `PREFIX.pub`.
    pub out: PathBuf,
    /// JSON output.
    pub json: bool,
}

/// A head to compare the chain with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeptHead {
    /// `--head SEQ:HASH`.
    Given {
        /// The seq.
        seq: i64,
        /// The link.
        hash: String,
    },
    /// `--signed-head FILE --pubkey FILE`.
    Signed {
        /// The signed head document.
        file: PathBuf,
        /// The public key it must be signed with.
        pubkey: PathBuf,
    },
}

/// `verify` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    /// `--from` (0: from the first event).
    pub from: i64,
    /// `--to` (0: to the chain head).
    pub to: i64,
    /// `--head` or `--signed-head`.
    pub kept: Option<KeptHead>,
}

/// A validated invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The database path.
    pub db: PathBuf,
    /// JSON output.
    pub json: bool,
    /// The command.
    pub command: Command,
}

/// Paging of a listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paging {
    /// Rows per page (0: all).
    pub limit: u64,
    /// Rows to skip.
    pub offset: u64,
}

/// Approve or reject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// `approve`.
    Approve,
    /// `reject`.
    Reject,
}

impl Verb {
    /// The command name.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Approve => "approve",
            Verb::Reject => "reject",
        }
    }
}

/// `approve` / `reject` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decide {
    /// Which.
    pub verb: Verb,
    /// The run.
    pub run: String,
    /// The approval named with `--approval`.
    pub approval: Option<String>,
    /// Who decides.
    pub by: String,
    /// The note.
    pub note: String,
    /// `--yes`.
    pub yes: bool,
}

/// A command and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `runs`.
    Runs(Paging),
    /// `show <run>`.
    Show {
        /// The run.
        run: String,
        /// Paging of steps and pending approvals.
        paging: Paging,
    },
    /// `events <run>`.
    Events {
        /// The run.
        run: String,
        /// Paging of events.
        paging: Paging,
    },
    /// `approve <run>` / `reject <run>`.
    Decide(Decide),
    /// `cancel <run>`.
    Cancel {
        /// The run.
        run: String,
        /// Who cancels.
        by: String,
        /// The note.
        note: String,
    },
    /// `verify`.
    Verify(Verify),
    /// `head sign`.
    HeadSign {
        /// The private key file.
        key: PathBuf,
        /// Where to write the signed head (stdout when absent).
        out: Option<PathBuf>,
    },
}

impl Command {
    /// The command name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Runs(_) => "runs",
            Command::Show { .. } => "show",
            Command::Events { .. } => "events",
            Command::Decide(d) => d.verb.name(),
            Command::Cancel { .. } => "cancel",
            Command::Verify(_) => "verify",
            Command::HeadSign { .. } => "head sign",
        }
    }
}

const COMMANDS: &[&str] = &[
    "runs", "show", "events", "approve", "reject", "cancel", "verify", "head", "keygen", "help",
];
const GLOBAL_FLAGS: &[&str] = &["--db", "--json"];
const PAGING_FLAGS: &[&str] = &["--limit", "--offset"];
const DECIDE_FLAGS: &[&str] = &["--approval", "--by", "--note"];
const CANCEL_FLAGS: &[&str] = &["--by", "--note"];
const VERIFY_FLAGS: &[&str] = &["--from", "--to", "--head", "--signed-head", "--pubkey"];
const HEAD_SIGN_FLAGS: &[&str] = &["--key", "--out"];
const KEYGEN_FLAGS: &[&str] = &["--out"];

/// Parses the arguments after the program name.
pub fn parse(args: &[OsString], env: &Env) -> Result<Parsed, UsageError> {
    let mut db: Option<OsString> = None;
    let mut json = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let Some(text) = arg.to_str() else {
            return usage(format!(
                "argument {:?} is not valid UTF-8",
                arg.to_string_lossy()
            ));
        };
        match text {
            "-h" | "--help" => return Ok(Parsed::Help),
            "--json" => json = true,
            "--db" => {
                i += 1;
                let Some(value) = args.get(i) else {
                    return usage("--db needs a value: --db PATH");
                };
                db = Some(value.clone());
            }
            "--" => {
                i += 1;
                break;
            }
            _ => {
                if let Some(value) = text.strip_prefix("--db=") {
                    db = Some(OsString::from(value));
                } else if text.starts_with("--json=") {
                    return usage("--json takes no value");
                } else if text.starts_with('-') {
                    return usage(unknown_flag(text, GLOBAL_FLAGS, None));
                } else {
                    break;
                }
            }
        }
        i += 1;
    }
    let Some(name) = args.get(i) else {
        return usage("no command given");
    };
    let Some(name) = name.to_str() else {
        return usage(format!("unknown command {:?}", name.to_string_lossy()));
    };
    let rest = args.get(i + 1..).unwrap_or_default();
    let command = match name {
        "help" => return Ok(Parsed::Help),
        "runs" => match scan(name, rest, PAGING_FLAGS, &[])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => {
                no_positional(name, &a)?;
                Command::Runs(paging(&a, 100)?)
            }
        },
        "show" | "events" => match scan(name, rest, PAGING_FLAGS, &[])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => {
                let run = one_run(name, &a)?;
                let paging = paging(&a, 500)?;
                if name == "show" {
                    Command::Show { run, paging }
                } else {
                    Command::Events { run, paging }
                }
            }
        },
        "approve" | "reject" => match scan(name, rest, DECIDE_FLAGS, &["--yes"])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => {
                let run = one_run(name, &a)?;
                let approval = match a.values.get("--approval") {
                    Some(id) if id.is_empty() => {
                        return usage("--approval is empty: name an approval id");
                    }
                    other => other.cloned(),
                };
                Command::Decide(Decide {
                    verb: if name == "approve" {
                        Verb::Approve
                    } else {
                        Verb::Reject
                    },
                    run,
                    approval,
                    by: by(&a, env)?,
                    note: a.values.get("--note").cloned().unwrap_or_default(),
                    yes: a.switches.contains(&"--yes"),
                })
            }
        },
        "cancel" => match scan(name, rest, CANCEL_FLAGS, &[])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => Command::Cancel {
                run: one_run(name, &a)?,
                by: by(&a, env)?,
                note: a.values.get("--note").cloned().unwrap_or_default(),
            },
        },
        "verify" => match scan(name, rest, VERIFY_FLAGS, &[])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => {
                no_positional(name, &a)?;
                Command::Verify(verify(&a)?)
            }
        },
        "head" => {
            let Some(sub) = rest.first() else {
                return usage("head needs a subcommand: agentrt head sign --key FILE");
            };
            match utf8(sub)? {
                "sign" => match scan(
                    "head sign",
                    rest.get(1..).unwrap_or_default(),
                    HEAD_SIGN_FLAGS,
                    &[],
                )? {
                    Scan::Help => return Ok(Parsed::Help),
                    Scan::Args(a) => {
                        no_positional("head sign", &a)?;
                        Command::HeadSign {
                            key: required_path(&a, "--key", "head sign --key FILE")?,
                            out: optional_path(&a, "--out")?,
                        }
                    }
                },
                "-h" | "--help" => return Ok(Parsed::Help),
                other => {
                    return usage(format!(
                        "unknown subcommand {other:?} of head; the one there is: head sign"
                    ));
                }
            }
        }
        "keygen" => match scan(name, rest, KEYGEN_FLAGS, &[])? {
            Scan::Help => return Ok(Parsed::Help),
            Scan::Args(a) => {
                no_positional(name, &a)?;
                return Ok(Parsed::Keygen(Keygen {
                    out: required_path(&a, "--out", "keygen --out PREFIX")?,
                    json,
                }));
            }
        },
        other => {
            return usage(format!(
                "unknown command {other:?}; the commands are {}",
                COMMANDS.join(", ")
            ));
        }
    };
    let db = db
        .filter(|d| !d.is_empty())
        .or_else(|| env.db.clone().filter(|d| !d.is_empty()));
    let Some(db) = db else {
        return usage("no database: pass --db PATH or set AGENTRT_DB");
    };
    Ok(Parsed::Run(Invocation {
        db: PathBuf::from(db),
        json,
        command,
    }))
}

/// The arguments of a command.
#[derive(Debug, Default)]
struct Args {
    positionals: Vec<String>,
    values: HashMap<&'static str, String>,
    switches: Vec<&'static str>,
}

enum Scan {
    Help,
    Args(Args),
}

/// Splits a command's arguments into positionals, flag values and
/// switches. Flags may come before or after positionals; `--` ends flags;
/// `--flag value` and `--flag=value` both work; the last of a repeated
/// flag wins.
fn scan(
    command: &str,
    rest: &[OsString],
    value_flags: &[&'static str],
    switches: &[&'static str],
) -> Result<Scan, UsageError> {
    let mut out = Args::default();
    let mut flags_done = false;
    let mut i = 0;
    while let Some(arg) = rest.get(i) {
        i += 1;
        let text = utf8(arg)?;
        if flags_done || !text.starts_with('-') || text == "-" {
            out.positionals.push(text.to_owned());
            continue;
        }
        if text == "--" {
            flags_done = true;
            continue;
        }
        if text == "-h" || text == "--help" {
            return Ok(Scan::Help);
        }
        let (name, inline) = match text.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (text, None),
        };
        if let Some(&flag) = value_flags.iter().find(|f| **f == name) {
            let value = match inline {
                Some(v) => v.to_owned(),
                None => {
                    let Some(next) = rest.get(i) else {
                        return usage(format!("{flag} needs a value"));
                    };
                    i += 1;
                    utf8(next)?.to_owned()
                }
            };
            out.values.insert(flag, value);
        } else if let Some(&switch) = switches.iter().find(|s| **s == name) {
            if inline.is_some() {
                return usage(format!("{switch} takes no value"));
            }
            out.switches.push(switch);
        } else if GLOBAL_FLAGS.contains(&name) {
            return usage(format!(
                "{name} is a global flag: put it before the command (agentrt {name} ... {command} ...)"
            ));
        } else {
            let known: Vec<&str> = value_flags.iter().chain(switches).copied().collect();
            return usage(unknown_flag(text, &known, Some(command)));
        }
    }
    Ok(Scan::Args(out))
}

fn utf8(arg: &OsStr) -> Result<&str, UsageError> {
    arg.to_str().ok_or_else(|| {
        UsageError(format!(
            "argument {:?} is not valid UTF-8",
            arg.to_string_lossy()
        ))
    })
}

/// "unknown flag" with a hint when the flag exists with two dashes.
fn unknown_flag(text: &str, known: &[&str], command: Option<&str>) -> String {
    let name = text.split_once('=').map_or(text, |(n, _)| n);
    let place = command.map(|c| format!(" for {c}")).unwrap_or_default();
    let hint = if !name.starts_with("--") {
        let two = format!("-{name}");
        if known.contains(&two.as_str()) {
            format!(" (flags take two dashes: {two})")
        } else {
            String::new()
        }
    } else {
        String::new()
    };
    format!("unknown flag {name}{place}{hint}")
}

fn no_positional(command: &str, a: &Args) -> Result<(), UsageError> {
    match a.positionals.first() {
        Some(extra) => usage(format!(
            "unexpected argument {extra:?}: {command} takes no arguments"
        )),
        None => Ok(()),
    }
}

fn one_run(command: &str, a: &Args) -> Result<String, UsageError> {
    match a.positionals.as_slice() {
        [] => usage(format!("{command} needs a run id: agentrt {command} <run>")),
        [run] if run.is_empty() => usage("the run id is empty"),
        [run] => Ok(run.clone()),
        [_, extra, ..] => usage(format!(
            "unexpected argument {extra:?}: {command} takes exactly one run id"
        )),
    }
}

fn paging(a: &Args, default_limit: u64) -> Result<Paging, UsageError> {
    let number = |flag: &str, default: u64| -> Result<u64, UsageError> {
        match a.values.get(flag) {
            None => Ok(default),
            Some(text) => match text.trim().parse::<i64>() {
                Ok(n) => Ok(u64::try_from(n).unwrap_or(0)),
                Err(_) => usage(format!(
                    "invalid value {text:?} for {flag}: want a whole number"
                )),
            },
        }
    };
    Ok(Paging {
        limit: number("--limit", default_limit)?,
        offset: number("--offset", 0)?,
    })
}

/// A whole number of `flag` (default 0), which must not be negative.
fn seq_flag(a: &Args, flag: &str) -> Result<i64, UsageError> {
    match a.values.get(flag) {
        None => Ok(0),
        Some(text) => match text.trim().parse::<i64>() {
            Ok(n) if n < 0 => usage(format!("{flag} is negative ({n}): seqs start at 1")),
            Ok(n) => Ok(n),
            Err(_) => usage(format!(
                "invalid value {text:?} for {flag}: want a whole number"
            )),
        },
    }
}

fn verify(a: &Args) -> Result<Verify, UsageError> {
    let from = seq_flag(a, "--from")?;
    let to = seq_flag(a, "--to")?;
    if from > 0 && to > 0 && to < from {
        return usage(format!("--to {to} is before --from {from}"));
    }
    let signed = match (a.values.get("--signed-head"), a.values.get("--pubkey")) {
        (Some(file), Some(pubkey)) if !file.is_empty() && !pubkey.is_empty() => {
            Some(KeptHead::Signed {
                file: PathBuf::from(file),
                pubkey: PathBuf::from(pubkey),
            })
        }
        (None, None) => None,
        (Some(_), None) | (Some(_), Some(_)) => {
            return usage(
                "--signed-head needs --pubkey FILE: the public key it must be signed with",
            );
        }
        (None, Some(_)) => return usage("--pubkey goes with --signed-head FILE"),
    };
    let given = match a.values.get("--head") {
        None => None,
        Some(text) => {
            let parsed = text.split_once(':').and_then(|(seq, hash)| {
                let seq = seq.trim().parse::<i64>().ok().filter(|n| *n >= 1)?;
                (!hash.is_empty()).then(|| (seq, hash.to_owned()))
            });
            let Some((seq, hash)) = parsed else {
                return usage(format!(
                    "invalid value {text:?} for --head: want SEQ:HASH with SEQ at least 1"
                ));
            };
            check_head_seq(seq, from, to)?;
            Some(KeptHead::Given { seq, hash })
        }
    };
    let kept = match (given, signed) {
        (Some(_), Some(_)) => return usage("give --head or --signed-head, not both"),
        (given, signed) => given.or(signed),
    };
    Ok(Verify { from, to, kept })
}

/// A kept head's seq must lie within `--from`..`--to` (when given).
pub fn check_head_seq(seq: i64, from: i64, to: i64) -> Result<(), UsageError> {
    if to > 0 && seq > to {
        return usage(format!("the head's seq {seq} is after --to {to}"));
    }
    if from > 0 && seq < from {
        return usage(format!("the head's seq {seq} is before --from {from}"));
    }
    Ok(())
}

fn optional_path(a: &Args, flag: &str) -> Result<Option<PathBuf>, UsageError> {
    match a.values.get(flag) {
        None => Ok(None),
        Some(p) if p.is_empty() => usage(format!("{flag} is empty")),
        Some(p) => Ok(Some(PathBuf::from(p))),
    }
}

fn required_path(a: &Args, flag: &str, example: &str) -> Result<PathBuf, UsageError> {
    optional_path(a, flag)?.map_or_else(
        || usage(format!("{flag} is required: agentrt {example}")),
        Ok,
    )
}

fn by(a: &Args, env: &Env) -> Result<String, UsageError> {
    let by = match a.values.get("--by") {
        Some(given) => given.clone(),
        None => env.user.clone().unwrap_or_default(),
    };
    if by.trim().is_empty() {
        return usage("--by is empty: pass --by WHO or set $USER");
    }
    Ok(by)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        Env {
            db: None,
            user: Some("joey".into()),
        }
    }

    fn p(args: &[&str]) -> Result<Parsed, UsageError> {
        let args: Vec<OsString> = args.iter().map(OsString::from).collect();
        parse(&args, &env())
    }

    fn problem(args: &[&str]) -> String {
        match p(args) {
            Err(UsageError(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn flags_before_or_after_the_run_id() {
        let a = p(&["--db", "x", "approve", "--yes", "r1", "--by", "ann"]).unwrap();
        let b = p(&["--db", "x", "approve", "r1", "--by=ann", "--yes"]).unwrap();
        assert_eq!(a, b);
        let Parsed::Run(inv) = a else { panic!() };
        assert_eq!(
            inv.command,
            Command::Decide(Decide {
                verb: Verb::Approve,
                run: "r1".into(),
                approval: None,
                by: "ann".into(),
                note: String::new(),
                yes: true,
            })
        );
    }

    #[test]
    fn paging_defaults_and_negatives() {
        let Parsed::Run(inv) = p(&["--db", "x", "runs"]).unwrap() else {
            panic!()
        };
        assert_eq!(
            inv.command,
            Command::Runs(Paging {
                limit: 100,
                offset: 0
            })
        );
        let Parsed::Run(inv) =
            p(&["--db", "x", "events", "r", "--limit", "-5", "--offset=-2"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            inv.command,
            Command::Events {
                run: "r".into(),
                paging: Paging {
                    limit: 0,
                    offset: 0
                }
            }
        );
        assert!(problem(&["--db", "x", "runs", "--limit", "ten"]).contains("--limit"));
    }

    fn verify_args(args: &[&str]) -> Verify {
        match p(args) {
            Ok(Parsed::Run(Invocation {
                command: Command::Verify(v),
                ..
            })) => v,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn verify_arguments_are_checked_before_anything_is_opened() {
        assert_eq!(
            verify_args(&["--db", "x", "verify"]),
            Verify {
                from: 0,
                to: 0,
                kept: None
            }
        );
        let v = verify_args(&[
            "--db", "x", "verify", "--from", "3", "--to=5", "--head", "4:ab",
        ]);
        assert_eq!((v.from, v.to), (3, 5));
        assert_eq!(
            v.kept,
            Some(KeptHead::Given {
                seq: 4,
                hash: "ab".into()
            })
        );
        let v = verify_args(&[
            "--db",
            "x",
            "verify",
            "--signed-head",
            "h.json",
            "--pubkey",
            "k.pub",
        ]);
        assert_eq!(
            v.kept,
            Some(KeptHead::Signed {
                file: "h.json".into(),
                pubkey: "k.pub".into()
            })
        );
        for (args, needle) in [
            (&["verify", "extra"][..], "takes no arguments"),
            (&["verify", "--from", "-1"], "--from is negative"),
            (&["verify", "--to", "-2"], "--to is negative"),
            (&["verify", "--to", "x"], "whole number"),
            (
                &["verify", "--from", "5", "--to", "3"],
                "--to 3 is before --from 5",
            ),
            (&["verify", "--head", "4"], "SEQ:HASH"),
            (&["verify", "--head", "0:ab"], "SEQ:HASH"),
            (&["verify", "--head", "4:"], "SEQ:HASH"),
            (&["verify", "--to", "3", "--head", "4:ab"], "after --to 3"),
            (
                &["verify", "--from", "5", "--head", "4:ab"],
                "before --from 5",
            ),
            (&["verify", "--signed-head", "h"], "needs --pubkey"),
            (&["verify", "--pubkey", "k"], "goes with --signed-head"),
            (
                &[
                    "verify",
                    "--head",
                    "4:ab",
                    "--signed-head",
                    "h",
                    "--pubkey",
                    "k",
                ],
                "not both",
            ),
            (&["verify", "-from", "1"], "two dashes: --from"),
            (&["head"], "needs a subcommand"),
            (&["head", "show"], "unknown subcommand"),
            (&["head", "sign"], "--key is required"),
            (&["head", "sign", "--key", "k", "x"], "takes no arguments"),
            (&["keygen"], "--out is required"),
        ] {
            let mut all = vec!["--db", "x"];
            all.extend_from_slice(args);
            let m = problem(&all);
            assert!(m.contains(needle), "{args:?}: {m:?} lacks {needle:?}");
        }
    }

    #[test]
    fn keygen_needs_no_database_and_head_sign_does() {
        assert_eq!(
            p(&["keygen", "--out", "ops/agentrt"]).unwrap(),
            Parsed::Keygen(Keygen {
                out: "ops/agentrt".into(),
                json: false
            })
        );
        assert!(problem(&["head", "sign", "--key", "k"]).contains("no database"));
        let Parsed::Run(inv) =
            p(&["--db", "x", "head", "sign", "--key", "k", "--out", "h.json"]).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            inv.command,
            Command::HeadSign {
                key: "k".into(),
                out: Some("h.json".into())
            }
        );
    }

    #[test]
    fn usage_problems() {
        assert!(problem(&[]).contains("no command"));
        assert!(problem(&["--db", "x", "resume", "r"]).contains("unknown command \"resume\""));
        assert!(problem(&["--bogus", "runs"]).contains("unknown flag --bogus"));
        assert!(problem(&["--db", "x", "runs", "--bogus"]).contains("unknown flag --bogus"));
        assert!(problem(&["-db", "x", "runs"]).contains("two dashes: --db"));
        assert!(problem(&["--db", "x", "runs", "extra"]).contains("unexpected argument"));
        assert!(problem(&["--db", "x", "show"]).contains("needs a run id"));
        assert!(
            problem(&["--db", "x", "approve", "r", "wrong-id", "--yes"])
                .contains("exactly one run id")
        );
        assert!(problem(&["runs"]).contains("no database"));
        assert!(problem(&["--db", "x", "runs", "--json"]).contains("global flag"));
        assert!(problem(&["--db", "x", "cancel", "r", "--by", ""]).contains("--by is empty"));
    }

    #[test]
    fn by_is_empty_without_user() {
        let args: Vec<OsString> = ["--db", "x", "cancel", "r"]
            .iter()
            .map(OsString::from)
            .collect();
        let err = parse(&args, &Env::default()).unwrap_err();
        assert!(err.0.contains("--by is empty"));
    }

    #[test]
    fn help_anywhere_and_env_database() {
        assert_eq!(p(&["-h"]).unwrap(), Parsed::Help);
        assert_eq!(p(&["runs", "--help"]).unwrap(), Parsed::Help);
        assert_eq!(p(&["help"]).unwrap(), Parsed::Help);
        let args: Vec<OsString> = ["runs"].iter().map(OsString::from).collect();
        let env = Env {
            db: Some("from-env".into()),
            user: None,
        };
        let Parsed::Run(inv) = parse(&args, &env).unwrap() else {
            panic!()
        };
        assert_eq!(inv.db, PathBuf::from("from-env"));
    }

    #[test]
    fn double_dash_ends_flags() {
        let Parsed::Run(inv) = p(&["--db", "x", "cancel", "--", "-odd-run"]).unwrap() else {
            panic!()
        };
        assert_eq!(inv.command.name(), "cancel");
        assert!(matches!(inv.command, Command::Cancel { ref run, .. } if run == "-odd-run"));
    }
}
