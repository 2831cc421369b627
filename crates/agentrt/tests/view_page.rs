//! Bounded page reads (design §6, control 11) and the view over them:
//! summaries, detail pages, and which approval an operator means (design §12).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrt::model::StepStatus;
use agentrt::store::{MAX_PAGE_TEXT, PAGE_READ_ROWS};
use agentrt::view;
use agentrt::*;

fn tools() -> Vec<Arc<dyn Tool>> {
    let read: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("read it")) },
    ));
    let push: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "Push", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw("{}")) },
    ));
    vec![read, push]
}

async fn drive(store: &Store, id: &str, goal: &str, decisions: Vec<Decision>) -> Run {
    let agent = ScriptedAgent::new(decisions);
    let mut driver = Driver::new(
        GateConfig::new(store.clone(), DefaultPolicy, tools()),
        agent,
    )
    .expect("driver");
    driver
        .start(Some(id), goal, Limits::default())
        .await
        .expect("run")
}

async fn completed(store: &Store, id: &str, goal: &str) -> Run {
    drive(
        store,
        id,
        goal,
        vec![
            Decision::tool_call("fs_read", r#"{"path":"a"}"#),
            Decision::complete("{}"),
        ],
    )
    .await
}

async fn waiting(store: &Store, id: &str) -> Run {
    let run = drive(
        store,
        id,
        "push",
        vec![Decision::tool_call("push", r#"{"n":1}"#)],
    )
    .await;
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    run
}

fn db(dir: &tempfile::TempDir) -> (PathBuf, Store) {
    let path = dir.path().join("agentrt.db");
    let store = Store::open(&path).expect("open");
    (path, store)
}

fn sql(path: &Path, statement: &str) {
    rusqlite::Connection::open(path)
        .expect("sqlite")
        .execute_batch(statement)
        .expect("statement");
}

/// Adds `n` more pending approvals to `run`, copies of its first one.
fn more_pending(path: &Path, run: &str, n: usize) {
    for i in 0..n {
        sql(
            path,
            &format!(
                "INSERT INTO approvals (id, run_id, step_id, kind, capability_json,
                    presentation_json, request_json, hash, status, created_at)
                 SELECT 'extra{i:02}', run_id, step_id, kind, capability_json, presentation_json,
                    request_json, hash, 'pending', created_at
                 FROM approvals WHERE run_id = '{run}' ORDER BY rowid LIMIT 1"
            ),
        );
    }
}

#[tokio::test]
async fn a_huge_text_column_is_cut_with_a_marker_and_noted() {
    let dir = tempfile::tempdir().expect("dir");
    let (_, store) = db(&dir);
    let goal = "g".repeat(70_000);
    completed(&store, "r1", &goal).await;

    let run = store.get_run_capped("r1").expect("run");
    assert_eq!(
        run.goal,
        format!("{}…[cut: 70000 characters]", "g".repeat(MAX_PAGE_TEXT))
    );
    assert_eq!(
        run.decode_error.as_deref(),
        Some("goal: 70000 characters, over the page-read cap of 65536")
    );
    assert_eq!(run.status, RunStatus::Completed);
    let page = store.runs_page_capped(10, 0).expect("page");
    assert_eq!(page.items[0], run);
    // The unbounded read still returns the whole row.
    assert_eq!(store.get_run("r1").expect("run").goal, goal);
    // Summaries carry the cut goal.
    let summary = view::run_summary(&store, "r1").expect("summary");
    assert!(summary.goal.ends_with("…[cut: 70000 characters]"));
}

#[tokio::test]
async fn a_huge_approval_json_becomes_the_truncation_object() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, store) = db(&dir);
    waiting(&store, "r1").await;
    let stored = store.list_approvals("r1").expect("approvals").remove(0);
    sql(
        &path,
        "UPDATE approvals SET request_json = '\"' || hex(zeroblob(35000)) || '\"'",
    );
    let approval = store
        .get_approval_capped("r1", &stored.id)
        .expect("approval");
    assert_eq!(
        approval.request.get("truncated").expect("marker").as_str(),
        "true"
    );
    assert_eq!(
        approval.request.get("length").expect("length").as_str(),
        "70002"
    );
    let head = approval.request.get("head").expect("head");
    let head: String = serde_json::from_str(head.as_str()).expect("a string");
    assert_eq!(head.chars().count(), MAX_PAGE_TEXT);
    assert_eq!(approval.hash, stored.hash);
    assert_eq!(approval.capability, stored.capability);
    assert_eq!(
        approval.decode_error.as_deref(),
        Some("request_json: 70002 characters, over the page-read cap of 65536")
    );
    let page = store
        .pending_approvals_page_capped("r1", 0, 0)
        .expect("page");
    assert_eq!(page.items, vec![approval]);
    assert_eq!(page.total, 1);
}

