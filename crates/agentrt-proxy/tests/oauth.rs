//! `agentrt-proxy serve --http` with `"oauth"`: the proxy as an OAuth 2.1
//! protected resource. An issuer on 127.0.0.1 (its metadata and key set,
//! keys made per test) signs access tokens; hosts are rmcp clients and
//! plain HTTP requests. A good token's caller labels the run; no token, a
//! token for another audience, an expired one, one signed by an unknown
//! key, one from another issuer, an ID token and one without the scope
//! are refused with RFC 6750/9728's status and challenge; the token never
//! reaches the upstream server; a session is its opener's.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentrt_mcp_fixture::{Mode, serve};
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

/// A signing key of the test issuer.
struct Key {
    kid: String,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl Key {
    /// A new P-256 key named `kid`.
    fn new(kid: &str) -> Key {
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .expect("a key");
        let encoding = EncodingKey::from_ec_der(pkcs8.as_ref());
        let mut jwk = Jwk::from_encoding_key(&encoding, Algorithm::ES256).expect("its public key");
        jwk.common.key_id = Some(kid.to_owned());
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        Key {
            kid: kid.to_owned(),
            encoding,
            jwk,
        }
    }

    /// `claims` signed, with header type `typ`.
    fn sign(&self, claims: &Value, typ: &str) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = Some(typ.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("signed")
    }
}

/// The test issuer: its metadata and its published keys, counting fetches.
struct Issuer {
    url: String,
    published: Arc<Mutex<Vec<Jwk>>>,
    fetches: Arc<AtomicUsize>,
}

impl Issuer {
    async fn start(keys: &[&Key]) -> Issuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let published: Arc<Mutex<Vec<Jwk>>> =
            Arc::new(Mutex::new(keys.iter().map(|k| k.jwk.clone()).collect()));
        let fetches = Arc::new(AtomicUsize::new(0));
        let metadata = json!({"issuer": url, "jwks_uri": format!("{url}/jwks")});
        let app = axum::Router::new()
            .route(
                "/.well-known/oauth-authorization-server",
                axum::routing::get(move || {
                    let metadata = metadata.clone();
                    async move { axum::Json(metadata) }
                }),
            )
            .route(
                "/jwks",
                axum::routing::get({
                    let (published, fetches) = (Arc::clone(&published), Arc::clone(&fetches));
                    move || {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        let keys = published.lock().expect("keys").clone();
                        async move { axum::Json(json!({"keys": keys})) }
                    }
                }),
            );
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Issuer {
            url,
            published,
            fetches,
        }
    }

