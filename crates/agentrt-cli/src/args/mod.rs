//! The command line, parsed and validated completely before anything is
//! opened: `agentrt [--db PATH|URL] [--json] <command> [arguments]`.
//!
//! clap parses (`cli`), our own checks give the values their meaning
//! (`validate`), and every problem becomes one line of our own
//! (`problem`); nothing here prints or exits.

mod cli;
mod problem;
mod validate;

use std::ffi::OsString;
use std::path::PathBuf;

use agentrt::Labels;

pub use crate::database::Database;
use clap::FromArgMatches;
use clap_complete::Shell;

pub use validate::check_head_seq;

/// A usage problem (exit status 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsageError {
    /// No arguments at all: the whole usage text goes to stderr.
    NoCommand,
    /// One problem, in one line.
    Problem {
        /// The command whose `--help` to point to (`approve`, `head sign`;
        /// empty for agentrt itself).
        command: String,
        /// What is wrong.
        message: String,
    },
}

impl UsageError {
    /// A problem with `command`'s arguments.
    pub fn problem(command: impl Into<String>, message: impl Into<String>) -> UsageError {
        UsageError::Problem {
            command: command.into(),
            message: message.into(),
        }
    }
}

/// The environment the defaults come from.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `AGENTRT_DB`.
    pub db: Option<OsString>,
    /// Who is deciding when `--by` is not given: `$USER` when set, else
    /// `$LOGNAME` when set, else the login name of the account the process
    /// runs as.
    pub user: Option<String>,
}

impl Env {
    /// The process environment.
    pub fn from_process() -> Env {
        let named = |var: &str| std::env::var_os(var).map(|v| v.to_string_lossy().into_owned());
        Env {
            db: std::env::var_os("AGENTRT_DB"),
            user: named("USER")
                .or_else(|| named("LOGNAME"))
                .or_else(crate::account::login_name),
        }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Print this text (a help text or the version) to stdout.
    Print(String),
    /// Run a command on a database.
    Run(Invocation),
    /// `keygen`: needs no database.
    Keygen(Keygen),
    /// `completions SHELL`: needs no database.
    Completions(Shell),
    /// `migrate --from PATH --to URL`: names its own two databases.
    Migrate(Migrate),
    /// `policy check|test`: needs no database.
    Policy(PolicyRun),
}

/// The tools a policy is checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolsFile {
    /// `--tools FILE`: tool specs as agentrt records them.
    Specs(PathBuf),
    /// `--manifest FILE`: a pinned MCP manifest's tools.
    Manifest(PathBuf),
}

/// `policy check FILE --tools FILE` and `policy test … --cases FILE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRun {
    /// The Cedar policy file.
    pub file: PathBuf,
    /// Where the tools come from.
    pub tools: ToolsFile,
    /// The cases file (`policy test`).
    pub cases: Option<PathBuf>,
    /// JSON output.
    pub json: bool,
}

/// `migrate --from PATH --to URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrate {
    /// The SQLite database copied.
    pub from: PathBuf,
    /// The PostgreSQL database it is copied into.
    pub to: Database,
    /// JSON output.
    pub json: bool,
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
    /// The database.
    pub db: Database,
    /// JSON output.
    pub json: bool,
    /// The command.
    pub command: Command,
}

/// Where `events --follow` starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FollowStart {
    /// After this seq, remembered in memory only.
    After(u64),
    /// Where the cursor file says (and it is kept there).
    Cursor(PathBuf),
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
    /// `--edit`: where the edited arguments are read from (approve only).
    pub edit: Option<EditSource>,
}

/// Where `approve --edit` reads the edited arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditSource {
    /// `--edit -`.
    Stdin,
    /// `--edit FILE`.
    File(PathBuf),
}

/// A command and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `runs`.
    Runs {
        /// Paging of the runs.
        paging: Paging,
        /// `--label`: only runs that carry every one (none: every run).
        labels: Labels,
    },
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
    /// `events --follow [run]`.
    Follow {
        /// Only this run's events.
        run: Option<String>,
        /// Where to start.
        start: FollowStart,
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
    /// `policy recheck FILE`.
    PolicyRecheck {
        /// The Cedar policy file.
        file: PathBuf,
        /// Only this run.
        run: Option<String>,
        /// The newest runs (0: all).
        limit: u64,
        /// The tools file, for the current tools.
        tools: Option<PathBuf>,
    },
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
            Command::Runs { .. } => "runs",
            Command::Show { .. } => "show",
            Command::Events { .. } | Command::Follow { .. } => "events",
            Command::Decide(d) => d.verb.name(),
            Command::Cancel { .. } => "cancel",
            Command::Verify(_) => "verify",
            Command::HeadSign { .. } => "head sign",
            Command::PolicyRecheck { .. } => "policy recheck",
        }
    }
}

