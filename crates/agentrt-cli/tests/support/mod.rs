//! Fixtures: databases made with the core library, and the built binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use agentrt::*;

/// What one run of the binary left.
#[derive(Debug)]
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn first_err_line(&self) -> &str {
        self.stderr.lines().next().unwrap_or_default()
    }
    /// How many times the usage text appears on stderr.
    pub fn usage_count(&self) -> usize {
        self.stderr
            .matches("Usage: agentrt [--db PATH|URL]")
            .count()
    }
    /// A usage error's report: the problem line, a blank line and a
    /// pointer to `--help`, without any usage text.
    pub fn is_one_line_and_a_pointer_to_help(&self) -> bool {
        let lines: Vec<&str> = self.stderr.lines().collect();
        matches!(
            lines.as_slice(),
            [problem, "", pointer]
                if problem.starts_with("error: ")
                    && pointer.starts_with("For more information, try 'agentrt ")
                    && pointer.ends_with(" --help'.")
        ) && !self.stderr.contains("Usage:")
    }
}

/// The binary with a clean environment: no AGENTRT_DB, USER=tester, UTC.
pub fn cli() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_agentrt"));
    c.env_remove("AGENTRT_DB")
        .env("USER", "tester")
        .env("TZ", "UTC")
        .stdin(Stdio::null());
    c
}

pub fn run_cmd(mut c: Command) -> Out {
    let o = c.output().expect("the binary runs");
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs `agentrt --db <db> <args…>`.
pub fn agentrt(db: &Path, args: &[&str]) -> Out {
    let mut c = cli();
    c.arg("--db").arg(db).args(args);
    run_cmd(c)
}

/// Runs `agentrt <args…>` without --db.
pub fn agentrt_raw(args: &[&str]) -> Out {
    let mut c = cli();
    c.args(args);
    run_cmd(c)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    let read: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("read it")) },
    ));
    let push: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ));
    vec![read, push]
}

/// A new database file in `dir` (created and migrated by the core).
pub fn new_db(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    drop(Store::open(&path).expect("create the database"));
    path
}

/// Starts run `id` with `decisions` and drives it until it pauses or ends.
pub fn drive(db: &Path, id: &str, goal: &str, decisions: Vec<Decision>) -> Run {
    drive_labelled(db, id, goal, &[], decisions)
}

/// [`drive`] for a run begun with `labels` (`key=value` texts).
pub fn drive_labelled(
    db: &Path,
    id: &str,
    goal: &str,
    labels: &[&str],
    decisions: Vec<Decision>,
) -> Run {
    let store = Store::open(db).expect("open");
    let agent = ScriptedAgent::new(decisions);
    let mut driver =
        Driver::new(GateConfig::new(store, DefaultPolicy, tools()), agent).expect("driver");
    let labels = Labels::parse(labels).expect("labels");
    runtime()
        .block_on(driver.start_labelled(Some(id), goal, Limits::default(), labels))
        .expect("run")
}

/// A completed run begun with `labels`: one read, then complete.
pub fn labelled_run(db: &Path, id: &str, labels: &[&str]) -> Run {
    drive_labelled(
        db,
        id,
        "labelled",
        labels,
        vec![
            Decision::tool_call("fs_read", r#"{"path":"README.md"}"#),
            Decision::complete(r#"{"done":true}"#),
        ],
    )
}

/// A completed run: one read, then complete.
pub fn completed_run(db: &Path, id: &str, goal: &str) -> Run {
    drive(
        db,
        id,
        goal,
        vec![
            Decision::tool_call("fs_read", r#"{"path":"README.md"}"#),
            Decision::complete(r#"{"done":true}"#),
        ],
    )
}

/// A run waiting for approval of `push` with `args`.
pub fn waiting_run(db: &Path, id: &str, goal: &str, args: &str) -> Run {
    let run = drive(db, id, goal, vec![Decision::tool_call("push", args)]);
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    run
}

/// The run's approvals as stored.
pub fn approvals(db: &Path, run: &str) -> Vec<Approval> {
    Store::open(db)
        .expect("open")
        .list_approvals(run)
        .expect("approvals")
}

pub fn sql(db: &Path, statement: &str) {
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    conn.execute_batch(statement).expect("statement");
}

pub fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `YYYY-MM-DD HH:MM:SS ±hhmm`.
pub fn is_stamp(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 25
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b' '
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b' '
        && (b[20] == b'+' || b[20] == b'-')
        && s.chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10, 13, 16, 19, 20].contains(&i) || c.is_ascii_digit())
}

/// A satellite's table as the approver declares one: the CLI knows
/// nothing of it, and `verify` checks its rows from the file's registry.
pub const NONCES: agentrt::store::Extension = agentrt::store::Extension {
    name: "approver",
    migrations: &[(
        1,
        "CREATE TABLE approver_nonces (nonce TEXT NOT NULL PRIMARY KEY,
             seen_at TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)",
    )],
    tables: &[agentrt::store::ExtensionTable {
        name: "approver_nonces",
        key_column: "nonce",
        columns: &["nonce", "seen_at"],
    }],
};
