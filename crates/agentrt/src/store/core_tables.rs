//! The core's tables described once, as data: the shape SQLite's
//! migrations leave them in (a test applies the migrations to an empty
//! database and compares) and the shape another engine creates with DDL
//! of its own, as an extension's tables are described by
//! [`Extension::shape`](super::Extension::shape). agentrt-postgres renders
//! its schema from this description, so the two engines cannot drift
//! apart column by column.
//!
//! Indexes are not described: each engine orders a run's rows by what it
//! has (SQLite by time columns, an engine with an insertion-order column
//! by that column), so each names its own.

use super::extension::ColumnType;
use super::schema::StateTable;

/// One column of a [`CoreTable`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreColumn {
    /// The column's name.
    pub name: &'static str,
    /// `INTEGER` (64-bit) or `TEXT`.
    pub kind: ColumnType,
    /// Declared `NOT NULL`. A lone primary key column is not (SQLite's
    /// `TEXT PRIMARY KEY` is declared without it; PostgreSQL's primary
    /// key implies it).
    pub not_null: bool,
    /// The SQL literal an insert that leaves the column out gives it
    /// (`''` or `0`, written alike in every engine).
    pub default: Option<&'static str>,
    /// The table whose `id` this column references.
    pub references: Option<&'static str>,
}

impl CoreColumn {
    /// A `NOT NULL` column without default.
    const fn required(name: &'static str, kind: ColumnType) -> CoreColumn {
        CoreColumn {
            name,
            kind,
            not_null: true,
            default: None,
            references: None,
        }
    }

    /// A `NOT NULL` text column.
    const fn text(name: &'static str) -> CoreColumn {
        CoreColumn::required(name, ColumnType::Text)
    }

    /// A `NOT NULL` integer column.
    const fn int(name: &'static str) -> CoreColumn {
        CoreColumn::required(name, ColumnType::Int)
    }

    /// A text column defaulting to the empty text.
    const fn empty_text(name: &'static str) -> CoreColumn {
        CoreColumn::text(name).or("''")
    }

    /// An integer column defaulting to 0.
    const fn zero(name: &'static str) -> CoreColumn {
        CoreColumn::int(name).or("0")
    }

    /// A lone primary key column (declared without `NOT NULL`).
    const fn key(name: &'static str, kind: ColumnType) -> CoreColumn {
        CoreColumn {
            not_null: false,
            ..CoreColumn::required(name, kind)
        }
    }

    /// The column with a default.
    const fn or(self, literal: &'static str) -> CoreColumn {
        CoreColumn {
            default: Some(literal),
            ..self
        }
    }

    /// The column referencing `table(id)`.
    const fn of(self, table: &'static str) -> CoreColumn {
        CoreColumn {
            references: Some(table),
            ..self
        }
    }
}

/// One table of the core's schema, as the latest migration leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreTable {
    /// The table's name.
    pub name: &'static str,
    /// Every column, in the table's order.
    pub columns: &'static [CoreColumn],
    /// The primary key's columns, in key order.
    pub primary_key: &'static [&'static str],
    /// The table's unnamed unique constraints, each as its columns.
    pub unique: &'static [&'static [&'static str]],
}

impl CoreTable {
    /// The state table this is, if the chain covers its rows.
    pub fn state(&self) -> Option<StateTable> {
        StateTable::parse(self.name)
    }
}

use ColumnType::{Int, Text};

/// The `written_seq` column of a state table (see [`StateTable`]).
const WRITTEN_SEQ: CoreColumn = CoreColumn::zero("written_seq");

