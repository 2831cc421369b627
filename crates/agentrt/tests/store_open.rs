//! The store's opening and file rules (design §4, acceptance
//! controls 1–7): schema and meta at creation, concurrent first opens,
//! version refusals, file modes and ownership, unsafe schemas, symlinks,
//! read-only opens and path spelling.
//!
//! A few Unix tests need a process-wide setting (the umask) or another user
//! (a directory the opener cannot write, which root can): they run one
//! `#[ignore]`d helper test of this binary in a child process, through
//! `sh -c 'umask 000 …'` or `setpriv`, and check that it passed.

#[cfg(unix)]
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use agentrt::store::NewRun;
use agentrt::{Durability, Error, EventType, Limits, Store, StoreOptions, Timestamp};

// ---------------------------------------------------------------- helpers

fn t(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

fn limits_json() -> String {
    serde_json::to_string(&Limits::default()).unwrap()
}

/// Writes a run and its `run.created` event in one write group.
fn write_run(store: &Store, id: &str) -> Vec<agentrt::Event> {
    let at = t("2026-10-01T09:00:00Z");
    let limits = limits_json();
    let (_, events) = store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id,
                goal: "reopen me",
                limits_json: &limits,
                created_at: at,
                lease_owner: "owner-1",
                lease_expires_at: at,
            })?;
            tx.append_event(
                id,
                "",
                &at,
                EventType::RunCreated,
                r#"{"goal":"reopen me"}"#,
            )?;
            Ok(())
        })
        .unwrap();
    events
}

/// A migrated database at `path` holding run `r1`, with every connection
/// closed again.
fn make_db(path: &Path) {
    let store = Store::open(path).unwrap();
    write_run(&store, "r1");
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .unwrap()
}

/// Turns a database of this build back into what a schema-4 build left:
/// `events` with `AUTOINCREMENT` as migration 1 created it (its counter at
/// the highest seq), the rows as they were.
fn undo_migration_5(conn: &rusqlite::Connection) {
    let events_ddl = &agentrt::store::engine::schema::MIGRATION_1
        [agentrt::store::engine::schema::MIGRATION_1
            .find("CREATE TABLE events")
            .unwrap()..];
    let events_ddl = &events_ddl[..events_ddl.find(");").unwrap() + 2];
    assert!(events_ddl.contains("AUTOINCREMENT"), "{events_ddl}");
    conn.execute_batch(&format!(
        "ALTER TABLE events RENAME TO events_new;
         DROP INDEX events_run;
         {events_ddl}
         CREATE INDEX events_run ON events (run_id, seq);
         INSERT INTO events SELECT * FROM events_new ORDER BY seq;
         DROP TABLE events_new;
         DELETE FROM schema_migrations WHERE version = 5;"
    ))
    .unwrap();
}

/// Begins run `id` through a gate with `labels` and closes it.
fn begin_and_close(store: &Store, id: &str, labels: agentrt::Labels) {
    use agentrt::{DefaultPolicy, Gate, GateConfig};
    let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![])).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let mut session = gate
                .begin_labelled(Some(id), "migrate me", Limits::default(), labels)
                .await
                .unwrap();
            session.close().await.unwrap();
        });
}

/// `open_existing`, read-only and not, refuses `db` as a schema-`version`
/// database older than this build.
fn refused_as_older(db: &Path, version: i64) {
    for read_only in [true, false] {
        let e = open_existing_err(db, read_only);
        assert!(
            matches!(&e, Error::SchemaVersion { database, build, .. }
                if *database == version && *build == agentrt::store::engine::schema::SCHEMA_VERSION),
            "{e:?}"
        );
    }
}

/// The SQL text SQLite keeps for table `name`.
fn table_sql(conn: &rusqlite::Connection, name: &str) -> String {
    conn.query_row(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?1",
        [name],
        |r| r.get(0),
    )
    .unwrap()
}

fn sidecar(db: &Path, suffix: &str) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// The names in a directory.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every entry of a directory with a hash of its bytes and its
/// modification time.
#[cfg(unix)]
fn snapshot(dir: &Path) -> BTreeMap<String, (String, std::time::SystemTime)> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                (
                    blake3::hash(&fs::read(e.path()).unwrap())
                        .to_hex()
                        .to_string(),
                    meta.modified().unwrap(),
                ),
            )
        })
        .collect()
}

fn open_existing_err(path: &Path, read_only: bool) -> Error {
    match Store::open_existing(path, read_only) {
        Ok(_) => panic!("open_existing({}, {read_only}) succeeded", path.display()),
        Err(e) => e,
    }
}

fn open_err(path: &Path) -> Error {
    match Store::open(path) {
        Ok(_) => panic!("open({}) succeeded", path.display()),
        Err(e) => e,
    }
}

#[cfg(unix)]
mod unix {
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    pub const CHILD_DIR: &str = "AGENTRT_STORE_OPEN_CHILD_DIR";

    pub fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    pub fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    /// The directory a parent test handed to a helper test, or `None` when
    /// the helper was started some other way (`cargo test -- --ignored`).
    pub fn child_dir() -> Option<PathBuf> {
        std::env::var_os(CHILD_DIR).map(PathBuf::from)
    }

    /// Runs the ignored helper test `test` of this binary in a child
    /// process started through `wrapper` (the program and its arguments
    /// before ours), in `cwd`, and asserts that it ran and passed.
    pub fn run_child(wrapper: &[&str], test: &str, dir: &Path, cwd: Option<&Path>) {
        let out = child_output(wrapper, test, dir, cwd);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "helper {test} failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
    }

