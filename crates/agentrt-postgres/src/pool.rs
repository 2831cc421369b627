//! A small pool of connections, each with its prepared statements. A
//! connection that broke is dropped instead of returned; a caller waits
//! (blocking its thread, never an executor's) when every connection is
//! lent out, for a bounded time. A connection the server closed while it
//! sat idle (a restart, an ended session) is replaced, not lent: a
//! transaction whose first request (or a read, whatever it read) finds it
//! closed starts again on another, so a server restart costs no caller an
//! error.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use agentrt::Result;
use tokio_postgres::{Client, Statement};

use crate::endpoint::Endpoint;
use crate::runtime::IoRuntime;

/// Prepared statements of one connection, by their SQL.
pub(crate) type Statements = HashMap<String, Statement>;

/// One connection and the statements prepared on it.
pub(crate) struct Conn {
    pub(crate) client: Client,
    pub(crate) statements: Statements,
}

/// The pool.
pub(crate) struct Pool {
    endpoint: Endpoint,
    runtime: Arc<IoRuntime>,
    max: usize,
    /// The longest a caller waits for a connection.
    wait: Duration,
    state: Mutex<State>,
    returned: Condvar,
}

struct State {
    idle: Vec<Conn>,
    /// Connections open, lent out or idle.
    open: usize,
}

impl Pool {
    pub(crate) fn new(
        endpoint: Endpoint,
        runtime: Arc<IoRuntime>,
        max: usize,
        wait: Duration,
        first: Conn,
    ) -> Pool {
        Pool {
            endpoint,
            runtime,
            max: max.max(1),
            wait,
            state: Mutex::new(State {
                idle: vec![first],
                open: 1,
            }),
            returned: Condvar::new(),
        }
    }

    /// A new connection to the database.
    pub(crate) fn connect(runtime: &IoRuntime, endpoint: &Endpoint) -> Result<Conn> {
        Ok(Conn {
            client: runtime.connect(endpoint)?,
            statements: Statements::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` once on a connection of the pool, never again.
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Conn) -> Result<T>) -> Result<T> {
        self.with_started(|_| Ok(()), |conn, ()| f(conn))
    }

    /// Runs `start`, a transaction's first request (nothing it does lasts
    /// unless the transaction commits), on a connection, then `f` with what
    /// it answered; `start` is tried again as [`Pool::with_reconnecting`]
    /// says, `f` never.
    pub(crate) fn with_started<S, T>(
        &self,
        mut start: impl FnMut(&mut Conn) -> Result<S>,
        f: impl FnOnce(&mut Conn, S) -> Result<T>,
    ) -> Result<T> {
        let mut f = Some(f);
        self.with_reconnecting(|conn| {
            let started = start(conn)?;
            Ok(match f.take() {
                Some(f) => f(conn, started),
                None => Err(agentrt::Error::Internal {
                    detail: "a transaction's body ran twice".into(),
                }),
            })
        })
    }

    /// Runs `attempt` on a connection (a panic in it closes the connection,
    /// which may be inside a transaction, and frees its place). An attempt
    /// fails in one of two ways:
    /// before anything it did could last (the outer error), or for good
    /// (the inner one). The first kind, on a connection the server closed,
    /// is tried again on another (an idle one may have been closed before
    /// this process noticed), as often as the pool has places and once more
    /// for a new one.
    pub(crate) fn with_reconnecting<T>(
        &self,
        mut attempt: impl FnMut(&mut Conn) -> Result<Result<T>>,
    ) -> Result<T> {
        let mut tries = self.max + 1;
        loop {
            tries -= 1;
            let mut lent = Lent {
                pool: self,
                conn: Some(self.take()?),
            };
            let Some(conn) = lent.conn.as_mut() else {
                return Err(agentrt::Error::Internal {
                    detail: "a pooled connection went missing".into(),
                });
            };
            let value = match attempt(conn) {
                Ok(value) => value,
                Err(_) if conn.client.is_closed() && tries > 0 => {
                    // Dropped with `lent`: its place is freed.
                    continue;
                }
                Err(e) => Err(e),
            };
            if let Some(conn) = lent.conn.take() {
                self.give_back(conn);
            }
            return value;
        }
    }

    /// A lent connection that will not come back: its place is free.
    fn forget(&self) {
        self.lock().open -= 1;
        self.returned.notify_one();
    }

    /// A connection: an idle one, a new one while fewer than `max` are
    /// open, else the next one returned. [`agentrt::Error::DatabaseLocked`]
    /// when none comes back within `wait`.
    fn take(&self) -> Result<Conn> {
        let deadline = Instant::now() + self.wait;
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                if conn.client.is_closed() {
                    // Closed while idle: its place is free for a new one.
                    state.open -= 1;
                    continue;
                }
                return Ok(conn);
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                return Pool::connect(&self.runtime, &self.endpoint).inspect_err(|_| {
                    self.lock().open -= 1;
                    self.returned.notify_one();
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(agentrt::Error::DatabaseLocked);
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .map(|(state, _)| state)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    fn give_back(&self, conn: Conn) {
        let mut state = self.lock();
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.returned.notify_one();
    }
}

/// A connection out of the pool; dropped while still lent (a panic), it
/// closes and its place is freed.
struct Lent<'p> {
    pool: &'p Pool,
    conn: Option<Conn>,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pool.forget();
        }
    }
}
