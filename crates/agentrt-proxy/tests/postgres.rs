//! Proxies on two hosts over one PostgreSQL database (the configuration's
//! `database` a `postgres://` URL): a call held on one, the same request
//! through the other attaches to the same run instead of beginning
//! another, an approval decided from a third handle releases the held
//! call, which runs once; the operator's hint names the database without
//! its password; `verify` intact.
//!
//! Needs `AGENTRT_TEST_POSTGRES` (as `cargo xtask postgres -- …` sets it).

mod support;

// The test server and a fresh database on it, as agentrt-postgres's own
// tests make them.
#[path = "../../agentrt-postgres/tests/real_postgres/backends.rs"]
mod backends;

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::verify::{self, VerifyOptions};
use agentrt::{ApprovalStatus, RunStatus, Store};
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Proxy, build_proxy, load_all, open_store, read_config};
use backends::PASSWORD;

/// Long enough never to be reached by a test that passes.
const NEVER: Duration = Duration::from_secs(20);

const ARGS: &[u8] = br#"{"path":"shared.txt"}"#;

/// What a proxy wrote to its operator.
#[derive(Clone, Default)]
struct Notices(Arc<Mutex<Vec<u8>>>);

impl Write for Notices {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Notices {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("lock")).into_owned()
    }
}

/// A proxy on the configuration in `dir`, its store opened as `serve`
/// opens it (here: PostgreSQL), built as `serve` builds it.
async fn proxy_on(dir: &Path, notices: &Notices) -> Arc<Proxy> {
    let config = read_config(&dir.join("proxy.json")).expect("config");
    let store = open_store(&config).await.expect("store");
    let loaded = load_all(&config).await.expect("load");
    Arc::new(
        build_proxy(Arc::new(config), store, &loaded, Box::new(notices.clone())).expect("proxy"),
    )
}

/// The pending approvals on `store`: (run, approval).
fn pending(store: &Store) -> Vec<(String, String)> {
    let runs = store.list_runs(100, 0).expect("runs").items;
    runs.iter()
        .flat_map(|r| store.list_approvals(&r.id).expect("approvals"))
        .filter(|a| a.status == ApprovalStatus::Pending)
        .map(|a| (a.run_id, a.id))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxies_on_two_hosts_share_their_runs_and_an_approval_from_elsewhere_releases_a_held_call()
{
    let database = backends::url(&backends::fresh_database_name());
    let (fixture, seen) = serve(Mode::Json).await;
    let rule = r#"{"side_effect": "remote_mutation", "timeout": "2s"}"#;
    let (host_a, host_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    support::configure_on(
        host_a.path(),
        &database,
        &fixture,
        r#""session": "team", "hold": "10m""#,
        rule,
    )
    .await;
    support::configure_on(
        host_b.path(),
        &database,
        &fixture,
        r#""session": "team", "hold": "0s""#,
        rule,
    )
    .await;
    let (notices_a, notices_b) = (Notices::default(), Notices::default());
    let proxy_a = proxy_on(host_a.path(), &notices_a).await;
    let proxy_b = proxy_on(host_b.path(), &notices_b).await;
    // The operator's handle, as on a third machine.
    let operator = agentrt_postgres::open(&database).unwrap();

    let held_proxy = Arc::clone(&proxy_a);
    let held = tokio::spawn(async move {
        held_proxy
            .call("fs_read_file", Some(ARGS), None)
            .await
            .expect("offered")
            .text()
            .to_owned()
    });
    let began = std::time::Instant::now();
    let (run_id, approval_id) = loop {
        if let Some(first) = pending(&operator).into_iter().next() {
            break first;
        }
        assert!(began.elapsed() < NEVER, "no approval was asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };

    // The same request through the other host: the same run's approval.
    let answer = proxy_b
        .call("fs_read_file", Some(ARGS), None)
        .await
        .expect("offered");
    assert!(
        answer.text().starts_with("PENDING_APPROVAL: ") && answer.text().contains(&approval_id),
        "{}",
        answer.text()
    );
    assert_eq!(operator.list_runs(100, 0).unwrap().items.len(), 1);

    agentrt::operator::approve(
        &operator,
        &run_id,
        &approval_id,
        &agentrt::operator::DecideOptions {
            by: "operator",
            note: "",
            shown_hash: None,
        },
    )
    .expect("approved");
    let answer = tokio::time::timeout(NEVER, held)
        .await
        .expect("the held call collected the approval")
        .expect("the call");
    assert!(answer.contains("shared.txt"), "{answer}");
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 1);
    assert_eq!(
        operator.get_run(&run_id).unwrap().status,
        RunStatus::Completed
    );

    let told = notices_a.text();
    assert!(told.contains("agentrt --db \"postgres://"), "{told}");
    assert!(!told.contains(PASSWORD), "{told}");
    assert!(
        verify::verify(&operator, &VerifyOptions::default())
            .unwrap()
            .intact()
    );

    // The operator's commands on the same configuration: `check` names the
    // database without its password; `recheck` reads the session's runs
    // from PostgreSQL and writes nothing.
    let config = host_a.path().join("proxy.json");
    let (code, out, err) = command(&["check", "--config", &config.to_string_lossy()]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("database: postgres://"), "{out}");
    assert!(
        !out.contains(PASSWORD) && !err.contains(PASSWORD),
        "{out}{err}"
    );
    let head = verify::chain_head(&operator).unwrap();
    let (code, out, err) = command(&["recheck", "--config", &config.to_string_lossy()]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("1 run(s) re-checked"), "{out}");
    assert_eq!(
        verify::chain_head(&operator).unwrap(),
        head,
        "recheck wrote nothing"
    );
}

/// `agentrt-proxy ARGS…` in process: exit code, stdout, stderr.
async fn command(args: &[&str]) -> (u8, String, String) {
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}
