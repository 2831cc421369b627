//! One careful fetch of a JSON document.

use std::time::Duration;

use serde_json::Value;
use url::Url;

use crate::OAuthError;

/// The most bytes read of a metadata document or a key set.
pub const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// How long one fetch may take.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP client every fetch uses: a timeout, no redirects (one could
/// lead a fetch where the configuration did not), no proxy from the
/// environment (it could read what is fetched).
///
/// # Errors
///
/// [`OAuthError::Fetch`] when the client cannot be built (no TLS roots).
pub fn http_client() -> Result<reqwest::Client, OAuthError> {
    reqwest::Client::builder()
        .timeout(FETCH_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .build()
        .map_err(|e| OAuthError::Fetch {
            url: String::new(),
            detail: format!("no HTTP client: {e}"),
        })
}

/// A JSON document fetched from `url` (200, at most
/// [`MAX_DOCUMENT_BYTES`]).
pub(crate) async fn fetch_json(client: &reqwest::Client, url: &Url) -> Result<Value, OAuthError> {
    let failed = |detail: String| OAuthError::Fetch {
        url: url.to_string(),
        detail,
    };
    let mut response = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    if !response.status().is_success() {
        return Err(failed(format!("status {}", response.status())));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| failed(e.to_string()))? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(failed(format!("larger than {MAX_DOCUMENT_BYTES} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| failed(format!("not JSON: {e}")))
}