    /// Runs a helper test of this binary as [`run_child`] does and returns
    /// what it did.
    pub fn child_output(
        wrapper: &[&str],
        test: &str,
        dir: &Path,
        cwd: Option<&Path>,
    ) -> std::process::Output {
        let exe = std::env::current_exe().unwrap();
        let mut cmd = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args([
            test,
            "--exact",
            "--ignored",
            "--test-threads=1",
            "--nocapture",
        ])
        .env(CHILD_DIR, dir);
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        cmd.output().unwrap()
    }

    /// `true` when this process may write a directory whose mode forbids it
    /// (root, or a capability that bypasses permission checks).
    pub fn permission_checks_bypassed(scratch: &Path) -> bool {
        let dir = scratch.join("probe-dir");
        fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o555);
        let bypassed = fs::write(dir.join("probe"), b"").is_ok();
        chmod(&dir, 0o755);
        fs::remove_dir_all(&dir).unwrap();
        bypassed
    }

    /// The arguments that run a program as `nobody` (uid and gid 65534)
    /// through `setpriv`, if it is installed and allowed to switch here.
    pub fn as_nobody() -> Option<Vec<&'static str>> {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| Path::new(p).exists())?;
        let args = vec![setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"];
        let works = Command::new(args[0])
            .args(&args[1..])
            .arg("true")
            .status()
            .is_ok_and(|s| s.success());
        works.then_some(args)
    }

    /// Restores a directory's mode when dropped, so a failing test still
    /// lets its temporary directory be removed.
    pub struct RestoreMode<'a>(pub &'a Path, pub u32);

    impl Drop for RestoreMode<'_> {
        fn drop(&mut self) {
            let _ = fs::set_permissions(self.0, fs::Permissions::from_mode(self.1));
        }
    }
}

// ------------------------------------------------------------- control 1

const TABLES: [&str; 11] = [
    "agentrt_meta",
    "approvals",
    "events",
    "extension_migrations",
    "extension_tables",
    "model_calls",
    "run_labels",
    "runs",
    "schema_migrations",
    "steps",
    "tool_specs",
];

#[test]
fn fresh_store_has_every_table_at_the_current_version_with_its_meta() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("fresh.db");
    let store = Store::open(&db).unwrap();
    assert_eq!(store.path(), Some(db.as_path()));
    assert!(store.list_runs(0, 0).unwrap().items.is_empty());

    let conn = raw(&db);
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        )
        .unwrap();
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(tables, TABLES);

    let versions: Vec<(i64, String)> = conn
        .prepare("SELECT version, applied_at FROM schema_migrations")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        versions.iter().map(|v| v.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, agentrt::store::engine::schema::SCHEMA_VERSION]
    );
    assert_eq!(agentrt::store::engine::schema::SCHEMA_VERSION, 5);
    for (_, applied_at) in &versions {
        Timestamp::parse(applied_at).unwrap();
    }

    let meta: Vec<(String, String)> = conn
        .prepare("SELECT key, value FROM agentrt_meta ORDER BY key")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(String, String)> = [
        (
            "canonical_form",
            agentrt::store::engine::schema::CANONICAL_FORM,
        ),
        (
            "hash_algorithm",
            agentrt::store::engine::schema::HASH_ALGORITHM,
        ),
        ("time_format", agentrt::store::engine::schema::TIME_FORMAT),
        // A new database has no row older than the chain.
        ("unchained_rows", "0"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    assert_eq!(meta, want);
    assert_eq!(meta[1].1, "blake3-256");

    // The in-memory store is migrated too.
    let memory = Store::open(":memory:").unwrap();
    assert_eq!(memory.path(), None);
    write_run(&memory, "m1");
    assert_eq!(memory.get_run("m1").unwrap().goal, "reopen me");
}

#[test]
fn file_store_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("reopen.db");
    let written = {
        let store = Store::open(&db).unwrap();
        write_run(&store, "r1")
    };
    assert_eq!(written.len(), 1);

    let reopened = [
        Store::open(&db).unwrap(),
        Store::open_existing(&db, false).unwrap(),
        Store::open_existing(&db, true).unwrap(),
    ];
    for store in &reopened {
        let run = store.get_run("r1").unwrap();
        assert_eq!(run.goal, "reopen me");
        assert_eq!(run.status, agentrt::RunStatus::Running);
        assert_eq!(run.created_at, t("2026-10-01T09:00:00Z"));
        assert_eq!(run.decode_error, None);
        assert_eq!(store.list_events("r1").unwrap(), written);
    }
    // A second open migrated nothing again.
    let n: i64 = raw(&db)
        .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, agentrt::store::engine::schema::MIGRATIONS.len() as i64);
}

#[test]
fn file_store_uses_wal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("wal.db");
    for options in [
        StoreOptions::default(),
        StoreOptions {
            durability: Durability::Normal,
            ..StoreOptions::default()
        },
    ] {
        let store = Store::open_with(&db, options).unwrap();
        write_run(
            &store,
            &format!("r-{}", store.list_runs(0, 0).unwrap().total),
        );
        let mode: String = raw(&db)
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
        // WAL mode is what keeps the -wal sidecar around while a store is open.
        assert!(sidecar(&db, "-wal").exists());
    }
}

// ------------------------------------------------------------- control 2

