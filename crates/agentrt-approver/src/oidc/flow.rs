//! The authorization code flow with PKCE (RFC 7636), `state` and `nonce`
//! checked: a sign-in begins with a redirect to the provider and ends at
//! the callback, where the code is exchanged (the client's secret, HTTP
//! Basic) and the ID token checked against the provider's keys
//! (`agentrt-oauth`, over `jsonwebtoken`): `iss` the provider, `aud` this
//! client, `exp`, a `sub`, and the `nonce` this sign-in sent.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::Value;
use sha2::Digest as _;

use super::config::OidcConfig;

/// How long a begun sign-in may take to come back, in seconds.
pub const SIGN_IN_SECONDS: i64 = 600;
/// The most sign-ins waiting at once (older ones are dropped first).
const MAX_WAITING: usize = 1024;
/// How far the server's clock and the provider's may disagree.
const LEEWAY_SECONDS: u64 = 60;

/// Someone the provider vouched for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedIn {
    /// The provider.
    pub issuer: String,
    /// The subject (`sub`).
    pub subject: String,
    /// The groups claim's names.
    pub groups: Vec<String>,
}

impl SignedIn {
    /// The decider a decision records: the subject and the provider that
    /// vouched for it (`alice <https://id.example.com>`).
    ///
    /// ```
    /// let who = agentrt_approver::SignedIn {
    ///     issuer: "https://id.example.com".into(),
    ///     subject: "alice".into(),
    ///     groups: vec![],
    /// };
    /// assert_eq!(who.by(), "alice <https://id.example.com>");
    /// ```
    pub fn by(&self) -> String {
        format!("{} <{}>", self.subject, self.issuer)
    }
}

/// Why a sign-in did not end with someone signed in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignInRefusal {
    /// No sign-in began with this `state` here (or it took too long).
    #[error("this sign-in is unknown or took longer than 10 minutes; start again")]
    UnknownState,
    /// The provider refused (its `error` parameter).
    #[error("the provider refused: {0}")]
    Provider(String),
    /// The code could not be exchanged.
    #[error("the code was not exchanged: {0}")]
    Exchange(String),
    /// The ID token does not hold.
    #[error("the ID token is refused: {0}")]
    Token(String),
}

/// A begun sign-in: what the callback must match.
struct Waiting {
    nonce: String,
    verifier: String,
    began: i64,
}

/// The provider, reached, and the sign-ins under way.
pub struct Provider {
    config: OidcConfig,
    secret: String,
    authorization_endpoint: url::Url,
    token_endpoint: url::Url,
    keys: agentrt_oauth::Keys,
    client: reqwest::Client,
    waiting: Mutex<HashMap<String, Waiting>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("issuer", &self.config.issuer)
            .field("client_id", &self.config.client_id)
            .finish_non_exhaustive()
    }
}

fn random_token() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(URL_SAFE_NO_PAD.encode(bytes))
}

/// The PKCE S256 challenge of `verifier`.
fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(verifier.as_bytes()))
}

