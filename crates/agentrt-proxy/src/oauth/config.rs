//! The configuration's `"oauth"` object: which issuer's access tokens the
//! HTTP door admits, for which resource, with which scopes, and how far
//! clocks may disagree.

use std::time::Duration;

use agentrt_mcp::parse_duration;
use jsonwebtoken::Algorithm;
use serde::Deserialize;

/// Clocks may disagree by this much unless `"leeway"` says otherwise.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// The most `"leeway"` may be: a token stays good this long past its end.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// The least time between two fetches of the issuer's keys made because a
/// token named a key not in the set, unless `"jwks_cooldown"` says
/// otherwise (a stream of tokens with made-up key ids cannot make the
/// proxy hammer the issuer).
pub const DEFAULT_JWKS_COOLDOWN: Duration = Duration::from_secs(10);
/// The claim groups are read from unless `"groups_claim"` names another.
pub const DEFAULT_GROUPS_CLAIM: &str = "groups";
/// The token types (the JWT header's `typ`) admitted unless
/// `"token_types"` names others: RFC 9068's access token type, so that an
/// ID token (typ `JWT`) is not taken for an access token.
pub const DEFAULT_TOKEN_TYPES: [&str; 1] = ["at+jwt"];

/// How the HTTP door checks OAuth access tokens (MCP authorization: the
/// proxy is an OAuth 2.1 protected resource).
///
/// ```
/// use std::time::Duration;
/// let oauth = agentrt_proxy::OAuthConfig::parse(br#"{
///   "issuer": "https://id.example.com",
///   "resource": "https://proxy.example.com/mcp",
///   "scopes": ["mcp:tools"]
/// }"#).unwrap();
/// assert_eq!(oauth.leeway, Duration::from_secs(60));
/// assert_eq!(oauth.groups_claim, "groups");
/// assert!(agentrt_proxy::OAuthConfig::parse(br#"{"issuer": "http://id.example.com"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthConfig {
    /// The authorization server whose tokens are admitted (`iss`, exactly).
    pub issuer: String,
    /// The proxy's resource URL, which a token's `aud` must hold (RFC
    /// 8707); `None`: `http://<the bound address>/mcp`, for a proxy on
    /// loopback.
    pub resource: Option<String>,
    /// Where the issuer's keys are; `None`: read from its metadata (RFC
    /// 8414, else OpenID discovery).
    pub jwks_uri: Option<String>,
    /// Scopes every token must hold (also offered in the metadata).
    pub scopes: Vec<String>,
    /// The claim holding the caller's groups.
    pub groups_claim: String,
    /// How far the proxy's clock and the issuer's may disagree.
    pub leeway: Duration,
    /// The JWT header types admitted (compared without case, with or
    /// without `application/`).
    pub token_types: Vec<String>,
    /// The signature algorithms admitted.
    pub algorithms: Vec<Algorithm>,
    /// The least time between two fetches of the keys for an unknown key
    /// id.
    pub jwks_cooldown: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthFile {
    issuer: String,
    resource: Option<String>,
    jwks_uri: Option<String>,
    #[serde(default)]
    scopes: Vec<String>,
    groups_claim: Option<String>,
    leeway: Option<String>,
    token_types: Option<Vec<String>>,
    algorithms: Option<Vec<String>>,
    jwks_cooldown: Option<String>,
}

impl OAuthConfig {
    /// Parses the `"oauth"` object's JSON.
    ///
    /// # Errors
    ///
    /// The first problem found, in words: an unknown field, an issuer or
    /// URL that is neither HTTPS nor loopback HTTP, a shared-secret
    /// algorithm, a leeway over five minutes.
    pub fn parse(json: &[u8]) -> Result<OAuthConfig, String> {
        let file: OAuthFile = serde_json::from_slice(json).map_err(|e| format!("oauth: {e}"))?;
        OAuthConfig::from_file(file).map_err(|e| format!("oauth: {e}"))
    }

