//! The console over real HTTP on 127.0.0.1: who gets in (a console link,
//! once; never a run's link, never without one), the runs filtered and
//! paged, a run's timeline escaped, the pending approvals across runs
//! decided with the hash shown, and a run's part of the chain.

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::{
    ApprovalStatus, Decision, DefaultPolicy, Driver, GateConfig, Labels, Limits, ScriptedAgent,
    Store, Timestamp, clock::ManualClock,
};
use agentrt_approver::StoreApprover;

mod support;
use agentrt_approver::page::{
    CONSOLE_LINK_SECONDS, PageConfig, console_token, login_token, router,
};
use agentrt_approver::signature::Secret;

const SECRET: [u8; 32] = [13; 32];
const SCRIPT: &str = r#"{"ref":"<script>alert(1)</script>"}"#;

fn start() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

fn now_seconds() -> i64 {
    i64::try_from(start().as_unix_nanos() / 1_000_000_000).unwrap()
}

struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    clock: ManualClock,
    base: String,
    http: reqwest::Client,
}

async fn serve(db: &std::path::Path, clock: &ManualClock, console: bool) -> String {
    let approver = StoreApprover::open(db, None)
        .unwrap()
        .with_clock(clock.clock());
    let store = approver.store().clone();
    let app = router(PageConfig {
        clock: clock.clock(),
        console: console.then_some(store),
        ..PageConfig::new(Arc::new(approver), Secret::new(SECRET).unwrap())
    });
    support::serve_on_loopback(app).await
}

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let clock = ManualClock::new(start());
        let base = serve(&db, &clock, true).await;
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        World {
            _dir: dir,
            db,
            clock,
            base,
            http,
        }
    }

    async fn waiting(&self, id: &str, args: &str) -> (String, String) {
        let clock = Some(self.clock.clock());
        support::pause_on_push(&self.db, id, args, Limits::default(), clock).await
    }

    /// A run that completes at once, with `labels`.
    async fn completed(&self, id: &str, labels: &[&str]) {
        let store = Store::open(&self.db).unwrap();
        let config = GateConfig::new(store, DefaultPolicy, vec![support::push_tool()])
            .with_clock(self.clock.clock());
        Driver::new(config, ScriptedAgent::new([Decision::complete("1")]))
            .unwrap()
            .start_labelled(
                Some(id),
                "finish <b>now</b>",
                Limits::default(),
                Labels::parse(labels.iter().copied()).unwrap(),
            )
            .await
            .unwrap();
    }

    fn console_link(&self, nonce: &str) -> String {
        let token = console_token(
            &Secret::new(SECRET).unwrap(),
            "carol",
            now_seconds() + 600,
            nonce,
        );
        format!("{}/ui/login?token={token}", self.base)
    }

    /// The session cookie a link's sign-in sets, and where it sends the
    /// browser; `None` when refused (with the status).
    async fn sign_in(&self, link: &str) -> Result<(String, String), u16> {
        let response = self.http.get(link).send().await.unwrap();
        if response.status() != 303 {
            return Err(response.status().as_u16());
        }
        let location = response.headers()["location"].to_str().unwrap().to_owned();
        let cookie = response.headers()["set-cookie"].to_str().unwrap();
        Ok((cookie.split(';').next().unwrap().to_owned(), location))
    }

    async fn console(&self) -> String {
        self.sign_in(&self.console_link("c1")).await.unwrap().0
    }

    async fn get(&self, cookie: Option<&str>, path: &str) -> (u16, String) {
        let mut request = self.http.get(format!("{}{path}", self.base));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    fn store(&self) -> Store {
        Store::open_existing(&self.db, true).unwrap()
    }
}

fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

