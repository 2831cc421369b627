//! The proxy as an OAuth 2.1 protected resource (MCP authorization, over
//! streamable HTTP): its metadata (RFC 9728), the challenge a caller
//! without a good token gets, and the check of each access token, a JWT
//! signed by the configured issuer for the proxy's resource URL (RFC
//! 8707, RFC 9068). A token is checked here and goes no further: no
//! upstream server is ever handed it.
//!
//! The caller a token names (issuer, subject, groups, client) becomes the
//! run's labels ([`Identity::labels`]) and, with a Cedar policy, its
//! principal.

mod config;
mod verify;

use std::net::SocketAddr;

pub use config::{
    DEFAULT_GROUPS_CLAIM, DEFAULT_JWKS_COOLDOWN, DEFAULT_LEEWAY, DEFAULT_TOKEN_TYPES, MAX_LEEWAY,
    OAuthConfig,
};
pub(crate) use verify::{Refusal, Verifier};

/// The run label holding the token's issuer.
pub const ISSUER_LABEL: &str = "caller.issuer";
/// The run label holding the token's subject (a Cedar policy's principal
/// when the proxy admits OAuth tokens).
pub const SUBJECT_LABEL: &str = "caller.subject";
/// The run label holding the caller's groups, sorted, comma-separated.
pub const GROUPS_LABEL: &str = "caller.groups";
/// The run label holding the OAuth client the caller used.
pub const CLIENT_LABEL: &str = "caller.client";

/// The longest subject or client id admitted (agentrt-oauth's).
pub use agentrt_oauth::MAX_SUBJECT_CHARS;
/// The longest list of groups admitted (comma-joined, a run label's
/// value).
pub const MAX_GROUPS_CHARS: usize = 256;

/// The well-known path of the protected resource metadata (RFC 9728).
pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// Who called, as an access token the proxy admitted says.
///
/// ```
/// let who = agentrt_proxy::Identity {
///     issuer: "https://id.example.com".into(),
///     subject: "alice".into(),
///     groups: vec!["staff".into()],
///     client: None,
/// };
/// assert_eq!(who.labels(), [
///     "caller.issuer=https://id.example.com",
///     "caller.subject=alice",
///     "caller.groups=staff",
/// ]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The issuer (`iss`).
    pub issuer: String,
    /// The subject (`sub`).
    pub subject: String,
    /// The groups claim's names, sorted, each once.
    pub groups: Vec<String>,
    /// The OAuth client (`client_id`, else `azp`).
    pub client: Option<String>,
}

impl Identity {
    /// The run labels that record this caller.
    pub fn labels(&self) -> Vec<String> {
        let mut labels = vec![
            format!("{ISSUER_LABEL}={}", self.issuer),
            format!("{SUBJECT_LABEL}={}", self.subject),
        ];
        if !self.groups.is_empty() {
            labels.push(format!("{GROUPS_LABEL}={}", self.groups.join(",")));
        }
        if let Some(client) = &self.client {
            labels.push(format!("{CLIENT_LABEL}={client}"));
        }
        labels
    }

    /// Whether `other` is the same caller (issuer and subject).
    pub fn same_caller(&self, other: &Identity) -> bool {
        self.issuer == other.issuer && self.subject == other.subject
    }
}

/// The resource URL: the configuration's, else the bound address's
/// `/mcp`.
pub(crate) fn resource_url(config: &OAuthConfig, bound: SocketAddr) -> String {
    config
        .resource
        .clone()
        .unwrap_or_else(|| format!("http://{bound}/mcp"))
}

/// Where the resource's metadata is (RFC 9728 §3.1: the well-known path
/// before the resource's own path).
pub(crate) fn metadata_url(resource: &str) -> String {
    match url::Url::parse(resource) {
        Ok(mut url) => {
            let path = url.path().trim_end_matches('/').to_owned();
            url.set_path(&format!("{METADATA_PATH}{path}"));
            url.set_query(None);
            url.to_string()
        }
        Err(_) => String::new(),
    }
}

/// The protected resource metadata document (RFC 9728 §2).
pub(crate) fn metadata(verifier: &Verifier) -> serde_json::Value {
    let mut document = serde_json::json!({
        "resource": verifier.resource(),
        "authorization_servers": [verifier.config().issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "agentrt-proxy",
    });
    if !verifier.config().scopes.is_empty() {
        document["scopes_supported"] = serde_json::json!(verifier.config().scopes);
    }
    document
}

/// Builds the verifier: the issuer's keys fetched now.
///
/// # Errors
///
/// Why the keys cannot be had, in words.
pub(crate) async fn verifier(config: &OAuthConfig, bound: SocketAddr) -> Result<Verifier, String> {
    let client = agentrt_oauth::http_client().map_err(|e| e.to_string())?;
    let jwks_uri = match &config.jwks_uri {
        Some(uri) => agentrt_oauth::web_url("jwks_uri", uri).map_err(|e| e.to_string())?,
        None => {
            agentrt_oauth::discover(&client, &config.issuer)
                .await
                .map_err(|e| e.to_string())?
                .jwks_uri
        }
    };
    let keys = agentrt_oauth::Keys::fetch(client, jwks_uri, config.jwks_cooldown)
        .await
        .map_err(|e| e.to_string())?;
    Ok(Verifier::new(
        config.clone(),
        resource_url(config, bound),
        keys,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_lies_under_the_well_known_path_before_the_resource_path() {
        assert_eq!(
            metadata_url("https://proxy.example.com/mcp"),
            "https://proxy.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            metadata_url("http://127.0.0.1:9/"),
            "http://127.0.0.1:9/.well-known/oauth-protected-resource"
        );
    }

    #[test]
    fn the_same_caller_is_the_same_issuer_and_subject() {
        let who = |issuer: &str, subject: &str| Identity {
            issuer: issuer.into(),
            subject: subject.into(),
            groups: Vec::new(),
            client: None,
        };
        assert!(who("a", "x").same_caller(&who("a", "x")));
        assert!(!who("a", "x").same_caller(&who("b", "x")));
        assert!(!who("a", "x").same_caller(&who("a", "y")));
    }
}
