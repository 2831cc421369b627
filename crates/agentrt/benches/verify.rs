//! `verify` over a log of one million events: events per second, and the
//! peak heap of a walk over 10 000 events against one over the whole log
//! (streaming: it must not grow). `cargo bench -p agentrt --bench verify`;
//! figures in docs/performance.md.
//!
//! The database is built once through the store's write API in the shape
//! of the governed loop (two write groups per step: decision, policy and
//! tool start; result and the next step's start), and cached under
//! `target/verify-bench/`, keyed by the schema, so reruns start at once.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentrt::store::engine::schema::MIGRATION_1;
use agentrt::store::{NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard};
use agentrt::verify::{self, VerifyOptions};
use agentrt::{Durability, EventType, Store, StoreOptions, Timestamp, model::StepStatus};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: forwarding the caller's layout to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Events in the benchmark log.
const EVENTS: i64 = 1_000_000;
/// Steps per run.
const STEPS_PER_RUN: u64 = 100;

fn cached_path() -> PathBuf {
    let key = blake3::hash(MIGRATION_1.as_bytes()).to_hex();
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/verify-bench")
        .join(format!("events-1m-{}.db", &key[..16]))
}

fn t(n: u64) -> Timestamp {
    Timestamp::from_unix_nanos(1_790_000_000_000_000_000 + i128::from(n) * 1_000_000)
}

