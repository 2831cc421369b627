//! Satellites' extension tables on PostgreSQL: created and migrated from
//! their SQLite migrations' description, written and read as on SQLite
//! (one scenario on both engines), and refused where the database or the
//! declaration does not match.

use agentrt::store::{Extension, ExtensionTable, SqlValue, WriteTx};
use agentrt::verify::{self, VerifyOptions};
use agentrt::*;
use agentrt_postgres::PgOptions;

use crate::backends::{self, Backend, client, on_plain_thread};
use crate::common::proxy;

impl Backend {
    /// Opens a store with `options` on it (its extensions created or
    /// migrated), or the engine's refusal.
    pub fn open_with(&self, options: StoreOptions) -> Result<Store> {
        if self.name == "postgres" {
            agentrt_postgres::open_with(
                &self.location,
                PgOptions {
                    store: options,
                    ..PgOptions::default()
                },
            )
        } else {
            Store::open_with(&self.location, options)
        }
    }

    /// Opens a store with `options` without creating or migrating anything.
    pub fn open_existing_with(&self, options: StoreOptions) -> Result<Store> {
        if self.name == "postgres" {
            agentrt_postgres::open_with(
                &self.location,
                PgOptions {
                    store: options,
                    migrate: false,
                    ..PgOptions::default()
                },
            )
        } else {
            Store::open_existing_with(&self.location, false, options)
        }
    }

    /// The rows a query returns on the database, every column as text.
    fn text_rows(&self, sql: &str) -> Vec<Vec<String>> {
        if self.name == "postgres" {
            on_plain_thread(|| {
                client(&self.location)
                    .query(sql, &[])
                    .unwrap()
                    .iter()
                    .map(|row| (0..row.len()).map(|i| row.get(i)).collect())
                    .collect()
            })
        } else {
            let conn = rusqlite::Connection::open(&self.location).unwrap();
            let mut stmt = conn.prepare(sql).unwrap();
            let width = stmt.column_count();
            stmt.query_map([], |r| (0..width).map(|i| r.get::<_, String>(i)).collect())
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap()
        }
    }

    /// Runs one statement behind the store's back.
    fn exec(&self, sql: &str) {
        if self.name == "postgres" {
            on_plain_thread(|| client(&self.location).batch_execute(sql).unwrap());
        } else {
            rusqlite::Connection::open(&self.location)
                .unwrap()
                .execute_batch(sql)
                .unwrap();
        }
    }
}

/// What a write group's outcome shows of itself: its value, or its error's
/// kind.
fn outcome<T: std::fmt::Debug>(result: Result<(T, Vec<Event>)>) -> String {
    match result {
        Ok((value, _)) => format!("ok {value:?}"),
        Err(Error::Database { kind, .. }) => format!("database error {kind:?}"),
        Err(other) => format!("error {other:?}"),
    }
}

/// Every row of both tables as read through the store, in its order.
fn all_rows(store: &Store) -> Vec<String> {
    ["proxy_calls", "proxy_nonces"]
        .into_iter()
        .flat_map(|table| store.rows_where(table, &[], 0).unwrap())
        .map(|row| format!("{row:?}"))
        .collect()
}

fn open_call(tx: &mut WriteTx<'_>, id: Option<i64>, key: &str, run: &str) -> Result<SqlValue> {
    let mut values = vec![
        ("session", SqlValue::from("s1")),
        ("request_key", SqlValue::from(key)),
        ("run_id", SqlValue::from(run)),
    ];
    if let Some(id) = id {
        values.push(("id", SqlValue::Int(id)));
    }
    let key = tx.insert_row("proxy_calls", &values)?;
    tx.append_event(run, "", &crate::common::t0(), EventType::RunStarted, "{}")?;
    Ok(key)
}

