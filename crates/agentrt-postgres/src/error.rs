//! PostgreSQL's errors as the core's, and what a database is called in
//! messages: never its password.

use std::path::PathBuf;

use agentrt::{DatabaseErrorKind, Error};
use tokio_postgres::error::SqlState;

/// A PostgreSQL error as the core's `Error::Database`, its kind from the
/// SQLSTATE class. The client's messages name the server's complaint,
/// never the connection string.
pub(crate) fn pg_error(e: &tokio_postgres::Error) -> Error {
    let kind = match e.code().map(SqlState::code) {
        Some(code) if code.starts_with("23") => DatabaseErrorKind::Constraint,
        Some("53100") => DatabaseErrorKind::Full,
        Some("25006") => DatabaseErrorKind::ReadOnly,
        Some("XX001" | "XX002") => DatabaseErrorKind::Corrupt,
        Some(code) if code.starts_with("08") || code.starts_with("58") => DatabaseErrorKind::Io,
        None if e.is_closed() => DatabaseErrorKind::Io,
        _ => DatabaseErrorKind::Other,
    };
    let message = match e.as_db_error() {
        Some(db) => format!("PostgreSQL: {}", db.message()),
        // The cause (a refused certificate, a reset connection) is in the
        // error's sources; none holds the connection string.
        None => format!("PostgreSQL: {}", agentrt::text::with_causes(e)),
    };
    Error::Database { kind, message }
}

/// Whether `e` says the connection is gone (closed, broken, or its session
/// ended by the server: an administrator, a shutdown), even before the
/// client has noticed the end of the stream.
pub(crate) fn connection_gone(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || e.code().is_some_and(|code| {
            let code = code.code();
            code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03")
        })
}

/// Whether a transaction failed in a way that running it again cures: a
/// serialization failure or a deadlock the server broke.
pub(crate) fn is_retryable(e: &tokio_postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE || *c == SqlState::T_R_DEADLOCK_DETECTED
    )
}

/// How a database is named in messages: host, port, database and user,
/// never the password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Describe {
    text: String,
    url: String,
}

impl Describe {
    /// The name of the database `config` connects to.
    pub(crate) fn of(config: &tokio_postgres::Config) -> Describe {
        let host = config
            .get_hosts()
            .first()
            .map(|h| match h {
                tokio_postgres::config::Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .unwrap_or_else(|| "localhost".into());
        let port = config.get_ports().first().copied().unwrap_or(5432);
        let db = config
            .get_dbname()
            .or(config.get_user())
            .unwrap_or("postgres");
        let shown_user = config.get_user().unwrap_or("(default user)");
        // A unix socket's directory goes in the host part percent-encoded.
        let url_host: String = host
            .chars()
            .map(|c| match c {
                '/' => "%2F".to_owned(),
                c => c.to_string(),
            })
            .collect();
        let url = match config.get_user() {
            Some(user) => format!("postgres://{user}@{url_host}:{port}/{db}"),
            None => format!("postgres://{url_host}:{port}/{db}"),
        };
        Describe {
            text: format!("PostgreSQL database {db:?} on {host}:{port} as {shown_user:?}"),
            url,
        }
    }

    /// The database as a `postgres://` URL without a password.
    pub(crate) fn url(&self) -> String {
        self.url.clone()
    }

    /// The core's error for a database at another schema version.
    pub(crate) fn schema_version(&self, database: i64, build: i64) -> Error {
        Error::SchemaVersion {
            path: PathBuf::from(&self.text),
            database,
            build,
        }
    }
}

impl std::fmt::Display for Describe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}
