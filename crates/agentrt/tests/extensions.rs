//! Satellite tables (issue 10): an extension's own migrations applied and
//! registered by the store, its DDL confined to its own tables, its rows
//! written through typed operations of a write group (synchronous or
//! group-committed), atomically with the core's rows and digested into the
//! chain like them.

mod common;
#[path = "common/write_lock.rs"]
mod write_lock;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use agentrt::chain::{RowValue, row_digest};
use agentrt::store::{Extension, ExtensionTable, SqlValue};
use agentrt::verify::{self, VerifyOptions};
use agentrt::*;
use common::proxy::{self, CALLS, CALLS_DDL, NONCES_DDL, PROXY, PROXY_V1, options};
use write_lock::hold_write_lock;

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn db(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

fn hash(ddl: &str) -> String {
    blake3::hash(ddl.as_bytes()).to_hex().to_string()
}

/// `(extension, version, ddl_hash, applied_at)` of every applied
/// extension migration.
fn applied(path: &Path) -> Vec<(String, i64, String, String)> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare("SELECT extension, version, ddl_hash, applied_at FROM extension_migrations ORDER BY extension, version")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// `(name, extension, key_column, columns_json)` of every registered table.
fn registered(path: &Path) -> Vec<(String, String, String, String)> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare(
            "SELECT name, extension, key_column, columns_json FROM extension_tables ORDER BY name",
        )
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

/// Every schema object of the file: `(type, name, sql)`.
fn schema(path: &Path) -> Vec<(String, String, Option<String>)> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn open_err(path: &Path, extensions: Vec<Extension>) -> Error {
    Store::open_with(
        path,
        StoreOptions {
            extensions,
            ..StoreOptions::default()
        },
    )
    .unwrap_err()
}

fn verify_intact(store: &Store) -> verify::VerifyReport {
    let report = verify::verify(store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    report
}

// ------------------------------------------------------------ migrations

#[test]
fn opening_with_an_extension_applies_its_migrations_in_order_and_registers_its_tables_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "ext.db");
    drop(Store::open_with(&path, options(PROXY_V1)).unwrap());
    let first = applied(&path);
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0].0.as_str(), first[0].1, first[0].2.as_str()),
        ("proxy", 1, hash(CALLS_DDL).as_str())
    );
    Timestamp::parse(&first[0].3).unwrap();
    assert_eq!(
        registered(&path),
        [(
            "proxy_calls".to_owned(),
            "proxy".to_owned(),
            "id".to_owned(),
            r#"["id","session","request_key","run_id","open","outcome"]"#.to_owned()
        )]
    );

    // The next build brings migration 2 and its table; version 1 stays.
    drop(Store::open_with(&path, options(PROXY)).unwrap());
    let second = applied(&path);
    assert_eq!(second.len(), 2);
    assert_eq!(
        second[0], first[0],
        "an applied migration is not applied again"
    );
    assert_eq!((second[1].1, second[1].2.clone()), (2, hash(NONCES_DDL)));
    let tables: Vec<String> = registered(&path).into_iter().map(|r| r.0).collect();
    assert_eq!(tables, ["proxy_calls", "proxy_nonces"]);

    // Reopening is a no-op: same schema, same registry, same records.
    let before = (schema(&path), applied(&path), registered(&path));
    for _ in 0..2 {
        drop(Store::open_with(&path, options(PROXY)).unwrap());
    }
    assert_eq!((schema(&path), applied(&path), registered(&path)), before);

    // Openers without the extension still open the file; one that does
    // not migrate finds the extension at its version.
    drop(Store::open(&path).unwrap());
    drop(Store::open_existing(&path, true).unwrap());
    let store = Store::open_existing_with(&path, true, options(PROXY)).unwrap();
    assert!(store.rows_where("proxy_nonces", &[], 0).unwrap().is_empty());
    // A store opened without the extension does not write or read its tables.
    let plain = Store::open(&path).unwrap();
    assert!(matches!(
        plain.row("proxy_calls", 1),
        Err(Error::NoSuchTable { table }) if table == "proxy_calls"
    ));
    assert!(matches!(
        plain.write(|tx| tx.insert_row("proxy_calls", &[])),
        Err(Error::NoSuchTable { .. })
    ));
}

