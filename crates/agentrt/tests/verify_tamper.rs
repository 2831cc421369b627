//! `verify` against a tampered database (core §10, controls 61–64, issue 4):
//! a populated file is copied, changed with plain SQL (as anyone holding
//! the file could), and verified read-only. Every change is caught at the
//! first bad seq; a cut-off tail only against a kept head.

mod common;
#[path = "common/populate.rs"]
mod populate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentrt::verify::{self, ChainHead, VerifyOptions, VerifyReport};
use agentrt::*;
use common::*;
use populate::{Act, decision, fixed_scripts, populate, populate_as};
use proptest::prelude::*;

/// The columns of an event, as stored.
const EVENT_COLUMNS: [&str; 8] = [
    "seq",
    "run_id",
    "step_id",
    "at",
    "type",
    "payload_json",
    "rows_json",
    "hash",
];

/// A populated database file in `dir`, closed (its WAL folded in).
fn build(dir: &Path, scripts: &[Vec<Act>]) -> PathBuf {
    let path = dir.join("pristine.db");
    let store = Store::open(&path).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(populate(&store, scripts));
    drop(store);
    path
}

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

fn check(path: &Path, options: &VerifyOptions) -> VerifyReport {
    let store = Store::open_existing(path, true).unwrap();
    verify::verify(&store, options).unwrap()
}

fn check_all(path: &Path) -> VerifyReport {
    check(path, &VerifyOptions::default())
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

fn head_seq(path: &Path) -> i64 {
    raw(path)
        .query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap()
}

/// The state tables and the column that names their rows.
const STATE_TABLES: [(&str, &str); 6] = [
    ("approvals", "id"),
    ("model_calls", "id"),
    ("run_labels", "run_id"),
    ("runs", "id"),
    ("steps", "id"),
    ("tool_specs", "hash"),
];

fn key_column(table: &str) -> &'static str {
    STATE_TABLES
        .iter()
        .find(|(t, _)| *t == table)
        .map(|(_, k)| *k)
        .unwrap()
}

/// Every state row: `(table, key, written_seq)`.
fn state_rows(path: &Path) -> Vec<(String, String, i64)> {
    let conn = raw(path);
    let mut out = Vec::new();
    for (table, key) in STATE_TABLES {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {key}, written_seq FROM {table} ORDER BY rowid"
            ))
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((table.to_owned(), r.get(0)?, r.get(1)?)))
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

/// The seqs of the events whose listing names the row, in order.
fn listings(path: &Path, table: &str, id: &str) -> Vec<i64> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare(
            "SELECT e.seq FROM events e, json_each(e.rows_json) j
             WHERE e.rows_json <> '' AND j.value ->> 0 = ?1 AND j.value ->> 1 = ?2 ORDER BY e.seq",
        )
        .unwrap();
    stmt.query_map([table, id], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn columns(path: &Path, table: &str) -> Vec<String> {
    let conn = raw(path);
    let mut stmt = conn
        .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn sql_text(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Changes one column of one event so that it differs from what was
/// stored; `seq` moves the event past the end of the log.
fn alter_event(seq: i64, column: &str) -> String {
    match column {
        "seq" => format!("UPDATE events SET seq = seq + 100000 WHERE seq = {seq}"),
        "hash" => format!(
            "UPDATE events SET hash = CASE WHEN substr(hash, 1, 1) = 'a' THEN 'b' ELSE 'a' END || substr(hash, 2) WHERE seq = {seq}"
        ),
        c => format!("UPDATE events SET {c} = {c} || 'x' WHERE seq = {seq}"),
    }
}

/// The seq a change of `column` of event `seq` must be reported at.
fn expected_event_break(seq: i64, column: &str, head: i64) -> i64 {
    match column {
        "seq" if seq == head => seq + 100000,
        "seq" => seq + 1,
        _ => seq,
    }
}

/// Changes one column of one state row.
fn alter_row(table: &str, id: &str, column: &str) -> String {
    format!(
        "UPDATE {table} SET {column} = CASE typeof({column}) WHEN 'integer' THEN {column} + 1000 ELSE {column} || 'x' END WHERE {} = {}",
        key_column(table),
        sql_text(id)
    )
}

#[test]
fn an_untouched_log_verifies_intact_whole_and_in_every_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, head as u64);
    assert_eq!((report.from, report.to), (1, head));
    let kept = report.head.clone().unwrap();
    assert_eq!(kept.seq, head);
    assert_eq!(report.hash, kept.hash);
    assert_eq!(kept.hash.len(), 64);

    let store = Store::open_existing(&db, true).unwrap();
    assert_eq!(verify::chain_head(&store).unwrap(), Some(kept.clone()));
    assert_eq!(
        verify::event_hash(&store, head).unwrap(),
        Some(kept.hash.clone())
    );
    assert_eq!(verify::event_hash(&store, head + 1).unwrap(), None);
    // Every state row was digested into the event that last wrote it.
    for (table, id, written) in state_rows(&db) {
        assert!(written >= 1 && written <= head, "{table} {id}: {written}");
        assert_eq!(
            listings(&db, &table, &id).last(),
            Some(&written),
            "{table} {id}"
        );
    }
    // Any range chains from the link before it.
    for from in 1..=head {
        for to in from..=head {
            let r = verify::verify_events(&store, from, to).unwrap();
            assert!(r.intact(), "{from}..{to}: {r:?}");
            assert_eq!(r.checked, (to - from + 1) as u64);
            assert_eq!(r.to, to);
            assert_eq!(Some(r.hash), verify::event_hash(&store, to).unwrap());
        }
    }
    // A kept head inside the log matches.
    let mid = verify::event_hash(&store, head / 2).unwrap().unwrap();
    let r = verify::verify(
        &store,
        &VerifyOptions {
            kept_head: Some(ChainHead {
                seq: head / 2,
                hash: mid,
            }),
            ..VerifyOptions::default()
        },
    )
    .unwrap();
    assert!(r.kept_head.unwrap().matches);
}

#[test]
fn altering_any_column_of_any_event_breaks_at_that_seq() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    assert_eq!(
        columns(&db, "events"),
        EVENT_COLUMNS,
        "every column is altered"
    );
    for seq in 1..=head {
        for column in EVENT_COLUMNS {
            let path = tampered(&db, "event", &alter_event(seq, column));
            let report = check_all(&path);
            assert!(!report.intact(), "seq {seq} {column}: {report:?}");
            let broken = report
                .broken
                .unwrap_or_else(|| panic!("seq {seq} {column}: not caught"));
            assert_eq!(
                broken.seq,
                expected_event_break(seq, column, head),
                "seq {seq} {column}: {broken:?}"
            );
            assert_eq!(report.checked as i64, seq - 1, "seq {seq} {column}");
            if column != "seq" {
                assert_eq!(broken.expected.len(), 64, "{broken:?}");
                assert_ne!(broken.expected, broken.found);
            }
        }
    }
}

