//! The issuer's signing keys: found through its metadata (RFC 8414, else
//! OpenID discovery) unless configured, fetched at start, kept, and
//! fetched again when a token names a key the set lacks (a rotation) or
//! the set is an hour old. Fetches go only to HTTPS or loopback HTTP, follow
//! no redirect, use no proxy from the environment, and read at most
//! [`MAX_KEYS_BYTES`].

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use reqwest::Url;
use serde_json::Value;

use super::config::{OAuthConfig, web_url};

/// The most bytes read of a metadata document or a key set.
pub const MAX_KEYS_BYTES: usize = 1 << 20;
/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// A key set older than this is fetched again when next used.
const MAX_AGE: Duration = Duration::from_secs(3600);

/// One usable key of the set.
struct Key {
    id: Option<String>,
    /// The algorithm the key is for, when the set says.
    algorithm: Option<Algorithm>,
    key: Arc<DecodingKey>,
}

/// The keys as last fetched.
struct KeySet {
    keys: Vec<Key>,
    fetched: Instant,
}

/// Why no key verifies a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KeyRefusal {
    /// The set has no key with the token's `kid` (after a fetch, or
    /// within the cool-down).
    Unknown(String),
    /// The token names no key and the set has several for its algorithm.
    Ambiguous,
    /// The key is for another algorithm.
    WrongAlgorithm(String),
}

impl std::fmt::Display for KeyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRefusal::Unknown(kid) => write!(f, "the issuer has no signing key {kid:?}"),
            KeyRefusal::Ambiguous => {
                write!(f, "the token names no key (kid) and the issuer has several")
            }
            KeyRefusal::WrongAlgorithm(kid) => {
                write!(f, "key {kid:?} is not for the token's algorithm")
            }
        }
    }
}

/// The issuer's keys, shared by every request.
pub(crate) struct Keys {
    client: reqwest::Client,
    jwks_uri: Url,
    cooldown: Duration,
    set: RwLock<Arc<KeySet>>,
    /// Held while fetching, so that many requests naming a new key make
    /// one fetch.
    fetching: tokio::sync::Mutex<()>,
}

impl Keys {
    /// Finds the key set's address (the configuration's, or the issuer's
    /// metadata) and fetches it.
    ///
    /// # Errors
    ///
    /// What failed, in words: the metadata or the set cannot be fetched,
    /// names another issuer, or holds no usable key.
    pub(crate) async fn fetch(config: &OAuthConfig) -> Result<Keys, String> {
        let client = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            // A redirect could lead a fetch where the configuration did
            // not; a proxy from the environment could read it.
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(|e| format!("no HTTP client: {e}"))?;
        let jwks_uri = match &config.jwks_uri {
            Some(uri) => web_url("jwks_uri", uri)?,
            None => discover(&client, &config.issuer).await?,
        };
        let keys = fetch_set(&client, &jwks_uri).await?;
        Ok(Keys {
            client,
            jwks_uri,
            cooldown: config.jwks_cooldown,
            set: RwLock::new(Arc::new(KeySet {
                keys,
                fetched: Instant::now(),
            })),
            fetching: tokio::sync::Mutex::new(()),
        })
    }

