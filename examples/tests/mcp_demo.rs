//! The mcp example end to end, against the real npm filesystem server and
//! offline through its recording, the way the README tells a user: pin,
//! run (it pauses at the write), `agentrt approve` (the CLI binary),
//! resume, then `agentrt events`.
//!
//! The recording was made in another temporary directory than any replay
//! runs in, so a replay that passes shows that no model request depends on
//! where the sandbox is (replay keys hash the whole request).
//!
//! Needs Node and the server: `cargo xtask test` installs it, builds the
//! CLI and runs this target with the `real-servers` feature, naming the
//! server's entry point in `AGENTRT_MCP_FILESYSTEM_SERVER` (and the CLI in
//! `AGENTRT_CLI`; without it the `agentrt` binary beside this test's
//! directory is used).

#[path = "../mcp/demo.rs"]
#[allow(dead_code)]
mod demo;

#[path = "../shared/fake_openai.rs"]
mod fake_openai;

#[path = "support/agentrt_cli.rs"]
mod agentrt_cli;

use agentrt_cli::cli;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agentrt::{RunStatus, Timestamp, clock::ManualClock, ids::sequential_ids};

/// The content the recorded model writes.
const TODO: &str = "# Open tasks\n\nMonday:\n- order the cake\n\nTuesday:\n- pick up the cake\n- confirm the speakers\n";

const RUN: &str = "mcp-demo";

fn recording() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/recording")
}

fn entry_point() -> PathBuf {
    let path = std::env::var_os("AGENTRT_MCP_FILESYSTEM_SERVER").expect(
        "AGENTRT_MCP_FILESYSTEM_SERVER names the server's dist/index.js: run `cargo xtask test`",
    );
    PathBuf::from(path)
}

