//! The approval page over real HTTP on 127.0.0.1, as a browser would use
//! it but driven by hand: the one-time link, the session cookie, the CSRF
//! token, the page's headers and escaping, a decision bound to the hash
//! shown and a changed approval decided not at all.

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::{ApprovalStatus, Limits, ManualClock, Store, Timestamp};
use agentrt_approver::StoreApprover;

mod support;
use agentrt_approver::page::{login_token, router};
use agentrt_approver::signature::Secret;

const SECRET: [u8; 32] = [11; 32];

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

impl World {
    async fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let clock = ManualClock::new(start());
        let approver = StoreApprover::open(&db, None)
            .unwrap()
            .with_clock(clock.clock());
        let app = router(
            Arc::new(approver),
            Secret::new(SECRET).unwrap(),
            clock.clock(),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
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

    /// Pauses run `id` on a push whose arguments hold `args`.
    async fn waiting(&self, id: &str, args: &str) -> (String, String) {
        let clock = Some(self.clock.clock());
        support::pause_on_push(&self.db, id, args, Limits::default(), clock).await
    }

    fn link(&self, nonce: &str) -> String {
        let token = login_token(
            &Secret::new(SECRET).unwrap(),
            "alice",
            now_seconds() + 600,
            nonce,
        );
        format!("{}/ui/login?token={token}&run=r1", self.base)
    }

    /// Signs in with a fresh link: the session cookie.
    async fn sign_in(&self, nonce: &str) -> String {
        let response = self.http.get(self.link(nonce)).send().await.unwrap();
        assert_eq!(response.status(), 303);
        assert_eq!(response.headers()["location"], "/ui/runs/r1");
        let cookie = response.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .to_owned();
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        cookie.split(';').next().unwrap().to_owned()
    }

    async fn page(&self, cookie: Option<&str>) -> (u16, reqwest::header::HeaderMap, String) {
        let mut request = self.http.get(format!("{}/ui/runs/r1", self.base));
        if let Some(cookie) = cookie {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.unwrap();
        let (status, headers) = (response.status().as_u16(), response.headers().clone());
        (status, headers, response.text().await.unwrap())
    }

    async fn post(&self, cookie: &str, path: &str, form: &str) -> (u16, String) {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_owned())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, location)
    }

    fn approval(&self) -> agentrt::Approval {
        Store::open_existing(&self.db, true)
            .unwrap()
            .list_approvals("r1")
            .unwrap()
            .pop()
            .unwrap()
    }
}

fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_link_signs_in_once_and_the_page_shows_the_approval_escaped_under_a_strict_policy() {
    let world = World::new().await;
    let (id, hash) = world
        .waiting("r1", r#"{"ref":"<script>alert(1)</script>"}"#)
        .await;

    let (status, _, body) = world.page(None).await;
    assert_eq!(status, 401, "{body}");
    let cookie = world.sign_in("n1").await;
    let again = world.http.get(world.link("n1")).send().await.unwrap();
    assert_eq!(again.status(), 401, "a link signs in once");
    let forged = world.link("n2").replace("&run", "0&run");
    assert_eq!(world.http.get(forged).send().await.unwrap().status(), 401);

    let (status, headers, body) = world.page(Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(
        policy.starts_with("default-src 'none'") && policy.contains("form-action 'self'"),
        "{policy}"
    );
    assert!(!policy.contains("script-src"), "no script at all: {policy}");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(
        body.contains(&format!("id=\"hash-{id}\">{hash}</code>")),
        "the hash in full"
    );
    assert!(body.contains("Signed in as <b>alice</b>"));
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert!(!body.contains("<script>"), "model text is never markup");
    assert!(body.contains(&format!("name=\"hash\" value=\"{hash}\"")));
}

#[tokio::test]
async fn a_form_decides_only_with_the_sessions_token_and_the_hash_still_stored() {
    let world = World::new().await;
    let (id, hash) = world.waiting("r1", r#"{"ref":"main"}"#).await;
    let cookie = world.sign_in("n1").await;
    let (_, _, body) = world.page(Some(&cookie)).await;
    let csrf = csrf_of(&body);
    let approve = format!("/ui/runs/r1/approvals/{id}/approve");

    let (status, _) = world
        .post(&cookie, &approve, &format!("csrf=wrong&hash={hash}"))
        .await;
    assert_eq!(status, 403);
    let (status, _) = world
        .post(
            "agentrt_session=nope",
            &approve,
            &format!("csrf={csrf}&hash={hash}"),
        )
        .await;
    assert_eq!(status, 401);
    assert_eq!(
        world.approval().status,
        ApprovalStatus::Pending,
        "nothing decided"
    );

    let stale = "0".repeat(64);
    let (status, location) = world
        .post(&cookie, &approve, &format!("csrf={csrf}&hash={stale}"))
        .await;
    assert_eq!(
        (status, location.as_str()),
        (
            303,
            format!("/ui/runs/r1?done=changed&approval={id}").as_str()
        )
    );
    assert_eq!(
        world.approval().status,
        ApprovalStatus::Pending,
        "a changed approval is never decided"
    );
    let shown = world
        .http
        .get(format!("{}{location}", world.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(shown.contains("changed after it was shown"), "{shown}");

    let (status, location) = world
        .post(
            &cookie,
            &approve,
            &format!("csrf={csrf}&hash={hash}&note=looks+fine"),
        )
        .await;
    assert_eq!(
        (status, location.as_str()),
        (
            303,
            format!("/ui/runs/r1?done=approved&approval={id}").as_str()
        )
    );
    let decided = world.approval();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(
        (decided.decided_by.as_str(), decided.note.as_str()),
        ("alice", "looks fine")
    );
    assert_eq!(decided.hash, hash);
}
