//! An extension's tables described for another engine (`Extension::shape`):
//! what its SQLite migrations leave, read back as plain data; the changes
//! from one version to the next; and what is refused because only SQLite
//! would enforce it as declared.

mod common;

use agentrt::Error;
use agentrt::store::{
    ColumnType, Extension, ExtensionTable, IndexShape, ShapeChange, SqlValue, TableShape,
};
use common::proxy::{CALLS, PROXY, PROXY_V1};

const ITEMS: ExtensionTable = ExtensionTable {
    name: "demo_items",
    key_column: "id",
    columns: &["id", "note"],
};

/// An extension of one table made by `ddl`.
fn demo(ddl: &'static str) -> Extension {
    Extension {
        name: "demo",
        migrations: Box::leak(Box::new([(1, ddl)])),
        tables: &[ITEMS],
    }
}

#[test]
fn the_proxy_index_is_described_with_its_numbered_key_defaults_and_partial_index() {
    let shape = PROXY.shape().unwrap();
    assert_eq!(shape.version, 2);
    let names: Vec<&str> = shape.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["proxy_calls", "proxy_nonces"]);
    let calls = shape.table("proxy_calls").unwrap();
    assert_eq!(calls.primary_key, ["id"]);
    assert_eq!(calls.numbered_key.as_deref(), Some("id"));
    let columns: Vec<(&str, ColumnType, Option<SqlValue>)> = calls
        .columns
        .iter()
        .map(|c| (c.name.as_str(), c.kind, c.default.clone()))
        .collect();
    assert_eq!(
        columns,
        [
            ("id", ColumnType::Int, None),
            ("session", ColumnType::Text, None),
            ("request_key", ColumnType::Text, None),
            ("run_id", ColumnType::Text, None),
            ("open", ColumnType::Int, Some(SqlValue::Int(1))),
            ("outcome", ColumnType::Text, Some(SqlValue::from(""))),
            ("written_seq", ColumnType::Int, Some(SqlValue::Int(0))),
        ]
    );
    assert_eq!(
        calls.indexes,
        [IndexShape {
            name: "proxy_calls_open".into(),
            unique: true,
            columns: vec!["session".into(), "request_key".into()],
            condition: vec![("open".into(), SqlValue::Int(1))],
        }]
    );
    let nonces = shape.table("proxy_nonces").unwrap();
    assert_eq!(nonces.primary_key, ["nonce"]);
    assert_eq!(nonces.numbered_key, None);
}

#[test]
fn a_later_version_is_reached_by_created_tables_indexes_and_recreated_tables() {
    // A table added.
    let changes = PROXY
        .shape()
        .unwrap()
        .changes_from(&PROXY_V1.shape().unwrap())
        .unwrap();
    assert!(
        matches!(&changes[..], [ShapeChange::CreateTable(t)] if t.name == "proxy_nonces"),
        "{changes:?}"
    );
    // Nothing to do between equal versions; everything from version 0.
    let v1 = PROXY_V1.shape().unwrap();
    assert!(v1.changes_from(&v1).unwrap().is_empty());
    let from_nothing = v1.changes_from(&PROXY_V1.shape_at(0).unwrap()).unwrap();
    assert!(matches!(&from_nothing[..], [ShapeChange::CreateTable(t)] if t.name == "proxy_calls"));

    // An index replaced, a column added.
    const V1: &str = "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
                      CREATE INDEX demo_items_note ON demo_items (note);";
    let indexed = Extension {
        name: "demo",
        migrations: &[
            (1, V1),
            (
                2,
                "DROP INDEX demo_items_note; CREATE UNIQUE INDEX demo_items_note ON demo_items (note, id);",
            ),
        ],
        tables: &[ITEMS],
    };
    let changes = indexed
        .shape()
        .unwrap()
        .changes_from(&indexed.shape_at(1).unwrap())
        .unwrap();
    assert!(
        matches!(
            &changes[..],
            [ShapeChange::DropIndex { name, .. }, ShapeChange::CreateIndex { index, .. }]
                if name == "demo_items_note" && index.unique && index.columns == ["note", "id"]
        ),
        "{changes:?}"
    );
    let grown = Extension {
        name: "demo",
        migrations: &[
            (1, V1),
            (
                2,
                "ALTER TABLE demo_items ADD COLUMN extra INTEGER NOT NULL DEFAULT 0;",
            ),
        ],
        tables: &[ExtensionTable {
            name: "demo_items",
            key_column: "id",
            columns: &["id", "note", "extra"],
        }],
    };
    let changes = grown
        .shape()
        .unwrap()
        .changes_from(&grown.shape_at(1).unwrap())
        .unwrap();
    assert!(
        matches!(&changes[..], [ShapeChange::RecreateTable(t)] if t.column("extra").is_some() && t.indexes.len() == 1),
        "{changes:?}"
    );
}

#[test]
fn a_table_a_later_version_lacks_is_refused() {
    let older = PROXY.shape().unwrap();
    let mut newer = older.clone();
    newer
        .tables
        .retain(|t: &TableShape| t.name != "proxy_nonces");
    match newer.changes_from(&older) {
        Err(Error::ExtensionSchema { table, detail, .. }) => {
            assert_eq!(table, "proxy_nonces");
            assert!(detail.contains("never dropped"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn what_only_sqlite_would_enforce_is_refused_naming_it() {
    let cases = [
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY CHECK (id <> ''), note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)",
            "CHECK",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL COLLATE NOCASE, written_seq INTEGER NOT NULL DEFAULT 0)",
            "COLLATE",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY REFERENCES runs(id), note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)",
            "REFERENCES",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP, written_seq INTEGER NOT NULL DEFAULT 0)",
            "not a literal of its type (TEXT)",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX demo_items_lower ON demo_items (lower(note));",
            "expression",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX demo_items_some ON demo_items (note) WHERE note <> '';",
            "partial",
        ),
        (
            "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX demo_items_some ON demo_items (note) WHERE note = 1;",
            "not a value of its type",
        ),
    ];
    for (ddl, says) in cases {
        match demo(ddl).shape() {
            Err(Error::ExtensionSchema { table, detail, .. }) => {
                assert_eq!(table, "demo_items", "{ddl}");
                assert!(detail.contains(says), "{ddl}: {detail}");
                assert!(detail.contains("another engine"), "{detail}");
            }
            other => panic!("{ddl}: {other:?}"),
        }
    }
}

#[test]
fn a_shape_is_checked_as_an_opener_checks_the_extension() {
    // A migration SQLite refuses is refused here too.
    let trigger = demo(
        "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, note TEXT NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
         CREATE TRIGGER demo_t AFTER INSERT ON demo_items BEGIN SELECT 1; END;",
    );
    assert!(matches!(
        trigger.shape(),
        Err(Error::ExtensionMigrationRefused { version: 1, .. })
    ));
    // A declared column the table lacks.
    let missing = demo(
        "CREATE TABLE demo_items (id TEXT NOT NULL PRIMARY KEY, written_seq INTEGER NOT NULL DEFAULT 0)",
    );
    assert!(matches!(
        missing.shape(),
        Err(Error::ExtensionSchema { .. })
    ));
    // No such version.
    assert!(matches!(PROXY.shape_at(3), Err(Error::InvalidInput { .. })));
    assert!(matches!(
        PROXY.shape_at(-1),
        Err(Error::InvalidInput { .. })
    ));
    // At version 1 the declared nonces table is not there yet: described
    // as it was, not refused.
    let v1 = PROXY.shape_at(1).unwrap();
    assert_eq!(v1.tables.len(), 1);
    assert_eq!(v1.tables[0].name, CALLS.name);
}
