//! No request executes twice: random interleavings of calls (one at a
//! time and two at once), approvals, rejections and restarts of the proxy
//! (a new proxy on the same database, as after a crash between calls),
//! against the fixture server over HTTP. A change needs an approval; each
//! request runs upstream at most once, and only after an approval of it.

use std::collections::BTreeMap;
use std::sync::Arc;

use agentrt::operator::{DecideOptions, Operator};
use agentrt::{ApprovalStatus, Store, StoreOptions};
use agentrt_mcp_fixture::{Mode, Seen, serve};
use agentrt_proxy::{Config, INDEX, Proxy, build_proxy, load_all, read_config};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A call of request `k`.
    Call(u8),
    /// Two calls of request `k` at once.
    Twice(u8),
    /// The operator approves request `k`'s waiting approval, if any.
    Approve(u8),
    /// The operator rejects it.
    Reject(u8),
    /// A new proxy on the same database.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    // Two requests, so that a request meets its own past often.
    prop_oneof![
        4 => (0u8..2).prop_map(Op::Call),
        1 => (0u8..2).prop_map(Op::Twice),
        3 => (0u8..2).prop_map(Op::Approve),
        1 => (0u8..2).prop_map(Op::Reject),
        1 => Just(Op::Restart),
    ]
}

fn path(k: u8) -> String {
    format!("request-{k}.txt")
}

struct World {
    dir: tempfile::TempDir,
    seen: Arc<Seen>,
    config: Config,
}

impl World {
    async fn new() -> World {
        let (url, seen) = serve(Mode::Json).await;
        let dir = tempfile::tempdir().expect("dir");
        let config_path = dir.path().join("proxy.json");
        std::fs::write(
            &config_path,
            format!(
                r#"{{"database": "proxy.db", "session": "prop", "hold": "0s",
                     "servers": [{{"name": "fs", "endpoint": "{url}", "manifest": "fs.manifest.json",
                       "connect_timeout": "10s",
                       "rules": {{"read_file": {{"side_effect": "remote_mutation", "timeout": "5s"}}}}}}]}}"#
            ),
        )
        .expect("config");
        let args: Vec<String> = ["pin", "--config", &config_path.to_string_lossy()]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert_eq!(agentrt_proxy::cli::run(&args, &mut out, &mut err).await, 0);
        let config = read_config(&config_path).expect("config");
        World { dir, seen, config }
    }

    fn store(&self) -> Store {
        Store::open_with(
            self.dir.path().join("proxy.db"),
            StoreOptions {
                extensions: vec![INDEX],
                ..StoreOptions::default()
            },
        )
        .expect("store")
    }

    async fn proxy(&self) -> Arc<Proxy> {
        let loaded = load_all(&self.config).await.expect("load");
        let proxy = build_proxy(
            Arc::new(self.config.clone()),
            self.store(),
            &loaded,
            Box::new(std::io::sink()),
        )
        .expect("proxy");
        Arc::new(proxy)
    }

    /// The pending approval of request `k`, if one waits.
    fn pending(&self, k: u8) -> Option<(String, String)> {
        let store = self.store();
        let wanted = format!(r#"{{"path":"{}"}}"#, path(k));
        for run in store.list_runs(1000, 0).ok()?.items {
            for approval in store.list_approvals(&run.id).ok()? {
                if approval.status == ApprovalStatus::Pending
                    && approval.capability.as_str().contains(&wanted)
                {
                    return Some((run.id.clone(), approval.id));
                }
            }
        }
        None
    }

    /// How many approvals of request `k` were granted.
    fn granted(&self, k: u8) -> usize {
        let store = self.store();
        let wanted = format!(r#"{{"path":"{}"}}"#, path(k));
        let mut n = 0;
        for run in store.list_runs(1000, 0).expect("runs").items {
            for approval in store.list_approvals(&run.id).expect("approvals") {
                if approval.status == ApprovalStatus::Approved
                    && approval.capability.as_str().contains(&wanted)
                {
                    n += 1;
                }
            }
        }
        n
    }

    fn executions(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for args in self.seen.call_arguments.lock().expect("lock").iter() {
            let path = args["path"].as_str().unwrap_or_default().to_owned();
            *counts.entry(path).or_insert(0) += 1;
        }
        counts
    }
}

async fn call(proxy: &Proxy, k: u8) -> String {
    let args = format!(r#"{{"path":"{}"}}"#, path(k));
    proxy
        .call("fs_read_file", Some(args.as_bytes()), None)
        .await
        .expect("the tool is offered")
        .text()
        .to_owned()
}

async fn play(ops: Vec<Op>) {
    let world = World::new().await;
    let mut proxy = world.proxy().await;
    let options = DecideOptions {
        by: "operator",
        note: "",
        shown_hash: None,
    };
    for op in &ops {
        match op {
            Op::Call(k) => {
                call(&proxy, *k).await;
            }
            Op::Twice(k) => {
                let (a, b) = (Arc::clone(&proxy), Arc::clone(&proxy));
                let k = *k;
                let (x, y) = tokio::join!(
                    tokio::spawn(async move { call(&a, k).await }),
                    tokio::spawn(async move { call(&b, k).await })
                );
                x.expect("first");
                y.expect("second");
            }
            Op::Approve(k) | Op::Reject(k) => {
                if let Some((run, approval)) = world.pending(*k) {
                    let operator = Operator::new(world.store());
                    let decided = if matches!(op, Op::Approve(_)) {
                        operator.approve(&run, &approval, &options)
                    } else {
                        operator.reject(&run, &approval, &options)
                    };
                    decided.expect("decided");
                }
            }
            Op::Restart => proxy = world.proxy().await,
        }
        // After every step: no request ran more than once, and none ran
        // without an approval of it.
        for (request, n) in world.executions() {
            assert!(n <= 1, "{request} ran {n} times after {ops:?}");
            let k: u8 = request
                .trim_start_matches("request-")
                .trim_end_matches(".txt")
                .parse()
                .expect("a request");
            assert!(
                world.granted(k) >= 1,
                "{request} ran unapproved after {ops:?}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn no_request_executes_twice(ops in proptest::collection::vec(op(), 1..24)) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(play(ops));
    }
}
