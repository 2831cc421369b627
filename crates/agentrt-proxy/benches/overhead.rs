//! The proxy's per-call overhead (issue 12): a `tools/call` through the
//! proxy against the same call made directly with the same client, the MCP
//! fixture server (HTTP on 127.0.0.1, in this process) upstream.
//!
//! - **direct**: the fixture's `read_file` called through `agentrt-mcp`'s
//!   tool (the client the proxy itself uses upstream), on a connection of
//!   its own.
//! - **through**: [`Proxy::call`] in process, the proxy built as `serve`
//!   builds it (its index, its policy, `read_file` classified `read_only`),
//!   its database a file at `synchronous=NORMAL` or `FULL`. Every call is a
//!   new request (a counter in the path), so it is a new run.
//! - **raw commit**: one `INSERT` of 1 KiB committed on a WAL file in the
//!   same directory with rusqlite, no runtime: what an fsync'd commit costs
//!   this disk.
//! - **Cedar** (NORMAL only): the proxy deciding by a Cedar policy of 100
//!   policies (all scoped to the tool) against the same proxy deciding by
//!   the class outcomes, in alternation.
//! - **host** (FULL, then NORMAL through the configuration's
//!   `"durability"`): the `agentrt-proxy serve` binary over stdio with an
//!   rmcp client, against the fixture called directly with rmcp's HTTP
//!   client.
//!
//! Criterion measures each alone (means and medians). Then, printed, the
//! percentiles: `ROUNDS` rounds after `WARM` unmeasured ones, each round one
//! direct call, one call through and one raw commit, their order rotating,
//! so the three share the machine's drift; with the commits and write
//! groups per call the store counted.
//!
//! `cargo bench -p agentrt-proxy --bench overhead`; figures in
//! docs/performance.md. `cargo test -p agentrt-proxy --bench overhead`
//! (CI) runs each path once and a short table, checking every answer.

#[path = "../tests/support/mod.rs"]
mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentrt::{Cancel, Canonical, Durability, Store, StoreOptions, Tool, ToolCall};
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Answer, Config, INDEX, LoadedServers, Proxy, build_proxy, load_all};
use criterion::{Criterion, criterion_group, criterion_main};
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};

/// Measured rounds of the percentile table, per durability.
const ROUNDS: usize = 3000;
/// Unmeasured rounds before them.
const WARM: usize = 300;
/// The same when the bench only checks that it works (`cargo test
/// --bench overhead`, as CI runs it): criterion's test mode, without
/// `--bench` on the command line.
const TEST_ROUNDS: usize = 30;
const TEST_WARM: usize = 3;

/// The rounds and warm-up rounds of this invocation.
fn rounds() -> (usize, usize) {
    if std::env::args().any(|a| a == "--bench") {
        (ROUNDS, WARM)
    } else {
        (TEST_ROUNDS, TEST_WARM)
    }
}
/// The model-visible name of the fixture's `read_file`.
const TOOL: &str = "fs_read_file";

/// Makes every call's arguments distinct (a new request, a new run).
static COUNTER: AtomicU64 = AtomicU64::new(0);

fn next_args() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(r#"{{"path":"bench/{n}.txt"}}"#)
}

/// The fixture, a configuration naming it (`read_file` read-only) and its
/// pin, in a temporary directory.
struct Setup {
    dir: tempfile::TempDir,
    url: String,
    config_path: std::path::PathBuf,
    config: Config,
}

/// How the proxy's configuration classes the fixture's `read_file`.
const READ_FILE_RULE: &str = r#"{"side_effect": "read_only", "timeout": "5s"}"#;

