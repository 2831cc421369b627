//! How many round trips the store's calls take on PostgreSQL, counted by
//! `agentrt_postgres::round_trips()`. A target of its own: the counter is
//! the process's, so nothing else may run beside these calls.

#[path = "real_postgres/backends.rs"]
mod backends;

use backends::created_run;

/// The round trips `f` took.
fn counted<T>(f: impl FnOnce() -> T) -> (T, u64) {
    let before = agentrt_postgres::round_trips();
    let value = f();
    (value, agentrt_postgres::round_trips() - before)
}

#[test]
fn a_read_takes_one_round_trip_and_a_group_that_decides_nothing_two() {
    let store = agentrt_postgres::open(&backends::fresh_database()).unwrap();
    // The first use of each statement on a connection prepares it (one
    // round trip each): counted from the second on.
    store.write(created_run("first")).unwrap();
    store.get_run("first").unwrap();
    // `BEGIN` with the chain head's lock; the insert, the event, the
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
