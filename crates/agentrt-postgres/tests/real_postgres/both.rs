//! Scenarios that run on SQLite and on PostgreSQL alike and must leave the
//! same runs, events and links on both.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrt::store::{NewRun, RunChange, RunGuard};
use agentrt::verify::{self, VerifyOptions, VerifyReport};
use agentrt::*;
use agentrt::{clock::ManualClock, ids::IdSource, ids::sequential_ids, model::StepStatus};

use crate::backends::{self, Backend};

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

/// A tool that counts its calls and echoes its arguments.
struct Push {
    calls: Arc<AtomicUsize>,
}

impl Tool for Push {
    fn spec(&self) -> ToolSpec {
        ToolSpec::new("push", "push a branch", SideEffect::RemoteMutation)
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("pushed")) })
    }
}

fn driver(
    store: &Store,
    clock: &ManualClock,
    ids: &IdSource,
    calls: &Arc<AtomicUsize>,
    decisions: Vec<Decision>,
) -> Driver<ScriptedAgent> {
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(Push {
        calls: Arc::clone(calls),
    })];
    let config = GateConfig::new(store.clone(), DefaultPolicy, tools)
        .with_clock(clock.clock())
        .with_ids(ids.clone());
    Driver::new(config, ScriptedAgent::new(decisions)).unwrap()
}

/// The links of every event, in seq order, as the engine stored them.
/// Every stored link, read through `verify`'s reads (the chain head and
/// each seq's link).
fn links(store: &Store) -> Vec<(i64, String)> {
    let head = agentrt::verify::chain_head(store).unwrap().unwrap().seq;
    (1..=head)
        .map(|seq| {
            (
                seq,
                agentrt::verify::event_hash(store, seq).unwrap().unwrap(),
            )
        })
        .collect()
}

/// A labelled run paused for approval, approved under the hash shown,
/// resumed (the policy asked again) and completed: what each engine holds
/// afterwards.
async fn approved_run(
    backend: &Backend,
) -> (Vec<Event>, Vec<(i64, String)>, Run, usize, VerifyReport) {
    let store = backend.open();
    let clock = ManualClock::new(t0()).stepping(Duration::from_secs(1));
    let ids = sequential_ids("id");
    let calls = Arc::new(AtomicUsize::new(0));
    let mut first = driver(
        &store,
        &clock,
        &ids,
        &calls,
        vec![Decision::tool_call("push", r#"{"ref":"main"}"#)],
    );
    let labels = Labels::new().with("team", "ops").unwrap();
    let run = first
        .start_labelled(Some("r"), "publish", Limits::default(), labels)
        .await
        .unwrap();
    assert_eq!(
        run.status,
        RunStatus::WaitingForApproval,
        "{}",
        backend.name
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let approval = store.list_approvals("r").unwrap().pop().unwrap();
    let operator = Operator::new(store.clone()).with_clock(clock.clock());
    let options = DecideOptions {
        by: "alice",
        note: "ok",
        shown_hash: Some(&approval.hash),
    };
    operator.approve("r", &approval.id, &options).unwrap();
    let mut second = driver(
        &store,
        &clock,
        &ids,
        &calls,
        vec![Decision::complete("\"pushed\"")],
    );
    let run = second.resume("r").await.unwrap();
    let events = store.list_events("r").unwrap();
    let links = links(&store);
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    (events, links, run, calls.load(Ordering::SeqCst), report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_run_writes_the_same_events_and_links_on_both_engines() {
    let [sqlite, postgres] = backends::each();
    let (sqlite_events, sqlite_links, sqlite_run, sqlite_calls, sqlite_report) =
        approved_run(&sqlite).await;
    let (pg_events, pg_links, pg_run, pg_calls, pg_report) = approved_run(&postgres).await;
    assert_eq!(sqlite_run.status, RunStatus::Completed);
    assert_eq!(
        (sqlite_calls, pg_calls),
        (1, 1),
        "the tool ran once on each"
    );
    assert!(sqlite_events.len() > 8, "{sqlite_events:?}");
    assert_eq!(pg_events, sqlite_events);
    // The links cover every row digest: equal links mean the same rows.
    assert_eq!(pg_links, sqlite_links);
    assert_eq!(pg_run, sqlite_run);
    // `verify` walks both to the same head, every row accounted for.
    assert!(sqlite_report.intact(), "{sqlite_report:?}");
    assert!(pg_report.intact(), "{pg_report:?}");
    assert_eq!(pg_report.checked, sqlite_events.len() as u64);
    assert_eq!(
        (&pg_report.head, &pg_report.hash, pg_report.checked),
        (
            &sqlite_report.head,
            &sqlite_report.hash,
            sqlite_report.checked
        )
    );
}

/// Guarded run changes: a wrong owner, an expired lease and a wrong step
/// count each change nothing; the right guard applies.
fn guarded_changes(store: &Store) -> Vec<bool> {
    let at = t0();
    store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id: "g",
                goal: "guarded",
                limits_json: "{}",
                created_at: at,
                lease_owner: "host-a",
                lease_expires_at: at.add(Duration::from_secs(60)),
            })?;
            tx.append_event("g", "", &at, EventType::RunCreated, "{}")
        })
        .unwrap();
    let finish = RunChange {
        status: Some(RunStatus::Completed),
        finished_at: Some(at),
        ..RunChange::default()
    };
    let guards = [
        RunGuard {
            lease_owner: Some("host-b"),
            ..RunGuard::default()
        },
        RunGuard {
            lease_owner: Some("host-a"),
            lease_live_at: Some(at.add(Duration::from_secs(61))),
            ..RunGuard::default()
        },
        RunGuard {
            step_count: Some(3),
            ..RunGuard::default()
        },
        RunGuard {
            statuses: &[RunStatus::Running],
            lease_owner: Some("host-a"),
            lease_live_at: Some(at.add(Duration::from_secs(59))),
            step_count: Some(0),
            ..RunGuard::default()
        },
    ];
    guards
        .iter()
        .map(|guard| {
            let (applied, _) = store
                .write(|tx| {
                    let applied = tx.update_run("g", guard, &finish)?;
                    if applied {
                        tx.append_event("g", "", &at, EventType::RunFinished, "{}")?;
                    }
                    Ok(applied)
                })
                .unwrap();
            applied
        })
        .collect()
}

#[test]
fn a_guarded_change_applies_only_when_its_guard_holds_on_both_engines() {
    for backend in backends::each() {
        let store = backend.open();
        assert_eq!(
            guarded_changes(&store),
            [false, false, false, true],
            "{}",
            backend.name
        );
        assert_eq!(store.get_run("g").unwrap().status, RunStatus::Completed);
    }
}

/// Rows written by inserts alone, each listed in the event of its group
/// and never written again: a run (with labels and a tool spec), then a
/// step and an approval of it.
fn inserted_rows(store: &Store) -> (Vec<(i64, String)>, VerifyReport) {
    let at = t0();
    let labels = Labels::new().with("team", "ops").unwrap();
    store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id: "i",
                goal: "inserted",
                limits_json: r#"{"max_steps":3}"#,
                created_at: at,
                lease_owner: "host-a",
                lease_expires_at: at.add(Duration::from_secs(60)),
            })?;
            tx.insert_run_labels("i", &labels)?;
            tx.insert_spec("h1", r#"{"name":"push"}"#)?;
            tx.append_event("i", "", &at, EventType::RunCreated, "{}")
        })
        .unwrap();
    store
        .write(|tx| {
            tx.insert_step(&agentrt::store::NewStep {
                id: "s1",
                run_id: "i",
                index: 7,
                status: StepStatus::Deciding,
                started_at: at.add(Duration::from_secs(1)),
            })?;
            tx.append_event("i", "s1", &at, EventType::StepStarted, "{}")
        })
        .unwrap();
    let report = verify::verify(store, &VerifyOptions::default()).unwrap();
    (links(store), report)
}