async fn setup() -> Setup {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let config_path =
        support::configure(dir.path(), &url, r#""session": "bench""#, READ_FILE_RULE).await;
    let config = agentrt_proxy::read_config(&config_path).expect("config");
    Setup {
        dir,
        url,
        config_path,
        config,
    }
}

/// The fixture's tool as loaded for a direct call (its own connection).
async fn direct_tool(config: &Config) -> (Arc<dyn Tool>, LoadedServers) {
    let loaded = load_all(config).await.expect("load");
    let tool = Arc::clone(loaded.tools.get(TOOL).expect("the tool"));
    (tool, loaded)
}

async fn call_direct(tool: &dyn Tool) {
    let args = next_args();
    let call = ToolCall {
        run_id: "bench".into(),
        step_id: "bench".into(),
        args: Canonical::parse(args.as_bytes()).expect("args"),
        cancel: Cancel::never(),
    };
    let result = tool.call(call).await.expect("a result");
    // The fixture's text (the arguments), as a JSON string.
    let text: String = serde_json::from_slice(&result.content).expect("a string");
    assert_eq!(text, args);
}

/// The proxy, built as `serve` builds it, on `db` at `durability`.
async fn through_proxy(
    config: &Config,
    db: &Path,
    durability: Durability,
) -> (Proxy, LoadedServers, Store) {
    let mut config = config.clone();
    config.database = agentrt_proxy::Database::File(db.to_owned());
    let store = Store::open_with(
        db,
        StoreOptions {
            extensions: vec![INDEX],
            durability,
        },
    )
    .expect("store");
    let loaded = load_all(&config).await.expect("load");
    let proxy = build_proxy(
        Arc::new(config),
        store.clone(),
        &loaded,
        Box::new(std::io::sink()),
    )
    .expect("proxy");
    (proxy, loaded, store)
}

async fn call_through(proxy: &Proxy) {
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

/// A WAL file in `dir` with one table, at `durability`.
fn raw_conn(dir: &Path, durability: Durability) -> rusqlite::Connection {
    let name = if durability == Durability::Full {
        "raw-full.db"
    } else {
        "raw-normal.db"
    };
    let conn = rusqlite::Connection::open(dir.join(name)).expect("raw db");
    conn.query_row("PRAGMA journal_mode=WAL", [], |_| Ok(()))
        .expect("wal");
    let sync = if durability == Durability::Full {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.pragma_update(None, "synchronous", sync)
        .expect("synchronous");
    conn.execute_batch("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        .expect("table");
    conn
}

/// One raw commit: a 1 KiB row inserted in its own transaction.
fn raw_commit(conn: &rusqlite::Connection, body: &str) {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .expect("begin");
    tx.execute("INSERT INTO t (body) VALUES (?1)", [body])
        .expect("insert");
    tx.commit().expect("commit");
}

/// The proxy binary over stdio and the fixture over HTTP, as a host sees
/// them (the binary's database at its default durability, FULL).
struct Host {
    proxy: RunningService<RoleClient, ()>,
    direct: RunningService<RoleClient, ()>,
}

async fn host(setup: &Setup, config_path: &Path) -> Host {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"));
    command.args(["serve", "--config", &config_path.to_string_lossy()]);
    let (transport, _) = TokioChildProcess::builder(command)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let proxy = ().serve(transport).await.expect("the proxy's handshake");
    let direct =
        ().serve(StreamableHttpClientTransport::from_uri(setup.url.as_str()))
            .await
            .expect("the fixture's handshake");
    Host { proxy, direct }
}

async fn call_host(client: &RunningService<RoleClient, ()>, name: &str) {
    let args = next_args();
    let serde_json::Value::Object(map) = serde_json::from_str(&args).expect("json") else {
        unreachable!("an object");
    };
    let result = client
        .call_tool(CallToolRequestParams::new(name.to_owned()).with_arguments(map))
        .await
        .expect("a result");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = result.content.first().and_then(|c| c.as_text());
    assert_eq!(text.map(|t| t.text.as_str()), Some(args.as_str()));
}

fn label(durability: Durability) -> &'static str {
    if durability == Durability::Full {
        "full"
    } else {
        "normal"
    }
}

/// Criterion: each path alone, `iters` calls timed as a whole.
fn criterion_benches(c: &mut Criterion) {
    let rt = runtime();
    let setup = rt.block_on(setup());
    let (tool, direct_loaded) = rt.block_on(direct_tool(&setup.config));
    let mut group = c.benchmark_group("proxy_overhead");
    group.sample_size(30);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(8));
    group.bench_function("direct", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    call_direct(tool.as_ref()).await;
                }
                start.elapsed()
            })
        })
    });
    for durability in [Durability::Normal, Durability::Full] {
        let db = setup
            .dir
            .path()
            .join(format!("criterion-{}.db", label(durability)));
        let (proxy, loaded, _store) = rt.block_on(through_proxy(&setup.config, &db, durability));
        group.bench_function(format!("through_{}", label(durability)), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        call_through(&proxy).await;
                    }
                    start.elapsed()
                })
            })
        });
        let conn = raw_conn(setup.dir.path(), durability);
        let body = "r".repeat(1024);
        group.bench_function(format!("raw_commit_{}", label(durability)), |b| {
            b.iter(|| raw_commit(&conn, &body))
        });
        drop(proxy);
        rt.block_on(loaded.close());
    }
    group.finish();
    rt.block_on(direct_loaded.close());
}

