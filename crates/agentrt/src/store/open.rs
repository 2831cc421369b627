//! Opening a database: file rules, connection settings, migrations.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags, config::DbConfig};

use super::extension::{self, DdlGuard, Registry};
use super::schema::{META, MIGRATIONS, SCHEMA_VERSION};
use super::{Durability, StoreOptions, files};
use crate::clock::Timestamp;
use crate::error::{Error, Result};

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Opens (creating and migrating as needed) a database for writing, with
/// the extensions of `options` migrated and registered.
pub(super) fn open_or_create(
    path: &Path,
    options: &StoreOptions,
) -> Result<(Connection, Option<PathBuf>, Registry)> {
    if path.as_os_str() == ":memory:" {
        let mut conn = Connection::open_in_memory().map_err(Error::from_sqlite)?;
        configure(&conn)?;
        refuse_unsafe_schema(&conn, path)?;
        let registry = migrate(&mut conn, path, options)?;
        check_meta(&conn, path)?;
        return Ok((conn, None, registry));
    }
    if std::fs::metadata(path).is_err() {
        files::create_private(path)?;
    }
    // This opener follows a symbolic link, and so does SQLite, which keeps
    // the sidecars next to the file the link names: check and open that.
    let file = resolve_link(path)?;
    // Refuse before anything else; tighten only once the file is accepted.
    files::check(&file, true, false)?;
    let mut conn = Connection::open_with_flags(
        sqlite_path(&file),
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(&file, e))?;
    configure(&conn)?;
    refuse_unsafe_schema(&conn, &file)?;
    enable_wal(&conn)?;
    set_durability(&conn, options.durability)?;
    let registry = migrate(&mut conn, &file, options)?;
    check_meta(&conn, &file)?;
    files::check(&file, true, true)?;
    Ok((conn, Some(path.to_owned()), registry))
}

/// The file a symbolic link at `path` leads to (`path` itself if it is no
/// link).
fn resolve_link(path: &Path) -> Result<PathBuf> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| Error::io(path, e))?;
    if meta.file_type().is_symlink() {
        std::fs::canonicalize(path).map_err(|e| Error::io(path, e))
    } else {
        Ok(path.to_owned())
    }
}

/// The name to hand SQLite for a file path. SQLite reads a name starting
/// with `file:` as a URI and `:memory:` as no file at all; a relative path
/// gets a leading `./`, so every path names its file.
fn sqlite_path(path: &Path) -> PathBuf {
    if path.is_relative() {
        Path::new(".").join(path)
    } else {
        path.to_owned()
    }
}

/// Opens an existing database at this build's schema version, with the
/// extensions of `options` at theirs.
pub(super) fn open_existing(
    path: &Path,
    read_only: bool,
    options: &StoreOptions,
) -> Result<(Connection, Registry)> {
    // Refuse before anything else; a writer tightens the files only once
    // the database is accepted, so a refused file keeps its permissions.
    files::check(path, false, false)?;
    let conn = if read_only {
        open_read_only(path)?
    } else {
        let conn = Connection::open_with_flags(
            sqlite_path(path),
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| open_error(path, e))?;
        configure(&conn)?;
        refuse_unsafe_schema(&conn, path)?;
        conn
    };
    check_version(&conn, path)?;
    let registry = if options.extensions.is_empty() {
        Registry::default()
    } else {
        // One read transaction: the extensions are judged on one state.
        let tx = conn.unchecked_transaction().map_err(Error::from_sqlite)?;
        let registry = extension::sync(&tx, path, &options.extensions, None)?;
        tx.rollback().map_err(Error::from_sqlite)?;
        registry
    };
    if !read_only {
        enable_wal(&conn)?;
        set_durability(&conn, options.durability)?;
        files::check(path, false, true)?;
    }
    Ok((conn, registry))
}

