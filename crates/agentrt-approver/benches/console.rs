//! The console's server time (issue 36): the runs page over 1 000 runs,
//! and the timeline of a run of about 10 000 events (2 000 steps), each
//! asked of the page's router in process (no socket), signed in with a
//! console session. Every read is capped, so neither grows with the
//! database. Target: ≤ 50 ms each.
//!
//! Criterion measures both; then, printed, `ROUNDS` of each after a
//! warm-up, with the median and the 99th percentile.
//!
//! `cargo bench -p agentrt-approver --bench console`; figures in
//! docs/performance.md. `cargo test -p agentrt-approver --bench console`
//! builds the database and answers each page once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrt::{
    Decision, DefaultPolicy, Driver, GateConfig, Labels, Limits, ScriptedAgent, SideEffect, Store,
    ToolResult, ToolSpec, tool_fn,
};
use agentrt_approver::StoreApprover;
use agentrt_approver::page::{PageConfig, console_token, router};
use agentrt_approver::signature::Secret;
use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt;
use tower::ServiceExt;

const SECRET: [u8; 32] = [3; 32];
const RUNS: usize = 1_000;
const LONG_STEPS: usize = 2_000;
const WARM: usize = 20;
const ROUNDS: usize = 200;

struct World {
    _dir: tempfile::TempDir,
    app: axum::Router,
    cookie: String,
    runtime: tokio::runtime::Runtime,
}

fn read_tool() -> Arc<dyn agentrt::Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("read it")) },
    ))
}

/// A database of `RUNS` short runs and one long one (`long`), and the
/// console over it, signed in.
fn world(long_steps: usize, runs: usize) -> World {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let db = dir.path().join("console.db");
    let store = Store::open(&db).expect("store");
    runtime.block_on(async {
        for i in 0..runs {
            let config = GateConfig::new(store.clone(), DefaultPolicy, vec![read_tool()]);
            let agent = ScriptedAgent::new([
                Decision::tool_call("fs_read", format!(r#"{{"path":"f{i}"}}"#)),
                Decision::complete("1"),
            ]);
            let labels = Labels::parse([format!("host=h{}", i % 10)]).expect("labels");
            Driver::new(config, agent)
                .expect("driver")
                .start_labelled(
                    Some(&format!("run-{i:04}")),
                    "read",
                    Limits::default(),
                    labels,
                )
                .await
                .expect("run");
        }
        let config = GateConfig::new(store.clone(), DefaultPolicy, vec![read_tool()]);
        let mut decisions: Vec<Decision> = (0..long_steps)
            .map(|i| {
                Decision::tool_call("fs_read", format!(r#"{{"path":"<script>{i}</script>"}}"#))
            })
            .collect();
        decisions.push(Decision::complete("1"));
        let limits = Limits::default().max_steps(long_steps as u64 + 1);
        Driver::new(config, ScriptedAgent::new(decisions))
            .expect("driver")
            .start(Some("long"), "read a lot", limits)
            .await
            .expect("long run");
    });
    let events = store
        .events_page_capped("long", 1, 0)
        .expect("events")
        .total;
    assert!(
        events >= 5 * long_steps as u64,
        "the long run has {events} events"
    );
    let approver = StoreApprover::open(&db, None).expect("approver");
    let console = approver.store().clone();
    let app = router(PageConfig {
        console: Some(console),
        ..PageConfig::new(Arc::new(approver), Secret::new(SECRET).expect("secret"))
    });
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64
        + 600;
    let token = console_token(
        &Secret::new(SECRET).expect("secret"),
        "bench",
        expires,
        "b1",
    );
    let signed_in = runtime.block_on(
        app.clone().oneshot(
            Request::get(format!("/ui/login?token={token}"))
                .body(Body::empty())
                .expect("request"),
        ),
    );
    let signed_in = signed_in.expect("sign in");
    let cookie = signed_in.headers()["set-cookie"]
        .to_str()
        .expect("cookie")
        .split(';')
        .next()
        .expect("pair")
        .to_owned();
    World {
        _dir: dir,
        app,
        cookie,
        runtime,
    }
}

impl World {
    /// Asks for `path` and reads the whole answer: its status and length.
    fn get(&self, path: &str) -> (u16, usize) {
        self.runtime.block_on(async {
            let response = self
                .app
                .clone()
                .oneshot(
                    Request::get(path)
                        .header("cookie", &self.cookie)
                        .body(Body::empty())
                        .expect("request"),
                )
                .await
                .expect("answer");
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .expect("body")
                .to_bytes();
            (status, body.len())
        })
    }
}

const PAGES: [(&str, &str); 3] = [
    ("runs page", "/ui/console"),
    (
        "runs page, filtered",
        "/ui/console?status=COMPLETED&label=host%3Dh3",
    ),
    ("10 000-event timeline", "/ui/console/runs/long"),
];

fn console(c: &mut Criterion) {
    let world = world(LONG_STEPS, RUNS);
    for (name, path) in PAGES {
        let (status, _) = world.get(path);
        assert_eq!(status, 200, "{path}");
        c.bench_function(name, |b| b.iter(|| world.get(path)));
    }
    if std::env::args().any(|a| a == "--bench") {
        table(&world);
    }
}

/// The median and 99th percentile of each page, interleaved.
fn table(world: &World) {
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); PAGES.len()];
    for round in 0..WARM + ROUNDS {
        for (i, (_, path)) in PAGES.iter().enumerate() {
            let began = Instant::now();
            world.get(path);
            if round >= WARM {
                times[i].push(began.elapsed());
            }
        }
    }
    println!("\npage                        p50        p99");
    for (i, (name, _)) in PAGES.iter().enumerate() {
        times[i].sort();
        let at = |q: f64| times[i][((times[i].len() as f64 - 1.0) * q) as usize];
        println!(
            "{name:<26} {:>7.2} ms {:>7.2} ms",
            at(0.5).as_secs_f64() * 1e3,
            at(0.99).as_secs_f64() * 1e3
        );
    }
}

criterion_group!(benches, console);
criterion_main!(benches);
