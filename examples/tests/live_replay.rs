//! The live example, offline: a whole model run recorded once replays
//! byte-identically, with the same events.

#[path = "../live/run.rs"]
#[allow(dead_code)]
mod run;

#[path = "../shared/fake_openai.rs"]
mod fake_openai;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::{
    DecideOptions, Event, Operator, RunStatus, Store, Timestamp, clock::ManualClock,
    ids::sequential_ids,
};

fn recording() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("live/recording")
}

#[derive(Clone, Default)]
struct Kept(Arc<Mutex<Vec<Event>>>);

impl agentrt::Observer for Kept {
    fn observe(&self, e: &Event) {
        self.0.lock().unwrap().push(e.clone());
    }
}

/// Runs the example to its approval, approves, resumes; returns the run's
/// events as JSON Lines.
pub async fn whole_run(db: PathBuf, source: impl Fn() -> run::Source) -> String {
    let clock = ManualClock::new(Timestamp::parse("2026-11-01T09:00:00Z").unwrap())
        .stepping(Duration::from_millis(250));
    let ids = sequential_ids("live-");
    let kept = Kept::default();
    let first = run::Options {
        db: db.clone(),
        source: source(),
        resume: None,
        run_id: Some("live-demo".into()),
    };
    let mut out = Vec::new();
    let paused = run::run(
        &first,
        Arc::new(kept.clone()),
        Some(clock.clock()),
        Some(ids.clone()),
        &mut out,
    )
    .await
    .unwrap();
    assert_eq!(
        paused.run.status,
        RunStatus::WaitingForApproval,
        "{}",
        String::from_utf8_lossy(&out)
    );
    let store = Store::open_existing(&db, false).unwrap();
    Operator::new(store.clone())
        .with_clock(clock.clock())
        .approve(
            "live-demo",
            &paused.approval.unwrap(),
            &DecideOptions {
                by: "test",
                note: "",
                shown_hash: None,
            },
        )
        .unwrap();
    let second = run::Options {
        db: db.clone(),
        source: source(),
        resume: Some("live-demo".into()),
        run_id: None,
    };
    let done = run::run(
        &second,
        Arc::new(kept.clone()),
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
    store
        .list_events("live-demo")
        .unwrap()
        .iter()
        .map(agentrt::view::event_record)
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn the_recorded_run_replays_byte_identically_with_the_same_events() {
    let dir = tempfile::tempdir().unwrap();
    let events = whole_run(dir.path().join("live.db"), || {
        run::Source::Replay(recording())
    })
    .await;
    let want = std::fs::read_to_string(recording().join("events.jsonl")).unwrap();
    assert_eq!(
        events.trim_end(),
        want.trim_end(),
        "the replayed run's events differ from the recorded run's"
    );
}

/// The replies of the fake OpenAI-compatible server the recording was made
/// against (no model is reachable from the build machine).
fn replies() -> Vec<serde_json::Value> {
    let reply = |n: u32, text: &str, tool: &str, args: &str, prompt: u32| {
        serde_json::json!({
            "id": format!("chatcmpl-live-{n}"),
            "object": "chat.completion",
            "created": 1_764_406_800 + n,
            "model": "fake-gpt",
            "choices": [{
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": text,
                    "tool_calls": [{
                        "id": format!("call_{n}"),
                        "type": "function",
                        "function": { "name": tool, "arguments": args }
                    }]
                },
                "finish_reason": "tool_calls"
            }],
            "usage": { "prompt_tokens": prompt, "completion_tokens": 24, "total_tokens": prompt + 24 }
        })
    };
    vec![
        reply(
            1,
            "I will read the README first.",
            "repo_read",
            r#"{"path":"README.md"}"#,
            180,
        ),
        reply(
            2,
            "The typo is \"smal\". I will propose the fix <as a PR> & wait.",
            "pr_open",
            r#"{"title":"Fix the typo in README.md","branch":"fix-typo"}"#,
            260,
        ),
        reply(
            3,
            "The pull request is open.",
            "finish",
            r#"{"summary":"opened pull request #7 fixing \"smal\""}"#,
            330,
        ),
    ]
}

#[tokio::test]
#[ignore = "re-records examples/live/recording against a local fake OpenAI-compatible server; run with --ignored"]
async fn record_the_live_example_against_a_local_fake_server() {
    let (base_url, server) = fake_openai::serve(replies()).await;
    let dir = recording();
    let _ = std::fs::remove_dir_all(&dir);
    let db = tempfile::tempdir().unwrap();
    let events = whole_run(db.path().join("live.db"), || run::Source::Url {
        base_url: base_url.clone(),
        model: "fake-gpt".into(),
        api_key: None,
        record: Some(dir.clone()),
    })
    .await;
    server.abort();
    std::fs::write(dir.join("events.jsonl"), events + "\n").unwrap();
}
