//! agentrt's store on PostgreSQL: the runs, steps, approvals, leases and
//! hash-chained log of the embedded SQLite store, in one database that
//! several hosts share.
//!
//! [`open`] connects, creates or migrates the schema, and returns the
//! core's own [`Store`]: the gate, the Driver, the operator and `verify`'s
//! callers use it as they use a SQLite store. The guarantees are SQLite's
//! (`docs/postgres.md`):
//!
//! - every write group is one transaction (or a savepoint of one its
//!   process shares with the groups submitted at the same time) whose
//!   guards (lease, compare and set, grant, budget) are checked inside it,
//!   committed whole or not at all;
//! - the events of every host keep one total order and one unbroken hash
//!   chain: each transaction locks the single chain head row first, so
//!   transactions queue on it;
//! - waiting for a run or for any event wakes on `LISTEN`/`NOTIFY`, not on
//!   polling;
//! - the schema is versioned like SQLite's, and a newer one is refused;
//! - satellites' extension tables (`PgOptions::store.extensions`) are
//!   created and migrated from the description of their SQLite migrations
//!   (the core's `Extension::shape`): a satellite declares its schema once.
//!
//! Across a network, `sslmode=verify-full` (or `require`, `verify-ca`:
//! all three verify the server's certificate and name) with
//! `sslrootcert=PATH` for a private CA asks for TLS; without `sslmode`,
//! connections are plain (a unix socket's case).
//!
//! ```no_run
//! let store = agentrt_postgres::open("postgres://agentrt@db.internal/agentrt")?;
//! println!("{} runs", store.list_runs(0, 0)?.total);
//! # Ok::<(), agentrt::Error>(())
//! ```

mod backend;
mod batch;
#[cfg(all(test, feature = "real-postgres"))]
mod batch_server_tests;
// The real-server suite's helpers, which the unit tests share, name this
// crate as a dependent does.
#[cfg(all(test, feature = "real-postgres"))]
extern crate self as agentrt_postgres;
mod chain_read;
mod copy;
mod dialect;
mod endpoint;
mod error;
mod extension_rows;
mod extensions;
mod group;
mod listener;
mod pool;
mod read;
mod rows;
#[cfg(all(test, feature = "real-postgres"))]
mod rows_server_tests;
mod runtime;
pub mod schema;

use std::str::FromStr;
use std::sync::Arc;

use agentrt::{DatabaseErrorKind, Error, Result, Store, StoreOptions};

pub use crate::copy::{CopyReport, copy_from};

use crate::backend::PgBackend;
use crate::endpoint::Endpoint;
use crate::error::Describe;
use crate::pool::Pool;
use crate::runtime::IoRuntime;

/// How many connections a store keeps at most, by default.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// How long a call waits for a connection of a busy pool, by default.
pub const DEFAULT_POOL_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long the server lets a transaction of the store sit idle before it
/// ends the session, by default (see [`PgOptions::idle_transaction_timeout`]).
pub const DEFAULT_IDLE_TRANSACTION_TIMEOUT: std::time::Duration =
    std::time::Duration::from_secs(10);

/// How long the server may stay silent at the network level before the
/// store gives up on a connection, by default (see
/// [`PgOptions::network_timeout`]).
pub const DEFAULT_NETWORK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How to open a store on PostgreSQL.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// The core's options; a satellite's extensions get their tables here
    /// too, created from their SQLite migrations' description.
    pub store: StoreOptions,
    /// The most connections the store opens (default
    /// [`DEFAULT_POOL_SIZE`]); a caller waits when all are busy.
    pub pool_size: usize,
    /// The longest a caller waits for a connection when all are in use
    /// (default [`DEFAULT_POOL_WAIT`]); then the call fails with
    /// [`Error::DatabaseLocked`], as a SQLite store's does after its busy
    /// timeout.
    pub pool_wait: std::time::Duration,
    /// How long the server lets a transaction of this store sit idle, no
    /// request in flight, before it ends the session (PostgreSQL's
    /// `idle_in_transaction_session_timeout`, set for the store's
    /// sessions; default [`DEFAULT_IDLE_TRANSACTION_TIMEOUT`]). Every write
    /// group holds the chain head's lock until it ends, so a host that
    /// stops in the middle of one (paused, cut off, frozen) would stall
    /// every host until its connection died; with this, it stalls them at
    /// most this long, and its group fails whole. A store's groups wait on
    /// nothing but their own process between requests. `None` leaves the
    /// server's setting.
    pub idle_transaction_timeout: Option<std::time::Duration>,
    /// How long the server may stay silent at the network level (a
    /// partition, a host gone, a frozen server) before the store gives up
    /// on a connection, where TCP alone waits minutes to hours (default
    /// [`DEFAULT_NETWORK_TIMEOUT`]): connecting fails after it; over TCP,
    /// a request whose bytes the server has not acknowledged for it fails
    /// (`TCP_USER_TIMEOUT`) and idle connections are probed (keepalives);
    /// the connection that listens for other hosts' commits asks the server
    /// for an answer every half of it and is replaced when none comes, so
    /// waiters keep waking after the path heals. A slow answer to a request
    /// the server received (a lock wait) is never cut short. The
    /// connection string's own positive `connect_timeout`,
    /// `tcp_user_timeout` and `keepalives_*` (seconds, as tokio-postgres
    /// reads them) win. `None`: the system's TCP settings alone.
    pub network_timeout: Option<std::time::Duration>,
    /// Create or migrate the schema (default `true`). `false` opens only a
    /// database already at this build's schema version and writes nothing
    /// to it on opening ([`open_existing`]).
    pub migrate: bool,
}

