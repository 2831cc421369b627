//! The store's write groups and lists (design §5, §6, acceptance
//! controls 8 and 9): events commit with their state and exist only once
//! committed, a failed or panicking group leaves nothing, the event chain
//! links every stored event to the one before it, and lists follow
//! insertion order whatever the timestamps say.

use std::panic::{AssertUnwindSafe, catch_unwind};

use agentrt::store::NewRun;

use crate::engine;
use agentrt::{
    Approval, ApprovalStatus, Canonical, Error, Event, EventType, Limits, Store, Timestamp,
};

fn t(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn new_run<'a>(id: &'a str, limits: &'a str, created_at: Timestamp) -> NewRun<'a> {
    NewRun {
        id,
        goal: "goal",
        limits_json: limits,
        created_at,
        lease_owner: "owner-1",
        lease_expires_at: created_at,
    }
}

fn limits_json() -> String {
    serde_json::to_string(&Limits::default()).unwrap()
}

/// A fresh database and a store on it.
fn db_store() -> (Store, engine::Db) {
    let db = engine::Db::new();
    (db.open(), db)
}

/// Rows of a table, counted on a connection of its own.
fn count(db: &engine::Db, table: &str) -> i64 {
    db.query_i64(&format!("SELECT COUNT(*) FROM {table}"))
}

/// Inserts a run with `run.created` and `run.started`, then fails.
fn insert_then<T>(
    store: &Store,
    run: &str,
    end: impl FnOnce() -> agentrt::Result<T>,
) -> agentrt::Result<(T, Vec<Event>)> {
    let limits = limits_json();
    let at = t("2026-10-01T09:00:00Z");
    store.write(|tx| {
        tx.insert_run(&new_run(run, &limits, at))?;
        tx.append_event(run, "", &at, EventType::RunCreated, "{}")?;
        tx.append_event(run, "", &at, EventType::RunStarted, "{}")?;
        end()
    })
}

// ------------------------------------------------------------- control 8

#[test]
fn failed_write_group_leaves_nothing() {
    let (store, db) = db_store();
    let result = insert_then(&store, "r1", || -> agentrt::Result<()> {
        Err(Error::InvalidInput {
            what: "test",
            detail: "fail after writing".into(),
        })
    });
    match result {
        Err(Error::InvalidInput { what: "test", .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.get_run("r1"),
        Err(Error::NotFound { what: "run", .. })
    ));
    assert!(store.list_events("r1").unwrap().is_empty());
    assert_eq!(count(&db, "runs"), 0);
    assert_eq!(count(&db, "events"), 0);

    // The next group writes normally, from seq 1.
    let ((), events) = insert_then(&store, "r2", || Ok(())).unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn panicking_write_group_rolls_back_and_the_store_stays_usable() {
    let (store, db) = db_store();
    let ((), first) = insert_then(&store, "before", || Ok(())).unwrap();

    let caught = catch_unwind(AssertUnwindSafe(|| {
        insert_then(&store, "r1", || -> agentrt::Result<()> {
            panic!("a write group panics mid-way")
        })
    }));
    assert!(caught.is_err(), "the panic was not propagated");

    assert!(matches!(
        store.get_run("r1"),
        Err(Error::NotFound { what: "run", .. })
    ));
    assert!(store.list_events("r1").unwrap().is_empty());
    assert_eq!(count(&db, "runs"), 1);
    assert_eq!(count(&db, "events"), 2);

    // Still usable for reads and writes, through this handle and clones.
    let clone = store.clone();
    assert_eq!(clone.list_runs(0, 0).unwrap().total, 1);
    let ((), after) = insert_then(&clone, "after", || Ok(())).unwrap();
    assert_eq!(
        after.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [first[1].seq + 1, first[1].seq + 2]
    );
    assert_eq!(store.list_events("after").unwrap(), after);

    // A panic in the in-memory store is rolled back the same way.
    let memory = engine::store();
    let caught = catch_unwind(AssertUnwindSafe(|| {
        insert_then(&memory, "m1", || -> agentrt::Result<()> { panic!("boom") })
    }));
    assert!(caught.is_err());
    assert_eq!(memory.list_runs(0, 0).unwrap().total, 0);
    insert_then(&memory, "m2", || Ok(())).unwrap();
    assert_eq!(memory.list_events("m2").unwrap().len(), 2);
}

#[test]
fn events_are_returned_only_on_commit_in_order() {
    let (store, db) = db_store();
    let limits = limits_json();
    let at = t("2026-10-01T09:00:00Z");
    let kinds = [
        EventType::RunCreated,
        EventType::RunStarted,
        EventType::StepStarted,
        EventType::StepDecided,
        EventType::RunFinished,
    ];
    let (seen_inside, events) = store
        .write(|tx| {
            tx.insert_run(&new_run("r1", &limits, at))?;
            for (i, kind) in kinds.iter().enumerate() {
                tx.append_event("r1", "", &at, kind.clone(), &format!("{{\"n\":{i}}}"))?;
            }
            // Another connection sees neither the run nor its events yet.
            let other = db.reader();
            let run = other.get_run("r1").err();
            let events = other.list_events("r1")?;
            Ok((run, events))
        })
        .unwrap();
    assert!(
        matches!(seen_inside.0, Some(Error::NotFound { what: "run", .. })),
        "{:?}",
        seen_inside.0
    );
    assert!(seen_inside.1.is_empty(), "{:?}", seen_inside.1);

    // After the commit: returned in append order, exactly as stored.
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.clone())
            .collect::<Vec<_>>(),
        kinds
    );
    assert_eq!(
        events.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    assert_eq!(
        events
            .iter()
            .map(|e| e.payload.as_str())
            .collect::<Vec<_>>(),
        [
            r#"{"n":0}"#,
            r#"{"n":1}"#,
            r#"{"n":2}"#,
            r#"{"n":3}"#,
            r#"{"n":4}"#
        ]
    );
    assert_eq!(store.list_events("r1").unwrap(), events);
    let other = db.reader();
    assert_eq!(other.list_events("r1").unwrap(), events);

    // A group that fails returns no events, and its seqs are reused.
    let failed = store.write(|tx| {
        tx.append_event("r1", "", &at, EventType::StepFailed, "{}")?;
        Err::<(), _>(Error::Cancelled)
    });
    assert!(matches!(failed, Err(Error::Cancelled)), "{failed:?}");
    let ((), next) = store
        .write(|tx| tx.append_event("r1", "", &at, EventType::RunFinished, "{}"))
        .unwrap();
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].seq, 6);
}

