//! What a webhook request says, read from its parts: the signature
//! headers it carries, whether it asks for text, and the decision or
//! cancellation its body holds, each refusal a [`BodyRefusal`]. Public
//! (hidden from the documentation) for the crate's fuzz target.

use axum::http::{HeaderMap, header};

use crate::signature::{NONCE_HEADER, SIGNATURE_HEADER, SignedHeaders, TIMESTAMP_HEADER};
use crate::{Cancellation, Decision};

/// The three signature headers of `headers` (one that is absent or not
/// visible ASCII: `None`).
pub fn signature_headers(headers: &HeaderMap) -> SignedHeaders<'_> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    SignedHeaders {
        timestamp: get(TIMESTAMP_HEADER),
        nonce: get(NONCE_HEADER),
        signature: get(SIGNATURE_HEADER),
    }
}

/// Whether a request asks for an approval as text: `format=text` among
/// the pairs of its `query`, or an `Accept` header starting with
/// `text/plain`.
pub fn wants_text(query: Option<&str>, headers: &HeaderMap) -> bool {
    let asked = query
        .unwrap_or_default()
        .split('&')
        .any(|pair| pair == "format=text");
    let accepts = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    asked || accepts
}

/// Why a decision's or a cancellation's body was refused (400
/// `bad_request`, this text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyRefusal {
    /// Not JSON of the decision's shape (an unknown field included).
    #[error(
        "the body is not a decision: {{\"run_id\", \"approval_id\", \"hash\", \"by\", \"note\"}}"
    )]
    NotADecision,
    /// Its run or approval is not the path's.
    #[error("the decision's run_id and approval_id must be the path's")]
    DecisionElsewhere,
    /// It has no hash or no author.
    #[error("the decision needs a hash and by")]
    DecisionIncomplete,
    /// Not JSON of the cancellation's shape.
    #[error("the body is not a cancellation: {{\"run_id\", \"by\", \"note\"}}")]
    NotACancellation,
    /// Its run is not the path's.
    #[error("the cancellation's run_id must be the path's")]
    CancellationElsewhere,
    /// It has no author.
    #[error("the cancellation needs by")]
    CancellationIncomplete,
}

/// The decision `body` holds for approval `id` of `run` (the path's),
/// with its hash and author; never a request signature (that is the
/// headers').
pub fn decision_body(run: &str, id: &str, body: &[u8]) -> Result<Decision, BodyRefusal> {
    let decision: Decision = serde_json::from_slice(body).map_err(|_| BodyRefusal::NotADecision)?;
    if decision.run_id != run || decision.approval_id != id {
        return Err(BodyRefusal::DecisionElsewhere);
    }
    if decision.hash.is_empty() || decision.by.is_empty() {
        return Err(BodyRefusal::DecisionIncomplete);
    }
    Ok(decision)
}

/// The cancellation `body` holds for `run` (the path's), with its author.
pub fn cancellation_body(run: &str, body: &[u8]) -> Result<Cancellation, BodyRefusal> {
    let cancellation: Cancellation =
        serde_json::from_slice(body).map_err(|_| BodyRefusal::NotACancellation)?;
    if cancellation.run_id != run {
        return Err(BodyRefusal::CancellationElsewhere);
    }
    if cancellation.by.is_empty() {
        return Err(BodyRefusal::CancellationIncomplete);
    }
    Ok(cancellation)
}

/// Who a decision's body says decides, read leniently for the observer
/// (any JSON object with a string `by`; else empty).
pub fn asked_by(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("by").and_then(|b| b.as_str()).map(str::to_owned))
        .unwrap_or_default()
}
