//! Opening with extensions: their migrations applied in the opener's
//! IMMEDIATE transaction under an authorizer that confines them to their
//! own tables, their tables checked as the migrations left them, and the
//! registry (`extension_migrations`, `extension_tables`) kept in step.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
use rusqlite::{Connection, ErrorCode, OptionalExtension};

use super::record::{Registration, RegistryEntry, check_held, migration_hash};
use super::{ColumnType, Extension, Registered, Registry, check_declarations, quoted};
use crate::clock::{Timestamp, lock};
use crate::error::{Error, Result};

/// The authorizer that judges extension DDL. Installed on the opener's
/// connection for the migration; it judges statements only while a
/// migration runs ([`DdlGuard::begin`]) and allows everything else.
pub(crate) struct DdlGuard {
    state: Arc<Mutex<GuardState>>,
}

#[derive(Debug, Default)]
struct GuardState {
    /// The prefix of the extension whose migration runs, if one does.
    prefix: Option<String>,
    /// The first thing it was refused.
    refused: Option<String>,
}

impl DdlGuard {
    /// Installs the authorizer on `conn`.
    pub(crate) fn install(conn: &mut Connection) -> Result<DdlGuard> {
        let state: Arc<Mutex<GuardState>> = Arc::default();
        let judged = Arc::clone(&state);
        conn.authorizer(Some(move |ctx: AuthContext<'_>| {
            let mut state = lock(&judged);
            let Some(prefix) = state.prefix.clone() else {
                return Authorization::Allow;
            };
            match judge(&prefix, &ctx) {
                Ok(()) => Authorization::Allow,
                Err(why) => {
                    state.refused.get_or_insert(why);
                    Authorization::Deny
                }
            }
        }))
        .map_err(Error::from_sqlite)?;
        Ok(DdlGuard { state })
    }

    /// Removes the authorizer from `conn`.
    pub(crate) fn remove(conn: &mut Connection) -> Result<()> {
        conn.authorizer(None::<fn(AuthContext<'_>) -> Authorization>)
            .map_err(Error::from_sqlite)
    }

    fn begin(&self, prefix: &str) {
        let mut state = lock(&self.state);
        state.prefix = Some(prefix.to_owned());
        state.refused = None;
    }

    /// Stops judging; returns what was refused, if anything.
    fn end(&self) -> Option<String> {
        let mut state = lock(&self.state);
        state.prefix = None;
        state.refused.take()
    }
}

/// SQLite's own tables that its schema statements read and write.
fn is_schema_table(name: &str) -> bool {
    matches!(
        name,
        "sqlite_master" | "sqlite_schema" | "sqlite_temp_master" | "sqlite_temp_schema"
    )
}

/// Whether extension DDL (of the extension owning `prefix`) may do what
/// `ctx` says; why not, in words.
fn judge(prefix: &str, ctx: &AuthContext<'_>) -> std::result::Result<(), String> {
    let own = |name: &str| name.starts_with(prefix) && name.len() > prefix.len();
    let outside = |name: &str| {
        format!("it names {name:?}, which is not one of its tables (they start with {prefix:?})")
    };
    match ctx.action {
        AuthAction::CreateTable { table_name } | AuthAction::AlterTable { table_name, .. } => {
            if own(table_name) {
                Ok(())
            } else {
                Err(outside(table_name))
            }
        }
        AuthAction::CreateIndex {
            index_name,
            table_name,
        }
        | AuthAction::DropIndex {
            index_name,
            table_name,
        } => {
            if !own(table_name) {
                Err(outside(table_name))
            } else if own(index_name) || index_name.starts_with("sqlite_autoindex_") {
                Ok(())
            } else {
                Err(format!(
                    "its index {index_name:?} does not start with its prefix {prefix:?}"
                ))
            }
        }
        AuthAction::Read {
            table_name: "sqlite_sequence",
            ..
        }
        | AuthAction::Insert {
            table_name: "sqlite_sequence",
        }
        | AuthAction::Delete {
            table_name: "sqlite_sequence",
        }
        | AuthAction::Update {
            table_name: "sqlite_sequence",
            ..
        } => Err(
            "it touches sqlite_sequence, the store's AUTOINCREMENT counters (renaming a table does); an extension table keeps its name"
                .into(),
        ),
        AuthAction::Read { table_name, .. } => {
            if own(table_name) || is_schema_table(table_name) {
                Ok(())
            } else {
                Err(outside(table_name))
            }
        }
        AuthAction::Insert { table_name }
        | AuthAction::Delete { table_name }
        | AuthAction::Update { table_name, .. } => {
            if is_schema_table(table_name) {
                // SQLite's bookkeeping of the schema statements themselves
                // (a user statement cannot write these: the connection is
                // defensive).
                Ok(())
            } else if own(table_name) {
                Err(format!(
                    "it writes rows of {table_name:?}; a migration creates and alters tables, and rows are written through WriteTx, onto the chain"
                ))
            } else {
                Err(outside(table_name))
            }
        }
        AuthAction::Select
        | AuthAction::Function { .. }
        | AuthAction::Recursive
        | AuthAction::Reindex { .. } => Ok(()),
        AuthAction::CreateTrigger { trigger_name, .. }
        | AuthAction::CreateTempTrigger { trigger_name, .. } => Err(format!(
            "it creates the trigger {trigger_name:?}; a trigger or a view would run code on the store's statements"
        )),
        AuthAction::CreateView { view_name } | AuthAction::CreateTempView { view_name } => {
            Err(format!(
                "it creates the view {view_name:?}; a trigger or a view would run code on the store's statements"
            ))
        }
        AuthAction::DropTable { table_name } => Err(format!(
            "it drops the table {table_name:?}; an extension table is never dropped (its rows are on the chain)"
        )),
        AuthAction::Pragma { pragma_name, .. } => Err(format!("it runs PRAGMA {pragma_name}")),
        AuthAction::Transaction { .. } | AuthAction::Savepoint { .. } => Err(
            "it begins or ends a transaction or savepoint; the store's transaction holds every migration"
                .into(),
        ),
        AuthAction::Attach { filename } => Err(format!("it attaches {filename:?}")),
        other => Err(format!(
            "it does what an extension migration may not ({other:?})"
        )),
    }
}

/// Brings `extensions` up to date inside the opener's transaction `conn`:
/// with `guard` (a writing opener) their missing migrations are applied
/// and their tables registered; without it (an opener that does not
/// migrate) they must already be. Returns the registry of their tables.
pub(crate) fn sync(
    conn: &Connection,
    path: &Path,
    extensions: &[Extension],
    guard: Option<&DdlGuard>,
) -> Result<Registry> {
    check_declarations(extensions)?;
    let mut registry = Registry::default();
    if extensions.is_empty() {
        return Ok(registry);
    }
    let applied = applied_migrations(conn)?;
    check_held(extensions, applied.keys().map(String::as_str))?;
    for ext in extensions {
        let done = applied.get(ext.name).map_or(&[][..], Vec::as_slice);
        let current = ext.applied_version(path, done)?;
        if current < ext.version() {
            match guard {
                Some(guard) => apply(conn, guard, ext, current)?,
                None => {
                    return Err(Error::ExtensionVersion {
                        path: path.into(),
                        extension: ext.name.to_owned(),
                        database: current,
                        build: ext.version(),
                    });
                }
            }
        }
        check_tables(conn, ext, guard.is_some(), &mut registry)?;
    }
    Ok(registry)
}

/// Every applied extension migration: extension → `(version, hash)` in
/// version order.
fn applied_migrations(conn: &Connection) -> Result<BTreeMap<String, Vec<(i64, String)>>> {
    let mut stmt = conn
        .prepare(
            "SELECT extension, version, ddl_hash FROM extension_migrations ORDER BY extension, version",
        )
        .map_err(Error::from_sqlite)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, String>(2)?,
            ))
        })
        .map_err(Error::from_sqlite)?;
    let mut applied: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
    for row in rows {
        let (extension, version, hash) = row.map_err(Error::from_sqlite)?;
        applied.entry(extension).or_default().push((version, hash));
    }
    Ok(applied)
}

