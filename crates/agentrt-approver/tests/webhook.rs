//! The signed webhook (design §35) over real HTTP on 127.0.0.1: every
//! route, the pipeline's order, the error mapping, replays across a
//! restart, and a fuzzed request that never brings it down.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentrt::{ApprovalStatus, Limits, RunStatus, Store, Timestamp, clock::ManualClock};
use agentrt_approver::StoreApprover;

mod support;
use agentrt_approver::signature::{Keys, Secret, headers_at, keyed_headers_at};
use agentrt_approver::webhook::{WebhookConfig, WebhookEvent, router};
use serde_json::{Value, json};

const SECRET: [u8; 32] = [42; 32];

fn start() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

fn seconds(t: Timestamp) -> i64 {
    i64::try_from(t.as_unix_nanos() / 1_000_000_000).unwrap()
}

/// A database with runs paused for approval, a clock, and the webhook
/// served over it on a loopback port.
struct World {
    _dir: tempfile::TempDir,
    db: PathBuf,
    clock: ManualClock,
    url: String,
    http: reqwest::Client,
    nonce: std::sync::atomic::AtomicU64,
}

impl World {
    async fn new(tune: impl FnOnce(&mut WebhookConfig)) -> World {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let clock = ManualClock::new(start());
        let url = serve(&db, &clock, tune).await;
        World {
            _dir: dir,
            db,
            clock,
            url,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            nonce: Default::default(),
        }
    }

    /// Serves another webhook on the same database: a restarted server.
    async fn restarted(&self) -> String {
        self.restarted_with(|_| {}).await
    }

    /// [`World::restarted`], its settings tuned by `tune`.
    async fn restarted_with(&self, tune: impl FnOnce(&mut WebhookConfig)) -> String {
        serve(&self.db, &self.clock, tune).await
    }

    /// Runs `id` until it waits for approval of a push; its approval's id
    /// and hash.
    async fn waiting(&self, id: &str, limits: Limits) -> (String, String) {
        let args = r#"{"ref":"<script>alert(1)</script>"}"#;
        support::pause_on_push(&self.db, id, args, limits, Some(self.clock.clock())).await
    }

    fn next_nonce(&self) -> String {
        let n = self
            .nonce
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("nonce-{n}")
    }

    /// A request signed now with a fresh nonce.
    async fn signed(&self, method: &str, path: &str, body: &str) -> Reply {
        let nonce = self.next_nonce();
        self.signed_as(
            &self.url,
            method,
            path,
            body,
            seconds(self.clock.peek()),
            &nonce,
        )
        .await
    }

    async fn signed_as(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: &str,
        timestamp: i64,
        nonce: &str,
    ) -> Reply {
        let secret = Secret::new(SECRET).unwrap();
        // The signed path is the path without its query.
        let signed_path = path.split('?').next().unwrap_or_default();
        let headers = headers_at(
            &secret,
            timestamp,
            nonce,
            method,
            signed_path,
            body.as_bytes(),
        );
        let mut request = self
            .http
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(name, value);
        }
        Reply::from(request.send().await.unwrap()).await
    }

    /// A request signed now, with a fresh nonce, with the key `key_id`
    /// whose secret is `secret`.
    async fn keyed(
        &self,
        key_id: &str,
        secret: &str,
        method: &str,
        path: &str,
        body: &str,
    ) -> Reply {
        let headers = keyed_headers_at(
            &Secret::new(secret).unwrap(),
            key_id,
            seconds(self.clock.peek()),
            &self.next_nonce(),
            method,
            path,
            body.as_bytes(),
        );
        self.with_headers(&self.url, method, path, body, &headers)
            .await
    }

    /// `method path body` sent to `base` with `headers` as they are.
    async fn with_headers(
        &self,
        base: &str,
        method: &str,
        path: &str,
        body: &str,
        headers: &[(&'static str, String)],
    ) -> Reply {
        let mut request = self
            .http
            .request(method.parse().unwrap(), format!("{base}{path}"))
            .body(body.to_owned());
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        Reply::from(request.send().await.unwrap()).await
    }

    async fn unsigned(&self, method: &str, path: &str, body: Vec<u8>) -> Reply {
        let request = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.url))
            .body(body);
        Reply::from(request.send().await.unwrap()).await
    }

    fn status(&self, run: &str) -> RunStatus {
        Store::open_existing(&self.db, true)
            .unwrap()
            .get_run(run)
            .unwrap()
            .status
    }
}

async fn serve(db: &PathBuf, clock: &ManualClock, tune: impl FnOnce(&mut WebhookConfig)) -> String {
    let approver = StoreApprover::open(db, None)
        .unwrap()
        .with_clock(clock.clock());
    let mut config = WebhookConfig::new(Arc::new(approver), Secret::new(SECRET).unwrap());
    config.clock = clock.clock();
    tune(&mut config);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = router(config).into_make_service_with_connect_info::<std::net::SocketAddr>();
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: String,
    cache: String,
    body: String,
}

