//! An issuer's metadata: RFC 8414's well-known path first, then OpenID
//! discovery's.

use serde_json::Value;
use url::Url;

use crate::fetch::fetch_json;
use crate::{OAuthError, web_url};

/// What agentrt reads of an issuer's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerMetadata {
    /// The issuer, exactly as asked for (the document names it).
    pub issuer: String,
    /// Its key set.
    pub jwks_uri: Url,
    /// Where a person signs in (authorization code flow), if it says.
    pub authorization_endpoint: Option<Url>,
    /// Where a code is exchanged for tokens, if it says.
    pub token_endpoint: Option<Url>,
}

/// The metadata of `issuer`: `/.well-known/oauth-authorization-server`
/// (with the issuer's path after it, RFC 8414 §3.1), else
/// `<issuer>/.well-known/openid-configuration`. The document must name
/// the same issuer (RFC 8414 §3.3), and every endpoint must be a
/// [`web_url`].
///
/// # Errors
///
/// [`OAuthError`]: neither document can be fetched, or the one fetched
/// names another issuer, no key set, or an endpoint that may not be used.
pub async fn discover(
    client: &reqwest::Client,
    issuer: &str,
) -> Result<IssuerMetadata, OAuthError> {
    let base = web_url("issuer", issuer)?;
    let path = base.path().trim_end_matches('/').to_owned();
    let mut failures = Vec::new();
    for well_known in [
        format!("/.well-known/oauth-authorization-server{path}"),
        format!("{path}/.well-known/openid-configuration"),
    ] {
        let mut url = base.clone();
        url.set_path(&well_known);
        let document = match fetch_json(client, &url).await {
            Ok(document) => document,
            Err(e) => {
                failures.push(e.to_string());
                continue;
            }
        };
        return read(&document, issuer, &url);
    }
    Err(OAuthError::Metadata(format!(
        "no metadata for issuer {issuer:?}: {}",
        failures.join("; ")
    )))
}

/// The metadata `document` (fetched from `url`) says for `issuer`.
fn read(document: &Value, issuer: &str, url: &Url) -> Result<IssuerMetadata, OAuthError> {
    let named = document.get("issuer").and_then(Value::as_str);
    if named != Some(issuer) {
        return Err(OAuthError::Metadata(format!(
            "{url} names issuer {named:?}, not {issuer:?} (RFC 8414 §3.3)"
        )));
    }
    let endpoint = |field: &str| -> Result<Option<Url>, OAuthError> {
        document
            .get(field)
            .and_then(Value::as_str)
            .map(|text| web_url(&format!("the issuer's {field}"), text))
            .transpose()
    };
    let jwks_uri = endpoint("jwks_uri")?
        .ok_or_else(|| OAuthError::Metadata(format!("{url} names no jwks_uri")))?;
    Ok(IssuerMetadata {
        issuer: issuer.to_owned(),
        jwks_uri,
        authorization_endpoint: endpoint("authorization_endpoint")?,
        token_endpoint: endpoint("token_endpoint")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_must_name_the_issuer_and_usable_endpoints() {
        let url = Url::parse("https://id.example.com/.well-known/x").unwrap();
        let good = serde_json::json!({
            "issuer": "https://id.example.com",
            "jwks_uri": "https://id.example.com/jwks",
            "token_endpoint": "https://id.example.com/token",
        });
        let read_back = read(&good, "https://id.example.com", &url).unwrap();
        assert_eq!(read_back.jwks_uri.as_str(), "https://id.example.com/jwks");
        assert_eq!(read_back.authorization_endpoint, None);
        assert!(read(&good, "https://other.example.com", &url).is_err());
        let mut plain = good.clone();
        plain["token_endpoint"] = "http://id.example.com/token".into();
        assert!(read(&plain, "https://id.example.com", &url).is_err());
        let mut none = good;
        none.as_object_mut().unwrap().remove("jwks_uri");
        assert!(read(&none, "https://id.example.com", &url).is_err());
    }
}
