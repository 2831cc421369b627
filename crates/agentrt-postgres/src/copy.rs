//! Copying a SQLite store into an empty PostgreSQL database with its chain
//! intact (`agentrt migrate`): every row as stored (links, row listings,
//! `written_seq`s and all), in insertion order, in one transaction that
//! ends by setting the chain head row to the last event. Either the whole
//! database arrives or nothing does.

use agentrt::Store;
use agentrt::store::engine::StoredValue;
use agentrt::store::engine::{ExportPage, Exported, ExtensionExport};
use agentrt::{Error, Result};
use tokio_postgres::Transaction;
use tokio_postgres::types::ToSql;

use crate::error::pg_error;
use crate::extensions::create_table_sql;
use crate::runtime::block_on;
use agentrt::store::engine::quoted;

/// What a copy carried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// Rows copied per table, in copy order (tables without rows left out).
    pub rows: Vec<(String, u64)>,
    /// The chain head the destination now has: seq and link (none for a
    /// database without events).
    pub head: Option<(i64, String)>,
}

fn refused(detail: String) -> Error {
    Error::InvalidInput {
        what: "migrate",
        detail,
    }
}

/// Copies every run, step, approval, model call, tool spec, event and
/// metadata row of the SQLite store `source` into the PostgreSQL database
/// `url`, creating or migrating its schema first; and the satellites'
/// extension tables the source registers, created as the source has them
/// (see `Store::export_rows`) with their registry and rows, so a
/// satellite opening the copy finds its extension at the version the
/// source held. Refuses a destination that already holds runs, events or
/// extension tables, and a source whose chain is computed otherwise (its
/// `agentrt_meta` hash algorithm, canonical form or time format).
///
/// The source is read in one snapshot; the destination is written in one
/// transaction. Run `verify` on both afterwards: they have the same head.
pub fn copy_from(source: &Store, url: &str) -> Result<CopyReport> {
    let crate::Connected {
        about,
        mut conn,
        // Kept until the copy ends: the connection's I/O runs on it.
        runtime: _runtime,
        ..
    } = crate::connect(
        url,
        // One long transaction with the source's reading between its
        // requests: not ended for idling.
        &crate::PgOptions {
            idle_transaction_timeout: None,
            ..crate::PgOptions::default()
        },
    )?;
    let tx = block_on(conn.client.transaction()).map_err(|e| pg_error(&e))?;
    block_on(tx.execute("SELECT 1 FROM agentrt_chain WHERE id = 1 FOR UPDATE", &[]))
        .map_err(|e| pg_error(&e))?;
    let held: i64 = block_on(tx.query_one(
        "SELECT (SELECT COUNT(*) FROM runs) + (SELECT COUNT(*) FROM events)
              + (SELECT COUNT(*) FROM extension_migrations) + (SELECT COUNT(*) FROM extension_tables)",
        &[],
    ))
    .and_then(|row| row.try_get(0))
    .map_err(|e| pg_error(&e))?;
    if held > 0 {
        return Err(refused(format!(
            "{about} already holds runs, events or extension tables: agentrt migrate copies into an empty database only"
        )));
    }
    let mut rows: Vec<(String, u64)> = Vec::new();
    source.export_rows(&mut |exported| {
        let page = match exported {
            Exported::Extensions(extensions) => return create_extensions(&tx, extensions),
            Exported::Rows(page) => page,
        };
        let copied = if page.table == "agentrt_meta" {
            copy_meta(&tx, &page)?
        } else {
            copy_page(&tx, &page)?
        };
        match rows.last_mut() {
            Some((table, n)) if table == page.table => *n += copied,
            _ => rows.push((page.table.to_owned(), copied)),
        }
        Ok(())
    })?;
    let head = block_on(tx.query_opt(
        "UPDATE agentrt_chain SET head_seq = e.seq, head_hash = e.hash
         FROM (SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1) e
         WHERE id = 1 RETURNING head_seq, head_hash",
        &[],
    ))
    .map_err(|e| pg_error(&e))?
    .map(|row| Ok::<_, tokio_postgres::Error>((row.try_get(0)?, row.try_get(1)?)))
    .transpose()
    .map_err(|e| pg_error(&e))?;
    block_on(tx.commit()).map_err(|e| pg_error(&e))?;
    Ok(CopyReport { rows, head })
}