    fn current(&self) -> Arc<KeySet> {
        Arc::clone(
            &self
                .set
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The key that verifies a token signed with `algorithm` by key
    /// `kid`: from the set, or from a new fetch when the set lacks it (at
    /// most once a cool-down) or is an hour old.
    pub(crate) async fn key_for(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Result<Arc<DecodingKey>, KeyRefusal> {
        let set = self.current();
        let stale = set.fetched.elapsed() >= MAX_AGE;
        let found = pick(&set, kid, algorithm);
        if !stale && !matches!(found, Err(KeyRefusal::Unknown(_))) {
            return found;
        }
        let fetched_before = set.fetched;
        let guard = self.fetching.lock().await;
        let set = self.current();
        // Another request fetched while this one waited: use its set.
        let fresh = set.fetched != fetched_before;
        if !fresh
            && (stale || set.fetched.elapsed() >= self.cooldown)
            && let Ok(keys) = fetch_set(&self.client, &self.jwks_uri).await
        {
            let new = Arc::new(KeySet {
                keys,
                fetched: Instant::now(),
            });
            *self
                .set
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::clone(&new);
            drop(guard);
            return pick(&new, kid, algorithm);
        }
        drop(guard);
        pick(&self.current(), kid, algorithm)
    }
}

/// The key of `set` for `kid` and `algorithm`.
fn pick(
    set: &KeySet,
    kid: Option<&str>,
    algorithm: Algorithm,
) -> Result<Arc<DecodingKey>, KeyRefusal> {
    let fits = |k: &&Key| {
        k.algorithm.is_none_or(|a| a == algorithm) && k.key.family() == algorithm.family()
    };
    match kid {
        Some(kid) => {
            let Some(key) = set.keys.iter().find(|k| k.id.as_deref() == Some(kid)) else {
                return Err(KeyRefusal::Unknown(kid.to_owned()));
            };
            if fits(&key) {
                Ok(Arc::clone(&key.key))
            } else {
                Err(KeyRefusal::WrongAlgorithm(kid.to_owned()))
            }
        }
        None => {
            let mut fitting = set.keys.iter().filter(fits);
            match (fitting.next(), fitting.next()) {
                (Some(key), None) => Ok(Arc::clone(&key.key)),
                (None, _) => Err(KeyRefusal::Unknown(String::new())),
                (Some(_), Some(_)) => Err(KeyRefusal::Ambiguous),
            }
        }
    }
}

/// The key set's address from the issuer's metadata: RFC 8414's
/// well-known path first, then OpenID discovery's; the document must name
/// the same issuer (RFC 8414 §3.3).
async fn discover(client: &reqwest::Client, issuer: &str) -> Result<Url, String> {
    let base = web_url("issuer", issuer)?;
    let path = base.path().trim_end_matches('/').to_owned();
    let mut candidates = Vec::new();
    for well_known in [
        format!("/.well-known/oauth-authorization-server{path}"),
        format!("{path}/.well-known/openid-configuration"),
    ] {
        let mut url = base.clone();
        url.set_path(&well_known);
        candidates.push(url);
    }
    let mut failures = Vec::new();
    for url in candidates {
        let document = match fetch_json(client, &url).await {
            Ok(document) => document,
            Err(e) => {
                failures.push(e);
                continue;
            }
        };
        let named = document.get("issuer").and_then(Value::as_str);
        if named != Some(issuer) {
            return Err(format!(
                "{url} names issuer {named:?}, not {issuer:?} (RFC 8414 §3.3)"
            ));
        }
        let Some(jwks) = document.get("jwks_uri").and_then(Value::as_str) else {
            return Err(format!("{url} names no jwks_uri"));
        };
        return web_url("the issuer's jwks_uri", jwks);
    }
    Err(format!(
        "no metadata for issuer {issuer:?}: {}",
        failures.join("; ")
    ))
}

/// The signature keys of the set at `url`; keys for encryption, of
/// unknown types or unusable are skipped.
async fn fetch_set(client: &reqwest::Client, url: &Url) -> Result<Vec<Key>, String> {
    let document = fetch_json(client, url).await?;
    let Some(listed) = document.get("keys").and_then(Value::as_array) else {
        return Err(format!("{url}: not a key set (no \"keys\" list)"));
    };
    let keys: Vec<Key> = listed
        .iter()
        .filter_map(|value| serde_json::from_value::<Jwk>(value.clone()).ok())
        .filter(|jwk| {
            !matches!(
                jwk.common.public_key_use,
                Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))
            )
        })
        .filter_map(|jwk| {
            let algorithm = match jwk.common.key_algorithm {
                None => None,
                Some(a) => Some(Algorithm::try_from(a).ok()?),
            };
            let key = DecodingKey::from_jwk(&jwk).ok()?;
            Some(Key {
                id: jwk.common.key_id,
                algorithm,
                key: Arc::new(key),
            })
        })
        .collect();
    if keys.is_empty() {
        return Err(format!("{url}: no signature key the proxy can use"));
    }
    Ok(keys)
}

/// A JSON document fetched from `url` (200, at most [`MAX_KEYS_BYTES`]).
async fn fetch_json(client: &reqwest::Client, url: &Url) -> Result<Value, String> {
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url}: status {}", response.status()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| format!("{url}: {e}"))? {
        if body.len() + chunk.len() > MAX_KEYS_BYTES {
            return Err(format!("{url}: larger than {MAX_KEYS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("{url}: not JSON: {e}"))
}