#[test]
fn event_chain_links_every_event_to_the_one_before_across_interleaved_runs() {
    let (store, db) = db_store();
    let limits = limits_json();
    let t0 = t("2026-10-01T09:00:00Z");
    let t1 = t("2026-10-01T09:00:01.5Z");

    store
        .write(|tx| {
            tx.insert_run(&new_run("a", &limits, t0))?;
            tx.append_event("a", "", &t0, EventType::RunCreated, r#"{"goal":"a"}"#)
        })
        .unwrap();
    store
        .write(|tx| {
            tx.insert_run(&new_run("b", &limits, t0))?;
            tx.append_event("b", "", &t0, EventType::RunCreated, r#"{"goal":"b"}"#)?;
            tx.append_event("b", "", &t1, EventType::RunStarted, "{}")
        })
        .unwrap();
    store
        .write(|tx| tx.append_event("a", "s1", &t1, EventType::StepStarted, r#"{"index":0}"#))
        .unwrap();
    // A rolled-back group leaves no gap and no link behind.
    let _ = store.write(|tx| {
        tx.append_event("b", "", &t1, EventType::RunFinished, "{}")?;
        Err::<(), _>(Error::Cancelled)
    });
    store
        .write(|tx| {
            tx.append_event("b", "s2", &t1, EventType::StepStarted, r#"{"index":0}"#)?;
            tx.append_event("a", "s1", &t1, EventType::StepDecided, r#"{"x":"<&>"}"#)
        })
        .unwrap();
    // A second store on the same database continues the same chain.
    let second = db.open();
    second
        .write(|tx| tx.append_event("a", "", &t1, EventType::RunFinished, "{}"))
        .unwrap();
    store
        .write(|tx| tx.append_event("b", "", &t1, EventType::RunFinished, "{}"))
        .unwrap();

    type Row = (i64, String, String, String, String, String, String, String);
    let rows: Vec<Row> = db
        .text_rows(
            "SELECT CAST(seq AS TEXT), run_id, step_id, at, type, payload_json, hash, rows_json
             FROM events ORDER BY seq",
        )
        .into_iter()
        .map(|r| {
            let [seq, run, step, at, kind, payload, hash, listing] =
                <[String; 8]>::try_from(r).unwrap();
            (
                seq.parse().unwrap(),
                run,
                step,
                at,
                kind,
                payload,
                hash,
                listing,
            )
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.1.as_str()).collect::<Vec<_>>(),
        ["a", "b", "b", "a", "b", "a", "a", "b"],
        "the runs interleave"
    );
    let mut prev = String::new();
    for (i, (seq, run, step, at, kind, payload, hash, listing)) in rows.iter().enumerate() {
        assert_eq!(*seq, i as i64 + 1, "seqs are gap-free");
        let want = agentrt::chain::link(&agentrt::chain::Link {
            prev: &prev,
            seq: *seq,
            run_id: run,
            step_id: step,
            at,
            event_type: kind,
            payload,
            rows: listing,
        });
        assert_eq!(hash, &want, "seq {seq}");
        prev = hash.clone();
    }
    // The first link is pinned over its exact bytes.
    let first = &rows[0];
    assert_eq!(first.3, "2026-10-01T09:00:00.000000000Z");
    let bytes = format!(
        "0:,1:1,1:a,0:,30:{},11:run.created,12:{{\"goal\":\"a\"}},{}:{},",
        first.3,
        first.7.len(),
        first.7
    );
    assert!(
        first.7.starts_with(r#"[["runs","a",""#),
        "the run row's digest rides on its event: {}",
        first.7
    );
    assert_eq!(first.6, blake3::hash(bytes.as_bytes()).to_hex().as_str());

    // Each run's list is its own events in seq order.
    for run in ["a", "b"] {
        let listed = store.list_events(run).unwrap();
        let stored: Vec<i64> = rows.iter().filter(|r| r.1 == run).map(|r| r.0).collect();
        assert_eq!(listed.iter().map(|e| e.seq).collect::<Vec<_>>(), stored);
    }
}

// ------------------------------------------------------------- control 9

fn approval(id: &str, run: &str, created_at: Timestamp) -> Approval {
    let c = |s: &str| Canonical::parse_str(s).unwrap();
    Approval {
        id: id.to_owned(),
        run_id: run.to_owned(),
        step_id: "s1".to_owned(),
        kind: "confirm".to_owned(),
        capability: c(r#"{"tool":"t"}"#),
        presentation: c(r#"{"summary":"do it"}"#),
        request: c(r#"{"args":{}}"#),
        hash: format!("hash-{id}"),
        status: ApprovalStatus::Pending,
        created_at,
        expires_at: None,
        decided_at: None,
        decided_by: String::new(),
        note: String::new(),
        decode_error: None,
    }
}

#[test]
fn lists_follow_insertion_order_when_timestamps_disagree() {
    let store = engine::store();
    let limits = limits_json();
    let late = t("2026-10-01T10:00:00Z");
    let early = t("2026-10-01T09:00:00Z");
    let earliest = t("2026-09-30T23:59:59.999999999Z");

    // Inserted first, but with the latest time text.
    store
        .write(|tx| {
            tx.insert_run(&new_run("first", &limits, late))?;
            tx.append_event("first", "", &late, EventType::RunCreated, "{}")?;
            tx.append_event("first", "", &early, EventType::RunStarted, "{}")?;
            tx.append_event("first", "", &earliest, EventType::StepStarted, "{}")?;
            tx.insert_approval(&approval("ap-late", "first", late))?;
            tx.insert_approval(&approval("ap-early", "first", early))?;
            tx.insert_approval(&approval("ap-earliest", "first", earliest))
        })
        .unwrap();
    for (id, at) in [("second", early), ("third", earliest)] {
        store
            .write(|tx| {
                tx.insert_run(&new_run(id, &limits, at))?;
                tx.append_event(id, "", &at, EventType::RunCreated, "{}")
            })
            .unwrap();
    }

    // Runs: newest inserted first, against the time text.
    let runs = store.list_runs(0, 0).unwrap();
    assert_eq!(runs.total, 3);
    assert_eq!(
        runs.items.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["third", "second", "first"]
    );
    let page = store.list_runs(2, 1).unwrap();
    assert_eq!(
        page.items.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["second", "first"]
    );

    // Approvals and events: in insertion order.
    let approvals = store.list_approvals("first").unwrap();
    assert_eq!(
        approvals.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(),
        ["ap-late", "ap-early", "ap-earliest"]
    );
    assert_eq!(approvals[0], approval("ap-late", "first", late));
    let pending = store.pending_approvals_page("first", 0, 0).unwrap();
    assert_eq!(
        pending
            .items
            .iter()
            .map(|a| a.id.as_str())
            .collect::<Vec<_>>(),
        ["ap-late", "ap-early", "ap-earliest"]
    );
    let (ids, total) = store.pending_approval_ids("first", 10).unwrap();
    assert_eq!(ids, ["ap-late", "ap-early", "ap-earliest"]);
    assert_eq!(total, 3);
    let events = store.list_events("first").unwrap();
    assert_eq!(
        events
            .iter()
            .map(|e| e.event_type.clone())
            .collect::<Vec<_>>(),
        [
            EventType::RunCreated,
            EventType::RunStarted,
            EventType::StepStarted
        ]
    );
}

/// One write of a write group.
type Write<'a> = Box<dyn Fn(&mut agentrt::store::WriteTx<'_>) -> agentrt::Result<()> + 'a>;

#[test]
fn a_write_group_that_changes_state_rows_without_an_event_is_refused() {
    use agentrt::store::{LeaseChange, NewStep, RunChange, RunGuard};
    let (store, db) = db_store();
    insert_then(&store, "r1", || Ok(())).unwrap();
    let events = count(&db, "events");
    let at = t("2026-10-01T09:00:01Z");
    let unexplained: [(&str, Write<'_>); 4] = [
        (
            "runs",
            Box::new(|tx| {
                tx.update_run(
                    "r1",
                    &RunGuard::default(),
                    &RunChange {
                        step_count_add: 1,
                        ..RunChange::default()
                    },
                )
                .map(|_| ())
            }),
        ),
        (
            "steps",
            Box::new(|tx| {
                tx.insert_step(&NewStep {
                    id: "s1",
                    run_id: "r1",
                    index: 0,
                    status: agentrt::model::StepStatus::Deciding,
                    started_at: at,
                })
            }),
        ),
        (
            "approvals",
            Box::new(|tx| tx.insert_approval(&approval("a1", "r1", at))),
        ),
        ("tool_specs", Box::new(|tx| tx.insert_spec("h1", "{}"))),
    ];
    for (table, write) in unexplained {
        match store.write(|tx| write(tx)) {
            Err(Error::UnexplainedWrite {
                table: refused,
                rows: 1,
                ..
            }) => assert_eq!(refused, table),
            other => panic!("{table}: {other:?}"),
        }
    }
    // Nothing of it was kept.
    assert_eq!(store.get_run("r1").unwrap().step_count, 0);
    for table in ["steps", "approvals", "tool_specs"] {
        assert_eq!(count(&db, table), 0, "{table}");
    }
    assert_eq!(count(&db, "events"), events);
    // A change of the lease alone is not digested: it needs no event.
    store
        .write(|tx| {
            tx.update_run(
                "r1",
                &RunGuard::default(),
                &RunChange {
                    lease: LeaseChange::Clear,
                    ..RunChange::default()
                },
            )
        })
        .unwrap();
    // The same writes with an event to explain them commit.
    store
        .write(|tx| {
            tx.insert_spec("h1", "{}")?;
            tx.append_event("r1", "", &at, EventType::StepPolicy, "{}")
        })
        .unwrap();
    assert_eq!(count(&db, "tool_specs"), 1);
}
