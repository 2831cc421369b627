//! The signed webhook (design §35): an HTTP handler over an
//! [`Approver`]. Every request goes through the same pipeline, in order:
//!
//! 1. a request whose signature headers cannot hold (one missing, the
//!    timestamp outside the window, the signature not of its form:
//!    [`Verifier::plausible`]) takes a token of the *unsigned* bucket
//!    before anything else of it is read: 429 `rate_limited` when there is
//!    none;
//! 2. the body, read up to `max_body` bytes: 413 `body_too_large` (400
//!    when it cannot be read);
//! 3. the signature ([`crate::signature`]), with the secret of the key
//!    the request names in `X-Approval-Key-Id`, or else the shared
//!    secret: 401 `unauthorized` with the reason (an unknown key id
//!    included);
//! 4. the route (module `routes`): 404 `not_found` for anything else;
//! 5. a verified request to a route takes a token of the *signed* bucket
//!    (`rate`, `burst`): 429 `rate_limited` when there is none (its
//!    signature is then not remembered: it may be sent again); only then
//!    is its signature remembered as used and its route run.
//!
//! A request that looked signed but is refused at 2, 3 or 4 takes its
//! token of the unsigned bucket when it is refused (429 instead when there
//! is none). So unsigned, forged, replayed or misrouted requests, however
//! many, spend only the unsigned bucket (`unsigned_rate`,
//! `unsigned_burst`): the operator's signed requests keep their own budget.
//!
//! The approver's calls (SQLite) run on the blocking pool, never on the
//! runtime's workers. A decision or cancel carries the request's signature
//! into its transaction, so a replay is refused after a restart too.
//!
//! A request signed with a key ([`WebhookConfig::keys`]) decides as that
//! key's approver only: an approve, reject (an edit included) or cancel
//! whose body's `by` names anyone else is 403 `by_mismatch` (nothing is
//! decided or written), one that leaves `by` out decides as the key's
//! approver, and the recorded decision names that approver. A request
//! without a key id is checked with the shared secret, when there is
//! one, and its `by` is whatever it says, as before.

mod bucket;
#[doc(hidden)]
pub mod request;
mod respond;
#[doc(hidden)]
pub mod routes;
mod text;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::{Approval, Clock, Timestamp, system_clock};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::Response;
use serde::Serialize;

use crate::signature::{Keys, Secret, Signer, Verifier};
use crate::{Approver, ApproverError};
use bucket::Bucket;
use request::signature_headers;
use respond::{Action, ErrorText, approver_error, error, internal, json};
use routes::Route;
pub(crate) use text::approval_text;

/// The webhook's settings; [`WebhookConfig::new`] gives the defaults.
#[derive(Clone)]
pub struct WebhookConfig {
    /// What decides.
    pub approver: Arc<dyn Approver>,
    /// The shared secret (at least 32 bytes): it checks requests that name
    /// no key; without it, every request must name one of `keys`.
    pub secret: Option<Secret>,
    /// The per-approver keys: a request naming one in
    /// `X-Approval-Key-Id` is checked with its secret and decides as its
    /// approver only. Its secrets should differ from the shared secret
    /// ([`Keys::check_apart_from`]; `serve` refuses to start otherwise).
    pub keys: Keys,
    /// How far a request's timestamp may be from now (default 5 minutes).
    pub skew: Duration,
    /// Verified requests to a route a second (default 10): the signed
    /// bucket.
    pub rate: u32,
    /// Verified requests to a route at once (default 20).
    pub burst: u32,
    /// Other requests (unsigned, forged, replayed, too large, to no route)
    /// a second (default 10): the unsigned bucket.
    pub unsigned_rate: u32,
    /// Other requests at once (default 20).
    pub unsigned_burst: u32,
    /// The largest body read (default 16 KiB).
    pub max_body: usize,
    /// How many pending approvals a listing shows (default 20).
    pub limit: u64,
    /// The clock the signature window and the rate are judged by.
    pub clock: Clock,
    /// Told of every verified decision and every refused request (nothing
    /// of it is stored).
    pub observer: Option<WebhookObserver>,
}