#[test]
fn a_late_edit_of_a_long_field_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let (seq, len): (i64, i64) = raw(&db)
        .query_row(
            "SELECT seq, octet_length(payload_json) FROM events WHERE octet_length(payload_json) > 8192 ORDER BY seq LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    // The last character but one changes; the length stays.
    let sql = format!(
        "UPDATE events SET payload_json = substr(payload_json, 1, {n}) || 'z' || substr(payload_json, {len}) WHERE seq = {seq}",
        n = len - 2
    );
    let report = check_all(&tampered(&db, "long-event", &sql));
    assert_eq!(report.broken.map(|b| b.seq), Some(seq));

    let (id, written, len): (String, i64, i64) = raw(&db)
        .query_row(
            "SELECT id, written_seq, octet_length(observation_json) FROM steps WHERE octet_length(observation_json) > 8192",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    let sql = format!(
        "UPDATE steps SET observation_json = substr(observation_json, 1, {n}) || 'z' || substr(observation_json, {len}) WHERE id = {}",
        sql_text(&id),
        n = len - 2
    );
    let broken = check_all(&tampered(&db, "long-row", &sql)).broken.unwrap();
    assert_eq!(broken.seq, written, "{broken:?}");
    assert!(broken.detail.contains(&id), "{broken:?}");
}

#[test]
fn deleting_an_event_in_the_middle_breaks_at_the_next_seq() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    for seq in 1..head {
        let path = tampered(
            &db,
            "deleted",
            &format!("DELETE FROM events WHERE seq = {seq}"),
        );
        let broken = check_all(&path).broken.unwrap();
        // A deleted listing event may leave its rows unaccounted for at
        // its seq; either way the first bad seq is named.
        assert_eq!(broken.seq, seq + 1, "seq {seq}: {broken:?}");
        assert!(
            broken.detail.contains(&format!("seq {seq} is missing")),
            "{broken:?}"
        );
    }
}

#[test]
fn reordering_two_events_breaks_at_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    for seq in 1..head {
        let sql = format!(
            "UPDATE events SET seq = -1 WHERE seq = {seq};
             UPDATE events SET seq = {seq} WHERE seq = {next};
             UPDATE events SET seq = {next} WHERE seq = -1;",
            next = seq + 1
        );
        let broken = check_all(&tampered(&db, "swapped", &sql)).broken.unwrap();
        assert_eq!(broken.seq, seq, "{broken:?}");
    }
}