/// Runs the migrations of `ext` after `current`, each judged by `guard`,
/// and records them.
fn apply(conn: &Connection, guard: &DdlGuard, ext: &Extension, current: i64) -> Result<()> {
    let applied_at = Timestamp::now().to_string();
    for (version, ddl) in ext.migrations.iter().filter(|(v, _)| *v > current) {
        run_migration(conn, guard, ext, *version, ddl)?;
        conn.execute(
            "INSERT INTO extension_migrations (extension, version, ddl_hash, applied_at)
             VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![ext.name, version, migration_hash(ddl), applied_at],
        )
        .map_err(Error::from_sqlite)?;
    }
    Ok(())
}

/// Runs migration `version` of `ext`, judged by `guard`.
pub(super) fn run_migration(
    conn: &Connection,
    guard: &DdlGuard,
    ext: &Extension,
    version: i64,
    ddl: &str,
) -> Result<()> {
    guard.begin(&ext.prefix());
    let ran = conn.execute_batch(ddl);
    let refused = guard.end();
    let refusal = |detail: String| Error::ExtensionMigrationRefused {
        extension: ext.name.to_owned(),
        version,
        detail,
    };
    match (ran, refused) {
        (_, Some(detail)) => Err(refusal(detail)),
        (Err(rusqlite::Error::SqliteFailure(f, message)), None) if f.code == ErrorCode::Unknown => {
            let said = message.unwrap_or_else(|| f.to_string());
            Err(refusal(format!("SQLite refused it: {said}")))
        }
        (Err(e), None) => Err(Error::from_sqlite(e)),
        (Ok(()), None) => Ok(()),
    }
}

