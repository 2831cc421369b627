//! The store on PostgreSQL beside SQLite: the cost of a step of one run on
//! each (PostgreSQL with `synchronous_commit = on`, its default; SQLite
//! with `synchronous = FULL`), the round trips a step takes, and steps per
//! second with 64 runs spread over 4 processes against one run alone.
//!
//! Needs a server: `cargo xtask postgres -- cargo bench -p agentrt-postgres
//! --features real-postgres --bench postgres` (a throwaway cluster with
//! the server's default durability). Figures in docs/performance.md.

use std::process::Command;
use std::time::{Duration, Instant};

use agentrt::{Durability, Store, StoreOptions};
use criterion::{BenchmarkId, Criterion, Throughput};

#[path = "../../agentrt/benches/scripted/mod.rs"]
mod scripted;

/// Steps per run.
const STEPS: u64 = 20;
/// Runs and processes of the parallel case.
const RUNS: u64 = 64;
const PROCESSES: u64 = 4;
/// Set in a worker process: how many runs it drives at once.
const WORKER: &str = "AGENTRT_BENCH_WORKER_RUNS";
/// Runs the parallel case this many times outside criterion.
const PARALLEL: &str = "AGENTRT_BENCH_PARALLEL";
/// Runs this many runs one after another outside criterion.
const ONE_AFTER_ANOTHER: &str = "AGENTRT_BENCH_ONE_AFTER_ANOTHER";

fn location() -> String {
    std::env::var("AGENTRT_TEST_POSTGRES").expect(
        "AGENTRT_TEST_POSTGRES is not set: run with `cargo xtask postgres -- cargo bench -p agentrt-postgres --features real-postgres --bench postgres`",
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime")
}

/// Drives `runs` runs of `STEPS` steps at once on `store`.
fn drive(rt: &tokio::runtime::Runtime, store: &Store, runs: u64) {
    rt.block_on(async {
        let tasks: Vec<_> = (0..runs)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { scripted::one_run(&store, STEPS, 0).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("a run");
        }
    });
}

fn step_cost(c: &mut Criterion) {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open_with(
        dir.path().join("bench.db"),
        StoreOptions {
            durability: Durability::Full,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let postgres = agentrt_postgres::open(&location()).unwrap();

    // Round trips of one run, once, for the figures.
    let before = agentrt_postgres::round_trips();
    drive(&rt, &postgres, 1);
    let trips = agentrt_postgres::round_trips() - before;
    eprintln!(
        "postgres: {trips} round trips for one run of {STEPS} steps ({:.1} per step)",
        trips as f64 / STEPS as f64
    );

    let mut group = c.benchmark_group("one_run");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(STEPS));
    for (name, store) in [("sqlite_full", &sqlite), ("postgres", &postgres)] {
        group.bench_with_input(BenchmarkId::new("steps", name), store, |b, store| {
            b.iter(|| drive(&rt, store, 1));
        });
    }
    group.finish();
}

/// Starts `PROCESSES` copies of this binary, each driving its share of
/// `RUNS` runs at once; returns how long the work took, from the moment
/// every worker had its store open (told to go together) until the last
/// one finished: the steps per second of the runs, not of starting
/// processes and connecting.
fn processes() -> Duration {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env(WORKER, (RUNS / PROCESSES).to_string())
                // A worker only works: it never starts workers of its own.
                .env_remove(PARALLEL)
                .env_remove(ONE_AFTER_ANOTHER)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("a worker starts")
        })
        .collect();
    for child in &mut children {
        let mut ready = String::new();
        BufReader::new(child.stdout.as_mut().unwrap())
            .read_line(&mut ready)
            .unwrap();
        assert_eq!(ready.trim(), "ready", "a worker did not open its store");
    }
    let started = Instant::now();
    for child in &mut children {
        writeln!(child.stdin.as_mut().unwrap(), "go").unwrap();
    }
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a worker failed");
    }
    started.elapsed()
}

fn parallel(c: &mut Criterion) {
    let mut group = c.benchmark_group("postgres_parallel");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(RUNS * STEPS));
    group.bench_function("64_runs_4_processes", |b| {
        b.iter_custom(|iterations| (0..iterations).map(|_| processes()).sum())
    });
    group.finish();
}

/// The machine's busy CPU time so far (every process, the server's
/// included), from `/proc/stat`, in clock ticks.
fn busy_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user, nice, system, then idle and iowait (not busy), irq, softirq.
    fields.iter().take(3).sum::<u64>() + fields.iter().skip(5).take(2).sum::<u64>()
}

/// Runs `runs` runs one after another on one store (statements prepared
/// by a first run) and reports the wall time and the machine's CPU time
/// per step: what one run costs, client and server together.
fn one_after_another(runs: u64) {
    let store = agentrt_postgres::open(&location()).expect("a store");
    let rt = runtime();
    drive(&rt, &store, 1);
    let (started, busy) = (Instant::now(), busy_ticks());
    let trips = agentrt_postgres::round_trips();
    for _ in 0..runs {
        drive(&rt, &store, 1);
    }
    let wall = started.elapsed();
    let ticks = busy_ticks() - busy;
    let trips = agentrt_postgres::round_trips() - trips;
    let steps = (runs * STEPS) as f64;
    // Clock ticks are 10 ms on Linux (USER_HZ = 100).
    eprintln!(
        "one run after another: {:.3} ms wall and {:.3} ms CPU per step, {:.2} round trips per step ({runs} runs)",
        wall.as_secs_f64() * 1000.0 / steps,
        ticks as f64 * 10.0 / steps,
        trips as f64 / steps
    );
}

/// Runs the parallel case `times` times and reports, for each, the steps
/// per second and the machine's CPU time per step while the runs ran.
fn parallel_plain(times: u64) {
    for _ in 0..times {
        let busy = busy_ticks();
        let took = processes();
        let ticks = busy_ticks() - busy;
        let steps = (RUNS * STEPS) as f64;
        eprintln!(
            "64 runs over 4 processes: {:.0} steps per second, {:.3} ms CPU per step",
            steps / took.as_secs_f64(),
            ticks as f64 * 10.0 / steps
        );
    }
}

fn main() {
    // A worker first, whatever else the environment says.
    if let Ok(runs) = std::env::var(WORKER) {
        let store = agentrt_postgres::open(&location()).expect("the worker's store");
        // Open, then wait for the word to go with the others.
        println!("ready");
        let mut go = String::new();
        std::io::stdin().read_line(&mut go).expect("the word to go");
        let before = agentrt_postgres::round_trips();
        drive(&runtime(), &store, runs.parse().expect("a number of runs"));
        eprintln!(
            "worker: {} round trips for {} write groups",
            agentrt_postgres::round_trips() - before,
            store.write_groups()
        );
        return;
    }
    if let Ok(times) = std::env::var(PARALLEL) {
        parallel_plain(times.parse().expect("a number of times"));
        return;
    }
    if let Ok(runs) = std::env::var(ONE_AFTER_ANOTHER) {
        one_after_another(runs.parse().expect("a number of runs"));
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    step_cost(&mut c);
    parallel(&mut c);
    c.final_summary();
}
