//! Whole scripted runs against a file-backed store, beside a baseline of
//! the same number of raw SQLite commits of similar size.
//!
//! `cargo bench -p agentrt --bench loop`; figures in docs/performance.md.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentrt::{Durability, Store, StoreOptions};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

mod scripted;
use scripted::one_run;

fn store(dir: &tempfile::TempDir, name: &str, durability: Durability) -> Store {
    Store::open_with(
        dir.path().join(name),
        StoreOptions {
            durability,
            ..StoreOptions::default()
        },
    )
    .expect("store opens")
}

/// Two commits per step, each one insert of a row about the size of what
/// the runtime writes in that commit (the "one row" baseline).
fn raw_commits(conn: &rusqlite::Connection, steps: u64, result_bytes: usize) {
    let first = "d".repeat(900);
    let second = "r".repeat(result_bytes.max(200) + 400);
    for _ in 0..steps {
        for body in [&first, &second] {
            let tx = rusqlite::Transaction::new_unchecked(
                conn,
                rusqlite::TransactionBehavior::Immediate,
            )
            .unwrap();
            tx.execute("INSERT INTO t (body) VALUES (?1)", [body])
                .unwrap();
            tx.commit().unwrap();
        }
    }
}

fn raw_conn(dir: &tempfile::TempDir, name: &str, durability: Durability) -> rusqlite::Connection {
    let conn = rusqlite::Connection::open(dir.path().join(name)).unwrap();
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .unwrap();
    let sync = if durability == Durability::Full {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.pragma_update(None, "synchronous", sync).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .unwrap();
    conn
}

/// The rows one recorded run wrote, to replay without any runtime logic.
struct Recorded {
    /// Per event: (step index or -1, type, payload, at).
    events: Vec<(i64, String, String, String)>,
    /// Per step: (decision, policy, observation, observation hash).
    steps: Vec<(String, String, String, String)>,
}

fn record(
    dir: &tempfile::TempDir,
    rt: &tokio::runtime::Runtime,
    steps: u64,
    result_bytes: usize,
) -> Recorded {
    let store = store(dir, "recorded.db", Durability::Normal);
    rt.block_on(one_run(&store, steps, result_bytes));
    let conn = rusqlite::Connection::open(dir.path().join("recorded.db")).unwrap();
    let mut stmt = conn
        .prepare("SELECT COALESCE((SELECT idx FROM steps WHERE steps.id = e.step_id), -1), type, payload_json, at FROM events e ORDER BY seq")
        .unwrap();
    let events = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut stmt = conn
        .prepare("SELECT decision_json, policy_json, observation_json, observation_hash FROM steps ORDER BY idx")
        .unwrap();
    let steps = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    Recorded { events, steps }
}

/// The same rows, statements and commit boundaries as the runtime's run,
/// with every value precomputed (the "same rows" baseline).
fn replay(conn: &rusqlite::Connection, rec: &Recorded, run: &str) {
    let immediate = |c| {
        rusqlite::Transaction::new_unchecked(c, rusqlite::TransactionBehavior::Immediate).unwrap()
    };
    let event = |tx: &rusqlite::Transaction<'_>, step: &str, e: &(i64, String, String, String)| {
        tx.prepare_cached("INSERT INTO events (run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .unwrap()
            .execute(rusqlite::params![run, step, e.3, e.1, e.2, "0000000000000000000000000000000000000000000000000000000000000000"])
            .unwrap();
    };
    let step_id = |i: usize| format!("{run}-{i}");
    let tx = immediate(conn);
    tx.execute(
        "INSERT INTO runs (id, goal, status, limits_json, created_at) VALUES (?1, 'bench', 'RUNNING', '{}', '2026-10-01T09:00:00.000000000Z')",
        [run],
    )
    .unwrap();
    let mut events = rec.events.iter().peekable();
    // run.created, run.started, step.started of step 0 share the first commit.
    for _ in 0..2 {
        event(&tx, "", events.next().unwrap());
    }
    let new_step = |tx: &rusqlite::Transaction<'_>, i: usize| {
        tx.prepare_cached("UPDATE runs SET step_count = step_count + 1, lease_expires_at = ?2 WHERE id = ?1 AND status = 'RUNNING'")
            .unwrap()
            .execute(rusqlite::params![run, "2026-10-01T09:00:30.000000000Z"])
            .unwrap();
        tx.prepare_cached("INSERT INTO steps (id, run_id, idx, status, started_at) VALUES (?1, ?2, ?3, 'deciding', '2026-10-01T09:00:00.000000000Z')")
            .unwrap()
            .execute(rusqlite::params![step_id(i), run, i as i64])
            .unwrap();
    };
    new_step(&tx, 0);
    event(&tx, &step_id(0), events.next().unwrap());
    tx.commit().unwrap();
    let last = rec.steps.len() - 1;
    for (i, s) in rec.steps.iter().enumerate() {
        let id = step_id(i);
        if i == last {
            // complete: decision, step end, run end in one commit.
            let tx = immediate(conn);
            tx.prepare_cached("UPDATE steps SET status = 'done', decision_json = ?2, finished_at = ?3 WHERE id = ?1").unwrap()
                .execute(rusqlite::params![id, s.0, "2026-10-01T09:00:01.000000000Z"]).unwrap();
            tx.prepare_cached(
                "UPDATE runs SET status = 'COMPLETED', finished_at = ?2 WHERE id = ?1",
            )
            .unwrap()
            .execute(rusqlite::params![run, "2026-10-01T09:00:01.000000000Z"])
            .unwrap();
            for e in events.by_ref() {
                event(&tx, &id, e);
            }
            tx.commit().unwrap();
            break;
        }
        // Commit 1: decision, policy, tool start.
        let tx = immediate(conn);
        tx.prepare_cached("UPDATE steps SET status = 'executing', decision_json = ?2, policy_json = ?3 WHERE id = ?1 AND status = 'deciding'").unwrap()
            .execute(rusqlite::params![id, s.0, s.1]).unwrap();
        for _ in 0..3 {
            event(&tx, &id, events.next().unwrap());
        }
        tx.commit().unwrap();
        // Commit 2: the result, active time, the next step.
        let tx = immediate(conn);
        tx.prepare_cached("UPDATE steps SET status = 'done', observation_json = ?2, observation_hash = ?3, finished_at = ?4 WHERE id = ?1 AND status = 'executing'").unwrap()
            .execute(rusqlite::params![id, s.2, s.3, "2026-10-01T09:00:01.000000000Z"]).unwrap();
        tx.prepare_cached("UPDATE runs SET active_ms = active_ms + 1 WHERE id = ?1")
            .unwrap()
            .execute([run])
            .unwrap();
        event(&tx, &id, events.next().unwrap());
        new_step(&tx, i + 1);
        event(&tx, &step_id(i + 1), events.next().unwrap());
        tx.commit().unwrap();
    }
}

