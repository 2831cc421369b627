//! A storage engine outside the core: the [`Backend`] a satellite crate
//! implements (PostgreSQL's, in `agentrt-postgres`) and hands to
//! [`Store::with_backend`](super::Store::with_backend). The store keeps
//! everything that makes the log one chain ([`WriteTx`](super::WriteTx)
//! seals every group's events); a backend runs groups and reads in its
//! transactions and says when others committed.

use std::sync::{Arc, Weak};
use std::time::Duration;

use super::chain_rows::ChainRows;
use super::extension::ExtensionShape;
use super::group_rows::GroupRows;
use super::read_rows::ReadRows;
use super::watch::Head;
use crate::clock::Timestamp;
use crate::error::Result;

/// A storage engine the store runs on instead of its SQLite file.
///
/// What an implementation must guarantee, besides the contracts of
/// [`GroupRows`] and [`ReadRows`]:
///
/// - [`Backend::write_group`] calls `group` exactly once, inside one
///   transaction of its own, and commits only when it returns `Ok`; any
///   error rolls the whole group back. Groups of every process sharing the
///   database are serialized on the chain (the group sees the head every
///   earlier group left and no later one), so a group never meets a
///   conflict halfway through;
/// - [`Backend::write_batched`] does the same for a group that may share
///   its transaction with groups other threads submitted meanwhile, each in
///   a savepoint of its own: a group that fails rolls back alone, and none
///   is reported committed before the shared transaction committed;
/// - every call blocks its thread: the store calls a backend only off the
///   async executor (its blocking threads, or a caller's own thread);
/// - [`Backend::watch`] announces, through the [`ChangeSignal`], the
///   highest committed seq whenever another handle or process commits,
///   without polling the database for it;
/// - errors never carry a password or other secret of the connection.
pub trait Backend: Send + Sync + 'static {
    /// Runs `group` in one transaction and commits if it returns `Ok`.
    fn write_group(&self, group: &mut dyn FnMut(&mut dyn GroupRows) -> Result<()>) -> Result<()>;

    /// Runs `group` as [`Backend::write_group`] does, possibly in one
    /// transaction with the groups other threads submit at the same time
    /// (group commit: one commit, one lock on the chain, for many groups).
    /// Blocks until the transaction holding it ended; a panic in `group`
    /// resumes in the caller. The default runs it alone.
    fn write_batched(&self, group: BatchedGroup) -> Result<()> {
        let mut group = Some(group);
        self.write_group(&mut |rows| match group.take() {
            Some(group) => group(rows),
            None => Err(crate::Error::Internal {
                detail: "a backend ran a write group twice".into(),
            }),
        })
    }

    /// Runs `f` over one consistent read of the database. `f` only reads:
    /// the backend may run it again (on another connection, when the one
    /// it was lent turned out dead); the store keeps the last run's value.
    fn read(&self, f: &mut dyn FnMut(&dyn ReadRows) -> Result<()>) -> Result<()>;

    /// Runs `f` over one consistent read of the event log and the state
    /// rows, for `verify` (see [`ChainRows`]).
    fn chain_read(&self, f: &mut dyn FnMut(&dyn ChainRows) -> Result<()>) -> Result<()>;

    /// Extends `owner`'s lease on a RUNNING run to `expires_at`, or, when
    /// the engine has a clock of its own (see
    /// [`ReadRows::clock_now`](super::engine::ReadRows::clock_now)), to its
    /// now + `ttl`; `false` when the run is no longer leased to `owner`.
    /// Writes only the lease columns (no event).
    fn renew_lease(
        &self,
        run_id: &str,
        owner: &str,
        expires_at: &Timestamp,
        ttl: Duration,
    ) -> Result<bool>;

    /// Starts announcing commits through `signal` (called once, when the
    /// first waiter subscribes); stops when [`ChangeSignal::announce`]
    /// returns `false`.
    fn watch(&self, signal: ChangeSignal) -> Result<()>;

    /// What the store is (for `Debug` and messages): never a password.
    fn describe(&self) -> String;

    /// Brings the tables of `extensions` (their SQLite migrations
    /// described: [`Extension::shape`](super::Extension::shape)) up to
    /// date in the engine's own DDL, or, on a backend opened without
    /// migrating, checks that they are; keeps the extension registry by
    /// the same rules as SQLite (see
    /// [`Extension::registration`](super::Extension::registration)).
    /// Called once, when the store is made, with at least one extension.
    /// The default refuses: the backend has no extension tables.
    fn sync_extensions(&self, extensions: &[ExtensionShape]) -> Result<()> {
        match extensions.first() {
            None => Ok(()),
            Some(shape) => Err(crate::Error::ExtensionSchema {
                extension: shape.extension.name.to_owned(),
                table: String::new(),
                detail: format!("extension tables are not supported on {}", self.describe()),
            }),
        }
    }
}

/// A write group handed to [`Backend::write_batched`]: owned, so the
/// thread that runs a shared transaction may run it.
pub type BatchedGroup = Box<dyn FnOnce(&mut dyn GroupRows) -> Result<()> + Send>;

/// How a backend tells the store that events were committed.
#[derive(Clone)]
pub struct ChangeSignal {
    head: Weak<Head>,
}

impl ChangeSignal {
    pub(super) fn new(head: &Arc<Head>) -> ChangeSignal {
        ChangeSignal {
            head: Arc::downgrade(head),
        }
    }

    /// Announces that events up to `seq` are committed; `false` once the
    /// store is gone or nobody waits any more (the watcher may stop then).
    pub fn announce(&self, seq: i64) -> bool {
        match self.head.upgrade() {
            Some(head) => {
                head.advance(seq);
                head.has_waiters()
            }
            None => false,
        }
    }

    /// Whether anyone still waits on the store (the watcher may stop when
    /// not; the next waiter starts it again).
    pub fn wanted(&self) -> bool {
        self.head.upgrade().is_some_and(|head| head.has_waiters())
    }
}

impl std::fmt::Debug for ChangeSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChangeSignal").finish_non_exhaustive()
    }
}
