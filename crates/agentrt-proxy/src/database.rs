//! Where the proxy keeps its runs and its call index: a SQLite file, or,
//! with the `postgres` feature (on by default), a PostgreSQL database that
//! several proxies, the approver and the CLI share across machines. A
//! database URL is never shown with its password.

use std::fmt;
use std::path::{Path, PathBuf};

use agentrt::{Store, StoreOptions};

use crate::error::ProxyError;

/// The configured database.
#[derive(Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file, resolved against the configuration file's directory.
    File(PathBuf),
    /// A PostgreSQL database, by its `postgres://` URL as configured.
    Postgres(String),
}

/// Whether `text` names a PostgreSQL database (`postgres://…` or
/// `postgresql://…`) rather than a file.
pub(crate) fn is_postgres_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

impl Database {
    /// The SQLite file, if it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Database::File(path) => Some(path),
            Database::Postgres(_) => None,
        }
    }

    /// The database as it may be shown: the file's path, or the URL
    /// without its password.
    ///
    /// ```
    /// use agentrt_proxy::Database;
    ///
    /// let db = Database::Postgres("postgres://ops:s3cret@db.internal/agentrt".into());
    /// assert_eq!(db.shown(), "postgres://ops@db.internal:5432/agentrt");
    /// assert_eq!(Database::File("/srv/p.db".into()).shown(), "/srv/p.db");
    /// ```
    pub fn shown(&self) -> String {
        match self {
            Database::File(path) => path.display().to_string(),
            Database::Postgres(url) => shown_url(url),
        }
    }

    /// The error of using the database for `detail`.
    pub(crate) fn error(&self, detail: String) -> ProxyError {
        ProxyError::Database {
            path: PathBuf::from(self.shown()),
            detail,
        }
    }

    /// Opens (creating or migrating, when `migrate`) the store with
    /// `options`. Blocking: call it off the async executor. A file is
    /// opened by the caller's own rules; this opens PostgreSQL.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    pub(crate) fn open_postgres(
        url: &str,
        options: StoreOptions,
        migrate: bool,
    ) -> agentrt::Result<Store> {
        #[cfg(feature = "postgres")]
        {
            agentrt_postgres::open_with(
                url,
                agentrt_postgres::PgOptions {
                    store: options,
                    migrate,
                    ..agentrt_postgres::PgOptions::default()
                },
            )
        }
        #[cfg(not(feature = "postgres"))]
        Err(agentrt::Error::Database {
            kind: agentrt::DatabaseErrorKind::Other,
            message: format!("{}: {NO_POSTGRES}", shown_url(url)),
        })
    }
}

/// Why a build without the `postgres` feature refuses a URL.
#[cfg(not(feature = "postgres"))]
const NO_POSTGRES: &str = "this build of agentrt-proxy has no PostgreSQL support (build it with the feature \"postgres\")";

#[cfg(feature = "postgres")]
fn shown_url(url: &str) -> String {
    agentrt_postgres::redacted(url)
}

#[cfg(not(feature = "postgres"))]
fn shown_url(_url: &str) -> String {
    "a PostgreSQL database".to_owned()
}

impl fmt::Display for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// The password never shows, not even in `Debug`.
impl fmt::Debug for Database {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Database::File(path) => f.debug_tuple("File").field(path).finish(),
            Database::Postgres(_) => f.debug_tuple("Postgres").field(&self.shown()).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_and_debugged_without_its_password() {
        let db = Database::Postgres("postgres://ops:s3cret@db.internal:5433/runs".into());
        assert!(!db.shown().contains("s3cret"));
        assert!(!format!("{db:?}").contains("s3cret"));
        assert!(!db.to_string().contains("s3cret"));
        assert!(!db.error("x".into()).to_string().contains("s3cret"));
        assert!(is_postgres_url("postgresql://h/d"));
        assert!(!is_postgres_url("proxy.db"));
    }
}