/// Cutting events off the end: when the rows they wrote stay, the rows
/// name the cut; when the whole file is an earlier copy (a restored
/// backup), only a kept head shows it.
#[test]
fn a_cut_tail_is_caught_by_its_rows_or_by_a_kept_head() {
    let dir = tempfile::tempdir().unwrap();
    let early_dir = dir.path().join("early");
    std::fs::create_dir(&early_dir).unwrap();
    let early = build(&early_dir, &fixed_scripts()[..1]);
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let kept = check_all(&db).head.unwrap();

    // The last events deleted, the rows left as they are.
    for cut in 1..=3 {
        let sql = format!("DELETE FROM events WHERE seq > {}", head - cut);
        let path = tampered(&db, "cut", &sql);
        let report = check_all(&path);
        assert!(!report.intact(), "{report:?}");
        let broken = report.broken.unwrap();
        assert_eq!(broken.seq, head - cut + 1, "{broken:?}");
        assert!(broken.detail.contains("cut from the end"), "{broken:?}");
        let with_head = check(
            &path,
            &VerifyOptions {
                kept_head: Some(kept.clone()),
                ..VerifyOptions::default()
            },
        );
        assert!(!with_head.kept_head.unwrap().reached);
    }

    // The last events deleted and the store writing on: the next events
    // take the cut seqs (no counter remembers them), and the rows the cut
    // events wrote still name the cut.
    let path = tampered(
        &db,
        "cut-then-written",
        &format!("DELETE FROM events WHERE seq > {}", head - 2),
    );
    let store = Store::open(&path).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(populate_as(&store, &fixed_scripts()[..1], "more-"));
    drop(store);
    assert!(head_seq(&path) > head, "written past the old head");
    let report = check_all(&path);
    assert!(!report.intact(), "{report:?}");
    let broken = report.broken.unwrap();
    assert!(broken.seq > head - 2 && broken.seq <= head, "{broken:?}");
    assert!(broken.detail.contains("does not list it"), "{broken:?}");

    // Every event deleted: the rows they wrote name the cut.
    let path = tampered(&db, "cut-all", "DELETE FROM events");
    let report = check_all(&path);
    assert_eq!(report.head, None);
    let broken = report.broken.unwrap();
    assert_eq!(broken.seq, 1, "{broken:?}");
    assert!(broken.detail.contains("cut from the end"), "{broken:?}");

    // An earlier state of the same log: intact alone.
    let early_head = head_seq(&early);
    assert!(early_head < head);
    let alone = check_all(&early);
    assert!(alone.intact(), "{alone:?}");
    // Against the kept head it was not reached.
    let with_head = check(
        &early,
        &VerifyOptions {
            kept_head: Some(kept.clone()),
            ..VerifyOptions::default()
        },
    );
    // The log itself has no break: the kept head is judged apart.
    assert!(with_head.intact(), "{with_head:?}");
    let k = with_head.kept_head.unwrap();
    assert!(!k.reached && !k.matches, "{k:?}");
    // A kept head it does reach, with another link, does not match.
    let wrong = ChainHead {
        seq: early_head,
        hash: "0".repeat(64),
    };
    let k = check(
        &early,
        &VerifyOptions {
            kept_head: Some(wrong),
            ..VerifyOptions::default()
        },
    )
    .kept_head
    .unwrap();
    assert!(k.reached && !k.matches, "{k:?}");
}

#[test]
fn editing_any_column_of_a_state_row_breaks_at_the_event_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let rows = state_rows(&db);
    for (table, _) in STATE_TABLES {
        assert!(
            rows.iter().any(|r| r.0 == table),
            "the fixture has {table} rows"
        );
    }
    for (table, id, written) in &rows {
        let first = listings(&db, table, id)[0];
        for column in columns(&db, table) {
            let path = tampered(&db, "row", &alter_row(table, id, &column));
            let report = check_all(&path);
            match column.as_str() {
                // Lease columns are renewed without events: not digested.
                "lease_owner" | "lease_expires_at" => {
                    assert!(report.intact(), "{table} {id} {column}: {report:?}")
                }
                // A changed key: the row the log names is gone, from its
                // first listing on.
                c if c == key_column(table) => {
                    let broken = report.broken.unwrap();
                    assert_eq!(broken.seq, first, "{table} {id} id: {broken:?}");
                    assert!(broken.detail.contains("no longer exists"), "{broken:?}");
                }
                // One more than its writer: no listing before it (or the
                // head) names it.
                "written_seq" => {
                    let broken = report.broken.unwrap();
                    assert!(broken.seq > *written, "{table} {id}: {broken:?}");
                }
                _ => {
                    let broken = report
                        .broken
                        .unwrap_or_else(|| panic!("{table} {id} {column}: not caught"));
                    assert_eq!(broken.seq, *written, "{table} {id} {column}: {broken:?}");
                    assert!(
                        broken.detail.contains(&format!("{table} row {id:?}")),
                        "{broken:?}"
                    );
                    assert_eq!(broken.expected.len(), 64);
                    assert_eq!(broken.found.len(), 64);
                    assert_ne!(broken.expected, broken.found);
                }
            }
        }
    }
}

