//! `verify` on what only SQLite's files have (design §16, issue 9): a file a
//! schema-1 build left, its older rows marked by the migration. Every
//! other tamper test reaches its database through the engine suite's
//! `engine` (`tests/suite/verify_tamper.rs`), so it holds on every engine.

mod common;
#[path = "common/populate.rs"]
mod populate;

use std::path::{Path, PathBuf};

use agentrt::Store;
use agentrt::verify::{self, VerifyOptions, VerifyReport};
use populate::{Act, populate_as};

/// A copy of `pristine` changed by `sql`.
fn tampered(pristine: &Path, name: &str, sql: &str) -> PathBuf {
    let path = pristine.with_file_name(format!("{name}.db"));
    let _ = std::fs::remove_file(&path);
    std::fs::copy(pristine, &path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    // As anyone with the sqlite3 shell: no foreign-key checks.
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute_batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    drop(conn);
    path
}

fn check_all(path: &Path) -> VerifyReport {
    let store = Store::open_existing(path, true).unwrap();
    verify::verify(&store, &VerifyOptions::default()).unwrap()
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[test]
fn rows_older_than_their_tables_place_on_the_chain_are_counted_and_cannot_be_added_to() {
    let dir = tempfile::tempdir().unwrap();
    // A database as a schema-1 build left it, with a model call and a tool
    // spec that no event lists (schema 1 chained neither table).
    let db = dir.path().join("schema1.db");
    let conn = rusqlite::Connection::open(&db).unwrap();
    // The call's run is not part of this picture.
    conn.pragma_update(None, "foreign_keys", false).unwrap();
    conn.execute_batch(agentrt::store::engine::schema::MIGRATION_1)
        .unwrap();
    conn.execute_batch(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
         INSERT INTO schema_migrations VALUES (1, '2026-09-01T09:00:00.000000000Z');
         INSERT INTO agentrt_meta VALUES ('hash_algorithm', 'blake3-256'),
             ('canonical_form', 'agentrt-canonical-json-v1'), ('time_format', 'rfc3339-utc-nanos9');
         INSERT INTO tool_specs (hash, spec_json) VALUES ('legacy-spec', '{}');
         INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at)
             VALUES ('legacy-call', 'gone', '', 1, 'completed', 'answering',
                     '2026-09-01T09:00:00.000000000Z');",
    )
    .unwrap();
    drop(conn);
    // Opening it for writing migrates it: the older rows are marked and
    // counted, the walk leaves them out and says so.
    let store = Store::open(&db).unwrap();
    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.unchained_rows, 2);
    // Rows written since are chained like any other.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(populate_as(&store, &[vec![Act::AskedRead]], "later-"));
    drop(store);
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.unchained_rows, 2);
    let chained: i64 = raw(&db)
        .query_row(
            "SELECT COUNT(*) FROM model_calls WHERE written_seq > 0",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(chained, 1);
    // Marking a chained row as older, to hide an edit from the walk, is a
    // break; so is an edit of a chained model call's cost.
    let (id, written): (String, i64) = raw(&db)
        .query_row(
            "SELECT id, written_seq FROM model_calls WHERE written_seq > 0",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let hidden = tampered(
        &db,
        "hidden",
        &format!("UPDATE model_calls SET written_seq = -1, cost_micros = 0 WHERE id = '{id}'"),
    );
    let broken = check_all(&hidden).broken.unwrap();
    assert!(broken.detail.contains(&id), "{broken:?}");
    // Even with the listing gone too, the count of marked rows gives it away.
    let walked = verify::verify(
        &Store::open_existing(&hidden, true).unwrap(),
        &VerifyOptions {
            from: written + 1,
            ..VerifyOptions::default()
        },
    )
    .unwrap();
    let broken = walked.broken.unwrap();
    assert!(
        broken.detail.contains("the migration marked 2"),
        "{broken:?}"
    );
    let cheaper = tampered(
        &db,
        "cheaper",
        &format!("UPDATE model_calls SET cost_micros = 0 WHERE id = '{id}'"),
    );
    let broken = check_all(&cheaper).broken.unwrap();
    assert_eq!(broken.seq, written);
    assert!(
        broken
            .detail
            .contains(&format!("model_calls row {id:?} was changed")),
        "{broken:?}"
    );
}