#[test]
fn an_opener_that_does_not_migrate_refuses_an_extension_at_another_version() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "existing.db");
    drop(Store::open_with(&path, options(PROXY_V1)).unwrap());
    let before = schema(&path);
    for read_only in [true, false] {
        let e = Store::open_existing_with(&path, read_only, options(PROXY)).unwrap_err();
        assert!(
            matches!(&e, Error::ExtensionVersion { extension, database: 1, build: 2, .. } if extension == "proxy"),
            "{e:?}"
        );
    }
    assert_eq!(schema(&path), before, "nothing was migrated");
    // An extension never applied is at version 0.
    let fresh = db(&dir, "fresh.db");
    drop(Store::open(&fresh).unwrap());
    let e = Store::open_existing_with(&fresh, true, options(PROXY)).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::ExtensionVersion {
                database: 0,
                build: 2,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn an_edited_migration_of_an_applied_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "edited.db");
    drop(Store::open_with(&path, options(PROXY)).unwrap());
    let before = (schema(&path), applied(&path));
    const EDITED: &str = "CREATE TABLE proxy_nonces (
    nonce       TEXT PRIMARY KEY,
    seen_at     TEXT NOT NULL,
    uses        INTEGER NOT NULL,
    written_seq INTEGER NOT NULL DEFAULT 0
); ";
    let edited = Extension {
        migrations: &[(1, CALLS_DDL), (2, EDITED)],
        ..PROXY
    };
    for e in [
        open_err(&path, vec![edited]),
        Store::open_existing_with(&path, true, options(edited)).unwrap_err(),
    ] {
        match e {
            Error::ExtensionMigrationChanged {
                extension,
                version,
                applied,
                declared,
            } => {
                assert_eq!((extension.as_str(), version), ("proxy", 2));
                assert_eq!(applied, hash(NONCES_DDL));
                assert_eq!(declared, hash(EDITED));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((schema(&path), applied(&path)), before);
}

#[test]
fn a_database_at_a_newer_extension_version_is_refused_by_both_openers() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "newer.db");
    drop(Store::open_with(&path, options(PROXY)).unwrap());
    let before = (schema(&path), applied(&path));
    for e in [
        open_err(&path, vec![PROXY_V1]),
        Store::open_existing_with(&path, false, options(PROXY_V1)).unwrap_err(),
        Store::open_existing_with(&path, true, options(PROXY_V1)).unwrap_err(),
    ] {
        assert!(
            matches!(&e, Error::ExtensionVersion { path: p, extension, database: 2, build: 1 }
                if extension == "proxy" && p.ends_with("newer.db")),
            "{e:?}"
        );
        assert!(e.to_string().contains("version 2"), "{e}");
    }
    assert_eq!((schema(&path), applied(&path)), before);
}

#[test]
fn concurrent_first_opens_with_an_extension_all_succeed_and_migrate_it_once() {
    const THREADS: usize = 6;
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "race.db");
    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let (path, barrier) = (path.clone(), Arc::clone(&barrier));
            std::thread::spawn(move || {
                barrier.wait();
                Store::open_with(&path, options(PROXY)).map(|_| ())
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap().unwrap();
    }
    assert_eq!(applied(&path).len(), 2);
    assert_eq!(registered(&path).len(), 2);
}

