//! The SQLite store: every SQL statement of the runtime lives under this
//! module. It records what it is given, atomically, and refuses what breaks
//! a rule of the file; it knows nothing of agents, tools or policies.
//!
//! Writes go through [`Store::write`]: one IMMEDIATE transaction per write
//! group, whose events are returned only after the commit.

mod calls;
mod files;
mod lease;
mod open;
mod page;
mod read;
mod recheck_read;
pub mod schema;
mod tx;
pub(crate) mod verify_read;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rusqlite::Connection;

use crate::clock::lock;
use crate::error::{Error, Result};
use crate::model::Event;

pub use page::{MAX_PAGE_TEXT, PAGE_READ_ROWS, PendingCount};
pub use read::Page;
pub use tx::{
    ApprovalChange, LeaseChange, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard,
    WriteTx,
};

/// How hard a commit works to survive failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every commit is fsynced (`synchronous=FULL`): a commit survives a
    /// power loss. The default.
    #[default]
    Full,
    /// WAL commits are not fsynced (`synchronous=NORMAL`): a commit survives
    /// a crash of the process, but the last commits may be lost with the
    /// machine (power loss, kernel panic). The database stays consistent
    /// either way. Several times faster per step.
    Normal,
}

/// How to open a store.
#[derive(Debug, Clone, Default)]
pub struct StoreOptions {
    /// Commit durability (default [`Durability::Full`]).
    pub durability: Durability,
}

/// An open agentrt database. Cheap to clone; clones share one connection.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    conn: Mutex<Connection>,
    /// A second connection for lease heartbeats (file stores), opened on
    /// first use, so a long transaction on `conn` cannot starve them.
    heartbeat: Mutex<Option<Connection>>,
    /// The file as resolved when it was opened (absolute, links followed):
    /// the heartbeat opens this file even if the working directory changes.
    file: Option<PathBuf>,
    path: Option<PathBuf>,
    read_only: bool,
    /// Write groups committed through this handle and its clones.
    commits: AtomicU64,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.inner.path)
            .field("read_only", &self.inner.read_only)
            .finish()
    }
}

impl Store {
    /// Opens the database at `path`, creating it (owner-only) and migrating
    /// it as needed; `":memory:"` opens a private in-memory database.
    ///
    /// ```
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// assert!(store.list_runs(10, 0).unwrap().items.is_empty());
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Store::open_with(path, StoreOptions::default())
    }

    /// [`Store::open`] with options.
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let (conn, path) = open::open_or_create(path.as_ref(), &options)?;
        Ok(Store::wrap(conn, path, false))
    }

    /// Opens an existing database without creating or migrating it.
    ///
    /// Refuses a symbolic link, a file that is not regular, another schema
    /// version, unsafe permissions, and a database holding a trigger or a
    /// view. `read_only` never writes to the file or its permissions.
    pub fn open_existing(path: impl AsRef<Path>, read_only: bool) -> Result<Store> {
        let conn = open::open_existing(path.as_ref(), read_only, &StoreOptions::default())?;
        Ok(Store::wrap(conn, Some(path.as_ref().to_owned()), read_only))
    }

    fn wrap(conn: Connection, path: Option<PathBuf>, read_only: bool) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                conn: Mutex::new(conn),
                heartbeat: Mutex::new(None),
                file: path.as_ref().and_then(|p| std::fs::canonicalize(p).ok()),
                path,
                read_only,
                commits: AtomicU64::new(0),
            }),
        }
    }

    /// The database path (`None` in memory).
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Runs `f` in one IMMEDIATE transaction and commits if it returns
    /// `Ok`. Returns its value and the events it appended, which exist only
    /// once committed. An error or a panic in `f` rolls everything back and
    /// leaves the store usable.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
    ) -> Result<(T, Vec<Event>)> {
        let mut conn = lock(&self.inner.conn);
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(Error::from_sqlite)?;
        let mut wtx = WriteTx::new(tx);
        let value = f(&mut wtx)?;
        let events = wtx.commit()?;
        self.inner.commits.fetch_add(1, Ordering::Relaxed);
        Ok((value, events))
    }

    /// How many write groups this store (and its clones) has committed
    /// since it was opened: each is one transaction, one fsync at
    /// [`Durability::Full`]. Lease renewals by the heartbeat are not write
    /// groups and are not counted.
    ///
    /// ```
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// assert_eq!(store.commits(), 0);
    /// ```
    pub fn commits(&self) -> u64 {
        self.inner.commits.load(Ordering::Relaxed)
    }

    /// Runs `f` on the connection for reads.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = lock(&self.inner.conn);
        f(&conn)
    }
}