impl Reply {
    async fn from(response: reqwest::Response) -> Reply {
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let (content_type, cache) = (header("content-type"), header("cache-control"));
        Reply {
            status: response.status().as_u16(),
            content_type,
            cache,
            body: response.text().await.unwrap(),
        }
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// `(status, code)` of an error answer.
    fn refused(&self) -> (u16, String) {
        (
            self.status,
            self.json()["code"].as_str().unwrap_or_default().to_owned(),
        )
    }
}

fn decision(run: &str, approval: &str, hash: &str) -> String {
    json!({"run_id": run, "approval_id": approval, "hash": hash, "by": "alice", "note": "ok"})
        .to_string()
}

#[tokio::test]
async fn every_route_answers_as_specified() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let (a2, h2) = world.waiting("r2", Limits::default()).await;
    world.waiting("r3", Limits::default()).await;

    let listing = world.signed("GET", "/runs/r1/approvals", "").await;
    assert_eq!(listing.status, 200, "{listing:?}");
    assert_eq!(listing.content_type, "application/json");
    assert_eq!(listing.cache, "no-store");
    let listed = listing.json();
    assert_eq!(listed["run_id"], "r1");
    assert_eq!(listed["pending"][0]["id"], a1.as_str());
    assert_eq!(listed["pending"][0]["hash"], h1.as_str());

    let shown = world
        .signed("GET", &format!("/runs/r1/approvals/{a1}"), "")
        .await;
    assert_eq!(
        (shown.status, shown.json()["hash"].clone()),
        (200, json!(h1))
    );

    let text = world
        .signed("GET", &format!("/runs/r1/approvals/{a1}?format=text"), "")
        .await;
    assert_eq!(text.status, 200, "{text:?}");
    assert!(text.content_type.starts_with("text/plain"));
    let lines: Vec<&str> = text.body.lines().collect();
    assert_eq!(lines[0], format!("APPROVAL PENDING  {a1}"));
    assert_eq!(lines[1], "run     r1");
    assert!(
        lines.contains(&format!("hash    {h1}").as_str()),
        "{}",
        text.body
    );
    assert!(
        text.body
            .contains("arguments (the tool call the model made")
    );
    assert!(
        text.body.contains("<script>alert(1)</script>"),
        "shown as text"
    );
    assert!(
        text.body
            .ends_with(&format!("----- end of approval {a1} for tool push -----\n"))
    );

    let approved = world
        .signed(
            "POST",
            &format!("/runs/r1/approvals/{a1}/approve"),
            &decision("r1", &a1, &h1),
        )
        .await;
    assert_eq!(approved.status, 202, "{approved:?}");
    assert_eq!(
        approved.json(),
        json!({"status": "approved", "run_id": "r1", "approval_id": a1, "hash": h1, "by": "alice"})
    );
    assert_eq!(world.status("r1"), RunStatus::WaitingForApproval);

    let rejected = world
        .signed(
            "POST",
            &format!("/runs/r2/approvals/{a2}/reject"),
            &decision("r2", &a2, &h2),
        )
        .await;
    assert_eq!(rejected.status, 200, "{rejected:?}");
    assert_eq!(rejected.json()["status"], "rejected");
    assert_eq!(world.status("r2"), RunStatus::Cancelled);

    let body = json!({"run_id": "r3", "by": "bob", "note": "not today"}).to_string();
    let cancelled = world.signed("POST", "/runs/r3/cancel", &body).await;
    assert_eq!(cancelled.status, 200, "{cancelled:?}");
    assert_eq!(
        cancelled.json(),
        json!({"status": "cancelled", "run_id": "r3", "by": "bob"})
    );
    assert_eq!(world.status("r3"), RunStatus::Cancelled);
}

#[tokio::test]
async fn the_pipeline_refuses_in_order_rate_then_size_then_signature_then_route() {
    let world = World::new(|c| {
        c.unsigned_rate = 0;
        c.unsigned_burst = 7;
        c.max_body = 64;
    })
    .await;
    // Size before signature: an oversized unsigned body is too large.
    let big = world
        .unsigned("POST", "/runs/r1/cancel", vec![b'x'; 65])
        .await;
    assert_eq!(big.refused(), (413, "body_too_large".into()), "{big:?}");
    // Signature before route: an unsigned request to nowhere is refused.
    let unsigned = world.unsigned("GET", "/nowhere", Vec::new()).await;
    assert_eq!(unsigned.refused(), (401, "unauthorized".into()));
    assert_eq!(
        unsigned.json()["error"],
        "timestamp outside the accepted window"
    );
    // Signed, nowhere: not found, whatever the method; never 405.
    for (method, path) in [
        ("GET", "/nowhere"),
        ("GET", "/runs/r1/approvals/"),
        ("DELETE", "/runs/r1/approvals"),
        ("POST", "/runs/r1/approvals"),
    ] {
        let reply = world.signed(method, path, "").await;
        assert_eq!(
            reply.refused(),
            (404, "not_found".into()),
            "{method} {path}"
        );
    }
    // A stale timestamp names the window.
    let stale = world
        .signed_as(
            &world.url,
            "GET",
            "/runs/r1/approvals",
            "",
            seconds(start()) - 301,
            "old",
        )
        .await;
    assert_eq!(stale.refused(), (401, "unauthorized".into()));
    // Seven tokens of the unsigned bucket are spent (a signed request
    // refused spends one too); the eighth unsigned request is refused
    // before anything of it is read, oversized or not.
    let limited = world
        .unsigned("POST", "/runs/r1/cancel", vec![b'x'; 65])
        .await;
    assert_eq!(
        limited.refused(),
        (429, "rate_limited".into()),
        "{limited:?}"
    );
}