#[test]
fn concurrent_first_opens_all_succeed_and_migrate_once() {
    const THREADS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let db = dir.path().join(format!("race-{round}.db"));
        let barrier = Arc::new(Barrier::new(THREADS));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (db, barrier) = (db.clone(), Arc::clone(&barrier));
                std::thread::spawn(move || {
                    barrier.wait();
                    Store::open(&db).map(|store| store.list_runs(0, 0).map(|p| p.total))
                })
            })
            .collect();
        for h in handles {
            match h.join().unwrap() {
                Ok(Ok(0)) => {}
                other => panic!("round {round}: an opener failed: {other:?}"),
            }
        }
        let conn = raw(&db);
        let rows: i64 = conn
            .query_row("SELECT COUNT(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            rows,
            agentrt::store::engine::schema::MIGRATIONS.len() as i64,
            "round {round}"
        );
        let meta: i64 = conn
            .query_row("SELECT COUNT(*) FROM agentrt_meta", [], |r| r.get(0))
            .unwrap();
        assert_eq!(meta, 4, "round {round}");
    }
}

// ------------------------------------------------------------- control 3

#[test]
fn newer_database_is_refused_by_both_openers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("newer.db");
    make_db(&db);
    #[cfg(unix)]
    unix::chmod(&db, 0o644);
    raw(&db)
        .execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (6, '2030-01-01T00:00:00.000000000Z')",
            [],
        )
        .unwrap();
    let errors = [
        open_err(&db),
        open_existing_err(&db, false),
        open_existing_err(&db, true),
    ];
    for e in errors {
        assert!(
            matches!(&e, Error::SchemaVersion { path, database: 6, build: 5 } if path == &db),
            "{e:?}"
        );
    }
    // Nothing was migrated or removed.
    let versions: Vec<i64> = raw(&db)
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5, 6]);
    #[cfg(unix)]
    assert_eq!(
        unix::mode(&db),
        0o644,
        "a refused file keeps its permissions"
    );
}

#[test]
fn older_or_unmigrated_database_is_refused_by_open_existing() {
    let dir = tempfile::tempdir().unwrap();
    // No rows at all, or a version-0 row: both read as version 0.
    for (name, rows) in [("empty.db", ""), ("zero.db", "(0, '')")] {
        let db = dir.path().join(name);
        let conn = raw_create(&db);
        conn.execute_batch(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL)",
        )
        .unwrap();
        if !rows.is_empty() {
            conn.execute_batch(&format!(
                "INSERT INTO schema_migrations (version, applied_at) VALUES {rows}"
            ))
            .unwrap();
        }
        drop(conn);
        for read_only in [true, false] {
            let e = open_existing_err(&db, read_only);
            assert!(
                matches!(&e, Error::SchemaVersion { path, database: 0, build: 5 } if path == &db),
                "{name} read_only={read_only}: {e:?}"
            );
        }
        // open_existing migrated nothing ...
        let tables: i64 = raw(&db)
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(tables, 1, "{name}");
        // ... while the creating opener brings an older file up to date.
        let store = Store::open(&db).unwrap();
        write_run(&store, "r1");
        drop(store);
        Store::open_existing(&db, true)
            .unwrap()
            .get_run("r1")
            .unwrap();
    }
}

/// A database a schema-2 build left: runs written without labels (which
/// this build writes byte for byte as schema 2 did), no `run_labels` table
/// and no extension registry. It is refused by `open_existing` and migrated
/// to 3 and 4 by `open`: the
/// old runs read back with no labels, the chain stays intact, and labelled
/// runs written afterwards are stored, filtered and chained.
#[test]
fn a_schema_2_database_migrates_to_3_and_takes_labels() {
    use agentrt::Labels;
    use agentrt::verify::{self, VerifyOptions};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema2.db");
    let begin = begin_and_close;
    let store = Store::open(&db).unwrap();
    begin(&store, "old1", Labels::new());
    begin(&store, "old2", Labels::new());
    drop(store);
    let conn = raw(&db);
    let labelled: i64 = conn
        .query_row("SELECT COUNT(*) FROM run_labels", [], |r| r.get(0))
        .unwrap();
    assert_eq!(labelled, 0, "a run without labels writes no label row");
    undo_migration_5(&conn);
    conn.execute_batch(
        "DROP TABLE run_labels; DROP TABLE extension_migrations; DROP TABLE extension_tables;
         DELETE FROM schema_migrations WHERE version >= 3;",
    )
    .unwrap();
    drop(conn);

    refused_as_older(&db, 2);
    let store = Store::open(&db).unwrap();
    let versions: Vec<i64> = raw(&db)
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5]);
    let runs = store.list_runs(0, 0).unwrap();
    assert_eq!(runs.total, 2);
    for run in &runs.items {
        assert!(run.labels.is_empty(), "{run:?}");
        assert_eq!(run.decode_error, None);
    }
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.unchained_rows, 0);

    let labels = Labels::parse(["host=build-7"]).unwrap();
    begin(&store, "new", labels.clone());
    let page = store.list_runs_labelled(0, 0, &labels).unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.items[0].id, "new");
    assert_eq!(page.items[0].labels, labels);
    assert_eq!(store.get_run("old1").unwrap().labels, Labels::new());
    drop(store);
    let report = verify::verify(
        &Store::open_existing(&db, true).unwrap(),
        &VerifyOptions::default(),
    )
    .unwrap();
    assert!(report.intact(), "{report:?}");
    let written: i64 = raw(&db)
        .query_row(
            "SELECT written_seq FROM run_labels WHERE run_id = 'new'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(written > 0, "the label row is chained");
}

