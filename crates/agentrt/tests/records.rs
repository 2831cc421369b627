//! What the store keeps beside the loop: damaged rows, tool specs, policy
//! identity, and observers that hear only committed events.

mod common;

use std::sync::Arc;

use agentrt::clock::ManualClock;
use agentrt::ids::sequential_ids;
use agentrt::*;
use common::*;

struct Named;

impl Policy for Named {
    fn evaluate(&self, req: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        DefaultPolicy.evaluate(req, view)
    }
    fn policy_id(&self) -> Option<String> {
        Some("named-policy/2".into())
    }
}

/// The remote push the runs of these tests pause on, the clock and the
/// recorder their drivers share.
struct World {
    push: Arc<Counting>,
    clock: ManualClock,
    rec: Recorder,
}

/// Runs `ids` on `store`, each paused on the approval of a remote push.
async fn paused_on_a_push(store: &Store, ids: [&str; 2]) -> World {
    let clock = stepping_clock();
    let rec = Recorder::default();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    for id in ids {
        let mut d = Driver::new(
            config(
                store,
                DefaultPolicy,
                shared(vec![push.clone()]),
                &clock,
                &rec,
            )
            .with_ids(sequential_ids(&format!("{id}-"))),
            ScriptedAgent::new([Decision::tool_call("push", "{}")]),
        )
        .unwrap();
        d.start(Some(id), "g", Limits::default()).await.unwrap();
    }
    World { push, clock, rec }
}