/// Checks the tables of `ext` as the migrations left them and their
/// registration (registering them when `register`), and adds them to
/// `registry`.
fn check_tables(
    conn: &Connection,
    ext: &Extension,
    register: bool,
    registry: &mut Registry,
) -> Result<()> {
    let prefix = ext.prefix();
    let wrong = |table: &str, detail: String| Error::ExtensionSchema {
        extension: ext.name.to_owned(),
        table: table.to_owned(),
        detail,
    };
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?1) = ?2
             UNION SELECT name FROM extension_tables WHERE extension = ?3 ORDER BY name",
        )
        .map_err(Error::from_sqlite)?;
    let found: Vec<String> = stmt
        .query_map(
            rusqlite::params![prefix.len() as i64, prefix, ext.name],
            |r| r.get(0),
        )
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::from_sqlite)?;
    ext.undeclared(&found)?;
    for table in ext.tables {
        let types = match table_problem_in(conn, table.name, table.key_column, table.columns)? {
            Ok(types) => types,
            Err(problem) => return Err(wrong(table.name, problem)),
        };
        let entry: Option<RegistryEntry> = conn
            .query_row(
                "SELECT extension, key_column, columns_json FROM extension_tables WHERE name = ?1",
                [table.name],
                |r| {
                    Ok(RegistryEntry {
                        extension: r.get(0)?,
                        key_column: r.get(1)?,
                        columns_json: r.get(2)?,
                    })
                },
            )
            .optional()
            .map_err(Error::from_sqlite)?;
        let mut rows = || -> Result<i64> {
            conn.query_row(
                &format!("SELECT COUNT(*) FROM {}", quoted(table.name)),
                [],
                |r| r.get(0),
            )
            .map_err(Error::from_sqlite)
        };
        let sql = match ext.registration(table, entry.as_ref(), register, &mut rows)? {
            Registration::Keep => None,
            Registration::Insert => Some(
                "INSERT INTO extension_tables (name, extension, key_column, columns_json)
                 VALUES (?1, ?2, ?3, ?4)",
            ),
            Registration::Update => Some(
                "UPDATE extension_tables SET extension = ?2, key_column = ?3, columns_json = ?4 WHERE name = ?1",
            ),
        };
        if let Some(sql) = sql {
            conn.execute(
                sql,
                rusqlite::params![table.name, ext.name, table.key_column, table.columns_json()],
            )
            .map_err(Error::from_sqlite)?;
        }
        registry.tables.push(Registered::new(*table, types));
    }
    Ok(())
}