/// What a migration may not do, each after a table of its own was made:
/// the open is refused naming the migration, and nothing of it stays.
#[test]
fn a_migration_that_reaches_outside_its_own_tables_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "CREATE TRIGGER proxy_spy AFTER INSERT ON proxy_calls BEGIN SELECT 1; END;",
            "trigger \"proxy_spy\"",
        ),
        (
            "CREATE TRIGGER proxy_spy AFTER INSERT ON events BEGIN SELECT 1; END;",
            "trigger \"proxy_spy\"",
        ),
        (
            "CREATE VIEW proxy_open AS SELECT * FROM proxy_calls;",
            "view \"proxy_open\"",
        ),
        ("CREATE INDEX proxy_goal ON runs (goal);", "\"runs\""),
        (
            "CREATE INDEX runs_goal ON proxy_calls (session);",
            "index \"runs_goal\"",
        ),
        (
            "ALTER TABLE runs ADD COLUMN proxy TEXT NOT NULL DEFAULT '';",
            "\"runs\"",
        ),
        // Renaming touches the AUTOINCREMENT counters (the core's
        // `events` keeps one), and a table keeps its name anyway.
        (
            "ALTER TABLE proxy_calls RENAME TO proxy_calls_v2;",
            "sqlite_sequence",
        ),
        (
            "ALTER TABLE proxy_calls RENAME TO runs_shadow;",
            "sqlite_sequence",
        ),
        ("DROP TABLE run_labels;", "drops the table \"run_labels\""),
        ("DROP TABLE proxy_calls;", "drops the table \"proxy_calls\""),
        ("UPDATE events SET payload_json = '{}';", "\"events\""),
        ("DELETE FROM events;", "\"events\""),
        (
            "INSERT INTO runs (id, goal, status, limits_json, created_at) VALUES ('x', 'g', 'running', '{}', '');",
            "\"runs\"",
        ),
        (
            "INSERT INTO proxy_calls (session, request_key, run_id) VALUES ('s', 'k', 'r');",
            "writes rows of \"proxy_calls\"",
        ),
        (
            "CREATE TABLE proxy_copy AS SELECT id FROM runs;",
            "\"runs\"",
        ),
        ("CREATE TEMP TABLE proxy_scratch (x TEXT);", "may not"),
        ("PRAGMA foreign_keys = OFF;", "PRAGMA foreign_keys"),
        ("COMMIT; BEGIN;", "transaction"),
        ("SAVEPOINT proxy_sp;", "savepoint"),
        ("ATTACH DATABASE ':memory:' AS proxy_other;", "attaches"),
    ];
    for (n, (bad, says)) in cases.iter().enumerate() {
        let path = db(&dir, &format!("bad-{n}.db"));
        drop(Store::open(&path).unwrap());
        let before = schema(&path);
        let ddl: &'static str = Box::leak(format!("{CALLS_DDL}{bad}").into_boxed_str());
        let ext = Extension {
            name: "proxy",
            migrations: Box::leak(vec![(1, ddl)].into_boxed_slice()),
            tables: &[CALLS],
        };
        let e = open_err(&path, vec![ext]);
        match &e {
            Error::ExtensionMigrationRefused {
                extension,
                version,
                detail,
            } => {
                assert_eq!((extension.as_str(), *version), ("proxy", 1), "{bad}");
                assert!(detail.contains(says), "{bad}: {detail}");
            }
            other => panic!("{bad}: {other:?}"),
        }
        assert_eq!(schema(&path), before, "{bad}: nothing of it stays");
        assert!(applied(&path).is_empty(), "{bad}");
        // The file is as good as before: the right migration applies.
        let store = Store::open_with(&path, options(PROXY)).unwrap();
        verify_intact(&store);
    }
}