/// A database a schema-3 build left (no extension registry) is refused by
/// `open_existing` and migrated to 4 by an opener that brings an
/// extension, which is applied in the same open; what was there verifies,
/// and so do the extension's rows written afterwards.
#[test]
fn a_schema_3_database_migrates_to_4_and_takes_an_extension() {
    use agentrt::store::{Extension, ExtensionTable, SqlValue};
    use agentrt::verify::{self, VerifyOptions};

    const NONCES: Extension = Extension {
        name: "nonces",
        migrations: &[(
            1,
            "CREATE TABLE nonces_seen (nonce TEXT NOT NULL PRIMARY KEY,
                 written_seq INTEGER NOT NULL DEFAULT 0)",
        )],
        tables: &[ExtensionTable {
            name: "nonces_seen",
            key_column: "nonce",
            columns: &["nonce"],
        }],
    };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema3.db");
    make_db(&db);
    let conn = raw(&db);
    undo_migration_5(&conn);
    conn.execute_batch(
        "DROP TABLE extension_migrations; DROP TABLE extension_tables;
         DELETE FROM schema_migrations WHERE version = 4;",
    )
    .unwrap();
    drop(conn);
    refused_as_older(&db, 3);
    let options = StoreOptions {
        extensions: vec![NONCES],
        ..StoreOptions::default()
    };
    let store = Store::open_with(&db, options).unwrap();
    let versions: Vec<i64> = raw(&db)
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, [1, 2, 3, 4, 5]);
    let at = t("2026-10-01T09:00:00Z");
    store
        .write(|tx| {
            tx.insert_row("nonces_seen", &[("nonce", SqlValue::from("n1"))])?;
            tx.append_event("r1", "", &at, EventType::RunStarted, "{}")
        })
        .unwrap();
    drop(store);
    let store = Store::open_existing(&db, true).unwrap();
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 2);
}

/// A database a schema-4 build wrote (events counted by `AUTOINCREMENT`)
/// is migrated to 5: every event copied as it was, so `verify` passes with
/// the same head; the table is rebuilt without the counter; new events
/// follow the head, chained, and verify again.
#[test]
fn a_schema_4_database_migrates_to_5_with_its_chain_and_head() {
    use agentrt::Labels;
    use agentrt::verify::{self, VerifyOptions};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("schema4.db");
    let begin = |store: &Store, id: &str| {
        begin_and_close(
            store,
            id,
            Labels::parse([format!("run={id}").as_str()]).unwrap(),
        )
    };
    let store = Store::open(&db).unwrap();
    begin(&store, "old1");
    begin(&store, "old2");
    drop(store);
    let conn = raw(&db);
    undo_migration_5(&conn);
    let counter: i64 = conn
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    drop(conn);
    assert!(counter > 0);
    refused_as_older(&db, 4);

    let store = Store::open(&db).unwrap();
    let conn = raw(&db);
    assert!(!table_sql(&conn, "events").contains("AUTOINCREMENT"));
    let counters: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_sequence WHERE name = 'events'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(counters, 0, "no counter is kept for events any more");
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, counter as u64);
    let head = report.head.clone().unwrap();
    assert_eq!(
        store.get_run("old1").unwrap().labels,
        Labels::parse(["run=old1"]).unwrap()
    );

    begin(&store, "new");
    drop(store);
    let store = Store::open_existing(&db, true).unwrap();
    let report = verify::verify(
        &store,
        &VerifyOptions {
            kept_head: Some(head),
            ..VerifyOptions::default()
        },
    )
    .unwrap();
    assert!(report.intact(), "{report:?}");
    let events = store.list_events("new").unwrap();
    assert_eq!(events[0].seq, counter + 1, "the next seq follows the head");
}

/// A migration copies rows as they are: a schema-4 file whose run row was
/// deleted by hand (its events left behind) still opens, and
/// `verify` names the gone row, where a copy checking references would
/// refuse the open and leave the file unverifiable by this build.
#[test]
fn a_tampered_schema_4_database_migrates_and_verify_names_the_break() {
    use agentrt::verify::{self, VerifyOptions};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tampered.db");
    make_db(&db);
    let conn = raw(&db);
    undo_migration_5(&conn);
    // As anyone with the sqlite3 shell: no foreign-key checks.
    conn.execute_batch("PRAGMA foreign_keys = OFF; DELETE FROM runs WHERE id = 'r1'")
        .unwrap();
    drop(conn);

    let store = Store::open(&db).unwrap();
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(!report.intact(), "{report:?}");
    // References are checked again after the migration.
    let e = store
        .write(|tx| {
            tx.append_event(
                "gone",
                "",
                &t("2026-10-01T09:00:00Z"),
                EventType::RunStarted,
                "{}",
            )
        })
        .unwrap_err();
    assert!(e.to_string().contains("FOREIGN KEY"), "{e}");
}

fn raw_create(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[test]
fn sqlite_file_without_schema_migrations_is_not_agentrt() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("other.db");
    raw_create(&db)
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')")
        .unwrap();
    #[cfg(unix)]
    unix::chmod(&db, 0o644);
    for read_only in [true, false] {
        let e = open_existing_err(&db, read_only);
        assert!(
            matches!(&e, Error::NotAgentrt { path, .. } if path == &db),
            "read_only={read_only}: {e:?}"
        );
    }
    let tables: i64 = raw(&db)
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1, "open_existing created tables");
    #[cfg(unix)]
    assert_eq!(
        unix::mode(&db),
        0o644,
        "a refused file keeps its permissions"
    );
}