impl Provider {
    /// Reaches the provider: its metadata (it must name the configured
    /// issuer and both endpoints) and its keys.
    ///
    /// # Errors
    ///
    /// Why, in words.
    pub async fn connect(config: OidcConfig, secret: String) -> Result<Provider, String> {
        let client = agentrt_oauth::http_client().map_err(|e| e.to_string())?;
        let metadata = agentrt_oauth::discover(&client, &config.issuer)
            .await
            .map_err(|e| e.to_string())?;
        let missing = |what: &str| format!("the provider's metadata names no {what}");
        let authorization_endpoint = metadata
            .authorization_endpoint
            .ok_or_else(|| missing("authorization_endpoint"))?;
        let token_endpoint = metadata
            .token_endpoint
            .ok_or_else(|| missing("token_endpoint"))?;
        let keys = agentrt_oauth::Keys::fetch(
            client.clone(),
            metadata.jwks_uri,
            std::time::Duration::from_secs(10),
        )
        .await
        .map_err(|e| e.to_string())?;
        Ok(Provider {
            config,
            secret,
            authorization_endpoint,
            token_endpoint,
            keys,
            client,
            waiting: Mutex::new(HashMap::new()),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Begins a sign-in at `now` (Unix seconds): the provider's URL to
    /// send the browser to, with a fresh `state`, `nonce` and PKCE
    /// challenge; `None` without randomness.
    pub fn begin(&self, now: i64) -> Option<String> {
        let (state, nonce, verifier) = (random_token()?, random_token()?, random_token()?);
        let mut url = self.authorization_endpoint.clone();
        let mut scope = vec!["openid".to_owned()];
        scope.extend(self.config.scopes.iter().cloned());
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &self.config.client_id)
            .append_pair("redirect_uri", &self.config.redirect_url)
            .append_pair("scope", &scope.join(" "))
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge(&verifier))
            .append_pair("code_challenge_method", "S256");
        let mut waiting = self.waiting();
        waiting.retain(|_, w| now - w.began < SIGN_IN_SECONDS);
        if waiting.len() >= MAX_WAITING
            && let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, w)| w.began)
                .map(|(k, _)| k.clone())
        {
            waiting.remove(&oldest);
        }
        waiting.insert(
            state,
            Waiting {
                nonce,
                verifier,
                began: now,
            },
        );
        Some(url.to_string())
    }

    /// Ends the sign-in `state` names with the provider's `code`: who
    /// signed in. The state is used once, whatever the outcome.
    ///
    /// # Errors
    ///
    /// [`SignInRefusal`]: an unknown or stale state, a refused exchange,
    /// an ID token that does not hold.
    pub async fn finish(
        &self,
        code: &str,
        state: &str,
        now: i64,
    ) -> Result<SignedIn, SignInRefusal> {
        let waiting = self
            .waiting()
            .remove(state)
            .filter(|w| now - w.began < SIGN_IN_SECONDS)
            .ok_or(SignInRefusal::UnknownState)?;
        let id_token = self.exchange(code, &waiting.verifier).await?;
        self.check(&id_token, &waiting.nonce).await
    }

    /// The ID token the code is exchanged for.
    async fn exchange(&self, code: &str, verifier: &str) -> Result<String, SignInRefusal> {
        let failed = |detail: String| SignInRefusal::Exchange(detail);
        let form = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", &self.config.redirect_url)
            .append_pair("code_verifier", verifier)
            .finish();
        // RFC 6749 §2.3.1: the id and secret form-encoded, then Basic.
        let encode =
            |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let response = self
            .client
            .post(self.token_endpoint.clone())
            .basic_auth(encode(&self.config.client_id), Some(encode(&self.secret)))
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let status = response.status();
        let body: Value = response
            .json()
            .await
            .map_err(|e| failed(format!("status {status}, not JSON: {e}")))?;
        if !status.is_success() {
            let error = body.get("error").and_then(Value::as_str).unwrap_or("");
            return Err(failed(format!("status {status} {error}")));
        }
        body.get("id_token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| failed("the answer holds no id_token".into()))
    }

    /// Who the ID token names, if it holds.
    async fn check(&self, id_token: &str, nonce: &str) -> Result<SignedIn, SignInRefusal> {
        let refused = |detail: String| SignInRefusal::Token(detail);
        let expected = agentrt_oauth::Expected {
            issuer: &self.config.issuer,
            audience: &self.config.client_id,
            leeway: LEEWAY_SECONDS,
            algorithms: &agentrt_oauth::ASYMMETRIC,
        };
        let claims = self
            .keys
            .check(id_token, &expected)
            .await
            .map_err(refused)?
            .claims;
        if claims.get("nonce").and_then(Value::as_str) != Some(nonce) {
            return Err(refused("its nonce is not this sign-in's".into()));
        }
        // Several audiences: it must have been issued to this client.
        if let Some(azp) = claims.get("azp").and_then(Value::as_str)
            && azp != self.config.client_id
        {
            return Err(refused("it was issued to another client (azp)".into()));
        }
        let subject = agentrt_oauth::subject(&claims).map_err(refused)?;
        let groups = agentrt_oauth::names(&claims, &self.config.groups_claim).map_err(refused)?;
        Ok(SignedIn {
            issuer: self.config.issuer.clone(),
            subject: subject.to_owned(),
            groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkce_challenge_is_the_unpadded_base64url_of_the_verifiers_sha256() {
        // Computed apart, with Python's hashlib and base64:
        // urlsafe_b64encode(sha256(verifier).digest()).rstrip(b"=").
        assert_eq!(
            challenge("dBjftJeZ4CVP-mJ92IZzxlJ4QZKWmSAWhQXYH1a-_7M"),
            "0DAJejaCNHWPnPcJCUeTylGuEC9JjXmm7XYpJyi_3XQ"
        );
    }
}
