//! What clap cannot say: the meaning of the values it parsed. Defaults
//! from the environment, empty values, negative seqs, flags that go in
//! pairs, and a database for every command that opens one.

use std::ffi::OsString;
use std::path::PathBuf;

use agentrt::{Label, Labels};

use super::cli::{
    ApproveArgs, CancelArgs, Cli, CliCommand, DecideArgs, EventsArgs, HeadCommand, PolicyCheckArgs,
    PolicyCommand, VerifyArgs,
};
use super::{
    Command, Database, Decide, EditSource, Env, FollowStart, Invocation, KeptHead, Keygen, Migrate,
    Paging, Parsed, PolicyRun, ToolsFile, UsageError, Verb, Verify,
};

/// A problem with the named command's arguments.
type Checked<T> = Result<T, String>;

/// Turns what clap parsed into a validated invocation.
pub fn cli(cli: Cli, env: &Env) -> Result<Parsed, UsageError> {
    let Cli { db, json, command } = cli;
    let name = command_name(&command);
    let problem = |message: String| UsageError::problem(name, message);
    let command = match command {
        // These two need no database.
        CliCommand::Keygen(a) => {
            let out = path("--out", a.out).map_err(problem)?;
            return Ok(Parsed::Keygen(Keygen { out, json }));
        }
        CliCommand::Completions { shell } => return Ok(Parsed::Completions(shell)),
        CliCommand::Policy {
            command: PolicyCommand::Recheck(a),
        } => Command::PolicyRecheck {
            file: path("FILE", a.file).map_err(problem)?,
            run: a.run.map(run_id).transpose().map_err(problem)?,
            limit: a.limit.unwrap_or(50),
            tools: a
                .tools
                .map(|t| path("--tools", t))
                .transpose()
                .map_err(problem)?,
        },
        CliCommand::Policy {
            command: PolicyCommand::Check(a),
        } => return policy_run(a, None, json).map_err(problem),
        CliCommand::Policy {
            command: PolicyCommand::Test(a),
        } => return policy_run(a.policy, Some(a.cases), json).map_err(problem),
        CliCommand::Migrate(a) => {
            let from = path("--from", a.from).map_err(problem)?;
            let to = Database::parse(a.to.into());
            if !matches!(to, Database::Postgres(_)) {
                return Err(problem(
                    "--to must be a PostgreSQL URL: postgres://user@host/db".to_owned(),
                ));
            }
            return Ok(Parsed::Migrate(Migrate { from, to, json }));
        }
        CliCommand::Runs(a) => Command::Runs {
            paging: paging(a.limit, a.offset, 100),
            labels: labels(a.labels).map_err(problem)?,
        },
        CliCommand::Show(a) => Command::Show {
            run: run_id(a.run).map_err(problem)?,
            paging: paging(a.limit, a.offset, 500),
        },
        CliCommand::Events(a) => events(a).map_err(problem)?,
        CliCommand::Approve(a) => Command::Decide(approve(a, env).map_err(problem)?),
        CliCommand::Reject(a) => Command::Decide(decide(Verb::Reject, a, env).map_err(problem)?),
        CliCommand::Cancel(a) => cancel(a, env).map_err(problem)?,
        CliCommand::Verify(a) => Command::Verify(verify(a).map_err(problem)?),
        CliCommand::Head {
            command: HeadCommand::Sign(a),
        } => Command::HeadSign {
            key: path("--key", a.key).map_err(problem)?,
            out: a
                .out
                .map(|out| path("--out", out))
                .transpose()
                .map_err(problem)?,
        },
    };
    let db = db
        .filter(|d| !d.is_empty())
        .or_else(|| env.db.clone().filter(|d| !d.is_empty()));
    let Some(db) = db else {
        return Err(problem(
            "no database: pass --db PATH or set AGENTRT_DB".to_owned(),
        ));
    };
    Ok(Parsed::Run(Invocation {
        db: Database::parse(db),
        json,
        command,
    }))
}

