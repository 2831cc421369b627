//! The approval page over real HTTP on 127.0.0.1, as a browser would use
//! it but driven by hand: the one-time link (bound to its run and person,
//! used once ever, across restarts and processes), the session cookie (for
//! one run; `Secure` when asked), the CSRF token, the page's headers and
//! escaping, a decision bound to the hash shown and a changed approval
//! decided not at all.

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::{ApprovalStatus, Limits, Store, Timestamp, clock::ManualClock};
use agentrt_approver::StoreApprover;

mod support;
use agentrt_approver::page::{PageConfig, SecureCookie, login_token, router};
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

/// Serves the page over the database at `db` on a loopback port (a
/// process of its own as far as the page knows: its own store handle and
/// sessions): its base URL.
async fn serve(db: &std::path::Path, clock: &ManualClock, secure_cookie: SecureCookie) -> String {
    let approver = StoreApprover::open(db, None)
        .unwrap()
        .with_clock(clock.clock());
    let app = router(PageConfig {
        clock: clock.clock(),
        secure_cookie,
        ..PageConfig::new(Arc::new(approver), Secret::new(SECRET).unwrap())
    });
    support::serve_on_loopback(app).await
}

impl World {
    async fn new() -> World {
        World::with_cookie(SecureCookie::Never).await
    }

    async fn with_cookie(secure_cookie: SecureCookie) -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let clock = ManualClock::new(start());
        let base = serve(&db, &clock, secure_cookie).await;
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

    /// Another server on the same database: a restart, or a second
    /// process.
    async fn another_server(&self) -> String {
        serve(&self.db, &self.clock, SecureCookie::Never).await
    }

    /// A link to run r1's page.
    fn link(&self, nonce: &str) -> String {
        self.link_to(&self.base, "r1", nonce)
    }

    /// A link to `run`'s page on the server at `base`.
    fn link_to(&self, base: &str, run: &str, nonce: &str) -> String {
        let token = login_token(
            &Secret::new(SECRET).unwrap(),
            "alice",
            run,
            now_seconds() + 600,
            nonce,
        );
        format!("{base}/ui/login?token={token}")
    }