/// The run ids of the runs table, in order.
fn listed(page: &str) -> Vec<String> {
    page.split("<a href=\"/ui/console/runs/")
        .skip(1)
        .map(|rest| rest.split('"').next().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn only_a_console_link_opens_the_console_and_only_once() {
    let world = World::new().await;
    world.waiting("r1", r#"{"ref":"main"}"#).await;

    let (status, _) = world.get(None, "/ui/console").await;
    assert_eq!(status, 401, "signed out");
    let run_link = format!(
        "{}/ui/login?token={}",
        world.base,
        login_token(
            &Secret::new(SECRET).unwrap(),
            "alice",
            "r1",
            now_seconds() + 600,
            "n1"
        )
    );
    let (run_session, _) = world.sign_in(&run_link).await.unwrap();
    for path in [
        "/ui/console",
        "/ui/console/pending",
        "/ui/console/runs/r1",
        "/ui/console/runs/r1/chain",
    ] {
        let (status, body) = world.get(Some(&run_session), path).await;
        assert_eq!(status, 403, "a run's session opens no console: {path}");
        assert!(body.contains("login-link --console"), "{body}");
    }

    let link = world.console_link("c1");
    let (cookie, location) = world.sign_in(&link).await.unwrap();
    assert_eq!(location, "/ui/console");
    assert_eq!(world.sign_in(&link).await, Err(401), "a link signs in once");
    let (status, body) = world.get(Some(&cookie), "/ui/console").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("signed in to the console as <b>carol</b>"));
    // The console's session reads any run's page too.
    let (status, _) = world.get(Some(&cookie), "/ui/runs/r1").await;
    assert_eq!(status, 200);

    let long = console_token(
        &Secret::new(SECRET).unwrap(),
        "carol",
        now_seconds() + CONSOLE_LINK_SECONDS + 60,
        "c2",
    );
    let long = format!("{}/ui/login?token={long}", world.base);
    assert_eq!(world.sign_in(&long).await, Err(401), "an hour at most");
    let hex = |text: &str| -> String { text.bytes().map(|b| format!("{b:02x}")).collect() };
    let forged = world
        .console_link("c3")
        .replace(&hex("carol"), &hex("mallory"));
    assert_eq!(world.sign_in(&forged).await, Err(401), "another person");

    // A server without a console takes no console link.
    let other = serve(&world.db, &world.clock, false).await;
    let link = world.console_link("c4").replace(&world.base, &other);
    assert_eq!(world.sign_in(&link).await, Err(404));
}

#[tokio::test]
async fn the_runs_are_listed_newest_first_filtered_and_paged() {
    let world = World::new().await;
    for i in 0..52 {
        let host = if i % 2 == 0 { "host=a" } else { "host=b" };
        world.completed(&format!("done-{i:02}"), &[host]).await;
    }
    world.waiting("wait-1", r#"{"ref":"main"}"#).await;
    let cookie = world.console().await;

    let (status, page) = world.get(Some(&cookie), "/ui/console").await;
    assert_eq!(status, 200);
    let first = listed(&page);
    assert_eq!(first.len(), 50, "a page holds 50 runs");
    assert_eq!(&first[..2], ["wait-1", "done-51"], "newest first");
    assert!(page.contains("53 run(s), 1 to 50 shown"), "{page}");
    assert!(
        page.contains("finish &lt;b&gt;now&lt;/b&gt;"),
        "the goal is text"
    );
    let (_, second) = world.get(Some(&cookie), "/ui/console?page=1").await;
    assert_eq!(listed(&second), ["done-02", "done-01", "done-00"]);
    assert!(second.contains("id=\"newer\""));

    let (_, waiting) = world
        .get(Some(&cookie), "/ui/console?status=WAITING_FOR_APPROVAL")
        .await;
    assert_eq!(listed(&waiting), ["wait-1"]);
    let (_, on_b) = world
        .get(
            Some(&cookie),
            "/ui/console?status=COMPLETED&label=host%3Db&page=0",
        )
        .await;
    let on_b = listed(&on_b);
    assert_eq!(on_b.len(), 26);
    assert!(on_b.iter().all(|id| {
        let n: u32 = id.trim_start_matches("done-").parse().unwrap();
        n % 2 == 1
    }));
    let (status, body) = world.get(Some(&cookie), "/ui/console?status=LOST").await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = world.get(Some(&cookie), "/ui/console?label=nolabel").await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn a_runs_timeline_shows_its_record_escaped_and_its_forms() {
    let world = World::new().await;
    let (id, hash) = world.waiting("r1", SCRIPT).await;
    let cookie = world.console().await;
    let (status, page) = world.get(Some(&cookie), "/ui/console/runs/r1").await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("WAITING_FOR_APPROVAL"));
    assert!(!page.contains("<script>"), "model text is never markup");
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("<td>push</td>"), "the step's decision");
    assert!(page.contains("approval.requested"), "the events");
    assert!(page.contains(&format!("name=\"hash\" value=\"{hash}\"")));
    assert!(page.contains(&format!("id=\"approve-{id}\"")));
    assert!(page.contains(&format!("id=\"edit-args-{id}\"")));
    let (status, _) = world.get(Some(&cookie), "/ui/console/runs/nope").await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn the_pending_page_lists_every_waiting_run_and_decides_with_the_hash_shown() {
    let world = World::new().await;
    let (a1, _) = world.waiting("r1", r#"{"ref":"one"}"#).await;
    let (a2, h2) = world.waiting("r2", SCRIPT).await;
    world.completed("done", &[]).await;
    let cookie = world.console().await;
    let (status, page) = world.get(Some(&cookie), "/ui/console/pending").await;
    assert_eq!(status, 200);
    assert!(page.contains("2 run(s) wait."), "{page}");
    assert!(page.contains(&format!("id=\"approval-{a1}\"")));
    assert!(page.contains(&format!("id=\"approval-{a2}\"")));
    assert!(!page.contains("done"), "a finished run does not wait");
    assert!(!page.contains("<script>"));

    let csrf = csrf_of(&page);
    let post = |hash: &str| {
        world
            .http
            .post(format!("{}/ui/runs/r2/approvals/{a2}/approve", world.base))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("csrf={csrf}&hash={hash}&note=from+the+console"))
            .send()
    };
    let stale = post(&"0".repeat(64)).await.unwrap();
    assert!(
        stale.headers()["location"]
            .to_str()
            .unwrap()
            .contains("done=changed")
    );
    assert_eq!(
        world.store().get_approval("r2", &a2).unwrap().status,
        ApprovalStatus::Pending
    );
    let decided = post(&h2).await.unwrap();
    assert_eq!(decided.status(), 303);
    let stored = world.store().get_approval("r2", &a2).unwrap();
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(
        (stored.decided_by.as_str(), stored.note.as_str()),
        ("carol", "from the console")
    );
}

#[tokio::test]
async fn a_runs_chain_is_intact_or_names_its_first_break() {
    let world = World::new().await;
    world.waiting("r1", r#"{"ref":"main"}"#).await;
    world.completed("r2", &[]).await;
    let cookie = world.console().await;
    let (status, page) = world.get(Some(&cookie), "/ui/console/runs/r1/chain").await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"chain-state\">intact: "), "{page}");

    let raw = rusqlite::Connection::open(&world.db).unwrap();
    raw.execute(
        "UPDATE approvals SET note = 'rewritten' WHERE run_id = 'r1'",
        [],
    )
    .unwrap();
    let (_, page) = world.get(Some(&cookie), "/ui/console/runs/r1/chain").await;
    assert!(page.contains("id=\"chain-state\">broken at seq "), "{page}");
    let (_, other) = world.get(Some(&cookie), "/ui/console/runs/r2/chain").await;
    assert!(other.contains("intact: "), "r2's range holds: {other}");
}