#[test]
fn deleted_added_and_repointed_rows_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let (id, written): (String, i64) = raw(&db)
        .query_row(
            "SELECT id, written_seq FROM approvals ORDER BY rowid LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let first = listings(&db, "approvals", &id)[0];

    // Deleted: gone from its first listing on.
    let sql = format!("DELETE FROM approvals WHERE id = {}", sql_text(&id));
    let broken = check_all(&tampered(&db, "deleted-row", &sql))
        .broken
        .unwrap();
    assert_eq!(broken.seq, first, "{broken:?}");
    assert!(broken.detail.contains(&id) && broken.detail.contains("no longer exists"));

    // Pointed back at an earlier event that did write it, with today's
    // content: the later writer names it.
    let all = listings(&db, "approvals", &id);
    if all.len() > 1 {
        let sql = format!(
            "UPDATE approvals SET written_seq = {} WHERE id = {}",
            all[0],
            sql_text(&id)
        );
        let broken = check_all(&tampered(&db, "back", &sql)).broken.unwrap();
        assert!(all.contains(&broken.seq), "{broken:?}");
    }
    assert_eq!(all.last(), Some(&written));

    // Pointed at an event that does not list it: one that lists nothing,
    // or the last event (which lists other rows; not a cut tail).
    let unlisted: i64 = raw(&db)
        .query_row(
            "SELECT MAX(seq) FROM events WHERE rows_json = '' AND seq > ?1",
            [written],
            |r| r.get(0),
        )
        .unwrap();
    assert!(!listings(&db, "approvals", &id).contains(&head));
    for seq in [unlisted, head] {
        let sql = format!(
            "UPDATE approvals SET written_seq = {seq} WHERE id = {}",
            sql_text(&id)
        );
        let broken = check_all(&tampered(&db, "repointed", &sql)).broken.unwrap();
        assert_eq!(broken.seq, seq, "{broken:?}");
        assert!(broken.detail.contains("does not list it"), "{broken:?}");
    }

    // A row no event wrote, added by hand.
    for (seq, want) in [(0, 0), (unlisted, unlisted), (head + 5, head + 1)] {
        let sql = format!(
            "INSERT INTO steps (id, written_seq, run_id, idx, status, started_at)
             VALUES ('forged', {seq}, 'run0', 99, 'done', '2026-10-01T09:00:00.000000000Z')"
        );
        let broken = check_all(&tampered(&db, "added", &sql)).broken.unwrap();
        assert_eq!(broken.seq, want, "{broken:?}");
        assert!(broken.detail.contains("\"forged\""), "{broken:?}");
    }

    // Rows of two tables unaccounted for: the one that names the lower seq
    // is the first break, whichever table it is in.
    let sql = format!(
        "UPDATE approvals SET written_seq = {unlisted} WHERE id = {};
         INSERT INTO steps (id, written_seq, run_id, idx, status, started_at)
         VALUES ('forged', 0, 'run0', 99, 'done', '2026-10-01T09:00:00.000000000Z')",
        sql_text(&id)
    );
    let broken = check_all(&tampered(&db, "two-tables", &sql))
        .broken
        .unwrap();
    assert_eq!(broken.seq, 0, "{broken:?}");
    assert!(broken.detail.contains("\"forged\""), "{broken:?}");

    // A tie (two tables' rows unaccounted for at the same seq): the table
    // first in name order is named, so the same file always reads alike.
    let sql =
        "INSERT INTO tool_specs (hash, spec_json, written_seq) VALUES ('forged-spec', '{}', 0);
         INSERT INTO steps (id, written_seq, run_id, idx, status, started_at)
         VALUES ('forged-step', 0, 'run0', 99, 'done', '2026-10-01T09:00:00.000000000Z')";
    let broken = check_all(&tampered(&db, "tie", sql)).broken.unwrap();
    assert_eq!(broken.seq, 0, "{broken:?}");
    assert!(
        broken.detail.starts_with("steps row \"forged-step\""),
        "{broken:?}"
    );
}

#[test]
fn deleting_two_events_in_a_row_names_both_missing_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    for seq in [1, head / 2, head - 2] {
        let sql = format!("DELETE FROM events WHERE seq IN ({seq}, {})", seq + 1);
        let report = check_all(&tampered(&db, "two-deleted", &sql));
        let broken = report.broken.unwrap();
        assert_eq!(broken.seq, seq + 2, "{broken:?}");
        assert!(
            broken
                .detail
                .contains(&format!("seqs {seq} to {} are missing", seq + 1)),
            "{broken:?}"
        );
        assert_eq!(report.checked as i64, seq - 1);
    }
}

/// A row pointed back at the event that wrote it first, with the content
/// that event listed: that event matches, and the later event that wrote
/// it again names the row as claiming an earlier writer.
#[test]
fn a_row_pointed_back_at_its_earlier_writer_is_named_at_the_later_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    // An approval is written when requested (pending) and when decided.
    let (id, written): (String, i64) = raw(&db)
        .query_row(
            "SELECT id, written_seq FROM approvals WHERE status = 'approved' ORDER BY rowid LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let all = listings(&db, "approvals", &id);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1], written);
    let requested = all[0];
    let sql = format!(
        "UPDATE approvals SET written_seq = {requested}, status = 'pending', decided_at = '',
             decided_by = '', note = '' WHERE id = {}",
        sql_text(&id)
    );
    let report = check_all(&tampered(&db, "pointed-back", &sql));
    let broken = report.broken.unwrap();
    assert_eq!(broken.seq, written, "{broken:?}");
    assert!(
        broken.detail.contains(&format!(
            "approvals row {id:?} names seq {requested} as its last writer, but this later event wrote it"
        )),
        "{broken:?}"
    );
    assert_eq!(
        report.checked as i64,
        written - 1,
        "the first writer matched"
    );
}

/// A log of more than one page: walked whole, and a change on a later page
/// is caught where it is.
#[test]
fn a_log_longer_than_a_page_is_walked_whole_and_checked_past_the_first_page() {
    let dir = tempfile::tempdir().unwrap();
    let scripts: Vec<Vec<Act>> = fixed_scripts().into_iter().cycle().take(9).collect();
    let db = build(dir.path(), &scripts);
    let head = head_seq(&db);
    let page = verify::PAGE_EVENTS as i64;
    assert!(head > page + 2, "{head} events");
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.checked as i64, report.to), (head, head));
    for seq in [page, page + 1, page + 2, head] {
        let report = check_all(&tampered(
            &db,
            "late-page",
            &alter_event(seq, "payload_json"),
        ));
        assert_eq!(report.broken.map(|b| b.seq), Some(seq));
        assert_eq!(report.checked as i64, seq - 1);
    }
}

