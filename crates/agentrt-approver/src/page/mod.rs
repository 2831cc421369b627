//! The approval page: a person in a browser sees a run's pending
//! approvals as the CLI shows them and approves or rejects one, bound to
//! the hash on the page.
//!
//! - `GET /ui/login?token=…`: takes a one-time login link (made by
//!   `agentrt-approver login-link`), bound to one run and one person;
//!   its nonce is recorded in the run's database, so it signs in once,
//!   ever. It opens a session (an `HttpOnly`, `SameSite=Strict` cookie,
//!   `Secure` as [`SecureCookie`] says) and sends the browser to the run;
//! - `GET /ui/runs/{run}`: the page, for the session's run only (403 for
//!   any other);
//! - `POST /ui/runs/{run}/approvals/{id}/approve` (or `/reject`): a form
//!   carrying the session's CSRF token, the hash shown and a note, for the
//!   session's run only (403 otherwise); the decision applies only if the
//!   approval still has that hash, otherwise the page says it changed and
//!   decides nothing;
//! - `GET /ui/sign-in` and `GET /ui/oidc/callback`: with an OpenID
//!   provider configured, a person signs in there instead (module
//!   `sign_in`); a member of the approvers' group gets the console;
//! - `GET /ui/style.css`.
//!
//! Every answer sets a Content-Security-Policy that allows no script, no
//! inline style, no frame and forms only to this origin; what the model
//! chose is escaped text. The approver's calls run on the blocking pool.

mod console;
mod console_html;
mod form;
mod html;
mod login;
mod sign_in;

use std::sync::{Arc, Mutex};

use agentrt::Clock;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use axum::routing::{get, post};

pub use form::form_fields;
pub use login::{
    CONSOLE_LINK_SECONDS, Link, LinkRefusal, MAX_TOKEN_BYTES, Scope, SecureCookie, console_token,
    login_token, session_id,
};

use crate::signature::{Secret, constant_time_eq, hex};
use crate::{Approver, ApproverError, Decision, SignIn};
use login::{COOKIE, SESSION_SECONDS, Session, Sessions};

/// The policy every page answer carries.
const POLICY: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";
/// The largest form read.
const MAX_FORM: usize = 16 * 1024;

/// The page's settings; [`PageConfig::new`] gives the defaults.
#[derive(Clone)]
pub struct PageConfig {
    /// What decides, and records the login links taken.
    pub approver: Arc<dyn Approver>,
    /// The secret login links are checked with (the webhook's).
    pub secret: Secret,
    /// The clock links and sessions are judged by.
    pub clock: Clock,
    /// When the session cookie is `Secure` (default: never).
    pub secure_cookie: SecureCookie,
    /// The store the console reads (every run's record); `None`: no
    /// console, and console links are refused.
    pub console: Option<agentrt::Store>,
    /// Approvers sign in at this OpenID provider (`/ui/sign-in`); `None`:
    /// login links only.
    pub oidc: Option<Arc<crate::oidc::Provider>>,
}

impl PageConfig {
    /// The defaults around `approver` and `secret`: the wall clock, a
    /// cookie without `Secure`.
    pub fn new(approver: Arc<dyn Approver>, secret: Secret) -> PageConfig {
        PageConfig {
            approver,
            secret,
            clock: agentrt::system_clock(),
            secure_cookie: SecureCookie::Never,
            console: None,
            oidc: None,
        }
    }
}

impl std::fmt::Debug for PageConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageConfig")
            .field("secure_cookie", &self.secure_cookie)
            .finish_non_exhaustive()
    }
}

struct PageState {
    config: PageConfig,
    sessions: Mutex<Sessions>,
}

