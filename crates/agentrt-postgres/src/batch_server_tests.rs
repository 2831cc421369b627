//! A batch of write groups on a real server (feature `real-postgres`, run
//! by `cargo xtask test`): each group in its own savepoint, so one that
//! fails, panics or whose deferred statements fail rolls back alone and
//! the others commit.

use agentrt::Timestamp;
use agentrt::store::NewRun;
use agentrt::store::engine::{BatchedGroup, GroupRows};

use crate::PgOptions;
use crate::backend::PgBackend;
use crate::batch::Outcome;

// The real-server suite's helpers (a fresh database, a raw client).
#[path = "../tests/real_postgres/backends.rs"]
pub(crate) mod backends;

fn engine() -> (PgBackend, String) {
    let url = backends::fresh_database();
    (crate::backend(&url, &PgOptions::default()).unwrap(), url)
}

fn insert_run(rows: &mut dyn GroupRows, id: &str) -> agentrt::Result<()> {
    let at = Timestamp::parse("2026-12-03T09:00:00Z").unwrap();
    rows.insert_run(&NewRun {
        id,
        goal: "g",
        limits_json: "{}",
        created_at: at,
        lease_owner: "me",
        lease_expires_at: at,
    })
}

/// Inserts run `id` and sends it: the insert goes with a guarded update
/// of the run, which needs the server's answer.
fn insert_and_send(rows: &mut dyn GroupRows, id: &str) -> agentrt::Result<()> {
    insert_run(rows, id)?;
    let guard = agentrt::store::RunGuard {
        statuses: &[agentrt::RunStatus::Running],
        ..agentrt::store::RunGuard::default()
    };
    rows.update_run(id, &guard, &agentrt::store::RunChange::default())?;
    Ok(())
}

/// A group that inserts run `id`.
fn inserts(id: &'static str) -> BatchedGroup {
    Box::new(move |rows| insert_run(rows, id))
}

/// The run ids stored, in order.
fn stored_runs(url: &str) -> Vec<String> {
    backends::on_plain_thread(|| {
        backends::client(url)
            .query("SELECT id FROM runs ORDER BY id", &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect()
    })
}

fn kinds(outcomes: &[Outcome]) -> Vec<&'static str> {
    outcomes
        .iter()
        .map(|o| match o {
            Outcome::Done(Ok(())) => "ok",
            Outcome::Done(Err(_)) => "failed",
            Outcome::Panicked(_) => "panicked",
        })
        .collect()
}

#[test]
fn a_group_that_fails_or_panics_in_a_batch_rolls_back_alone() {
    let (engine, url) = engine();
    let outcomes = engine.run_batch(vec![
        inserts("a"),
        Box::new(|rows| {
            insert_and_send(rows, "b")?;
            Err(agentrt::Error::DatabaseLocked)
        }),
        Box::new(|rows| {
            insert_and_send(rows, "c")?;
            panic!("the group panics");
        }),
        inserts("d"),
    ]);
    assert_eq!(kinds(&outcomes), ["ok", "failed", "panicked", "ok"]);
    assert_eq!(stored_runs(&url), ["a", "d"]);
}

#[test]
fn a_group_whose_deferred_statements_fail_rolls_back_alone() {
    let (engine, url) = engine();
    // The second insert of "a" is deferred and fails when it is flushed.
    let outcomes = engine.run_batch(vec![inserts("a"), inserts("a"), inserts("b")]);
    assert_eq!(kinds(&outcomes), ["ok", "failed", "ok"]);
    assert_eq!(stored_runs(&url), ["a", "b"]);
}

#[test]
fn a_group_that_fails_before_sending_anything_undoes_no_other() {
    let (engine, url) = engine();
    // The middle group's savepoint never reached the server: rolling back
    // to "the newest savepoint" would undo the group before it.
    let outcomes = engine.run_batch(vec![
        inserts("a"),
        Box::new(|_| Err(agentrt::Error::DatabaseLocked)),
        inserts("b"),
    ]);
    assert_eq!(kinds(&outcomes), ["ok", "failed", "ok"]);
    assert_eq!(stored_runs(&url), ["a", "b"]);
}

#[test]
fn a_group_alone_is_its_own_transaction() {
    let (engine, url) = engine();
    let outcomes = engine.run_batch(vec![Box::new(|rows| {
        insert_run(rows, "a")?;
        insert_run(rows, "a")
    })]);
    assert_eq!(kinds(&outcomes), ["failed"]);
    assert!(stored_runs(&url).is_empty());
    let outcomes = engine.run_batch(vec![inserts("b")]);
    assert_eq!(kinds(&outcomes), ["ok"]);
    assert_eq!(stored_runs(&url), ["b"]);
}

#[test]
fn an_unguarded_update_of_a_missing_run_fails_its_group_before_the_commit() {
    let (engine, url) = engine();
    fn add() -> agentrt::store::RunChange<'static> {
        agentrt::store::RunChange {
            active_ms_add: 5,
            ..agentrt::store::RunChange::default()
        }
    }
    // Alone: the update is checked before the COMMIT goes out.
    let outcomes = engine.run_batch(vec![Box::new(|rows| {
        insert_run(rows, "a")?;
        rows.update_run("missing", &agentrt::store::RunGuard::default(), &add())?;
        Ok(())
    })]);
    assert_eq!(kinds(&outcomes), ["failed"]);
    assert!(stored_runs(&url).is_empty());
    // In a batch: the group rolls back alone.
    let outcomes = engine.run_batch(vec![
        inserts("b"),
        Box::new(|rows| {
            insert_run(rows, "c")?;
            rows.update_run("missing", &agentrt::store::RunGuard::default(), &add())?;
            Ok(())
        }),
    ]);
    assert_eq!(kinds(&outcomes), ["ok", "failed"]);
    assert_eq!(stored_runs(&url), ["b"]);
}
