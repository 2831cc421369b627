//! What the proxy knows of the host a call comes from: the HTTP session it
//! belongs to (a run label), how to tell it a held call's progress, and
//! when it gives up. A host giving up ends the hold of its call, never an
//! execution: the tool finishes within its timeout and is recorded
//! (design §39).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agentrt::BoxFuture;

use crate::oauth::Identity;

/// Tells the host how long a held call has waited: seconds waited, and
/// the hold in seconds.
pub type ProgressFn = Box<dyn Fn(u64, u64) -> BoxFuture<'static, ()> + Send + Sync>;

/// The host's side of one call.
///
/// ```
/// let caller = agentrt_proxy::Caller::default().in_http_session("s-1");
/// assert_eq!(caller.http_session.as_deref(), Some("s-1"));
/// ```
#[derive(Default)]
pub struct Caller {
    /// The HTTP session the call was made in, if any.
    pub http_session: Option<String>,
    /// Who called, when an OAuth access token said so: recorded as the
    /// run's labels, and the call's request key is the caller's own.
    pub identity: Option<Arc<Identity>>,
    /// Told about once a second while the call is held on an approval
    /// (the host sent a progress token).
    pub progress: Option<ProgressFn>,
    /// Resolves when the host gives up on the call (cancelled it, or its
    /// connection ended).
    pub gone: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// `gone` resolved (a finished future is not polled again).
    gave_up: bool,
}

impl Caller {
    /// The call was made in HTTP session `id`.
    pub fn in_http_session(mut self, id: impl Into<String>) -> Caller {
        self.http_session = Some(id.into());
        self
    }

    /// The call was made by `identity`.
    pub fn by(mut self, identity: Identity) -> Caller {
        self.identity = Some(Arc::new(identity));
        self
    }

    /// What planning a call reads of its caller.
    pub(crate) fn asker(&self) -> Asker<'_> {
        Asker {
            http_session: self.http_session.as_deref(),
            identity: self.identity.as_deref(),
        }
    }

    /// Progress of a held call goes to `progress`.
    pub fn with_progress(mut self, progress: ProgressFn) -> Caller {
        self.progress = Some(progress);
        self
    }

    /// The host gives up when `gone` resolves.
    pub fn gone_when(mut self, gone: impl Future<Output = ()> + Send + 'static) -> Caller {
        self.gone = Some(Box::pin(gone));
        self
    }

    /// Resolves when the host gives up; never, if it cannot say.
    pub(crate) async fn given_up(&mut self) {
        if self.gave_up {
            return;
        }
        match self.gone.as_mut() {
            Some(gone) => {
                gone.as_mut().await;
                self.gave_up = true;
            }
            None => std::future::pending().await,
        }
    }
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("http_session", &self.http_session)
            .field("identity", &self.identity)
            .field("progress", &self.progress.is_some())
            .field("gone", &self.gone.is_some())
            .finish()
    }
}

/// What a call's run records of its caller.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Asker<'a> {
    /// The HTTP session, if any.
    pub(crate) http_session: Option<&'a str>,
    /// The caller a token named, if any.
    pub(crate) identity: Option<&'a Identity>,
}
