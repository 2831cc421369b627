//! One access token checked: its header (type, algorithm, key), its
//! signature against the issuer's key, its claims (`iss` exactly the
//! issuer, `aud` holding the proxy's resource URL, `exp` and `nbf` within
//! the leeway, a subject), its scopes, and the caller it names.

use serde_json::{Map, Value};

use super::config::{OAuthConfig, normal_type};
use super::{Identity, MAX_GROUPS_CHARS, MAX_SUBJECT_CHARS};
use agentrt_oauth::Keys;

/// Why a token is not admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a usable token for this resource (401 `invalid_token`).
    Invalid(String),
    /// A good token without a scope this resource requires (403
    /// `insufficient_scope`).
    Scope(String),
}

/// Checks tokens for one resource.
pub(crate) struct Verifier {
    config: OAuthConfig,
    resource: String,
    keys: Keys,
}

impl Verifier {
    /// A verifier of tokens for `resource` by the configured issuer.
    pub(crate) fn new(config: OAuthConfig, resource: String, keys: Keys) -> Verifier {
        Verifier {
            config,
            resource,
            keys,
        }
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &OAuthConfig {
        &self.config
    }

    /// The resource URL tokens must be for.
    pub(crate) fn resource(&self) -> &str {
        &self.resource
    }

    /// The caller `token` names, if it is good for this resource.
    pub(crate) async fn verify(&self, token: &str) -> Result<Identity, Refusal> {
        let expected = agentrt_oauth::Expected {
            issuer: &self.config.issuer,
            audience: &self.resource,
            leeway: self.config.leeway.as_secs(),
            algorithms: &self.config.algorithms,
        };
        let checked = self
            .keys
            .check(token, &expected)
            .await
            .map_err(|why| Refusal::Invalid(resource_words(why)))?;
        let typ = checked
            .header
            .typ
            .as_deref()
            .map(normal_type)
            .unwrap_or_default();
        if !self.config.token_types.contains(&typ) {
            return Err(Refusal::Invalid(format!(
                "token type {:?} is not an access token type this resource admits ({})",
                checked.header.typ.as_deref().unwrap_or(""),
                self.config.token_types.join(", ")
            )));
        }
        let scopes = scopes(&checked.claims);
        if let Some(missing) = self
            .config
            .scopes
            .iter()
            .find(|s| !scopes.contains(&s.as_str()))
        {
            return Err(Refusal::Scope(format!("the token lacks scope {missing:?}")));
        }
        identity(&checked.claims, &self.config).map_err(Refusal::Invalid)
    }
}

/// A refusal's words, the audience named as this resource.
fn resource_words(why: String) -> String {
    if why == "the token is for another audience" {
        "the token is for another audience (aud is not this resource)".into()
    } else {
        why
    }
}

/// The token's scopes: `scope` (space-separated, RFC 9068) or `scp` (a
/// list, as some issuers write it).
fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s.split(' ').filter(|s| !s.is_empty()).collect(),
        (_, Some(Value::Array(list))) => list.iter().filter_map(Value::as_str).collect(),
        (_, Some(Value::String(s))) => s.split(' ').filter(|s| !s.is_empty()).collect(),
        _ => Vec::new(),
    }
}

/// The caller the claims name; a subject, groups or client a run label
/// cannot hold is refused rather than cut.
fn identity(claims: &Map<String, Value>, config: &OAuthConfig) -> Result<Identity, String> {
    let label_text = |what: &str, text: &str, max: usize| -> Result<(), String> {
        if text.is_empty() || text.chars().count() > max || text.chars().any(char::is_control) {
            Err(format!(
                "the token's {what} is empty, longer than {max} characters or holds a control \
                 character"
            ))
        } else {
            Ok(())
        }
    };
    let subject = agentrt_oauth::subject(claims)?;
    let groups = agentrt_oauth::names(claims, &config.groups_claim)?;
    if groups.iter().any(|g| g.is_empty() || g.contains(',')) {
        return Err(format!(
            "a name in the {} claim is empty or holds a comma",
            config.groups_claim
        ));
    }
    if !groups.is_empty() {
        label_text("groups", &groups.join(","), MAX_GROUPS_CHARS)?;
    }
    let client = match claims.get("client_id").or_else(|| claims.get("azp")) {
        Some(Value::String(client)) => {
            label_text("client_id", client, MAX_SUBJECT_CHARS)?;
            Some(client.clone())
        }
        _ => None,
    };
    Ok(Identity {
        issuer: config.issuer.clone(),
        subject: subject.to_owned(),
        groups,
        client,
    })
}
