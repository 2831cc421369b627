//! Group commit: write groups that arrive while a commit is in progress
//! are committed together in the next transaction, each atomic on its own.
//!
//! Each test holds the database's write lock from a connection of its own
//! while it submits its groups, so they all queue behind the writer and
//! land in one batch whatever the machine's speed.

mod common;
#[path = "common/write_lock.rs"]
mod write_lock;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agentrt::store::{NewRun, NewStep, StepChange, StepGuard};
use agentrt::*;
use agentrt::{ids::random_ids, model::StepStatus};
use common::*;
use write_lock::hold_write_lock;

fn new_run(id: &str) -> NewRun<'_> {
    NewRun {
        id,
        goal: "g",
        limits_json: "{}",
        created_at: t0(),
        lease_owner: "me",
        lease_expires_at: t0(),
    }
}

/// A group that creates run `id` with one event.
async fn create(store: &Store, id: String) -> Result<Vec<Event>> {
    store
        .write_async(move |tx| {
            tx.insert_run(&new_run(&id))?;
            tx.append_event(&id, "", &t0(), EventType::RunCreated, "{}")?;
            Ok(())
        })
        .await
        .map(|((), events)| events)
}

fn file_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("group.db")).unwrap();
    (dir, store)
}

/// Lets the submitted groups reach the writer's queue.
async fn settle_queue() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

fn verify_intact(store: &Store) {
    let report = verify::verify(store, &verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_that_arrive_during_a_commit_share_the_next_transaction() {
    let (dir, store) = file_store();
    let release = hold_write_lock(&dir.path().join("group.db"));
    let tasks: Vec<_> = (0..64)
        .map(|n| tokio::spawn(create_owned(store.clone(), format!("r{n}"))))
        .collect();
    settle_queue().await;
    drop(release);
    let mut seqs = BTreeSet::new();
    for task in tasks {
        for event in task.await.unwrap().unwrap() {
            assert!(seqs.insert(event.seq), "seq {} twice", event.seq);
        }
    }
    assert_eq!(store.write_groups(), 64);
    // The first group was taken before the rest arrived; the other 63
    // waited together for the lock.
    assert!(
        store.commits() <= 2,
        "{} transactions for 64 groups",
        store.commits()
    );
    assert_eq!(
        seqs.into_iter().collect::<Vec<_>>(),
        (1..=64).collect::<Vec<i64>>(),
        "one total order, no gap"
    );
    assert_eq!(store.list_runs(100, 0).unwrap().total, 64);
    verify_intact(&store);
}

/// A group that writes a run, then fails.
async fn failing_owned(store: Store, id: String) -> Result<()> {
    store
        .write_async(move |tx| {
            tx.insert_run(&new_run(&id))?;
            tx.append_event(&id, "", &t0(), EventType::RunCreated, "{}")?;
            Err::<(), _>(Error::InvalidInput {
                what: "test",
                detail: "refused after writing".into(),
            })
        })
        .await
        .map(|((), _)| ())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_every_group_fails_commits_nothing() {
    let (dir, store) = file_store();
    let release = hold_write_lock(&dir.path().join("group.db"));
    // The first group reaches the writer, which waits for the lock with
    // it; the others queue meanwhile and make the next batch together.
    let mut calls = vec![tokio::spawn(failing_owned(store.clone(), "f0".into()))];
    settle_queue().await;
    for i in 1..6 {
        calls.push(tokio::spawn(failing_owned(store.clone(), format!("f{i}"))));
    }
    settle_queue().await;
    drop(release);
    for call in calls {
        let r = call.await.unwrap();
        assert!(
            matches!(r, Err(Error::InvalidInput { what: "test", .. })),
            "{r:?}"
        );
    }
    assert_eq!(store.write_groups(), 0);
    assert_eq!(store.commits(), 0, "nothing to keep, nothing committed");
    assert!(store.list_runs(0, 0).unwrap().items.is_empty());

    // The next group commits as usual, with the first seq.
    assert_eq!(create(&store, "after".into()).await.unwrap()[0].seq, 1);
    assert_eq!(store.commits(), 1);
    verify_intact(&store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_that_arrive_while_the_writer_waits_for_the_connection_join_its_batch() {
    let (_dir, store) = file_store();
    // A blocking write holds the connection until released.
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let blocking = {
        let store = store.clone();
        std::thread::spawn(move || {
            store.write(|tx| {
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
                tx.insert_run(&new_run("held"))?;
                tx.append_event("held", "", &t0(), EventType::RunCreated, "{}")
            })
        })
    };
    held_rx.recv().unwrap();
    // The writer takes the first group and waits for the connection; the
    // others arrive meanwhile.
    let mut calls = vec![tokio::spawn(create_owned(store.clone(), "g0".into()))];
    settle_queue().await;
    for i in 1..6 {
        calls.push(tokio::spawn(create_owned(store.clone(), format!("g{i}"))));
    }
    settle_queue().await;
    release_tx.send(()).unwrap();
    blocking.join().unwrap().unwrap();
    for call in calls {
        call.await.unwrap().unwrap();
    }
    assert_eq!(store.write_groups(), 7);
    assert_eq!(
        store.commits(),
        2,
        "the blocking write, then one batch of all six groups"
    );
    verify_intact(&store);
}

async fn create_owned(store: Store, id: String) -> Result<Vec<Event>> {
    create(&store, id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_or_panicking_group_rolls_back_alone() {
    let (dir, store) = file_store();
    let release = hold_write_lock(&dir.path().join("group.db"));
    let first = tokio::spawn(create_owned(store.clone(), "before".into()));
    settle_queue().await;
    let failing = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write_async(|tx| {
                    tx.insert_run(&new_run("failed"))?;
                    tx.append_event("failed", "", &t0(), EventType::RunCreated, "{}")?;
                    Err::<(), _>(Error::InvalidInput {
                        what: "test",
                        detail: "refused after writing".into(),
                    })
                })
                .await
        })
    };
    let panicking = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write_async(|tx| {
                    tx.insert_run(&new_run("panicked"))?;
                    tx.append_event("panicked", "", &t0(), EventType::RunCreated, "{}")?;
                    if tx.run("panicked")?.is_some() {
                        panic!("a bug in a write group");
                    }
                    Ok(())
                })
                .await
        })
    };
    let last = tokio::spawn(create_owned(store.clone(), "after".into()));
    settle_queue().await;
    drop(release);

    assert_eq!(first.await.unwrap().unwrap()[0].seq, 1);
    let failed = failing.await.unwrap();
    assert!(
        matches!(failed, Err(Error::InvalidInput { what: "test", .. })),
        "{failed:?}"
    );
    let panicked = panicking.await.unwrap_err();
    assert!(panicked.is_panic(), "the panic resumes in the caller");
    let after = last.await.unwrap().unwrap();
    assert_eq!(after[0].seq, 2, "the rolled-back groups left no seq used");

    let runs: Vec<String> = store
        .list_runs(10, 0)
        .unwrap()
        .items
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(runs, ["after", "before"]);
    assert!(store.list_events("failed").unwrap().is_empty());
    assert!(store.list_events("panicked").unwrap().is_empty());
    assert!(store.commits() <= 2);
    verify_intact(&store);

    // The writer goes on after a panic.
    create(&store, "later".into()).await.unwrap();
    verify_intact(&store);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_is_checked_inside_the_batch_against_the_groups_before_it() {
    let (dir, store) = file_store();
    store
        .write(|tx| {
            tx.insert_run(&new_run("r"))?;
            tx.insert_step(&NewStep {
                id: "s",
                run_id: "r",
                index: 0,
                status: StepStatus::Deciding,
                started_at: t0(),
            })?;
            tx.append_event("r", "", &t0(), EventType::RunCreated, "{}")
        })
        .unwrap();
    let release = hold_write_lock(&dir.path().join("group.db"));
    // Two groups race to move the same step out of `deciding`: in one
    // batch, the second sees the first's write.
    let racers: Vec<_> = (0..2)
        .map(|n| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .write_async(move |tx| {
                        let moved = tx.update_step(
                            "s",
                            &StepGuard {
                                statuses: &[StepStatus::Deciding],
                                ..StepGuard::default()
                            },
                            &StepChange {
                                status: Some(StepStatus::Executing),
                                ..StepChange::default()
                            },
                        )?;
                        if moved {
                            let payload = format!("{{\"racer\":{n}}}");
                            tx.append_event("r", "s", &t0(), EventType::StepToolStarted, &payload)?;
                        }
                        Ok(moved)
                    })
                    .await
                    .unwrap()
                    .0
            })
        })
        .collect();
    settle_queue().await;
    drop(release);
    let mut moved = Vec::new();
    for racer in racers {
        moved.push(racer.await.unwrap());
    }
    moved.sort();
    assert_eq!(moved, [false, true], "exactly one group moved the step");
    let started = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::StepToolStarted)
        .count();
    assert_eq!(started, 1);
    verify_intact(&store);
}

