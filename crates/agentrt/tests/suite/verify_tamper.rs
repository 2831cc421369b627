//! `verify` against a tampered database (design §16, controls 61–64, issue 4):
//! a populated database is copied, changed with plain SQL behind the
//! store's back (as anyone holding it could), and verified through another
//! handle. Every change is caught at the first bad seq; a cut-off tail
//! only against a kept head. The database is reached only through
//! `engine`; what only SQLite's files have is in `tests/verify_sqlite.rs`.

#[path = "../common/populate.rs"]
mod populate;

use std::sync::Arc;

use agentrt::ids::sequential_ids;
use agentrt::verify::{self, ChainHead, VerifyOptions, VerifyReport};
use agentrt::*;
use proptest::prelude::*;

use crate::common::*;
use crate::engine;
use populate::{Act, decision, fixed_scripts, populate, populate_as};

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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A populated database, every handle on it closed.
fn build(scripts: &[Vec<Act>]) -> engine::Db {
    let db = engine::Db::new();
    let store = db.open();
    runtime().block_on(populate(&store, scripts));
    drop(store);
    db
}

/// A copy of `pristine` changed by `sql`.
fn tampered(pristine: &engine::Db, sql: &str) -> engine::Db {
    let copy = pristine.copy();
    copy.exec_batch(sql);
    copy
}

fn check(db: &engine::Db, options: &VerifyOptions) -> VerifyReport {
    verify::verify(&db.reader(), options).unwrap()
}

fn check_all(db: &engine::Db) -> VerifyReport {
    check(db, &VerifyOptions::default())
}

fn head_seq(db: &engine::Db) -> i64 {
    db.query_i64("SELECT MAX(seq) FROM events")
}

fn int(text: &str) -> i64 {
    text.parse()
        .unwrap_or_else(|e| panic!("{text:?} is not an integer: {e}"))
}

/// The first row `sql` returns, every column text.
fn first_row(db: &engine::Db, sql: &str) -> Vec<String> {
    db.text_rows(sql)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{sql}: no row"))
}

/// A key and a `written_seq`: the first row of `sql`, which selects both as
/// text.
fn key_and_seq(db: &engine::Db, sql: &str) -> (String, i64) {
    let row = first_row(db, sql);
    (row[0].clone(), int(&row[1]))
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
fn state_rows(db: &engine::Db) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for (table, key) in STATE_TABLES {
        let sql = format!(
            "SELECT CAST({key} AS TEXT), CAST(written_seq AS TEXT) FROM {table} ORDER BY {}",
            db.row_order(table)
        );
        out.extend(
            db.text_rows(&sql)
                .into_iter()
                .map(|row| (table.to_owned(), row[0].clone(), int(&row[1]))),
        );
    }
    out
}