#[test]
fn non_sqlite_file_is_not_agentrt() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &[u8]); 3] = [
        ("short.db", b"hello"),
        ("text.db", &[b'x'; 4096]),
        (
            "header.db",
            b"SQLite format 3\0 but then nothing that SQLite could ever read as a page header at all, really, \
              no matter how hard it tries to, which it will not",
        ),
    ];
    for (name, bytes) in cases {
        let db = dir.path().join(name);
        fs::write(&db, bytes).unwrap();
        #[cfg(unix)]
        unix::chmod(&db, 0o644);
        for read_only in [true, false] {
            let e = open_existing_err(&db, read_only);
            assert!(
                matches!(&e, Error::NotAgentrt { path, .. } if path == &db),
                "{name} read_only={read_only}: {e:?}"
            );
        }
        let e = open_err(&db);
        assert!(
            matches!(&e, Error::NotAgentrt { path, .. } if path == &db),
            "{name} open: {e:?}"
        );
        assert_eq!(fs::read(&db).unwrap(), bytes, "{name} was changed");
        // A refused file keeps its permissions too.
        #[cfg(unix)]
        assert_eq!(unix::mode(&db), 0o644, "{name}");
    }
}

#[test]
fn foreign_meta_is_refused() {
    // Decision 3: the file records its hash algorithm and canonical form;
    // a file at our version with other (or no) meta is not ours to write.
    let dir = tempfile::tempdir().unwrap();
    for (name, sql) in [
        (
            "algo.db",
            "UPDATE agentrt_meta SET value = 'sha-256' WHERE key = 'hash_algorithm'",
        ),
        (
            "missing.db",
            "DELETE FROM agentrt_meta WHERE key = 'canonical_form'",
        ),
        ("no-table.db", "DROP TABLE agentrt_meta"),
    ] {
        let db = dir.path().join(name);
        make_db(&db);
        raw(&db).execute_batch(sql).unwrap();
        let errors = [
            open_err(&db),
            open_existing_err(&db, false),
            open_existing_err(&db, true),
        ];
        for e in errors {
            assert!(
                matches!(&e, Error::NotAgentrt { path, .. } if path == &db),
                "{name}: {e:?}"
            );
        }
    }
}

#[test]
fn open_existing_never_creates_a_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("missing.db");
    let nested = dir.path().join("no-such-dir").join("missing.db");
    for path in [&db, &nested] {
        for read_only in [true, false] {
            let e = open_existing_err(path, read_only);
            assert!(
                matches!(&e, Error::Io { path: p, source } if p == path && source.kind() == std::io::ErrorKind::NotFound),
                "read_only={read_only}: {e:?}"
            );
        }
    }
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

// ------------------------------------------------------------- control 4

/// The parent side of the umask check: the helper runs with umask 000.
#[cfg(unix)]
#[test]
fn new_database_and_sidecars_are_0600_under_a_permissive_umask() {
    let dir = tempfile::tempdir().unwrap();
    unix::run_child(
        &["sh", "-c", "umask 000 && exec \"$0\" \"$@\""],
        "helper_create_under_umask_000",
        dir.path(),
        None,
    );
    // And under this process's own umask.
    let db = dir.path().join("own-umask.db");
    let store = Store::open(&db).unwrap();
    write_run(&store, "r1");
    for path in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
        assert_eq!(unix::mode(&path), 0o600, "{}", path.display());
    }
}

#[cfg(unix)]
#[test]
#[ignore = "helper: run with umask 000 by new_database_and_sidecars_are_0600_under_a_permissive_umask"]
fn helper_create_under_umask_000() {
    let Some(dir) = unix::child_dir() else {
        return;
    };
    // The umask really is 000: a plain 0666 create keeps every bit.
    let probe = dir.join("probe");
    fs::write(&probe, b"").unwrap();
    assert_eq!(unix::mode(&probe), 0o666);
    fs::remove_file(&probe).unwrap();

    let db = dir.join("umask0.db");
    let store = Store::open(&db).unwrap();
    write_run(&store, "r1");
    let second = Store::open_with(
        &db,
        StoreOptions {
            durability: Durability::Normal,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    write_run(&second, "r2");
    for path in [db.clone(), sidecar(&db, "-wal"), sidecar(&db, "-shm")] {
        assert!(path.exists(), "{} missing", path.display());
        assert_eq!(unix::mode(&path), 0o600, "{}", path.display());
    }
}

#[cfg(unix)]
#[test]
fn owning_writer_tightens_an_other_readable_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("tighten.db");
    make_db(&db);

    unix::chmod(&db, 0o644);
    drop(Store::open(&db).unwrap());
    assert_eq!(unix::mode(&db), 0o600);

    unix::chmod(&db, 0o640);
    drop(Store::open_existing(&db, false).unwrap());
    assert_eq!(unix::mode(&db), 0o600);

    // A readable sidecar is tightened too.
    let first = Store::open(&db).unwrap();
    let wal = sidecar(&db, "-wal");
    unix::chmod(&wal, 0o644);
    let second = Store::open(&db).unwrap();
    assert_eq!(unix::mode(&wal), 0o600);
    drop((first, second));
}

/// A read-only open writes nothing to the database file and changes no
/// permission. (In a directory it can write, SQLite's WAL read protocol
/// makes the empty `-wal` and the `-shm` index a reader needs, and a
/// read-only connection cannot remove them at close: they may remain, no
/// more open than the database, and the next owning writer reuses them.)
#[cfg(unix)]
#[test]
fn read_only_open_changes_nothing() {
    use std::os::unix::fs::MetadataExt;

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ro.db");
    make_db(&db);
    unix::chmod(&db, 0o640);
    // Let the clock move past the last write, so a rewrite would show.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = snapshot(dir.path());
    assert_eq!(before.keys().collect::<Vec<_>>(), ["ro.db"]);

    let store = Store::open_existing(&db, true).unwrap();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 1);
    assert_eq!(store.get_run("r1").unwrap().goal, "reopen me");
    assert_eq!(store.list_events("r1").unwrap().len(), 1);
    assert_eq!(unix::mode(&db), 0o640);
    // A second read-only store, opened while the first is open, changes
    // nothing either.
    let second = Store::open_existing(&db, true).unwrap();
    assert_eq!(second.list_runs(0, 0).unwrap().total, 1);
    drop((store, second));

    assert_eq!(unix::mode(&db), 0o640);
    let after = snapshot(dir.path());
    assert_eq!(
        after.get("ro.db"),
        before.get("ro.db"),
        "the database changed"
    );
    let owner = fs::metadata(&db).unwrap().uid();
    for (name, (hash, _)) in &after {
        match name.as_str() {
            "ro.db" => {}
            "ro.db-wal" => assert_eq!(hash, blake3::hash(b"").to_hex().as_str(), "{name}"),
            "ro.db-shm" => {}
            other => panic!("a read-only open made {other}"),
        }
        let path = dir.path().join(name);
        assert_eq!(unix::mode(&path) & !0o640, 0, "{name}");
        assert_eq!(fs::metadata(&path).unwrap().uid(), owner, "{name}");
    }

    // The owner's next writer takes them over, tightened.
    let writer = Store::open_existing(&db, false).unwrap();
    assert_eq!(unix::mode(&db), 0o600);
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(&db, suffix);
        if side.exists() {
            assert_eq!(unix::mode(&side), 0o600, "{suffix}");
        }
    }
    write_run(&writer, "r2");
    drop(writer);
    assert_eq!(names(dir.path()), ["ro.db"]);
}

