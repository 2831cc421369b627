//! The approval page in a real browser: headless Chromium driven over
//! WebDriver (`chromedriver`), against the page served on 127.0.0.1 over a
//! real database. Behind the `browser` feature: `cargo xtask test`
//! installs Debian's `chromium` and `chromium-driver` (as root) and runs
//! it. Screenshots go to `target/browser-screenshots/`.

mod support;
#[path = "browser/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::{ApprovalStatus, Limits, Store};
use agentrt_approver::StoreApprover;
use agentrt_approver::page::{PageConfig, console_token, login_token, router};
use agentrt_approver::signature::Secret;
use webdriver::Browser;

const SECRET: [u8; 32] = [23; 32];

struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    base: String,
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let approver = StoreApprover::open(&db, None).unwrap();
        let console = approver.store().clone();
        let app = router(PageConfig {
            console: Some(console),
            ..PageConfig::new(Arc::new(approver), Secret::new(SECRET).unwrap())
        });
        let base = support::serve_on_loopback(app).await;
        World {
            _dir: dir,
            db,
            base,
        }
    }

    async fn waiting(&self, id: &str, args: &str) -> (String, String) {
        support::pause_on_push(&self.db, id, args, Limits::default(), None).await
    }

    fn link(&self, run: &str) -> String {
        let expires = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64
            + 600;
        let token = login_token(
            &Secret::new(SECRET).unwrap(),
            "alice",
            run,
            expires,
            &format!("nonce-{run}"),
        );
        format!("{}/ui/login?token={token}", self.base)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_opens_the_link_sees_the_hash_and_approves() {
    let world = World::new().await;
    let (id, hash) = world.waiting("r1", r#"{"ref":"main"}"#).await;
    let browser = Browser::start().await;
    browser.goto(&world.link("r1")).await;
    assert_eq!(browser.title().await, "Approvals of run r1");
    let shown = browser.find(&format!("#hash-{id}")).await;
    assert_eq!(browser.text(&shown).await, hash, "the hash in full");
    browser.screenshot("approve-before").await;

    let button = browser.find(&format!("#approve-{id}")).await;
    browser.click(&button).await;
    let message = browser.wait_for("#message").await;
    assert!(browser.text(&message).await.contains("was approved"));
    browser.screenshot("approve-after").await;
    browser.quit().await;

    let decided = world.approval("r1");
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.hash, hash, "approved with the hash that was shown");
    assert_eq!(decided.decided_by, "alice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_changed_after_it_was_shown_is_not_decided() {
    let world = World::new().await;
    let (id, hash) = world.waiting("r1", r#"{"ref":"main"}"#).await;
    let browser = Browser::start().await;
    browser.goto(&world.link("r1")).await;
    let button = browser.find(&format!("#approve-{id}")).await;

    // Behind the page's back, the stored approval changes.
    let changed = format!(
        "{}{}",
        &hash[..63],
        if hash.ends_with('0') { '1' } else { '0' }
    );
    let conn = rusqlite::Connection::open(&world.db).unwrap();
    conn.execute(
        "UPDATE approvals SET hash = ?1 WHERE id = ?2",
        [&changed, &id],
    )
    .unwrap();
    drop(conn);

    browser.click(&button).await;
    let message = browser.wait_for("#message").await;
    assert!(
        browser
            .text(&message)
            .await
            .contains("changed after it was shown")
    );
    let now_shown = browser.find(&format!("#hash-{id}")).await;
    assert_eq!(
        browser.text(&now_shown).await,
        changed,
        "the page shows the approval as it is now"
    );
    browser.screenshot("changed").await;
    browser.quit().await;

    let stored = world.approval("r1");
    assert_eq!(
        stored.status,
        ApprovalStatus::Pending,
        "nothing was decided"
    );
    assert_eq!(stored.decided_by, "");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_in_a_tool_argument_is_shown_as_text() {
    let world = World::new().await;
    let script =
        r#"<script>document.title='pwned'</script><img src=x onerror="document.title='pwned'">"#;
    let args = serde_json::json!({ "ref": script }).to_string();
    let (id, _) = world.waiting("r1", &args).await;
    let browser = Browser::start().await;
    browser.goto(&world.link("r1")).await;
    let text = browser.find(&format!("#text-{id}")).await;
    let shown = browser.text(&text).await;
    assert!(
        shown.contains("<script>document.title='pwned'</script>"),
        "{shown}"
    );
    assert_eq!(
        browser.title().await,
        "Approvals of run r1",
        "no script ran"
    );
    assert_eq!(
        browser.count("script").await,
        0,
        "no script element in the page"
    );
    assert_eq!(browser.count("img").await, 0, "no image element either");
    browser.screenshot("script-as-text").await;
    browser.quit().await;
}

/// The edit form in a browser: the request's arguments (a model's
/// `<script>` among them, as text) fill a text area; a person replaces
/// them and approves the edit. Arguments that are not an object come back
/// refused, nothing decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_edits_the_arguments_and_approves_the_edit() {
    let world = World::new().await;
    let args = serde_json::json!({ "ref": "<script>document.title='pwned'</script>" }).to_string();
    let (id, hash) = world.waiting("r1", &args).await;
    let browser = Browser::start().await;
    browser.goto(&world.link("r1")).await;
    let area = browser.find(&format!("#edit-args-{id}")).await;
    assert_eq!(
        browser.title().await,
        "Approvals of run r1",
        "no script ran"
    );
    browser.screenshot("edit-before").await;

    browser.type_into(&area, "[\"main\"]").await;
    browser
        .click(&browser.find(&format!("#edit-{id}")).await)
        .await;
    let refused = browser.wait_for("#refused").await;
    assert!(
        browser
            .text(&refused)
            .await
            .contains("must be a JSON object")
    );
    browser.screenshot("edit-refused").await;
    assert_eq!(world.approval("r1").status, ApprovalStatus::Pending);

    browser.click(&browser.find("#back").await).await;
    let area = browser.wait_for(&format!("#edit-args-{id}")).await;
    browser.type_into(&area, r#"{"ref":"docs"}"#).await;
    let note = browser.find(&format!("#edit-note-{id}")).await;
    browser.type_into(&note, "docs, not main").await;
    browser
        .click(&browser.find(&format!("#edit-{id}")).await)
        .await;
    let message = browser.wait_for("#message").await;
    assert!(
        browser
            .text(&message)
            .await
            .contains("was replaced by your edit")
    );
    browser.screenshot("edit-after").await;
    browser.quit().await;

    let approvals = Store::open_existing(&world.db, true)
        .unwrap()
        .list_approvals("r1")
        .unwrap();
    assert_eq!(approvals[0].status, ApprovalStatus::Edited);
    assert_eq!(approvals[0].hash, hash);
    let edited = &approvals[1];
    assert_eq!(edited.status, ApprovalStatus::Approved);
    assert_eq!(
        edited.request.get("args").unwrap().as_str(),
        r#"{"ref":"docs"}"#
    );
    assert_eq!(
        (edited.decided_by.as_str(), edited.note.as_str()),
        ("alice", "docs, not main")
    );
}

/// The console in a browser: the runs, a run's timeline and the pending
/// approvals across runs, a model's `<script>` shown as text on each (no
/// script element, no script run); an approval decided from the pending
/// page. Screenshots of each page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_lists_runs_shows_a_timeline_and_decides_a_pending_approval() {
    let world = World::new().await;
    let script =
        r#"<script>document.title='pwned'</script><img src=x onerror="document.title='pwned'">"#;
    let args = serde_json::json!({ "ref": script }).to_string();
    let (first, _) = world.waiting("r1", &args).await;
    let (second, _) = world.waiting("r2", r#"{"ref":"main"}"#).await;
    let expires = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
        + 600;
    let token = console_token(&Secret::new(SECRET).unwrap(), "carol", expires, "console-1");
    let browser = Browser::start().await;
    browser
        .goto(&format!("{}/ui/login?token={token}", world.base))
        .await;
    assert_eq!(browser.title().await, "Runs");
    assert_eq!(browser.count("#runs tr").await, 3, "a header and two runs");
    browser.screenshot("console-runs").await;

    browser
        .click(&browser.find("a[href='/ui/console/runs/r1']").await)
        .await;
    let text = browser.wait_for(&format!("#text-{first}")).await;
    assert!(
        browser
            .text(&text)
            .await
            .contains("<script>document.title='pwned'</script>")
    );
    assert_eq!(browser.title().await, "Run r1", "no script ran");
    assert_eq!(browser.count("script").await, 0);
    assert_eq!(browser.count("img").await, 0);
    browser.screenshot("console-timeline").await;

    browser.click(&browser.find("#nav-pending").await).await;
    browser.wait_for(&format!("#approval-{second}")).await;
    assert_eq!(browser.title().await, "Waiting for a decision");
    assert_eq!(browser.count("section.approval").await, 2);
    browser.screenshot("console-pending").await;
    browser
        .click(&browser.find(&format!("#approve-{second}")).await)
        .await;
    let message = browser.wait_for("#message").await;
    assert!(browser.text(&message).await.contains("was approved"));
    browser.quit().await;
    let decided = world.approval("r2");
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(decided.decided_by, "carol");
}