/// A read-only connection. A WAL database in a directory this process
/// cannot write (no `-shm` can be made) is opened `immutable`, which reads
/// the main file as it is, without any locking or sidecar. That reads every
/// commit only while the write-ahead log holds none: with a non-empty
/// `-wal` the open is refused rather than showing an older state.
fn open_read_only(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    // The first statement that touches the file tells whether it needs
    // the immutable fallback.
    let first = Connection::open_with_flags(sqlite_path(path), flags).and_then(|conn| {
        configure_connection(&conn)?;
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |_| Ok(()))?;
        Ok(conn)
    });
    match first {
        Ok(conn) => {
            refuse_unsafe_schema(&conn, path)?;
            Ok(conn)
        }
        Err(e) if needs_immutable(&e) => {
            refuse_unread_wal(path, &e)?;
            let uri = immutable_uri(path);
            let conn = Connection::open_with_flags(&uri, flags | OpenFlags::SQLITE_OPEN_URI)
                .map_err(|e| open_error(path, e))?;
            configure(&conn)?;
            refuse_unsafe_schema(&conn, path)?;
            Ok(conn)
        }
        Err(e) => Err(open_error(path, e)),
    }
}

/// Frames start after the 32-byte WAL header: a log no longer than that
/// holds no commit.
const WAL_HEADER_LEN: u64 = 32;

/// Refuses the immutable fallback while the `-wal` holds commits that an
/// immutable read would silently leave out.
fn refuse_unread_wal(path: &Path, cause: &rusqlite::Error) -> Result<()> {
    let [wal, shm] = files::sidecars(path);
    match std::fs::symlink_metadata(&wal) {
        Ok(m) if m.len() > WAL_HEADER_LEN => Err(Error::io(
            shm,
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "{} holds commits not yet in the database, and reading them needs this \
                     shared-memory file, which this process cannot open or create ({cause}); \
                     open the database as a user who can write its directory",
                    wal.display()
                ),
            ),
        )),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(wal, e)),
    }
}

fn needs_immutable(e: &rusqlite::Error) -> bool {
    match e {
        rusqlite::Error::SqliteFailure(f, _) => {
            // SQLITE_READONLY_DIRECTORY, SQLITE_CANTOPEN (no -shm possible),
            // SQLITE_READONLY_RECOVERY / _CANTINIT on a read-only -shm.
            f.code == ErrorCode::CannotOpen
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_DIRECTORY
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_CANTINIT
                || f.extended_code == rusqlite::ffi::SQLITE_READONLY_RECOVERY
        }
        _ => false,
    }
}

/// `file:` URI for `path` with `immutable=1`, every byte outside the
/// unreserved set percent-encoded (so `?`, `#`, `%` name the file).
fn immutable_uri(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut uri = String::from("file:");
    for &b in absolute.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    PathBuf::from(uri)
}

fn open_error(path: &Path, e: rusqlite::Error) -> Error {
    if let rusqlite::Error::SqliteFailure(f, _) = &e
        && f.code == ErrorCode::NotADatabase
    {
        return Error::NotAgentrt {
            path: path.into(),
            detail: "the file is not a SQLite database".into(),
        };
    }
    Error::from_sqlite(e)
}

fn configure(conn: &Connection) -> Result<()> {
    configure_connection(conn).map_err(Error::from_sqlite)
}

fn configure_connection(conn: &Connection) -> rusqlite::Result<()> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    // Plans that never depend on bound values: without this, every
    // statement on a table with a partial index (an extension's) is
    // prepared again at each execution, about 20-40 µs each time.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    conn.pragma_update(None, "trusted_schema", false)?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// Refuses a database holding a trigger or a view: they would run code on
/// our statements. Checked before any other statement touches the schema.
fn refuse_unsafe_schema(conn: &Connection, path: &Path) -> Result<()> {
    let found = conn.query_row(
        "SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') LIMIT 1",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    );
    match found {
        Ok((kind, name)) => Err(Error::UnsafeSchema {
            path: path.into(),
            kind,
            name,
        }),
        Err(rusqlite::Error::QueryReturnedNoRows) => Ok(()),
        Err(e) => Err(open_error(path, e)),
    }
}

/// `journal_mode=WAL`, retried while another opener holds the lock.
fn enable_wal(conn: &Connection) -> Result<()> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(f, _))
                if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(Error::from_sqlite(e)),
        }
    }
}

