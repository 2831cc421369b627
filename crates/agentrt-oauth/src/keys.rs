//! The issuer's signing keys: fetched, kept, and fetched again when a
//! token names a key the set lacks (a rotation) or the set is an hour
//! old.

use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use url::Url;

use crate::OAuthError;
use crate::fetch::fetch_json;

/// A key set older than this is fetched again when next used.
pub const MAX_KEY_SET_AGE: Duration = Duration::from_secs(3600);

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
#[non_exhaustive]
pub enum KeyRefusal {
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
///
/// ```no_run
/// # async fn f() -> Result<(), agentrt_oauth::OAuthError> {
/// let client = agentrt_oauth::http_client()?;
/// let issuer = agentrt_oauth::discover(&client, "https://id.example.com").await?;
/// let keys = agentrt_oauth::Keys::fetch(client, issuer.jwks_uri, std::time::Duration::from_secs(10)).await?;
/// let key = keys.key_for(Some("k1"), jsonwebtoken::Algorithm::ES256).await;
/// # Ok(()) }
/// ```
pub struct Keys {
    client: reqwest::Client,
    jwks_uri: Url,
    cooldown: Duration,
    set: RwLock<Arc<KeySet>>,
    /// Held while fetching, so that many requests naming a new key make
    /// one fetch.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("jwks_uri", &self.jwks_uri.as_str())
            .field("cooldown", &self.cooldown)
            .finish_non_exhaustive()
    }
}

impl Keys {
    /// Fetches the key set at `jwks_uri`; a token naming a key the set
    /// lacks fetches it again at most once per `cooldown`.
    ///
    /// # Errors
    ///
    /// [`OAuthError`]: the set cannot be fetched, or holds no signature
    /// key this crate can use.
    pub async fn fetch(
        client: reqwest::Client,
        jwks_uri: Url,
        cooldown: Duration,
    ) -> Result<Keys, OAuthError> {
        let keys = fetch_set(&client, &jwks_uri).await?;
        Ok(Keys {
            client,
            jwks_uri,
            cooldown,
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
    ///
    /// # Errors
    ///
    /// [`KeyRefusal`]: no such key, several without a `kid`, or a key for
    /// another algorithm.
    pub async fn key_for(
        &self,
        kid: Option<&str>,
        algorithm: Algorithm,
    ) -> Result<Arc<DecodingKey>, KeyRefusal> {
        let set = self.current();
        let stale = set.fetched.elapsed() >= MAX_KEY_SET_AGE;
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

/// The signature keys of the set at `url`; keys for encryption, of
/// unknown types or unusable are skipped.
async fn fetch_set(client: &reqwest::Client, url: &Url) -> Result<Vec<Key>, OAuthError> {
    let document = fetch_json(client, url).await?;
    let Some(listed) = document.get("keys").and_then(Value::as_array) else {
        return Err(OAuthError::Metadata(format!(
            "{url}: not a key set (no \"keys\" list)"
        )));
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
        return Err(OAuthError::Metadata(format!(
            "{url}: no signature key agentrt can use"
        )));
    }
    Ok(keys)
}