#[tokio::test]
async fn malformed_decisions_are_bad_requests() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    for body in [
        "not json".to_owned(),
        json!({"run_id": "r1", "approval_id": a1, "hash": h1, "by": "a", "extra": 1}).to_string(),
        decision("r2", &a1, &h1),
        decision("r1", "other", &h1),
        json!({"run_id": "r1", "approval_id": a1, "by": "alice"}).to_string(),
        json!({"run_id": "r1", "approval_id": a1, "hash": h1}).to_string(),
    ] {
        let reply = world.signed("POST", &path, &body).await;
        assert_eq!(reply.refused(), (400, "bad_request".into()), "{body}");
    }
    for body in [
        json!({"run_id": "r2", "by": "bob"}).to_string(),
        json!({"run_id": "r1"}).to_string(),
    ] {
        let reply = world.signed("POST", "/runs/r1/cancel", &body).await;
        assert_eq!(reply.refused(), (400, "bad_request".into()), "{body}");
    }
    assert_eq!(world.status("r1"), RunStatus::WaitingForApproval);
}

#[tokio::test]
async fn the_approvers_refusals_map_to_their_codes() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let approve = format!("/runs/r1/approvals/{a1}/approve");

    let changed = world
        .signed("POST", &approve, &decision("r1", &a1, &"0".repeat(64)))
        .await;
    assert_eq!(changed.refused(), (409, "approval_changed".into()));
    let missing = world.signed("GET", "/runs/nope/approvals", "").await;
    assert_eq!(missing.refused(), (404, "not_found".into()));
    let other = world.signed("GET", "/runs/r1/approvals/nope", "").await;
    assert_eq!(other.refused(), (404, "not_found".into()));

    assert_eq!(
        world
            .signed("POST", &approve, &decision("r1", &a1, &h1))
            .await
            .status,
        202
    );
    let again = world
        .signed("POST", &approve, &decision("r1", &a1, &h1))
        .await;
    assert_eq!(again.refused(), (409, "not_pending".into()));

    let cancel = json!({"run_id": "r1", "by": "bob"}).to_string();
    assert_eq!(
        world
            .signed("POST", "/runs/r1/cancel", &cancel)
            .await
            .status,
        200
    );
    let finished = world.signed("POST", "/runs/r1/cancel", &cancel).await;
    assert_eq!(finished.refused(), (409, "run_finished".into()));
    let reject = format!("/runs/r1/approvals/{a1}/reject");
    let not_waiting = world
        .signed("POST", &reject, &decision("r1", &a1, &h1))
        .await;
    assert_eq!(not_waiting.refused(), (409, "run_not_waiting".into()));
}

#[tokio::test]
async fn an_expired_approval_is_gone_and_a_decision_on_it_expires_it() {
    let world = World::new(|_| {}).await;
    let limits = Limits::default().approval_ttl(Duration::from_secs(60));
    let (a1, h1) = world.waiting("r1", limits).await;
    world.clock.advance(Duration::from_secs(61));
    let shown = world
        .signed("GET", &format!("/runs/r1/approvals/{a1}"), "")
        .await;
    assert_eq!(shown.refused(), (410, "expired".into()));
    assert_eq!(
        world.status("r1"),
        RunStatus::WaitingForApproval,
        "showing writes nothing"
    );
    let decided = world
        .signed(
            "POST",
            &format!("/runs/r1/approvals/{a1}/approve"),
            &decision("r1", &a1, &h1),
        )
        .await;
    assert_eq!(decided.refused(), (410, "expired".into()));
    assert_eq!(
        world.status("r1"),
        RunStatus::Cancelled,
        "the core's expiry ran"
    );
}

#[tokio::test]
async fn a_replayed_signature_is_refused_also_after_a_restart() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let body = decision("r1", &a1, &h1);
    let now = seconds(world.clock.peek());
    let first = world
        .signed_as(&world.url, "POST", &path, &body, now, "once")
        .await;
    assert_eq!(first.status, 202, "{first:?}");
    let replay = world
        .signed_as(&world.url, "POST", &path, &body, now, "once")
        .await;
    assert_eq!(replay.refused(), (401, "unauthorized".into()));
    assert_eq!(replay.json()["error"], "signature already used");

    let restarted = world.restarted().await;
    let replay = world
        .signed_as(&restarted, "POST", &path, &body, now, "once")
        .await;
    assert_eq!(replay.refused(), (401, "unauthorized".into()), "{replay:?}");
    assert_eq!(replay.json()["error"], "signature already used");
}