/// The extension scenario: numbered and given keys, defaults, a partial
/// unique index, guarded updates, reads of a group's own rows, refused
/// inserts; every outcome, every row and every link as the engine left
/// them, and `verify`'s report.
fn extension_scenario(backend: &Backend) -> (Vec<String>, Vec<String>, Vec<(i64, String)>) {
    let store = backend.open_with(proxy::options(proxy::PROXY)).unwrap();
    let mut outcomes = Vec::new();
    outcomes.push(outcome(
        store.write(|tx| proxy::claim(tx, "s1", "k1", "r1")),
    ));
    outcomes.push(outcome(
        store.write(|tx| proxy::claim(tx, "s1", "k2", "r2")),
    ));
    // A given key, then a numbered one after it, then a given one below.
    outcomes.push(outcome(
        store.write(|tx| open_call(tx, Some(10), "k3", "r1")),
    ));
    outcomes.push(outcome(store.write(|tx| open_call(tx, None, "k4", "r1"))));
    outcomes.push(outcome(
        store.write(|tx| open_call(tx, Some(5), "k5", "r2")),
    ));
    // A second open call for k1: the partial unique index refuses it.
    outcomes.push(outcome(store.write(|tx| open_call(tx, None, "k1", "r1"))));
    // Closed, k1 may be opened again; closing twice applies once.
    outcomes.push(outcome(store.write(|tx| proxy::close(tx, 1, "done", "r1"))));
    outcomes.push(outcome(
        store.write(|tx| proxy::close(tx, 1, "again", "r1")),
    ));
    outcomes.push(outcome(store.write(|tx| open_call(tx, None, "k1", "r1"))));
    // A group reads the row it wrote, and filters see it.
    outcomes.push(outcome(store.write(|tx| {
        let key = open_call(tx, None, "k6", "r2")?;
        let own = tx.row("proxy_calls", key.clone())?;
        let open = tx.rows_where(
            "proxy_calls",
            &[("open", 1.into()), ("session", "s1".into())],
            0,
        )?;
        Ok((
            key,
            own.map(|r| {
                r.values()
                    .map(|(c, v)| format!("{c}={v}"))
                    .collect::<Vec<_>>()
            }),
            open.len(),
        ))
    })));
    outcomes.push(outcome(store.write(|tx| proxy::nonce(tx, "n-1", "r1"))));
    // A duplicate key, and a column without a value or a default.
    outcomes.push(outcome(store.write(|tx| proxy::nonce(tx, "n-1", "r2"))));
    outcomes.push(outcome(store.write(|tx| {
        tx.insert_row(
            "proxy_nonces",
            &[("nonce", "n-2".into()), ("seen_at", "t".into())],
        )?;
        tx.append_event("r1", "", &crate::common::t0(), EventType::RunStarted, "{}")
    })));
    let filtered = store
        .rows_where("proxy_calls", &[("request_key", "k1".into())], 1)
        .unwrap();
    outcomes.push(format!("first k1 {filtered:?}"));
    outcomes.push(format!("row 5 {:?}", store.row("proxy_calls", 5).unwrap()));
    outcomes.push(format!(
        "row 99 {:?}",
        store.row("proxy_calls", 99).unwrap()
    ));
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{}: {report:?}", backend.name);
    let head = verify::chain_head(&store).unwrap().unwrap().seq;
    let links = (1..=head)
        .map(|seq| (seq, verify::event_hash(&store, seq).unwrap().unwrap()))
        .collect();
    (outcomes, all_rows(&store), links)
}