#[test]
fn a_declaration_that_breaks_a_rule_is_refused_before_the_file_is_touched() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "declared.db");
    drop(Store::open(&path).unwrap());
    let before = schema(&path);
    let table =
        |name: &'static str, key: &'static str, columns: &'static [&'static str]| ExtensionTable {
            name,
            key_column: key,
            columns,
        };
    let with_tables = |tables: Vec<ExtensionTable>| Extension {
        tables: Box::leak(tables.into_boxed_slice()),
        ..PROXY_V1
    };
    let cases: Vec<(Vec<Extension>, &str)> = vec![
        (
            vec![Extension {
                name: "Proxy",
                ..PROXY_V1
            }],
            "not [a-z]",
        ),
        (
            vec![Extension {
                name: "1proxy",
                ..PROXY_V1
            }],
            "not [a-z]",
        ),
        (
            vec![Extension {
                name: "pro-xy",
                ..PROXY_V1
            }],
            "not [a-z]",
        ),
        (
            vec![Extension {
                name: "p234567890123456789012345678901x",
                ..PROXY_V1
            }],
            "not [a-z]",
        ),
        // Prefixes the core or SQLite owns.
        (
            vec![Extension {
                name: "run",
                ..PROXY_V1
            }],
            "\"run_labels\"",
        ),
        (
            vec![Extension {
                name: "model",
                ..PROXY_V1
            }],
            "\"model_calls\"",
        ),
        (
            vec![Extension {
                name: "extension",
                ..PROXY_V1
            }],
            "\"extension_migrations\"",
        ),
        (
            vec![Extension {
                name: "schema",
                ..PROXY_V1
            }],
            "\"schema_migrations\"",
        ),
        (
            vec![Extension {
                name: "events",
                ..PROXY_V1
            }],
            "\"events_run\"",
        ),
        (
            vec![Extension {
                name: "sqlite",
                ..PROXY_V1
            }],
            "SQLite",
        ),
        // Versions.
        (
            vec![Extension {
                migrations: &[],
                ..PROXY_V1
            }],
            "no migration",
        ),
        (
            vec![Extension {
                migrations: &[(1, CALLS_DDL), (3, NONCES_DDL)],
                ..PROXY_V1
            }],
            "versions are 1, 2",
        ),
        (
            vec![Extension {
                migrations: &[(0, CALLS_DDL)],
                ..PROXY_V1
            }],
            "versions are 1, 2",
        ),
        // Tables.
        (
            vec![with_tables(vec![table("calls", "id", &["id"])])],
            "prefix \"proxy_\"",
        ),
        (
            vec![with_tables(vec![table("proxy_", "id", &["id"])])],
            "prefix \"proxy_\"",
        ),
        (
            vec![with_tables(vec![table("runs", "id", &["id"])])],
            "prefix",
        ),
        (
            vec![with_tables(vec![table("proxy_t", "id", &["session"])])],
            "key column \"id\"",
        ),
        (
            vec![with_tables(vec![table(
                "proxy_t",
                "id",
                &["id", "written_seq"],
            )])],
            "reserved",
        ),
        (
            vec![with_tables(vec![table("proxy_t", "rowid", &["rowid"])])],
            "reserved",
        ),
        (
            vec![with_tables(vec![table("proxy_t", "id", &["id", "id"])])],
            "twice",
        ),
        (
            vec![with_tables(vec![table(
                "proxy_t",
                "id",
                &["id", "Session"],
            )])],
            "not [a-z]",
        ),
        (
            vec![with_tables(vec![
                table("proxy_t", "id", &["id"]),
                table("proxy_t", "id", &["id"]),
            ])],
            "listed twice",
        ),
        // Two extensions whose prefixes overlap, or the same one twice.
        (vec![PROXY, PROXY_V1], "given twice"),
        (
            vec![
                PROXY,
                Extension {
                    name: "proxy_calls",
                    migrations: &[(1, "")],
                    tables: &[],
                },
            ],
            "overlaps",
        ),
    ];
    for (extensions, says) in cases {
        let names: Vec<&str> = extensions.iter().map(|e| e.name).collect();
        match open_err(&path, extensions) {
            Error::ExtensionDeclaration { detail, .. } => {
                assert!(detail.contains(says), "{names:?}: {detail}")
            }
            other => panic!("{names:?}: {other:?}"),
        }
        assert_eq!(schema(&path), before, "{names:?}");
    }
    // An extension whose prefix overlaps one the file already holds.
    drop(Store::open_with(&path, options(PROXY)).unwrap());
    let nested = Extension {
        name: "proxy_x",
        migrations: &[(
            1,
            "CREATE TABLE proxy_x_t (id TEXT NOT NULL PRIMARY KEY, written_seq INTEGER NOT NULL DEFAULT 0)",
        )],
        tables: &[],
    };
    match open_err(&path, vec![nested]) {
        Error::ExtensionDeclaration { extension, detail } => {
            assert_eq!(extension, "proxy_x");
            assert!(detail.contains("which this database holds"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

/// Tables as the migrations leave them must match the declaration and what
/// the chain needs; otherwise the open is refused and nothing stays.
#[test]
fn a_table_the_chain_cannot_cover_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = ExtensionTable {
        name: "proxy_t",
        key_column: "id",
        columns: &["id", "n"],
    };
    let cases: &[(&str, &str)] = &[
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL)",
            "no written_seq column",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER)",
            "declare written_seq INTEGER NOT NULL DEFAULT 0",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 1)",
            "declare written_seq INTEGER NOT NULL DEFAULT 0",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq TEXT NOT NULL DEFAULT 0)",
            "declare written_seq INTEGER NOT NULL DEFAULT 0",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER, written_seq INTEGER NOT NULL DEFAULT 0)",
            "\"n\" may be NULL",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n REAL NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)",
            "\"n\" is \"REAL\"",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, extra TEXT NOT NULL DEFAULT '', written_seq INTEGER NOT NULL DEFAULT 0)",
            "column \"extra\" is not declared",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, written_seq INTEGER NOT NULL DEFAULT 0)",
            "no column \"n\"",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0)",
            "not unique",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
             CREATE UNIQUE INDEX proxy_t_id ON proxy_t (id) WHERE n > 0",
            "not unique",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (id, n))",
            "not unique",
        ),
        (
            "CREATE TABLE proxy_t (id TEXT NOT NULL PRIMARY KEY, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID",
            "WITHOUT ROWID",
        ),
        (
            "CREATE TABLE proxy_other (id TEXT NOT NULL PRIMARY KEY)",
            "does not declare it",
        ),
    ];
    for (n, (ddl, says)) in cases.iter().enumerate() {
        let path = db(&dir, &format!("table-{n}.db"));
        drop(Store::open(&path).unwrap());
        let before = schema(&path);
        let ext = Extension {
            name: "proxy",
            migrations: Box::leak(vec![(1, *ddl)].into_boxed_slice()),
            tables: Box::leak(vec![t].into_boxed_slice()),
        };
        match open_err(&path, vec![ext]) {
            Error::ExtensionSchema {
                extension, detail, ..
            } => {
                assert_eq!(extension, "proxy");
                assert!(detail.contains(says), "{ddl}: {detail}");
            }
            other => panic!("{ddl}: {other:?}"),
        }
        assert_eq!(schema(&path), before, "{ddl}");
        assert!(applied(&path).is_empty() && registered(&path).is_empty());
    }
    // Accepted forms: a unique index of its own, a rowid key, lower case.
    for (n, ddl) in [
        "CREATE TABLE proxy_t (id TEXT NOT NULL, n INTEGER NOT NULL, written_seq INTEGER NOT NULL DEFAULT 0);
         CREATE UNIQUE INDEX proxy_t_id ON proxy_t (id)",
        "create table proxy_t (id text not null primary key, n integer not null, written_seq integer not null default 0) strict",
    ]
    .into_iter()
    .enumerate()
    {
        let path = db(&dir, &format!("good-{n}.db"));
        let ext = Extension {
            name: "proxy",
            migrations: Box::leak(vec![(1, ddl)].into_boxed_slice()),
            tables: Box::leak(vec![t].into_boxed_slice()),
        };
        Store::open_with(&path, options(ext)).unwrap();
    }
}

