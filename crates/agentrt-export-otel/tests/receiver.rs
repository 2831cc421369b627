//! `agentrt-export-otel` against a real OTLP receiver on 127.0.0.1 (the
//! OtelTap package, pinned, in a venv `cargo xtask test` makes; its
//! python in `AGENTRT_OTELTAP_PYTHON`): the spans of the approver demo's
//! run arrive with their names, parents, attributes and status; with the
//! receiver stopped and started again in the middle every span arrives,
//! none twice across a clean stop of the exporter.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

mod support {
    pub use agentrt::{
        DecideOptions, Decision, DefaultPolicy, Driver, GateConfig, Limits, Operator, RunStatus,
        ScriptedAgent, SideEffect, Store, Tool, ToolResult, ToolSpec, tool_fn,
    };
}
use support::*;

/// A receiver child and the spans it prints.
struct Tap {
    child: Child,
    port: u16,
    spans: Receiver<Value>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Tap {
    fn start(port: u16) -> Tap {
        let python = std::env::var("AGENTRT_OTELTAP_PYTHON").expect(
            "AGENTRT_OTELTAP_PYTHON: the venv python with oteltap (cargo xtask test sets it)",
        );
        let mut child = Command::new(python)
            .args(["-m", "oteltap", "--port", &port.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("oteltap starts");
        let stdout = child.stdout.take().unwrap();
        let (send, spans) = channel();
        let (ready_send, ready) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if line.starts_with("Listening") {
                    let _ = ready_send.send(());
                    continue;
                }
                if let Ok(span) = serde_json::from_str::<Value>(&line)
                    && span.get("spanId").is_some()
                    && send.send(span).is_err()
                {
                    return;
                }
            }
        });
        ready
            .recv_timeout(Duration::from_secs(30))
            .expect("oteltap listens");
        Tap { child, port, spans }
    }

    /// The next `n` spans (a generous guard, not a timing check).
    fn take(&self, n: usize) -> Vec<Value> {
        (0..n)
            .map(|_| {
                self.spans
                    .recv_timeout(Duration::from_secs(30))
                    .expect("a span arrived")
            })
            .collect()
    }

    fn nothing_more(&self) -> bool {
        self.spans.recv_timeout(Duration::from_millis(500)).is_err()
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn exporter(db: &Path, cursor: &Path, port: u16, once: bool) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentrt-export-otel"));
    command
        .arg("--db")
        .arg(db)
        .arg("--cursor")
        .arg(cursor)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{port}"),
        )
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if once {
        command.arg("--once");
    }
    command
}

fn push() -> std::sync::Arc<dyn Tool> {
    std::sync::Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ))
}

/// `work` on a runtime of its own.
fn on_runtime<T>(work: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(work)
}

