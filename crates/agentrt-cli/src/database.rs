//! Which database a command works on: a SQLite file, or a PostgreSQL
//! database named by a `postgres://` URL. A URL is only ever shown without
//! its password.

use std::ffi::OsString;
use std::path::PathBuf;

/// The database of `--db` or `$AGENTRT_DB`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Database {
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL connection URL (`postgres://` or `postgresql://`),
    /// password and all: never shown as given.
    Postgres(String),
}

impl Database {
    /// `--db`'s text: a `postgres://` or `postgresql://` URL names a
    /// PostgreSQL database, anything else a file.
    pub fn parse(text: OsString) -> Database {
        match text.to_str() {
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Database::Postgres(url.to_owned())
            }
            _ => Database::File(PathBuf::from(text)),
        }
    }

    /// The database as it may be shown: a file's path, or the URL without
    /// its password.
    pub fn shown(&self) -> String {
        match self {
            Database::File(path) => path.to_string_lossy().into_owned(),
            Database::Postgres(url) => redacted(url),
        }
    }
}

#[cfg(feature = "postgres")]
fn redacted(url: &str) -> String {
    agentrt_postgres::redacted(url)
}

#[cfg(not(feature = "postgres"))]
fn redacted(_: &str) -> String {
    "a PostgreSQL database".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_names_a_server_and_anything_else_a_file() {
        assert_eq!(
            Database::parse("postgres://ops@db/agentrt".into()),
            Database::Postgres("postgres://ops@db/agentrt".into())
        );
        assert!(matches!(
            Database::parse("postgresql://db/agentrt".into()),
            Database::Postgres(_)
        ));
        assert_eq!(
            Database::parse("postgres.db".into()),
            Database::File(PathBuf::from("postgres.db"))
        );
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn a_url_is_shown_without_its_password() {
        let db = Database::parse("postgres://ops:s3cret@db.internal/agentrt".into());
        assert_eq!(db.shown(), "postgres://ops@db.internal:5432/agentrt");
        assert!(!db.shown().contains("s3cret"));
    }
}
