//! An issuer on 127.0.0.1 (its metadata and key set, keys made here):
//! discovery checks the issuer named, a key published later is fetched
//! when asked for, and keys nobody published make no fetch within the
//! cool-down.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt_oauth::{KeyRefusal, Keys, discover, http_client};
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::json;

fn jwk(kid: &str) -> Jwk {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .expect("a key");
    let key = EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut jwk = Jwk::from_encoding_key(&key, Algorithm::ES256).expect("public");
    jwk.common.key_id = Some(kid.to_owned());
    jwk
}

/// Serves metadata naming `named` (the server's own URL when `None`) and
/// the published keys; counts key set fetches.
async fn issuer(
    named: Option<&str>,
    keys: Vec<Jwk>,
) -> (String, Arc<Mutex<Vec<Jwk>>>, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let published = Arc::new(Mutex::new(keys));
    let fetches = Arc::new(AtomicUsize::new(0));
    let metadata = json!({"issuer": named.unwrap_or(&url), "jwks_uri": format!("{url}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/openid-configuration",
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
    (url, published, fetches)
}

#[tokio::test]
async fn discovery_falls_back_to_openid_and_refuses_another_issuer() {
    let (url, _, _) = issuer(None, vec![jwk("k1")]).await;
    let client = http_client().expect("client");
    let found = discover(&client, &url).await.expect("the OpenID document");
    assert_eq!(found.jwks_uri.as_str(), format!("{url}/jwks"));
    let (url, _, _) = issuer(Some("http://127.0.0.1:1"), vec![jwk("k1")]).await;
    let refused = discover(&client, &url).await.expect_err("another issuer");
    assert!(refused.to_string().contains("names issuer"), "{refused}");
}

#[tokio::test]
async fn a_key_published_later_is_fetched_and_made_up_ones_wait_out_the_cooldown() {
    let (url, published, fetches) = issuer(None, vec![jwk("k1")]).await;
    let client = http_client().expect("client");
    let jwks = discover(&client, &url).await.expect("metadata").jwks_uri;
    let keys = Keys::fetch(client.clone(), jwks.clone(), Duration::ZERO)
        .await
        .expect("keys");
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    assert!(keys.key_for(Some("k1"), Algorithm::ES256).await.is_ok());
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "a known key: no fetch");
    assert_eq!(
        keys.key_for(Some("k1"), Algorithm::RS256).await.err(),
        Some(KeyRefusal::WrongAlgorithm("k1".into()))
    );
    published.lock().expect("keys").push(jwk("k2"));
    assert!(keys.key_for(Some("k2"), Algorithm::ES256).await.is_ok());
    assert_eq!(fetches.load(Ordering::SeqCst), 2, "fetched for the new key");
    assert_eq!(
        keys.key_for(None, Algorithm::ES256).await.err(),
        Some(KeyRefusal::Ambiguous),
        "two keys and no kid"
    );

    let cooled = Keys::fetch(client, jwks, Duration::from_secs(600))
        .await
        .expect("keys");
    let before = fetches.load(Ordering::SeqCst);
    for i in 0..5 {
        assert_eq!(
            cooled
                .key_for(Some(&format!("made-up-{i}")), Algorithm::ES256)
                .await
                .err(),
            Some(KeyRefusal::Unknown(format!("made-up-{i}")))
        );
    }
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        before,
        "no fetch within the cool-down"
    );
}

#[tokio::test]
async fn a_token_is_checked_for_its_issuer_audience_time_and_algorithm() {
    use aws_lc_rs::rand::SystemRandom;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .expect("a key");
    let signing = EncodingKey::from_ec_der(pkcs8.as_ref());
    let mut public = Jwk::from_encoding_key(&signing, Algorithm::ES256).expect("public");
    public.common.key_id = Some("k1".into());
    let (url, _, _) = issuer(None, vec![public]).await;
    let client = http_client().expect("client");
    let jwks = discover(&client, &url).await.expect("metadata").jwks_uri;
    let keys = Keys::fetch(client, jwks, Duration::ZERO)
        .await
        .expect("keys");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let sign = |claims: serde_json::Value| {
        let mut header = jsonwebtoken::Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        jsonwebtoken::encode(&header, &claims, &signing).expect("signed")
    };
    let good = json!({"iss": url, "aud": "api", "sub": "alice", "exp": now + 60});
    let expected = agentrt_oauth::Expected {
        issuer: &url,
        audience: "api",
        leeway: 0,
        algorithms: &agentrt_oauth::ASYMMETRIC,
    };
    let checked = keys
        .check(&sign(good.clone()), &expected)
        .await
        .expect("holds");
    assert_eq!(checked.claims["sub"], "alice");
    for (change, says) in [
        (json!({"aud": "other"}), "another audience"),
        (json!({"iss": "http://127.0.0.1:1"}), "another issuer"),
        (json!({"exp": now - 10}), "expired"),
        (json!({"nbf": now + 600}), "not valid yet"),
    ] {
        let mut claims = good.clone();
        for (k, v) in change.as_object().unwrap() {
            claims[k] = v.clone();
        }
        let refused = keys.check(&sign(claims), &expected).await.expect_err(says);
        assert!(refused.contains(says), "{says}: {refused}");
    }
    // A shared-secret token, even one "signed" with the public key's
    // bytes, is refused before any key is used.
    let hs = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"public").expect("a secret"),
    )
    .expect("signed");
    let refused = keys.check(&hs, &expected).await.expect_err("HS256");
    assert!(refused.contains("not admitted"), "{refused}");
}
