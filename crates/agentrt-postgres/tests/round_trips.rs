//! How many round trips the store's calls take on PostgreSQL, counted by
//! `agentrt_postgres::round_trips()`. A target of its own: the counter is
//! the process's, so nothing else may run beside these calls.

#[path = "real_postgres/backends.rs"]
mod backends;

use backends::{created_run, stepped_run};

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

#[test]
fn a_group_whose_change_is_guarded_takes_two_round_trips() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let store = agentrt_postgres::open(&backends::fresh_database()).unwrap();
    store.write(created_run("r")).unwrap();
    store.write(stepped_run("r", 0)).unwrap();
    // `BEGIN`, the chain head's lock and the guarded update (its verdict
    // and its row); the event, the head's move and the row's mark with
    // the `COMMIT`.
    let (written, trips) = counted(|| store.write(stepped_run("r", 1)));
    written.unwrap();
    assert_eq!(trips, 2);
    assert_eq!(store.get_run("r").unwrap().step_count, 2);
}

#[test]
fn a_runs_record_is_one_snapshot_in_the_trips_of_its_four_reads() {
    use agentrt::store::RecordCaps;
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let store = agentrt_postgres::open(&backends::fresh_database()).unwrap();
    store.write(created_run("r")).unwrap();
    store.write(stepped_run("r", 0)).unwrap();
    let caps = RecordCaps {
        steps: 16,
        events: 256,
        approvals: 64,
    };
    let four = || {
        store.get_run("r").unwrap();
        store.steps_page("r", 16, 0).unwrap();
        store.events_page("r", 256, 0).unwrap();
        store.first_approvals("r", 64).unwrap();
    };
    // Prepared on the connection first (see above).
    four();
    store.run_records(&["r"], caps).unwrap();
    let ((), apart) = counted(four);
    let (records, together) = counted(|| store.run_records(&["r"], caps));
    assert_eq!(records.unwrap()[0].run.id, "r");
    // Apart: the run (1: `BEGIN` with the query), then steps, events and
    // approvals, each a page and its count (2 each). Together: one
    // `BEGIN`, then one trip per statement: the same 7, in one snapshot
    // of the database instead of four (what saves trips is fewer
    // statements, not fewer reads).
    assert_eq!((apart, together), (7, 7));
}
