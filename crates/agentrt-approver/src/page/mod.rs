//! The approval page: a person in a browser sees a run's pending
//! approvals as the CLI shows them and approves or rejects one, bound to
//! the hash on the page.
//!
//! - `GET /ui/login?token=…`: takes a one-time login link (made by
//!   `agentrt-approver login-link`), opens a session (an `HttpOnly`,
//!   `SameSite=Strict` cookie) and sends the browser to the run it names;
//! - `GET /ui/runs/{run}`: the page;
//! - `POST /ui/runs/{run}/approvals/{id}/approve` (or `/reject`): a form
//!   carrying the session's CSRF token, the hash shown and a note; the
//!   decision applies only if the approval still has that hash, otherwise
//!   the page says it changed and decides nothing;
//! - `GET /ui/style.css`.
//!
//! Every answer sets a Content-Security-Policy that allows no script, no
//! inline style, no frame and forms only to this origin; what the model
//! chose is escaped text. The approver's calls run on the blocking pool.

mod html;
mod login;

use std::sync::{Arc, Mutex};

use agentrt::Clock;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};

pub use login::login_token;

use crate::signature::{Secret, constant_time_eq, hex};
use crate::{Approver, ApproverError, Decision};
use login::{LinkRefusal, Logins, SESSION_SECONDS};

/// The session cookie's name.
const COOKIE: &str = "agentrt_session";
/// The policy every page answer carries.
const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The largest form read.
const MAX_FORM: usize = 16 * 1024;

struct PageState {
    approver: Arc<dyn Approver>,
    secret: Secret,
    clock: Clock,
    logins: Mutex<Logins>,
}

impl PageState {
    fn now(&self) -> i64 {
        let nanos = (self.clock)().as_unix_nanos();
        i64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(0)
    }

    fn logins(&self) -> std::sync::MutexGuard<'_, Logins> {
        self.logins
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The page's routes, under `/ui/`, over `approver`; login links are
/// checked with `secret`, times read from `clock`.
pub fn router(approver: Arc<dyn Approver>, secret: Secret, clock: Clock) -> Router {
    let state = Arc::new(PageState {
        approver,
        secret,
        clock,
        logins: Mutex::default(),
    });
    Router::new()
        .route("/ui/login", get(login))
        .route("/ui/", get(index))
        .route("/ui/style.css", get(style))
        .route("/ui/runs/{run}", get(run_page))
        .route("/ui/runs/{run}/approvals/{id}/{verb}", post(decide))
        .with_state(state)
}

/// An answer with the page's headers.
fn answer(status: StatusCode, content_type: &'static str, body: String) -> Response {
    let mut response = Response::new(body.into());
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

fn html(status: StatusCode, body: String) -> Response {
    answer(status, "text/html; charset=utf-8", body)
}

fn notice(status: StatusCode, title: &str, text: &str) -> Response {
    html(status, html::notice(title, text))
}

/// A redirect to `location` (a path of ours).
fn see_other(location: &str) -> Response {
    let mut response = answer(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        String::new(),
    );
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}

fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex(&bytes))
}

async fn style() -> Response {
    answer(
        StatusCode::OK,
        "text/css; charset=utf-8",
        html::STYLE.to_owned(),
    )
}

#[derive(serde::Deserialize)]
struct LoginQuery {
    #[serde(default)]
    token: String,
    #[serde(default)]
    run: String,
}

async fn login(State(state): State<Arc<PageState>>, Query(query): Query<LoginQuery>) -> Response {
    let now = state.now();
    let taken = state.logins().take(&state.secret, &query.token, now);
    let by = match taken {
        Ok(by) => by,
        Err(refusal) => {
            let why = match refusal {
                LinkRefusal::Malformed | LinkRefusal::Forged => "This link is not valid.",
                LinkRefusal::Expired => "This link has expired.",
                LinkRefusal::Used => "This link was used already: each link signs in once.",
            };
            return notice(
                StatusCode::UNAUTHORIZED,
                "Not signed in",
                &format!("{why} Ask for a new one (agentrt-approver login-link)."),
            );
        }
    };
    let (Some(id), Some(csrf)) = (random_hex(), random_hex()) else {
        return notice(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not signed in",
            "No randomness.",
        );
    };
    state.logins().open(id.clone(), by, csrf, now);
    let target = if query.run.is_empty() {
        "/ui/".to_owned()
    } else {
        format!("/ui/runs/{}", percent(&query.run))
    };
    let mut response = see_other(&target);
    let cookie =
        format!("{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECONDS}");
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// The session the request's cookie names.
fn session(state: &PageState, headers: &HeaderMap) -> Option<login::Session> {
    let id = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))?;
    state.logins().session(id, state.now())
}

fn signed_out() -> Response {
    notice(
        StatusCode::UNAUTHORIZED,
        "Not signed in",
        "Sign in with a login link: agentrt-approver login-link --secret-file FILE --base URL --run RUN",
    )
}

/// Signed in without a run named: where to go (nothing lists runs).
async fn index(State(state): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    let Some(session) = session(&state, &headers) else {
        return signed_out();
    };
    notice(
        StatusCode::OK,
        &format!("Signed in as {}", session.by),
        "Open the page of a run: /ui/runs/RUN (a login link made with --run opens it).",
    )
}