// ------------------------------------------------------------- control 5

#[cfg(unix)]
#[test]
fn group_or_other_writable_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("writable.db");
    make_db(&db);
    for bad in [0o660, 0o606, 0o620, 0o602, 0o622] {
        unix::chmod(&db, bad);
        let errors = [
            open_err(&db),
            open_existing_err(&db, false),
            open_existing_err(&db, true),
        ];
        for e in errors {
            assert!(
                matches!(&e, Error::InsecureMode { path, mode, .. } if path == &db && *mode == bad),
                "{bad:o}: {e:?}"
            );
        }
        // Refusing changes nothing.
        assert_eq!(unix::mode(&db), bad);
    }
}

#[cfg(unix)]
#[test]
fn group_or_other_writable_sidecar_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sidecar.db");
    // Keep a store open so both sidecars exist, as SQLite made them.
    let holder = Store::open(&db).unwrap();
    write_run(&holder, "r1");
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(&db, suffix);
        for bad in [0o660, 0o606] {
            unix::chmod(&side, bad);
            let errors = [
                open_err(&db),
                open_existing_err(&db, false),
                open_existing_err(&db, true),
            ];
            for e in errors {
                assert!(
                    matches!(&e, Error::InsecureMode { path, mode, .. } if path == &side && *mode == bad),
                    "{suffix} {bad:o}: {e:?}"
                );
            }
            assert_eq!(unix::mode(&side), bad);
        }
        unix::chmod(&side, 0o600);
    }
    holder.get_run("r1").unwrap();
}

#[cfg(unix)]
#[test]
fn non_regular_sidecar_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("odd.db");
    make_db(&db);
    let target = dir.path().join("elsewhere");
    fs::write(&target, b"").unwrap();
    unix::chmod(&target, 0o600);
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(&db, suffix);
        for kind in ["directory", "symlink"] {
            match kind {
                "directory" => fs::create_dir(&side).unwrap(),
                _ => std::os::unix::fs::symlink(&target, &side).unwrap(),
            }
            let errors = [
                open_err(&db),
                open_existing_err(&db, false),
                open_existing_err(&db, true),
            ];
            for e in errors {
                assert!(
                    matches!(&e, Error::NotRegular { path } | Error::InsecureMode { path, .. } if path == &side),
                    "{suffix} {kind}: {e:?}"
                );
            }
            match kind {
                "directory" => fs::remove_dir(&side).unwrap(),
                _ => fs::remove_file(&side).unwrap(),
            }
        }
    }
    assert_eq!(fs::read(&target).unwrap(), b"");
    Store::open_existing(&db, true)
        .unwrap()
        .get_run("r1")
        .unwrap();
}

#[cfg(unix)]
#[test]
fn foreign_owned_sidecar_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("foreign.db");
    let holder = Store::open(&db).unwrap();
    write_run(&holder, "r1");
    for suffix in ["-wal", "-shm"] {
        let side = sidecar(&db, suffix);
        // Only root can give a file away: as anyone else this case cannot
        // be built, and the test stops here.
        if std::os::unix::fs::chown(&side, Some(12345), None).is_err() {
            eprintln!("skipped: cannot chown {} (not root)", side.display());
            return;
        }
        let errors = [
            open_err(&db),
            open_existing_err(&db, false),
            open_existing_err(&db, true),
        ];
        for e in errors {
            assert!(
                matches!(&e, Error::InsecureMode { path, mode: 0o600, .. } if path == &side),
                "{suffix}: {e:?}"
            );
        }
        let me = fs::metadata(&db).unwrap();
        std::os::unix::fs::chown(&side, Some(std::os::unix::fs::MetadataExt::uid(&me)), None)
            .unwrap();
    }
    holder.get_run("r1").unwrap();
}

