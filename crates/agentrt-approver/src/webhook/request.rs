//! What a webhook request says, read from its parts: the signature
//! headers it carries, whether it asks for text, and the decision or
//! cancellation its body holds (for a request signed with a key, as
//! that key's approver), each refusal a [`BodyRefusal`]. Public (hidden
//! from the documentation) for the crate's fuzz target.

use axum::http::{HeaderMap, header};

use crate::signature::{
    KEY_ID_HEADER, NONCE_HEADER, SIGNATURE_HEADER, SignedHeaders, TIMESTAMP_HEADER,
};
use crate::{Cancellation, Decision};

/// The signature headers of `headers` (one that is absent or not visible
/// ASCII: `None`; but a key id header that is present and not visible
/// ASCII reads as the empty key id, which names no key: a request that
/// names a key is never checked with the shared secret).
pub fn signature_headers(headers: &HeaderMap) -> SignedHeaders<'_> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    SignedHeaders {
        timestamp: get(TIMESTAMP_HEADER),
        nonce: get(NONCE_HEADER),
        signature: get(SIGNATURE_HEADER),
        key_id: headers
            .get(KEY_ID_HEADER)
            .map(|v| v.to_str().unwrap_or_default()),
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
/// `bad_request`, this text; [`BodyRefusal::ByMismatch`]: 403
/// `by_mismatch`).
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
    /// Signed with a key, it names someone other than the key's approver
    /// as `by`.
    #[error("by is not the approver of the key the request is signed with")]
    ByMismatch,
}

/// The decision `body` holds for approval `id` of `run` (the path's),
/// with its hash and author; never a request signature (that is the
/// headers').
pub fn decision_body(run: &str, id: &str, body: &[u8]) -> Result<Decision, BodyRefusal> {
    decision_body_as(run, id, body, None)
}

/// [`decision_body`] for a request signed with a key of `approver` (none:
/// the shared secret): its `by` must be `approver`, and is `approver`
/// when left out ([`BodyRefusal::ByMismatch`] otherwise).
pub fn decision_body_as(
    run: &str,
    id: &str,
    body: &[u8],
    approver: Option<&str>,
) -> Result<Decision, BodyRefusal> {
    let mut decision: Decision =
        serde_json::from_slice(body).map_err(|_| BodyRefusal::NotADecision)?;
    if decision.run_id != run || decision.approval_id != id {
        return Err(BodyRefusal::DecisionElsewhere);
    }
    attribute(&mut decision.by, approver)?;
    if decision.hash.is_empty() || decision.by.is_empty() {
        return Err(BodyRefusal::DecisionIncomplete);
    }
    Ok(decision)
}

/// The cancellation `body` holds for `run` (the path's), with its author.
pub fn cancellation_body(run: &str, body: &[u8]) -> Result<Cancellation, BodyRefusal> {
    cancellation_body_as(run, body, None)
}

/// [`cancellation_body`] for a request signed with a key of `approver`,
/// as [`decision_body_as`].
pub fn cancellation_body_as(
    run: &str,
    body: &[u8],
    approver: Option<&str>,
) -> Result<Cancellation, BodyRefusal> {
    let mut cancellation: Cancellation =
        serde_json::from_slice(body).map_err(|_| BodyRefusal::NotACancellation)?;
    if cancellation.run_id != run {
        return Err(BodyRefusal::CancellationElsewhere);
    }
    attribute(&mut cancellation.by, approver)?;
    if cancellation.by.is_empty() {
        return Err(BodyRefusal::CancellationIncomplete);
    }
    Ok(cancellation)
}

/// A keyed request's author: its key's `approver`, whether `by` names
/// them or is left out; anyone else is refused. Without a key, `by` as
/// given.
fn attribute(by: &mut String, approver: Option<&str>) -> Result<(), BodyRefusal> {
    let Some(approver) = approver else {
        return Ok(());
    };
    if by.is_empty() {
        approver.clone_into(by);
    }
    if by != approver {
        return Err(BodyRefusal::ByMismatch);
    }
    Ok(())
}

/// Who a decision's body says decides, read leniently for the observer
/// (any JSON object with a string `by`; else empty).
pub fn asked_by(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("by").and_then(|b| b.as_str()).map(str::to_owned))
        .unwrap_or_default()
}