/// Checks table `name` in the file against a registration: an ordinary
/// rowid table whose columns are exactly `columns` (each `INTEGER` or
/// `TEXT`, not null) and `written_seq INTEGER NOT NULL DEFAULT 0`, with
/// `key` unique. The columns' types, or what is wrong in words.
pub(crate) fn table_problem_in(
    conn: &Connection,
    name: &str,
    key: &str,
    columns: &[impl AsRef<str>],
) -> Result<std::result::Result<Vec<ColumnType>, String>> {
    let listed: Option<(String, i64)> = conn
        .query_row(
            "SELECT type, wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
            [name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(Error::from_sqlite)?;
    match listed {
        None => return Ok(Err("the database has no such table".into())),
        Some((kind, _)) if kind != "table" => {
            return Ok(Err(format!("it is a {kind}, not an ordinary table")));
        }
        Some((_, wr)) if wr != 0 => {
            return Ok(Err(
                "it is a WITHOUT ROWID table; extension tables are rowid tables (verify reads long columns by rowid)"
                    .into(),
            ));
        }
        Some(_) => {}
    }
    struct Column {
        name: String,
        kind: String,
        not_null: bool,
        default: Option<String>,
        pk: i64,
    }
    let mut stmt = conn
        .prepare(r#"SELECT name, type, "notnull", dflt_value, pk FROM pragma_table_info(?1)"#)
        .map_err(Error::from_sqlite)?;
    let found: Vec<Column> = stmt
        .query_map([name], |r| {
            Ok(Column {
                name: r.get(0)?,
                kind: r.get(1)?,
                not_null: r.get::<_, i64>(2)? != 0,
                default: r.get(3)?,
                pk: r.get(4)?,
            })
        })
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::from_sqlite)?;
    let pk_columns = found.iter().filter(|c| c.pk > 0).count();
    match found.iter().find(|c| c.name == "written_seq") {
        None => {
            return Ok(Err(
                "it has no written_seq column; declare written_seq INTEGER NOT NULL DEFAULT 0 (the store marks each row with the event that last wrote it)"
                    .into(),
            ));
        }
        Some(c)
            if !(c.kind.eq_ignore_ascii_case("INTEGER")
                && c.not_null
                && c.default.as_deref() == Some("0")
                && c.pk == 0) =>
        {
            return Ok(Err(format!(
                "its written_seq is declared {:?}{} with default {:?}; declare written_seq INTEGER NOT NULL DEFAULT 0",
                c.kind,
                if c.not_null { " NOT NULL" } else { "" },
                c.default.as_deref().unwrap_or("none")
            )));
        }
        Some(_) => {}
    }
    if let Some(extra) = found
        .iter()
        .find(|c| c.name != "written_seq" && !columns.iter().any(|n| n.as_ref() == c.name))
    {
        return Ok(Err(format!(
            "its column {:?} is not declared; every column but written_seq is digested, so the chain covers the whole row",
            extra.name
        )));
    }
    let mut types = Vec::with_capacity(columns.len());
    for column in columns.iter().map(AsRef::as_ref) {
        let Some(c) = found.iter().find(|c| c.name == column) else {
            return Ok(Err(format!("it has no column {column:?}")));
        };
        let kind = if c.kind.eq_ignore_ascii_case("INTEGER") {
            ColumnType::Int
        } else if c.kind.eq_ignore_ascii_case("TEXT") {
            ColumnType::Text
        } else {
            return Ok(Err(format!(
                "its column {column:?} is {:?}; extension columns are INTEGER NOT NULL or TEXT NOT NULL",
                c.kind
            )));
        };
        // The rowid alias (`INTEGER PRIMARY KEY`) is never null.
        let rowid_alias = kind == ColumnType::Int && c.pk == 1 && pk_columns == 1;
        if !c.not_null && !rowid_alias {
            return Ok(Err(format!(
                "its column {column:?} may be NULL; extension columns are INTEGER NOT NULL or TEXT NOT NULL \
                 (SQLite lets a PRIMARY KEY other than INTEGER PRIMARY KEY hold NULL unless it is declared NOT NULL)"
            )));
        }
        types.push(kind);
    }
    let key_is_pk = found.iter().any(|c| c.name == key && c.pk == 1) && pk_columns == 1;
    if !key_is_pk && !unique_index_on(conn, name, key)? {
        return Ok(Err(format!(
            "its key column {key:?} is not unique; make it the primary key, or give it a unique index of its own"
        )));
    }
    Ok(Ok(types))
}

/// Whether table `name` has a unique, non-partial index on `column` alone.
fn unique_index_on(conn: &Connection, name: &str, column: &str) -> Result<bool> {
    let mut stmt = conn
        .prepare(r#"SELECT name FROM pragma_index_list(?1) WHERE "unique" = 1 AND partial = 0"#)
        .map_err(Error::from_sqlite)?;
    let indexes: Vec<String> = stmt
        .query_map([name], |r| r.get(0))
        .map_err(Error::from_sqlite)?
        .collect::<rusqlite::Result<_>>()
        .map_err(Error::from_sqlite)?;
    for index in indexes {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_index_info(?1)")
            .map_err(Error::from_sqlite)?;
        let on: Vec<Option<String>> = stmt
            .query_map([&index], |r| r.get(0))
            .map_err(Error::from_sqlite)?
            .collect::<rusqlite::Result<_>>()
            .map_err(Error::from_sqlite)?;
        if on.len() == 1 && on[0].as_deref() == Some(column) {
            return Ok(true);
        }
    }
    Ok(false)
}
