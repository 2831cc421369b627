//! How many round trips the store's calls take on PostgreSQL, counted by
//! `agentrt_postgres::round_trips()`. A target of its own: the counter is
//! the process's, so nothing else may run beside these calls.

#[path = "real_postgres/backends.rs"]
mod backends;

use agentrt::store::{RunChange, RunGuard, WriteTx};
use agentrt::{EventType, RunStatus, Timestamp};
use backends::created_run;

/// Taken by each test: the counter counts every thread of the process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The round trips `f` took.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = agentrt_postgres::round_trips();
    let value = f();
    (value, agentrt_postgres::round_trips() - before)
}

#[test]
fn a_read_takes_one_round_trip_and_a_group_that_decides_nothing_two() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let store = agentrt_postgres::open(&backends::fresh_database()).unwrap();
    // The first use of each statement on a connection prepares it (one
    // round trip each): counted from the second on.
    store.write(created_run("first")).unwrap();
    store.get_run("first").unwrap();
    // `BEGIN` with the chain head's lock and the insert; the event, the
    // head's move and the row's mark with the `COMMIT`.
    let (written, trips) = counted(|| store.write(created_run("r")));
    written.unwrap();
    assert_eq!(trips, 2);
    // `BEGIN` with the query; the `COMMIT` is sent without waiting.
    for _ in 0..3 {
        let (run, trips) = counted(|| store.get_run("r"));
        assert_eq!(run.unwrap().goal, "g");
        assert_eq!(trips, 1);
    }
}

/// A write group whose change is guarded: the step count moved from
/// `from` on a RUNNING run, and an event.
fn counted_step(from: u64) -> impl FnOnce(&mut WriteTx<'_>) -> agentrt::Result<()> {
    move |tx| {
        let guard = RunGuard {
            statuses: &[RunStatus::Running],
            step_count: Some(from),
            ..RunGuard::default()
        };
        let change = RunChange {
            step_count_add: 1,
            ..RunChange::default()
        };
        assert!(tx.update_run("r", &guard, &change)?, "the guard held");
        let at = Timestamp::parse("2026-10-01T09:00:01Z").unwrap();
        tx.append_event("r", "", &at, EventType::StepStarted, "{}")
    }
}

#[test]
fn a_group_whose_change_is_guarded_takes_two_round_trips() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let store = agentrt_postgres::open(&backends::fresh_database()).unwrap();
    store.write(created_run("r")).unwrap();
    store.write(counted_step(0)).unwrap();
    // `BEGIN`, the chain head's lock and the guarded update (its verdict
    // and its row); the event, the head's move and the row's mark with
    // the `COMMIT`.
    let (written, trips) = counted(|| store.write(counted_step(1)));
    written.unwrap();
    assert_eq!(trips, 2);
    assert_eq!(store.get_run("r").unwrap().step_count, 2);
}
