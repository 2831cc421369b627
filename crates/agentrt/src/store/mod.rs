//! The store: every SQL statement of the runtime lives under this
//! module. It records what it is given, atomically, and refuses what breaks
//! a rule of the file; it knows nothing of agents, tools or policies.
//!
//! Writes go through [`Store::write`]: one IMMEDIATE transaction per write
//! group, whose events are returned only after the commit.
//!
//! The store reaches its engine through two backend-neutral traits,
//! [`ReadRows`] and [`GroupRows`](engine::GroupRows);
//! [`WriteTx`] and the public reads are the fronts over them. SQLite
//! (`store::sqlite`) is the engine inside the core; an engine outside it
//! (`agentrt-postgres`) is built from [`engine`], the one module that
//! exposes the store's internals.

mod backend;
mod batch;
mod calls;
mod chain_rows;
mod chained;
mod changes;
mod columns;
mod core_tables;
mod dialect;
mod digest;
pub mod engine;
mod export;
mod extension;
mod files;
mod group_rows;
mod heap;
mod lease;
mod open;
mod page;
mod read;
mod read_rows;
mod readers;
mod recheck_read;
mod run_filter;
mod run_record;
mod schema;
#[cfg(test)]
mod second_engine_tests;
mod sqlite;
mod tx;
pub(crate) mod verify_read;
mod watch;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};

use rusqlite::Connection;

use crate::clock::lock;
use crate::error::{Error, Result};
use crate::model::{Event, Run};

use backend::Backend;
use read_rows::{Cut, ReadRows};

pub use changes::{
    ApprovalChange, LeaseChange, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard,
};
pub use extension::{
    ColumnShape, ColumnType, Extension, ExtensionRow, ExtensionShape, ExtensionTable, IndexShape,
    RowOrder, RowQuery, ShapeChange, SqlValue, TableShape,
};
pub use heap::retain_freed_heap;
pub use page::{MAX_PAGE_TEXT, PAGE_READ_ROWS, PendingCount};
pub use read::Page;
pub use run_filter::RunFilter;
pub use run_record::{RecordCaps, RecordTotals, RunRecord};
pub use tx::WriteTx;

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
    /// The satellites' schemas this store writes (see [`Extension`]):
    /// [`Store::open_with`] applies their missing migrations and registers
    /// their tables; [`Store::open_existing_with`] requires them applied.
    /// Their tables are then written through [`WriteTx::insert_row`] and
    /// [`WriteTx::update_row`]. None by default.
    pub extensions: Vec<Extension>,
}

/// An open agentrt database. Cheap to clone; clones share one write
/// connection, its writer thread and a pool of read connections.
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    engine: Engine,
    /// Transactions and write groups committed through this handle and
    /// its clones.
    counters: Arc<writer::Counters>,
    /// The highest event seq known committed, by anyone.
    head: Arc<watch::Head>,
    /// The extension tables this store writes.
    extensions: Arc<extension::Registry>,
}

/// Where the rows are.
enum Engine {
    /// A SQLite file (or memory), the embedded default.
    Sqlite(Box<SqliteEngine>),
    /// An engine outside the core (see [`Backend`]).
    Backend(Arc<dyn Backend>),
}

/// Fields drop in order: the writer thread ends and the read connections
/// close before the write connection, whose close (the last one) folds the
/// write-ahead log back and removes the sidecar files.
struct SqliteEngine {
    /// The thread that runs async write groups, started on first use
    /// (`None` if it could not start).
    writer: OnceLock<Option<writer::Writer>>,
    /// Read connections of a writable file store.
    readers: Option<readers::Readers>,
    /// A second connection for lease heartbeats (file stores), opened on
    /// first use, so a long transaction on `conn` cannot starve them.
    heartbeat: Mutex<Option<Connection>>,
    /// The write connection (and, in memory, the only one).
    conn: Arc<Mutex<Connection>>,
    /// The file as resolved when it was opened (absolute, links followed):
    /// the heartbeat opens this file even if the working directory changes.
    file: Option<PathBuf>,
    path: Option<PathBuf>,
    read_only: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.inner.engine {
            Engine::Sqlite(db) => f
                .debug_struct("Store")
                .field("path", &db.path)
                .field("read_only", &db.read_only)
                .finish(),
            Engine::Backend(backend) => f
                .debug_struct("Store")
                .field("backend", &backend.describe())
                .finish(),
        }
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

