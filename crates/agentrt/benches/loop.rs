//! Whole scripted runs against a file-backed store, beside a baseline of
//! the same number of raw SQLite commits of similar size.
//!
//! `cargo bench -p agentrt --bench loop`; figures in docs/performance.md.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentrt::{
    Agent, AgentError, BoxFuture, Decision, DefaultPolicy, Driver, Durability, GateConfig, Limits,
    RunStatus, SideEffect, StepInput, Store, StoreOptions, Tool, ToolResult, ToolSpec, tool_fn,
};
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};

/// Calls `echo` `steps - 1` times with distinct arguments, then completes.
struct Counter {
    steps: u64,
}

impl Agent for Counter {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let i = input.run.step_count;
        let d = if i >= self.steps {
            Decision::complete("true")
        } else {
            Decision::tool_call("echo", format!(r#"{{"i":{i}}}"#))
        };
        Box::pin(async move { Ok(d) })
    }
}

fn echo(result_bytes: usize) -> Arc<dyn Tool> {
    let pad = "x".repeat(result_bytes);
    Arc::new(tool_fn(
        ToolSpec::new("echo", "echo", SideEffect::ReadOnly),
        move |call| {
            let body = if pad.is_empty() {
                call.args.as_str().to_owned()
            } else {
                format!(r#"{{"args":{},"pad":"{pad}"}}"#, call.args)
            };
            async move { Ok(ToolResult::raw(body).with_summary("echoed")) }
        },
    ))
}

fn store(dir: &tempfile::TempDir, name: &str, durability: Durability) -> Store {
    Store::open_with(dir.path().join(name), StoreOptions { durability }).expect("store opens")
}

async fn one_run(store: &Store, steps: u64, result_bytes: usize) {
    let config = GateConfig::new(store.clone(), DefaultPolicy, vec![echo(result_bytes)]);
    let mut driver = Driver::new(config, Counter { steps }).expect("driver");
    let run = driver
        .start(None, "bench", Limits::default().max_steps(steps + 10))
        .await
        .expect("run");
    assert_eq!(run.status, RunStatus::Completed);
}

/// Two commits per step, each an insert of a row of about the size the
/// runtime writes (decision, policy and start events; then the result).
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
                    BenchmarkId::new(format!("raw_{size}"), steps),
                    &steps,
                    |b, &steps| b.iter(|| raw_commits(&conn, steps, result_bytes)),
                );
            }
        }
        group.finish();
    }
}

criterion_group!(benches, runs);
criterion_main!(benches);