/// Every core table, referenced tables first (the order an engine creates
/// them in).
pub const CORE_TABLES: &[CoreTable] = &[
    CoreTable {
        name: "agentrt_meta",
        columns: &[CoreColumn::key("key", Text), CoreColumn::text("value")],
        primary_key: &["key"],
        unique: &[],
    },
    CoreTable {
        name: "runs",
        columns: &[
            CoreColumn::key("id", Text),
            WRITTEN_SEQ,
            CoreColumn::text("goal"),
            CoreColumn::text("status"),
            CoreColumn::empty_text("reason"),
            CoreColumn::empty_text("reason_detail"),
            CoreColumn::text("limits_json"),
            CoreColumn::zero("step_count"),
            CoreColumn::text("created_at"),
            CoreColumn::empty_text("started_at"),
            CoreColumn::empty_text("finished_at"),
            CoreColumn::empty_text("result_json"),
            CoreColumn::zero("model_calls"),
            CoreColumn::zero("input_tokens"),
            CoreColumn::zero("output_tokens"),
            CoreColumn::zero("cached_input_tokens"),
            CoreColumn::zero("estimated_cost_micros"),
            CoreColumn::zero("active_ms"),
            CoreColumn::empty_text("lease_owner"),
            CoreColumn::empty_text("lease_expires_at"),
        ],
        primary_key: &["id"],
        unique: &[],
    },
    CoreTable {
        name: "run_labels",
        columns: &[
            CoreColumn::key("run_id", Text).of("runs"),
            CoreColumn::text("labels_json"),
            WRITTEN_SEQ,
        ],
        primary_key: &["run_id"],
        unique: &[],
    },
    CoreTable {
        name: "steps",
        columns: &[
            CoreColumn::key("id", Text),
            WRITTEN_SEQ,
            CoreColumn::text("run_id").of("runs"),
            CoreColumn::int("idx"),
            CoreColumn::text("status"),
            CoreColumn::empty_text("decision_json"),
            CoreColumn::empty_text("policy_json"),
            CoreColumn::empty_text("observation_json"),
            CoreColumn::empty_text("observation_hash"),
            CoreColumn::text("started_at"),
            CoreColumn::empty_text("finished_at"),
            CoreColumn::empty_text("spec_hash"),
            CoreColumn::empty_text("policy_id"),
        ],
        primary_key: &["id"],
        unique: &[&["run_id", "idx"]],
    },
    CoreTable {
        name: "events",
        columns: &[
            CoreColumn::key("seq", Int),
            CoreColumn::text("run_id").of("runs"),
            CoreColumn::empty_text("step_id"),
            CoreColumn::text("at"),
            CoreColumn::text("type"),
            CoreColumn::text("payload_json"),
            CoreColumn::empty_text("rows_json"),
            CoreColumn::empty_text("hash"),
        ],
        primary_key: &["seq"],
        unique: &[],
    },
    CoreTable {
        name: "approvals",
        columns: &[
            CoreColumn::key("id", Text),
            WRITTEN_SEQ,
            CoreColumn::text("run_id").of("runs"),
            CoreColumn::text("step_id"),
            CoreColumn::text("kind"),
            CoreColumn::text("capability_json"),
            CoreColumn::text("presentation_json"),
            CoreColumn::text("request_json"),
            CoreColumn::text("hash"),
            CoreColumn::text("status"),
            CoreColumn::text("created_at"),
            CoreColumn::empty_text("decided_at"),
            CoreColumn::empty_text("decided_by"),
            CoreColumn::empty_text("note"),
            CoreColumn::empty_text("expires_at"),
        ],
        primary_key: &["id"],
        unique: &[],
    },
    CoreTable {
        name: "model_calls",
        columns: &[
            CoreColumn::key("id", Text),
            CoreColumn::text("run_id").of("runs"),
            CoreColumn::text("step_id"),
            CoreColumn::int("attempt"),
            CoreColumn::text("status"),
            CoreColumn::text("model"),
            CoreColumn::zero("input_tokens"),
            CoreColumn::zero("output_tokens"),
            CoreColumn::zero("cached_input_tokens"),
            CoreColumn::zero("cost_micros"),
            CoreColumn::zero("latency_ms"),
            CoreColumn::empty_text("error"),
            CoreColumn::text("dispatched_at"),
            CoreColumn::empty_text("completed_at"),
            WRITTEN_SEQ,
        ],
        primary_key: &["id"],
        unique: &[],
    },
    CoreTable {
        name: "tool_specs",
        columns: &[
            CoreColumn::key("hash", Text),
            CoreColumn::text("spec_json"),
            WRITTEN_SEQ,
        ],
        primary_key: &["hash"],
        unique: &[],
    },
    CoreTable {
        name: "extension_migrations",
        columns: &[
            CoreColumn::text("extension"),
            CoreColumn::int("version"),
            CoreColumn::text("ddl_hash"),
            CoreColumn::text("applied_at"),
        ],
        primary_key: &["extension", "version"],
        unique: &[],
    },
    CoreTable {
        name: "extension_tables",
        columns: &[
            CoreColumn::key("name", Text),
            CoreColumn::text("extension"),
            CoreColumn::text("key_column"),
            CoreColumn::text("columns_json"),
        ],
        primary_key: &["name"],
        unique: &[],
    },
];

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::super::schema::MIGRATIONS;
    use super::*;

    /// One column as `pragma_table_info` reports it: name, declared type,
    /// `NOT NULL`, default, primary key position (0: not in the key).
    type PragmaColumn = (String, String, bool, Option<String>, i64);

    fn strings(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    fn described_columns(table: &CoreTable) -> Vec<PragmaColumn> {
        table
            .columns
            .iter()
            .map(|c| {
                let key_at = table.primary_key.iter().position(|k| *k == c.name);
                (
                    c.name.to_owned(),
                    c.kind.name().to_owned(),
                    c.not_null,
                    c.default.map(str::to_owned),
                    key_at.map_or(0, |at| at as i64 + 1),
                )
            })
            .collect()
    }

    fn found_columns(conn: &Connection, table: &str) -> Vec<PragmaColumn> {
        let mut stmt = conn
            .prepare("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1)")
            .unwrap();
        stmt.query_map([table], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
    }

    /// The description is the schema SQLite's migrations leave, table by
    /// table: every column with its type, `NOT NULL`, default and key
    /// position, every foreign key and every unique constraint. A
    /// migration that changes a core table fails here until the
    /// description (and so every other engine's schema) follows.
    #[test]
    fn the_description_is_the_schema_the_sqlite_migrations_leave() {
        let conn = Connection::open_in_memory().unwrap();
        for (_, sql) in MIGRATIONS {
            conn.execute_batch(sql).unwrap();
        }
        let mut tables = strings(
            &conn,
            "SELECT name FROM sqlite_master WHERE type = 'table'
             AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name",
        );
        let mut described: Vec<String> = CORE_TABLES.iter().map(|t| t.name.to_owned()).collect();
        described.sort();
        tables.sort();
        assert_eq!(described, tables);
        for table in CORE_TABLES {
            let name = table.name;
            assert_eq!(
                described_columns(table),
                found_columns(&conn, name),
                "{name}"
            );
            let mut references: Vec<String> = table
                .columns
                .iter()
                .filter_map(|c| c.references.map(|t| format!("{} -> {t}(id)", c.name)))
                .collect();
            references.sort();
            let found = strings(
                &conn,
                &format!(
                    "SELECT \"from\" || ' -> ' || \"table\" || '(' || \"to\" || ')'
                     FROM pragma_foreign_key_list('{name}') ORDER BY 1"
                ),
            );
            assert_eq!(references, found, "{name}");
            let mut unique: Vec<String> = table.unique.iter().map(|u| u.join(", ")).collect();
            unique.sort();
            let found = strings(
                &conn,
                &format!(
                    "SELECT (SELECT group_concat(name, ', ') FROM
                        (SELECT name FROM pragma_index_info(l.name) ORDER BY seqno))
                     FROM pragma_index_list('{name}') AS l WHERE l.origin = 'u' ORDER BY 1"
                ),
            );
            assert_eq!(unique, found, "{name}");
        }
    }

    #[test]
    fn the_state_tables_are_the_described_tables_the_chain_covers() {
        let states: Vec<StateTable> = CORE_TABLES.iter().filter_map(CoreTable::state).collect();
        let mut sorted = states.clone();
        sorted.sort();
        assert_eq!(sorted, StateTable::ALL);
        for state in states {
            let table = CORE_TABLES.iter().find(|t| t.name == state.name()).unwrap();
            assert_eq!(table.primary_key, [state.key_column()]);
        }
    }
}