#[test]
fn any_request_gets_an_answer_and_the_server_stays_up() {
    use proptest::prelude::*;

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let world = runtime.block_on(World::new(|c| {
        c.rate = 1_000_000;
        c.burst = 1_000_000;
        c.unsigned_rate = 1_000_000;
        c.unsigned_burst = 1_000_000;
    }));
    runtime.block_on(world.waiting("r1", Limits::default()));
    let methods = prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "OPTIONS"]);
    let segment = prop::sample::select(vec![
        "runs",
        "r1",
        "approvals",
        "cancel",
        "approve",
        "reject",
        "",
        "%00",
        "..",
        "é",
    ]);
    let path = prop::collection::vec(segment, 0..7).prop_map(|s| format!("/{}", s.join("/")));
    let body = prop::collection::vec(any::<u8>(), 0..300);
    let signed = any::<bool>();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 200,
        ..ProptestConfig::default()
    });
    runner
        .run(
            &(methods, path, body, signed),
            |(method, path, body, signed)| {
                let reply = runtime.block_on(async {
                    if signed {
                        let text = String::from_utf8_lossy(&body).into_owned();
                        world.signed(method, &path, &text).await
                    } else {
                        world.unsigned(method, &path, body.clone()).await
                    }
                });
                prop_assert!(
                    [200, 202, 400, 401, 404, 409, 410, 413].contains(&reply.status),
                    "{method} {path}: {reply:?}"
                );
                Ok(())
            },
        )
        .unwrap();
    let alive = runtime.block_on(world.signed("GET", "/runs/r1/approvals", ""));
    assert_eq!(alive.status, 200);
}

#[tokio::test]
async fn the_observer_hears_every_verified_decision_and_every_refusal() {
    let heard: Arc<std::sync::Mutex<Vec<WebhookEvent>>> = Arc::default();
    let sink = Arc::clone(&heard);
    let world = World::new(move |c| {
        c.observer = Some(Arc::new(move |e: &WebhookEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
    })
    .await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let approve = format!("/runs/r1/approvals/{a1}/approve");
    assert_eq!(
        world.signed("GET", "/runs/r1/approvals", "").await.status,
        200
    );
    assert_eq!(
        world
            .signed("POST", &approve, &decision("r1", &a1, &"0".repeat(64)))
            .await
            .status,
        409
    );
    assert_eq!(
        world
            .signed("POST", &approve, &decision("r1", &a1, &h1))
            .await
            .status,
        202
    );
    assert_eq!(
        world.unsigned("POST", &approve, Vec::new()).await.status,
        401
    );

    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 3, "a read is not an event: {heard:?}");
    let WebhookEvent::Decision {
        run_id,
        action,
        approval_id,
        by,
        key_id,
        status,
        remote,
        error,
    } = &heard[0]
    else {
        panic!("{heard:?}");
    };
    assert_eq!(
        (
            run_id.as_str(),
            *action,
            approval_id.as_str(),
            by.as_str(),
            *status
        ),
        ("r1", "approve", a1.as_str(), "alice", 409)
    );
    assert_eq!(key_id, "", "signed with the shared secret");
    assert!(remote.starts_with("127.0.0.1:"), "{remote}");
    assert!(
        error
            .as_deref()
            .is_some_and(|e| e.contains("changed") || e.contains("hash")),
        "{error:?}"
    );
    assert!(
        matches!(
            &heard[1],
            WebhookEvent::Decision {
                status: 202,
                error: None,
                ..
            }
        ),
        "{heard:?}"
    );
    assert_eq!(heard[1].name(), "webhook.decision");
    let WebhookEvent::Refused {
        method,
        path,
        status,
        reason,
        ..
    } = &heard[2]
    else {
        panic!("{heard:?}");
    };
    assert_eq!(
        (method.as_str(), path.as_str(), *status),
        ("POST", approve.as_str(), 401)
    );
    assert_eq!(reason, "timestamp outside the accepted window");
    assert_eq!(heard[2].name(), "webhook.refused");
}

/// An approval whose stored request no longer matches its own stored hash
/// (edited behind the store's back) is 409 `approval_hash`, decided not.
#[tokio::test]
async fn an_approval_that_does_not_match_its_own_hash_is_refused() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let conn = rusqlite::Connection::open(&world.db).unwrap();
    conn.execute(
        "UPDATE approvals SET request_json = replace(request_json, 'script', 'SCRIPT') WHERE id = ?1",
        [&a1],
    )
    .unwrap();
    drop(conn);
    let reply = world
        .signed(
            "POST",
            &format!("/runs/r1/approvals/{a1}/approve"),
            &decision("r1", &a1, &h1),
        )
        .await;
    assert_eq!(reply.refused(), (409, "approval_hash".into()), "{reply:?}");
    assert_eq!(world.status("r1"), RunStatus::WaitingForApproval);
}