#[test]
fn extension_rows_are_written_read_and_chained_alike_on_both_engines() {
    let [sqlite, postgres] = backends::each();
    let (sqlite_outcomes, sqlite_rows, sqlite_links) = extension_scenario(&sqlite);
    let (pg_outcomes, pg_rows, pg_links) = extension_scenario(&postgres);
    assert_eq!(pg_outcomes, sqlite_outcomes);
    assert_eq!(pg_rows, sqlite_rows);
    assert_eq!(pg_links, sqlite_links);
    // What the scenario is about, so that equal but wrong cannot pass.
    assert!(
        sqlite_outcomes[0].starts_with("ok Int(1)"),
        "{sqlite_outcomes:?}"
    );
    assert!(
        sqlite_outcomes[3].starts_with("ok Int(11)"),
        "{sqlite_outcomes:?}"
    );
    assert_eq!(sqlite_outcomes[5], "database error Constraint");
    assert_eq!(
        sqlite_outcomes[6..8],
        ["ok true".to_owned(), "ok false".to_owned()]
    );
    assert!(
        sqlite_outcomes[8].starts_with("ok Int(12)"),
        "{sqlite_outcomes:?}"
    );
    assert_eq!(sqlite_outcomes[11], "database error Constraint");
    assert_eq!(sqlite_outcomes[12], "database error Constraint");
    // Listed in SQLite's rowid order: the key's, 5 before 10.
    let ids: Vec<String> = sqlite_rows
        .iter()
        .filter(|r| r.contains("proxy_calls"))
        .map(|r| {
            r.split("Int(")
                .nth(1)
                .unwrap()
                .split(')')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids, ["1", "2", "5", "10", "11", "12", "13"]);
}

/// The migrations each engine recorded: `(extension, version, hash)`.
fn recorded_migrations(backend: &Backend) -> Vec<Vec<String>> {
    backend.text_rows(
        "SELECT extension, CAST(version AS TEXT), ddl_hash FROM extension_migrations ORDER BY extension, version",
    )
}

#[test]
fn a_new_version_adds_its_tables_and_records_the_sqlite_hashes() {
    let [sqlite, postgres] = backends::each();
    for backend in [&sqlite, &postgres] {
        let v1 = backend.open_with(proxy::options(proxy::PROXY_V1)).unwrap();
        v1.write(|tx| proxy::claim(tx, "s1", "k1", "r1")).unwrap();
        assert!(matches!(
            v1.row("proxy_nonces", "n-1"),
            Err(Error::NoSuchTable { .. })
        ));
        drop(v1);
        let v2 = backend.open_with(proxy::options(proxy::PROXY)).unwrap();
        v2.write(|tx| proxy::nonce(tx, "n-1", "r1")).unwrap();
        assert_eq!(v2.rows_where("proxy_calls", &[], 0).unwrap().len(), 1);
        assert!(v2.row("proxy_nonces", "n-1").unwrap().is_some());
        assert!(
            verify::verify(&v2, &VerifyOptions::default())
                .unwrap()
                .intact()
        );
    }
    let hashes = |rows: Vec<Vec<String>>| -> Vec<(String, String, String)> {
        rows.into_iter()
            .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
            .collect()
    };
    let on_pg = hashes(recorded_migrations(&postgres));
    assert_eq!(on_pg, hashes(recorded_migrations(&sqlite)));
    assert_eq!(on_pg.len(), 2);
    assert_eq!(
        postgres
            .text_rows("SELECT name, key_column, columns_json FROM extension_tables ORDER BY name"),
        sqlite
            .text_rows("SELECT name, key_column, columns_json FROM extension_tables ORDER BY name")
    );
}

const SEEN_V1: &str = "CREATE TABLE seen_items (
    id TEXT NOT NULL PRIMARY KEY,
    open INTEGER NOT NULL DEFAULT 1,
    written_seq INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX seen_items_one_open ON seen_items (open) WHERE open = 1;";

const SEEN_ITEMS: ExtensionTable = ExtensionTable {
    name: "seen_items",
    key_column: "id",
    columns: &["id", "open"],
};

/// Version 1: at most one open item (a partial unique index).
const SEEN: Extension = Extension {
    name: "seen",
    migrations: &[(1, SEEN_V1)],
    tables: &[SEEN_ITEMS],
};

/// Version 2: the index dropped.
const SEEN_V2: Extension = Extension {
    name: "seen",
    migrations: &[(1, SEEN_V1), (2, "DROP INDEX seen_items_one_open;")],
    tables: &[SEEN_ITEMS],
};

fn seen_item(store: &Store, id: &str) -> Result<(SqlValue, Vec<Event>)> {
    store.write(|tx| {
        tx.insert_run(&proxy::new_run(id))?;
        let key = tx.insert_row("seen_items", &[("id", id.into())])?;
        tx.append_event(id, "", &crate::common::t0(), EventType::RunCreated, "{}")?;
        Ok(key)
    })
}

#[test]
fn a_dropped_index_no_longer_holds_after_the_migration_that_drops_it() {
    let postgres = Backend::postgres();
    let v1 = postgres.open_with(proxy::options(SEEN)).unwrap();
    seen_item(&v1, "a").unwrap();
    assert!(matches!(
        seen_item(&v1, "b"),
        Err(Error::Database {
            kind: DatabaseErrorKind::Constraint,
            ..
        })
    ));
    drop(v1);
    let v2 = postgres.open_with(proxy::options(SEEN_V2)).unwrap();
    seen_item(&v2, "b").unwrap();
    assert_eq!(
        v2.rows_where("seen_items", &[("open", 1.into())], 0)
            .unwrap()
            .len(),
        2
    );
    let indexes = postgres.text_rows(
        "SELECT indexname::text FROM pg_indexes WHERE tablename = 'seen_items' ORDER BY 1",
    );
    assert!(
        !indexes.iter().any(|r| r[0] == "seen_items_one_open"),
        "{indexes:?}"
    );
}

#[test]
fn an_opener_that_does_not_migrate_refuses_an_extension_not_yet_there() {
    let postgres = Backend::postgres();
    drop(postgres.open());
    let refused = postgres.open_existing_with(proxy::options(SEEN));
    assert!(
        matches!(
            refused,
            Err(Error::ExtensionVersion {
                database: 0,
                build: 1,
                ..
            })
        ),
        "{refused:?}"
    );
    drop(postgres.open_with(proxy::options(SEEN)).unwrap());
    let store = postgres.open_existing_with(proxy::options(SEEN)).unwrap();
    seen_item(&store, "a").unwrap();
    // A build with an older version of the extension than the database.
    drop(postgres.open_with(proxy::options(SEEN_V2)).unwrap());
    let older = postgres.open_with(proxy::options(SEEN));
    assert!(
        matches!(
            older,
            Err(Error::ExtensionVersion {
                database: 2,
                build: 1,
                ..
            })
        ),
        "{older:?}"
    );
}

#[test]
fn an_applied_migration_that_changed_is_refused() {
    let postgres = Backend::postgres();
    drop(postgres.open_with(proxy::options(SEEN)).unwrap());
    let edited = Extension {
        migrations: &[(
            1,
            "CREATE TABLE seen_items (id TEXT NOT NULL PRIMARY KEY, open INTEGER NOT NULL DEFAULT 0, written_seq INTEGER NOT NULL DEFAULT 0)",
        )],
        ..SEEN
    };
    let refused = postgres.open_with(proxy::options(edited));
    assert!(
        matches!(
            refused,
            Err(Error::ExtensionMigrationChanged { version: 1, .. })
        ),
        "{refused:?}"
    );
}

const GROWN: Extension = Extension {
    name: "seen",
    migrations: &[
        (1, SEEN_V1),
        (
            2,
            "ALTER TABLE seen_items ADD COLUMN note TEXT NOT NULL DEFAULT '';",
        ),
    ],
    tables: &[ExtensionTable {
        name: "seen_items",
        key_column: "id",
        columns: &["id", "open", "note"],
    }],
};

#[test]
fn a_table_whose_columns_change_is_recreated_only_while_it_holds_no_rows() {
    let empty = Backend::postgres();
    drop(empty.open_with(proxy::options(SEEN)).unwrap());
    let grown = empty.open_with(proxy::options(GROWN)).unwrap();
    seen_item(&grown, "a").unwrap();
    assert_eq!(
        grown.row("seen_items", "a").unwrap().unwrap().text("note"),
        Some("")
    );

    let held = Backend::postgres();
    let v1 = held.open_with(proxy::options(SEEN)).unwrap();
    seen_item(&v1, "a").unwrap();
    drop(v1);
    let refused = held.open_with(proxy::options(GROWN));
    match refused {
        Err(Error::ExtensionSchema { table, detail, .. }) => {
            assert_eq!(table, "seen_items");
            assert!(detail.contains("holds 1 row(s)"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Nothing of the refused migration stayed: version 1 still opens.
    let v1 = held.open_with(proxy::options(SEEN)).unwrap();
    assert!(v1.row("seen_items", "a").unwrap().is_some());
}

#[test]
fn a_table_edited_behind_the_store_or_left_undeclared_is_refused() {
    let postgres = Backend::postgres();
    drop(postgres.open_with(proxy::options(SEEN)).unwrap());
    postgres.exec("ALTER TABLE seen_items ADD COLUMN extra TEXT NOT NULL DEFAULT ''");
    match postgres.open_with(proxy::options(SEEN)) {
        Err(Error::ExtensionSchema { detail, .. }) => {
            assert!(detail.contains("\"extra\""), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    postgres.exec("ALTER TABLE seen_items DROP COLUMN extra; CREATE TABLE seen_other (id TEXT)");
    match postgres.open_with(proxy::options(SEEN)) {
        Err(Error::ExtensionSchema { table, detail, .. }) => {
            assert_eq!(table, "seen_other");
            assert!(detail.contains("does not declare it"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_table_relying_on_what_only_sqlite_enforces_is_refused_before_anything_is_created() {
    let postgres = Backend::postgres();
    let checked = Extension {
        migrations: &[(
            1,
            "CREATE TABLE seen_items (
            id TEXT NOT NULL PRIMARY KEY CHECK (id <> ''),
            open INTEGER NOT NULL DEFAULT 1,
            written_seq INTEGER NOT NULL DEFAULT 0)",
        )],
        ..SEEN
    };
    match postgres.open_with(proxy::options(checked)) {
        Err(Error::ExtensionSchema { detail, .. }) => {
            assert!(detail.contains("CHECK"), "{detail}")
        }
        other => panic!("{other:?}"),
    }
    // SQLite itself takes it.
    let sqlite = Backend::sqlite();
    assert!(sqlite.open_with(proxy::options(checked)).is_ok());
    let tables = postgres.text_rows(
        "SELECT table_name::text FROM information_schema.tables WHERE table_name LIKE 'seen%'",
    );
    assert!(tables.is_empty(), "{tables:?}");
}

#[test]
fn a_copied_database_keeps_its_extension_tables_and_the_satellite_writes_on() {
    let sqlite = Backend::sqlite();
    let source = sqlite.open_with(proxy::options(proxy::PROXY)).unwrap();
    source
        .write(|tx| proxy::claim(tx, "s1", "k1", "r1"))
        .unwrap();
    source
        .write(|tx| open_call(tx, Some(7), "k2", "r1"))
        .unwrap();
    source
        .write(|tx| open_call(tx, Some(3), "k3", "r1"))
        .unwrap();
    source
        .write(|tx| proxy::close(tx, 1, "done", "r1"))
        .unwrap();
    source.write(|tx| proxy::nonce(tx, "n-1", "r1")).unwrap();
    let postgres = Backend::postgres();
    let report = agentrt_postgres::copy_from(&source, &postgres.location).unwrap();
    assert!(
        report.rows.contains(&("proxy_calls".to_owned(), 3)),
        "{report:?}"
    );
    assert!(
        report.rows.contains(&("proxy_nonces".to_owned(), 1)),
        "{report:?}"
    );
    // Verified without the satellite, as the CLI does: the same head.
    let reader = postgres.open();
    let copied = verify::verify(&reader, &VerifyOptions::default()).unwrap();
    let original = verify::verify(&source, &VerifyOptions::default()).unwrap();
    assert!(copied.intact(), "{copied:?}");
    assert_eq!(copied.head, original.head);
    drop(reader);
    // The satellite opens the copy at the version the source held, and
    // both go on alike (a numbered key after the largest).
    let copy = postgres.open_with(proxy::options(proxy::PROXY)).unwrap();
    assert_eq!(all_rows(&copy), all_rows(&source));
    for store in [&source, &copy] {
        let (key, _) = store.write(|tx| open_call(tx, None, "k4", "r1")).unwrap();
        assert_eq!(key, SqlValue::Int(8));
    }
    assert_eq!(all_rows(&copy), all_rows(&source));
    assert!(
        verify::verify(&copy, &VerifyOptions::default())
            .unwrap()
            .intact()
    );
    assert_eq!(recorded_migrations(&postgres), recorded_migrations(&sqlite));
    // Into a database that already holds extension tables: refused.
    let again = agentrt_postgres::copy_from(&source, &postgres.location);
    assert!(again.is_err(), "{again:?}");
}

#[test]
fn hosts_opening_a_new_database_with_an_extension_at_once_create_it_once() {
    let postgres = Backend::postgres();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| drop(postgres.open_with(proxy::options(proxy::PROXY)).unwrap()));
        }
    });
    assert_eq!(recorded_migrations(&postgres).len(), 2);
    let store = postgres.open_with(proxy::options(proxy::PROXY)).unwrap();
    store
        .write(|tx| proxy::claim(tx, "s1", "k1", "r1"))
        .unwrap();
    assert!(
        verify::verify(&store, &VerifyOptions::default())
            .unwrap()
            .intact()
    );
}

/// A table read in orders and bounds: a text key (insertion order is the
/// engine's own), and an index whose columns are a filter's and then an
/// order's.
const ORDERED: Extension = Extension {
    name: "ordered",
    migrations: &[(
        1,
        "CREATE TABLE ordered_items (
             id          TEXT NOT NULL PRIMARY KEY,
             kind        TEXT NOT NULL,
             at          TEXT NOT NULL,
             written_seq INTEGER NOT NULL DEFAULT 0
         );
         CREATE INDEX ordered_items_kind_at ON ordered_items (kind, at);",
    )],
    tables: &[ExtensionTable {
        name: "ordered_items",
        key_column: "id",
        columns: &["id", "kind", "at"],
    }],
};

/// The ids of `rows`, in their order.
fn ids(rows: &[agentrt::store::ExtensionRow]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| r.text("id").map(str::to_owned))
        .collect()
}

/// Writes five rows and reads them back in every order and bound, inside a
/// write group and outside.
fn ordered_scenario(backend: &Backend) -> Vec<Vec<String>> {
    use agentrt::store::{RowOrder, RowQuery};
    let store = backend.open_with(proxy::options(ORDERED)).unwrap();
    let rows = [
        ("a", "k", "t3"),
        ("b", "k", "t1"),
        ("c", "other", "t9"),
        ("d", "k", "t5"),
        ("e", "k", "t3"),
    ];
    let (inside, _) = store
        .write(|tx| {
            tx.insert_run(&proxy::new_run("r1"))?;
            for (id, kind, at) in rows {
                tx.insert_row(
                    "ordered_items",
                    &[("id", id.into()), ("kind", kind.into()), ("at", at.into())],
                )?;
            }
            let kind = [("kind", SqlValue::from("k"))];
            let newest = tx.rows_by(
                "ordered_items",
                &RowQuery::matching(&kind).newest_first().limit(1),
            )?;
            tx.append_event("r1", "", &crate::common::t0(), EventType::RunCreated, "{}")?;
            Ok(ids(&newest))
        })
        .unwrap();
    let kind = [("kind", SqlValue::from("k"))];
    let t3 = SqlValue::from("t3");
    let read = |query: RowQuery<'_>| ids(&store.rows_by("ordered_items", &query).unwrap());
    vec![
        inside,
        read(RowQuery::matching(&kind)),
        read(RowQuery::matching(&kind).newest_first().limit(2)),
        read(RowQuery::matching(&[]).newest_first()),
        read(RowQuery {
            at_least: Some(("at", &t3)),
            order: RowOrder::Highest("at"),
            ..RowQuery::matching(&kind)
        }),
        read(RowQuery {
            order: RowOrder::Highest("at"),
            ..RowQuery::matching(&kind).limit(3)
        }),
    ]
}

#[test]
fn ordered_and_bounded_extension_reads_answer_alike_on_both_engines() {
    let [sqlite, postgres] = backends::each();
    let on_sqlite = ordered_scenario(&sqlite);
    assert_eq!(ordered_scenario(&postgres), on_sqlite);
    let want: [&[&str]; 6] = [
        &["e"],
        &["a", "b", "d", "e"],
        &["e", "d"],
        &["e", "d", "c", "b", "a"],
        // Highest first, the newest first among equals.
        &["d", "e", "a"],
        &["d", "e", "a"],
    ];
    assert_eq!(
        on_sqlite,
        want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    );
    // On PostgreSQL the index ends with insertion order, as SQLite's ends
    // with the rowid, so a newest-first read by its columns needs no sort.
    let defs = postgres
        .text_rows("SELECT indexdef FROM pg_indexes WHERE indexname = 'ordered_items_kind_at'");
    assert!(defs[0][0].ends_with("(kind, at, _pos)"), "{defs:?}");
}