/// What the webhook tells its observer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookEvent {
    /// `webhook.decision`: a verified approve, reject or cancel, and how
    /// it ended.
    Decision {
        /// The run the path names.
        run_id: String,
        /// `approve`, `reject` or `cancel`.
        action: &'static str,
        /// The approval the path names (empty for a cancel).
        approval_id: String,
        /// Who the body says decides (empty when unreadable); for a request
        /// signed with a key whose body leaves `by` out, the key's
        /// approver.
        by: String,
        /// The key the request was signed with (empty: the shared
        /// secret).
        key_id: String,
        /// The answer's status.
        status: u16,
        /// The client's address, when known.
        remote: String,
        /// Why it was refused, for an error answer.
        error: Option<String>,
    },
    /// `webhook.refused`: a request refused before its route (rate,
    /// size, signature).
    Refused {
        /// The method.
        method: String,
        /// The path.
        path: String,
        /// The answer's status.
        status: u16,
        /// Why.
        reason: String,
        /// The client's address, when known.
        remote: String,
    },
}

impl WebhookEvent {
    /// `webhook.decision` or `webhook.refused`.
    pub fn name(&self) -> &'static str {
        match self {
            WebhookEvent::Decision { .. } => "webhook.decision",
            WebhookEvent::Refused { .. } => "webhook.refused",
        }
    }
}

/// Hears the webhook's events.
pub type WebhookObserver = Arc<dyn Fn(&WebhookEvent) + Send + Sync>;

impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("secret", &self.secret)
            .field("keys", &self.keys)
            .field("skew", &self.skew)
            .field("rate", &self.rate)
            .field("burst", &self.burst)
            .field("unsigned_rate", &self.unsigned_rate)
            .field("unsigned_burst", &self.unsigned_burst)
            .field("max_body", &self.max_body)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl WebhookConfig {
    /// The defaults around `approver` and the shared secret, no keys.
    pub fn new(approver: Arc<dyn Approver>, secret: Secret) -> WebhookConfig {
        WebhookConfig {
            secret: Some(secret),
            ..WebhookConfig::keyed(approver, Keys::default())
        }
    }

    /// The defaults around `approver` and per-approver `keys`, no shared
    /// secret: every request must name a key.
    pub fn keyed(approver: Arc<dyn Approver>, keys: Keys) -> WebhookConfig {
        WebhookConfig {
            approver,
            secret: None,
            keys,
            skew: Duration::from_secs(300),
            rate: 10,
            burst: 20,
            unsigned_rate: 10,
            unsigned_burst: 20,
            max_body: 16 * 1024,
            limit: 20,
            clock: system_clock(),
            observer: None,
        }
    }
}

struct Shared {
    config: WebhookConfig,
    /// Verified requests to a route.
    signed: Mutex<Bucket>,
    /// Everything else.
    unsigned: Mutex<Bucket>,
    verifier: Mutex<Verifier>,
}

/// The webhook as an axum router (its routes only; nest it under a prefix
/// to serve it beside others: the signed path is the path it sees).
pub fn router(config: WebhookConfig) -> Router {
    let shared = Shared {
        signed: Mutex::new(Bucket::new(config.rate, config.burst)),
        unsigned: Mutex::new(Bucket::new(config.unsigned_rate, config.unsigned_burst)),
        verifier: Mutex::new(Verifier::with_keys(
            config.secret.clone(),
            config.keys.clone(),
            config.skew,
            config.rate,
            config.burst,
        )),
        config,
    };
    Router::new().fallback(handle).with_state(Arc::new(shared))
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let remote = request
        .extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.to_string())
        .unwrap_or_default();
    let method = request.method().as_str().to_owned();
    let path = request.uri().path().to_owned();
    let (response, decision) = pipeline(&shared, request).await;
    if let Some(observer) = &shared.config.observer {
        let status = response.status().as_u16();
        let error = response
            .extensions()
            .get::<ErrorText>()
            .map(|e| e.0.clone());
        let event = match decision {
            Some(decided) => Some(WebhookEvent::Decision {
                run_id: decided.run_id,
                action: decided.action,
                approval_id: decided.approval_id,
                by: decided.by,
                key_id: decided.key_id,
                status,
                remote,
                error,
            }),
            // Refused before its route: rate, size or signature.
            None if matches!(status, 401 | 413 | 429) || (status == 400 && error.is_some()) => {
                Some(WebhookEvent::Refused {
                    method,
                    path,
                    status,
                    reason: error.unwrap_or_default(),
                    remote,
                })
            }
            None => None,
        };
        if let Some(event) = event {
            observer(&event);
        }
    }
    response
}

