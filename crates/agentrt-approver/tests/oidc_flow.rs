//! The sign-in's checks, in process against a provider made here (its
//! metadata, keys and token endpoint on 127.0.0.1, its ID tokens signed
//! with a key made per test): the page sends PKCE, `state` and `nonce`;
//! the callback admits a good ID token of a member of the approvers'
//! group only, and refuses one whose nonce, audience, issuer or time is
//! wrong, an unknown or reused state, and a subject outside the group,
//! opening no session for any of them.

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use agentrt::Store;
use agentrt_approver::page::{PageConfig, router};
use agentrt_approver::signature::Secret;
use agentrt_approver::{OidcConfig, StoreApprover};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use base64::Engine as _;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::Digest as _;

/// What the fake provider's next ID token says (changed per case).
#[derive(Clone)]
struct Next {
    subject: String,
    groups: Vec<String>,
    /// Replaces the nonce the sign-in sent.
    nonce: Option<String>,
    audience: Option<String>,
    issuer: Option<String>,
    expires_in: i64,
}

impl Default for Next {
    fn default() -> Next {
        Next {
            subject: "alice".into(),
            groups: vec!["approvers".into()],
            nonce: None,
            audience: None,
            issuer: None,
            expires_in: 300,
        }
    }
}

struct Fake {
    issuer: String,
    key: EncodingKey,
    /// The authorization requests seen: code → (nonce, challenge).
    codes: Mutex<HashMap<String, (String, String)>>,
    next: Mutex<Next>,
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The token endpoint: checks the client's secret and PKCE, answers an
/// ID token as `next` says.
async fn token(
    State(fake): State<Arc<Fake>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> (StatusCode, axum::Json<Value>) {
    let form: HashMap<String, String> = form_urlencoded::parse(&body).into_owned().collect();
    let basic = base64::engine::general_purpose::STANDARD.encode("agentrt-approver:s3cret");
    let authorized = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == format!("Basic {basic}"));
    let code = form.get("code").cloned().unwrap_or_default();
    let Some((nonce, challenge)) = fake.codes.lock().unwrap().remove(&code) else {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        );
    };
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    let made = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    if !authorized || made != challenge {
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_grant"})),
        );
    }
    let next = fake.next.lock().unwrap().clone();
    let claims = json!({
        "iss": next.issuer.unwrap_or_else(|| fake.issuer.clone()),
        "aud": next.audience.unwrap_or_else(|| "agentrt-approver".into()),
        "sub": next.subject,
        "groups": next.groups,
        "nonce": next.nonce.unwrap_or(nonce),
        "iat": now(),
        "exp": now() + next.expires_in,
    });
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("k1".into());
    let id_token = jsonwebtoken::encode(&header, &claims, &fake.key).unwrap();
    (
        StatusCode::OK,
        axum::Json(json!({"id_token": id_token, "token_type": "Bearer"})),
    )
}

struct World {
    _dir: tempfile::TempDir,
    fake: Arc<Fake>,
    base: String,
    http: reqwest::Client,
}

impl World {
    async fn new() -> World {
        use aws_lc_rs::rand::SystemRandom;
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
        let pkcs8 =
            EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
                .unwrap();
        let key = EncodingKey::from_ec_der(pkcs8.as_ref());
        let mut jwk: Jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).unwrap();
        jwk.common.key_id = Some("k1".into());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let fake = Arc::new(Fake {
            issuer: issuer.clone(),
            key,
            codes: Mutex::default(),
            next: Mutex::default(),
        });
        let metadata = json!({
            "issuer": issuer,
            "jwks_uri": format!("{issuer}/jwks"),
            "authorization_endpoint": format!("{issuer}/auth"),
            "token_endpoint": format!("{issuer}/token"),
        });
        let keys = json!({"keys": [jwk]});
        let provider = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                axum::routing::get(move || async move { axum::Json(metadata) }),
            )
            .route(
                "/jwks",
                axum::routing::get(move || async move { axum::Json(keys) }),
            )
            .route("/token", axum::routing::post(token))
            .with_state(Arc::clone(&fake));
        tokio::spawn(async move { axum::serve(listener, provider).await });

        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("runs.db");
        drop(Store::open(&db).unwrap());
        let page = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", page.local_addr().unwrap());
        let config = OidcConfig::parse(
            json!({
                "issuer": issuer,
                "client_id": "agentrt-approver",
                "client_secret_file": "unused",
                "redirect_url": format!("{base}/ui/oidc/callback"),
            })
            .to_string()
            .as_bytes(),
            std::path::Path::new("/o.json"),
        )
        .unwrap();
        let oidc = agentrt_approver::oidc::Provider::connect(config, "s3cret".into())
            .await
            .unwrap();
        let approver = StoreApprover::open(&db, None).unwrap();
        let console = approver.store().clone();
        let app = router(PageConfig {
            console: Some(console),
            oidc: Some(Arc::new(oidc)),
            ..PageConfig::new(Arc::new(approver), Secret::new([9; 32]).unwrap())
        });
        tokio::spawn(async move { axum::serve(page, app).await });
        World {
            _dir: dir,
            fake,
            base,
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
        }
    }

    /// Begins a sign-in: the provider's URL's query, with the code the
    /// fake provider will take for it.
    async fn begin(&self) -> HashMap<String, String> {
        let answer = self
            .http
            .get(format!("{}/ui/sign-in", self.base))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 303);
        let location = answer.headers()["location"].to_str().unwrap().to_owned();
        assert!(
            location.starts_with(&format!("{}/auth?", self.fake.issuer)),
            "{location}"
        );
        let query: HashMap<String, String> = url::Url::parse(&location)
            .unwrap()
            .query_pairs()
            .into_owned()
            .collect();
        let code = format!("code-{}", query["state"]);
        self.fake.codes.lock().unwrap().insert(
            code,
            (query["nonce"].clone(), query["code_challenge"].clone()),
        );
        query
    }

    /// The page's answer to the provider's redirect back.
    async fn callback(&self, state: &str) -> reqwest::Response {
        self.http
            .get(format!(
                "{}/ui/oidc/callback?code=code-{state}&state={state}",
                self.base
            ))
            .send()
            .await
            .unwrap()
    }

    fn next(&self, next: Next) {
        *self.fake.next.lock().unwrap() = next;
    }
}