/// The name `--help` is asked of, for a problem's pointer.
fn command_name(command: &CliCommand) -> &'static str {
    match command {
        CliCommand::Runs(_) => "runs",
        CliCommand::Show(_) => "show",
        CliCommand::Events(_) => "events",
        CliCommand::Approve(_) => "approve",
        CliCommand::Reject(_) => "reject",
        CliCommand::Cancel(_) => "cancel",
        CliCommand::Verify(_) => "verify",
        CliCommand::Head { .. } => "head sign",
        CliCommand::Keygen(_) => "keygen",
        CliCommand::Completions { .. } => "completions",
        CliCommand::Migrate(_) => "migrate",
        CliCommand::Policy {
            command: PolicyCommand::Check(_),
        } => "policy check",
        CliCommand::Policy {
            command: PolicyCommand::Test(_),
        } => "policy test",
        CliCommand::Policy {
            command: PolicyCommand::Recheck(_),
        } => "policy recheck",
    }
}

fn cancel(a: CancelArgs, env: &Env) -> Checked<Command> {
    Ok(Command::Cancel {
        run: run_id(a.run)?,
        by: by(a.by, env)?,
        note: a.note.unwrap_or_default(),
    })
}

fn paging(limit: Option<u64>, offset: Option<u64>, default_limit: u64) -> Paging {
    Paging {
        limit: limit.unwrap_or(default_limit),
        offset: offset.unwrap_or(0),
    }
}

/// The `--label` flags as one set: each key once, at most 16.
fn labels(given: Vec<Label>) -> Checked<Labels> {
    let mut labels = Labels::new();
    for label in given {
        labels
            .insert(label)
            .map_err(|e| format!("--label: {}", e.detail))?;
    }
    Ok(labels)
}

fn run_id(run: String) -> Checked<String> {
    if run.is_empty() {
        return Err("the run id is empty".to_owned());
    }
    Ok(run)
}

fn events(a: EventsArgs) -> Checked<Command> {
    if !a.follow {
        if a.from.is_some() || a.cursor.is_some() {
            return Err("--from and --cursor go with --follow".to_owned());
        }
        let run = a
            .run
            .ok_or("events needs a run id (or --follow, for every run's events)")?;
        return Ok(Command::Events {
            run: run_id(run)?,
            paging: paging(a.limit, a.offset, 500),
        });
    }
    if a.limit.is_some() || a.offset.is_some() {
        return Err(
            "--follow prints every event as it commits: --limit and --offset do not apply"
                .to_owned(),
        );
    }
    let start = match (a.from, a.cursor) {
        (Some(_), Some(_)) => {
            return Err("--from and --cursor both say where to start: give one".to_owned());
        }
        (_, Some(cursor)) => FollowStart::Cursor(path("--cursor", cursor)?),
        (from, None) => FollowStart::After(from.unwrap_or(0)),
    };
    Ok(Command::Follow {
        run: a.run.map(run_id).transpose()?,
        start,
    })
}

fn path(flag: &str, value: OsString) -> Checked<PathBuf> {
    if value.is_empty() {
        return Err(format!("{flag} is empty"));
    }
    Ok(PathBuf::from(value))
}

/// `policy check` (no cases) or `policy test`: needs no database.
fn policy_run(a: PolicyCheckArgs, cases: Option<OsString>, json: bool) -> Checked<Parsed> {
    let tools = match (a.tools, a.manifest) {
        (Some(t), None) => ToolsFile::Specs(path("--tools", t)?),
        (None, Some(m)) => ToolsFile::Manifest(path("--manifest", m)?),
        _ => {
            return Err(
                "give the tools with --tools FILE or --manifest FILE (one of them)".to_owned(),
            );
        }
    };
    Ok(Parsed::Policy(PolicyRun {
        file: path("FILE", a.file)?,
        tools,
        cases: cases.map(|c| path("--cases", c)).transpose()?,
        json,
    }))
}

