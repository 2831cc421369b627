//! Opening the database: only an existing one, through the core's
//! `Store::open_existing` (or agentrt-postgres's `open_existing`, which
//! neither creates nor migrates a schema), with each refusal turned into
//! one clear message chosen by the error's variant (never by its text).

use std::path::Path;

use agentrt::text::sanitize;
use agentrt::{Error, Store};

use crate::database::Database;
use crate::error::CliError;

/// How a command uses the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `runs`, `show`, `events`: never writes, works on a 0444 file.
    ReadOnly,
    /// `approve`, `reject`, `cancel`.
    ReadWrite,
}

/// Opens the database `db`.
pub fn open(db: &Database, access: Access) -> Result<Store, CliError> {
    match db {
        Database::File(path) => {
            Store::open_existing(path, access == Access::ReadOnly).map_err(|e| refusal(path, e))
        }
        Database::Postgres(url) => open_postgres(url, db),
    }
}

/// A PostgreSQL database has no read-only handle: a reading command writes
/// nothing all the same. Its errors never carry the password.
#[cfg(feature = "postgres")]
fn open_postgres(url: &str, db: &Database) -> Result<Store, CliError> {
    agentrt_postgres::open_existing(url).map_err(|e| refusal(Path::new(&db.shown()), e))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_: &str, db: &Database) -> Result<Store, CliError> {
    Err(CliError::Failed(format!(
        "{} is a PostgreSQL database, and this agentrt was built without PostgreSQL (the `postgres` feature)",
        db.shown()
    )))
}

fn shown(path: &Path) -> String {
    sanitize(&path.to_string_lossy())
}

/// The message for an open that failed.
pub fn refusal(path: &Path, e: Error) -> CliError {
    let message = match &e {
        Error::SchemaVersion {
            path: p,
            database,
            build,
        } => {
            let p = shown(p);
            let side = if database > build {
                format!(
                    "{p} is newer than this build of agentrt: it is at schema version {database}, this build reads version {build}; use an agentrt built for version {database}"
                )
            } else {
                format!(
                    "this build of agentrt is newer than {p}: it reads schema version {build}, the database is at version {database}"
                )
            };
            format!(
                "{e}\n{side}\nagentrt never migrates a database: the consumer that owns it (the program that runs its agents) is responsible for its migrations"
            )
        }
        Error::InsecureMode {
            path: p,
            mode,
            reason,
        } => {
            let p = shown(p);
            if mode & 0o022 != 0 {
                format!(
                    "{p} is writable by group or others (mode {mode:04o}); whoever can write the database can approve anything, so agentrt refuses it; fix it with: chmod 600 {p}"
                )
            } else {
                format!("{p} {reason} (mode {mode:04o}); agentrt refuses it")
            }
        }
        Error::UnsafeSchema {
            path: p,
            kind,
            name,
        } => format!(
            "{} contains the {kind} {name:?}: agentrt refuses a database holding a trigger or view, because it could change what agentrt reads and writes",
            shown(p)
        ),
        Error::Symlink { path: p } => format!(
            "{} is a symbolic link: agentrt refuses it; open the file it points to by its own path",
            shown(p)
        ),
        Error::NotRegular { path: p } => {
            format!("{} is not a regular file: agentrt refuses it", shown(p))
        }
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => format!(
            "no database at {}: the file does not exist (agentrt never creates a database)",
            shown(path)
        ),
        _ => e.to_string(),
    };
    CliError::Failed(message)
}