/// Run `id` until it waits for an operator's approval of a push.
fn paused_run(db: &Path, id: &str) {
    on_runtime(async {
        let store = Store::open(db).unwrap();
        let config = GateConfig::new(store.clone(), DefaultPolicy, vec![push()]);
        let agent = ScriptedAgent::new(vec![Decision::tool_call("push", r#"{"ref":"main"}"#)]);
        let paused = Driver::new(config, agent)
            .unwrap()
            .start(Some(id), "ship it", Limits::default())
            .await
            .unwrap();
        assert_eq!(paused.status, RunStatus::WaitingForApproval);
    });
}

/// The paused run `id` approved by an operator, resumed and completed.
fn finish_run(db: &Path, id: &str) {
    on_runtime(async {
        let store = Store::open(db).unwrap();
        let approval = store.list_approvals(id).unwrap().remove(0);
        let options = DecideOptions {
            by: "alice",
            note: "",
            shown_hash: Some(&approval.hash),
        };
        Operator::new(store.clone())
            .approve(id, &approval.id, &options)
            .unwrap();
        let config = GateConfig::new(store.clone(), DefaultPolicy, vec![push()]);
        let agent = ScriptedAgent::new(vec![Decision::complete("true")]);
        let done = Driver::new(config, agent)
            .unwrap()
            .resume(id)
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Completed);
    });
}

/// Run `id`: a push an operator approves, then completion. Five spans:
/// the run, two steps, the approval wait, the push.
fn approved_run(db: &Path, id: &str) {
    paused_run(db, id);
    finish_run(db, id);
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    span["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"]["stringValue"]
        .as_str()
}

#[test]
fn the_demo_runs_spans_arrive_with_names_parents_attributes_and_status() {
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = dir.path().join("runs.db");
    approved_run(&db, "r1");
    let tap = Tap::start(free_port());
    let status = exporter(&db, &dir.path().join("cursor"), tap.port, true)
        .status()
        .unwrap();
    assert!(status.success());
    let spans = tap.take(5);
    assert!(tap.nothing_more());
    tap.stop();
    let by_name = |name: &str| {
        spans
            .iter()
            .filter(|s| s["name"] == name)
            .collect::<Vec<_>>()
    };
    let run = by_name("agentrt.run");
    let steps = by_name("agentrt.step");
    let approvals = by_name("agentrt.approval");
    let tools = by_name("agentrt.tool");
    assert_eq!(
        (run.len(), steps.len(), approvals.len()),
        (1, 2, 1),
        "{spans:#?}"
    );
    let run = run[0];
    let trace = agentrt_export_otel::trace_id("r1").to_string();
    assert!(spans.iter().all(|s| s["traceId"] == trace.as_str()));
    assert_eq!(run["parentSpanId"], "");
    assert_eq!(run["status"]["code"], 1, "Ok for a completed run");
    assert_eq!(attribute(run, "agentrt.run.status"), Some("COMPLETED"));
    assert_eq!(
        attribute(run, "gen_ai.operation.name"),
        Some("invoke_agent")
    );
    for step in &steps {
        assert_eq!(step["parentSpanId"], run["spanId"]);
    }
    let pushed = steps
        .iter()
        .find(|s| attribute(s, "gen_ai.tool.name") == Some("push"))
        .unwrap();
    assert_eq!(approvals[0]["parentSpanId"], pushed["spanId"]);
    assert_eq!(tools[0]["parentSpanId"], pushed["spanId"]);
    assert_eq!(
        attribute(tools[0], "gen_ai.operation.name"),
        Some("execute_tool")
    );
    assert_eq!(
        attribute(approvals[0], "agentrt.approval.status"),
        Some("approved")
    );
    assert!(
        attribute(pushed, "agentrt.decision.args").is_none(),
        "no tool content by default"
    );
}

#[test]
fn with_the_receiver_down_and_back_every_span_arrives_once_across_a_clean_stop() {
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = dir.path().join("runs.db");
    drop(Store::open(&db).unwrap());
    let cursor = dir.path().join("cursor");
    let port = free_port();

    // The receiver is down: the exporter keeps the events and retries.
    let mut following = exporter(&db, &cursor, port, false)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = following.stderr.take().unwrap();
    let (said, failures) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = said.send(line);
        }
    });
    approved_run(&db, "r1");
    // An export was tried, and failed, while the receiver was down (the
    // exporter's own line; the OTLP crate's warnings may come first).
    let failed = loop {
        let line = failures
            .recv_timeout(Duration::from_secs(30))
            .expect("the exporter reports the failed export");
        if line.contains("export of") {
            break line;
        }
    };
    assert!(failed.contains("failed"), "{failed}");
    // The cursor may pass events that finished no span (open spans are
    // rebuilt from the database after a restart), never the ones whose
    // spans are not exported yet: it stays short of the run's end.
    let last: i64 = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap();
    let saved: i64 = std::fs::read_to_string(&cursor)
        .map(|t| t.trim().parse().unwrap())
        .unwrap_or(0);
    assert!(
        saved < last,
        "nothing exported, so the cursor is short of {last}: {saved}"
    );
    let tap = Tap::start(port);
    let mut seen = tap.take(5);
    // Stopped again; another run commits; back again.
    tap.stop();
    approved_run(&db, "r2");
    let tap = Tap::start(port);
    seen.extend(tap.take(5));
    // A clean stop, a restart on the same cursor, a third run.
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(following.id() as i32, libc::SIGTERM) };
    assert!(following.wait().unwrap().success());
    approved_run(&db, "r3");
    let mut restarted = exporter(&db, &cursor, port, false).spawn().unwrap();
    seen.extend(tap.take(5));
    assert!(tap.nothing_more(), "nothing twice");
    unsafe { libc::kill(restarted.id() as i32, libc::SIGTERM) };
    assert!(restarted.wait().unwrap().success());
    tap.stop();

    let mut count: HashMap<String, usize> = HashMap::new();
    for span in &seen {
        *count
            .entry(span["spanId"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(count.len(), 15, "{seen:#?}");
    assert!(
        count.values().all(|n| *n == 1),
        "every span once: {count:?}"
    );
    let runs: Vec<&str> = seen
        .iter()
        .filter(|s| s["name"] == "agentrt.run")
        .filter_map(|s| attribute(s, "agentrt.run.id"))
        .collect();
    assert_eq!(runs.len(), 3);
}

/// An exporter stopped while a run is open, restarted after the run
/// ended, still sends the run's spans whole: the spans the run began
/// before the cursor are rebuilt from the database.
#[test]
fn a_run_open_across_a_restart_still_arrives_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = dir.path().join("runs.db");
    drop(Store::open(&db).unwrap());
    let cursor = dir.path().join("cursor");
    let tap = Tap::start(free_port());
    paused_run(&db, "r1");
    assert!(
        exporter(&db, &cursor, tap.port, true)
            .status()
            .unwrap()
            .success()
    );
    assert!(tap.nothing_more(), "nothing finished yet");
    let saved = std::fs::read_to_string(&cursor).unwrap();
    assert_ne!(saved, "0\n", "the cursor passed the run's start");
    finish_run(&db, "r1");
    assert!(
        exporter(&db, &cursor, tap.port, true)
            .status()
            .unwrap()
            .success()
    );
    let spans = tap.take(5);
    assert!(tap.nothing_more());
    tap.stop();
    let run = spans
        .iter()
        .find(|s| s["name"] == "agentrt.run")
        .expect("the run span, begun before the restart");
    assert_eq!(attribute(run, "agentrt.run.goal"), Some("ship it"));
    assert!(
        spans
            .iter()
            .filter(|s| s["name"] == "agentrt.step")
            .all(|s| s["parentSpanId"] == run["spanId"])
    );
}