#[tokio::test]
async fn the_sign_in_sends_pkce_state_and_nonce_and_admits_a_good_member() {
    let world = World::new().await;
    let query = world.begin().await;
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], "agentrt-approver");
    assert_eq!(query["code_challenge_method"], "S256");
    assert_eq!(query["scope"], "openid");
    assert!(query["state"].len() >= 43 && query["nonce"].len() >= 43);
    let answer = world.callback(&query["state"]).await;
    assert_eq!(answer.status(), 303);
    assert_eq!(answer.headers()["location"], "/ui/console");
    let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let session = cookie.split(';').next().unwrap().to_owned();
    let console = world
        .http
        .get(format!("{}/ui/console", world.base))
        .header("cookie", session)
        .send()
        .await
        .unwrap();
    assert_eq!(console.status(), 200);
    let text = console.text().await.unwrap();
    assert!(
        text.contains(&format!("alice &lt;{}&gt;", world.fake.issuer)),
        "{text}"
    );

    // The state was used: the same answer again opens nothing (even with
    // a code the provider would take).
    world.fake.codes.lock().unwrap().insert(
        format!("code-{}", query["state"]),
        (query["nonce"].clone(), query["code_challenge"].clone()),
    );
    let again = world.callback(&query["state"]).await;
    assert_eq!(again.status(), 401);
    assert!(again.headers().get("set-cookie").is_none());
}

#[tokio::test]
async fn id_tokens_that_do_not_hold_and_outsiders_open_no_session() {
    let world = World::new().await;
    for (what, next, status) in [
        (
            "another nonce",
            Next {
                nonce: Some("not-this-sign-ins".into()),
                ..Next::default()
            },
            401,
        ),
        (
            "another audience",
            Next {
                audience: Some("someone-else".into()),
                ..Next::default()
            },
            401,
        ),
        (
            "another issuer",
            Next {
                issuer: Some("http://127.0.0.1:1".into()),
                ..Next::default()
            },
            401,
        ),
        (
            "expired",
            Next {
                expires_in: -600,
                ..Next::default()
            },
            401,
        ),
        (
            "outside the group",
            Next {
                subject: "bob".into(),
                groups: vec!["staff".into()],
                ..Next::default()
            },
            403,
        ),
    ] {
        world.next(next);
        let query = world.begin().await;
        let answer = world.callback(&query["state"]).await;
        assert_eq!(answer.status(), status, "{what}");
        assert!(
            answer.headers().get("set-cookie").is_none(),
            "{what}: no session"
        );
    }
    // A state this server never sent.
    let answer = world.callback("made-up").await;
    assert_eq!(answer.status(), 401);
    assert!(answer.headers().get("set-cookie").is_none());
}

#[test]
fn a_sign_in_file_or_client_secret_others_may_read_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("oidc.json");
    let secret = dir.path().join("client.secret");
    std::fs::write(
        &config,
        r#"{"issuer": "https://id.example.com", "client_id": "c", "client_secret_file": "client.secret",
            "redirect_url": "https://approve.example.com/ui/oidc/callback"}"#,
    )
    .unwrap();
    std::fs::write(&secret, "s3cret\n").unwrap();
    let mode = |path: &std::path::Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&config, 0o600);
    mode(&secret, 0o600);
    let (read, client_secret) = agentrt_approver::serve::read_oidc(&config).expect("private");
    assert_eq!(
        (read.client_id.as_str(), client_secret.as_str()),
        ("c", "s3cret")
    );
    mode(&secret, 0o644);
    let refused = agentrt_approver::serve::read_oidc(&config).expect_err("a readable secret");
    assert!(
        refused.to_string().contains("client_secret_file"),
        "{refused}"
    );
    mode(&secret, 0o600);
    mode(&config, 0o666);
    assert!(
        agentrt_approver::serve::read_oidc(&config).is_err(),
        "a config others may write"
    );
}