/// Requests that are not the operator's, however many, spend only the
/// unsigned bucket: unsigned ones, forged ones that look signed, replays
/// and signed requests to no route. The operator's signed decision still
/// passes afterwards.
#[tokio::test]
async fn a_flood_of_unsigned_or_forged_requests_leaves_the_signed_budget_to_the_operator() {
    let world = World::new(|c| {
        c.rate = 0;
        c.burst = 2;
        c.unsigned_rate = 0;
        c.unsigned_burst = 3;
    })
    .await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let mut statuses = Vec::new();
    for _ in 0..20 {
        let flood = world
            .unsigned("GET", "/runs/r1/approvals", Vec::new())
            .await;
        statuses.push(flood.status);
    }
    assert_eq!(statuses[..3], [401; 3], "{statuses:?}");
    assert!(statuses[3..].iter().all(|s| *s == 429), "{statuses:?}");
    // Headers of the right form, a signature that is not the secret's.
    let now = seconds(world.clock.peek()).to_string();
    for n in 0..5 {
        let forged = world
            .http
            .get(format!("{}/runs/r1/approvals", world.url))
            .header("x-approval-timestamp", &now)
            .header("x-approval-nonce", format!("forged-{n}"))
            .header("x-approval-signature", format!("v1={}", "0".repeat(64)))
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status(), 429);
    }
    let nowhere = world.signed("GET", "/nowhere", "").await;
    assert_eq!(nowhere.refused(), (429, "rate_limited".into()));

    let path = format!("/runs/r1/approvals/{a1}/approve");
    let decided = world.signed("POST", &path, &decision("r1", &a1, &h1)).await;
    assert_eq!(decided.status, 202, "{decided:?}");
    let listing = world.signed("GET", "/runs/r1/approvals", "").await;
    assert_eq!(listing.status, 200, "the burst of two");
    let over = world.signed("GET", "/runs/r1/approvals", "").await;
    assert_eq!(over.refused(), (429, "rate_limited".into()), "then none");
}

/// A signed request refused for want of a token was not let through: its
/// signature is not remembered, and the same request sent again once the
/// bucket refilled passes.
#[tokio::test]
async fn a_signed_request_refused_by_the_rate_may_be_sent_again() {
    let world = World::new(|c| {
        c.rate = 1;
        c.burst = 1;
    })
    .await;
    world.waiting("r1", Limits::default()).await;
    let now = seconds(world.clock.peek());
    let first = world
        .signed_as(&world.url, "GET", "/runs/r1/approvals", "", now, "a")
        .await;
    assert_eq!(first.status, 200);
    let over = world
        .signed_as(&world.url, "GET", "/runs/r1/approvals", "", now, "b")
        .await;
    assert_eq!(over.refused(), (429, "rate_limited".into()));
    world.clock.advance(Duration::from_secs(1));
    let again = world
        .signed_as(&world.url, "GET", "/runs/r1/approvals", "", now, "b")
        .await;
    assert_eq!(again.status, 200, "{again:?}");
}

/// An approve body's `args` approves those arguments instead: the
/// approval the edit replaced is `edited`, a new approved approval binds
/// the edited request. A reject carrying `args`, and an edit the core
/// refuses, decide nothing.
#[tokio::test]
async fn an_approve_with_args_approves_the_edit_and_a_refused_edit_decides_nothing() {
    let world = World::new(|_| {}).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let body = |args: Value| {
        json!({"run_id": "r1", "approval_id": a1, "hash": h1, "by": "alice", "note": "safer", "args": args})
            .to_string()
    };
    let reject = format!("/runs/r1/approvals/{a1}/reject");
    let refused = world
        .signed("POST", &reject, &body(json!({"ref": "docs"})))
        .await;
    assert_eq!(refused.refused(), (400, "bad_request".into()));
    let approve = format!("/runs/r1/approvals/{a1}/approve");
    for args in [json!(["docs"]), json!({"ref": "<script>alert(1)</script>"})] {
        let refused = world.signed("POST", &approve, &body(args.clone())).await;
        assert_eq!(refused.refused(), (422, "edit_refused".into()), "{args}");
        assert!(
            refused.json()["error"]
                .as_str()
                .unwrap()
                .contains("nothing was decided")
        );
    }
    let approvals = |world: &World| {
        Store::open_existing(&world.db, true)
            .unwrap()
            .list_approvals("r1")
            .unwrap()
    };
    assert_eq!(approvals(&world).len(), 1);
    assert_eq!(approvals(&world)[0].status, ApprovalStatus::Pending);

    let edited = world
        .signed("POST", &approve, &body(json!({"ref": "docs", "n": 1.50})))
        .await;
    assert_eq!(edited.status, 202, "{}", edited.body);
    let stored = approvals(&world);
    assert_eq!(stored[0].status, ApprovalStatus::Edited);
    assert_eq!(stored[1].status, ApprovalStatus::Approved);
    assert_eq!(stored[1].decided_by, "alice");
    assert_eq!(
        stored[1].request.get("args").unwrap().as_str(),
        r#"{"n":1.5,"ref":"docs"}"#,
        "the edit as sent, canonical"
    );
    let answer = edited.json();
    assert_eq!(answer["approval_id"], stored[1].id.as_str());
    assert_eq!(answer["hash"], stored[1].hash.as_str());
    assert_eq!(answer["edited"], a1.as_str());
}