#[test]
fn a_registered_tables_key_and_columns_never_change_once_it_holds_rows() {
    let dir = tempfile::tempdir().unwrap();
    const ADD_NOTE: &str = "ALTER TABLE proxy_calls ADD COLUMN note TEXT NOT NULL DEFAULT '';";
    const WITH_NOTE: ExtensionTable = ExtensionTable {
        columns: &[
            "id",
            "session",
            "request_key",
            "run_id",
            "open",
            "outcome",
            "note",
        ],
        ..CALLS
    };
    const NOTED: Extension = Extension {
        name: "proxy",
        migrations: &[(1, CALLS_DDL), (2, ADD_NOTE)],
        tables: &[WITH_NOTE],
    };
    // Empty: the new column joins the digest.
    let empty = db(&dir, "empty.db");
    drop(Store::open_with(&empty, options(PROXY_V1)).unwrap());
    drop(Store::open_with(&empty, options(NOTED)).unwrap());
    assert!(registered(&empty)[0].3.ends_with(r#""outcome","note"]"#));

    // Holding a row on the chain: its digest would no longer hold.
    let full = db(&dir, "full.db");
    let store = Store::open_with(&full, options(PROXY_V1)).unwrap();
    store
        .write(|tx| proxy::claim(tx, "s1", "k1", "r1"))
        .unwrap();
    drop(store);
    let before = (schema(&full), registered(&full));
    match open_err(&full, vec![NOTED]) {
        Error::ExtensionSchema { table, detail, .. } => {
            assert_eq!(table, "proxy_calls");
            assert!(detail.contains("1 row(s) are on the chain"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        (schema(&full), registered(&full)),
        before,
        "migration 2 rolled back"
    );
    // A table once registered stays declared.
    let dropped = Extension {
        name: "proxy",
        migrations: &[(1, CALLS_DDL)],
        tables: &[],
    };
    match open_err(&full, vec![dropped]) {
        Error::ExtensionSchema { table, detail, .. } => {
            assert_eq!(table, "proxy_calls");
            assert!(detail.contains("does not declare it"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    let store = Store::open_existing(&full, true).unwrap();
    verify_intact(&store);
}

// ---------------------------------------------------------------- writes

#[test]
fn a_write_group_writes_core_and_extension_rows_atomically_and_chains_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "writes.db");
    let store = Store::open_with(&path, options(PROXY)).unwrap();
    let (id, events) = store
        .write(|tx| proxy::claim(tx, "s1", "k1", "r1"))
        .unwrap();
    assert_eq!(id, SqlValue::Int(1), "SQLite chose the key");
    let seq = events[0].seq;
    let row = store.row("proxy_calls", 1).unwrap().unwrap();
    assert_eq!(row.written_seq(), seq);
    assert_eq!(
        row.values().map(|(c, _)| c).collect::<Vec<_>>(),
        CALLS.columns
    );
    assert_eq!(row.int("open"), Some(1), "the default applied");
    // The row is digested into the group's last event, like the run's row,
    // with the chain's row digest over its declared columns.
    let digest = row_digest(
        "proxy_calls",
        &[
            RowValue::Int(1),
            RowValue::Text(b"s1"),
            RowValue::Text(b"k1"),
            RowValue::Text(b"r1"),
            RowValue::Int(1),
            RowValue::Text(b""),
        ],
    );
    let rows_json: String = raw(&path)
        .query_row("SELECT rows_json FROM events WHERE seq = ?1", [seq], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(
        rows_json.starts_with(&format!(r#"[["proxy_calls","1","{digest}"],["runs","r1","#)),
        "{rows_json}"
    );

    // A group that fails after writing both leaves neither.
    let failed = store.write(|tx| {
        proxy::claim(tx, "s1", "k2", "r2")?;
        Err::<(), _>(Error::InvalidInput {
            what: "test",
            detail: "refused after writing".into(),
        })
    });
    assert!(matches!(failed, Err(Error::InvalidInput { .. })));
    assert!(store.get_run("r2").is_err());
    assert_eq!(store.rows_where("proxy_calls", &[], 0).unwrap().len(), 1);

    // A group that writes an extension row and no event is refused.
    let unexplained = store.write(|tx| {
        tx.insert_row(
            "proxy_nonces",
            &[
                ("nonce", "n1".into()),
                ("seen_at", "t".into()),
                ("uses", 1.into()),
            ],
        )
    });
    match unexplained {
        Err(Error::UnexplainedWrite { table, id, rows }) => {
            assert_eq!((table, id.as_str(), rows), ("proxy_nonces", "n1", 1))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(store.row("proxy_nonces", "n1").unwrap(), None);
    // Nor may an update of one go without an event.
    let unexplained =
        store.write(|tx| tx.update_row("proxy_calls", 1, &[("outcome", "known".into())], &[]));
    assert!(matches!(
        unexplained,
        Err(Error::UnexplainedWrite {
            table: "proxy_calls",
            ..
        })
    ));
    assert_eq!(store.row("proxy_calls", 1).unwrap().unwrap(), row);

    let (key, events) = store.write(|tx| proxy::nonce(tx, "n1", "r1")).unwrap();
    assert_eq!(key, SqlValue::from("n1"));
    assert_eq!(
        store
            .row("proxy_nonces", "n1")
            .unwrap()
            .unwrap()
            .written_seq(),
        events[0].seq
    );
    drop(store);
    verify_intact(&Store::open_existing(&path, true).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_committed_groups_write_extension_rows_and_a_failing_one_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir, "batch.db");
    let store = Store::open_with(&path, options(PROXY)).unwrap();
    let release = hold_write_lock(&path);
    let claim = |session: &'static str, run: &'static str| {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write_async(move |tx| proxy::claim(tx, session, "k", run))
                .await
        })
    };
    let first = claim("s1", "r1");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let failing = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write_async(|tx| {
                    proxy::claim(tx, "s2", "k", "r2")?;
                    proxy::nonce(tx, "n2", "r2")?;
                    Err::<(), _>(Error::InvalidInput {
                        what: "test",
                        detail: "refused after writing".into(),
                    })
                })
                .await
        })
    };
    let unexplained = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .write_async(|tx| {
                    tx.insert_row(
                        "proxy_nonces",
                        &[
                            ("nonce", "n3".into()),
                            ("seen_at", "t".into()),
                            ("uses", 1.into()),
                        ],
                    )
                })
                .await
        })
    };
    // The same open (session, key) as the first: the index refuses it.
    let duplicate = claim("s1", "r4");
    let last = claim("s5", "r5");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    drop(release);

    let (first_id, _) = first.await.unwrap().unwrap();
    assert!(matches!(
        failing.await.unwrap(),
        Err(Error::InvalidInput { what: "test", .. })
    ));
    assert!(matches!(
        unexplained.await.unwrap(),
        Err(Error::UnexplainedWrite {
            table: "proxy_nonces",
            ..
        })
    ));
    let duplicate = duplicate.await.unwrap();
    assert!(
        matches!(
            &duplicate,
            Err(Error::Database {
                kind: DatabaseErrorKind::Constraint,
                ..
            })
        ),
        "{duplicate:?}"
    );
    let (last_id, last_events) = last.await.unwrap().unwrap();
    assert_eq!(
        last_events[0].seq, 2,
        "the groups rolled back left no seq used"
    );
    assert!(store.commits() <= 2, "{} transactions", store.commits());

    let rows = store.rows_where("proxy_calls", &[], 0).unwrap();
    let sessions: Vec<&str> = rows.iter().filter_map(|r| r.text("session")).collect();
    assert_eq!(sessions, ["s1", "s5"]);
    assert_eq!(
        rows.iter()
            .map(|r| r.get("id").cloned().unwrap())
            .collect::<Vec<_>>(),
        [first_id, last_id]
    );
    assert!(store.rows_where("proxy_nonces", &[], 0).unwrap().is_empty());
    for run in ["r2", "r4"] {
        assert!(store.get_run(run).is_err(), "{run}");
    }
    verify_intact(&store);
}

#[test]
fn update_row_is_a_compare_and_set_and_reads_see_what_the_group_wrote() {
    let store = Store::open_with(":memory:", options(PROXY)).unwrap();
    store
        .write(|tx| proxy::claim(tx, "s1", "k1", "r1"))
        .unwrap();
    store
        .write(|tx| proxy::claim(tx, "s1", "k2", "r2"))
        .unwrap();
    store
        .write(|tx| proxy::claim(tx, "s2", "k1", "r3"))
        .unwrap();

    // Closed once: the guard holds, the row changes and is chained anew.
    let (closed, events) = store
        .write(|tx| proxy::close(tx, 1, "known", "r1"))
        .unwrap();
    assert!(closed);
    let row = store.row("proxy_calls", 1).unwrap().unwrap();
    assert_eq!(
        (row.int("open"), row.text("outcome")),
        (Some(0), Some("known"))
    );
    assert_eq!(row.written_seq(), events[0].seq);
    // Twice: the guard no longer holds, nothing changes, and a group that
    // changed nothing needs no event.
    let (closed, events) = store
        .write(|tx| proxy::close(tx, 1, "unknown", "r1"))
        .unwrap();
    assert!(!closed && events.is_empty());
    assert_eq!(store.row("proxy_calls", 1).unwrap().unwrap(), row);
    // A key that is not there applies to nothing.
    assert!(!store.write(|tx| proxy::close(tx, 99, "x", "r1")).unwrap().0);

    // Inside a group, reads see the group's own writes; `run_exists` is
    // decided in the same transaction.
    store
        .write(|tx| {
            assert!(tx.run_exists("r1")?);
            assert!(!tx.run_exists("r9")?);
            let id = proxy::claim(tx, "s9", "k9", "r9")?;
            assert!(tx.run_exists("r9")?);
            let seen = tx.row("proxy_calls", id.clone())?.expect("own write");
            assert_eq!(seen.text("run_id"), Some("r9"));
            assert_eq!(seen.written_seq(), 0, "marked at commit");
            let open = tx.rows_where(
                "proxy_calls",
                &[("session", "s9".into()), ("open", 1.into())],
                0,
            )?;
            assert_eq!(open.len(), 1);
            Ok(())
        })
        .unwrap();

    // Store reads: filters, insertion order, limit.
    let s1 = store
        .rows_where("proxy_calls", &[("session", "s1".into())], 0)
        .unwrap();
    assert_eq!(
        s1.iter()
            .filter_map(|r| r.text("request_key"))
            .collect::<Vec<_>>(),
        ["k1", "k2"]
    );
    let open_s1 = store
        .rows_where(
            "proxy_calls",
            &[("session", "s1".into()), ("open", 1.into())],
            0,
        )
        .unwrap();
    assert_eq!(open_s1.len(), 1);
    assert_eq!(open_s1[0].text("request_key"), Some("k2"));
    assert_eq!(store.rows_where("proxy_calls", &[], 2).unwrap().len(), 2);
    assert_eq!(store.rows_where("proxy_calls", &[], 0).unwrap().len(), 4);
    assert_eq!(store.row("proxy_calls", 42).unwrap(), None);

    // Refusals, each typed, each leaving the row as it was.
    let refusals: Vec<(Error, &str)> = vec![
        (
            store
                .write(|tx| tx.update_row("proxy_calls", 2, &[("id", 7.into())], &[]))
                .unwrap_err(),
            "key",
        ),
        (
            store
                .write(|tx| tx.update_row("proxy_calls", 2, &[], &[]))
                .unwrap_err(),
            "nothing to set",
        ),
        (
            store
                .write(|tx| {
                    tx.update_row(
                        "proxy_calls",
                        2,
                        &[("open", 0.into()), ("open", 1.into())],
                        &[],
                    )
                })
                .unwrap_err(),
            "twice",
        ),
        (
            store
                .write(|tx| tx.update_row("proxy_calls", 2, &[("open", "no".into())], &[]))
                .unwrap_err(),
            "INTEGER",
        ),
        (
            store
                .write(|tx| tx.update_row("proxy_calls", "2", &[("open", 0.into())], &[]))
                .unwrap_err(),
            "INTEGER",
        ),
        (
            store
                .write(|tx| tx.update_row("proxy_calls", 2, &[("written_seq", 0.into())], &[]))
                .unwrap_err(),
            "written_seq",
        ),
        (
            store
                .write(|tx| {
                    tx.update_row(
                        "proxy_calls",
                        2,
                        &[("open", 0.into())],
                        &[("nope", 1.into())],
                    )
                })
                .unwrap_err(),
            "nope",
        ),
        (
            store
                .write(|tx| {
                    tx.insert_row("proxy_calls", &[("session; DROP TABLE runs", "x".into())])
                })
                .unwrap_err(),
            "DROP",
        ),
        (
            store
                .write(|tx| tx.insert_row("runs", &[("id", "x".into())]))
                .unwrap_err(),
            "runs",
        ),
        (
            store
                .write(|tx| {
                    tx.insert_row(
                        "proxy_nonces",
                        &[("nonce", "a".into()), ("nonce", "b".into())],
                    )
                })
                .unwrap_err(),
            "twice",
        ),
        (
            store
                .rows_where("proxy_calls", &[("open", "1".into())], 0)
                .unwrap_err(),
            "INTEGER",
        ),
    ];
    for (e, says) in refusals {
        assert!(
            matches!(
                e,
                Error::ColumnValue { .. }
                    | Error::NoSuchColumn { .. }
                    | Error::NoSuchTable { .. }
                    | Error::InvalidInput {
                        what: "update_row",
                        ..
                    }
            ),
            "{e:?}"
        );
        assert!(e.to_string().contains(says), "{says}: {e}");
    }
    assert_eq!(
        store.row("proxy_calls", 2).unwrap().unwrap().int("open"),
        Some(1)
    );
    assert!(store.get_run("x").is_err());
    verify_intact(&store);
}