    fn publish(&self, key: &Key) {
        self.published.lock().expect("keys").push(key.jwk.clone());
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs()
}

/// Claims of a good access token of `issuer` for `resource`, by `sub`.
fn claims(issuer: &str, resource: &str, sub: &str) -> Value {
    json!({
        "iss": issuer, "sub": sub, "aud": resource, "iat": now(), "exp": now() + 300,
        "scope": "mcp:tools other", "groups": ["staff", "approvers"], "client_id": "host-1",
    })
}

/// A proxy serving over HTTP with OAuth: the process, its URL.
struct Serving {
    child: Child,
    url: String,
}

/// Pins the fixture at `upstream` into a configuration admitting tokens of
/// `issuer` (and `oauth_extra` fields), and serves it.
async fn start(dir: &Path, upstream: &str, issuer: &str, oauth_extra: &str) -> Serving {
    start_with(
        dir,
        upstream,
        issuer,
        oauth_extra,
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await
}

/// [`start`] with the fixture's tool under `rule`, and no hold (a call
/// that needs an approval is answered at once).
async fn start_with(
    dir: &Path,
    upstream: &str,
    issuer: &str,
    oauth_extra: &str,
    rule: &str,
) -> Serving {
    support::configure(
        dir,
        upstream,
        &format!(
            r#""session": "web", "hold": "0s", "oauth": {{"issuer": "{issuer}", "scopes": ["mcp:tools"]{oauth_extra}}}"#
        ),
        rule,
    )
    .await;
    let (child, url, said) = support::serve_http(&dir.join("proxy.json")).await;
    assert!(
        said.iter()
            .any(|l| l.contains(&format!("access tokens of {issuer} for {url}"))),
        "{said:#?}"
    );
    Serving { child, url }
}

fn metadata_url(url: &str) -> String {
    url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_good_token_calls_and_its_caller_labels_the_run_while_the_token_stays_here() {
    let (upstream, seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start(dir.path(), &upstream, &issuer.url, "").await;

    let token = key.sign(&claims(&issuer.url, &url, "alice"), "at+jwt");
    let config = StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(token);
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("handshake");
    let mut args = serde_json::Map::new();
    args.insert("path".into(), json!("notes.txt"));
    let result = client
        .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args))
        .await
        .expect("an answer");
    assert_eq!(result.is_error, Some(false), "{result:?}");
    client.cancel().await.expect("close");

    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 1);
    let labels = &runs[0].labels;
    assert_eq!(labels.get("caller.subject"), Some("alice"));
    assert_eq!(labels.get("caller.issuer"), Some(issuer.url.as_str()));
    assert_eq!(labels.get("caller.groups"), Some("approvers,staff"));
    assert_eq!(labels.get("caller.client"), Some("host-1"));
    // The caller's labels are in the chained event that began the run.
    let events = store.list_events(&runs[0].id).expect("events");
    let started = serde_json::to_string(&events[0]).expect("json");
    assert!(
        started.contains("caller.subject") && started.contains("alice"),
        "{started}"
    );
    assert!(
        seen.authorizations.lock().expect("lock").is_empty(),
        "no token reached the upstream server"
    );
    // The fixture does note a token it is sent (so the emptiness above
    // says something).
    let direct = reqwest::Client::new()
        .post(&upstream)
        .bearer_auth("direct")
        .body("{}")
        .send()
        .await
        .expect("an answer");
    drop(direct);
    assert_eq!(
        *seen.authorizations.lock().expect("lock"),
        ["Bearer direct"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_without_a_good_token_are_refused_with_the_challenge_naming_the_metadata() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let stranger = Key::new("stranger");
    let issuer = Issuer::start(&[&key]).await;
    let other_issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start(dir.path(), &upstream, &issuer.url, "").await;
    let metadata = metadata_url(&url);

    // None: 401, the challenge names the metadata and the scope, no error.
    let refused = support::initialize(&url, None, None).await;
    assert_eq!(refused.status(), 401);
    assert_eq!(
        support::challenge(&refused),
        format!(r#"Bearer scope="mcp:tools", resource_metadata="{metadata}""#)
    );

    let good = claims(&issuer.url, &url, "alice");
    let with = |change: &dyn Fn(&mut Value)| {
        let mut c = good.clone();
        change(&mut c);
        c
    };
    for (what, token, says) in [
        (
            "another audience",
            key.sign(
                &with(&|c| c["aud"] = json!("http://127.0.0.1:1/mcp")),
                "at+jwt",
            ),
            "another audience",
        ),
        (
            "expired past the leeway",
            key.sign(&with(&|c| c["exp"] = json!(now() - 120)), "at+jwt"),
            "expired",
        ),
        (
            "not valid yet",
            key.sign(&with(&|c| c["nbf"] = json!(now() + 600)), "at+jwt"),
            "not valid yet",
        ),
        (
            "an unknown key",
            stranger.sign(&good, "at+jwt"),
            "no signing key",
        ),
        (
            "another issuer",
            key.sign(&with(&|c| c["iss"] = json!(other_issuer.url)), "at+jwt"),
            "another issuer",
        ),
        ("an ID token", key.sign(&good, "JWT"), "token type"),
        (
            "no subject",
            key.sign(
                &with(&|c| drop(c.as_object_mut().map(|o| o.remove("sub")))),
                "at+jwt",
            ),
            "no sub",
        ),
        ("not a JWT", "abc.def".to_owned(), "not a signed JWT"),
    ] {
        let refused = support::initialize(&url, Some(&token), None).await;
        assert_eq!(refused.status(), 401, "{what}");
        let header = support::challenge(&refused);
        assert!(
            header.starts_with(r#"Bearer error="invalid_token""#),
            "{what}: {header}"
        );
        assert!(header.contains(says), "{what}: {header}");
        assert!(
            header.contains(&format!(r#"resource_metadata="{metadata}""#)),
            "{what}: {header}"
        );
    }

    // A good token without the scope: 403, insufficient_scope.
    let unscoped = key.sign(&with(&|c| c["scope"] = json!("other")), "at+jwt");
    let refused = support::initialize(&url, Some(&unscoped), None).await;
    assert_eq!(refused.status(), 403);
    assert!(support::challenge(&refused).starts_with(r#"Bearer error="insufficient_scope""#));

    // And the good token is admitted.
    let admitted = support::initialize(&url, Some(&key.sign(&good, "at+jwt")), None).await;
    assert_eq!(admitted.status(), 200);
    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    assert!(
        store.list_runs(10, 0).expect("runs").items.is_empty(),
        "nothing ran"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_names_the_resource_its_issuer_and_scopes_for_anyone() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start(dir.path(), &upstream, &issuer.url, "").await;
    for at in [
        metadata_url(&url),
        url.replace("/mcp", "/.well-known/oauth-protected-resource"),
    ] {
        let document: Value = reqwest::get(&at)
            .await
            .expect("an answer")
            .json()
            .await
            .expect("JSON");
        assert_eq!(document["resource"], json!(url), "{at}");
        assert_eq!(document["authorization_servers"], json!([issuer.url]));
        assert_eq!(document["scopes_supported"], json!(["mcp:tools"]));
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }
    // Anyone, but through the same Host check as the rest: a name the
    // connection did not reach (DNS rebinding) is refused.
    let rebound = reqwest::Client::new()
        .get(metadata_url(&url))
        .header("host", "evil.example")
        .send()
        .await
        .expect("an answer");
    assert_eq!(rebound.status(), 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_fetched_when_a_token_names_it_and_unknown_ones_wait_out_the_cooldown() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let (old, new) = (Key::new("k1"), Key::new("k2"));
    let issuer = Issuer::start(&[&old]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start(
        dir.path(),
        &upstream,
        &issuer.url,
        r#", "jwks_cooldown": "0s""#,
    )
    .await;
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), 1, "fetched at start");
    let good = claims(&issuer.url, &url, "alice");
    assert_eq!(
        support::initialize(&url, Some(&old.sign(&good, "at+jwt")), None)
            .await
            .status(),
        200
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        1,
        "a known key: no fetch"
    );
    issuer.publish(&new);
    assert_eq!(
        support::initialize(&url, Some(&new.sign(&good, "at+jwt")), None)
            .await
            .status(),
        200
    );
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        2,
        "fetched for the new key"
    );

    // With the default cool-down, tokens naming keys nobody published
    // make no fetch in the ten seconds after the last one.
    let dir = tempfile::tempdir().expect("dir");
    let before = issuer.fetches.load(Ordering::SeqCst);
    let Serving {
        child: _second,
        url,
    } = start(dir.path(), &upstream, &issuer.url, "").await;
    let good = claims(&issuer.url, &url, "alice");
    for i in 0..5 {
        let made_up = Key::new(&format!("made-up-{i}"));
        assert_eq!(
            support::initialize(&url, Some(&made_up.sign(&good, "at+jwt")), None)
                .await
                .status(),
            401
        );
    }
    assert_eq!(
        issuer.fetches.load(Ordering::SeqCst),
        before + 1,
        "the start's fetch only"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_its_openers_and_the_same_call_by_two_callers_is_two_requests() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start(dir.path(), &upstream, &issuer.url, "").await;
    let alice = key.sign(&claims(&issuer.url, &url, "alice"), "at+jwt");
    let bob = key.sign(&claims(&issuer.url, &url, "bob"), "at+jwt");
    let opened = support::initialize(&url, Some(&alice), None).await;
    assert_eq!(opened.status(), 200);
    let session = opened
        .headers()
        .get("mcp-session-id")
        .expect("a session")
        .to_str()
        .expect("text")
        .to_owned();
    let refused = support::initialize(&url, Some(&bob), Some(&session)).await;
    assert_eq!(refused.status(), 403, "bob cannot speak in alice's session");
    let delete = reqwest::Client::new()
        .delete(&url)
        .bearer_auth(&bob)
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("an answer");
    assert_eq!(delete.status(), 403, "nor close it");

    for token in [&alice, &bob] {
        let config =
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).auth_header(token.clone());
        let client =
            ().serve(StreamableHttpClientTransport::from_config(config))
                .await
                .expect("handshake");
        let mut args = serde_json::Map::new();
        args.insert("path".into(), json!("same.txt"));
        client
            .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args))
            .await
            .expect("an answer");
        client.cancel().await.expect("close");
    }
    let db = rusqlite::Connection::open(dir.path().join("proxy.db")).expect("db");
    let keys: Vec<String> = db
        .prepare(&format!(
            "SELECT request_key FROM {}",
            agentrt_proxy::CALLS_TABLE
        ))
        .expect("query")
        .query_map([], |row| row.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("keys");
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1], "each caller's call is its own request");
}

/// An rmcp host with `token` at `url`, calling `tool` with `args`: the
/// answer's text.
async fn call_as(url: &str, token: &str, tool: &'static str, args: Value) -> String {
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token.to_owned());
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .expect("handshake");
    let Value::Object(args) = args else {
        panic!("arguments are an object");
    };
    let result = client
        .call_tool(CallToolRequestParams::new(tool).with_arguments(args))
        .await
        .expect("an answer");
    client.cancel().await.expect("close");
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_tool_tells_each_caller_of_its_own_requests_only() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    let Serving { child: _proxy, url } = start_with(
        dir.path(),
        &upstream,
        &issuer.url,
        "",
        r#"{"side_effect": "read_only", "outcome": "require_approval", "timeout": "5s"}"#,
    )
    .await;
    let alice = key.sign(&claims(&issuer.url, &url, "alice"), "at+jwt");
    let bob = key.sign(&claims(&issuer.url, &url, "bob"), "at+jwt");
    let held = call_as(&url, &alice, "fs_read_file", json!({"path": "secret.txt"})).await;
    assert!(held.contains("approval"), "{held}");

    let alices = call_as(&url, &alice, "gate_status", json!({})).await;
    assert!(
        alices.contains("1 request of this session waits"),
        "{alices}"
    );
    let approval_id = alices
        .split("- approval ")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .expect("an approval id")
        .to_owned();
    let bobs = call_as(&url, &bob, "gate_status", json!({})).await;
    assert!(
        bobs.contains("no request in this session is waiting"),
        "{bobs}"
    );
    assert!(!bobs.contains("secret.txt"), "{bobs}");
    let asked = call_as(
        &url,
        &bob,
        "gate_status",
        json!({"approval_id": approval_id}),
    )
    .await;
    assert!(
        asked.contains("is known in this session"),
        "bob learns nothing of it: {asked}"
    );
    let asked = call_as(
        &url,
        &alice,
        "gate_status",
        json!({"approval_id": approval_id}),
    )
    .await;
    assert!(
        asked.contains("waits for an operator's decision"),
        "{asked}"
    );
}

#[tokio::test]
async fn a_token_file_beside_oauth_is_refused_at_start() {
    let (upstream, _seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &upstream,
        &format!(
            r#""session": "web", "oauth": {{"issuer": "{}"}}"#,
            issuer.url
        ),
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await;
    let output = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(dir.path().join("proxy.json"))
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(dir.path().join("token"))
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("exclude each other"), "{stderr}");
    let _ = Duration::ZERO;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_subject_is_the_cedar_principal_and_recheck_judges_it_so() {
    let (upstream, seen) = serve(Mode::Json).await;
    let key = Key::new("k1");
    let issuer = Issuer::start(&[&key]).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("policy.cedar"),
        r#"@id("alice-reads") permit(principal == Agentrt::Caller::"alice", action, resource);"#,
    )
    .expect("policy");
    support::configure(
        dir.path(),
        &upstream,
        &format!(
            r#""session": "web", "hold": "0s", "policy": {{"cedar": "policy.cedar"}},
               "oauth": {{"issuer": "{}", "scopes": ["mcp:tools"]}}"#,
            issuer.url
        ),
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await;
    let (child, url, _) = support::serve_http(&dir.path().join("proxy.json")).await;
    let alice = key.sign(&claims(&issuer.url, &url, "alice"), "at+jwt");
    let bob = key.sign(&claims(&issuer.url, &url, "bob"), "at+jwt");
    let allowed = call_as(&url, &alice, "fs_read_file", json!({"path": "a.txt"})).await;
    assert!(!allowed.contains("DENIED"), "{allowed}");
    let denied = call_as(&url, &bob, "fs_read_file", json!({"path": "b.txt"})).await;
    assert!(denied.contains("no cedar policy permits"), "{denied}");
    assert_eq!(
        seen.call_arguments.lock().expect("lock").len(),
        1,
        "alice's read only"
    );
    drop(child);

    let args = [
        "recheck".to_owned(),
        "--config".to_owned(),
        dir.path().join("proxy.json").to_string_lossy().into_owned(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    let out = String::from_utf8_lossy(&out);
    assert_eq!(code, 0, "{out}{}", String::from_utf8_lossy(&err));
    assert!(
        out.contains("2 decision(s) re-checked") && out.contains("0 run(s) differ"),
        "each call judged again with its caller as the principal: {out}"
    );
}