#[tokio::test]
async fn a_huge_step_json_leaves_only_identifying_fields() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, store) = db(&dir);
    completed(&store, "r1", "read").await;
    sql(
        &path,
        "UPDATE steps SET observation_json = '{\"kind\":\"tool_result\",\"summary\":\"' || hex(zeroblob(40000)) || '\"}' WHERE idx = 0",
    );
    let page = store.steps_page_capped("r1", 0, 0).expect("steps");
    assert_eq!(page.total, 2);
    let step = &page.items[0];
    assert_eq!(step.index, 0);
    assert_eq!(step.status, StepStatus::Done);
    assert!(step.observation.is_none());
    assert!(step.decision.is_some(), "small columns still decode");
    assert_eq!(
        step.decode_error.as_deref(),
        Some("observation_json: 80035 characters, over the page-read cap of 65536")
    );
    assert!(page.items[1].decode_error.is_none());
    let summary = view::StepSummary::from_step(step);
    assert_eq!(summary.observation, "");
    assert!(summary.decode_error.is_some());
}

#[tokio::test]
async fn a_huge_event_payload_is_kept_as_valid_json() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, store) = db(&dir);
    completed(&store, "r1", "read").await;
    sql(
        &path,
        "UPDATE events SET payload_json = '[\"' || hex(zeroblob(40000)) || '\"]' WHERE type = 'run.started'",
    );
    let events = store.events_page_capped("r1", 0, 0).expect("events").items;
    let started = events
        .iter()
        .find(|e| e.event_type == EventType::RunStarted)
        .expect("run.started");
    let record: serde_json::Value =
        serde_json::from_str(&view::event_record(started)).expect("record is JSON");
    assert_eq!(record["payload"]["truncated"], true);
    assert_eq!(record["payload"]["length"], 80004);
    assert!(record.get("invalid_payload").is_none());
}

#[tokio::test]
async fn pages_hold_at_most_limit_rows_and_count_totals() {
    let dir = tempfile::tempdir().expect("dir");
    let (_, store) = db(&dir);
    for i in 1..=5 {
        completed(&store, &format!("r{i}"), "read").await;
    }
    let page = store.runs_page_capped(2, 1).expect("runs");
    assert_eq!(page.total, 5);
    let ids: Vec<&str> = page.items.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["r4", "r3"]);
    assert_eq!(store.runs_page_capped(0, 0).expect("all").items.len(), 5);
    assert_eq!(store.runs_page_capped(2, 9).expect("past").items.len(), 0);

    let events = store.events_page_capped("r2", 3, 2).expect("events");
    assert_eq!(events.items.len(), 3);
    assert_eq!(
        events.total,
        store.list_events("r2").expect("all").len() as u64
    );
    let after = store
        .events_after_capped(Some("r2"), events.items[0].seq, 2)
        .expect("after");
    assert_eq!(after, events.items[1..].to_vec());
    let everything = store.events_after_capped(None, 0, 0).expect("all runs");
    let per_run: usize = (1..=5)
        .map(|i| store.list_events(&format!("r{i}")).expect("events").len())
        .sum();
    assert_eq!(everything.len(), per_run);
    assert!(everything.windows(2).all(|w| w[0].seq < w[1].seq));

    // The view reads "all" a page at a time and keeps the total.
    let all = view::runs_page(&store, 0, 1).expect("view");
    assert_eq!((all.runs.len(), all.total, all.truncated), (4, 5, false));
    let some = view::runs_page(&store, 2, 0).expect("view");
    assert!(some.truncated);
    assert_eq!(PAGE_READ_ROWS, 500);
}