/// Runs `agentrt --db DB args…`; its stdout, or a panic with its stderr.
fn agentrt(db: &Path, args: &[&str]) -> String {
    let out = Command::new(cli())
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("AGENTRT_DB")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "agentrt {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What a whole run showed.
struct Whole {
    /// The example's output, both steps.
    out: String,
    /// What `agentrt approve` printed.
    approve: String,
    /// What `agentrt events` printed.
    events: String,
    /// The operator directory.
    layout: demo::Layout,
}

/// Pins, runs to the approval, approves with the CLI, resumes, lists the
/// events with the CLI.
async fn whole_run(dir: &Path, source: impl Fn() -> demo::Source) -> Whole {
    let layout = demo::Layout {
        dir: dir.join("operator"),
    };
    let mut out = Vec::new();
    demo::pin(
        &layout,
        &entry_point(),
        Timestamp::parse("2026-12-01T09:00:00Z").unwrap(),
        &mut out,
    )
    .await
    .unwrap();

    let clock = ManualClock::new(Timestamp::parse("2026-12-01T09:00:00Z").unwrap())
        .stepping(Duration::from_millis(250));
    let ids = sequential_ids("mcp-");
    let options = |resume: Option<&str>| demo::Options {
        layout: layout.clone(),
        entry: entry_point(),
        source: source(),
        resume: resume.map(str::to_owned),
        run_id: Some(RUN.into()),
    };
    let quiet = Arc::new(|_: &agentrt::Event| {});
    let paused = demo::run(
        &options(None),
        quiet.clone(),
        Some(clock.clock()),
        Some(ids.clone()),
        &mut out,
    )
    .await
    .unwrap();
    assert_eq!(
        paused.run.status,
        RunStatus::WaitingForApproval,
        "the write waits for an operator: {}",
        String::from_utf8_lossy(&out)
    );
    assert!(
        !layout.sandbox().join("todo.md").exists(),
        "nothing is written before the approval"
    );

    let approval = paused.approval.unwrap();
    let approve = agentrt(
        &layout.db(),
        &[
            "approve",
            RUN,
            "--approval",
            &approval,
            "--by",
            "test-operator",
        ],
    );

    let done = demo::run(
        &options(Some(RUN)),
        quiet,
        Some(clock.clock()),
        Some(ids),
        &mut out,
    )
    .await
    .unwrap();
    assert_eq!(
        done.run.status,
        RunStatus::Completed,
        "{}",
        String::from_utf8_lossy(&out)
    );
    let events = agentrt(&layout.db(), &["events", RUN]);
    Whole {
        out: String::from_utf8(out).unwrap(),
        approve,
        events,
        layout,
    }
}

/// The lines of `events` whose type is `kind`.
fn of_type<'a>(events: &'a str, kind: &str) -> Vec<&'a str> {
    events
        .lines()
        .filter(|l| l.split_whitespace().nth(3) == Some(kind))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_reads_pauses_at_the_write_and_writes_once_an_operator_approves() {
    let dir = tempfile::tempdir().unwrap();
    let whole = whole_run(dir.path(), || demo::Source::Replay(recording())).await;
    let layout = &whole.layout;

    // The operator's files are private: read_manifest / read_rules need it.
    #[cfg(unix)]
    for file in [layout.manifest(), layout.rules()] {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
    }
    let out = &whole.out;
    for line in [
        "fs: registered read_text_file as fs_read_text_file (read_only)",
        "fs: registered write_file as fs_write_file (local_mutation)",
        "fs: unclassified search_files: no rule",
        "run mcp-demo waits for approval",
        "run mcp-demo: COMPLETED",
    ] {
        assert!(out.contains(line), "{line:?} in:\n{out}");
    }

    // The operator was shown the path, the size and a bounded preview.
    let approve = &whole.approve;
    for shown in [
        "kind    file_write",
        "tool    fs_write_file",
        "\"todo.md\"",
        "lines (1 bytes)",
        "\"# Open tasks\\n\\nMonday:\\n- order the cake\\n…\"",
        "approved by test-operator",
    ] {
        assert!(approve.contains(shown), "{shown:?} in:\n{approve}");
    }

    assert_eq!(
        std::fs::read_to_string(layout.sandbox().join("todo.md")).unwrap(),
        TODO
    );

    // The audit trail: the reads ran, the write paused, the operator
    // decided, then the write ran.
    let events = &whole.events;
    let started = of_type(events, "step.tool_started");
    let tools: Vec<&str> = started
        .iter()
        .map(|l| {
            [
                "fs_list_directory",
                "fs_read_text_file",
                "fs_write_file",
                "finish",
            ]
            .into_iter()
            .find(|t| l.contains(&format!("\"tool\":\"{t}\"")))
            .unwrap_or("?")
        })
        .collect();
    assert_eq!(
        tools,
        [
            "fs_list_directory",
            "fs_read_text_file",
            "fs_read_text_file",
            "fs_write_file",
            "finish"
        ],
        "{events}"
    );
    let order: Vec<&str> = events
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3))
        .filter(|t| t.starts_with("approval.") || *t == "step.tool_started")
        .collect();
    let write = order
        .iter()
        .rposition(|t| *t == "step.tool_started")
        .unwrap()
        - 1;
    assert_eq!(
        &order[write - 2..write + 1],
        [
            "approval.requested",
            "approval.decided",
            "step.tool_started"
        ],
        "{events}"
    );
    let decided = of_type(events, "approval.decided");
    assert!(
        decided[0].contains(r#""status":"approved","by":"test-operator""#),
        "{events}"
    );
    let requested = of_type(events, "approval.requested");
    assert!(requested[0].contains(r#""path":"todo.md""#), "{events}");
    assert!(
        started[3].contains(r#""path":"todo.md""#) && started[3].contains("approval_id"),
        "the write ran under the approval: {events}"
    );
}

/// The replies of the fake OpenAI-compatible server the recording was made
/// against (no model is reachable from the build machine).
fn replies() -> Vec<serde_json::Value> {
    let reply = |n: u32, text: &str, tool: &str, args: serde_json::Value, prompt: u32| {
        serde_json::json!({
            "id": format!("chatcmpl-mcp-{n}"),
            "object": "chat.completion",
            "created": 1_764_579_600 + n,
            "model": "fake-gpt",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [{
                        "id": format!("call_{n}"),
                        "type": "function",
                        "function": { "name": tool, "arguments": args.to_string() }
                    }]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": prompt, "completion_tokens": 30, "total_tokens": prompt + 30 }
        })
    };
    vec![
        reply(
            1,
            "First, what is in the notes directory.",
            "fs_list_directory",
            serde_json::json!({ "path": "notes" }),
            900,
        ),
        reply(
            2,
            "Reading Monday's note.",
            "fs_read_text_file",
            serde_json::json!({ "path": "notes/monday.md" }),
            1000,
        ),
        reply(
            3,
            "Reading Tuesday's note.",
            "fs_read_text_file",
            serde_json::json!({ "path": "notes/tuesday.md" }),
            1100,
        ),
        reply(
            4,
            "The invitations were sent on Tuesday; the rest is open. Writing todo.md.",
            "fs_write_file",
            serde_json::json!({ "path": "todo.md", "content": TODO }),
            1250,
        ),
        reply(
            5,
            "todo.md is written.",
            "finish",
            serde_json::json!({ "summary": "wrote 3 open tasks to todo.md" }),
            1350,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "re-records examples/mcp/recording against a local fake OpenAI-compatible server; run with --ignored"]
async fn record_the_mcp_example_against_a_local_fake_server() {
    let (base_url, server) = fake_openai::serve(replies()).await;
    let dir = recording();
    let _ = std::fs::remove_dir_all(&dir);
    let work = tempfile::tempdir().unwrap();
    whole_run(work.path(), || demo::Source::Url {
        base_url: base_url.clone(),
        model: "fake-gpt".into(),
        api_key: None,
        record: Some(dir.clone()),
    })
    .await;
    server.abort();
}