    /// Signs in to r1 with a fresh link: the session cookie.
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
        self.page_of("r1", cookie).await
    }

    async fn page_of(
        &self,
        run: &str,
        cookie: Option<&str>,
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut request = self.http.get(format!("{}/ui/runs/{run}", self.base));
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
        self.approval_of("r1")
    }

    fn approval_of(&self, run: &str) -> agentrt::Approval {
        Store::open_existing(&self.db, true)
            .unwrap()
            .list_approvals(run)
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
    let forged = format!("{}0", world.link("n2"));
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

/// The set-cookie header of a sign-in to r1 with `nonce`, sent with
/// `headers`.
async fn set_cookie(world: &World, nonce: &str, headers: &[(&str, &str)]) -> String {
    let mut request = world.http.get(world.link(nonce));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 303);
    response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn a_session_sees_and_decides_only_the_run_of_its_link() {
    let world = World::new().await;
    world.waiting("r1", r#"{"ref":"main"}"#).await;
    let (id2, hash2) = world.waiting("r2", r#"{"ref":"main"}"#).await;
    let cookie = world.sign_in("n1").await;
    let (status, _, body) = world.page(Some(&cookie)).await;
    assert_eq!(status, 200, "{body}");
    let csrf = csrf_of(&body);

    let (status, _, body) = world.page_of("r2", Some(&cookie)).await;
    assert_eq!(status, 403, "another run's page: {body}");
    assert!(!body.contains(&hash2), "nothing of r2 is shown");
    let (status, _) = world
        .post(
            &cookie,
            &format!("/ui/runs/r2/approvals/{id2}/approve"),
            &format!("csrf={csrf}&hash={hash2}"),
        )
        .await;
    assert_eq!(status, 403, "a decision on another run");
    assert_eq!(
        world.approval_of("r2").status,
        ApprovalStatus::Pending,
        "nothing decided"
    );
    let index = world
        .http
        .get(format!("{}/ui/", world.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(index.headers()["location"], "/ui/runs/r1", "to its own run");
}

#[tokio::test]
async fn a_link_names_its_run_and_a_link_to_no_run_signs_nobody_in() {
    let world = World::new().await;
    world.waiting("r2", "{}").await;
    let to_r2 = world.link_to(&world.base, "r2", "n1");
    let response = world.http.get(&to_r2).send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/ui/runs/r2");
    let nowhere = world.link_to(&world.base, "missing", "n2");
    let response = world.http.get(&nowhere).send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert!(response.headers().get("set-cookie").is_none());
}

#[tokio::test]
async fn a_used_link_stays_used_after_a_restart() {
    let world = World::new().await;
    world.waiting("r1", "{}").await;
    world.sign_in("n1").await;
    let restarted = world.another_server().await;
    let again = world.http.get(world.link_to(&restarted, "r1", "n1"));
    let response = again.send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert!(response.headers().get("set-cookie").is_none());
    let said = response.text().await.unwrap();
    assert!(said.contains("used already"), "{said}");
    // The nonce is in the run's database, on the chain with its event.
    let approver = StoreApprover::open(&world.db, None).unwrap();
    let store = approver.store();
    let row = store
        .row(agentrt_approver::LOGIN_NONCES_TABLE, "n1")
        .unwrap()
        .expect("the nonce is recorded");
    assert_eq!(row.text("signed_in"), Some("alice"));
    let events = store.list_events("r1").unwrap();
    let signed_in = events.last().unwrap();
    assert_eq!(
        signed_in.event_type.as_str(),
        agentrt_approver::SIGNED_IN_EVENT
    );
    assert_eq!(signed_in.payload, r#"{"by":"alice"}"#);
}

#[tokio::test]
async fn a_link_opened_on_two_servers_of_one_database_at_once_signs_in_once() {
    let world = World::new().await;
    world.waiting("r1", "{}").await;
    let second = world.another_server().await;
    let (a, b) = tokio::join!(
        world
            .http
            .get(world.link_to(&world.base, "r1", "n1"))
            .send(),
        world.http.get(world.link_to(&second, "r1", "n1")).send(),
    );
    let mut statuses = [a.unwrap().status().as_u16(), b.unwrap().status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, [303, 401]);
}

#[tokio::test]
async fn the_cookie_is_secure_only_when_asked() {
    let plain = World::new().await;
    plain.waiting("r1", "{}").await;
    let cookie = set_cookie(&plain, "n1", &[("x-forwarded-proto", "https")]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");

    let always = World::with_cookie(SecureCookie::Always).await;
    always.waiting("r1", "{}").await;
    let cookie = set_cookie(&always, "n1", &[]).await;
    assert!(cookie.ends_with("; Secure"), "{cookie}");

    let header = axum::http::HeaderName::from_static("x-forwarded-proto");
    let forwarded = World::with_cookie(SecureCookie::WhenForwardedProto(header)).await;
    forwarded.waiting("r1", "{}").await;
    let cookie = set_cookie(&forwarded, "n1", &[("X-Forwarded-Proto", "https")]).await;
    assert!(cookie.ends_with("; Secure"), "{cookie}");
    let cookie = set_cookie(&forwarded, "n2", &[("X-Forwarded-Proto", "http")]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
    let cookie = set_cookie(&forwarded, "n3", &[]).await;
    assert!(!cookie.contains("Secure"), "{cookie}");
}

/// `text` as a form value (`application/x-www-form-urlencoded`).
fn form_value(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[tokio::test]
async fn the_edit_form_approves_other_arguments_and_refuses_an_edit_that_decides_nothing() {
    let world = World::new().await;
    let (id, hash) = world
        .waiting("r1", r#"{"ref":"<script>alert(1)</script>"}"#)
        .await;
    let cookie = world.sign_in("n1").await;
    let (_, _, body) = world.page(Some(&cookie)).await;
    assert!(
        body.contains(&format!("id=\"edit-args-{id}\" rows=\"8\">{{\n  &quot;ref&quot;: &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot;\n}}</textarea>")),
        "the request's arguments fill the form, escaped: {body}"
    );
    let csrf = csrf_of(&body);
    let edit = format!("/ui/runs/r1/approvals/{id}/edit");
    let post = |args: &str| {
        format!(
            "csrf={csrf}&hash={hash}&note=safer&args={}",
            form_value(args)
        )
    };

    for (args, says) in [
        ("{\"ref\":", "not acceptable JSON"),
        ("[\"main\"]", "must be a JSON object"),
        (
            r#"{"ref":"<script>alert(1)</script>"}"#,
            "the request&#39;s own",
        ),
    ] {
        let response = world
            .http
            .post(format!("{}{edit}", world.base))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(post(args))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 422, "{args}");
        let text = response.text().await.unwrap();
        assert!(text.contains(says), "{args}: {text}");
        assert!(text.contains("Nothing was decided"), "{text}");
        assert_eq!(world.approval().status, ApprovalStatus::Pending, "{args}");
    }
    // A forged form decides nothing either.
    let (status, _) = world
        .post(
            &cookie,
            &edit,
            &format!("csrf=wrong&hash={hash}&args=%7B%7D"),
        )
        .await;
    assert_eq!(status, 403);

    let (status, location) = world.post(&cookie, &edit, &post(r#"{"ref":"docs"}"#)).await;
    assert_eq!(
        (status, location.as_str()),
        (
            303,
            format!("/ui/runs/r1?done=edited&approval={id}").as_str()
        )
    );
    let approvals = Store::open_existing(&world.db, true)
        .unwrap()
        .list_approvals("r1")
        .unwrap();
    assert_eq!(approvals[0].status, ApprovalStatus::Edited);
    let edited = &approvals[1];
    assert_eq!(edited.status, ApprovalStatus::Approved);
    assert_eq!(
        (edited.decided_by.as_str(), edited.note.as_str()),
        ("alice", "safer")
    );
    assert_eq!(
        edited.request.get("args").unwrap().as_str(),
        r#"{"ref":"docs"}"#
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
    assert!(shown.contains("was replaced by your edit"), "{shown}");
}

#[tokio::test]
async fn a_request_that_needs_two_approvers_says_so_and_refuses_the_same_person_twice() {
    let world = World::new().await;
    let (id, hash) = support::pause_for_two(&world.db, "r1", Some(world.clock.clock())).await;
    let cookie = world.sign_in("n1").await;
    let (_, _, body) = world.page(Some(&cookie)).await;
    let csrf = csrf_of(&body);
    let approve = format!("/ui/runs/r1/approvals/{id}/approve");
    let form = format!("csrf={csrf}&hash={hash}");
    let (status, location) = world.post(&cookie, &approve, &form).await;
    assert_eq!(status, 303);
    assert!(location.contains("done=endorsed"), "{location}");
    let body = world
        .http
        .get(format!("{}{location}", world.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("needs a second approver"), "{body}");
    assert_eq!(world.approval().status, ApprovalStatus::Pending);

    let (status, location) = world.post(&cookie, &approve, &form).await;
    assert_eq!(status, 303);
    assert!(location.contains("done=same_approver"), "{location}");
    let body = world
        .http
        .get(format!("{}{location}", world.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("needs another person"), "{body}");
    assert_eq!(world.approval().status, ApprovalStatus::Pending);
}