/// A walk that checks no event names no last event: neither a range past
/// the head nor a range whose first event is broken.
#[test]
fn a_walk_that_checks_nothing_names_no_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let store = Store::open_existing(&db, true).unwrap();
    for (from, to) in [(head + 5, 0), (head + 5, head + 2), (head + 5, 3)] {
        let r = verify::verify_events(&store, from, to).unwrap();
        assert!(r.intact(), "{from}..{to}: {r:?}");
        assert_eq!((r.checked, r.to, r.hash.as_str()), (0, 0, ""), "{r:?}");
    }
    drop(store);
    let seq = head / 2;
    let path = tampered(&db, "first-of-range", &alter_event(seq, "payload_json"));
    let r = verify::verify_events(&Store::open_existing(&path, true).unwrap(), seq, 0).unwrap();
    assert_eq!(r.broken.map(|b| b.seq), Some(seq));
    assert_eq!((r.checked, r.to, r.hash.as_str()), (0, 0, ""));
}

/// A kept head is reached only by an unbroken walk: at or after the first
/// break it is not, even with the link it was kept with.
#[test]
fn a_kept_head_at_or_after_the_first_break_is_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let store = Store::open_existing(&db, true).unwrap();
    let kept = |seq: i64| ChainHead {
        seq,
        hash: verify::event_hash(&store, seq).unwrap().unwrap(),
    };
    let broken_at = head / 2;
    let path = tampered(&db, "kept", &alter_event(broken_at, "payload_json"));
    let with = |from: i64, head: ChainHead| {
        check(
            &path,
            &VerifyOptions {
                from,
                kept_head: Some(head),
                ..VerifyOptions::default()
            },
        )
    };
    for (from, seq) in [
        (1, broken_at),
        (1, broken_at + 3),
        (1, head),
        (broken_at, broken_at),
        (broken_at, head),
    ] {
        let report = with(from, kept(seq));
        assert_eq!(report.broken.map(|b| b.seq), Some(broken_at));
        let k = report.kept_head.unwrap();
        assert!(
            !k.reached && !k.matches && k.found.is_none(),
            "{from} {seq}: {k:?}"
        );
    }
    let report = with(1, kept(broken_at - 1));
    let k = report.kept_head.unwrap();
    assert!(k.reached && k.matches, "{k:?}");
}

/// A range chains from the link stored before it: a kept head for that
/// event anchors the range, and one with another link does not match.
#[test]
fn a_kept_head_just_before_a_range_anchors_the_link_it_chains_from() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let head = head_seq(&db);
    let store = Store::open_existing(&db, true).unwrap();
    let from = head / 2;
    let stored = verify::event_hash(&store, from - 1).unwrap().unwrap();
    for (hash, matches) in [(stored.clone(), true), ("0".repeat(64), false)] {
        let report = verify::verify(
            &store,
            &VerifyOptions {
                from,
                kept_head: Some(ChainHead {
                    seq: from - 1,
                    hash,
                }),
                ..VerifyOptions::default()
            },
        )
        .unwrap();
        assert!(report.intact(), "{report:?}");
        let k = report.kept_head.unwrap();
        assert!(k.reached, "{k:?}");
        assert_eq!(k.matches, matches, "{k:?}");
        assert_eq!(k.found.as_deref(), Some(stored.as_str()));
    }
}

/// Many stores on one file append to one chain, gap-free and intact
/// (control 63).
#[test]
fn concurrent_writers_leave_one_intact_chain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("many.db");
    drop(Store::open(&db).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                let store = Store::open(&db).unwrap();
                let scripts: Vec<Vec<Act>> = vec![vec![Act::Read, Act::Invalid]; 3];
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap()
                    .block_on(async {
                        // Distinct run ids per writer.
                        for (i, script) in scripts.iter().enumerate() {
                            let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
                            let mut d = Driver::new(
                                GateConfig::new(store.clone(), DefaultPolicy, shared(vec![read]))
                                    .with_ids(sequential_ids(&format!("w{w}-{i}-"))),
                                ScriptedAgent::new(
                                    script
                                        .iter()
                                        .enumerate()
                                        .map(|(k, a)| decision(*a, k))
                                        .chain([Decision::complete("true")]),
                                ),
                            )
                            .unwrap();
                            d.start(Some(&format!("w{w}-{i}")), "many", Limits::default())
                                .await
                                .unwrap();
                        }
                    });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked as i64, head_seq(&db));
}