#[test]
fn rows_written_by_inserts_alone_are_listed_alike_on_both_engines() {
    let [sqlite, postgres] = backends::each();
    let (sqlite_links, sqlite_report) = inserted_rows(&sqlite.open());
    let (pg_links, pg_report) = inserted_rows(&postgres.open());
    assert!(sqlite_report.intact(), "{sqlite_report:?}");
    assert!(pg_report.intact(), "{pg_report:?}");
    assert_eq!(pg_links.len(), 2);
    // Equal links: the same row digests, each as its engine stores the row.
    assert_eq!(pg_links, sqlite_links);
}

/// Three labelled runs and one with a goal over the page-read cap: the
/// label filters' pages and the capped reads.
async fn labelled_runs(backend: &Backend) -> Vec<Page<Run>> {
    let store = backend.open();
    let clock = ManualClock::new(t0()).stepping(Duration::from_secs(1));
    let ids = sequential_ids("id");
    let calls = Arc::new(AtomicUsize::new(0));
    let big_goal = "g".repeat(MAX_PAGE_TEXT + 10);
    for (id, team, goal) in [
        ("r1", "ops", "first"),
        ("r2", "web", "second"),
        ("r3", "ops", big_goal.as_str()),
    ] {
        let mut d = driver(&store, &clock, &ids, &calls, vec![Decision::complete("1")]);
        let labels = Labels::new().with("team", team).unwrap();
        d.start_labelled(Some(id), goal, Limits::default(), labels)
            .await
            .unwrap();
    }
    let ops = Labels::new().with("team", "ops").unwrap();
    let none = Labels::new().with("team", "nobody").unwrap();
    vec![
        store.list_runs_labelled(0, 0, &ops).unwrap(),
        store.list_runs_labelled(1, 1, &ops).unwrap(),
        store.list_runs_labelled(0, 0, &none).unwrap(),
        store.runs_page_capped(0, 0).unwrap(),
    ]
}

use agentrt::store::{MAX_PAGE_TEXT, Page};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn label_filters_and_capped_pages_read_alike_on_both_engines() {
    let [sqlite, postgres] = backends::each();
    let on_sqlite = labelled_runs(&sqlite).await;
    let on_postgres = labelled_runs(&postgres).await;
    let ids = |page: &Page<Run>| page.items.iter().map(|r| r.id.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&on_sqlite[0]), ["r3", "r1"], "newest first");
    assert_eq!(on_sqlite[0].total, 2);
    assert_eq!(ids(&on_sqlite[1]), ["r1"]);
    assert!(on_sqlite[2].items.is_empty());
    let capped = &on_sqlite[3].items[0];
    assert!(
        capped
            .decode_error
            .as_deref()
            .unwrap_or("")
            .contains("goal"),
        "{:?}",
        capped.decode_error
    );
    assert_eq!(on_postgres, on_sqlite);
}
