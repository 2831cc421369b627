//! N runs of 100 governed tool calls each, concurrently on one file, at
//! both durabilities, N = 1, 8, 64: steps per second (criterion's
//! throughput), and, printed after each group, the p50/p99 step latency
//! and the commits (fsyncs at full durability) per step and per write
//! group.
//!
//! `cargo bench -p agentrt --bench concurrency`; figures in
//! docs/performance.md.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrt::{
    Agent, AgentError, BoxFuture, Decision, DefaultPolicy, Driver, Durability, GateConfig, Limits,
    RunStatus, SideEffect, StepInput, Store, StoreOptions, Tool, ToolResult, ToolSpec, tool_fn,
};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const CALLS: u64 = 100;

/// Calls `echo` `CALLS` times, then completes; notes the time between its
/// decisions (one governed step: the verdict, the tool-start commit, the
/// tool, the outcome commit with the next step).
struct Caller {
    last: Option<Instant>,
    latencies: Arc<Mutex<Vec<Duration>>>,
}

impl Agent for Caller {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let now = Instant::now();
        if let Some(last) = self.last.replace(now) {
            self.latencies.lock().expect("latencies").push(now - last);
        }
        let i = input.run.step_count;
        let d = if i > CALLS {
            Decision::complete("true")
        } else {
            Decision::tool_call("echo", format!(r#"{{"i":{i}}}"#))
        };
        Box::pin(async move { Ok(d) })
    }
}

fn echo() -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("echo", "echo", SideEffect::ReadOnly),
        |call| async move { Ok(ToolResult::raw(call.args.as_str().to_owned()).with_summary("echoed")) },
    ))
}

async fn one_run(store: Store, latencies: Arc<Mutex<Vec<Duration>>>) {
    let config = GateConfig::new(store, DefaultPolicy, vec![echo()]);
    let agent = Caller {
        last: None,
        latencies,
    };
    let mut driver = Driver::new(config, agent).expect("driver");
    let run = driver
        .start(None, "bench", Limits::default().max_steps(CALLS + 10))
        .await
        .expect("run");
    assert_eq!(run.status, RunStatus::Completed);
}

/// What the last measured batch of runs did, for the printed summary.
#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    steps: u64,
    commits: u64,
    groups: u64,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn runs(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    for durability in [Durability::Full, Durability::Normal] {
        let label = if durability == Durability::Full {
            "full"
        } else {
            "normal"
        };
        let mut group = c.benchmark_group(format!("concurrent_{label}"));
        group.sample_size(10);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(10));
        let mut summary = Vec::new();
        for n in [1usize, 8, 64] {
            let steps_per_batch = n as u64 * (CALLS + 1);
            group.throughput(Throughput::Elements(steps_per_batch));
            let tally = Arc::new(Mutex::new(Tally::default()));
            group.bench_with_input(BenchmarkId::new("runs", n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    let mut took = Duration::ZERO;
                    for _ in 0..iters {
                        let dir = tempfile::tempdir().expect("dir");
                        let store = Store::open_with(
                            dir.path().join("bench.db"),
                            StoreOptions {
                                durability,
                                ..StoreOptions::default()
                            },
                        )
                        .expect("store");
                        let latencies = Arc::new(Mutex::new(Vec::new()));
                        let start = Instant::now();
                        rt.block_on(async {
                            let runs: Vec<_> = (0..n)
                                .map(|_| {
                                    tokio::spawn(one_run(store.clone(), Arc::clone(&latencies)))
                                })
                                .collect();
                            for run in runs {
                                run.await.expect("run task");
                            }
                        });
                        took += start.elapsed();
                        let mut t = tally.lock().expect("tally");
                        t.latencies = std::mem::take(&mut *latencies.lock().expect("latencies"));
                        t.steps = steps_per_batch;
                        t.commits = store.commits();
                        t.groups = store.write_groups();
                    }
                    took
                })
            });
            let mut t = std::mem::take(&mut *tally.lock().expect("tally"));
            t.latencies.sort_unstable();
            summary.push(format!(
                "{label} N={n}: step p50 {:.2} ms, p99 {:.2} ms; {:.3} commits per step, {:.3} commits per write group",
                percentile(&t.latencies, 0.50).as_secs_f64() * 1e3,
                percentile(&t.latencies, 0.99).as_secs_f64() * 1e3,
                t.commits as f64 / t.steps.max(1) as f64,
                t.commits as f64 / t.groups.max(1) as f64,
            ));
        }
        group.finish();
        for line in summary {
            eprintln!("{line}");
        }
    }
}

criterion_group!(benches, runs);
criterion_main!(benches);
