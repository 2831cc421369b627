//! Satellites' extension tables on PostgreSQL. A satellite declares its
//! tables once, as SQLite migrations; the core describes what they leave
//! ([`ExtensionShape`]) and this module creates and migrates the tables
//! from that description in PostgreSQL's DDL — the satellite's SQL never
//! runs here. The registry (`extension_migrations`, `extension_tables`)
//! is kept by the core's rules, with the SQLite DDL's hashes, so a copied
//! SQLite database's registry is this one's.
//!
//! What the tables get on PostgreSQL: `BIGINT` for `INTEGER`, `TEXT
//! COLLATE "C"` for `TEXT` (byte order, as SQLite's BINARY), `NOT NULL`
//! and literal defaults as declared, the primary key, unique constraints
//! and named indexes; and `_pos`, an identity column for insertion order
//! (SQLite's `rowid`), outside every digest — an extension's column names
//! start with a letter, so it never collides with one.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use agentrt::store::engine::{Registration, RegistryEntry, check_held, quoted, quoted_list};
use agentrt::store::{
    ColumnShape, ColumnType, ExtensionShape, ExtensionTable, IndexShape, ShapeChange, SqlValue,
    TableShape,
};
use agentrt::{Error, Result, Timestamp};
use tokio_postgres::{Client, Transaction};

use crate::error::{Describe, pg_error};
use crate::runtime::block_on;
use crate::schema::MIGRATION_LOCK;

/// The bookkeeping column of insertion order on every extension table.
pub(crate) const POS: &str = "\"_pos\"";

/// The order rows are listed in: SQLite's rowid order, which is the key's
/// for a numbered key and insertion order otherwise.
pub(crate) fn row_order(shape: &TableShape) -> String {
    match &shape.numbered_key {
        Some(key) => quoted(key),
        None => POS.to_owned(),
    }
}

/// The extension tables a store was opened with, as created here.
#[derive(Debug, Default)]
pub(crate) struct ExtensionTables {
    tables: HashMap<&'static str, TableShape>,
}

impl ExtensionTables {
    /// The table named `name`.
    pub(crate) fn get(&self, table: &ExtensionTable) -> Result<&TableShape> {
        self.tables
            .get(table.name)
            .ok_or_else(|| Error::NoSuchTable {
                table: table.name.to_owned(),
            })
    }
}

/// A literal in DDL (defaults only; values are always bound elsewhere).
fn literal(value: &SqlValue) -> String {
    match value {
        SqlValue::Int(n) => n.to_string(),
        SqlValue::Text(t) => format!("'{}'", t.replace('\'', "''")),
    }
}

/// A column's definition.
fn column_sql(column: &ColumnShape) -> String {
    let kind = match column.kind {
        ColumnType::Int => "BIGINT",
        ColumnType::Text => "TEXT COLLATE \"C\"",
    };
    let default = column
        .default
        .as_ref()
        .map(|d| format!(" DEFAULT {}", literal(d)))
        .unwrap_or_default();
    format!("{} {kind} NOT NULL{default}", quoted(&column.name))
}

/// `CREATE [UNIQUE] INDEX` of `index` on `table` (`WHERE …` for a
/// partial one). A non-unique index ends with the table's insertion order
/// (`_pos`, or its numbered key), as every SQLite index ends with the
/// rowid: a read by the index's columns in insertion order (the newest
/// row of a key, say) then takes its rows from the index in order and
/// stops at its limit instead of sorting every match.
fn index_sql(table: &TableShape, index: &IndexShape) -> String {
    let condition = if index.condition.is_empty() {
        String::new()
    } else {
        let equalities: Vec<String> = index
            .condition
            .iter()
            .map(|(column, value)| format!("{} = {}", quoted(column), literal(value)))
            .collect();
        format!(" WHERE {}", equalities.join(" AND "))
    };
    let mut columns = quoted_list(&index.columns);
    let inserted = row_order(table);
    if !index.unique && !columns.ends_with(&inserted) {
        columns = format!("{columns}, {inserted}");
    }
    format!(
        "CREATE {}INDEX {} ON {} ({columns}){condition}",
        if index.unique { "UNIQUE " } else { "" },
        quoted(&index.name),
        quoted(&table.name),
    )
}

