//! The engines a scenario runs on, and a fresh database for each test.
//! Shared with the CLI's, the approver's and the proxy's PostgreSQL tests
//! (`#[path]`), each of which uses part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};

use agentrt::Store;

/// Where a test's store lives: its engine's name, and how to open another
/// handle on the same database (another host, for PostgreSQL).
pub struct Backend {
    pub name: &'static str,
    pub location: String,
    _dir: Option<tempfile::TempDir>,
}

impl Backend {
    /// A fresh SQLite file.
    pub fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let location = dir.path().join("agentrt.db").display().to_string();
        Backend {
            name: "sqlite",
            location,
            _dir: Some(dir),
        }
    }

    /// A fresh PostgreSQL database on the test server.
    pub fn postgres() -> Backend {
        Backend {
            name: "postgres",
            location: fresh_database(),
            _dir: None,
        }
    }

    /// Opens (creating or migrating) a store on it.
    pub fn open(&self) -> Store {
        if self.name == "postgres" {
            agentrt_postgres::open(&self.location).unwrap()
        } else {
            Store::open(&self.location).unwrap()
        }
    }
}

/// Both engines, SQLite first.
pub fn each() -> [Backend; 2] {
    [Backend::sqlite(), Backend::postgres()]
}

/// The test server's connection string.
pub fn server() -> String {
    std::env::var("AGENTRT_TEST_POSTGRES").expect(
        "AGENTRT_TEST_POSTGRES is not set: run these tests with \
         `cargo xtask postgres -- cargo test -p agentrt-postgres --features real-postgres`",
    )
}

/// A raw client on the database `location` names, for what the store
/// does not show (links, schema rows).
pub fn client(location: &str) -> postgres::Client {
    location
        .parse::<postgres::Config>()
        .unwrap()
        .connect(postgres::NoTls)
        .unwrap()
}

/// Runs `f` on a thread of its own: the synchronous client starts a
/// runtime of its own, which it may not do on an async test's thread.
pub fn on_plain_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|scope| scope.spawn(f).join().unwrap())
}

/// Creates an empty database and returns a connection string naming it.
pub fn fresh_database() -> String {
    let name = database_name();
    on_plain_thread(|| create_database(&name));
    location(&name)
}

/// A database name no other test of this process uses.
pub fn database_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "agentrt_test_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The connection string of database `name` on the test server.
pub fn location(name: &str) -> String {
    format!("{} dbname={name}", server())
}

/// A password every [`url`] carries: the test server accepts any, and no
/// output of the program under test may show it.
pub const PASSWORD: &str = "s3cret-Pa55";

/// One setting of the test server's key=value pairs (`""` if absent).
pub fn setting(key: &str) -> String {
    server()
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_owned())
        .unwrap_or_default()
}

/// A `postgres://` URL for database `name` on the test server, as a user
/// passes one: with [`PASSWORD`], a unix socket's directory
/// percent-encoded as the host.
pub fn url(name: &str) -> String {
    let host = setting("host").replace('/', "%2F");
    format!(
        "postgres://{}:{PASSWORD}@{host}:{}/{name}",
        setting("user"),
        setting("port")
    )
}

/// The test server over TLS on loopback (libpq pairs: `host=localhost`,
/// its port, `sslmode=verify-full`, `sslrootcert=` its CA).
pub fn tls_server() -> String {
    std::env::var("AGENTRT_TEST_POSTGRES_TLS").expect(
        "AGENTRT_TEST_POSTGRES_TLS is not set: run these tests with \
         `cargo xtask postgres -- cargo test -p agentrt-postgres --features real-postgres`",
    )
}

/// A `postgres://` URL for database `name` over TLS, as a user passes
/// one: with [`PASSWORD`], `sslmode=verify-full` and the test server's CA
/// as `sslrootcert`.
pub fn tls_url(name: &str) -> String {
    let tls = tls_server();
    let pair = |key: &str| {
        tls.split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.to_owned())
            .unwrap_or_default()
    };
    format!(
        "postgres://{}:{PASSWORD}@{}:{}/{name}?sslmode=verify-full&sslrootcert={}",
        pair("user"),
        pair("host"),
        pair("port"),
        pair("sslrootcert")
    )
}

/// Creates an empty database; returns its name.
pub fn fresh_database_name() -> String {
    let name = database_name();
    on_plain_thread(|| create_database(&name));
    name
}

/// A write group creating run `id` (no lease) with its first event.
pub fn created_run(
    id: &'static str,
) -> impl Fn(&mut agentrt::store::WriteTx<'_>) -> agentrt::Result<()> {
    let at = agentrt::Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    move |tx| {
        tx.insert_run(&agentrt::store::NewRun {
            id,
            goal: "g",
            limits_json: "{}",
            created_at: at,
            lease_owner: "",
            lease_expires_at: at,
        })?;
        tx.append_event(id, "", &at, agentrt::EventType::RunCreated, "{}")
    }
}

/// A write group moving run `id`'s step count from `from` (guarded: a
/// RUNNING run at that count) with an event.
pub fn stepped_run(
    id: &'static str,
    from: u64,
) -> impl Fn(&mut agentrt::store::WriteTx<'_>) -> agentrt::Result<()> {
    let at = agentrt::Timestamp::parse("2026-10-01T09:00:01Z").unwrap();
    move |tx| {
        let guard = agentrt::store::RunGuard {
            statuses: &[agentrt::RunStatus::Running],
            step_count: Some(from),
            ..agentrt::store::RunGuard::default()
        };
        let change = agentrt::store::RunChange {
            step_count_add: 1,
            ..agentrt::store::RunChange::default()
        };
        assert!(tx.update_run(id, &guard, &change)?, "the guard held");
        tx.append_event(id, "", &at, agentrt::EventType::StepStarted, "{}")
    }
}

/// Creates the empty database `name` on the test server.
pub fn create_database(name: &str) {
    let mut admin = client(&server());
    // Two statements: neither may run inside a transaction block.
    admin
        .batch_execute(&format!("DROP DATABASE IF EXISTS {name}"))
        .unwrap();
    admin
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .unwrap();
}