/// Parses the arguments after the program name.
pub fn parse(args: &[OsString], env: &Env) -> Result<Parsed, UsageError> {
    let mut command = cli::command();
    let argv = std::iter::once(OsString::from("agentrt")).chain(args.iter().cloned());
    let matches = match command.try_get_matches_from_mut(argv) {
        Ok(matches) => matches,
        Err(e) => return problem::from_clap(&e, &command, args),
    };
    match cli::Cli::from_arg_matches(&matches) {
        Ok(parsed) => validate::cli(parsed, env),
        Err(e) => problem::from_clap(&e, &command, args),
    }
}

/// The completion script for `shell`. Generated into memory first: the
/// generator cannot report a failed write, so stdout's errors are left to
/// the caller.
pub fn completions(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli::command(), "agentrt", &mut script);
    script
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
            Err(UsageError::Problem { message, .. }) => message,
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
                edit: None,
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
            Command::Runs {
                paging: Paging {
                    limit: 100,
                    offset: 0
                },
                labels: Labels::new(),
            }
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
        assert_eq!(p(&[]), Err(UsageError::NoCommand));
        assert!(problem(&["--json"]).contains("no command"));
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
        assert!(
            matches!(err, UsageError::Problem { message, .. } if message.contains("--by is empty"))
        );
    }

    #[test]
    fn help_anywhere_and_env_database() {
        let printed = |args: &[&str]| match p(args) {
            Ok(Parsed::Print(text)) => text,
            other => panic!("{args:?}: {other:?}"),
        };
        for args in [&["-h"][..], &["--help"], &["help"]] {
            assert!(printed(args).contains("Usage: agentrt [--db PATH|URL] [--json] <command>"));
        }
        for args in [&["runs", "--help"][..], &["help", "runs"], &["runs", "-h"]] {
            let text = printed(args);
            assert!(text.contains("runs [OPTIONS]"), "{args:?}: {text}");
            assert!(text.contains("--limit <N>"), "{args:?}: {text}");
        }
        assert!(printed(&["--version"]).starts_with("agentrt "));
        let args: Vec<OsString> = ["runs"].iter().map(OsString::from).collect();
        let env = Env {
            db: Some("from-env".into()),
            user: None,
        };
        let Parsed::Run(inv) = parse(&args, &env).unwrap() else {
            panic!()
        };
        assert_eq!(inv.db, Database::File(PathBuf::from("from-env")));
    }

    #[test]
    fn labels_repeat_and_are_checked_before_anything_is_opened() {
        let Parsed::Run(inv) = p(&[
            "--db",
            "x",
            "runs",
            "--label",
            "env=prod",
            "--limit",
            "5",
            "--label=team=infra",
        ])
        .unwrap() else {
            panic!()
        };
        assert_eq!(
            inv.command,
            Command::Runs {
                paging: Paging {
                    limit: 5,
                    offset: 0
                },
                labels: Labels::parse(["team=infra", "env=prod"]).unwrap(),
            }
        );
        let seventeen: Vec<String> = (0..17).map(|i| format!("--label=k{i}=v")).collect();
        let mut too_many = vec!["runs"];
        too_many.extend(seventeen.iter().map(String::as_str));
        for (args, needle) in [
            (
                &["runs", "--label", "env"][..],
                r#"invalid value "env" for --label: "env" has no '='; write key=value"#,
            ),
            (
                &["runs", "--label", "Env=prod"],
                r#"invalid value "Env=prod" for --label: the key "Env" starts with 'E'"#,
            ),
            (&["runs", "--label", "=x"], "the key is empty"),
            (&["runs", "--label", "k=a\u{7}"], "control character U+0007"),
            (
                &["runs", "--label", "a=1", "--label", "a=2"],
                r#"--label: the key "a" is given twice"#,
            ),
            (&["runs", "--label"], "--label needs a value"),
            (&too_many, "a run carries at most 16"),
        ] {
            let mut all = vec!["--db", "x"];
            all.extend_from_slice(args);
            let m = problem(&all);
            assert!(m.contains(needle), "{args:?}: {m:?} lacks {needle:?}");
        }
    }

    #[test]
    fn the_last_of_a_repeated_flag_wins() {
        let Parsed::Run(inv) = p(&[
            "--db", "x", "cancel", "r", "--by", "ann", "--by", "bob", "--note", "-n",
        ])
        .unwrap() else {
            panic!()
        };
        assert!(
            matches!(inv.command, Command::Cancel { ref by, ref note, .. } if by == "bob" && note == "-n")
        );
    }

    #[test]
    fn the_pointer_names_the_command_the_problem_is_in() {
        let command = |args: &[&str]| match p(args) {
            Err(UsageError::Problem { command, .. }) => command,
            other => panic!("{args:?}: {other:?}"),
        };
        assert_eq!(command(&["--bogus", "runs"]), "");
        assert_eq!(command(&["--db", "x", "--json=1", "runs"]), "");
        assert_eq!(command(&["help", "bogus"]), "");
        assert_eq!(command(&["--db", "x", "runs", "--limit", "x"]), "runs");
        assert_eq!(
            command(&["--db", "x", "head", "sign", "--bogus"]),
            "head sign"
        );
        assert_eq!(command(&["head", "help", "bogus"]), "head");
        assert_eq!(
            command(&["--db", "x", "approve", "r1", "--by", ""]),
            "approve"
        );
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