/// What a decision route was asked, for the observer.
struct Asked {
    run_id: String,
    action: &'static str,
    approval_id: String,
    by: String,
    key_id: String,
}

fn rate_limited() -> Response {
    error(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        "too many requests",
    )
}

/// `refused`, once the request took its token of the unsigned bucket
/// (unless `charged`: it took one already); 429 when there is none.
fn refuse(shared: &Shared, now: Timestamp, charged: bool, refused: Response) -> Response {
    if charged || locked(&shared.unsigned).take(now) {
        refused
    } else {
        rate_limited()
    }
}

/// The pipeline; with what a verified decision route was asked.
async fn pipeline(
    shared: &Arc<Shared>,
    request: axum::extract::Request,
) -> (Response, Option<Asked>) {
    let now = (shared.config.clock)();
    let seconds = i64::try_from(now.as_unix_nanos().div_euclid(1_000_000_000)).unwrap_or(0);
    let (parts, body) = request.into_parts();
    // Before anything of the body is read: a request that cannot be
    // signed pays the unsigned bucket now.
    let plausible = locked(&shared.verifier).plausible(seconds, &signature_headers(&parts.headers));
    let charged = !plausible;
    if charged && !locked(&shared.unsigned).take(now) {
        return (rate_limited(), None);
    }
    let body = match read_body(body, shared.config.max_body).await {
        Ok(body) => body,
        Err(response) => return (refuse(shared, now, charged, response), None),
    };
    let (route, signer) = match admit(shared, now, seconds, charged, &parts, &body) {
        Admitted::Route(route, signer) => (route, signer),
        Admitted::Refused(refused) => return (refused, None),
    };
    // Only an observer is told who asked: no second read of the body
    // otherwise.
    let asked = match shared.config.observer {
        Some(_) => asked(&route, &body, signer.as_ref()),
        None => None,
    };
    let signed = Signed {
        signature: signature_headers(&parts.headers)
            .signature
            .map(str::to_owned),
        signer,
    };
    (answer(shared, route, &parts, body, signed).await, asked)
}

/// What steps 3 to 5 of the pipeline made of a request.
enum Admitted<'a> {
    /// Its route, to run, and who signed it when it named a key.
    Route(Route<'a>, Option<Signer>),
    /// The answer that refuses it.
    Refused(Response),
}

/// Steps 3 to 5 of the pipeline for a request whose body was read: its
/// route, once its signature is remembered and its token taken; else the
/// answer.
fn admit<'a>(
    shared: &Shared,
    now: Timestamp,
    seconds: i64,
    charged: bool,
    parts: &'a Parts,
    body: &[u8],
) -> Admitted<'a> {
    let (method, path) = (parts.method.as_str(), parts.uri.path());
    let headers = signature_headers(&parts.headers);
    // One borrow of the verifier from the check to remembering: two
    // copies of a request cannot both pass.
    let mut verifier = locked(&shared.verifier);
    let accepted = match verifier.check(seconds, &headers, method, path, body) {
        Ok(accepted) => accepted,
        Err(refusal) => {
            drop(verifier);
            let refused = error(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                &refusal.to_string(),
            );
            return Admitted::Refused(refuse(shared, now, charged, refused));
        }
    };
    let Some(route) = routes::route(method, path) else {
        drop(verifier);
        let refused = error(StatusCode::NOT_FOUND, "not_found", "no such route");
        return Admitted::Refused(refuse(shared, now, charged, refused));
    };
    if !locked(&shared.signed).take(now) {
        return Admitted::Refused(rate_limited());
    }
    let signer = accepted.signer().cloned();
    verifier.remember(accepted);
    Admitted::Route(route, signer)
}