    fn from_file(file: OAuthFile) -> Result<OAuthConfig, String> {
        web_url("issuer", &file.issuer)?;
        if file.issuer.contains(['?', '#']) {
            return Err(format!("issuer {:?}: no query or fragment", file.issuer));
        }
        if let Some(resource) = &file.resource {
            web_url("resource", resource)?;
            if resource.contains('#') {
                return Err(format!("resource {resource:?}: no fragment (RFC 8707)"));
            }
        }
        if let Some(jwks) = &file.jwks_uri {
            web_url("jwks_uri", jwks)?;
        }
        for scope in &file.scopes {
            if scope.is_empty()
                || scope
                    .bytes()
                    .any(|b| !(0x21..=0x7e).contains(&b) || b == b'"' || b == b'\\')
            {
                return Err(format!(
                    "scopes: {scope:?} is not a scope (printable ASCII, no space, quote or backslash)"
                ));
            }
        }
        let groups_claim = file
            .groups_claim
            .unwrap_or_else(|| DEFAULT_GROUPS_CLAIM.to_owned());
        if groups_claim.is_empty() {
            return Err("groups_claim: empty".into());
        }
        let leeway = match file.leeway.as_deref() {
            None => DEFAULT_LEEWAY,
            Some(text) => parse_duration(text).map_err(|e| format!("leeway: {e}"))?,
        };
        if leeway > MAX_LEEWAY {
            return Err(format!("leeway {leeway:?}: at most 5m"));
        }
        let jwks_cooldown = match file.jwks_cooldown.as_deref() {
            None => DEFAULT_JWKS_COOLDOWN,
            Some(text) => parse_duration(text).map_err(|e| format!("jwks_cooldown: {e}"))?,
        };
        let token_types = match file.token_types {
            None => DEFAULT_TOKEN_TYPES
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            Some(types) if types.is_empty() => {
                return Err("token_types: name at least one (\"at+jwt\")".into());
            }
            Some(types) => types.into_iter().map(|t| normal_type(&t)).collect(),
        };
        let algorithms = match file.algorithms {
            None => agentrt_oauth::ASYMMETRIC.to_vec(),
            Some(names) if names.is_empty() => {
                return Err("algorithms: name at least one".into());
            }
            Some(names) => names
                .iter()
                .map(|name| {
                    name.parse::<Algorithm>()
                        .ok()
                        .filter(|a| agentrt_oauth::ASYMMETRIC.contains(a))
                        .ok_or_else(|| {
                            format!(
                                "algorithms: {name:?} is not one of RS256, RS384, RS512, PS256, \
                                 PS384, PS512, ES256, ES384, EdDSA"
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()?,
        };
        Ok(OAuthConfig {
            issuer: file.issuer,
            resource: file.resource,
            jwks_uri: file.jwks_uri,
            scopes: file.scopes,
            groups_claim,
            leeway,
            token_types,
            algorithms,
            jwks_cooldown,
        })
    }
}

/// A JWT `typ` as compared: lowercase, without `application/` (RFC 7515
/// §4.1.9).
pub(crate) fn normal_type(typ: &str) -> String {
    let lower = typ.to_ascii_lowercase();
    lower
        .strip_prefix("application/")
        .map(str::to_owned)
        .unwrap_or(lower)
}

/// Whether `url` may be used for `field` (see [`agentrt_oauth::web_url`]).
fn web_url(field: &str, url: &str) -> Result<(), String> {
    agentrt_oauth::web_url(field, url)
        .map(drop)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<OAuthConfig, String> {
        OAuthConfig::parse(text.as_bytes())
    }

    #[test]
    fn the_defaults_admit_asymmetric_access_tokens_with_a_minute_of_skew() {
        let c = parse(r#"{"issuer": "http://127.0.0.1:4000"}"#).unwrap();
        assert_eq!(c.resource, None);
        assert_eq!(c.token_types, ["at+jwt"]);
        assert_eq!(c.algorithms.len(), 9);
        assert!(!c.algorithms.contains(&Algorithm::HS256));
        assert_eq!(c.jwks_cooldown, DEFAULT_JWKS_COOLDOWN);
    }

    #[test]
    fn bad_settings_are_refused_with_their_field() {
        for (text, says) in [
            (r#"{"issuer": "http://id.example.com"}"#, "issuer"),
            (r#"{"issuer": "ftp://127.0.0.1"}"#, "issuer"),
            (r#"{"issuer": "https://u:p@id.example.com"}"#, "no user"),
            (
                r#"{"issuer": "https://id.example.com", "resource": "http://proxy.example.com/mcp"}"#,
                "resource",
            ),
            (
                r#"{"issuer": "https://id.example.com", "resource": "https://p.example/mcp#x"}"#,
                "fragment",
            ),
            (
                r#"{"issuer": "https://id.example.com", "algorithms": ["HS256"]}"#,
                "algorithms",
            ),
            (
                r#"{"issuer": "https://id.example.com", "algorithms": []}"#,
                "algorithms",
            ),
            (
                r#"{"issuer": "https://id.example.com", "leeway": "10m"}"#,
                "leeway",
            ),
            (
                r#"{"issuer": "https://id.example.com", "scopes": ["a b"]}"#,
                "scopes",
            ),
            (
                r#"{"issuer": "https://id.example.com", "token_types": []}"#,
                "token_types",
            ),
            (
                r#"{"issuer": "https://id.example.com", "audience": "x"}"#,
                "unknown field",
            ),
            (r#"{}"#, "issuer"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn token_types_compare_without_case_or_the_media_prefix() {
        assert_eq!(normal_type("application/AT+JWT"), "at+jwt");
        let c = parse(r#"{"issuer": "https://id.example.com", "token_types": ["JWT"]}"#).unwrap();
        assert_eq!(c.token_types, ["jwt"]);
    }
}