#[tokio::test]
async fn summaries_name_the_pending_approval_only_when_there_is_exactly_one() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, store) = db(&dir);
    completed(&store, "done", "read").await;
    waiting(&store, "one").await;
    waiting(&store, "two").await;
    more_pending(&path, "two", 1);
    let only = store.list_approvals("one").expect("approvals").remove(0);

    let page = view::runs_page(&store, 10, 0).expect("runs");
    let by_id = |id: &str| {
        page.runs
            .iter()
            .find(|r| r.id == id)
            .cloned()
            .expect("listed")
    };
    assert_eq!(by_id("one").pending_approval_id, Some(only.id.clone()));
    assert_eq!(by_id("two").pending_approval_id, None);
    assert_eq!(by_id("done").pending_approval_id, None);

    let counts = store
        .pending_counts_capped(&["one", "two", "done"])
        .expect("counts");
    assert_eq!(counts["one"].count, 1);
    assert_eq!(counts["two"].count, 2);
    assert_eq!(counts["two"].only_id, None);
    assert!(!counts.contains_key("done"));

    let detail = view::detail_page(&store, "one", 500, 0).expect("detail");
    assert_eq!(
        detail.waiting_approval.as_ref().map(|a| &a.id),
        Some(&only.id)
    );
    assert_eq!(detail.run.pending_approval_id, Some(only.id.clone()));
    let detail = view::detail_page(&store, "two", 1, 0).expect("detail");
    assert_eq!(detail.approvals.len(), 1);
    assert_eq!(detail.approvals_total, 2);
    assert!(detail.approvals_truncated());
    assert!(detail.waiting_approval.is_none());
}

#[tokio::test]
async fn pending_approval_follows_the_operator_rule() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, store) = db(&dir);
    waiting(&store, "r1").await;
    let first = store.list_approvals("r1").expect("approvals").remove(0);

    // Unnamed, exactly one pending: that one.
    let chosen = view::pending_approval(&store, "r1", None).expect("chosen");
    assert_eq!(chosen.id, first.id);
    // Named: that one, if pending.
    let named = view::pending_approval(&store, "r1", Some(&first.id)).expect("named");
    assert_eq!(named, chosen);
    // Unknown run or approval.
    assert!(matches!(
        view::pending_approval(&store, "nope", None),
        Err(Error::NotFound { what: "run", .. })
    ));
    assert!(matches!(
        view::pending_approval(&store, "r1", Some("nope")),
        Err(Error::NotFound {
            what: "approval",
            ..
        })
    ));

    // Several pending, none named: the first 20 ids and how many more.
    more_pending(&path, "r1", 24);
    match view::pending_approval(&store, "r1", None) {
        Err(Error::AmbiguousApproval { run, ids, more }) => {
            assert_eq!(run, "r1");
            assert_eq!(ids.len(), 20);
            assert_eq!(ids[0], first.id);
            assert_eq!(ids[1], "extra00");
            assert_eq!(more, 5);
        }
        other => panic!("expected AmbiguousApproval, got {other:?}"),
    }
    sql(&path, "DELETE FROM approvals WHERE id LIKE 'extra%'");

    // Decided: named is not pending (with its status); unnamed finds none.
    Operator::new(store.clone())
        .approve(
            "r1",
            &first.id,
            &DecideOptions {
                by: "ann",
                ..DecideOptions::default()
            },
        )
        .expect("approve");
    match view::pending_approval(&store, "r1", Some(&first.id)) {
        Err(Error::NotPending { approval, status }) => {
            assert_eq!(approval, first.id);
            assert_eq!(status, ApprovalStatus::Approved);
        }
        other => panic!("expected NotPending, got {other:?}"),
    }
    assert!(matches!(
        view::pending_approval(&store, "r1", None),
        Err(Error::NoPendingApproval { run }) if run == "r1"
    ));
}