/// The creating opener follows a symbolic link, and SQLite keeps the
/// sidecars next to the link's target: those are the files to check.
#[cfg(unix)]
#[test]
fn symlinked_path_checks_the_target_sidecars() {
    let dir = tempfile::tempdir().unwrap();
    let real_dir = dir.path().join("real");
    let link_dir = dir.path().join("links");
    fs::create_dir(&real_dir).unwrap();
    fs::create_dir(&link_dir).unwrap();
    let db = real_dir.join("target.db");
    let link = link_dir.join("link.db");
    let holder = Store::open(&db).unwrap();
    write_run(&holder, "r1");
    std::os::unix::fs::symlink(&db, &link).unwrap();

    // Through the link, the store reads the target.
    let via_link = Store::open(&link).unwrap();
    via_link.get_run("r1").unwrap();
    write_run(&via_link, "r2");
    assert!(!sidecar(&link, "-wal").exists());
    drop(via_link);

    let wal = sidecar(&db, "-wal");
    unix::chmod(&wal, 0o666);
    let e = open_err(&link);
    assert!(
        matches!(&e, Error::InsecureMode { path, mode: 0o666, .. } if path == &wal),
        "{e:?}"
    );
    unix::chmod(&wal, 0o600);
    holder.get_run("r2").unwrap();
}

// ------------------------------------------------------------- control 6

#[test]
fn trigger_or_view_is_refused_by_both_openers() {
    let dir = tempfile::tempdir().unwrap();
    for (kind, name, sql) in [
        (
            "trigger",
            "tamper",
            "CREATE TRIGGER tamper AFTER INSERT ON events BEGIN DELETE FROM events; END",
        ),
        (
            "trigger",
            "on_migrate",
            "CREATE TRIGGER on_migrate BEFORE INSERT ON schema_migrations BEGIN SELECT 1; END",
        ),
        (
            "view",
            "pending",
            "CREATE VIEW pending AS SELECT id FROM runs",
        ),
    ] {
        let db = dir.path().join(format!("{name}.db"));
        make_db(&db);
        raw(&db).execute_batch(sql).unwrap();
        let errors = [
            open_err(&db),
            open_existing_err(&db, false),
            open_existing_err(&db, true),
        ];
        for e in errors {
            assert!(
                matches!(&e, Error::UnsafeSchema { path, kind: k, name: n } if path == &db && k == kind && n == name),
                "{name}: {e:?}"
            );
        }
    }

    // Refused before any other statement: a trigger that would fire on the
    // migration of an older file never runs, and nothing is migrated.
    let db = dir.path().join("spy.db");
    raw_create(&db)
        .execute_batch(
            "CREATE TABLE marks (x INTEGER);
             CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
             CREATE TRIGGER spy BEFORE INSERT ON schema_migrations BEGIN INSERT INTO marks VALUES (1); END;",
        )
        .unwrap();
    let e = open_err(&db);
    assert!(
        matches!(&e, Error::UnsafeSchema { kind, name, .. } if kind == "trigger" && name == "spy"),
        "{e:?}"
    );
    let conn = raw(&db);
    let marks: i64 = conn
        .query_row("SELECT COUNT(*) FROM marks", [], |r| r.get(0))
        .unwrap();
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!((marks, tables), (0, 2));
}

#[cfg(unix)]
#[test]
fn open_existing_refuses_a_symlink() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("real.db");
    make_db(&db);
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).unwrap();
    for read_only in [true, false] {
        let e = open_existing_err(&link, read_only);
        assert!(
            matches!(&e, Error::Symlink { path } if path == &link),
            "{e:?}"
        );
    }
    // A dangling link is refused as a link too, and nothing is created.
    let dangling = dir.path().join("dangling.db");
    std::os::unix::fs::symlink(dir.path().join("nowhere.db"), &dangling).unwrap();
    for read_only in [true, false] {
        let e = open_existing_err(&dangling, read_only);
        assert!(
            matches!(&e, Error::Symlink { path } if path == &dangling),
            "{e:?}"
        );
    }
    assert!(!dir.path().join("nowhere.db").exists());
}

/// A WAL database in a directory the opener cannot write opens read-only
/// without writing anything. Root ignores directory permissions, so as root
/// the scenario runs as `nobody` in a child process (through `setpriv`); if
/// that is not possible it is skipped.
#[cfg(unix)]
#[test]
fn read_only_wal_database_in_a_read_only_directory_opens_without_writing() {
    let scratch = tempfile::tempdir().unwrap();
    if !unix::permission_checks_bypassed(scratch.path()) {
        read_only_directory_scenario(scratch.path());
        return;
    }
    let Some(as_nobody) = unix::as_nobody() else {
        eprintln!("skipped: running as root, and setpriv cannot run the scenario as nobody");
        return;
    };
    unix::chmod(scratch.path(), 0o755);
    let dir = scratch.path().join("nobody");
    fs::create_dir(&dir).unwrap();
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).unwrap();
    unix::run_child(&as_nobody, "helper_read_only_directory", &dir, None);
}

#[cfg(unix)]
#[test]
#[ignore = "helper: run as an unprivileged user by read_only_wal_database_in_a_read_only_directory_opens_without_writing"]
fn helper_read_only_directory() {
    let Some(dir) = unix::child_dir() else {
        return;
    };
    read_only_directory_scenario(&dir);
}