/// Writes runs of [`STEPS_PER_RUN`] steps until the log holds [`EVENTS`]
/// events: per run, 2 events; per step, 3 + 2 events in two write groups.
fn build(path: &PathBuf) {
    let dir = path.parent().expect("a directory");
    std::fs::create_dir_all(dir).expect("mkdir");
    let partial = path.with_extension("partial");
    let _ = std::fs::remove_file(&partial);
    let store = Store::open_with(
        &partial,
        StoreOptions {
            durability: Durability::Normal,
            ..StoreOptions::default()
        },
    )
    .expect("store");
    let limits = r#"{"max_consecutive_failures":3,"max_steps":200,"max_identical_calls":3}"#;
    let started = Instant::now();
    let mut events: i64 = 0;
    let mut clock = 0u64;
    let mut tick = || {
        clock += 1;
        t(clock)
    };
    let mut run_no = 0u64;
    while events < EVENTS {
        let run = format!("run-{run_no:06}");
        run_no += 1;
        let at = tick();
        store
            .write(|tx| {
                tx.insert_run(&NewRun {
                    id: &run,
                    goal: "summarise the open issues and file a report",
                    limits_json: limits,
                    created_at: at,
                    lease_owner: "bench",
                    lease_expires_at: t(1 << 40),
                })?;
                tx.append_event(
                    &run,
                    "",
                    &at,
                    EventType::RunCreated,
                    r#"{"goal":"summarise the open issues and file a report"}"#,
                )?;
                tx.append_event(&run, "", &at, EventType::RunStarted, "{}")?;
                tx.update_run(
                    &run,
                    &RunGuard::default(),
                    &RunChange {
                        step_count_add: 1,
                        ..RunChange::default()
                    },
                )?;
                tx.insert_step(&NewStep {
                    id: &format!("{run}-s0"),
                    run_id: &run,
                    index: 0,
                    status: StepStatus::Deciding,
                    started_at: at,
                })?;
                tx.append_event(
                    &run,
                    &format!("{run}-s0"),
                    &at,
                    EventType::StepStarted,
                    r#"{"index":0}"#,
                )
            })
            .expect("run");
        events += 3;
        for i in 0..STEPS_PER_RUN {
            let step = format!("{run}-s{i}");
            let args = format!(r#"{{"path":"issues/{i}.md"}}"#);
            let decision = format!(r#"{{"kind":"tool_call","tool":"fs_read","args":{args}}}"#);
            let policy = r#"{"outcome":"allow","reason":"read-only tools are allowed"}"#;
            let at = tick();
            store
                .write(|tx| {
                    tx.update_step(
                        &step,
                        &StepGuard::default(),
                        &StepChange {
                            status: Some(StepStatus::Executing),
                            decision_json: Some(&decision),
                            policy_json: Some(policy),
                            spec_hash: Some(
                                "5f0c6b1e9d3a47c28e1f04b6a9d2c7e35b8a1f60d4c9e27b3a58f1d06c4b9e2a",
                            ),
                            policy_id: Some("default/v1"),
                            ..StepChange::default()
                        },
                    )?;
                    tx.append_event(&run, &step, &at, EventType::StepDecided, &decision)?;
                    tx.append_event(&run, &step, &at, EventType::StepPolicy, policy)?;
                    tx.append_event(
                        &run,
                        &step,
                        &at,
                        EventType::StepToolStarted,
                        &format!(r#"{{"tool":"fs_read","args":{args}}}"#),
                    )
                })
                .expect("start");
            let at = tick();
            let observation = format!(
                r#"{{"kind":"tool_result","content":{{"text":"issue {i}: the parser drops trailing commas"}},"summary":"read issues/{i}.md"}}"#
            );
            let next = format!("{run}-s{}", i + 1);
            store
                .write(|tx| {
                    tx.update_step(
                        &step,
                        &StepGuard::default(),
                        &StepChange {
                            status: Some(StepStatus::Done),
                            observation: Some((
                                &observation,
                                "9b2e4c1d7a6f3e58b0c9d2a1f4e7b6c3d8a5f2e1b4c7d0a3f6e9b2c5d8a1f4e7",
                            )),
                            finished_at: Some(Some(at)),
                            ..StepChange::default()
                        },
                    )?;
                    tx.append_event(&run, &step, &at, EventType::StepToolFinished, &observation)?;
                    tx.update_run(
                        &run,
                        &RunGuard::default(),
                        &RunChange {
                            step_count_add: 1,
                            active_ms_add: 3,
                            ..RunChange::default()
                        },
                    )?;
                    tx.insert_step(&NewStep {
                        id: &next,
                        run_id: &run,
                        index: i + 1,
                        status: StepStatus::Deciding,
                        started_at: at,
                    })?;
                    tx.append_event(
                        &run,
                        &next,
                        &at,
                        EventType::StepStarted,
                        &format!(r#"{{"index":{}}}"#, i + 1),
                    )
                })
                .expect("finish");
            events += 5;
            if events >= EVENTS {
                break;
            }
        }
    }
    drop(store);
    std::fs::rename(&partial, path).expect("rename");
    eprintln!(
        "built {} ({events} events, {run_no} runs) in {:.1} s",
        path.display(),
        started.elapsed().as_secs_f64()
    );
}

fn log() -> (Store, u64) {
    let path = cached_path();
    if !path.exists() {
        build(&path);
    }
    let store = Store::open_existing(&path, true).expect("open");
    let head = verify::chain_head(&store).expect("head").expect("events");
    (store, u64::try_from(head.seq).unwrap_or(0))
}

/// The peak heap of one walk, above what was live before it.
fn peak_of(store: &Store, to: i64) -> usize {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let report = verify::verify_events(store, 1, to).expect("verify");
    assert!(report.intact(), "{report:?}");
    PEAK.load(Ordering::Relaxed) - base
}

fn bench(c: &mut Criterion) {
    let (store, events) = log();
    let small = peak_of(&store, 10_000);
    let whole = peak_of(&store, 0);
    eprintln!("peak heap of a walk: {small} B over 10 000 events, {whole} B over {events} events");

    let mut group = c.benchmark_group("verify");
    group.sample_size(10);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(20));
    group.throughput(Throughput::Elements(events));
    group.bench_function("whole_log_1m_events", |b| {
        b.iter(|| {
            let report = verify::verify(&store, &VerifyOptions::default()).expect("verify");
            assert!(report.intact());
            report.checked
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
