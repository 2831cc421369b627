//! Planning a call in a long session (issue 33): one new call of a tool
//! that is not read-only (the fixture's `read_file`, classified
//! `local_mutation`, allowed), whole, through [`Proxy::call`] in process,
//! after the session has made 10, 1 000 or 100 000 calls.
//!
//! The history is written fast and directly, as a session leaves it: each
//! past call a run of the same tool with other arguments (another request
//! key), begun with its index row in its first write group, its tool run
//! with a result (a known outcome), the run completed and its row settled
//! (closed); and five calls of another tool, each waiting on an approval
//! (their rows open). The calls go through a gate of their own over the
//! same database, many at once (the store commits them in groups).
//!
//! Timed on each session, every call a new request (a counter in the
//! path), so that it goes through every rule of design §30:
//!
//! - **alone**: a change that would ask for an approval while five wait
//!   (`max_pending` 5): rules 1–7 read the session and the call is
//!   `BLOCKED`, nothing written — planning alone;
//! - **whole call**: a change that runs: planning, its run begun (its
//!   row claimed, the previous call's settled), the tool called upstream,
//!   the outcome recorded; each adds one settled row to the history.
//!
//! Criterion measures each alone; then, printed, an interleaved table
//! (`ROUNDS` rounds after `WARM`, each one call of each kind on each
//! session, their order rotating, so that they share the machine's
//! drift), medians and 90th percentiles.
//!
//! `cargo bench -p agentrt-proxy --bench planning`; figures in
//! docs/performance.md. `cargo test -p agentrt-proxy --bench planning`
//! (CI) builds two small sessions, makes a few calls of each kind and
//! checks every answer and what they left open in the index.

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentrt::store::SqlValue;
use agentrt::{
    Canonical, Decision, DefaultPolicy, Durability, Gate, GateConfig, Labels, Limits, Store,
    StoreOptions, Tool, ToolResult, ToolSpec, VerdictOutcome, tool_fn,
};
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{
    Answer, CALLS_TABLE, INDEX, LoadedServers, Proxy, build_proxy, load_all, request_key,
};
use criterion::{Criterion, criterion_group, criterion_main};

/// The model-visible name of the fixture's `read_file`.
const TOOL: &str = "fs_read_file";
/// Another tool of the session, whose calls wait on approvals.
const OTHER: &str = "fs_other";
/// The session.
const SESSION: &str = "plan";
/// Calls of [`OTHER`] waiting in every history.
const WAITING: usize = 5;
/// Past calls written at once (the store commits them in groups).
const WRITERS: usize = 64;

/// The session sizes measured, and those the test mode checks.
const SIZES: [usize; 3] = [10, 1_000, 100_000];
const TEST_SIZES: [usize; 2] = [10, 300];

/// Whether this is a measurement (`cargo bench`) or the test mode.
fn measuring() -> bool {
    std::env::args().any(|a| a == "--bench")
}