#[cfg(unix)]
fn read_only_directory_scenario(dir: &Path) {
    let db = dir.join("wal.db");
    make_db(&db);
    assert_eq!(
        names(dir),
        ["wal.db"],
        "the last close removes the sidecars"
    );
    let mode: String = raw(&db)
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    // raw() closed again; the sidecars it made are gone.
    assert_eq!(names(dir), ["wal.db"]);
    let before = snapshot(dir);

    unix::chmod(dir, 0o555);
    let _restore = unix::RestoreMode(dir, 0o755);
    assert!(
        fs::write(dir.join("probe"), b"").is_err(),
        "this user can still write the directory"
    );
    let store = Store::open_existing(&db, true).unwrap();
    assert_eq!(store.get_run("r1").unwrap().goal, "reopen me");
    assert_eq!(store.list_events("r1").unwrap().len(), 1);
    assert_eq!(store.list_runs(0, 0).unwrap().total, 1);
    drop(store);
    assert_eq!(snapshot(dir), before);

    // Writing is refused in such a directory, and nothing appears either.
    assert!(Store::open(&db).is_err());
    assert!(Store::open_existing(&db, false).is_err());
    assert_eq!(snapshot(dir), before);
    drop(_restore);

    // A writer that died leaves commits in its -wal. With its -shm still
    // there, a reader in the read-only directory sees them ...
    let crashed = dir.join("crashed.db");
    make_db(&crashed);
    let out = unix::child_output(&[], "helper_write_then_die", &crashed, None);
    assert!(out.status.success(), "{out:?}");
    let wal = sidecar(&crashed, "-wal");
    let shm = sidecar(&crashed, "-shm");
    assert!(
        fs::metadata(&wal).unwrap().len() > 32,
        "the writer left no WAL"
    );
    assert!(shm.exists());
    unix::chmod(dir, 0o555);
    let restore = unix::RestoreMode(dir, 0o755);
    let before = snapshot(dir);
    let store = Store::open_existing(&crashed, true).unwrap();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 2);
    store.get_run("r2").unwrap();
    drop(store);
    assert_eq!(
        snapshot(dir).get("crashed.db"),
        before.get("crashed.db"),
        "the reader wrote the database"
    );
    drop(restore);

    // ... and without it the reader cannot read them: it refuses rather
    // than show the state before them (immutable reads the main file only).
    fs::remove_file(&shm).unwrap();
    unix::chmod(dir, 0o555);
    let _restore = unix::RestoreMode(dir, 0o755);
    let before = snapshot(dir);
    let e = open_existing_err(&crashed, true);
    assert!(
        matches!(&e, Error::Io { path, source } if path == &shm && source.kind() == std::io::ErrorKind::PermissionDenied),
        "{e:?}"
    );
    assert_eq!(snapshot(dir), before);
}

/// Writes run `r2` into the database named by the parent and exits at once,
/// as if killed: the connection is never closed, so its `-wal` and `-shm`
/// stay, the commit only in the `-wal`.
#[cfg(unix)]
#[test]
#[ignore = "helper: a writer that dies, run by read_only_directory_scenario"]
fn helper_write_then_die() {
    let Some(db) = unix::child_dir() else {
        return;
    };
    let store = Store::open(&db).unwrap();
    write_run(&store, "r2");
    std::process::exit(0);
}

// ------------------------------------------------------------- control 7

const ODD_NAMES: [&str; 5] = [
    "what?.db",
    "hash#tag.db",
    "per%41cent.db",
    "with space.db",
    "all of?mode=memory&cache=shared#frag%20x.db",
];

#[test]
fn paths_with_query_fragment_and_percent_characters_open_the_named_file() {
    for name in ODD_NAMES {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join(name);
        {
            let store = Store::open(&db).unwrap();
            write_run(&store, "r1");
            assert!(db.is_file(), "{name}");
        }
        assert_eq!(names(dir.path()), [name]);
        let wal = format!("{name}-wal");
        let shm = format!("{name}-shm");
        for read_only in [true, false] {
            let store = Store::open_existing(&db, read_only).unwrap();
            assert_eq!(store.get_run("r1").unwrap().goal, "reopen me", "{name}");
            drop(store);
            // Only the database and (after a read-only open) its sidecars.
            for entry in names(dir.path()) {
                assert!(
                    [name, wal.as_str(), shm.as_str()].contains(&entry.as_str()),
                    "read_only={read_only}: {entry}"
                );
            }
        }
        // The writer's close removed the sidecars again.
        assert_eq!(names(dir.path()), [name]);
    }
}

/// SQLite reads a file name that starts with `file:` as a URI, and
/// `:memory:` as no file at all: a relative path so spelled still names a
/// file. The helper runs with the temporary directory as its working
/// directory.
#[cfg(unix)]
#[test]
fn relative_paths_spelled_like_uris_open_the_named_file() {
    let dir = tempfile::tempdir().unwrap();
    unix::run_child(
        &[],
        "helper_relative_uri_paths",
        dir.path(),
        Some(dir.path()),
    );
}

#[cfg(unix)]
#[test]
#[ignore = "helper: run in a temporary working directory by relative_paths_spelled_like_uris_open_the_named_file"]
fn helper_relative_uri_paths() {
    let Some(dir) = unix::child_dir() else {
        return;
    };
    assert_eq!(
        fs::canonicalize(std::env::current_dir().unwrap()).unwrap(),
        fs::canonicalize(&dir).unwrap()
    );
    let name = "file:rel.db?mode=memory#x%41";
    {
        let store = Store::open(name).unwrap();
        write_run(&store, "r1");
    }
    assert_eq!(names(&dir), [name]);
    for read_only in [true, false] {
        let store = Store::open_existing(name, read_only).unwrap();
        store.get_run("r1").unwrap();
    }
    assert_eq!(names(&dir), [name]);

    // A file named `:memory:` is opened as that file by open_existing.
    {
        let store = Store::open("./:memory:").unwrap();
        write_run(&store, "m1");
    }
    for read_only in [true, false] {
        let store = Store::open_existing(":memory:", read_only).unwrap();
        store.get_run("m1").unwrap();
    }
    assert_eq!(names(&dir), [":memory:", name]);
}