fn set_durability(conn: &Connection, durability: Durability) -> Result<()> {
    let level = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", level)
        .map_err(Error::from_sqlite)
}

/// Applies the missing migrations, the core's and then the extensions',
/// in one IMMEDIATE transaction, so concurrent first opens are safe;
/// refuses a newer database. Extension DDL runs under an authorizer
/// ([`DdlGuard`]) that confines it to the extension's own tables; after
/// it, the file must still hold no trigger or view.
fn migrate(conn: &mut Connection, path: &Path, options: &StoreOptions) -> Result<Registry> {
    let guard = if options.extensions.is_empty() {
        None
    } else {
        Some(DdlGuard::install(conn)?)
    };
    // A migration that rebuilds a table copies its rows as they are; a row
    // whose run is gone (a file edited by hand) is verify's to name, not a
    // reason to refuse the open. Checks are back on before any other write.
    let unchecked = conn.pragma_update(None, "foreign_keys", false);
    let migrated = unchecked
        .map_err(Error::from_sqlite)
        .and_then(|()| migrate_in(conn, path, options, guard.as_ref()));
    let checked = conn
        .pragma_update(None, "foreign_keys", true)
        .map_err(Error::from_sqlite);
    let removed = match guard {
        Some(_) => DdlGuard::remove(conn),
        None => Ok(()),
    };
    // A refused migration is the error to report, whatever else failed.
    let registry = migrated?;
    checked?;
    removed.map(|()| registry)
}

fn migrate_in(
    conn: &Connection,
    path: &Path,
    options: &StoreOptions,
    guard: Option<&DdlGuard>,
) -> Result<Registry> {
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(Error::from_sqlite)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version    INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL
        )",
    )
    .map_err(Error::from_sqlite)?;
    let current: i64 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(Error::from_sqlite)?;
    if current > SCHEMA_VERSION {
        return Err(Error::SchemaVersion {
            path: path.into(),
            database: current,
            build: SCHEMA_VERSION,
        });
    }
    let applied_at = Timestamp::now().to_string();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.execute_batch(sql).map_err(Error::from_sqlite)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
            rusqlite::params![version, applied_at],
        )
        .map_err(Error::from_sqlite)?;
        if *version == 1 {
            for (key, value) in META {
                tx.execute(
                    "INSERT INTO agentrt_meta (key, value) VALUES (?1, ?2)",
                    rusqlite::params![key, value],
                )
                .map_err(Error::from_sqlite)?;
            }
        }
    }
    let registry = extension::sync(&tx, path, &options.extensions, guard)?;
    if guard.is_some() {
        refuse_unsafe_schema(&tx, path)?;
    }
    tx.commit().map_err(Error::from_sqlite)?;
    Ok(registry)
}

/// The database must be at exactly this build's version, with our meta.
fn check_version(conn: &Connection, path: &Path) -> Result<()> {
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| open_error(path, e))?;
    if !has_table {
        return Err(Error::NotAgentrt {
            path: path.into(),
            detail: "it has no schema_migrations table".into(),
        });
    }
    let version: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            [],
            |r| r.get(0),
        )
        .map_err(Error::from_sqlite)?;
    if version != SCHEMA_VERSION {
        return Err(Error::SchemaVersion {
            path: path.into(),
            database: version,
            build: SCHEMA_VERSION,
        });
    }
    check_meta(conn, path)
}

/// The database must record this build's hash algorithm, canonical form
/// and time format (design §2): a file at our version with other
/// or missing meta was not written by this build's rules.
fn check_meta(conn: &Connection, path: &Path) -> Result<()> {
    let not_agentrt = |detail: String| Error::NotAgentrt {
        path: path.into(),
        detail,
    };
    let has_table: bool = conn
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'agentrt_meta')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| open_error(path, e))?;
    if !has_table {
        return Err(not_agentrt("it has no agentrt_meta table".into()));
    }
    let mut stmt = conn
        .prepare("SELECT key, value FROM agentrt_meta")
        .map_err(Error::from_sqlite)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
        .map_err(Error::from_sqlite)?;
    let mut found = [false; META.len()];
    for row in rows {
        let (key, value) = row.map_err(Error::from_sqlite)?;
        let Some(i) = META.iter().position(|(k, _)| *k == key) else {
            continue;
        };
        let want = META[i].1;
        if value != want {
            return Err(not_agentrt(format!(
                "its {key} is {value:?}, this build uses {want:?}"
            )));
        }
        found[i] = true;
    }
    for ((key, _), seen) in META.into_iter().zip(found) {
        if !seen {
            return Err(not_agentrt(format!("its agentrt_meta has no {key}")));
        }
    }
    Ok(())
}