/// The seqs of the events whose listing names the row, in order.
fn listings(db: &engine::Db, table: &str, id: &str) -> Vec<i64> {
    db.text_rows(&engine::listing_seqs(table, id))
        .iter()
        .map(|row| int(&row[0]))
        .collect()
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
fn alter_row(db: &engine::Db, table: &str, id: &str, column: &str) -> String {
    format!(
        "UPDATE {table} SET {column} = {} WHERE {} = {}",
        db.changed(table, column),
        key_column(table),
        sql_text(id)
    )
}

#[test]
fn an_untouched_log_verifies_intact_whole_and_in_every_range() {
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, head as u64);
    assert_eq!((report.from, report.to), (1, head));
    let kept = report.head.clone().unwrap();
    assert_eq!(kept.seq, head);
    assert_eq!(report.hash, kept.hash);
    assert_eq!(kept.hash.len(), 64);

    let store = db.reader();
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
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    assert_eq!(
        db.columns("events"),
        EVENT_COLUMNS,
        "every column is altered"
    );
    for seq in 1..=head {
        for column in EVENT_COLUMNS {
            let copy = tampered(&db, &alter_event(seq, column));
            let report = check_all(&copy);
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
    let db = build(&fixed_scripts());
    let row = first_row(
        &db,
        "SELECT CAST(seq AS TEXT), CAST(octet_length(payload_json) AS TEXT) FROM events
         WHERE octet_length(payload_json) > 8192 ORDER BY seq LIMIT 1",
    );
    let (seq, len) = (int(&row[0]), int(&row[1]));
    // The last character but one changes; the length stays.
    let sql = format!(
        "UPDATE events SET payload_json = substr(payload_json, 1, {n}) || 'z' || substr(payload_json, {len}) WHERE seq = {seq}",
        n = len - 2
    );
    let report = check_all(&tampered(&db, &sql));
    assert_eq!(report.broken.map(|b| b.seq), Some(seq));

    let row = first_row(
        &db,
        "SELECT id, CAST(written_seq AS TEXT), CAST(octet_length(observation_json) AS TEXT)
         FROM steps WHERE octet_length(observation_json) > 8192",
    );
    let (id, written, len) = (row[0].clone(), int(&row[1]), int(&row[2]));
    let sql = format!(
        "UPDATE steps SET observation_json = substr(observation_json, 1, {n}) || 'z' || substr(observation_json, {len}) WHERE id = {}",
        sql_text(&id),
        n = len - 2
    );
    let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
    assert_eq!(broken.seq, written, "{broken:?}");
    assert!(broken.detail.contains(&id), "{broken:?}");
}

#[test]
fn deleting_an_event_in_the_middle_breaks_at_the_next_seq() {
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    for seq in 1..head {
        let copy = tampered(&db, &format!("DELETE FROM events WHERE seq = {seq}"));
        let broken = check_all(&copy).broken.unwrap();
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
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    for seq in 1..head {
        let sql = format!(
            "UPDATE events SET seq = -1 WHERE seq = {seq};
             UPDATE events SET seq = {seq} WHERE seq = {next};
             UPDATE events SET seq = {next} WHERE seq = -1;",
            next = seq + 1
        );
        let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
        assert_eq!(broken.seq, seq, "{broken:?}");
    }
}

/// Cutting events off the end: when the rows they wrote stay, the rows
/// name the cut; when the whole database is an earlier copy (a restored
/// backup), only a kept head shows it.
#[test]
fn a_cut_tail_is_caught_by_its_rows_or_by_a_kept_head() {
    let early = build(&fixed_scripts()[..1]);
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    let kept = check_all(&db).head.unwrap();

    // The last events deleted, the rows left as they are (and so is the
    // chain head an engine keeps beside the log, PostgreSQL's).
    for cut in 1..=3 {
        let sql = format!("DELETE FROM events WHERE seq > {}", head - cut);
        let copy = tampered(&db, &sql);
        let report = check_all(&copy);
        assert!(!report.intact(), "{report:?}");
        let broken = report.broken.unwrap();
        assert_eq!(broken.seq, head - cut + 1, "{broken:?}");
        assert!(broken.detail.contains("cut from the end"), "{broken:?}");
        let with_head = check(
            &copy,
            &VerifyOptions {
                kept_head: Some(kept.clone()),
                ..VerifyOptions::default()
            },
        );
        assert!(!with_head.kept_head.unwrap().reached);
    }

    // The last events deleted and the store writing on: the next events
    // take the cut seqs (no counter remembers them: an engine's chain head
    // row is set back to the cut too), and the rows the cut events wrote
    // still name the cut.
    let kept_to = head - 2;
    let copy = tampered(
        &db,
        &format!(
            "DELETE FROM events WHERE seq > {kept_to}; {}",
            engine::rewind_head(kept_to)
        ),
    );
    let store = copy.open();
    runtime().block_on(populate_as(&store, &fixed_scripts()[..1], "more-"));
    drop(store);
    assert!(head_seq(&copy) > head, "written past the old head");
    let report = check_all(&copy);
    assert!(!report.intact(), "{report:?}");
    let broken = report.broken.unwrap();
    assert!(broken.seq > head - 2 && broken.seq <= head, "{broken:?}");
    assert!(broken.detail.contains("does not list it"), "{broken:?}");

    // Every event deleted: the rows they wrote name the cut.
    let copy = tampered(&db, "DELETE FROM events");
    let report = check_all(&copy);
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
    let db = build(&fixed_scripts());
    let rows = state_rows(&db);
    for (table, _) in STATE_TABLES {
        assert!(
            rows.iter().any(|r| r.0 == table),
            "the fixture has {table} rows"
        );
    }
    for (table, id, written) in &rows {
        let first = listings(&db, table, id)[0];
        for column in db.columns(table) {
            let copy = tampered(&db, &alter_row(&db, table, id, &column));
            let report = check_all(&copy);
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
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    let (id, written) = key_and_seq(
        &db,
        &format!(
            "SELECT id, CAST(written_seq AS TEXT) FROM approvals ORDER BY {} LIMIT 1",
            db.row_order("approvals")
        ),
    );
    let first = listings(&db, "approvals", &id)[0];

    // Deleted: gone from its first listing on.
    let sql = format!("DELETE FROM approvals WHERE id = {}", sql_text(&id));
    let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
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
        let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
        assert!(all.contains(&broken.seq), "{broken:?}");
    }
    assert_eq!(all.last(), Some(&written));

    // Pointed at an event that does not list it: one that lists nothing,
    // or the last event (which lists other rows; not a cut tail).
    let unlisted = db.query_i64(&format!(
        "SELECT MAX(seq) FROM events WHERE rows_json = '' AND seq > {written}"
    ));
    assert!(!listings(&db, "approvals", &id).contains(&head));
    for seq in [unlisted, head] {
        let sql = format!(
            "UPDATE approvals SET written_seq = {seq} WHERE id = {}",
            sql_text(&id)
        );
        let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
        assert_eq!(broken.seq, seq, "{broken:?}");
        assert!(broken.detail.contains("does not list it"), "{broken:?}");
    }

    // A row no event wrote, added by hand.
    for (seq, want) in [(0, 0), (unlisted, unlisted), (head + 5, head + 1)] {
        let sql = format!(
            "INSERT INTO steps (id, written_seq, run_id, idx, status, started_at)
             VALUES ('forged', {seq}, 'run0', 99, 'done', '2026-10-01T09:00:00.000000000Z')"
        );
        let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
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
    let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
    assert_eq!(broken.seq, 0, "{broken:?}");
    assert!(broken.detail.contains("\"forged\""), "{broken:?}");

    // A tie (two tables' rows unaccounted for at the same seq): the table
    // first in name order is named, so the same file always reads alike.
    let sql =
        "INSERT INTO tool_specs (hash, spec_json, written_seq) VALUES ('forged-spec', '{}', 0);
         INSERT INTO steps (id, written_seq, run_id, idx, status, started_at)
         VALUES ('forged-step', 0, 'run0', 99, 'done', '2026-10-01T09:00:00.000000000Z')";
    let broken = check_all(&tampered(&db, sql)).broken.unwrap();
    assert_eq!(broken.seq, 0, "{broken:?}");
    assert!(
        broken.detail.starts_with("steps row \"forged-step\""),
        "{broken:?}"
    );
}

#[test]
fn deleting_two_events_in_a_row_names_both_missing_seqs() {
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    for seq in [1, head / 2, head - 2] {
        let sql = format!("DELETE FROM events WHERE seq IN ({seq}, {})", seq + 1);
        let report = check_all(&tampered(&db, &sql));
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
    let db = build(&fixed_scripts());
    // An approval is written when requested (pending) and when decided.
    let (id, written) = key_and_seq(
        &db,
        &format!(
            "SELECT id, CAST(written_seq AS TEXT) FROM approvals WHERE status = 'approved'
             ORDER BY {} LIMIT 1",
            db.row_order("approvals")
        ),
    );
    let all = listings(&db, "approvals", &id);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[1], written);
    let requested = all[0];
    let sql = format!(
        "UPDATE approvals SET written_seq = {requested}, status = 'pending', decided_at = '',
             decided_by = '', note = '' WHERE id = {}",
        sql_text(&id)
    );
    let report = check_all(&tampered(&db, &sql));
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
    let scripts: Vec<Vec<Act>> = fixed_scripts().into_iter().cycle().take(9).collect();
    let db = build(&scripts);
    let head = head_seq(&db);
    let page = verify::PAGE_EVENTS as i64;
    assert!(head > page + 2, "{head} events");
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!((report.checked as i64, report.to), (head, head));
    for seq in [page, page + 1, page + 2, head] {
        let report = check_all(&tampered(&db, &alter_event(seq, "payload_json")));
        assert_eq!(report.broken.map(|b| b.seq), Some(seq));
        assert_eq!(report.checked as i64, seq - 1);
    }
}

/// A walk that checks no event names no last event: neither a range past
/// the head nor a range whose first event is broken.
#[test]
fn a_walk_that_checks_nothing_names_no_last_event() {
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    let store = db.reader();
    for (from, to) in [(head + 5, 0), (head + 5, head + 2), (head + 5, 3)] {
        let r = verify::verify_events(&store, from, to).unwrap();
        assert!(r.intact(), "{from}..{to}: {r:?}");
        assert_eq!((r.checked, r.to, r.hash.as_str()), (0, 0, ""), "{r:?}");
    }
    drop(store);
    let seq = head / 2;
    let copy = tampered(&db, &alter_event(seq, "payload_json"));
    let r = verify::verify_events(&copy.reader(), seq, 0).unwrap();
    assert_eq!(r.broken.map(|b| b.seq), Some(seq));
    assert_eq!((r.checked, r.to, r.hash.as_str()), (0, 0, ""));
}

/// A kept head is reached only by an unbroken walk: at or after the first
/// break it is not, even with the link it was kept with.
#[test]
fn a_kept_head_at_or_after_the_first_break_is_not_reached() {
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    // The links as stored before the change (read first: a copy is made
    // with no handle open on the database).
    let links: Vec<String> = {
        let store = db.reader();
        (1..=head)
            .map(|seq| verify::event_hash(&store, seq).unwrap().unwrap())
            .collect()
    };
    let kept = |seq: i64| ChainHead {
        seq,
        hash: links[seq as usize - 1].clone(),
    };
    let broken_at = head / 2;
    let copy = tampered(&db, &alter_event(broken_at, "payload_json"));
    let with = |from: i64, head: ChainHead| {
        check(
            &copy,
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
    let db = build(&fixed_scripts());
    let head = head_seq(&db);
    let store = db.reader();
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

/// Many stores on one database append to one chain, gap-free and intact
/// (control 63).
#[test]
fn concurrent_writers_leave_one_intact_chain() {
    let db = engine::Db::new();
    drop(db.open());
    std::thread::scope(|scope| {
        for w in 0..4 {
            let db = &db;
            scope.spawn(move || {
                let store = db.open();
                let scripts: Vec<Vec<Act>> = vec![vec![Act::Read, Act::Invalid]; 3];
                runtime().block_on(async {
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
            });
        }
    });
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked as i64, head_seq(&db));
}

/// A run paused before a restart resumes onto an intact chain (control
/// 64, Rust form).
#[test]
fn a_run_paused_before_a_restart_resumes_onto_an_intact_chain() {
    let db = build(&[vec![Act::Read]]);
    // Pause a run, close the store, reopen it, approve and resume.
    let rt = runtime();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    {
        let store = db.open();
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
    let store = db.open();
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
        let db = build(&scripts);
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
                let digested: Vec<String> = db.columns(table)
                    .into_iter()
                    .filter(|c| ![key_column(table), "written_seq", "lease_owner", "lease_expires_at"].contains(&c.as_str()))
                    .collect();
                let column = &digested[column % digested.len()];
                (alter_row(&db, table, id, column), *written)
            }
            Change::Delete { pick } => {
                // A middle event (the last one alone is a cut tail).
                prop_assume!(head > 1);
                let seq = 1 + (pick as i64).rem_euclid(head - 1);
                (format!("DELETE FROM events WHERE seq = {seq}"), seq + 1)
            }
        };
        let report = check_all(&tampered(&db, &sql));
        let broken = report.broken.clone();
        prop_assert_eq!(broken.map(|b| b.seq), Some(want), "{} -> {:?}", sql, report);
    }
}

#[test]
fn an_edited_model_call_cost_or_tool_spec_breaks_at_the_event_that_wrote_it() {
    let db = build(&fixed_scripts());
    let edits = [
        ("model_calls", "cost_micros", "cost_micros + 1"),
        ("tool_specs", "spec_json", "spec_json || ' '"),
        ("tool_specs", "spec_json", "'{}'"),
    ];
    for (table, column, value) in edits {
        let (key, written) = key_and_seq(
            &db,
            &format!(
                "SELECT {}, CAST(written_seq AS TEXT) FROM {table} ORDER BY {} LIMIT 1",
                key_column(table),
                db.row_order(table)
            ),
        );
        assert!(written > 0, "{table} rows are chained");
        let sql = format!(
            "UPDATE {table} SET {column} = {value} WHERE {} = {}",
            key_column(table),
            sql_text(&key)
        );
        let copy = tampered(&db, &sql);
        let broken = check_all(&copy)
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
    let db = build(&fixed_scripts());
    let store = db.reader();
    let labelled = Labels::parse(["env=prod-0", "host=build-7"]).unwrap();
    assert_eq!(store.get_run("run0").unwrap().labels, labelled);
    assert!(store.get_run("run1").unwrap().labels.is_empty());
    drop(store);
    let written = db.query_i64("SELECT written_seq FROM run_labels WHERE run_id = 'run0'");
    let first = listings(&db, "run_labels", "run0")[0];
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
        let broken = check_all(&tampered(&db, &sql))
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
        let broken = check_all(&tampered(&db, &sql))
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

/// A database that holds a satellite's tables: runs driven through the
/// gate, then calls claimed with their runs, one closed again, and nonces
/// (one whose key needs escaping in the row listing), each in a write
/// group of its own. `None` on an engine without extension tables
/// (`engine::extension_tables`), once it has refused a store that declares
/// them: there is nothing to tamper with there.
fn build_with_extension() -> Option<engine::Db> {
    let db = engine::Db::new();
    let opened = db.open_with(proxy::options(proxy::PROXY));
    if !engine::extension_tables() {
        match opened {
            Err(Error::ExtensionSchema { .. }) => {}
            other => panic!("{}: extension tables: {other:?}", engine::NAME),
        }
        eprintln!(
            "{}: no extension tables, so no extension rows to verify",
            engine::NAME
        );
        return None;
    }
    let store = opened.unwrap();
    runtime().block_on(populate(&store, &fixed_scripts()[..1]));
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
    Some(db)
}

/// Every extension row: `(table, key column, key, written_seq)`.
fn extension_rows(db: &engine::Db) -> Vec<(&'static str, &'static str, String, i64)> {
    let mut out = Vec::new();
    for (table, key) in EXTENSION_TABLES {
        let sql = format!(
            "SELECT CAST({key} AS TEXT), CAST(written_seq AS TEXT) FROM {table} ORDER BY {}",
            db.row_order(table)
        );
        out.extend(
            db.text_rows(&sql)
                .into_iter()
                .map(|row| (table, key, row[0].clone(), int(&row[1]))),
        );
    }
    out
}

#[test]
fn a_file_with_extension_tables_verifies_without_the_satellite_and_every_edit_is_caught() {
    let Some(db) = build_with_extension() else {
        return;
    };
    let head = head_seq(&db);
    // Opened as the CLI opens it: no extension declared, read-only.
    let report = check_all(&db);
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, head as u64);
    let store = db.reader();
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
        for column in db.columns(table) {
            let sql = format!(
                "UPDATE {table} SET {column} = {} WHERE {key} = {}",
                db.changed(table, &column),
                sql_text(id)
            );
            let broken = check_all(&tampered(&db, &sql))
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
        let broken = check_all(&tampered(&db, &sql)).broken.unwrap();
        assert_eq!(broken.seq, first, "{table} {id}: {broken:?}");
        assert!(
            broken.detail.contains(&format!("{table} row {id:?}"))
                && broken.detail.contains("no longer exists"),
            "{broken:?}"
        );
    }

    // Forged rows: named with the seq they claim, as core rows are.
    let unlisted = db.query_i64("SELECT MAX(seq) FROM events WHERE rows_json = ''");
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
            let broken = check_all(&tampered(&db, &sql))
                .broken
                .unwrap_or_else(|| panic!("{sql}: not caught"));
            assert_eq!(broken.seq, want, "{sql}: {broken:?}");
            assert!(broken.detail.contains(says), "{sql}: {broken:?}");
        }
    }
}

#[test]
fn the_extension_registry_is_read_from_the_file_and_checked() {
    let Some(db) = build_with_extension() else {
        return;
    };
    let nonce_written = db.query_i64("SELECT written_seq FROM proxy_nonces WHERE nonce = 'n-1'");
    let nonce_first = listings(&db, "proxy_nonces", "n-1")[0];
    // Unregistered: the rows the chain lists are in no table it knows.
    let broken = check_all(&tampered(
        &db,
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
    let broken = check_all(&tampered(&db, r#"UPDATE extension_tables SET columns_json = '["nonce","uses","seen_at"]' WHERE name = 'proxy_nonces'"#,
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
        let report = check_all(&tampered(&db, sql));
        let broken = report.broken.unwrap_or_else(|| panic!("{sql}: not caught"));
        assert_eq!(broken.seq, 0, "{sql}: {broken:?}");
        assert!(broken.detail.contains(says), "{sql}: {broken:?}");
        assert_eq!(report.checked, 0);
    }
}
