//! Signing in with OpenID Connect (`serve --oidc FILE`; `crate::oidc`):
//! `GET /ui/sign-in` sends the browser to the provider; the provider sends
//! it back to `GET /ui/oidc/callback` with a code, which is exchanged and
//! checked. A subject in the approvers' group gets a console session whose
//! decisions record `subject <issuer>`; anyone else is refused (403) and
//! gets no session.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;

use super::login::{COOKIE, SESSION_SECONDS};
use super::{Link, PageState, Scope, notice, random_hex, see_other};
use crate::oidc::SignInRefusal;

/// `GET /ui/sign-in`: to the provider, with a fresh state, nonce and
/// PKCE challenge.
pub(super) async fn sign_in(State(state): State<Arc<PageState>>) -> Response {
    let Some(provider) = &state.config.oidc else {
        return notice(
            StatusCode::NOT_FOUND,
            "No sign-in",
            "This server signs approvers in with login links only (agentrt-approver login-link).",
        );
    };
    match provider.begin(state.now()) {
        Some(url) => redirect_to(&url),
        None => notice(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not signed in",
            "No randomness.",
        ),
    }
}

/// A redirect to the provider (an absolute URL the configuration named).
fn redirect_to(url: &str) -> Response {
    let mut response = see_other("/ui/");
    if let Ok(value) = HeaderValue::from_str(url) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

#[derive(serde::Deserialize)]
pub(super) struct CallbackQuery {
    #[serde(default)]
    code: String,
    #[serde(default)]
    state: String,
    #[serde(default)]
    error: String,
}

fn refused(status: StatusCode, why: &str) -> Response {
    notice(
        status,
        "Not signed in",
        &format!("{why} Nothing was opened. Sign in again at /ui/sign-in."),
    )
}

/// `GET /ui/oidc/callback`: the provider's answer.
pub(super) async fn callback(
    State(state): State<Arc<PageState>>,
    Query(query): Query<CallbackQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(provider) = state.config.oidc.clone() else {
        return refused(StatusCode::NOT_FOUND, "This server has no sign-in.");
    };
    if !query.error.is_empty() {
        return refused(
            StatusCode::UNAUTHORIZED,
            &format!(
                "The provider refused ({}).",
                query.error.chars().take(100).collect::<String>()
            ),
        );
    }
    let now = state.now();
    // A refusal says why (no secret is in it: a state, a provider's
    // error code, a claim that does not hold).
    let signed = match provider.finish(&query.code, &query.state, now).await {
        Ok(signed) => signed,
        Err(refusal) => {
            let why: SignInRefusal = refusal;
            return refused(StatusCode::UNAUTHORIZED, &format!("{why}."));
        }
    };
    let group = &provider.config().approvers_group;
    if !signed.groups.iter().any(|g| g == group) {
        return notice(
            StatusCode::FORBIDDEN,
            "Refused",
            &format!(
                "You are signed in at the provider as {}, who is not in the group {} that may decide approvals. Nothing was opened.",
                signed.subject, group
            ),
        );
    }
    let (Some(id), Some(csrf), Some(nonce)) = (random_hex(), random_hex(), random_hex()) else {
        return notice(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not signed in",
            "No randomness.",
        );
    };
    let link = Link {
        by: signed.by(),
        scope: Scope::Console,
        expires: now.saturating_add(SESSION_SECONDS),
        nonce,
    };
    state.sessions().open(id.clone(), link, csrf, now);
    let mut response = see_other("/ui/console");
    let secure = if state.config.secure_cookie.applies(&headers) {
        "; Secure"
    } else {
        ""
    };
    // Lax, not Strict: the browser arrives here from the provider's site,
    // and the session must hold for the redirect that follows.
    let cookie = format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Lax; Max-Age={SESSION_SECONDS}{secure}"
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}
