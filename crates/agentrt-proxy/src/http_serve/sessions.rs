//! How much one holder of the token can make the proxy hold: at most
//! `max_sessions` MCP sessions open at once, and at most
//! `max_requests_per_session` requests of one session in flight.
//!
//! rmcp's own session manager counts nothing, and keeps a session that
//! ended by idleness in its map; [`CappedSessions`] wraps it, counts a
//! session as open from its creation until its worker's transport is
//! dropped (a `DELETE`, the idle timeout, the server's end), and then
//! closes it in the inner map too. The gate in front ([`limit_sessions`])
//! answers `503` to a new session past the cap and `429` to a request past
//! its session's cap, before rmcp reads the body; the manager's own refusal
//! is the backstop for two new sessions racing for the last place.
//!
//! With OAuth, a session belongs to the caller whose token opened it: a
//! request naming it with another caller's token is refused (`403`), so
//! one caller cannot read another's answers or speak in their session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use rmcp::RoleServer;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::streamable_http_server::session::local::{
    LocalSessionManager, LocalSessionManagerError,
};
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::oauth::Identity;

/// Sessions open at once unless `--max-sessions` says otherwise.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// Requests of one session in flight unless `--max-requests-per-session`
/// says otherwise.
pub const DEFAULT_MAX_REQUESTS_PER_SESSION: usize = 32;

/// The header a host names its session by.
const SESSION_HEADER: &str = "mcp-session-id";

/// The sessions open now, each with its budget of requests in flight.
#[derive(Debug)]
pub(crate) struct Open {
    max_sessions: usize,
    max_requests: usize,
    sessions: Mutex<HashMap<SessionId, Arc<Semaphore>>>,
    /// The caller who opened each session, when tokens name callers.
    owners: Mutex<HashMap<SessionId, Arc<Identity>>>,
}

