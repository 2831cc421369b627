//! Where the connections' I/O runs, and how a blocking store call waits
//! for it.
//!
//! The store's interface is blocking (its async callers already run it off
//! their executor), and a store may be used from any thread, an async
//! runtime's own included. So each connection's I/O task runs on a small
//! runtime the store owns, and a call waits for its query with
//! [`block_on`], which parks the calling thread and needs no runtime of
//! its own: it never starts a runtime inside another, which would panic.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;

use agentrt::{Error, Result};
use tokio_postgres::Client;

use crate::endpoint::Endpoint;

/// Runs `future` to completion on the calling thread, parking it while the
/// future waits (its wakes come from the I/O runtime's thread).
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        match future.as_mut().poll(&mut cx) {
            Poll::Ready(value) => return value,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// The runtime that drives the store's connections. Dropping it (with the
/// last handle on the store) stops their tasks without blocking, so a
/// store may be dropped inside an async task.
pub(crate) struct IoRuntime {
    runtime: Option<tokio::runtime::Runtime>,
}

impl IoRuntime {
    pub(crate) fn start() -> Result<IoRuntime> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agentrt-pg-io")
            .enable_all()
            .build()
            .map_err(|e| Error::Internal {
                detail: format!("cannot start the PostgreSQL store's I/O runtime: {e}"),
            })?;
        Ok(IoRuntime {
            runtime: Some(runtime),
        })
    }

    pub(crate) fn handle(&self) -> Result<&tokio::runtime::Handle> {
        self.runtime
            .as_ref()
            .map(tokio::runtime::Runtime::handle)
            .ok_or_else(|| Error::Internal {
                detail: "the PostgreSQL store's I/O runtime has stopped".into(),
            })
    }

    /// A new connection whose I/O task runs on this runtime.
    pub(crate) fn connect(&self, endpoint: &Endpoint) -> Result<Client> {
        let endpoint = endpoint.clone();
        let connecting = self
            .handle()?
            .spawn(async move { Ok::<_, Error>(endpoint.open().await?.spawn_io()) });
        match block_on(connecting) {
            Ok(opened) => opened,
            Err(_) => Err(Error::Internal {
                detail: "the PostgreSQL store's I/O runtime stopped while connecting".into(),
            }),
        }
    }
}

impl Drop for IoRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Round trips to the server, by every store of this process.
static ROUND_TRIPS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Runs one request to the server (a statement, BEGIN, COMMIT) to its
/// answer, counted in [`round_trips`].
pub(crate) fn round_trip<F: std::future::Future>(request: F) -> F::Output {
    ROUND_TRIPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    block_on(request)
}

/// Sends a request without waiting for its answer: polled once, which
/// queues its message on the connection, in order before every later
/// request of that connection, then dropped (the connection reads the
/// answer and lets it go). Only for a request whose answer changes
/// nothing: a read-only transaction's `COMMIT`.
pub(crate) fn send_only<F: std::future::Future>(request: F) {
    let mut request = std::pin::pin!(request);
    let _ = request
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
}

/// How many requests the stores of this process have sent (see
/// [`crate::round_trips`]).
pub(crate) fn round_trips() -> u64 {
    ROUND_TRIPS.load(std::sync::atomic::Ordering::Relaxed)
}
