//! Approvers who sign in (`serve --oidc`), with real parts: a real OpenID
//! provider (npm `oidc-provider`, pinned by agentrt-proxy's
//! `tests/oidc` lockfile, started here on 127.0.0.1) and headless Chromium
//! over WebDriver. Alice, in the approvers' group, signs in at the
//! provider through the page, reaches the console and approves: the
//! decision records her subject and the provider. Bob, not in the group,
//! signs in at the provider and is refused a session. Behind the
//! `browser` and `real-oidc` features: `cargo xtask test` installs both
//! and names the provider's script in `AGENTRT_OIDC_PROVIDER`.

mod support;
#[path = "browser/webdriver.rs"]
mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agentrt::{ApprovalStatus, Limits, Store};
use agentrt_approver::StoreApprover;
use agentrt_approver::page::{PageConfig, router};
use agentrt_approver::signature::Secret;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};
use webdriver::Browser;

/// The provider's confidential client for the page (provider.mjs).
const CLIENT_ID: &str = "agentrt-approver";
const CLIENT_SECRET: &str = "approver-secret";

/// The provider, started with the page's callback as its client's
/// redirect URI; its issuer URL.
async fn provider(callback: &str) -> (Child, String) {
    let Some(script) = std::env::var_os("AGENTRT_OIDC_PROVIDER") else {
        panic!("AGENTRT_OIDC_PROVIDER is not set: run `cargo xtask test`");
    };
    let script = PathBuf::from(script);
    let mut child = Command::new("node")
        .arg(&script)
        .current_dir(script.parent().expect("its directory"))
        .env("OIDC_APPROVER_REDIRECT_URIS", callback)
        .env("OIDC_APPROVER_SECRET", CLIENT_SECRET)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider starts")
        .expect("stdout")
        .expect("a line");
    let issuer = first
        .strip_prefix("ISSUER ")
        .unwrap_or_else(|| panic!("the provider said {first:?}"))
        .to_owned();
    (child, issuer)
}

struct World {
    _dir: tempfile::TempDir,
    _provider: Child,
    db: PathBuf,
    base: String,
    issuer: String,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        // The page's address first: the provider registers its callback.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let callback = format!("{base}/ui/oidc/callback");
        let (child, issuer) = provider(&callback).await;
        let config_path = dir.path().join("oidc.json");
        write_private(&dir.path().join("client.secret"), CLIENT_SECRET);
        write_private(
            &config_path,
            &serde_json::json!({
                "issuer": issuer,
                "client_id": CLIENT_ID,
                "client_secret_file": "client.secret",
                "redirect_url": callback,
                "scopes": ["groups"],
            })
            .to_string(),
        );
        let (config, secret) = agentrt_approver::serve::read_oidc(&config_path).expect("read");
        assert_eq!(config.approvers_group, "approvers");
        let oidc = agentrt_approver::oidc::Provider::connect(config, secret)
            .await
            .expect("the provider is reached");
        let approver = StoreApprover::open(&db, None).unwrap();
        let console = approver.store().clone();
        let app = router(PageConfig {
            console: Some(console),
            oidc: Some(Arc::new(oidc)),
            ..PageConfig::new(Arc::new(approver), Secret::new([7; 32]).unwrap())
        });
        tokio::spawn(async move { axum::serve(listener, app).await });
        World {
            _dir: dir,
            _provider: child,
            db,
            base,
            issuer,
        }
    }

    fn approval(&self, run: &str) -> agentrt::Approval {
        Store::open_existing(&self.db, true)
            .unwrap()
            .list_approvals(run)
            .unwrap()
            .pop()
            .unwrap()
    }
}

fn write_private(path: &Path, text: &str) {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// Signs `user` in at the provider, from the page's sign-in.
async fn sign_in(browser: &Browser, world: &World, user: &str) {
    browser.goto(&format!("{}/ui/sign-in", world.base)).await;
    let login = browser.wait_for("input[name=login]").await;
    browser.type_into(&login, user).await;
    let password = browser.find("input[name=password]").await;
    browser
        .type_into(&password, &format!("{user}-password"))
        .await;
    browser
        .click(&browser.find("button[type=submit]").await)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_signs_in_at_the_provider_and_her_decision_names_her() {
    let world = World::new().await;
    let (id, hash) = support::pause_on_push(
        &world.db,
        "r1",
        r#"{"ref":"main"}"#,
        Limits::default(),
        None,
    )
    .await;
    let browser = Browser::start().await;
    sign_in(&browser, &world, "alice").await;
    browser.wait_for("#runs").await;
    assert_eq!(browser.title().await, "Runs");
    browser.screenshot("sign-in-console").await;
    browser.click(&browser.find("#nav-pending").await).await;
    browser.wait_for(&format!("#approval-{id}")).await;
    browser
        .click(&browser.find(&format!("#approve-{id}")).await)
        .await;
    let message = browser.wait_for("#message").await;
    assert!(browser.text(&message).await.contains("was approved"));
    browser.screenshot("sign-in-approved").await;
    browser.quit().await;
    let decided = world.approval("r1");
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.hash, hash);
    assert_eq!(decided.decided_by, format!("alice <{}>", world.issuer));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_outside_the_approvers_group_is_refused_a_session() {
    let world = World::new().await;
    support::pause_on_push(
        &world.db,
        "r1",
        r#"{"ref":"main"}"#,
        Limits::default(),
        None,
    )
    .await;
    let browser = Browser::start().await;
    sign_in(&browser, &world, "bob").await;
    let heading = browser.wait_for("h1").await;
    assert_eq!(browser.text(&heading).await, "Refused");
    assert_eq!(browser.title().await, "Refused");
    browser.screenshot("sign-in-refused").await;
    // No session was opened: the console still asks for one.
    browser.goto(&format!("{}/ui/console", world.base)).await;
    assert_eq!(browser.title().await, "Not signed in");
    browser.quit().await;
    assert_eq!(world.approval("r1").status, ApprovalStatus::Pending);
}