/// A run paused before a restart resumes onto an intact chain (control
/// 64, Rust form).
#[test]
fn a_run_paused_before_a_restart_resumes_onto_an_intact_chain() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &[vec![Act::Read]]);
    // Pause a run, close the store, reopen it, approve and resume.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    {
        let store = Store::open(&db).unwrap();
        let mut d = Driver::new(
            GateConfig::new(store.clone(), DefaultPolicy, shared(vec![push.clone()]))
                .with_ids(sequential_ids("late-")),
            ScriptedAgent::new([Decision::tool_call("push", r#"{"ref":"x"}"#)]),
        )
        .unwrap();
        let run = rt
            .block_on(d.start(Some("late"), "pause", Limits::default()))
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
    }
    let store = Store::open(&db).unwrap();
    let approval = store.list_approvals("late").unwrap().pop().unwrap();
    operator::approve(
        &store,
        "late",
        &approval.id,
        &DecideOptions {
            by: "bob",
            note: "",
            shown_hash: None,
        },
    )
    .unwrap();
    let mut d = Driver::new(
        GateConfig::new(store.clone(), DefaultPolicy, shared(vec![push.clone()]))
            .with_ids(sequential_ids("late2-")),
        ScriptedAgent::new([Decision::complete("true")]),
    )
    .unwrap();
    let run = rt.block_on(d.resume("late")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    drop(store);
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        4 => Just(Act::Read),
        1 => Just(Act::Invalid),
        2 => Just(Act::PushApproved),
        1 => Just(Act::PushRejected),
        1 => Just(Act::LongRead),
        1 => Just(Act::AskedRead),
    ]
}

/// A change to make: an event column or a state row column, picked by
/// index among those the database has.
#[derive(Debug, Clone)]
enum Change {
    Event { pick: usize, column: usize },
    Row { pick: usize, column: usize },
    Delete { pick: usize },
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        (any::<usize>(), 0..EVENT_COLUMNS.len())
            .prop_map(|(pick, column)| Change::Event { pick, column }),
        (any::<usize>(), any::<usize>()).prop_map(|(pick, column)| Change::Row { pick, column }),
        any::<usize>().prop_map(|pick| Change::Delete { pick }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Over random runs: the untouched log is intact, and one random
    /// change is caught at the first bad seq.
    #[test]
    fn random_runs_are_intact_and_one_change_is_caught(
        scripts in prop::collection::vec(prop::collection::vec(act(), 0..5), 1..4),
        change in change(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let db = build(dir.path(), &scripts);
        let head = head_seq(&db);
        let untouched = check_all(&db);
        prop_assert!(untouched.intact(), "{:?}", untouched);
        prop_assert_eq!(untouched.checked as i64, head);
        let (sql, want) = match change {
            Change::Event { pick, column } => {
                let seq = 1 + (pick as i64).rem_euclid(head);
                let column = EVENT_COLUMNS[column];
                (alter_event(seq, column), expected_event_break(seq, column, head))
            }
            Change::Row { pick, column } => {
                let rows = state_rows(&db);
                let (table, id, written) = &rows[pick % rows.len()];
                let digested: Vec<String> = columns(&db, table)
                    .into_iter()
                    .filter(|c| ![key_column(table), "written_seq", "lease_owner", "lease_expires_at"].contains(&c.as_str()))
                    .collect();
                let column = &digested[column % digested.len()];
                (alter_row(table, id, column), *written)
            }
            Change::Delete { pick } => {
                // A middle event (the last one alone is a cut tail).
                prop_assume!(head > 1);
                let seq = 1 + (pick as i64).rem_euclid(head - 1);
                (format!("DELETE FROM events WHERE seq = {seq}"), seq + 1)
            }
        };
        let report = check_all(&tampered(&db, "changed", &sql));
        let broken = report.broken.clone();
        prop_assert_eq!(broken.map(|b| b.seq), Some(want), "{} -> {:?}", sql, report);
    }
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
    conn.execute_batch(agentrt::store::schema::MIGRATION_1)
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

#[test]
fn an_edited_model_call_cost_or_tool_spec_breaks_at_the_event_that_wrote_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let edits = [
        ("model_calls", "cost_micros", "cost_micros + 1"),
        ("tool_specs", "spec_json", "spec_json || ' '"),
        ("tool_specs", "spec_json", "'{}'"),
    ];
    for (table, column, value) in edits {
        let (key, written): (String, i64) = raw(&db)
            .query_row(
                &format!(
                    "SELECT {}, written_seq FROM {table} ORDER BY rowid LIMIT 1",
                    key_column(table)
                ),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert!(written > 0, "{table} rows are chained");
        let sql = format!(
            "UPDATE {table} SET {column} = {value} WHERE {} = {}",
            key_column(table),
            sql_text(&key)
        );
        let path = tampered(&db, "edited", &sql);
        let broken = check_all(&path)
            .broken
            .unwrap_or_else(|| panic!("{sql}: not caught"));
        assert_eq!(broken.seq, written, "{sql}: {broken:?}");
        assert!(
            broken
                .detail
                .contains(&format!("{table} row {key:?} was changed")),
            "{broken:?}"
        );
    }
}

#[test]
fn an_edited_deleted_or_forged_run_label_is_caught_like_a_run_row() {
    let dir = tempfile::tempdir().unwrap();
    let db = build(dir.path(), &fixed_scripts());
    let store = Store::open_existing(&db, true).unwrap();
    let labelled = Labels::parse(["env=prod-0", "host=build-7"]).unwrap();
    assert_eq!(store.get_run("run0").unwrap().labels, labelled);
    assert!(store.get_run("run1").unwrap().labels.is_empty());
    drop(store);
    let (written, first) = {
        let written: i64 = raw(&db)
            .query_row(
                "SELECT written_seq FROM run_labels WHERE run_id = 'run0'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (written, listings(&db, "run_labels", "run0")[0])
    };
    assert_eq!(written, first, "a label row is written once, at begin");

    // Edited to another valid label set: the filter would find it under
    // labels it never had; verify names the row at the event that wrote it.
    for edit in [
        r#"{"env":"dev","host":"build-7"}"#,
        r#"{"env":"prod-0","host":"build-7","ticket":"OPS-1"}"#,
        "{}",
    ] {
        let sql = format!(
            "UPDATE run_labels SET labels_json = {} WHERE run_id = 'run0'",
            sql_text(edit)
        );
        let broken = check_all(&tampered(&db, "label-edited", &sql))
            .broken
            .unwrap_or_else(|| panic!("{sql}: not caught"));
        assert_eq!(broken.seq, written, "{broken:?}");
        assert_eq!(
            broken.detail,
            "run_labels row \"run0\" was changed after this event wrote it"
        );
        assert_eq!((broken.expected.len(), broken.found.len()), (64, 64));
        assert_ne!(broken.expected, broken.found);
    }

    // Deleted: the event that wrote it names a row that is gone.
    let broken = check_all(&tampered(
        &db,
        "label-deleted",
        "DELETE FROM run_labels WHERE run_id = 'run0'",
    ))
    .broken
    .unwrap();
    assert_eq!(broken.seq, written, "{broken:?}");
    assert!(broken.detail.contains("no longer exists"), "{broken:?}");

    // Forged onto a run begun without labels: named whether it claims no
    // writer or the run's own first write group (which does not list it).
    let run1_begun = listings(&db, "runs", "run1")[0];
    for (claimed, want, says) in [
        (None, 0, "names no event as its writer"),
        (Some(run1_begun), run1_begun, "which does not list it"),
    ] {
        let sql = match claimed {
            None => {
                "INSERT INTO run_labels (run_id, labels_json) VALUES ('run1', '{\"env\":\"prod\"}')"
                    .to_owned()
            }
            Some(seq) => format!(
                "INSERT INTO run_labels (run_id, labels_json, written_seq) VALUES ('run1', '{{\"env\":\"prod\"}}', {seq})"
            ),
        };
        let broken = check_all(&tampered(&db, "label-forged", &sql))
            .broken
            .unwrap_or_else(|| panic!("{sql}: not caught"));
        assert_eq!(broken.seq, want, "{broken:?}");
        assert!(
            broken.detail.starts_with("run_labels row \"run1\"") && broken.detail.contains(says),
            "{broken:?}"
        );
    }
}

/// The extension tables of [`build_with_extension`] and their key columns.
const EXTENSION_TABLES: [(&str, &str); 2] = [("proxy_calls", "id"), ("proxy_nonces", "nonce")];

/// A database whose file holds a satellite's tables: runs driven through
/// the gate, then calls claimed with their runs, one closed again, and
/// nonces (one whose key needs escaping in the row listing), each in a
/// write group of its own.
fn build_with_extension(dir: &Path) -> PathBuf {
    let path = dir.join("extension.db");
    let store = Store::open_with(&path, proxy::options(proxy::PROXY)).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(populate(&store, &fixed_scripts()[..1]));
    store
        .write(|tx| proxy::claim(tx, "s1", "k1", "call1"))
        .unwrap();
    store
        .write(|tx| proxy::claim(tx, "s1", "k2", "call2"))
        .unwrap();
    assert!(
        store
            .write(|tx| proxy::close(tx, 1, "known", "call1"))
            .unwrap()
            .0
    );
    store.write(|tx| proxy::nonce(tx, "n-1", "call1")).unwrap();
    store.write(|tx| proxy::nonce(tx, "n\"2", "call2")).unwrap();
    drop(store);
    path
}

/// Every extension row: `(table, key column, key, written_seq)`.
fn extension_rows(path: &Path) -> Vec<(&'static str, &'static str, String, i64)> {
    let conn = raw(path);
    let mut out = Vec::new();
    for (table, key) in EXTENSION_TABLES {
        let mut stmt = conn
            .prepare(&format!(
                "SELECT CAST({key} AS TEXT), written_seq FROM {table} ORDER BY rowid"
            ))
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((table, key, r.get(0)?, r.get(1)?)))
            .unwrap();
        out.extend(rows.map(Result::unwrap));
    }
    out
}

#[test]
fn a_file_with_extension_tables_verifies_without_the_satellite_and_every_edit_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let db = build_with_extension(dir.path());
    let head = head_seq(&db);
    // Opened as the CLI opens it: no extension declared, read-only.
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, head as u64);
    let store = Store::open_existing(&db, true).unwrap();
    for from in [1, head / 2, head] {
        assert!(verify::verify_events(&store, from, head).unwrap().intact());
    }
    drop(store);
    let rows = extension_rows(&db);
    assert_eq!(rows.len(), 4);
    for (table, _, id, written) in &rows {
        assert_eq!(
            listings(&db, table, id).last(),
            Some(written),
            "{table} {id}"
        );
    }

    for (table, key, id, written) in &rows {
        let first = listings(&db, table, id)[0];
        for column in columns(&db, table) {
            let sql = format!(
                "UPDATE {table} SET {column} = CASE typeof({column}) WHEN 'integer' THEN {column} + 1000 ELSE {column} || 'x' END WHERE {key} = {}",
                sql_text(id)
            );
            let broken = check_all(&tampered(&db, "ext-row", &sql))
                .broken
                .unwrap_or_else(|| panic!("{table} {id} {column}: not caught"));
            if column == *key {
                assert_eq!(broken.seq, first, "{table} {id}: {broken:?}");
                assert!(broken.detail.contains("no longer exists"), "{broken:?}");
            } else if column == "written_seq" {
                assert!(broken.seq > *written, "{table} {id}: {broken:?}");
            } else {
                assert_eq!(broken.seq, *written, "{table} {id} {column}: {broken:?}");
                assert_eq!(
                    broken.detail,
                    format!("{table} row {id:?} was changed after this event wrote it")
                );
                assert_eq!((broken.expected.len(), broken.found.len()), (64, 64));
                assert_ne!(broken.expected, broken.found);
            }
        }
        // Deleted: the event that first wrote it names a row that is gone.
        let sql = format!("DELETE FROM {table} WHERE {key} = {}", sql_text(id));
        let broken = check_all(&tampered(&db, "ext-deleted", &sql))
            .broken
            .unwrap();
        assert_eq!(broken.seq, first, "{table} {id}: {broken:?}");
        assert!(
            broken.detail.contains(&format!("{table} row {id:?}"))
                && broken.detail.contains("no longer exists"),
            "{broken:?}"
        );
    }

    // Forged rows: named with the seq they claim, as core rows are.
    let unlisted: i64 = raw(&db)
        .query_row(
            "SELECT MAX(seq) FROM events WHERE rows_json = ''",
            [],
            |r| r.get(0),
        )
        .unwrap();
    for (claimed, want, says) in [
        (0, 0, "names no event as its writer"),
        (unlisted, unlisted, "which does not list it"),
        (head + 5, head + 1, "events were cut from the end"),
    ] {
        for sql in [
            format!(
                "INSERT INTO proxy_nonces (nonce, seen_at, uses, written_seq) VALUES ('forged', 't', 1, {claimed})"
            ),
            format!(
                "INSERT INTO proxy_calls (id, session, request_key, run_id, written_seq) VALUES (77, 's', 'k', 'r', {claimed})"
            ),
        ] {
            let broken = check_all(&tampered(&db, "ext-forged", &sql))
                .broken
                .unwrap_or_else(|| panic!("{sql}: not caught"));
            assert_eq!(broken.seq, want, "{sql}: {broken:?}");
            assert!(broken.detail.contains(says), "{sql}: {broken:?}");
        }
    }
}

#[test]
fn the_extension_registry_is_read_from_the_file_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let db = build_with_extension(dir.path());
    let (nonce_written, nonce_first) = {
        let written: i64 = raw(&db)
            .query_row(
                "SELECT written_seq FROM proxy_nonces WHERE nonce = 'n-1'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (written, listings(&db, "proxy_nonces", "n-1")[0])
    };
    // Unregistered: the rows the chain lists are in no table it knows.
    let broken = check_all(&tampered(
        &db,
        "unregistered",
        "DELETE FROM extension_tables WHERE name = 'proxy_nonces'",
    ))
    .broken
    .unwrap();
    assert_eq!(broken.seq, nonce_first, "{broken:?}");
    assert!(
        broken
            .detail
            .contains("\"proxy_nonces\", which is not a state table"),
        "{broken:?}"
    );
    // Digested columns reordered: every digest changes.
    let broken = check_all(&tampered(
        &db,
        "reordered",
        r#"UPDATE extension_tables SET columns_json = '["nonce","uses","seen_at"]' WHERE name = 'proxy_nonces'"#,
    ))
    .broken
    .unwrap();
    assert_eq!(broken.seq, nonce_written, "{broken:?}");
    assert!(broken.detail.contains("was changed"), "{broken:?}");
    // Registrations that cannot be checked are a break at seq 0, before
    // any event is trusted; a name is never taken into SQL unchecked.
    for (sql, says) in [
        (
            r#"UPDATE extension_tables SET columns_json = '["nonce","seen_at"]' WHERE name = 'proxy_nonces'"#,
            "\"uses\" is not declared",
        ),
        (
            r#"UPDATE extension_tables SET name = 'proxy_nonces" WHERE 1; --' WHERE name = 'proxy_nonces'"#,
            "is not [a-z]",
        ),
        (
            r#"UPDATE extension_tables SET key_column = 'seen_at' WHERE name = 'proxy_nonces'"#,
            "not unique",
        ),
        (
            "UPDATE extension_tables SET extension = 'other' WHERE name = 'proxy_nonces'",
            "prefix",
        ),
        (
            r#"INSERT INTO extension_tables VALUES ('runs', 'run', 'id', '["id"]')"#,
            "prefix",
        ),
        (
            r#"INSERT INTO extension_tables VALUES ('proxy_gone', 'proxy', 'id', '["id"]')"#,
            "no such table",
        ),
        ("DROP TABLE extension_tables", "is missing"),
    ] {
        let report = check_all(&tampered(&db, "registry", sql));
        let broken = report.broken.unwrap_or_else(|| panic!("{sql}: not caught"));
        assert_eq!(broken.seq, 0, "{sql}: {broken:?}");
        assert!(broken.detail.contains(says), "{sql}: {broken:?}");
        assert_eq!(report.checked, 0);
    }
}