impl Open {
    pub(crate) fn new(max_sessions: usize, max_requests: usize) -> Arc<Open> {
        Arc::new(Open {
            max_sessions,
            max_requests,
            sessions: Mutex::new(HashMap::new()),
            owners: Mutex::new(HashMap::new()),
        })
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<Identity>>> {
        // One insert or one remove at a time: consistent after a panic.
        self.owners
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records `owner` as the caller of the open session `id`.
    fn own(&self, id: &str, owner: Arc<Identity>) {
        let open = self
            .sessions()
            .get_key_value(id)
            .map(|(k, _)| Arc::clone(k));
        if let Some(id) = open {
            self.owners().insert(id, owner);
        }
    }

    /// The caller who opened session `id`, if tokens name callers.
    fn owner(&self, id: &str) -> Option<Arc<Identity>> {
        self.owners().get(id).cloned()
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Arc<Semaphore>>> {
        // A panic while holding this lock leaves the map consistent: each
        // change is one insert or one remove.
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a new session would find a place.
    fn has_room(&self) -> bool {
        self.sessions().len() < self.max_sessions
    }

    /// Takes a place for `id`, if there is one.
    fn admit(&self, id: &SessionId) -> bool {
        let mut sessions = self.sessions();
        if sessions.len() >= self.max_sessions {
            return false;
        }
        sessions.insert(Arc::clone(id), Arc::new(Semaphore::new(self.max_requests)));
        true
    }

    fn leave(&self, id: &str) {
        self.sessions().remove(id);
        self.owners().remove(id);
    }

    /// The request budget of the open session `id`.
    fn budget(&self, id: &str) -> Option<Arc<Semaphore>> {
        self.sessions().get(id).cloned()
    }
}

/// Why the manager refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CappedError {
    /// Every place is taken.
    #[error("too many open sessions")]
    Full,
    /// From rmcp's manager.
    #[error(transparent)]
    Inner(#[from] LocalSessionManagerError),
}

/// rmcp's in-memory session manager, capped and counted.
pub(crate) struct CappedSessions {
    inner: Arc<LocalSessionManager>,
    open: Arc<Open>,
}

impl CappedSessions {
    pub(crate) fn new(open: Arc<Open>) -> CappedSessions {
        CappedSessions {
            inner: Arc::new(LocalSessionManager::default()),
            open,
        }
    }
}

/// A session's place, given back when its transport is dropped; the
/// inner manager then forgets the session too (it keeps idle-ended ones).
struct Place {
    id: SessionId,
    open: Arc<Open>,
    inner: Arc<LocalSessionManager>,
}

impl Drop for Place {
    fn drop(&mut self) {
        self.open.leave(&self.id);
        let inner = Arc::clone(&self.inner);
        let id = Arc::clone(&self.id);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = inner.close_session(&id).await;
            });
        }
    }
}

/// A session's transport holding its place.
pub(crate) struct Counted<T> {
    inner: T,
    _place: Place,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Counted<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

impl SessionManager for CappedSessions {
    type Error = CappedError;
    type Transport = Counted<<LocalSessionManager as SessionManager>::Transport>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        if !self.open.admit(&id) {
            let _ = self.inner.close_session(&id).await;
            return Err(CappedError::Full);
        }
        let place = Place {
            id: Arc::clone(&id),
            open: Arc::clone(&self.open),
            inner: Arc::clone(&self.inner),
        };
        Ok((
            id,
            Counted {
                inner: transport,
                _place: place,
            },
        ))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        // An idle-ended session is gone from `open` before rmcp notices.
        Ok(self.open.budget(id).is_some() && self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.open.leave(id);
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(
        &self,
        _id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        // No session store is configured: nothing to restore.
        Ok(RestoreOutcome::NotSupported)
    }
}

/// A response body that holds its request's place in the session's
/// budget until the body is done (a call's answer streams after the
/// handler returns).
struct HeldBody {
    inner: Body,
    _permit: OwnedSemaphorePermit,
}

impl http_body::Body for HeldBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// Refuses a request naming another caller's session (`403`), a new
/// session past the cap (`503`) and a POST past its session's budget
/// (`429`); a request naming no open session goes on (rmcp answers it).
pub(crate) async fn limit_sessions(open: Arc<Open>, request: Request, next: Next) -> Response {
    let session = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let caller = request.extensions().get::<Arc<Identity>>().cloned();
    if let Some(session) = &session
        && let Some(owner) = open.owner(session)
        && !caller.as_ref().is_some_and(|c| c.same_caller(&owner))
    {
        return (
            StatusCode::FORBIDDEN,
            "this session was opened by another caller",
        )
            .into_response();
    }
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let Some(session) = session else {
        if !open.has_room() {
            return busy(
                StatusCode::SERVICE_UNAVAILABLE,
                "too many open sessions: close one (DELETE) or wait for one to end",
            );
        }
        let response = next.run(request).await;
        // The session this request opened is its caller's (recorded
        // before the host can learn its id).
        if let Some(caller) = caller
            && let Some(id) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            open.own(id, caller);
        }
        return response;
    };
    let Some(budget) = open.budget(&session) else {
        return next.run(request).await;
    };
    let Ok(permit) = budget.try_acquire_owned() else {
        return busy(
            StatusCode::TOO_MANY_REQUESTS,
            "too many requests of this session in flight: retry when one is answered",
        );
    };
    let (parts, body) = next.run(request).await.into_parts();
    Response::from_parts(
        parts,
        Body::new(HeldBody {
            inner: body,
            _permit: permit,
        }),
    )
}

fn busy(status: StatusCode, text: &'static str) -> Response {
    let mut response = (status, text).into_response();
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_taken_up_to_the_cap_and_given_back() {
        let open = Open::new(2, 1);
        let (a, b, c): (SessionId, SessionId, SessionId) = ("a".into(), "b".into(), "c".into());
        assert!(open.admit(&a) && open.admit(&b));
        assert!(!open.has_room());
        assert!(!open.admit(&c), "the third waits");
        open.leave(&a);
        assert!(open.admit(&c), "a place given back is taken again");
        let budget = open.budget("b").unwrap();
        let held = budget.clone().try_acquire_owned().unwrap();
        assert!(budget.clone().try_acquire_owned().is_err(), "one in flight");
        drop(held);
        assert!(budget.try_acquire_owned().is_ok());
        assert!(open.budget("a").is_none());
    }
}
