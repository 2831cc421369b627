//! The schema on PostgreSQL, as forward-only migrations of its own
//! (versioned like SQLite's: `schema_migrations`, a newer database
//! refused). The tables and columns are SQLite's, so the core's column
//! lists, decoders and row digests apply unchanged; what PostgreSQL adds:
//!
//! - `agentrt_chain`, the one chain head row every write group locks first
//!   (`SELECT … FOR UPDATE`): groups of every host queue on it, so each
//!   sees the head the previous one left and events get consecutive seqs
//!   in commit order;
//! - `pos`, an identity column on every state table (SQLite's `rowid`):
//!   insertion order, outside every digest;
//! - `agentrt_labels(text)`, a labels text as `jsonb`, `{}` when it is not
//!   JSON (a hand-edited row matches no label filter instead of failing
//!   the read);
//! - `agentrt_listing(text)`, an event's row listing as a `jsonb` array,
//!   `[]` when it is not one (`verify` then names the rows it misses).

use std::fmt::Write as _;
use std::sync::LazyLock;

use agentrt::store::ColumnType;
use agentrt::store::engine::schema::{CORE_TABLES, CoreTable, META};
use tokio_postgres::Client;

use crate::error::{Describe, pg_error};
use crate::runtime::block_on;

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = 1;

/// The advisory lock key that serializes migrations of one database
/// (`pg_advisory_xact_lock`): hosts that open it at once migrate in turn.
pub(crate) const MIGRATION_LOCK: i64 = 0x6167_656e_7472_7431; // "agentrt1"

/// The column of insertion order on every state table (SQLite's
/// `rowid`), outside every digest.
const INSERTED: &str = "pos";

/// The chain head row every write group locks first: PostgreSQL's own,
/// created beside `agentrt_meta`.
const CHAIN: &str = "\
CREATE TABLE agentrt_chain (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    head_seq  BIGINT NOT NULL,
    head_hash TEXT NOT NULL
);
INSERT INTO agentrt_chain (id, head_seq, head_hash) VALUES (1, 0, '');
";

/// PostgreSQL's indexes on the core tables, `(table, name, columns)`: a
/// run's rows in insertion order ([`INSERTED`]), where SQLite's indexes
/// order them by a time column.
const INDEXES: &[(&str, &str, &[&str])] = &[
    ("events", "events_run", &["run_id", "seq"]),
    ("approvals", "approvals_run", &["run_id", INSERTED]),
    (
        "approvals",
        "approvals_step",
        &["run_id", "step_id", INSERTED],
    ),
    ("model_calls", "model_calls_run", &["run_id", INSERTED]),
];

/// The functions reads filter with (see the module's doc).
const FUNCTIONS: &str = "\
CREATE FUNCTION agentrt_labels(labels TEXT) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN CASE WHEN jsonb_typeof(labels::jsonb) = 'object' THEN labels::jsonb ELSE '{}'::jsonb END;
EXCEPTION WHEN others THEN
    RETURN '{}'::jsonb;
END
$$;
CREATE FUNCTION agentrt_listing(listing TEXT) RETURNS jsonb
    LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN CASE WHEN jsonb_typeof(listing::jsonb) = 'array' THEN listing::jsonb ELSE '[]'::jsonb END;
EXCEPTION WHEN others THEN
    RETURN '[]'::jsonb;
END
$$;
";

/// Migration 1: the whole schema (SQLite's schema 5, on PostgreSQL),
/// rendered from the core's description of its tables
/// ([`CORE_TABLES`]) with what PostgreSQL adds.
pub static MIGRATION_1: LazyLock<String> = LazyLock::new(migration_1);

/// Renders [`MIGRATION_1`].
fn migration_1() -> String {
    let mut sql = String::new();
    for table in CORE_TABLES {
        sql.push_str(&create_table(table));
        if table.name == "agentrt_meta" {
            sql.push_str(CHAIN);
        }
        for (_, name, columns) in INDEXES.iter().filter(|(on, ..)| *on == table.name) {
            let _ = writeln!(
                sql,
                "CREATE INDEX {name} ON {} ({});",
                table.name,
                columns.join(", ")
            );
        }
    }
    sql.push_str(FUNCTIONS);
    sql
}