/// What a decision route was asked (`by` read leniently from the body;
/// the key's approver when a keyed body leaves it out).
fn asked(route: &Route<'_>, body: &[u8], signer: Option<&Signer>) -> Option<Asked> {
    let (run, action, approval) = match route {
        Route::Approve { run, id } => (run, "approve", *id),
        Route::Reject { run, id } => (run, "reject", *id),
        Route::Cancel { run } => (run, "cancel", ""),
        Route::Pending { .. } | Route::Show { .. } => return None,
    };
    let mut by = request::asked_by(body);
    if let (true, Some(signer)) = (by.is_empty(), signer) {
        by.clone_from(&signer.approver);
    }
    Some(Asked {
        run_id: (*run).to_owned(),
        action,
        approval_id: approval.to_owned(),
        by,
        key_id: signer.map(|s| s.key_id.clone()).unwrap_or_default(),
    })
}

/// The body, at most `max` bytes.
async fn read_body(body: Body, max: usize) -> Result<Bytes, Response> {
    use http_body_util::BodyExt;
    match http_body_util::Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            &format!("the body is larger than {max} bytes"),
        )),
        Err(_) => Err(error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the body could not be read",
        )),
    }
}

/// Runs `f` with the approver on the blocking pool.
async fn blocking<T: Send + 'static>(
    shared: &Arc<Shared>,
    f: impl FnOnce(&dyn Approver) -> Result<T, ApproverError> + Send + 'static,
) -> Result<Result<T, ApproverError>, Response> {
    let approver = Arc::clone(&shared.config.approver);
    tokio::task::spawn_blocking(move || f(approver.as_ref()))
        .await
        .map_err(|e| internal("webhook: the approver's call", &e))
}

#[derive(Serialize)]
struct Listing {
    run_id: String,
    pending: Vec<crate::Pending>,
}

#[derive(Serialize)]
struct Decided<'a> {
    status: &'a str,
    run_id: &'a str,
    approval_id: &'a str,
    hash: &'a str,
    by: &'a str,
    /// The approval an edit replaced (`approval_id` binds the edit).
    #[serde(skip_serializing_if = "Option::is_none")]
    edited: Option<&'a str>,
}

#[derive(Serialize)]
struct Cancelled<'a> {
    status: &'a str,
    run_id: &'a str,
    by: &'a str,
}

/// What a verified request was signed with: its signature (recorded
/// with what it decides) and, when it named a key, who signed it.
struct Signed {
    signature: Option<String>,
    signer: Option<Signer>,
}

impl Signed {
    /// Whose decisions the request may carry: its key's approver (none:
    /// anyone's, the shared secret).
    fn approver(&self) -> Option<&str> {
        self.signer.as_ref().map(|s| s.approver.as_str())
    }

    /// The answer for a body refused: 403 `by_mismatch` for a `by` that is
    /// not the key's approver, else 400 `bad_request`.
    fn refused(&self, refusal: request::BodyRefusal) -> Response {
        match (refusal, &self.signer) {
            (request::BodyRefusal::ByMismatch, Some(signer)) => error(
                StatusCode::FORBIDDEN,
                "by_mismatch",
                &format!(
                    "the key {} decides as {:?} only: by must be {:?} or left out",
                    signer.key_id, signer.approver, signer.approver
                ),
            ),
            (request::BodyRefusal::ByMismatch, None) => {
                error(StatusCode::FORBIDDEN, "by_mismatch", &refusal.to_string())
            }
            _ => error(StatusCode::BAD_REQUEST, "bad_request", &refusal.to_string()),
        }
    }
}