#[derive(serde::Deserialize)]
struct PageQuery {
    #[serde(default)]
    done: String,
    #[serde(default)]
    approval: String,
}

/// The sentence a finished decision leaves on the page.
fn message(done: &str, approval: &str) -> Option<String> {
    let text = match done {
        "approved" => "was approved. The run resumes when its owner resumes it.",
        "rejected" => "was rejected; the run is cancelled.",
        "changed" => {
            "changed after it was shown (it has another hash now): nothing was decided. Read it again below."
        }
        "expired" => "had expired: nothing was decided, and the run is cancelled.",
        "not_pending" => "is no longer waiting: someone decided it already.",
        "not_waiting" => "cannot be decided: the run is no longer waiting.",
        _ => return None,
    };
    Some(format!("Approval {approval} {text}"))
}

async fn run_page(
    State(state): State<Arc<PageState>>,
    Path(run): Path<String>,
    Query(query): Query<PageQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(session) = session(&state, &headers) else {
        return signed_out();
    };
    let approver = Arc::clone(&state.approver);
    let run_id = run.clone();
    let found = tokio::task::spawn_blocking(move || approver.pending(&run_id, 0)).await;
    let pending = match found {
        Ok(Ok(pending)) => pending,
        Ok(Err(e)) if e.is_not_found() => {
            return notice(
                StatusCode::NOT_FOUND,
                "No such run",
                &format!("There is no run {run}."),
            );
        }
        _ => return notice(StatusCode::INTERNAL_SERVER_ERROR, "Error", "internal error"),
    };
    let message = message(&query.done, &query.approval);
    let body = html::run_page(
        &run,
        &session.by,
        message.as_deref(),
        &pending,
        &session.csrf,
    );
    html(StatusCode::OK, body)
}

/// The fields of a form body (`application/x-www-form-urlencoded`).
fn form_fields(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &str| -> String {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match b {
                b'+' => out.push(b' '),
                b'%' => match bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                {
                    Some(byte) => {
                        out.push(byte);
                        i += 2;
                    }
                    None => out.push(b'%'),
                },
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    String::from_utf8_lossy(body)
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(key), decode(value))
        })
        .collect()
}

async fn decide(
    State(state): State<Arc<PageState>>,
    Path((run, id, verb)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let approve = match verb.as_str() {
        "approve" => true,
        "reject" => false,
        _ => return notice(StatusCode::NOT_FOUND, "Not found", "No such page."),
    };
    let Some(session) = session(&state, &headers) else {
        return signed_out();
    };
    if body.len() > MAX_FORM {
        return notice(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Refused",
            "The form is too large.",
        );
    }
    let fields = form_fields(&body);
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    if !constant_time_eq(field("csrf").as_bytes(), session.csrf.as_bytes()) {
        return notice(
            StatusCode::FORBIDDEN,
            "Refused",
            "The form did not come from this page (its token does not match): nothing was decided.",
        );
    }
    let decision = Decision {
        run_id: run.clone(),
        approval_id: id.clone(),
        hash: field("hash"),
        by: session.by.clone(),
        note: field("note"),
        request_signature: None,
    };
    let approver = Arc::clone(&state.approver);
    let decided = tokio::task::spawn_blocking(move || {
        if approve {
            approver.approve(&decision)
        } else {
            approver.reject(&decision)
        }
    })
    .await;
    let done = match decided {
        Ok(Ok(_)) if approve => "approved",
        Ok(Ok(_)) => "rejected",
        Ok(Err(e)) => match outcome(&e) {
            Some(done) => done,
            None => return notice(StatusCode::INTERNAL_SERVER_ERROR, "Error", "internal error"),
        },
        Err(_) => return notice(StatusCode::INTERNAL_SERVER_ERROR, "Error", "internal error"),
    };
    see_other(&format!(
        "/ui/runs/{}?done={done}&approval={}",
        percent(&run),
        percent(&id)
    ))
}

/// The page's word for a refused decision.
fn outcome(e: &ApproverError) -> Option<&'static str> {
    use agentrt::Error as Core;
    match e {
        ApproverError::Expired { .. } => Some("expired"),
        ApproverError::Incomplete { .. } => Some("changed"),
        ApproverError::Core(Core::ApprovalChanged { .. }) => Some("changed"),
        ApproverError::Core(Core::NotPending { .. } | Core::ApprovalSuperseded { .. }) => {
            Some("not_pending")
        }
        ApproverError::Core(Core::RunState { .. }) => Some("not_waiting"),
        _ => None,
    }
}

/// `text` percent-encoded for a query value.
pub(crate) fn percent(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_fields_are_decoded() {
        assert_eq!(
            form_fields(b"csrf=a%2Bb&note=two+words%21&hash=&bad=%zz"),
            [
                ("csrf".to_owned(), "a+b".to_owned()),
                ("note".to_owned(), "two words!".to_owned()),
                ("hash".to_owned(), String::new()),
                ("bad".to_owned(), "%zz".to_owned()),
            ]
        );
    }
}