/// An observer that checks every event it hears is already committed: it
/// reads the event back on a connection of the store's read pool, which
/// sees only committed data.
struct ReadsBack {
    store: Store,
    heard: Arc<std::sync::Mutex<Vec<i64>>>,
}

impl Observer for ReadsBack {
    fn observe(&self, event: &Event) {
        let stored = self.store.list_events(&event.run_id).unwrap();
        assert!(
            stored.iter().any(|e| e.seq == event.seq),
            "heard seq {} before its commit",
            event.seq
        );
        self.heard.lock().unwrap().push(event.seq);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_hear_of_a_group_only_after_its_commit() {
    let (_dir, store) = file_store();
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tool = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let gate = Arc::new(
        Gate::new(
            GateConfig::new(store.clone(), DefaultPolicy, shared(vec![tool]))
                .with_ids(random_ids())
                .with_observer(ReadsBack {
                    store: store.clone(),
                    heard: Arc::clone(&heard),
                }),
        )
        .unwrap(),
    );
    let runs: Vec<_> = (0..8)
        .map(|n| {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                let mut session = gate
                    .begin(Some(&format!("r{n}")), "g", Limits::default())
                    .await
                    .unwrap();
                session.step().await.unwrap().unwrap();
                session
                    .propose(Decision::tool_call("fs_read", "{}"))
                    .await
                    .unwrap();
                session.execute().await.unwrap();
                session.step().await.unwrap().unwrap();
                session.propose(Decision::complete("{}")).await.unwrap();
            })
        })
        .collect();
    for run in runs {
        run.await.unwrap();
    }
    let mut heard = heard.lock().unwrap().clone();
    heard.sort_unstable();
    let total: usize = (0..8)
        .map(|n| store.list_events(&format!("r{n}")).unwrap().len())
        .sum();
    assert_eq!(heard.len(), total, "every event heard once");
    assert_eq!(heard, (1..=total as i64).collect::<Vec<_>>());
    verify_intact(&store);
}