async fn answer(
    shared: &Arc<Shared>,
    route: Route<'_>,
    parts: &Parts,
    body: Bytes,
    signed: Signed,
) -> Response {
    let result = match route {
        Route::Pending { run } => pending(shared, run).await,
        Route::Show { run, id } => show(shared, run, id, parts).await,
        Route::Approve { run, id } => decide(shared, run, id, &body, signed, true).await,
        Route::Reject { run, id } => decide(shared, run, id, &body, signed, false).await,
        Route::Cancel { run } => cancel(shared, run, &body, signed).await,
    };
    result.unwrap_or_else(|response| response)
}

async fn pending(shared: &Arc<Shared>, run: &str) -> Result<Response, Response> {
    let limit = shared.config.limit;
    let run_id = run.to_owned();
    let found = blocking(shared, move |a| a.pending(&run_id, limit)).await?;
    let pending = found.map_err(|e| approver_error(&e, Action::Read))?;
    Ok(json(
        StatusCode::OK,
        &Listing {
            run_id: run.to_owned(),
            pending,
        },
    ))
}

async fn show(
    shared: &Arc<Shared>,
    run: &str,
    id: &str,
    parts: &Parts,
) -> Result<Response, Response> {
    let (run_id, approval_id) = (run.to_owned(), id.to_owned());
    let found = blocking(shared, move |a| a.show(&run_id, &approval_id)).await?;
    let shown = found.map_err(|e| approver_error(&e, Action::Read))?;
    if shown.expired || shown.approval.status == agentrt::ApprovalStatus::Expired {
        return Err(error(
            StatusCode::GONE,
            "expired",
            &format!("approval {} has expired", shown.approval.id),
        ));
    }
    if request::wants_text(parts.uri.query(), &parts.headers) {
        return Ok(respond::text(StatusCode::OK, text::approval_text(&shown)));
    }
    Ok(json(StatusCode::OK, &shown))
}

async fn decide(
    shared: &Arc<Shared>,
    run: &str,
    id: &str,
    body: &[u8],
    signed: Signed,
    approve: bool,
) -> Result<Response, Response> {
    let mut decision = request::decision_body_as(run, id, body, signed.approver())
        .map_err(|refusal| signed.refused(refusal))?;
    decision.request_signature = signed.signature;
    let sent = decision.clone();
    let edited = decision
        .args
        .is_some()
        .then_some(decision.approval_id.as_str());
    let decided = blocking(shared, move |a| {
        if approve {
            a.approve(&sent)
        } else {
            a.reject(&sent)
        }
    })
    .await?;
    let approval: Approval = decided.map_err(|e| approver_error(&e, Action::Decide))?;
    let (status, code) = match (approve, approval.status) {
        // The first of two approvers (design §46): recorded, still pending.
        (true, agentrt::ApprovalStatus::Pending) => ("endorsed", StatusCode::ACCEPTED),
        (true, _) => ("approved", StatusCode::ACCEPTED),
        (false, _) => ("rejected", StatusCode::OK),
    };
    Ok(json(
        code,
        &Decided {
            status,
            run_id: &approval.run_id,
            approval_id: &approval.id,
            hash: &approval.hash,
            by: &approval.decided_by,
            edited,
        },
    ))
}

async fn cancel(
    shared: &Arc<Shared>,
    run: &str,
    body: &[u8],
    signed: Signed,
) -> Result<Response, Response> {
    let mut cancellation = request::cancellation_body_as(run, body, signed.approver())
        .map_err(|refusal| signed.refused(refusal))?;
    cancellation.request_signature = signed.signature;
    let by = cancellation.by.clone();
    let cancelled = blocking(shared, move |a| a.cancel(&cancellation)).await?;
    let run_row = cancelled.map_err(|e| approver_error(&e, Action::Cancel))?;
    Ok(json(
        StatusCode::OK,
        &Cancelled {
            status: "cancelled",
            run_id: &run_row.id,
            by: &by,
        },
    ))
}
