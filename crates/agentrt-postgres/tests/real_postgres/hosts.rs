//! What only PostgreSQL has: several handles on one database, as several
//! hosts, and the change signal between them.

use std::time::Duration;

use agentrt::chain::{Link, link};
use agentrt::store::NewRun;
use agentrt::{EventType, Timestamp};

use crate::backends::{self, Backend, created_run};

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

#[test]
fn four_hosts_writing_at_once_keep_one_chain_of_consecutive_seqs() {
    let backend = Backend::postgres();
    const HOSTS: usize = 4;
    const THREADS: usize = 3;
    const GROUPS: usize = 15;
    std::thread::scope(|scope| {
        for host in 0..HOSTS {
            // A handle of its own: its own pool, as another machine has.
            let store = backend.open();
            for thread in 0..THREADS {
                let store = store.clone();
                scope.spawn(move || {
                    let at = t0();
                    for group in 0..GROUPS {
                        let id = format!("h{host}-t{thread}-g{group}");
                        store
                            .write(|tx| {
                                tx.insert_run(&NewRun {
                                    id: &id,
                                    goal: "race",
                                    limits_json: "{}",
                                    created_at: at,
                                    lease_owner: "",
                                    lease_expires_at: at,
                                })?;
                                tx.append_event(&id, "", &at, EventType::RunCreated, "{}")?;
                                tx.append_event(&id, "", &at, EventType::RunFinished, "{}")
                            })
                            .unwrap();
                    }
                });
            }
        }
    });
    let mut client = backends::client(&backend.location);
    let rows = client
        .query(
            "SELECT seq, run_id, step_id, at, type, payload_json, rows_json, hash FROM events ORDER BY seq",
            &[],
        )
        .unwrap();
    let total = (HOSTS * THREADS * GROUPS * 2) as i64;
    assert_eq!(rows.len() as i64, total);
    let mut prev = String::new();
    for (i, row) in rows.iter().enumerate() {
        let seq: i64 = row.get(0);
        assert_eq!(seq, i as i64 + 1, "seqs are consecutive");
        let texts: Vec<String> = (1..8).map(|c| row.get(c)).collect();
        let expected = link(&Link {
            prev: &prev,
            seq,
            run_id: &texts[0],
            step_id: &texts[1],
            at: &texts[2],
            event_type: &texts[3],
            payload: &texts[4],
            rows: &texts[5],
        });
        assert_eq!(texts[6], expected, "event {seq} links to the one before");
        if i % 2 == 0 {
            // A group's two events are next to each other.
            assert_eq!(texts[0], rows[i + 1].get::<_, String>(1));
        }
        prev = expected;
    }
    let head = client
        .query_one("SELECT head_seq, head_hash FROM agentrt_chain", &[])
        .unwrap();
    assert_eq!(head.get::<_, i64>(0), total);
    assert_eq!(head.get::<_, String>(1), prev);
}