/// Creates the source's extension tables as it has them, with their
/// registry: the applied migrations (the SQLite DDL's hashes) and the
/// tables' entries.
fn create_extensions(tx: &Transaction<'_>, extensions: &ExtensionExport) -> Result<()> {
    for table in &extensions.tables {
        for sql in create_table_sql(&table.shape) {
            block_on(tx.batch_execute(&sql)).map_err(|e| pg_error(&e))?;
        }
        block_on(tx.execute(
            "INSERT INTO extension_tables (name, extension, key_column, columns_json)
             VALUES ($1, $2, $3, $4)",
            &[
                &table.shape.name,
                &table.entry.extension,
                &table.entry.key_column,
                &table.entry.columns_json,
            ],
        ))
        .map_err(|e| pg_error(&e))?;
    }
    for (extension, version, hash, applied_at) in &extensions.migrations {
        block_on(tx.execute(
            "INSERT INTO extension_migrations (extension, version, ddl_hash, applied_at)
             VALUES ($1, $2, $3, $4)",
            &[extension, version, hash, applied_at],
        ))
        .map_err(|e| pg_error(&e))?;
    }
    Ok(())
}

/// Inserts a page of one table's rows with their stored columns (the
/// identity `pos`, `_pos` on an extension table, numbers them in the
/// order they come: SQLite's).
fn copy_page(tx: &Transaction<'_>, page: &ExportPage<'_>) -> Result<u64> {
    let placeholders: Vec<String> = (1..=page.columns.len()).map(|i| format!("${i}")).collect();
    // Names are the core's own schema's or a checked extension table's:
    // identifiers, quoted.
    let columns: Vec<String> = page.columns.iter().map(|c| quoted(c)).collect();
    let sql = format!(
        "INSERT INTO {} ({}) VALUES ({})",
        quoted(page.table),
        columns.join(", "),
        placeholders.join(", ")
    );
    let statement = block_on(tx.prepare(&sql)).map_err(|e| pg_error(&e))?;
    for row in page.rows {
        let params = params(page, row)?;
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        block_on(tx.execute(&statement, &refs)).map_err(|e| pg_error(&e))?;
    }
    Ok(page.rows.len() as u64)
}

/// Metadata rows: one the destination's schema already wrote must agree
/// (they say how the chain is computed); others are added.
fn copy_meta(tx: &Transaction<'_>, page: &ExportPage<'_>) -> Result<u64> {
    let mut copied = 0;
    for row in page.rows {
        let [StoredValue::Text(key), StoredValue::Text(value)] = row.as_slice() else {
            return Err(refused(
                "the source's agentrt_meta rows are not key and value texts".into(),
            ));
        };
        let existing =
            block_on(tx.query_opt("SELECT value FROM agentrt_meta WHERE key = $1", &[key]))
                .map_err(|e| pg_error(&e))?;
        match existing {
            Some(row) => {
                let ours: String = row.try_get(0).map_err(|e| pg_error(&e))?;
                if &ours != value {
                    return Err(refused(format!(
                        "the source's {key} is {value:?}, this build's {ours:?}: its chain cannot be carried over"
                    )));
                }
            }
            None => {
                block_on(tx.execute(
                    "INSERT INTO agentrt_meta (key, value) VALUES ($1, $2)",
                    &[key, value],
                ))
                .map_err(|e| pg_error(&e))?;
                copied += 1;
            }
        }
    }
    Ok(copied)
}

fn params(page: &ExportPage<'_>, row: &[StoredValue]) -> Result<Vec<Box<dyn ToSql + Sync>>> {
    row.iter()
        .zip(page.columns)
        .map(|(value, column)| match value {
            StoredValue::Int(n) => Ok(Box::new(*n) as Box<dyn ToSql + Sync>),
            StoredValue::Text(t) => Ok(Box::new(t.clone()) as Box<dyn ToSql + Sync>),
            StoredValue::Other(kind) => Err(refused(format!(
                "{}.{column} holds a value of type {kind}",
                page.table
            ))),
        })
        .collect()
}