/// Makes every timed call's arguments distinct (a new request, a new run).
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_args() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(r#"{{"path":"timed/{n}.txt"}}"#)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

/// The gate the history is written through: the two tools, terminal as
/// the proxy registers them, under the core's default policy (a local
/// mutation allowed, a remote one asks).
fn history_gate(store: &Store) -> Gate {
    let answer = |spec: ToolSpec| -> Arc<dyn Tool> {
        Arc::new(tool_fn(spec, |call| async move {
            Ok(ToolResult::raw(call.args.as_str()))
        }))
    };
    let tools = vec![
        answer(ToolSpec::new(TOOL, "Reads a file.", agentrt::SideEffect::LocalMutation).terminal()),
        answer(
            ToolSpec::new(OTHER, "Sends a file.", agentrt::SideEffect::RemoteMutation).terminal(),
        ),
    ];
    Gate::new(GateConfig::new(store.clone(), DefaultPolicy, tools)).expect("gate")
}

/// One past call of `tool` with `args`, as the proxy makes it: its index
/// row in the run's first write group (`settled`: closed, as the proxy
/// leaves the row of a call whose outcome it saw), then the call.
async fn past_call(gate: &Gate, tool: &str, args: &str, settled: bool) {
    let run_id = format!("{SESSION}.{}", &agentrt::ids::random_id()[..16]);
    let key = request_key(tool, &Canonical::parse_str(args).expect("args"));
    let side_effect = if tool == TOOL {
        "local_mutation"
    } else {
        "remote_mutation"
    };
    let labels = Labels::parse([
        format!("mcp.session={SESSION}"),
        "mcp.server=fs".to_owned(),
        format!("mcp.tool={tool}"),
    ])
    .expect("labels");
    let limits = Limits {
        max_steps: 3,
        max_consecutive_tool_failures: 3,
        loop_threshold: 3,
        ..Limits::default()
    };
    let (row_run, row_tool) = (run_id.clone(), tool.to_owned());
    let rows: agentrt::gate::SatelliteRows = Box::new(move |tx| {
        let at = agentrt::Timestamp::now().to_string();
        let closed_at = if settled { at.as_str() } else { "" };
        tx.insert_row(
            CALLS_TABLE,
            &[
                ("run_id", SqlValue::from(row_run.as_str())),
                ("session", SqlValue::from(SESSION)),
                ("request_key", SqlValue::from(key.as_str())),
                ("tool", SqlValue::from(row_tool.as_str())),
                ("side_effect", SqlValue::from(side_effect)),
                ("created_at", SqlValue::from(at.as_str())),
                ("open", SqlValue::Int(i64::from(!settled))),
                ("closed_at", SqlValue::from(closed_at)),
            ],
        )
        .map(|_| ())
    });
    let mut session = gate
        .begin_with_rows(Some(&run_id), &format!("call {tool}"), limits, labels, rows)
        .await
        .expect("begin");
    session.step().await.expect("step");
    let verdict = session
        .propose(Decision::tool_call(tool, args.as_bytes().to_vec()))
        .await
        .expect("propose");
    match verdict.outcome {
        VerdictOutcome::Allowed => {
            session.execute().await.expect("execute");
            assert!(session.done(), "a terminal tool's result completes the run");
        }
        VerdictOutcome::Pending => {}
        other => panic!("a past call was {other:?}"),
    }
    session.close().await.expect("close");
}

/// Writes a session of `past` calls of [`TOOL`] (settled) and
/// [`WAITING`] calls of [`OTHER`] (waiting) into `store`.
async fn write_history(store: &Store, past: usize) {
    let gate = Arc::new(history_gate(store));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let gate = Arc::clone(&gate);
        writers.push(tokio::spawn(async move {
            for i in (w..past).step_by(WRITERS) {
                past_call(&gate, TOOL, &format!(r#"{{"path":"past/{i}.txt"}}"#), true).await;
            }
        }));
    }
    for writer in writers {
        writer.await.expect("writer");
    }
    for i in 0..WAITING {
        past_call(&gate, OTHER, &format!(r#"{{"path":"out/{i}.txt"}}"#), false).await;
    }
}

/// A session of `past` calls and the two proxies timed on it.
struct Session {
    /// Calls a change that runs (planning, the run, the tool, the
    /// answer).
    runs: Proxy,
    /// Calls a change that would ask for an approval while
    /// [`WAITING`] wait (`max_pending`): rules 1–7 read, `BLOCKED`,
    /// nothing written — planning alone.
    asks: Proxy,
    store: Store,
    _loaded: [LoadedServers; 2],
    _dir: tempfile::TempDir,
}

/// A proxy as `serve` builds it, its configuration in `dir` (`read_file`
/// classified as `rule`, the database `db`, the fixture at `url`), over
/// `store`.
async fn proxy_in(
    dir: &std::path::Path,
    db: &std::path::Path,
    url: &str,
    fields: &str,
    rule: &str,
    store: &Store,
) -> (Proxy, LoadedServers) {
    std::fs::create_dir_all(dir).expect("dir");
    let config_path = support::configure_on(dir, &db.to_string_lossy(), url, fields, rule).await;
    let config = agentrt_proxy::read_config(&config_path).expect("config");
    let loaded = load_all(&config).await.expect("load");
    let proxy = build_proxy(
        Arc::new(config),
        store.clone(),
        &loaded,
        Box::new(std::io::sink()),
    )
    .expect("proxy");
    (proxy, loaded)
}

/// A database holding a session of `past` calls, and its two proxies.
async fn session_of(url: &str, past: usize) -> Session {
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("proxy.db");
    let store = Store::open_with(
        &db,
        StoreOptions {
            extensions: vec![INDEX],
            durability: Durability::Normal,
        },
    )
    .expect("store");
    let began = Instant::now();
    write_history(&store, past).await;
    if measuring() {
        eprintln!("history of {past} calls written in {:?}", began.elapsed());
    }
    let fields = format!(r#""session": "{SESSION}", "max_pending": {WAITING}"#);
    let (runs, runs_loaded) = proxy_in(
        &dir.path().join("runs"),
        &db,
        url,
        &fields,
        r#"{"side_effect": "local_mutation", "timeout": "5s"}"#,
        &store,
    )
    .await;
    let (asks, asks_loaded) = proxy_in(
        &dir.path().join("asks"),
        &db,
        url,
        &fields,
        r#"{"side_effect": "remote_mutation", "timeout": "5s"}"#,
        &store,
    )
    .await;
    Session {
        runs,
        asks,
        store,
        _loaded: [runs_loaded, asks_loaded],
        _dir: dir,
    }
}

/// One new call of a change that runs: its arguments come back.
async fn call(proxy: &Proxy) {
    let args = next_args();
    let answer = proxy
        .call(TOOL, Some(args.as_bytes()), None)
        .await
        .expect("offered");
    match answer {
        Answer::Result { text, .. } => assert_eq!(text, args),
        other => panic!("not a result: {other:?}"),
    }
}

/// One new call of a change that would ask: blocked by `max_pending`.
async fn blocked(proxy: &Proxy) {
    let args = next_args();
    let answer = proxy
        .call(TOOL, Some(args.as_bytes()), None)
        .await
        .expect("offered");
    match answer {
        Answer::Prose { text, .. } => assert!(
            text.starts_with(&format!(
                "BLOCKED: {WAITING} requests of this session already wait"
            )),
            "{text}"
        ),
        other => panic!("not blocked: {other:?}"),
    }
}

/// The rows of the session still open: what the next call's planning
/// reads for rule 7.
fn open_rows(store: &Store) -> usize {
    store
        .rows_where(
            CALLS_TABLE,
            &[
                ("session", SqlValue::from(SESSION)),
                ("open", SqlValue::Int(1)),
            ],
            0,
        )
        .expect("rows")
        .len()
}

/// Rounds of the interleaved table, and its warm-up rounds (fewer when
/// `PLANNING_ROUNDS` says: a build whose planning is slow).
const ROUNDS: usize = 300;
const WARM: usize = 30;

fn rounds() -> (usize, usize) {
    match std::env::var("PLANNING_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
    {
        Some(rounds) => (rounds, 1),
        None => (ROUNDS, WARM),
    }
}

/// The `q` quantile of `samples` (sorted here), in microseconds.
fn quantile(samples: &mut [Duration], q: f64) -> f64 {
    samples.sort();
    let at = ((samples.len() as f64 - 1.0) * q).round() as usize;
    samples.get(at).map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// Each round times one call of each kind on each session, the sessions'
/// order rotating, so that they share the machine's drift; prints the
/// medians and 90th percentiles.
fn interleaved(rt: &tokio::runtime::Runtime, sessions: &[(usize, Session)]) {
    let (rounds, warm) = rounds();
    let mut runs: Vec<Vec<Duration>> = vec![Vec::new(); sessions.len()];
    let mut asks: Vec<Vec<Duration>> = vec![Vec::new(); sessions.len()];
    for round in 0..warm + rounds {
        for k in 0..sessions.len() {
            let at = (round + k) % sessions.len();
            let session = &sessions[at].1;
            let began = Instant::now();
            rt.block_on(blocked(&session.asks));
            let asked = began.elapsed();
            let began = Instant::now();
            rt.block_on(call(&session.runs));
            let ran = began.elapsed();
            if round >= warm {
                asks[at].push(asked);
                runs[at].push(ran);
            }
        }
    }
    println!(
        "\n{rounds} rounds, interleaved (µs): past calls | planning alone p50 p90 | whole call p50 p90"
    );
    for (at, (past, _)) in sessions.iter().enumerate() {
        println!(
            "{past:>7} | {:>8.0} {:>8.0} | {:>8.0} {:>8.0}",
            quantile(&mut asks[at], 0.5),
            quantile(&mut asks[at], 0.9),
            quantile(&mut runs[at], 0.5),
            quantile(&mut runs[at], 0.9),
        );
    }
}

fn planning(c: &mut Criterion) {
    let rt = runtime();
    let (url, _seen) = rt.block_on(serve(Mode::Json));
    let sizes: &[usize] = if measuring() { &SIZES } else { &TEST_SIZES };
    let sessions: Vec<(usize, Session)> = sizes
        .iter()
        .map(|&past| (past, rt.block_on(session_of(&url, past))))
        .collect();
    if !measuring() {
        // The test mode: a few calls of each kind, each answered as it
        // should be; the rows left open are the waiting ones and the last
        // call's (settled by the next planning).
        for (past, session) in &sessions {
            for _ in 0..3 {
                rt.block_on(call(&session.runs));
                rt.block_on(blocked(&session.asks));
            }
            let open = open_rows(&session.store);
            assert!(open <= WAITING + 1, "{open} rows open after {past} calls");
            eprintln!("planning: after {past} past calls, each call answered; {open} rows open");
        }
        return;
    }
    let mut group = c.benchmark_group("planning");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for (past, session) in &sessions {
        group.bench_function(format!("alone/{past}_past_calls"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        blocked(&session.asks).await;
                    }
                    start.elapsed()
                })
            })
        });
        group.bench_function(format!("whole_call/{past}_past_calls"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        call(&session.runs).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    group.finish();
    interleaved(&rt, &sessions);
}

criterion_group!(benches, planning);
criterion_main!(benches);