// Per-approver keys: a request signed with a key decides as its
// approver only.

const ALICE_KEY: &str = "alice-laptop";
const ALICE_SECRET: &str = "alice-0123456789abcdef0123456789abcdef";
const BOB_KEY: &str = "bob-ci";
const BOB_SECRET: &str = "bob-fedcba9876543210fedcba9876543210";

fn keys() -> Keys {
    let mut keys = Keys::default();
    keys.add(ALICE_KEY, "alice", Secret::new(ALICE_SECRET).unwrap())
        .unwrap();
    keys.add(BOB_KEY, "bob", Secret::new(BOB_SECRET).unwrap())
        .unwrap();
    keys
}

fn with_keys(config: &mut WebhookConfig) {
    config.keys = keys();
}

/// A decision body for `r1`'s `approval` with `by` (left out when `None`).
fn decision_by(approval: &str, hash: &str, by: Option<&str>) -> String {
    let mut body = json!({"run_id": "r1", "approval_id": approval, "hash": hash, "note": "ok"});
    if let Some(by) = by {
        body["by"] = json!(by);
    }
    body.to_string()
}

impl World {
    fn approvals(&self, run: &str) -> Vec<agentrt::Approval> {
        Store::open_existing(&self.db, true)
            .unwrap()
            .list_approvals(run)
            .unwrap()
    }

    fn events(&self, run: &str) -> Vec<agentrt::model::Event> {
        Store::open_existing(&self.db, true)
            .unwrap()
            .list_events(run)
            .unwrap()
    }

    /// How many request signatures the database keeps.
    fn recorded_signatures(&self) -> i64 {
        let conn = rusqlite::Connection::open(&self.db).unwrap();
        conn.query_row("SELECT count(*) FROM approver_signatures", [], |r| r.get(0))
            .unwrap()
    }
}

#[tokio::test]
async fn a_decision_signed_with_alices_key_by_alice_is_recorded_as_alices() {
    let world = World::new(with_keys).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let approved = world
        .keyed(
            ALICE_KEY,
            ALICE_SECRET,
            "POST",
            &path,
            &decision_by(&a1, &h1, Some("alice")),
        )
        .await;
    assert_eq!(approved.status, 202, "{approved:?}");
    assert_eq!(approved.json()["by"], "alice");
    let stored = world.approvals("r1");
    assert_eq!(stored[0].status, ApprovalStatus::Approved);
    assert_eq!(stored[0].decided_by, "alice");
    assert_eq!(world.recorded_signatures(), 1);
}

/// A `by` that is not the key's approver is 403 `by_mismatch` on every
/// route that takes one (approve, an edit, reject, cancel): nothing is
/// decided, no event and no signature is written.
#[tokio::test]
async fn a_decision_signed_with_alices_key_by_bob_is_forbidden_and_decides_nothing() {
    let world = World::new(with_keys).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let events = world.events("r1").len();
    let approve = format!("/runs/r1/approvals/{a1}/approve");
    let reject = format!("/runs/r1/approvals/{a1}/reject");
    let edit = json!({"run_id": "r1", "approval_id": a1, "hash": h1, "by": "bob", "args": {"ref": "docs"}})
        .to_string();
    let cancel = json!({"run_id": "r1", "by": "bob"}).to_string();
    for (path, body) in [
        (approve.as_str(), decision_by(&a1, &h1, Some("bob"))),
        (approve.as_str(), edit),
        (reject.as_str(), decision_by(&a1, &h1, Some("bob"))),
        (reject.as_str(), decision_by(&a1, &h1, Some("Alice"))),
        ("/runs/r1/cancel", cancel),
    ] {
        let refused = world
            .keyed(ALICE_KEY, ALICE_SECRET, "POST", path, &body)
            .await;
        assert_eq!(
            refused.refused(),
            (403, "by_mismatch".into()),
            "{path} {body}"
        );
        assert_eq!(
            refused.json()["error"],
            r#"the key alice-laptop decides as "alice" only: by must be "alice" or left out"#
        );
    }
    let stored = world.approvals("r1");
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].status, ApprovalStatus::Pending);
    assert_eq!(world.status("r1"), RunStatus::WaitingForApproval);
    assert_eq!(world.events("r1").len(), events, "no event written");
    assert_eq!(world.recorded_signatures(), 0, "no signature written");
    // Bob's own key decides as bob.
    let by_bob = world
        .keyed(
            BOB_KEY,
            BOB_SECRET,
            "POST",
            &reject,
            &decision_by(&a1, &h1, Some("bob")),
        )
        .await;
    assert_eq!(by_bob.status, 200, "{by_bob:?}");
    assert_eq!(world.approvals("r1")[0].decided_by, "bob");
}