impl PageState {
    fn now(&self) -> i64 {
        let nanos = (self.config.clock)().as_unix_nanos();
        i64::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(0)
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The page's routes, under `/ui/`.
pub fn router(config: PageConfig) -> Router {
    let state = Arc::new(PageState {
        config,
        sessions: Mutex::default(),
    });
    Router::new()
        .route("/ui/login", get(login))
        .route("/ui/sign-in", get(sign_in::sign_in))
        .route(crate::oidc::CALLBACK_PATH, get(sign_in::callback))
        .route("/ui/", get(index))
        .route("/ui/style.css", get(style))
        .route("/ui/runs/{run}", get(run_page))
        .route("/ui/runs/{run}/approvals/{id}/{verb}", post(decide))
        .route("/ui/console", get(console::runs))
        .route("/ui/console/pending", get(console::pending))
        .route("/ui/console/runs/{run}", get(console::run))
        .route("/ui/console/runs/{run}/chain", get(console::chain))
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

/// The page's 500: "internal error" to the person, the cause at `place`
/// to the operator's log (`fault`).
fn internal(place: &str, cause: &dyn std::fmt::Display) -> Response {
    crate::fault::report(place, cause);
    notice(StatusCode::INTERNAL_SERVER_ERROR, "Error", "internal error")
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
}

fn not_signed_in(why: &str) -> Response {
    notice(
        StatusCode::UNAUTHORIZED,
        "Not signed in",
        &format!("{why} Ask for a new one (agentrt-approver login-link)."),
    )
}

async fn login(
    State(state): State<Arc<PageState>>,
    Query(query): Query<LoginQuery>,
    headers: HeaderMap,
) -> Response {
    let now = state.now();
    let link = match Link::read(&state.config.secret, &query.token, now) {
        Ok(link) => link,
        Err(LinkRefusal::Malformed | LinkRefusal::Forged) => {
            return not_signed_in("This link is not valid.");
        }
        Err(LinkRefusal::Expired) => return not_signed_in("This link has expired."),
        Err(LinkRefusal::TooLong) => {
            return not_signed_in("A console link may last an hour at most; this one is longer.");
        }
    };
    let target = match &link.scope {
        Scope::Run(run) => {
            if let Err(refused) = take_run_link(&state, &link, run).await {
                return refused;
            }
            format!("/ui/runs/{}", percent(run))
        }
        Scope::Console => {
            if state.config.console.is_none() {
                return notice(
                    StatusCode::NOT_FOUND,
                    "No console",
                    "This server has no console.",
                );
            }
            if !state.sessions().take_console(&link, now) {
                return not_signed_in("This link was used already: each link signs in once.");
            }
            "/ui/console".to_owned()
        }
    };
    let (Some(id), Some(csrf)) = (random_hex(), random_hex()) else {
        return notice(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Not signed in",
            "No randomness.",
        );
    };
    state.sessions().open(id.clone(), link, csrf, now);
    let mut response = see_other(&target);
    let secure = if state.config.secure_cookie.applies(&headers) {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={SESSION_SECONDS}{secure}"
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Takes a run's link in the database (once, ever): the refusal to answer
/// when it was used, its run does not exist, or the store failed.
async fn take_run_link(state: &PageState, link: &Link, run: &str) -> Result<(), Response> {
    let sign_in = SignIn {
        run_id: run.to_owned(),
        by: link.by.clone(),
        nonce: link.nonce.clone(),
    };
    let approver = Arc::clone(&state.config.approver);
    let taken = tokio::task::spawn_blocking(move || approver.sign_in(&sign_in)).await;
    match taken {
        Ok(Ok(())) => Ok(()),
        Ok(Err(ApproverError::LinkUsed)) => Err(not_signed_in(
            "This link was used already: each link signs in once.",
        )),
        Ok(Err(e)) if e.is_not_found() => Err(notice(
            StatusCode::NOT_FOUND,
            "No such run",
            &format!("There is no run {run}."),
        )),
        Ok(Err(e)) => Err(internal("page: signing in", &e)),
        Err(e) => Err(internal("page: signing in", &e)),
    }
}

/// The session the request's cookie names.
fn session(state: &PageState, headers: &HeaderMap) -> Option<Session> {
    let id = session_id(headers)?;
    state.sessions().session(id, state.now())
}

fn signed_out() -> Response {
    notice(
        StatusCode::UNAUTHORIZED,
        "Not signed in",
        "Sign in with a login link: agentrt-approver login-link --secret-file FILE --base URL --run RUN",
    )
}

/// Why a request may not see a run's page.
enum NotYours {
    /// No session.
    SignedOut,
    /// A session for this other run.
    OtherRun(String),
}

impl NotYours {
    /// 401 without a session, 403 with one for another run.
    fn answer(self, run: &str) -> Response {
        match self {
            NotYours::SignedOut => signed_out(),
            NotYours::OtherRun(theirs) => notice(
                StatusCode::FORBIDDEN,
                "Refused",
                &format!(
                    "You are signed in for run {theirs} only; this is run {run}. Ask for a login link for it (agentrt-approver login-link --run {run})."
                ),
            ),
        }
    }
}

/// The session of `headers` if it may see `run`: the run's own, or the
/// console's.
fn session_for(state: &PageState, headers: &HeaderMap, run: &str) -> Result<Session, NotYours> {
    let session = session(state, headers).ok_or(NotYours::SignedOut)?;
    match &session.scope {
        Scope::Console => Ok(session),
        Scope::Run(theirs) if theirs == run => Ok(session),
        Scope::Run(theirs) => Err(NotYours::OtherRun(theirs.clone())),
    }
}

/// Signed in without a run named: to the session's run.
async fn index(State(state): State<Arc<PageState>>, headers: HeaderMap) -> Response {
    match session(&state, &headers) {
        Some(session) => match &session.scope {
            Scope::Run(run) => see_other(&format!("/ui/runs/{}", percent(run))),
            Scope::Console => see_other("/ui/console"),
        },
        None => signed_out(),
    }
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
        "endorsed" => {
            "has your approval; it needs a second approver, another person, before it can run."
        }
        "same_approver" => {
            "has your approval already: it needs another person's. Nothing more was decided."
        }
        "edited" => {
            "was replaced by your edit, which is approved. When its owner resumes the run, the policy judges the edited call; if it allows it, exactly that call runs."
        }
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
    let session = match session_for(&state, &headers, &run) {
        Ok(session) => session,
        Err(not_yours) => return not_yours.answer(&run),
    };
    let approver = Arc::clone(&state.config.approver);
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
        Ok(Err(e)) => return internal("page: reading a run's approvals", &e),
        Err(e) => return internal("page: reading a run's approvals", &e),
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

async fn decide(
    State(state): State<Arc<PageState>>,
    Path((run, id, verb)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (approve, edit) = match verb.as_str() {
        "approve" => (true, false),
        "edit" => (true, true),
        "reject" => (false, false),
        _ => return notice(StatusCode::NOT_FOUND, "Not found", "No such page."),
    };
    let session = match session_for(&state, &headers, &run) {
        Ok(session) => session,
        Err(not_yours) => return not_yours.answer(&run),
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
    let args = match edit {
        false => None,
        true => match agentrt::Canonical::parse_str(&field("args")) {
            Ok(args) => Some(args),
            Err(e) => {
                return edit_refused(&run, &format!("the arguments are not acceptable JSON: {e}"));
            }
        },
    };
    let decision = Decision {
        run_id: run.clone(),
        approval_id: id.clone(),
        hash: field("hash"),
        by: session.by.clone(),
        note: field("note"),
        args,
        request_signature: None,
    };
    let approver = Arc::clone(&state.config.approver);
    let decided = tokio::task::spawn_blocking(move || {
        if approve {
            approver.approve(&decision)
        } else {
            approver.reject(&decision)
        }
    })
    .await;
    let done = match decided {
        Ok(Ok(_)) if edit => "edited",
        // The first of two approvers (design §46).
        Ok(Ok(decided)) if approve && decided.status == agentrt::ApprovalStatus::Pending => {
            "endorsed"
        }
        Ok(Ok(_)) if approve => "approved",
        Ok(Ok(_)) => "rejected",
        Ok(Err(ApproverError::Core(agentrt::Error::EditRefused { detail, .. }))) => {
            return edit_refused(&run, &detail);
        }
        Ok(Err(e)) => match outcome(&e) {
            Some(done) => done,
            None => return internal("page: deciding an approval", &e),
        },
        Err(e) => return internal("page: deciding an approval", &e),
    };
    see_other(&format!(
        "/ui/runs/{}?done={done}&approval={}",
        percent(&run),
        percent(&id)
    ))
}

/// An edit refused before anything was decided: why, and the way back.
fn edit_refused(run: &str, why: &str) -> Response {
    html(
        StatusCode::UNPROCESSABLE_ENTITY,
        html::refused_edit(run, why),
    )
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
        ApproverError::Core(Core::SameApprover { .. }) => Some("same_approver"),
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