/// The statements that create `table` as described: the table with its
/// keys, then its named indexes.
pub(crate) fn create_table_sql(table: &TableShape) -> Vec<String> {
    let mut parts = vec![format!("{POS} BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE")];
    parts.extend(table.columns.iter().map(column_sql));
    if !table.primary_key.is_empty() {
        parts.push(format!("PRIMARY KEY ({})", quoted_list(&table.primary_key)));
    }
    for unique in &table.unique {
        parts.push(format!("UNIQUE ({})", quoted_list(unique)));
    }
    let mut statements = vec![format!(
        "CREATE TABLE {} ({})",
        quoted(&table.name),
        parts.join(", ")
    )];
    statements.extend(table.indexes.iter().map(|i| index_sql(table, i)));
    statements
}

/// Creates, migrates (when `migrate`) or checks the tables of `shapes` in
/// one transaction under the schema's migration lock, and keeps the
/// registry; the tables as created.
pub(crate) fn sync(
    client: &mut Client,
    about: &Describe,
    shapes: &[ExtensionShape],
    migrate: bool,
) -> Result<ExtensionTables> {
    block_on(async {
        let tx = client.transaction().await.map_err(|e| pg_error(&e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| pg_error(&e))?;
        let mut applied: BTreeMap<String, Vec<(i64, String)>> = BTreeMap::new();
        for row in tx
            .query(
                "SELECT extension, version, ddl_hash FROM extension_migrations ORDER BY extension, version",
                &[],
            )
            .await
            .map_err(|e| pg_error(&e))?
        {
            let name: String = row.try_get(0).map_err(|e| pg_error(&e))?;
            let version: i64 = row.try_get(1).map_err(|e| pg_error(&e))?;
            let hash: String = row.try_get(2).map_err(|e| pg_error(&e))?;
            applied.entry(name).or_default().push((version, hash));
        }
        let extensions: Vec<_> = shapes.iter().map(|s| s.extension).collect();
        check_held(&extensions, applied.keys().map(String::as_str))?;
        let place = PathBuf::from(about.url());
        let applied_at = Timestamp::now().to_string();
        let mut tables = ExtensionTables::default();
        for shape in shapes {
            let ext = shape.extension;
            let done = applied.get(ext.name).map_or(&[][..], Vec::as_slice);
            let current = ext.applied_version(&place, done)?;
            if current < shape.version {
                if !migrate {
                    return Err(Error::ExtensionVersion {
                        path: place,
                        extension: ext.name.to_owned(),
                        database: current,
                        build: shape.version,
                    });
                }
                let older = ext.shape_at(current)?;
                for change in shape.changes_from(&older)? {
                    apply(&tx, shape, &change).await?;
                }
                for version in current + 1..=shape.version {
                    let hash = ext.migration_hash(version).unwrap_or_default();
                    tx.execute(
                        "INSERT INTO extension_migrations (extension, version, ddl_hash, applied_at)
                         VALUES ($1, $2, $3, $4)",
                        &[&ext.name, &version, &hash, &applied_at],
                    )
                    .await
                    .map_err(|e| pg_error(&e))?;
                }
            }
            check_tables(&tx, shape, migrate).await?;
            for table in &shape.tables {
                if let Some(declared) = ext.tables.iter().find(|t| t.name == table.name) {
                    tables.tables.insert(declared.name, table.clone());
                }
            }
        }
        tx.commit().await.map_err(|e| pg_error(&e))?;
        Ok(tables)
    })
}

/// Runs one change of an extension's tables.
async fn apply(tx: &Transaction<'_>, shape: &ExtensionShape, change: &ShapeChange) -> Result<()> {
    let statements = match change {
        ShapeChange::CreateTable(table) => create_table_sql(table),
        ShapeChange::RecreateTable(table) => {
            let rows = count_rows(tx, &table.name).await?;
            if rows > 0 {
                return Err(Error::ExtensionSchema {
                    extension: shape.extension.name.to_owned(),
                    table: table.name.clone(),
                    detail: format!(
                        "version {} changes its columns or keys, and it holds {rows} row(s), which are on the chain as they are; declare a new table",
                        shape.version
                    ),
                });
            }
            let mut statements = vec![format!("DROP TABLE {}", quoted(&table.name))];
            statements.extend(create_table_sql(table));
            statements
        }
        ShapeChange::CreateIndex { table, index } => {
            let Some(described) = shape.table(table) else {
                return Err(Error::ExtensionSchema {
                    extension: shape.extension.name.to_owned(),
                    table: table.clone(),
                    detail: format!(
                        "the index {:?} is on a table it does not describe",
                        index.name
                    ),
                });
            };
            vec![index_sql(described, index)]
        }
        ShapeChange::DropIndex { name, .. } => vec![format!("DROP INDEX {}", quoted(name))],
    };
    for sql in statements {
        tx.batch_execute(&sql).await.map_err(|e| pg_error(&e))?;
    }
    Ok(())
}

async fn count_rows(tx: &Transaction<'_>, table: &str) -> Result<i64> {
    tx.query_one(&format!("SELECT COUNT(*) FROM {}", quoted(table)), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| pg_error(&e))
}

/// Checks the tables of `shape` as the database has them — no table under
/// the prefix the extension does not declare, each declared one with the
/// described columns — and keeps their registry entries.
async fn check_tables(tx: &Transaction<'_>, shape: &ExtensionShape, register: bool) -> Result<()> {
    let ext = shape.extension;
    let prefix = ext.prefix();
    let found: Vec<String> = tx
        .query(
            "SELECT table_name::text FROM information_schema.tables
                 WHERE table_schema = current_schema() AND left(table_name, length($1)) = $1
             UNION SELECT name FROM extension_tables WHERE extension = $2 ORDER BY 1",
            &[&prefix, &ext.name],
        )
        .await
        .map_err(|e| pg_error(&e))?
        .iter()
        .map(|row| row.try_get(0))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| pg_error(&e))?;
    ext.undeclared(&found)?;
    for declared in ext.tables {
        let wrong = |detail: String| Error::ExtensionSchema {
            extension: ext.name.to_owned(),
            table: declared.name.to_owned(),
            detail,
        };
        let Some(described) = shape.table(declared.name) else {
            return Err(wrong("its migrations do not create it".into()));
        };
        if let Some(problem) = column_problem(tx, described).await? {
            return Err(wrong(problem));
        }
        let entry = tx
            .query_opt(
                "SELECT extension, key_column, columns_json FROM extension_tables WHERE name = $1",
                &[&declared.name],
            )
            .await
            .map_err(|e| pg_error(&e))?
            .map(
                |row| -> std::result::Result<RegistryEntry, tokio_postgres::Error> {
                    Ok(RegistryEntry {
                        extension: row.try_get(0)?,
                        key_column: row.try_get(1)?,
                        columns_json: row.try_get(2)?,
                    })
                },
            )
            .transpose()
            .map_err(|e| pg_error(&e))?;
        // Counted only when the registration would change.
        let rows = if entry.as_ref().is_some_and(|e| {
            e.key_column != declared.key_column || e.columns_json != declared.columns_json()
        }) {
            count_rows(tx, declared.name).await?
        } else {
            0
        };
        let sql = match ext.registration(declared, entry.as_ref(), register, &mut || Ok(rows))? {
            Registration::Keep => None,
            Registration::Insert => Some(
                "INSERT INTO extension_tables (name, extension, key_column, columns_json)
                 VALUES ($1, $2, $3, $4)",
            ),
            Registration::Update => Some(
                "UPDATE extension_tables SET extension = $2, key_column = $3, columns_json = $4 WHERE name = $1",
            ),
        };
        if let Some(sql) = sql {
            tx.execute(
                sql,
                &[
                    &declared.name,
                    &ext.name,
                    &declared.key_column,
                    &declared.columns_json(),
                ],
            )
            .await
            .map_err(|e| pg_error(&e))?;
        }
    }
    Ok(())
}