/// A read-write connection to an existing, migrated file for lease
/// heartbeats: no file checks or migrations (the main connection did them).
pub(super) fn heartbeat_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        sqlite_path(path),
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, e))?;
    configure(&conn)?;
    Ok(conn)
}

/// A read-only connection to an existing, migrated file for the read
/// pool: no file checks or migrations (the main connection did them).
pub(super) fn reader_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        sqlite_path(path),
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| open_error(path, e))?;
    configure(&conn)?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synchronous(conn: &Connection) -> i64 {
        conn.query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap()
    }

    /// The store's own connection is private, so its per-connection
    /// settings are checked here: FULL (2) by default, NORMAL (1) on
    /// request, WAL on, defensive settings in force.
    #[test]
    fn durability_sets_synchronous_and_wal_is_on() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("durability.db");
        let (full, _, _) = open_or_create(&db, &StoreOptions::default()).unwrap();
        assert_eq!(synchronous(&full), 2);
        let journal: String = full
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
        let normal = StoreOptions {
            durability: Durability::Normal,
            ..StoreOptions::default()
        };
        let (fast, _, _) = open_or_create(&db, &normal).unwrap();
        assert_eq!(synchronous(&fast), 1);
        let (existing, _) = open_existing(&db, false, &normal).unwrap();
        assert_eq!(synchronous(&existing), 1);
        let (existing, _) = open_existing(&db, false, &StoreOptions::default()).unwrap();
        assert_eq!(synchronous(&existing), 2);
        for (pragma, want) in [
            ("foreign_keys", 1),
            ("trusted_schema", 0),
            ("busy_timeout", 5000),
        ] {
            let got: i64 = full
                .query_row(&format!("PRAGMA {pragma}"), [], |r| r.get(0))
                .unwrap();
            assert_eq!(got, want, "{pragma}");
        }
    }

    /// SQLite with STAT4 (as bundled) re-prepares a statement at every
    /// execution when a partial index's condition might depend on its
    /// bound values; the proxy's call index has such an index and paid
    /// 20-40 µs per lookup. The store's connections plan once.
    #[test]
    fn statements_on_a_table_with_a_partial_index_are_prepared_once() {
        let conn = Connection::open_in_memory().unwrap();
        configure_connection(&conn).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (k TEXT NOT NULL, v TEXT NOT NULL, open INTEGER NOT NULL);
             CREATE UNIQUE INDEX t_open ON t (k) WHERE open = 1;
             CREATE INDEX t_k ON t (k, v);
             INSERT INTO t VALUES ('a', 'x', 1), ('a', 'y', 0);",
        )
        .unwrap();
        // Whether or not the statement names the index's column.
        for sql in [
            "SELECT v FROM t WHERE k = ? AND v = ? ORDER BY rowid LIMIT ?",
            "SELECT v FROM t WHERE k = ? AND open = ? ORDER BY rowid LIMIT ?",
        ] {
            let mut stmt = conn.prepare(sql).unwrap();
            for (v, open) in [("x", 1), ("y", 0), ("z", 1), ("x", 0)] {
                let value = if sql.contains("open") {
                    rusqlite::types::Value::Integer(open)
                } else {
                    rusqlite::types::Value::Text(v.into())
                };
                let _: Vec<String> = stmt
                    .query_map(rusqlite::params!["a", value, 1], |r| r.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
            }
            assert_eq!(
                stmt.get_status(rusqlite::StatementStatus::RePrepare),
                0,
                "{sql}"
            );
        }
    }
}