/// The runtime, in a process with the allocator set as `agentrt-proxy`
/// sets it ([`agentrt::store::retain_freed_heap`]).
fn runtime() -> tokio::runtime::Runtime {
    agentrt::store::retain_freed_heap();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Sorted copies of `samples`' p50 and p99.
fn p50_p99(samples: &[Duration]) -> (Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    (percentile(&sorted, 0.50), percentile(&sorted, 0.99))
}

/// The p50 and p99 of each path's calls and of the paired differences.
fn report(what: &str, direct: &[Duration], through: &[Duration]) -> String {
    let (d50, d99) = p50_p99(direct);
    let (t50, t99) = p50_p99(through);
    let mut diffs: Vec<f64> = direct
        .iter()
        .zip(through)
        .map(|(d, t)| ms(*t) - ms(*d))
        .collect();
    diffs.sort_unstable_by(f64::total_cmp);
    let paired = diffs[(diffs.len() - 1) / 2];
    format!(
        "{what}: direct p50 {:.3} ms p99 {:.3} ms; through p50 {:.3} ms p99 {:.3} ms; \
         overhead p50 {:.3} ms p99 {:.3} ms (median of paired differences {paired:.3} ms)",
        ms(d50),
        ms(d99),
        ms(t50),
        ms(t99),
        ms(t50) - ms(d50),
        ms(t99) - ms(d99),
    )
}

/// The policies of the Cedar comparison.
const CEDAR_POLICIES: usize = 100;

/// A permit of every read, and `CEDAR_POLICIES - 1` forbids of other
/// prefixes, all of the fixture's tool.
fn cedar_policies() -> String {
    let action = format!(r#"action == Agentrt::Action::"{TOOL}""#);
    let mut text = format!("@id(\"reads\") permit(principal, {action}, resource);\n");
    for i in 1..CEDAR_POLICIES {
        text.push_str(&format!(
            "@id(\"p{i}\") forbid(principal, {action}, resource) when {{ context.args.path like \"never{i}/*\" }};\n"
        ));
    }
    text
}

/// The percentile table (see the file's header), printed on stderr.
fn percentiles(_: &mut Criterion) {
    let (rounds, warm) = rounds();
    let rt = runtime();
    let setup = rt.block_on(setup());
    let (tool, direct_loaded) = rt.block_on(direct_tool(&setup.config));
    let mut lines = Vec::new();
    for durability in [Durability::Normal, Durability::Full] {
        let label = label(durability);
        let db = setup.dir.path().join(format!("table-{label}.db"));
        let (proxy, loaded, store) = rt.block_on(through_proxy(&setup.config, &db, durability));
        let conn = raw_conn(setup.dir.path(), durability);
        let body = "r".repeat(1024);
        let (mut direct, mut through, mut raw) = (Vec::new(), Vec::new(), Vec::new());
        let (mut commits, mut groups) = (0, 0);
        rt.block_on(async {
            for round in 0..warm + rounds {
                if round == warm {
                    commits = store.commits();
                    groups = store.write_groups();
                }
                let (mut d, mut t, mut r) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
                for which in 0..3 {
                    let start = Instant::now();
                    match (round + which) % 3 {
                        0 => {
                            call_direct(tool.as_ref()).await;
                            d = start.elapsed();
                        }
                        1 => {
                            call_through(&proxy).await;
                            t = start.elapsed();
                        }
                        _ => {
                            // On the thread that drives this loop, not
                            // a worker: it blocks nothing else.
                            raw_commit(&conn, &body);
                            r = start.elapsed();
                        }
                    }
                }
                if round >= warm {
                    direct.push(d);
                    through.push(t);
                    raw.push(r);
                }
            }
        });
        let per_call = |n: u64| n as f64 / rounds as f64;
        let (commits, groups) = (
            per_call(store.commits() - commits),
            per_call(store.write_groups() - groups),
        );
        let (r50, r99) = p50_p99(&raw);
        lines.push(report(&format!("{label} (in process)"), &direct, &through));
        lines.push(format!(
            "{label}: {commits:.3} commits and {groups:.3} write groups per call; \
             raw 1 KiB commit p50 {:.3} ms p99 {:.3} ms; {commits:.0} raw commits p50 {:.3} ms",
            ms(r50),
            ms(r99),
            commits * ms(r50),
        ));
        drop(proxy);
        rt.block_on(loaded.close());
    }
    rt.block_on(direct_loaded.close());

    // At NORMAL, the class outcomes against a Cedar policy of
    // `CEDAR_POLICIES` policies, all scoped to the tool (each evaluated
    // on every call): what deciding by Cedar adds to a call.
    let cedar_file = setup.dir.path().join("bench.cedar");
    std::fs::write(&cedar_file, cedar_policies()).expect("the Cedar policy");
    let mut cedar_config = setup.config.clone();
    cedar_config.cedar = Some(cedar_file);
    let (classes, classes_loaded, _) = rt.block_on(through_proxy(
        &setup.config,
        &setup.dir.path().join("classes.db"),
        Durability::Normal,
    ));
    let (cedar, cedar_loaded, _) = rt.block_on(through_proxy(
        &cedar_config,
        &setup.dir.path().join("cedar.db"),
        Durability::Normal,
    ));
    let (mut by_classes, mut by_cedar) = (Vec::new(), Vec::new());
    rt.block_on(async {
        for round in 0..warm + rounds {
            let (mut c, mut p) = (Duration::ZERO, Duration::ZERO);
            for which in 0..2 {
                let start = Instant::now();
                if (round + which) % 2 == 0 {
                    call_through(&classes).await;
                    c = start.elapsed();
                } else {
                    call_through(&cedar).await;
                    p = start.elapsed();
                }
            }
            if round >= warm {
                by_classes.push(c);
                by_cedar.push(p);
            }
        }
    });
    lines.push(report(
        &format!(
            "normal, decided by a Cedar policy of {CEDAR_POLICIES} policies (\"direct\": by the class outcomes)"
        ),
        &by_classes,
        &by_cedar,
    ));
    drop((classes, cedar));
    rt.block_on(classes_loaded.close());
    rt.block_on(cedar_loaded.close());

    // The binary as a host launches it: at its default durability
    // (FULL), then with `"durability": "normal"` on a database of its own.
    let normal_dir = setup.dir.path().join("normal");
    std::fs::create_dir(&normal_dir).expect("dir");
    let normal_path = rt.block_on(support::configure_on(
        &normal_dir,
        "proxy.db",
        &setup.url,
        r#""session": "bench", "durability": "normal""#,
        READ_FILE_RULE,
    ));
    for (label, config_path) in [("full", &setup.config_path), ("normal", &normal_path)] {
        let host = rt.block_on(host(&setup, config_path));
        let (mut direct, mut through) = (Vec::new(), Vec::new());
        rt.block_on(async {
            for round in 0..warm + rounds / 3 {
                let (mut d, mut t) = (Duration::ZERO, Duration::ZERO);
                for which in 0..2 {
                    let start = Instant::now();
                    if (round + which) % 2 == 0 {
                        call_host(&host.direct, "read_file").await;
                        d = start.elapsed();
                    } else {
                        call_host(&host.proxy, TOOL).await;
                        t = start.elapsed();
                    }
                }
                if round >= warm {
                    direct.push(d);
                    through.push(t);
                }
            }
        });
        lines.push(report(
            &format!("{label} (host: the binary over stdio, rmcp clients)"),
            &direct,
            &through,
        ));
        rt.block_on(async {
            let _ = host.proxy.cancel().await;
            let _ = host.direct.cancel().await;
        });
    }

    eprintln!(
        "\nper-call overhead, {rounds} rounds after {warm} (host: {}):",
        rounds / 3
    );
    for line in lines {
        eprintln!("{line}");
    }
}

criterion_group!(benches, criterion_benches, percentiles);
criterion_main!(benches);
