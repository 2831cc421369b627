//! The webhook's answers: JSON bodies with `Content-Type:
//! application/json` and `Cache-Control: no-store`, errors as
//! `{"error": text, "code": name}`.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde::Serialize;

use crate::ApproverError;

/// What a request did, for the run-state error's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    Read,
    Decide,
    Cancel,
}

impl Action {
    /// What the webhook was doing, for the operator's log.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Action::Read => "webhook: reading approvals",
            Action::Decide => "webhook: deciding an approval",
            Action::Cancel => "webhook: cancelling a run",
        }
    }
}

/// `value` as JSON with `status`.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
    with_type(status, "application/json", body)
}

/// `text` as plain text with `status`.
pub(crate) fn text(status: StatusCode, text: String) -> Response {
    with_type(status, "text/plain; charset=utf-8", text.into_bytes())
}

fn with_type(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    code: &'a str,
}

/// The text of an error answer, kept beside it for the observer.
#[derive(Debug, Clone)]
pub(crate) struct ErrorText(pub(crate) String);

/// An error answer.
pub(crate) fn error(status: StatusCode, code: &str, text: &str) -> Response {
    let mut response = json(status, &ErrorBody { error: text, code });
    response.extensions_mut().insert(ErrorText(text.to_owned()));
    response
}

/// The answer for what the approver refused or failed.
pub(crate) fn approver_error(e: &ApproverError, action: Action) -> Response {
    use agentrt::Error as Core;
    let (status, code) = match e {
        ApproverError::Incomplete { .. } | ApproverError::ArgsOnReject => {
            (StatusCode::BAD_REQUEST, "bad_request")
        }
        ApproverError::Replayed | ApproverError::LinkUsed => {
            (StatusCode::UNAUTHORIZED, "unauthorized")
        }
        ApproverError::Expired { .. } => (StatusCode::GONE, "expired"),
        ApproverError::Core(core) => match core {
            Core::NotFound { .. } => (StatusCode::NOT_FOUND, "not_found"),
            Core::ApprovalChanged { .. } => (StatusCode::CONFLICT, "approval_changed"),
            Core::NotPending { .. } | Core::ApprovalSuperseded { .. } => {
                (StatusCode::CONFLICT, "not_pending")
            }
            Core::ApprovalHash { .. } => (StatusCode::CONFLICT, "approval_hash"),
            Core::EditRefused { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "edit_refused"),
            // Two approvers (design §46): the first may not be the second.
            Core::SameApprover { .. } => (StatusCode::CONFLICT, "same_approver"),
            Core::RunState { .. } if action == Action::Cancel => {
                (StatusCode::CONFLICT, "run_finished")
            }
            Core::RunState { .. } => (StatusCode::CONFLICT, "run_not_waiting"),
            _ => return internal(action.name(), e),
        },
    };
    error(status, code, &e.to_string())
}

/// 500 without detail: what failed inside at `place` goes to the
/// operator's log (`fault`), not to the caller.
pub(crate) fn internal(place: &str, cause: &dyn std::fmt::Display) -> Response {
    crate::fault::report(place, cause);
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error",
    )
}