/// `CREATE TABLE` of a core table: its columns as described (64-bit
/// integers, text), an insertion-order identity column first on a state
/// table, then its composite key and unique constraints.
fn create_table(table: &CoreTable) -> String {
    let mut lines = Vec::new();
    if table.state().is_some() {
        lines.push(format!(
            "{INSERTED} BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE"
        ));
    }
    let lone_key = match table.primary_key {
        [key] => Some(*key),
        _ => None,
    };
    for column in table.columns {
        let kind = match column.kind {
            ColumnType::Int => "BIGINT",
            ColumnType::Text => "TEXT",
        };
        let mut line = format!("{} {kind}", column.name);
        if lone_key == Some(column.name) {
            line.push_str(" PRIMARY KEY");
        }
        if column.not_null {
            line.push_str(" NOT NULL");
        }
        if let Some(literal) = column.default {
            let _ = write!(line, " DEFAULT {literal}");
        }
        if let Some(referenced) = column.references {
            let _ = write!(line, " REFERENCES {referenced}(id)");
        }
        lines.push(line);
    }
    if lone_key.is_none() && !table.primary_key.is_empty() {
        lines.push(format!("PRIMARY KEY ({})", table.primary_key.join(", ")));
    }
    for unique in table.unique {
        lines.push(format!("UNIQUE ({})", unique.join(", ")));
    }
    format!(
        "CREATE TABLE {} (\n    {}\n);\n",
        table.name,
        lines.join(",\n    ")
    )
}

/// Every migration, in order: `(version, sql)`.
pub static MIGRATIONS: LazyLock<[(i64, &str); 1]> = LazyLock::new(|| [(1, MIGRATION_1.as_str())]);

/// Creates or migrates the schema, in one transaction under the migration
/// lock; refuses a database at a newer version than this build's.
pub(crate) fn migrate(
    client: &mut Client,
    about: &Describe,
    applied_at: &str,
) -> agentrt::Result<()> {
    block_on(migrate_async(client, about, applied_at))
}

/// Checks, without writing anything, that the database is at this build's
/// schema version (0 when it has no schema at all).
pub(crate) fn check(client: &mut Client, about: &Describe) -> agentrt::Result<()> {
    block_on(async {
        let present: bool = client
            .query_one("SELECT to_regclass('schema_migrations') IS NOT NULL", &[])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(|e| pg_error(&e))?;
        let current: i64 = if present {
            client
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
                    &[],
                )
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| pg_error(&e))?
        } else {
            0
        };
        if current == SCHEMA_VERSION {
            Ok(())
        } else {
            Err(about.schema_version(current, SCHEMA_VERSION))
        }
    })
}

async fn migrate_async(
    client: &mut Client,
    about: &Describe,
    applied_at: &str,
) -> agentrt::Result<()> {
    let tx = client.transaction().await.map_err(|e| pg_error(&e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| pg_error(&e))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, applied_at TEXT NOT NULL)",
    )
    .await
    .map_err(|e| pg_error(&e))?;
    let current: i64 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| pg_error(&e))?;
    if current > SCHEMA_VERSION {
        return Err(about.schema_version(current, SCHEMA_VERSION));
    }
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql).await.map_err(|e| pg_error(&e))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[version, &applied_at],
        )
        .await
        .map_err(|e| pg_error(&e))?;
        if *version == 1 {
            for (key, value) in META {
                tx.execute(
                    "INSERT INTO agentrt_meta (key, value) VALUES ($1, $2)",
                    &[&key, &value],
                )
                .await
                .map_err(|e| pg_error(&e))?;
            }
        }
    }
    tx.commit().await.map_err(|e| pg_error(&e))
}

#[cfg(test)]
mod tests {
    use super::MIGRATION_1;

    /// Migration 1 as it was written by hand before it was rendered from
    /// the core's description.
    const WRITTEN: &str = include_str!("testdata/migration_1.sql");

    fn words(sql: &str) -> Vec<&str> {
        sql.split_whitespace().collect()
    }

    /// The rendered migration is the hand-written one, statement for
    /// statement and word for word (only the spacing differs), so a
    /// database it creates is the one earlier builds created.
    #[test]
    fn the_rendered_migration_is_the_one_written_by_hand() {
        assert_eq!(words(&MIGRATION_1), words(WRITTEN));
    }
}
