//! Who may call over HTTP: the holder of the bearer token file, or, with
//! `"oauth"` configured, a caller with an access token the issuer signed
//! for this resource. A caller with no token, or a bad one, is answered
//! `401` with a `WWW-Authenticate` challenge naming the resource's
//! metadata (RFC 9728 §5.1); a good token without a required scope `403`
//! (RFC 6750 §3.1). The caller a token names goes on with the request (its
//! extensions) to the session check and the call.

use std::sync::Arc;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::oauth::{self, Refusal, Verifier};

/// How the door tells callers apart.
pub(crate) enum Admission {
    /// One bearer token, from the operator's file or made at start.
    Token(String),
    /// OAuth access tokens.
    OAuth(Arc<Verifier>),
}

/// The bearer token of `headers`, if any (the scheme's case aside, RFC
/// 7235 §2.1).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// Equal in time whatever the first differing byte.
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Admits a request whose caller the door knows; refuses any other.
pub(crate) async fn admit(admission: Arc<Admission>, mut request: Request, next: Next) -> Response {
    let given = bearer(request.headers());
    match &*admission {
        Admission::Token(token) => {
            if !same(given.unwrap_or("").as_bytes(), token.as_bytes()) {
                return challenge(StatusCode::UNAUTHORIZED, "Bearer".into());
            }
        }
        Admission::OAuth(verifier) => {
            let Some(given) = given else {
                return challenge(StatusCode::UNAUTHORIZED, oauth_challenge(verifier, None));
            };
            match verifier.verify(given).await {
                Ok(identity) => {
                    request.extensions_mut().insert(Arc::new(identity));
                }
                Err(refusal) => {
                    let status = match refusal {
                        Refusal::Invalid(_) => StatusCode::UNAUTHORIZED,
                        Refusal::Scope(_) => StatusCode::FORBIDDEN,
                    };
                    return challenge(status, oauth_challenge(verifier, Some(&refusal)));
                }
            }
        }
    }
    next.run(request).await
}

/// The `WWW-Authenticate` value for a request without a good token.
fn oauth_challenge(verifier: &Verifier, refusal: Option<&Refusal>) -> String {
    let mut params = Vec::new();
    match refusal {
        None => {}
        Some(Refusal::Invalid(why)) => {
            params.push(r#"error="invalid_token""#.to_owned());
            params.push(format!(r#"error_description="{}""#, quotable(why)));
        }
        Some(Refusal::Scope(why)) => {
            params.push(r#"error="insufficient_scope""#.to_owned());
            params.push(format!(r#"error_description="{}""#, quotable(why)));
        }
    }
    let scopes = &verifier.config().scopes;
    if !scopes.is_empty() {
        params.push(format!(r#"scope="{}""#, scopes.join(" ")));
    }
    params.push(format!(
        r#"resource_metadata="{}""#,
        oauth::metadata_url(verifier.resource())
    ));
    format!("Bearer {}", params.join(", "))
}

/// `text` as a quoted-string's content: visible ASCII, no quote or
/// backslash (RFC 6750 §3's `error_description`).
fn quotable(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '"' | '\\' => '\'',
            c if c == ' ' || c.is_ascii_graphic() => c,
            _ => '?',
        })
        .collect()
}

fn challenge(status: StatusCode, value: String) -> Response {
    let mut refused = status.into_response();
    if let Ok(value) = HeaderValue::from_str(&value) {
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    } else {
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    refused
}

/// The protected resource metadata (RFC 9728), for anyone who asks.
pub(crate) fn metadata_response(verifier: &Verifier) -> Response {
    (
        [(header::CACHE_CONTROL, "max-age=300")],
        axum::Json(oauth::metadata(verifier)),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }

    #[test]
    fn the_bearer_scheme_is_read_without_case() {
        let mut headers = HeaderMap::new();
        for (value, token) in [
            ("Bearer abc", Some("abc")),
            ("bearer abc", Some("abc")),
            ("Basic abc", None),
            ("Bearer ", None),
            ("Bearer", None),
        ] {
            headers.insert(header::AUTHORIZATION, HeaderValue::from_static(value));
            assert_eq!(bearer(&headers), token, "{value}");
        }
    }

    #[test]
    fn a_refusal_reads_as_a_quoted_string() {
        assert_eq!(quotable("key \"k1\" \\ é\n"), "key 'k1' ' ??");
    }
}