/// `approve`: a decision, and the file or stdin an edit is read from.
fn approve(a: ApproveArgs, env: &Env) -> Checked<Decide> {
    let edit = match a.edit {
        None => None,
        Some(p) if p == "-" => Some(EditSource::Stdin),
        Some(p) => Some(EditSource::File(path("--edit", p)?)),
    };
    Ok(Decide {
        edit,
        ..decide(Verb::Approve, a.decide, env)?
    })
}

fn decide(verb: Verb, a: DecideArgs, env: &Env) -> Checked<Decide> {
    if a.approval.as_deref() == Some("") {
        return Err("--approval is empty: name an approval id".to_owned());
    }
    Ok(Decide {
        verb,
        run: run_id(a.run)?,
        approval: a.approval,
        by: by(a.by, env)?,
        note: a.note.unwrap_or_default(),
        yes: a.yes,
        edit: None,
    })
}

/// `--by`, else the environment's user; either way not blank.
fn by(given: Option<String>, env: &Env) -> Checked<String> {
    let (by, from) = match given {
        Some(given) => (given, ""),
        None => (
            env.user.clone().unwrap_or_default(),
            "; no name came from $USER, $LOGNAME or the account",
        ),
    };
    if by.trim().is_empty() {
        return Err(format!("--by is empty: pass --by WHO{from}"));
    }
    Ok(by)
}

/// `--from` or `--to`: 0 when absent, never negative.
fn seq(flag: &str, value: Option<i64>) -> Checked<i64> {
    match value {
        Some(n) if n < 0 => Err(format!("{flag} is negative ({n}): seqs start at 1")),
        other => Ok(other.unwrap_or(0)),
    }
}

fn verify(a: VerifyArgs) -> Checked<Verify> {
    let from = seq("--from", a.from)?;
    let to = seq("--to", a.to)?;
    if from > 0 && to > 0 && to < from {
        return Err(format!("--to {to} is before --from {from}"));
    }
    let signed = match (a.signed_head, a.pubkey) {
        (Some(file), Some(pubkey)) if !file.is_empty() && !pubkey.is_empty() => {
            Some(KeptHead::Signed {
                file: PathBuf::from(file),
                pubkey: PathBuf::from(pubkey),
            })
        }
        (None, None) => None,
        (Some(_), _) => {
            return Err(
                "--signed-head needs --pubkey FILE: the public key it must be signed with"
                    .to_owned(),
            );
        }
        (None, Some(_)) => return Err("--pubkey goes with --signed-head FILE".to_owned()),
    };
    let given = match a.head {
        None => None,
        Some(text) => {
            let parsed = text.split_once(':').and_then(|(seq, hash)| {
                let seq = seq.trim().parse::<i64>().ok().filter(|n| *n >= 1)?;
                (!hash.is_empty()).then(|| (seq, hash.to_owned()))
            });
            let Some((seq, hash)) = parsed else {
                return Err(format!(
                    "invalid value {text:?} for --head: want SEQ:HASH with SEQ at least 1"
                ));
            };
            check_head_seq(seq, from, to)?;
            Some(KeptHead::Given { seq, hash })
        }
    };
    let kept = match (given, signed) {
        (Some(_), Some(_)) => return Err("give --head or --signed-head, not both".to_owned()),
        (given, signed) => given.or(signed),
    };
    Ok(Verify { from, to, kept })
}

/// A kept head's seq must lie within `--from`..`--to` (when given); the
/// problem otherwise.
pub fn check_head_seq(seq: i64, from: i64, to: i64) -> Result<(), String> {
    if to > 0 && seq > to {
        return Err(format!("the head's seq {seq} is after --to {to}"));
    }
    if from > 0 && seq < from {
        return Err(format!("the head's seq {seq} is before --from {from}"));
    }
    Ok(())
}