static RUN: AtomicU64 = AtomicU64::new(0);

fn runs(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for durability in [Durability::Full, Durability::Normal] {
        let label = if durability == Durability::Full {
            "full"
        } else {
            "normal"
        };
        let mut group = c.benchmark_group(format!("run_{label}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(if durability == Durability::Full {
            20
        } else {
            5
        }));
        for result_bytes in [0usize, 8192] {
            let size = if result_bytes == 0 { "small" } else { "8k" };
            for steps in [10u64, 100, 1000] {
                let dir = tempfile::tempdir().unwrap();
                let s = store(&dir, "bench.db", durability);
                group.bench_with_input(
                    BenchmarkId::new(format!("runtime_{size}"), steps),
                    &steps,
                    |b, &steps| {
                        b.iter_custom(|iters| {
                            let start = Instant::now();
                            for _ in 0..iters {
                                rt.block_on(one_run(&s, steps, result_bytes));
                                RUN.fetch_add(1, Ordering::Relaxed);
                            }
                            start.elapsed()
                        })
                    },
                );
                let conn = raw_conn(&dir, "raw.db", durability);
                group.bench_with_input(
                    BenchmarkId::new(format!("raw_one_row_{size}"), steps),
                    &steps,
                    |b, &steps| b.iter(|| raw_commits(&conn, steps, result_bytes)),
                );
                let recorded = record(&dir, &rt, steps, result_bytes);
                drop(store(&dir, "same-rows.db", durability));
                let conn = rusqlite::Connection::open(dir.path().join("same-rows.db")).unwrap();
                let sync = if durability == Durability::Full {
                    "FULL"
                } else {
                    "NORMAL"
                };
                conn.pragma_update(None, "synchronous", sync).unwrap();
                group.bench_with_input(
                    BenchmarkId::new(format!("raw_same_rows_{size}"), steps),
                    &steps,
                    |b, _| {
                        b.iter(|| {
                            let run = format!("r{}", RUN.fetch_add(1, Ordering::Relaxed));
                            replay(&conn, &recorded, &run)
                        })
                    },
                );
            }
        }
        group.finish();
    }
}

criterion_group!(benches, runs);
criterion_main!(benches);