/// A keyed body without `by` decides as the key's approver: approve,
/// reject and cancel, and the observer hears the key and the approver.
#[tokio::test]
async fn a_keyed_decision_without_by_decides_as_the_keys_approver() {
    let heard: Arc<std::sync::Mutex<Vec<WebhookEvent>>> = Arc::default();
    let sink = Arc::clone(&heard);
    let world = World::new(move |c| {
        with_keys(c);
        c.observer = Some(Arc::new(move |e: &WebhookEvent| {
            sink.lock().unwrap().push(e.clone())
        }));
    })
    .await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let approved = world
        .keyed(
            ALICE_KEY,
            ALICE_SECRET,
            "POST",
            &format!("/runs/r1/approvals/{a1}/approve"),
            &decision_by(&a1, &h1, None),
        )
        .await;
    assert_eq!(approved.status, 202, "{approved:?}");
    assert_eq!(approved.json()["by"], "alice");
    assert_eq!(world.approvals("r1")[0].decided_by, "alice");

    let (a2, h2) = world.waiting("r2", Limits::default()).await;
    let body = json!({"run_id": "r2", "approval_id": a2, "hash": h2}).to_string();
    let rejected = world
        .keyed(
            BOB_KEY,
            BOB_SECRET,
            "POST",
            &format!("/runs/r2/approvals/{a2}/reject"),
            &body,
        )
        .await;
    assert_eq!(rejected.status, 200, "{rejected:?}");
    assert_eq!(world.approvals("r2")[0].decided_by, "bob");

    world.waiting("r3", Limits::default()).await;
    let body = json!({"run_id": "r3", "note": "not today"}).to_string();
    let cancelled = world
        .keyed(ALICE_KEY, ALICE_SECRET, "POST", "/runs/r3/cancel", &body)
        .await;
    assert_eq!(
        cancelled.json(),
        json!({"status": "cancelled", "run_id": "r3", "by": "alice"})
    );
    let told = world.events("r3");
    assert!(
        told.iter().any(|e| e.payload.contains(r#""by":"alice""#)),
        "{told:?}"
    );

    let heard = heard.lock().unwrap().clone();
    let WebhookEvent::Decision { by, key_id, .. } = &heard[0] else {
        panic!("{heard:?}");
    };
    assert_eq!((by.as_str(), key_id.as_str()), ("alice", ALICE_KEY));
}

#[tokio::test]
async fn an_unknown_key_id_is_unauthorized() {
    let world = World::new(with_keys).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let body = decision_by(&a1, &h1, Some("carol"));
    for key_id in ["carol-laptop", "alice", ""] {
        let refused = world
            .keyed(key_id, ALICE_SECRET, "POST", &path, &body)
            .await;
        assert_eq!(
            refused.refused(),
            (401, "unauthorized".into()),
            "{key_id:?}"
        );
        assert_eq!(refused.json()["error"], "unknown key id");
    }
    // A key id header that is not text is no key, never "no key id": the
    // shared secret's signature does not pass with it.
    let shared = headers_at(
        &Secret::new(SECRET).unwrap(),
        seconds(world.clock.peek()),
        "garbled",
        "POST",
        &path,
        body.as_bytes(),
    );
    let mut request = world
        .http
        .post(format!("{}{path}", world.url))
        .body(body.clone())
        .header(
            "x-approval-key-id",
            reqwest::header::HeaderValue::from_bytes(b"alice\xe9").unwrap(),
        );
    for (name, value) in &shared {
        request = request.header(*name, value);
    }
    let garbled = Reply::from(request.send().await.unwrap()).await;
    assert_eq!(
        garbled.refused(),
        (401, "unauthorized".into()),
        "{garbled:?}"
    );
    assert_eq!(garbled.json()["error"], "unknown key id");
    assert_eq!(world.approvals("r1")[0].status, ApprovalStatus::Pending);
}

/// Alice's signed request presented under bob's key id, or with its key
/// id taken off, and a request naming bob's key signed with alice's
/// secret, are refused.
#[tokio::test]
async fn alices_signature_under_bobs_key_id_is_unauthorized() {
    let world = World::new(with_keys).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let body = decision_by(&a1, &h1, Some("bob"));
    let by_alice = keyed_headers_at(
        &Secret::new(ALICE_SECRET).unwrap(),
        ALICE_KEY,
        seconds(world.clock.peek()),
        "captured",
        "POST",
        &path,
        body.as_bytes(),
    );
    let mut swapped = by_alice.clone();
    swapped[3].1 = BOB_KEY.to_owned();
    let refused = world
        .with_headers(&world.url, "POST", &path, &body, &swapped)
        .await;
    assert_eq!(refused.refused(), (401, "unauthorized".into()));
    assert_eq!(
        refused.json()["error"],
        "signature does not match the request"
    );
    // Alice signing a request that names bob's key with her own secret.
    let as_bob = world
        .keyed(BOB_KEY, ALICE_SECRET, "POST", &path, &body)
        .await;
    assert_eq!(as_bob.refused(), (401, "unauthorized".into()));
    let unkeyed: Vec<_> = by_alice
        .iter()
        .filter(|(name, _)| *name != "x-approval-key-id")
        .cloned()
        .collect();
    let refused = world
        .with_headers(&world.url, "POST", &path, &body, &unkeyed)
        .await;
    assert_eq!(refused.refused(), (401, "unauthorized".into()));
    assert_eq!(world.approvals("r1")[0].status, ApprovalStatus::Pending);
}

#[tokio::test]
async fn a_replayed_keyed_request_is_refused_also_after_a_restart() {
    let world = World::new(with_keys).await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let body = decision_by(&a1, &h1, None);
    let headers = keyed_headers_at(
        &Secret::new(ALICE_SECRET).unwrap(),
        ALICE_KEY,
        seconds(world.clock.peek()),
        "once",
        "POST",
        &path,
        body.as_bytes(),
    );
    let first = world
        .with_headers(&world.url, "POST", &path, &body, &headers)
        .await;
    assert_eq!(first.status, 202, "{first:?}");
    let replay = world
        .with_headers(&world.url, "POST", &path, &body, &headers)
        .await;
    assert_eq!(replay.refused(), (401, "unauthorized".into()));
    assert_eq!(replay.json()["error"], "signature already used");

    let restarted = world.restarted_with(with_keys).await;
    let replay = world
        .with_headers(&restarted, "POST", &path, &body, &headers)
        .await;
    assert_eq!(replay.refused(), (401, "unauthorized".into()), "{replay:?}");
    assert_eq!(replay.json()["error"], "signature already used");
}

/// Without a shared secret every request must name a key; with one, a
/// request naming none is checked with it as before.
#[tokio::test]
async fn a_webhook_with_keys_only_refuses_a_request_without_a_key_id() {
    let world = World::new(|c| {
        with_keys(c);
        c.secret = None;
    })
    .await;
    world.waiting("r1", Limits::default()).await;
    let unkeyed = world.signed("GET", "/runs/r1/approvals", "").await;
    assert_eq!(unkeyed.refused(), (401, "unauthorized".into()));
    assert_eq!(unkeyed.json()["error"], "a key id is required");
    let keyed = world
        .keyed(ALICE_KEY, ALICE_SECRET, "GET", "/runs/r1/approvals", "")
        .await;
    assert_eq!(keyed.status, 200, "{keyed:?}");

    let both = World::new(with_keys).await;
    both.waiting("r1", Limits::default()).await;
    let shared = both.signed("GET", "/runs/r1/approvals", "").await;
    assert_eq!(shared.status, 200, "{shared:?}");
}

/// Requests under an unknown key id, or with another key's signature,
/// spend only the unsigned bucket: alice's own decision still passes.
#[tokio::test]
async fn requests_under_unknown_or_swapped_keys_spend_only_the_unsigned_bucket() {
    let world = World::new(|c| {
        with_keys(c);
        c.rate = 0;
        c.burst = 1;
        c.unsigned_rate = 0;
        c.unsigned_burst = 2;
    })
    .await;
    let (a1, h1) = world.waiting("r1", Limits::default()).await;
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let unknown = world
            .keyed("carol", ALICE_SECRET, "GET", "/runs/r1/approvals", "")
            .await;
        statuses.push(unknown.status);
        let swapped = world
            .keyed(BOB_KEY, ALICE_SECRET, "GET", "/runs/r1/approvals", "")
            .await;
        statuses.push(swapped.status);
    }
    assert_eq!(statuses, [401, 401, 429, 429, 429, 429]);
    let path = format!("/runs/r1/approvals/{a1}/approve");
    let decided = world
        .keyed(
            ALICE_KEY,
            ALICE_SECRET,
            "POST",
            &path,
            &decision_by(&a1, &h1, None),
        )
        .await;
    assert_eq!(decided.status, 202, "{decided:?}");
}

#[tokio::test]
async fn two_approvers_need_two_keys_of_two_people() {
    let world = World::new(with_keys).await;
    let (a, h) = support::pause_for_two(&world.db, "r1", Some(world.clock.clock())).await;
    let path = format!("/runs/r1/approvals/{a}/approve");
    let first = world
        .keyed(
            ALICE_KEY,
            ALICE_SECRET,
            "POST",
            &path,
            &decision_by(&a, &h, None),
        )
        .await;
    assert_eq!(first.status, 202, "{first:?}");
    assert_eq!(first.json()["status"], "endorsed");
    assert_eq!(first.json()["by"], "alice");
    assert_eq!(
        world.approvals("r1")[0].status,
        agentrt::ApprovalStatus::Pending
    );

    let again = world
        .keyed(
            ALICE_KEY,
            ALICE_SECRET,
            "POST",
            &path,
            &decision_by(&a, &h, None),
        )
        .await;
    assert_eq!(again.status, 409, "{again:?}");
    assert_eq!(again.json()["code"], "same_approver");

    let second = world
        .keyed(
            BOB_KEY,
            BOB_SECRET,
            "POST",
            &path,
            &decision_by(&a, &h, None),
        )
        .await;
    assert_eq!(second.status, 202, "{second:?}");
    assert_eq!(second.json()["status"], "approved");
    let stored = &world.approvals("r1")[0];
    assert_eq!(stored.status, agentrt::ApprovalStatus::Approved);
    assert_eq!(stored.decided_by, "bob");
}