    /// [`Store::open`] with options: with [`StoreOptions::extensions`],
    /// their missing migrations are applied in the same IMMEDIATE
    /// transaction as the core's, and refused as a whole when one breaks a
    /// rule of [`Extension`].
    ///
    /// ```
    /// use agentrt::store::{Extension, ExtensionTable};
    /// use agentrt::{Store, StoreOptions};
    ///
    /// const NONCES: Extension = Extension {
    ///     name: "nonces",
    ///     migrations: &[(1, "CREATE TABLE nonces_seen (nonce TEXT NOT NULL PRIMARY KEY,
    ///                        written_seq INTEGER NOT NULL DEFAULT 0)")],
    ///     tables: &[ExtensionTable { name: "nonces_seen", key_column: "nonce", columns: &["nonce"] }],
    /// };
    /// let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("agentrt.db");
    /// let options = StoreOptions { extensions: vec![NONCES], ..StoreOptions::default() };
    /// drop(Store::open_with(&path, options.clone())?);
    /// // Reopening applies nothing again; an opener that does not migrate
    /// // finds the extension at its version.
    /// drop(Store::open_with(&path, options.clone())?);
    /// let store = Store::open_existing_with(&path, true, options)?;
    /// assert_eq!(store.rows_where("nonces_seen", &[], 0)?.len(), 0);
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: StoreOptions) -> Result<Store> {
        let (conn, path, extensions) = open::open_or_create(path.as_ref(), &options)?;
        Ok(Store::wrap(conn, path, false, extensions))
    }

    /// Opens an existing database without creating or migrating it.
    ///
    /// Refuses a symbolic link, a file that is not regular, another schema
    /// version, unsafe permissions, and a database holding a trigger or a
    /// view. `read_only` never writes to the file or its permissions.
    pub fn open_existing(path: impl AsRef<Path>, read_only: bool) -> Result<Store> {
        Store::open_existing_with(path, read_only, StoreOptions::default())
    }

    /// [`Store::open_existing`] with options. Each of
    /// [`StoreOptions::extensions`] must already be at this build's version
    /// with the same migrations and tables (nothing is migrated):
    /// [`Error::ExtensionVersion`], [`Error::ExtensionMigrationChanged`] or
    /// [`Error::ExtensionSchema`] otherwise.
    pub fn open_existing_with(
        path: impl AsRef<Path>,
        read_only: bool,
        options: StoreOptions,
    ) -> Result<Store> {
        let (conn, extensions) = open::open_existing(path.as_ref(), read_only, &options)?;
        Ok(Store::wrap(
            conn,
            Some(path.as_ref().to_owned()),
            read_only,
            extensions,
        ))
    }

    fn wrap(
        conn: Connection,
        path: Option<PathBuf>,
        read_only: bool,
        extensions: extension::Registry,
    ) -> Store {
        let file = path.as_ref().and_then(|p| std::fs::canonicalize(p).ok());
        let readers = match (&file, read_only) {
            (Some(file), false) => Some(readers::Readers::new(file.clone())),
            _ => None,
        };
        Store::over(
            Engine::Sqlite(Box::new(SqliteEngine {
                conn: Arc::new(Mutex::new(conn)),
                writer: OnceLock::new(),
                readers,
                heartbeat: Mutex::new(None),
                file,
                path,
                read_only,
            })),
            extensions,
        )
    }

    /// A store over an engine outside the core (such as
    /// `agentrt-postgres`'s): the same groups, chain, reads and waits as
    /// on SQLite. The backend has created or migrated its own schema; the
    /// tables of [`StoreOptions::extensions`] are described from their
    /// SQLite migrations ([`Extension::shape`]) and handed to
    /// [`Backend::sync_extensions`], which creates, migrates or checks them.
    pub fn with_backend(backend: Arc<dyn Backend>, options: &StoreOptions) -> Result<Store> {
        extension::check_declarations(&options.extensions)?;
        let shapes = options
            .extensions
            .iter()
            .map(Extension::shape)
            .collect::<Result<Vec<_>>>()?;
        if !shapes.is_empty() {
            backend.sync_extensions(&shapes)?;
        }
        let registry = extension::Registry::of_shapes(&shapes)?;
        Ok(Store::over(Engine::Backend(backend), registry))
    }

    fn over(engine: Engine, extensions: extension::Registry) -> Store {
        Store {
            inner: Arc::new(StoreInner {
                engine,
                counters: Arc::default(),
                head: Arc::new(watch::Head::new()),
                extensions: Arc::new(extensions),
            }),
        }
    }

    /// The SQLite engine, or the error a SQLite-only operation gives on
    /// another engine.
    fn sqlite(&self, what: &str) -> Result<&SqliteEngine> {
        match &self.inner.engine {
            Engine::Sqlite(db) => Ok(db),
            Engine::Backend(backend) => Err(Error::Database {
                kind: crate::error::DatabaseErrorKind::Other,
                message: format!("{what} is not available on {} yet", backend.describe()),
            }),
        }
    }

    /// How hard this store's commits work to survive a crash of the
    /// machine, as its write connection is set (`PRAGMA synchronous`);
    /// `None` on a [`Backend`], whose server decides. (A store in memory
    /// has nothing to sync: it keeps SQLite's default.)
    ///
    /// ```
    /// use agentrt::{Durability, Store, StoreOptions};
    /// let dir = tempfile::tempdir().unwrap();
    /// let options = StoreOptions { durability: Durability::Normal, ..StoreOptions::default() };
    /// let store = Store::open_with(dir.path().join("runs.db"), options).unwrap();
    /// assert_eq!(store.durability(), Some(Durability::Normal));
    /// ```
    pub fn durability(&self) -> Option<Durability> {
        let Engine::Sqlite(db) = &self.inner.engine else {
            return None;
        };
        let level: i64 = lock(&db.conn)
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .ok()?;
        match level {
            1 => Some(Durability::Normal),
            2 => Some(Durability::Full),
            _ => None,
        }
    }

    /// The database path (`None` in memory and on a [`Backend`]).
    pub fn path(&self) -> Option<&Path> {
        match &self.inner.engine {
            Engine::Sqlite(db) => db.path.as_deref(),
            Engine::Backend(_) => None,
        }
    }

    /// Runs `f` in one IMMEDIATE transaction and commits if it returns
    /// `Ok`. Returns its value and the events it appended, which exist only
    /// once committed. An error or a panic in `f` rolls everything back and
    /// leaves the store usable.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut WriteTx<'_>) -> Result<T>,
    ) -> Result<(T, Vec<Event>)> {
        let (value, events) = match &self.inner.engine {
            Engine::Sqlite(db) => {
                let conn = lock(&db.conn);
                let tx = batch::Batch::begin(&conn)?;
                let done = {
                    let mut rows = sqlite::SqliteRows::new(tx.conn);
                    let mut wtx = WriteTx::new(&mut rows, &self.inner.extensions);
                    let value = f(&mut wtx)?;
                    (value, wtx.finish()?)
                };
                tx.commit()?;
                done
            }
            Engine::Backend(backend) => {
                let mut f = Some(f);
                let mut done = None;
                backend.write_group(&mut |rows| {
                    let f = f.take().ok_or_else(|| Error::Internal {
                        detail: "a backend ran a write group twice".into(),
                    })?;
                    let mut wtx = WriteTx::new(rows, &self.inner.extensions);
                    let value = f(&mut wtx)?;
                    done = Some((value, wtx.finish()?));
                    Ok(())
                })?;
                done.ok_or_else(|| Error::Internal {
                    detail: "a backend committed a write group it did not run".into(),
                })?
            }
        };
        self.committed_alone(&events);
        Ok((value, events))
    }

    /// Counts a group committed in a transaction of its own and announces
    /// its events to the store's waiters.
    fn committed_alone(&self, events: &[Event]) {
        let counters = &self.inner.counters;
        counters.transactions.fetch_add(1, Ordering::Relaxed);
        counters.groups.fetch_add(1, Ordering::Relaxed);
        self.inner.head.committed(events);
    }

    /// [`Store::write`] on a [`Backend`] through
    /// [`Backend::write_batched`]: the group may share a transaction with
    /// the groups other threads submit meanwhile.
    fn write_batched<T, F>(&self, f: F) -> Result<(T, Vec<Event>)>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        let Engine::Backend(backend) = &self.inner.engine else {
            return self.write(f);
        };
        let done = Arc::new(Mutex::new(None));
        let slot = Arc::clone(&done);
        let extensions = Arc::clone(&self.inner.extensions);
        backend.write_batched(Box::new(move |rows| {
            let mut wtx = WriteTx::new(rows, &extensions);
            let value = f(&mut wtx)?;
            let events = wtx.finish()?;
            *lock(&slot) = Some((value, events));
            Ok(())
        }))?;
        let (value, events) = lock(&done).take().ok_or_else(|| Error::Internal {
            detail: "a backend committed a write group it did not run".into(),
        })?;
        self.committed_alone(&events);
        Ok((value, events))
    }

    /// [`Store::write`] for async code: the group runs on the store's
    /// writer thread, never on the caller's executor, and is committed
    /// together with the groups submitted while the previous commit was in
    /// progress (one transaction, one fsync, each group in a savepoint of
    /// its own: a group that fails rolls back alone).
    ///
    /// The group stands even if the returned future is dropped before it
    /// completes. A panic in `f` rolls the group back and resumes in the
    /// caller.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// use agentrt::store::NewRun;
    /// use agentrt::{EventType, Store, Timestamp};
    /// let store = Store::open(":memory:").unwrap();
    /// let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    /// let (id, events) = store
    ///     .write_async(move |tx| {
    ///         tx.insert_run(&NewRun {
    ///             id: "r1",
    ///             goal: "g",
    ///             limits_json: "{}",
    ///             created_at: at,
    ///             lease_owner: "me",
    ///             lease_expires_at: at,
    ///         })?;
    ///         tx.append_event("r1", "", &at, EventType::RunCreated, "{}")?;
    ///         Ok("r1")
    ///     })
    ///     .await
    ///     .unwrap();
    /// assert_eq!((id, events.len(), events[0].seq), ("r1", 1, 1));
    /// assert_eq!(store.commits(), 1);
    /// # });
    /// ```
    pub async fn write_async<T, F>(&self, f: F) -> Result<(T, Vec<Event>)>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        if let Engine::Backend(_) = &self.inner.engine {
            return self.off_executor(move |store| store.write_batched(f)).await;
        }
        self.writer()?.write(f, None).await
    }

    /// [`Store::write_async`], then `after` with the group's value on the
    /// writer thread as soon as the batch committed: nothing written after
    /// the commit can be seen before `after` has run by work that runs
    /// between batches (`Store::with_run_between_batches`).
    pub(crate) async fn write_then<T, F>(
        &self,
        f: F,
        after: impl FnOnce(&T) + Send + 'static,
    ) -> Result<(T, Vec<Event>)>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        if let Engine::Backend(_) = &self.inner.engine {
            let written = self
                .off_executor(move |store| store.write_batched(f))
                .await?;
            after(&written.0);
            return Ok(written);
        }
        self.writer()?.write(f, Some(Box::new(after))).await
    }

    /// Reads run `run_id` on the writer thread between two batches and
    /// hands it to `f` there: the run as every group committed before it
    /// left it, with no group committing until `f` returns.
    pub(crate) async fn with_run_between_batches<T, F>(&self, run_id: String, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Run) -> Result<T> + Send + 'static,
    {
        if let Engine::Backend(_) = &self.inner.engine {
            // A group that writes nothing holds the chain as a batch
            // boundary does: no group commits until `f` returns.
            return self
                .off_executor(move |store| {
                    let mut f = Some(f);
                    let (value, _) = store.write(|tx| {
                        let run = tx.run(&run_id)?.ok_or_else(|| Error::NotFound {
                            what: "run",
                            id: run_id.clone(),
                        })?;
                        let f = f.take().ok_or_else(|| Error::Internal {
                            detail: "a run was read twice between batches".into(),
                        })?;
                        f(&run)
                    })?;
                    Ok(value)
                })
                .await;
        }
        self.writer()?
            .between(move |conn| {
                let run = sqlite::SqliteRows::new(conn)
                    .run(&run_id, Cut::Whole)?
                    .ok_or_else(|| Error::NotFound {
                        what: "run",
                        id: run_id.clone(),
                    })?;
                f(&run)
            })
            .await
    }

    fn writer(&self) -> Result<&writer::Writer> {
        let inner = &self.inner;
        let db = self.sqlite("the writer thread")?;
        db.writer
            .get_or_init(|| {
                writer::Writer::start(
                    Arc::clone(&db.conn),
                    Arc::clone(&inner.counters),
                    Arc::clone(&inner.head),
                    Arc::clone(&inner.extensions),
                )
                .ok()
            })
            .as_ref()
            .ok_or_else(|| Error::Internal {
                detail: "the store's writer thread could not start".into(),
            })
    }

    /// Waits until run `run_id` has an event after seq `after`, committed
    /// by this process or any other, or until `timeout` passes. Returns the
    /// run's latest seq, or `None` on timeout. Waiting costs no polling of
    /// its own: one poller per store notices other processes' commits
    /// within a few tens of milliseconds.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// let changed = store.wait_for_run("r1", 0, Duration::from_millis(10)).await.unwrap();
    /// assert_eq!(changed, None);
    /// # });
    /// ```
    pub async fn wait_for_run(
        &self,
        run_id: &str,
        after: i64,
        timeout: std::time::Duration,
    ) -> Result<Option<i64>> {
        let id = run_id.to_owned();
        self.wait_for_head(after, timeout, move |store| store.run_head(&id))
            .await
    }

    /// Waits until the store holds an event after seq `after`, of any run,
    /// committed by this process or another, or until `timeout` passes.
    /// Returns the latest seq, or `None` on timeout. Like
    /// [`Store::wait_for_run`], it sleeps on the store's change signal.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// let changed = store.wait_for_event(0, Duration::from_millis(10)).await.unwrap();
    /// assert_eq!(changed, None);
    /// # });
    /// ```
    pub async fn wait_for_event(
        &self,
        after: i64,
        timeout: std::time::Duration,
    ) -> Result<Option<i64>> {
        self.wait_for_head(after, timeout, |store| store.read(|rows| rows.last_seq()))
            .await
    }

    /// Waits until `head` (read off the executor) passes `after`, waking
    /// on the store's change signal; `None` once `timeout` passed.
    async fn wait_for_head(
        &self,
        after: i64,
        timeout: std::time::Duration,
        head: impl Fn(&Store) -> Result<i64> + Clone + Send + 'static,
    ) -> Result<Option<i64>> {
        let deadline = tokio::time::Instant::now() + timeout;
        // Subscribing may start the watcher (a file opened, a server
        // connected): off the executor, like every store call.
        let mut changes = self.off_executor(Store::subscribe_changes).await?;
        loop {
            let read = head.clone();
            let latest = self.off_executor(move |store| read(store)).await?;
            if latest > after {
                return Ok(Some(latest));
            }
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() {
                        return Err(Error::Internal { detail: "the store closed while waiting".into() });
                    }
                }
                () = tokio::time::sleep_until(deadline) => return Ok(None),
            }
        }
    }

    /// A receiver of the committed head, the watcher of other writers'
    /// commits started if none runs.
    fn subscribe_changes(&self) -> Result<tokio::sync::watch::Receiver<i64>> {
        match &self.inner.engine {
            Engine::Sqlite(db) => self.inner.head.subscribe(db.file.as_ref()),
            Engine::Backend(backend) => {
                let signal = backend::ChangeSignal::new(&self.inner.head);
                self.inner.head.subscribe_with(|| backend.watch(signal))
            }
        }
    }

    /// The seq of run `run_id`'s latest event (0 when it has none).
    pub(crate) fn run_head(&self, run_id: &str) -> Result<i64> {
        self.read(|rows| rows.run_head(run_id))
    }

    /// How many transactions this store (and its clones) has committed
    /// since it was opened: each is one fsync at [`Durability::Full`]. A
    /// transaction commits one write group, or several under group commit
    /// (see [`Store::write_groups`]). Lease renewals by the heartbeat are
    /// not counted.
    ///
    /// ```
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// assert_eq!(store.commits(), 0);
    /// ```
    pub fn commits(&self) -> u64 {
        self.inner.counters.transactions.load(Ordering::Relaxed)
    }

    /// How many write groups this store (and its clones) has committed
    /// since it was opened; never fewer than [`Store::commits`].
    ///
    /// ```
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// assert_eq!(store.write_groups(), 0);
    /// ```
    pub fn write_groups(&self) -> u64 {
        self.inner.counters.groups.load(Ordering::Relaxed)
    }

    /// Runs `f` with the engine's reads: on a pooled read connection of a
    /// writable file store (it does not wait for the writer), else on the
    /// connection. `f` only reads, so a backend may run it again (a
    /// connection lost before it answered); the last run's value counts.
    pub(crate) fn read<T>(&self, f: impl Fn(&dyn ReadRows) -> Result<T>) -> Result<T> {
        match &self.inner.engine {
            Engine::Sqlite(db) => db.read_conn(|conn| f(&sqlite::SqliteRows::new(conn))),
            Engine::Backend(backend) => {
                let mut value = None;
                backend.read(&mut |rows| {
                    value = Some(f(rows)?);
                    Ok(())
                })?;
                value.ok_or_else(|| Error::Internal {
                    detail: "a backend returned from a read it did not run".into(),
                })
            }
        }
    }
}

impl SqliteEngine {
    /// A read on the SQLite connection itself: a pooled read connection of
    /// a writable file store (it does not wait for the writer), else the
    /// connection.
    pub(crate) fn read_conn<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        match &self.readers {
            Some(readers) => readers.with(f),
            None => f(&lock(&self.conn)),
        }
    }
}

impl Store {
    /// Runs blocking store work (reads through the pool, a lease renewal)
    /// for async code: on one of the runtime's blocking threads, never on
    /// the caller's executor. A panic in `f` resumes in the caller.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// let store = agentrt::Store::open(":memory:").unwrap();
    /// let runs = store.off_executor(|store| store.list_runs(10, 0)).await.unwrap();
    /// assert!(runs.items.is_empty());
    /// # });
    /// ```
    pub async fn off_executor<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T> + Send + 'static,
    {
        let store = self.clone();
        blocking(move || f(&store)).await
    }
}

/// Runs `f` on one of the runtime's blocking threads; a panic in `f`
/// resumes in the caller.
async fn blocking<T, F>(f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) => match e.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(_) => Err(Error::Internal {
                detail: "the runtime shut down while the store worked".into(),
            }),
        },
    }
}