/// What differs between `table` as the database has it and as described
/// (its columns: names, types, NOT NULL), in words; `None` when nothing.
async fn column_problem(tx: &Transaction<'_>, table: &TableShape) -> Result<Option<String>> {
    let found: Vec<(String, String, bool)> = tx
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text = 'YES'
             FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 AND column_name <> '_pos'
             ORDER BY ordinal_position",
            &[&table.name],
        )
        .await
        .map_err(|e| pg_error(&e))?
        .iter()
        .map(|row| Ok((row.try_get(0)?, row.try_get(1)?, row.try_get(2)?)))
        .collect::<std::result::Result<_, tokio_postgres::Error>>()
        .map_err(|e| pg_error(&e))?;
    if found.is_empty() {
        return Ok(Some("the database has no such table".into()));
    }
    for column in &table.columns {
        let want = match column.kind {
            ColumnType::Int => "bigint",
            ColumnType::Text => "text",
        };
        match found.iter().find(|(name, _, _)| *name == column.name) {
            None => return Ok(Some(format!("it has no column {:?}", column.name))),
            Some((_, kind, _)) if kind != want => {
                return Ok(Some(format!(
                    "its column {:?} is {kind}, not {want}",
                    column.name
                )));
            }
            Some((_, _, true)) => {
                return Ok(Some(format!("its column {:?} may be NULL", column.name)));
            }
            Some(_) => {}
        }
    }
    if let Some((extra, _, _)) = found
        .iter()
        .find(|(name, _, _)| table.column(name).is_none())
    {
        return Ok(Some(format!(
            "its column {extra:?} is not one its migrations create"
        )));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_table_is_created_with_its_keys_defaults_and_indexes() {
        let table = TableShape {
            name: "demo_items".into(),
            columns: vec![
                ColumnShape {
                    name: "id".into(),
                    kind: ColumnType::Int,
                    default: None,
                },
                ColumnShape {
                    name: "note".into(),
                    kind: ColumnType::Text,
                    default: Some(SqlValue::from("it's")),
                },
            ],
            primary_key: vec!["id".into()],
            numbered_key: Some("id".into()),
            unique: vec![vec!["note".into()]],
            indexes: vec![IndexShape {
                name: "demo_items_note".into(),
                unique: false,
                columns: vec!["note".into(), "id".into()],
                condition: vec![("id".into(), SqlValue::Int(1))],
            }],
        };
        let mut plain = table.clone();
        plain.numbered_key = None;
        plain.indexes[0].condition.clear();
        plain.indexes.push(IndexShape {
            name: "demo_items_unique_note".into(),
            unique: true,
            columns: vec!["note".into()],
            condition: vec![],
        });
        // Insertion order ends a non-unique index, never a unique one.
        assert_eq!(
            create_table_sql(&plain)[1..],
            [
                "CREATE INDEX \"demo_items_note\" ON \"demo_items\" (\"note\", \"id\", \"_pos\")",
                "CREATE UNIQUE INDEX \"demo_items_unique_note\" ON \"demo_items\" (\"note\")",
            ]
        );
        assert_eq!(
            create_table_sql(&table),
            [
                "CREATE TABLE \"demo_items\" (\"_pos\" BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, \
                 \"id\" BIGINT NOT NULL, \"note\" TEXT COLLATE \"C\" NOT NULL DEFAULT 'it''s', \
                 PRIMARY KEY (\"id\"), UNIQUE (\"note\"))",
                "CREATE INDEX \"demo_items_note\" ON \"demo_items\" (\"note\", \"id\") WHERE \"id\" = 1",
            ]
        );
    }
}