#[tokio::test]
async fn damaged_rows_are_listed_cancellable_and_fail_a_resume_without_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.db");
    let store = Store::open(&path).unwrap();
    let World { push, clock, rec } = paused_on_a_push(&store, ["a", "b"]).await;
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute(
        "UPDATE runs SET limits_json = '{not json' WHERE id IN ('a', 'b')",
        [],
    )
    .unwrap();
    raw.execute(
        "UPDATE approvals SET presentation_json = '[1,' WHERE run_id = 'b'",
        [],
    )
    .unwrap();

    let page = store.list_runs(10, 0).unwrap();
    assert_eq!(page.total, 2);
    assert!(page.items.iter().all(|r| {
        r.decode_error
            .as_deref()
            .is_some_and(|e| e.contains("limits_json"))
    }));

    // Such an approval cannot be decided.
    let approval = store.list_approvals("b").unwrap().pop().unwrap();
    assert!(approval.decode_error.is_some());
    let err = Operator::new(store.clone())
        .approve(
            "b",
            &approval.id,
            &DecideOptions {
                by: "x",
                note: "",
                shown_hash: None,
            },
        )
        .unwrap_err();
    assert!(matches!(err, Error::ApprovalHash { .. }), "{err:?}");

    // A damaged run can be cancelled.
    Operator::new(store.clone())
        .cancel("b", "ops", "damaged")
        .unwrap();
    assert_eq!(store.get_run("b").unwrap().status, RunStatus::Cancelled);

    // Resuming fails it internal_error and leaves the damaged column as it was.
    let mut d = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![push.clone()]),
            &clock,
            &rec,
        ),
        ScriptedAgent::new([]),
    )
    .unwrap();
    let run = d.resume("a").await.unwrap();
    assert_eq!(
        (run.status, run.reason),
        (RunStatus::Failed, Some(TerminalReason::InternalError))
    );
    let limits: String = raw
        .query_row("SELECT limits_json FROM runs WHERE id = 'a'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(limits, "{not json");
    assert_eq!(push.count(), 0);
}

#[tokio::test]
async fn each_distinct_spec_is_stored_once_and_a_tampered_spec_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = Store::open(&path).unwrap();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let base = ToolSpec::new("t", "describe", SideEffect::ReadOnly);
    let variants = [
        base.clone(),
        base.clone(),
        ToolSpec {
            description: "other".into(),
            ..base.clone()
        },
        base.clone().with_timeout(std::time::Duration::from_secs(5)),
        base.clone().terminal(),
    ];
    let hashes: Vec<String> = variants.iter().map(ToolSpec::hash).collect();
    assert_eq!(hashes[0], hashes[1]);
    for (i, h) in hashes.iter().enumerate().skip(2) {
        assert_ne!(h, &hashes[0], "variant {i} changes the hash");
    }
    for (n, spec) in variants.iter().enumerate() {
        let tool: Arc<dyn Tool> = Arc::new(tool_fn(spec.clone(), |_| async {
            Ok(ToolResult::raw("1"))
        }));
        let mut d = Driver::new(
            config(&store, DefaultPolicy, vec![tool], &clock, &rec)
                .with_ids(sequential_ids(&format!("{n}-"))),
            ScriptedAgent::new([Decision::complete("1")]),
        )
        .unwrap();
        d.start(None, "g", Limits::default()).await.unwrap();
    }
    let raw = rusqlite::Connection::open(&path).unwrap();
    let rows: i64 = raw
        .query_row("SELECT COUNT(*) FROM tool_specs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 4);
    assert_eq!(store.tool_spec(&hashes[0]).unwrap(), variants[0]);
    raw.execute("UPDATE tool_specs SET spec_json = replace(spec_json, 'describe', 'DESCRIBE') WHERE hash = ?1", [&hashes[0]])
        .unwrap();
    assert!(matches!(
        store.tool_spec(&hashes[0]).unwrap_err(),
        Error::Corrupt {
            table: "tool_specs",
            ..
        }
    ));
    // run.created names the spec hashes of the registered tools, and they resolve.
    let created = store
        .list_events(&store.list_runs(1, 0).unwrap().items[0].id)
        .unwrap()[0]
        .clone();
    assert!(created.payload.contains(&hashes[4]));
}

#[tokio::test]
async fn the_policy_id_is_recorded_and_malformed_ids_are_refused() {
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let t = Arc::new(Counting::new("t", SideEffect::ReadOnly));
    let mut d = Driver::new(
        config(&store, Named, shared(vec![t.clone()]), &clock, &rec),
        ScriptedAgent::new([Decision::tool_call("t", "{}"), Decision::complete("1")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let steps = store.list_steps("r").unwrap();
    assert_eq!(steps[0].policy_id, "named-policy/2");
    assert_eq!(steps[0].spec_hash, t.spec.hash());
    assert_eq!(
        steps[1].policy_id, "",
        "a step the policy did not decide has no policy id"
    );
    let policy = rec
        .events()
        .into_iter()
        .find(|e| e.event_type == EventType::StepPolicy)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_str(&policy.payload).unwrap();
    assert_eq!(payload["policy_id"], "named-policy/2");
    assert_eq!(payload["view"]["steps"], 0);
    assert_eq!(payload["view"]["step_count"], 1);

    struct Bad(String);
    impl Policy for Bad {
        fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
            Ok(PolicyDecision::allow())
        }
        fn policy_id(&self) -> Option<String> {
            Some(self.0.clone())
        }
    }
    for id in ["x".repeat(257), "tab\there".to_owned()] {
        let err = Gate::new(GateConfig::new(store.clone(), Bad(id), vec![]))
            .err()
            .unwrap();
        assert!(matches!(err, Error::InvalidPolicyId { .. }));
    }
}

#[tokio::test]
async fn observers_hear_only_committed_events_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("o.db");
    let store = Store::open(&path).unwrap();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let mut d = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![push.clone()]),
            &clock,
            &rec,
        ),
        ScriptedAgent::new([Decision::tool_call("push", "{}")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let approval = store.list_approvals("r").unwrap()[0].clone();
    Operator::new(store.clone())
        .approve("r", &approval.id, &DecideOptions::default())
        .unwrap();
    // Two gates race to resume; the loser's write group rolls back, and its
    // observer hears nothing of it.
    let losers = Recorder::default();
    let winners = Recorder::default();
    let gate_a = Gate::new(config(
        &Store::open(&path).unwrap(),
        DefaultPolicy,
        shared(vec![push.clone()]),
        &clock,
        &winners,
    ))
    .unwrap();
    let gate_b = Gate::new(config(
        &Store::open(&path).unwrap(),
        DefaultPolicy,
        shared(vec![push.clone()]),
        &clock,
        &losers,
    ))
    .unwrap();
    let (mut a, _) = gate_a.attach("r").await.unwrap();
    let (mut b, _) = gate_b.attach("r").await.unwrap();
    a.execute().await.unwrap();
    assert!(b.execute().await.unwrap_err().is_run_state());
    assert!(losers.events().is_empty());
    let stored = store.list_events("r").unwrap();
    let heard = rec.events();
    assert_eq!(
        &stored[..heard.len()],
        &heard[..],
        "the first observer heard the stored prefix, in order"
    );
    let tail: Vec<_> = stored[heard.len() + 1..].to_vec();
    assert_eq!(
        tail,
        winners.events(),
        "the winner heard exactly what it committed"
    );
}

#[tokio::test]
async fn an_unknown_event_type_is_listed_not_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.db");
    let store = Store::open(&path).unwrap();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let mut d = Driver::new(
        config(&store, DefaultPolicy, vec![], &clock, &rec),
        ScriptedAgent::new([Decision::complete("1")]),
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.execute("UPDATE events SET type = 'run.exploded' WHERE seq = 2", [])
        .unwrap();
    let events = store.list_events("r").unwrap();
    assert_eq!(
        events[1].event_type,
        EventType::Unknown("run.exploded".into())
    );
    assert_eq!(events[1].event_type.as_str(), "run.exploded");
}

#[tokio::test]
async fn run_records_read_each_run_whole_or_capped_in_the_order_asked() {
    use agentrt::store::RecordCaps;
    let store = Store::open(":memory:").unwrap();
    paused_on_a_push(&store, ["a", "b"]).await;
    let wide = RecordCaps {
        steps: 100,
        events: 100,
        approvals: 100,
    };
    let records = store.run_records(&["b", "a"], wide).unwrap();
    assert_eq!(records.len(), 2);
    for (record, id) in records.iter().zip(["b", "a"]) {
        assert_eq!(record.run, store.get_run(id).unwrap());
        assert_eq!(record.steps, store.list_steps(id).unwrap());
        assert_eq!(record.events, store.list_events(id).unwrap());
        assert_eq!(record.approvals, store.list_approvals(id).unwrap());
        assert_eq!(record.approvals.len(), 1, "paused on the push");
        assert!(record.whole());
    }

    let narrow = RecordCaps {
        steps: 1,
        events: 1,
        approvals: 1,
    };
    let cut = &store.run_records(&["a"], narrow).unwrap()[0];
    let events = store.list_events("a").unwrap();
    assert!(events.len() > 1);
    assert_eq!(cut.events, events[..1]);
    assert_eq!(cut.totals.events, events.len() as u64);
    assert!(!cut.whole());

    let missing = store.run_records(&["a", "nope"], wide).unwrap_err();
    assert!(
        matches!(&missing, Error::NotFound { what: "run", id } if id == "nope"),
        "{missing:?}"
    );
    let zero = RecordCaps { events: 0, ..wide };
    let refused = store.run_records(&["a"], zero).unwrap_err();
    assert!(
        matches!(refused, Error::InvalidInput { what: "caps", .. }),
        "{refused:?}"
    );
}