/// Run "r" created through `writing`; a waiter on `waiting` given time
/// to subscribe (so its wake can only come from a notice: there is no
/// polling to fall back on); `meanwhile`; then the run's next event
/// committed through `writing`. What the waiter saw: `None` if it was not
/// woken within 10 s (it would wait 20).
pub(crate) async fn woken_by_a_commit(
    waiting: &agentrt::Store,
    writing: &agentrt::Store,
    meanwhile: impl FnOnce(),
) -> Option<Option<i64>> {
    writing
        .off_executor(|store| store.write(created_run("r")))
        .await
        .unwrap();
    let waiter = {
        let waiting = waiting.clone();
        tokio::spawn(async move {
            waiting
                .wait_for_run("r", 1, Duration::from_secs(20))
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    meanwhile();
    let at = t0();
    writing
        .off_executor(move |store| {
            store.write(|tx| tx.append_event("r", "", &at, EventType::RunFinished, "{}"))
        })
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .ok()
        .map(|woke| woke.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_when_another_host_commits() {
    let backend = Backend::postgres();
    let (waiting, writing) = (backend.open(), backend.open());
    assert_eq!(
        woken_by_a_commit(&waiting, &writing, || {}).await,
        Some(Some(2))
    );
}

/// Ends every session of `backend`'s database but the asking one, as a
/// restart or an operator does; how many it ended.
fn end_every_session(backend: &Backend) -> i64 {
    let location = backend.location.clone();
    backends::on_plain_thread(move || {
        backends::client(&location)
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap()
            .get(0)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_still_wakes_after_the_server_ended_the_listeners_session() {
    let backend = Backend::postgres();
    let (waiting, writing) = (backend.open(), backend.open());
    // Subscribed, then its connection (and every other) is ended; the
    // commit that follows is made while the listener may be away.
    let woke = woken_by_a_commit(&waiting, &writing, || {
        assert!(end_every_session(&backend) >= 2);
    })
    .await
    .expect("the waiter was not woken (it would have waited out its 20 s)");
    assert_eq!(woke, Some(2));
}

/// Whether run `id`'s step count moved under a guard "leased to host-a,
/// live by the engine's clock", given `instant` as the wall-clock instant
/// an engine without a clock would judge instead.
fn moved_if_live_by_the_engine(store: &agentrt::Store, id: &str, instant: Timestamp) -> bool {
    let guard = agentrt::store::RunGuard {
        lease_owner: Some("host-a"),
        lease_live_at: Some(instant),
        lease_live_by_engine: true,
        ..agentrt::store::RunGuard::default()
    };
    let change = agentrt::store::RunChange {
        step_count_add: 1,
        ..agentrt::store::RunChange::default()
    };
    let (moved, _) = store
        .write(|tx| {
            let moved = tx.update_run(id, &guard, &change)?;
            if moved {
                tx.append_event(id, "", &t0(), EventType::StepStarted, "{}")?;
            }
            Ok(moved)
        })
        .unwrap();
    moved
}

#[test]
fn a_lease_guard_by_the_engines_clock_is_judged_by_the_servers_clock_not_the_instant_given() {
    let store = Backend::postgres().open();
    let hour = Duration::from_secs(3600);
    // "gone" was leased until a minute after t0, months ago by the
    // server's clock; "held" until an hour from now.
    for (id, expires) in [
        ("gone", t0().add(Duration::from_secs(60))),
        ("held", Timestamp::now().add(hour)),
    ] {
        store
            .write(|tx| {
                tx.insert_run(&NewRun {
                    id,
                    goal: "g",
                    limits_json: "{}",
                    created_at: t0(),
                    lease_owner: "host-a",
                    lease_expires_at: expires,
                })?;
                tx.append_event(id, "", &t0(), EventType::RunCreated, "{}")
            })
            .unwrap();
    }
    // Each instant given says the opposite of the server's clock.
    assert!(!moved_if_live_by_the_engine(&store, "gone", t0()));
    assert!(moved_if_live_by_the_engine(
        &store,
        "held",
        Timestamp::now().add(hour * 2)
    ));
    assert_eq!(store.get_run("gone").unwrap().step_count, 0);
    assert_eq!(store.get_run("held").unwrap().step_count, 1);
}

/// A gate on `store` whose lease clock runs `skew` ahead of (or behind)
/// the real time, as a host whose clock is off.
fn skewed_gate(store: &agentrt::Store, owner: &str, skew: i64, ttl: Duration) -> agentrt::Gate {
    let clock: agentrt::Clock = std::sync::Arc::new(move || {
        let now = Timestamp::now().as_unix_nanos();
        Timestamp::from_unix_nanos(now + i128::from(skew) * 1_000_000_000)
    });
    agentrt::Gate::new(
        agentrt::GateConfig::new(store.clone(), agentrt::DefaultPolicy, vec![])
            .with_lease_ttl(ttl)
            .with_lease_clock(clock)
            .with_lease_owner(owner),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_with_skewed_clocks_cannot_both_hold_a_run() {
    const TTL: Duration = Duration::from_secs(2);
    let backend = Backend::postgres();
    let (a_store, b_store) = (backend.open(), backend.open());
    // Host A's clock is an hour behind, host B's an hour ahead: by their
    // own clocks, B would find A's lease long expired.
    let a = skewed_gate(&a_store, "host-a", -3600, TTL);
    let b = skewed_gate(&b_store, "host-b", 3600, TTL);
    let a_owner = a.owner().to_owned();
    let held = a
        .begin(Some("r"), "g", agentrt::Limits::default())
        .await
        .unwrap();
    // The stored expiry is the server's now + TTL, not A's clock.
    let (owner, expires_at) = b_store.lease("r").unwrap();
    assert_eq!(owner, a_owner);
    let now = Timestamp::now();
    assert!(
        expires_at > now.to_string() && expires_at < now.add(TTL * 2).to_string(),
        "expiry {expires_at} is not the server's now + TTL ({now})"
    );
    match b.attach("r").await {
        Err(agentrt::Error::RunLeased { owner, .. }) => assert_eq!(owner, a_owner),
        Err(other) => panic!("expected RunLeased, got {other:?}"),
        Ok(_) => panic!("host B took a live lease"),
    }
    // A's heartbeat keeps it: after more than a TTL it is still A's.
    tokio::time::sleep(TTL + Duration::from_millis(500)).await;
    assert!(matches!(
        b.attach("r").await,
        Err(agentrt::Error::RunLeased { .. })
    ));
    // A stops (its heartbeat with it); once the server's clock passes the
    // last renewal's expiry, B takes the run over.
    drop(held);
    drop(a);
    tokio::time::sleep(TTL + Duration::from_millis(200)).await;
    let (_taken, _) = b.attach("r").await.unwrap();
    assert_eq!(b_store.lease("r").unwrap().0, b.owner());
}

#[test]
fn a_group_that_panics_or_fails_gives_its_connection_back_rolled_back() {
    let backend = Backend::postgres();
    // One connection: a group that kept it, or left it inside a
    // transaction, would stop or spoil every later group.
    let store = agentrt_postgres::open_with(
        &backend.location,
        agentrt_postgres::PgOptions {
            pool_size: 1,
            // A lost place shows as a refusal within seconds, not a hang.
            pool_wait: Duration::from_secs(2),
            ..agentrt_postgres::PgOptions::default()
        },
    )
    .unwrap();
    for _ in 0..3 {
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.write(|tx| -> agentrt::Result<()> {
                created_run("lost")(tx)?;
                panic!("a group panics after writing")
            })
        }));
        assert!(panicked.is_err());
        let failed = store.write(|tx| {
            created_run("lost")(tx)?;
            Err::<(), _>(agentrt::Error::Cancelled)
        });
        assert!(matches!(failed, Err(agentrt::Error::Cancelled)));
    }
    let ((), events) = store.write(created_run("kept")).unwrap();
    assert_eq!(events[0].seq, 1, "nothing of the failed groups stayed");
    assert!(store.get_run("lost").is_err());
    assert_eq!(store.list_runs(0, 0).unwrap().total, 1);
}

#[test]
fn a_host_that_stops_inside_a_write_group_holds_the_others_up_only_until_the_idle_timeout() {
    let backend = Backend::postgres();
    // This host stops (a pause, a cut network) in the middle of a group,
    // which holds the chain head's lock: the server ends its session after
    // the idle timeout, and the other host's group goes through before the
    // stopped one wakes.
    let stopping = agentrt_postgres::open_with(
        &backend.location,
        agentrt_postgres::PgOptions {
            idle_transaction_timeout: Some(Duration::from_millis(300)),
            ..agentrt_postgres::PgOptions::default()
        },
    )
    .unwrap();
    let other = backend.open();
    let woke = std::sync::atomic::AtomicBool::new(false);
    let (holding, held) = std::sync::mpsc::channel();
    std::thread::scope(|scope| {
        let stopped = scope.spawn(|| {
            stopping.write(|tx| {
                created_run("stopped")(tx)?;
                // An answer the group needs (the server's clock): its first
                // request goes, and takes the chain head's lock with it.
                tx.clock_now()?;
                holding.send(()).unwrap();
                std::thread::sleep(Duration::from_secs(4));
                woke.store(true, std::sync::atomic::Ordering::SeqCst);
                Ok(())
            })
        });
        held.recv().unwrap();
        let ((), events) = other.write(created_run("other")).unwrap();
        assert!(
            !woke.load(std::sync::atomic::Ordering::SeqCst),
            "the other host waited for the stopped one to wake"
        );
        assert_eq!(events[0].seq, 1);
        // The stopped group fails whole when it wakes: its session is gone.
        assert!(stopped.join().unwrap().is_err());
    });
    assert!(other.get_run("stopped").is_err());
    assert_eq!(other.list_runs(0, 0).unwrap().total, 1);
    // The stopped host's store goes on with a new connection.
    let ((), events) = stopping.write(created_run("after")).unwrap();
    assert_eq!(events[0].seq, 2);
    let report = agentrt::verify::verify(&other, &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

#[test]
fn sessions_the_server_ended_while_idle_cost_no_call_an_error() {
    let backend = Backend::postgres();
    let store = backend.open();
    // Several connections in the pool, all idle afterwards.
    std::thread::scope(|scope| {
        for id in ["a", "b", "c"] {
            let store = &store;
            scope.spawn(move || store.write(created_run(id)).unwrap());
        }
    });
    for round in 0..4 {
        assert!(
            end_every_session(&backend) >= 1,
            "round {round}: no session"
        );
        // At once: the store may not have noticed yet. A read first in
        // one round, a write in the next.
        let id: &'static str = ["d", "e", "f", "g"][round as usize];
        if round % 2 == 0 {
            assert_eq!(store.list_runs(0, 0).unwrap().total, 3 + round as u64);
            store.write(created_run(id)).unwrap();
        } else {
            store.write(created_run(id)).unwrap();
            assert_eq!(store.list_runs(0, 0).unwrap().total, 4 + round as u64);
        }
    }
    let report = agentrt::verify::verify(&store, &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 7);
}

#[test]
fn the_stores_sessions_are_named_agentrt_unless_the_connection_string_names_them() {
    // Each case on a database of its own: a dropped store's sessions may
    // linger a moment.
    let names = |extra: &str| {
        let backend = Backend::postgres();
        let store = agentrt_postgres::open(&format!("{}{extra}", backend.location)).unwrap();
        store.write(created_run("r")).unwrap();
        let location = backend.location.clone();
        backends::on_plain_thread(move || {
            backends::client(&location)
                .query(
                    "SELECT DISTINCT application_name FROM pg_stat_activity
                     WHERE datname = current_database() AND pid <> pg_backend_pid()",
                    &[],
                )
                .unwrap()
                .iter()
                .map(|row| row.get::<_, String>(0))
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(names(""), ["agentrt"]);
    assert_eq!(names(" application_name=host-a"), ["host-a"]);
}