impl Default for PgOptions {
    fn default() -> PgOptions {
        PgOptions {
            store: StoreOptions::default(),
            pool_size: DEFAULT_POOL_SIZE,
            pool_wait: DEFAULT_POOL_WAIT,
            idle_transaction_timeout: Some(DEFAULT_IDLE_TRANSACTION_TIMEOUT),
            network_timeout: Some(DEFAULT_NETWORK_TIMEOUT),
            migrate: true,
        }
    }
}

/// How many requests (statements, `BEGIN`, `COMMIT`: each one round trip
/// to the server) the stores of this process have sent so far: a
/// diagnostic for benchmarks and monitoring, counted at almost no cost.
pub fn round_trips() -> u64 {
    runtime::round_trips()
}

/// Whether `location` names a PostgreSQL database (`postgres://…` or
/// `postgresql://…`) rather than a SQLite file.
///
/// ```
/// assert!(agentrt_postgres::is_postgres_url("postgres://db/agentrt"));
/// assert!(!agentrt_postgres::is_postgres_url("agentrt.db"));
/// ```
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// Opens the store in the PostgreSQL database `url` (a `postgres://` URL
/// or libpq's `key=value` form), creating or migrating its schema.
///
/// Errors never show the connection string's password.
pub fn open(url: &str) -> Result<Store> {
    open_with(url, PgOptions::default())
}

/// Opens the store in a database whose schema some program already created
/// at this build's version, without creating or migrating anything (as
/// the SQLite store's `Store::open_existing`): an operator's tool never
/// changes the schema under the programs that own it. A database without
/// the schema, or at another version, is refused with
/// [`Error::SchemaVersion`] (version 0: no schema).
pub fn open_existing(url: &str) -> Result<Store> {
    open_with(
        url,
        PgOptions {
            migrate: false,
            ..PgOptions::default()
        },
    )
}

/// A connection string as it may be shown: a `postgres://` URL with the
/// user, host, port and database, never the password or other parameters.
///
/// ```
/// assert_eq!(
///     agentrt_postgres::redacted("postgres://ops:s3cret@db.internal:5433/agentrt"),
///     "postgres://ops@db.internal:5433/agentrt"
/// );
/// assert_eq!(
///     agentrt_postgres::redacted("postgres://ops:s3cret@db/agentrt?sslmode=verify-full&sslrootcert=/ca.pem"),
///     "postgres://ops@db:5432/agentrt"
/// );
/// assert_eq!(agentrt_postgres::redacted("not a url"), "a PostgreSQL database");
/// ```
pub fn redacted(url: &str) -> String {
    endpoint::split(url)
        .ok()
        .and_then(|(rest, _)| tokio_postgres::Config::from_str(&rest).ok())
        .map_or_else(
            || "a PostgreSQL database".to_owned(),
            |config| Describe::of(&config).url(),
        )
}

/// [`open`] with options.
pub fn open_with(url: &str, options: PgOptions) -> Result<Store> {
    let backend = backend(url, &options)?;
    Store::with_backend(Arc::new(backend), &options.store)
}

/// The engine on the database at `url`, its schema checked or migrated.
pub(crate) fn backend(url: &str, options: &PgOptions) -> Result<PgBackend> {
    let Connected {
        endpoint,
        about,
        runtime,
        conn: first,
    } = connect(url, options)?;
    let backend = PgBackend {
        pool: Pool::new(
            endpoint.clone(),
            Arc::clone(&runtime),
            options.pool_size,
            options.pool_wait,
            first,
        ),
        endpoint,
        runtime,
        about,
        batcher: batch::Batcher::default(),
        migrate: options.migrate,
        extensions: std::sync::OnceLock::new(),
    };
    Ok(backend)
}

/// A first connection to a database whose schema was checked or migrated.
pub(crate) struct Connected {
    pub(crate) endpoint: Endpoint,
    pub(crate) about: Describe,
    pub(crate) runtime: Arc<IoRuntime>,
    pub(crate) conn: pool::Conn,
}

/// Connects to `url` on a runtime of its own, with the `options`'
/// session and network limits; creates or migrates the schema when
/// `options.migrate`, else checks that it is at this build's version.
pub(crate) fn connect(url: &str, options: &PgOptions) -> Result<Connected> {
    let mut endpoint = Endpoint::parse(url)?;
    if let Some(timeout) = options.idle_transaction_timeout {
        endpoint.end_idle_transactions_after(timeout);
    }
    if let Some(limit) = options.network_timeout {
        endpoint.give_up_on_silence_after(limit);
    }
    let migrate = options.migrate;
    let about = Describe::of(&endpoint.config);
    let runtime = Arc::new(IoRuntime::start()?);
    let mut conn = Pool::connect(&runtime, &endpoint).map_err(|e| with_database(e, &about))?;
    if migrate {
        let applied_at = agentrt::Timestamp::now().to_string();
        schema::migrate(&mut conn.client, &about, &applied_at)?;
    } else {
        schema::check(&mut conn.client, &about)?;
    }
    Ok(Connected {
        endpoint,
        about,
        runtime,
        conn,
    })
}

/// The error for a connection string that does not parse. The parser's
/// message may quote the string, password and all: it is not shown.
pub(crate) fn not_a_url() -> Error {
    Error::Database {
        kind: DatabaseErrorKind::Other,
        message: "not a PostgreSQL connection string (postgres://user@host/db or key=value pairs)"
            .into(),
    }
}

/// `e` naming the database it came from.
pub(crate) fn with_database(e: Error, about: &Describe) -> Error {
    match e {
        Error::Database { kind, message } => Error::Database {
            kind,
            message: format!("{about}: {message}"),
        },
        other => other,
    }
}
