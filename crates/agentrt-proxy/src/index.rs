//! The proxy's call index (periphery §4.3): one row per run the proxy
//! began, in its own table of the same SQLite file, written through the
//! core's extension point in the run's first write group (so the run's
//! creation explains it, and a row never exists without its run). At most
//! one row per (session, request key) is open: a claim reads the key's
//! rows and writes its own in one write transaction, which SQLite
//! serialises across processes, so two racers for the same request begin
//! one run between them.

use agentrt::json::write_string;
use agentrt::store::{Extension, ExtensionRow, ExtensionTable, SqlValue, WriteTx};
use agentrt::{Canonical, Store, Timestamp};

/// The table.
pub const CALLS_TABLE: &str = "proxy_calls";

/// The proxy's extension: its table and migrations.
pub const INDEX: Extension = Extension {
    name: "proxy",
    migrations: &[
        (
            1,
            "CREATE TABLE proxy_calls (
             run_id      TEXT NOT NULL PRIMARY KEY,
             session     TEXT NOT NULL,
             request_key TEXT NOT NULL,
             tool        TEXT NOT NULL,
             side_effect TEXT NOT NULL,
             created_at  TEXT NOT NULL,
             open        INTEGER NOT NULL,
             closed_at   TEXT NOT NULL DEFAULT '',
             written_seq INTEGER NOT NULL DEFAULT 0
         );
         CREATE UNIQUE INDEX proxy_calls_open_key
             ON proxy_calls (session, request_key) WHERE open = 1;
         CREATE INDEX proxy_calls_key ON proxy_calls (session, request_key);",
        ),
        // The open-row index was a fourth b-tree written with every new
        // call. What it guarded, one open row per key, both claims check
        // inside the write transaction, which SQLite serialises across
        // processes; lookups use the key index.
        (2, "DROP INDEX proxy_calls_open_key;"),
    ],
    tables: &[ExtensionTable {
        name: CALLS_TABLE,
        key_column: "run_id",
        columns: &[
            "run_id",
            "session",
            "request_key",
            "tool",
            "side_effect",
            "created_at",
            "open",
            "closed_at",
        ],
    }],
};

/// The request key: BLAKE3 of the registered tool name, a zero byte, and
/// the canonical JSON of the arguments (README decision 3). Key order,
/// whitespace and escapes do not change it; number spellings do (`10` is
/// not `1e1`).
///
/// ```
/// use agentrt::Canonical;
/// use agentrt_proxy::request_key;
///
/// let a = request_key("fs_write", &Canonical::parse_str(r#"{"b": 1, "a": "x"}"#).unwrap());
/// let b = request_key("fs_write", &Canonical::parse_str(r#"{"a":"\u0078","b":1}"#).unwrap());
/// let c = request_key("fs_write", &Canonical::parse_str(r#"{"a":"x","b":1.0}"#).unwrap());
/// assert_eq!(a, b);
/// assert_ne!(a, c);
/// ```
pub fn request_key(tool: &str, args: &Canonical) -> String {
    let mut bytes = Vec::with_capacity(tool.len() + 1 + args.as_str().len());
    bytes.extend_from_slice(tool.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(args.as_bytes());
    agentrt::json::hash_hex(&bytes)
}

/// One row of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    /// The run the call began.
    pub run_id: String,
    /// The session.
    pub session: String,
    /// The request key.
    pub request_key: String,
    /// The registered tool name.
    pub tool: String,
    /// The tool's class, as stored.
    pub side_effect: String,
    /// When the row was written.
    pub created_at: String,
    /// Whether it is the key's open row.
    pub open: bool,
}

impl CallRow {
    fn from_row(row: &ExtensionRow) -> Option<CallRow> {
        Some(CallRow {
            run_id: row.text("run_id")?.to_owned(),
            session: row.text("session")?.to_owned(),
            request_key: row.text("request_key")?.to_owned(),
            tool: row.text("tool")?.to_owned(),
            side_effect: row.text("side_effect")?.to_owned(),
            created_at: row.text("created_at")?.to_owned(),
            open: row.int("open")? == 1,
        })
    }
}

fn key_filter<'a>(session: &'a str, key: &'a str) -> [(&'static str, SqlValue); 2] {
    [
        ("session", SqlValue::from(session)),
        ("request_key", SqlValue::from(key)),
    ]
}

/// [`key_filter`] for the key's open row.
fn open_key_filter<'a>(session: &'a str, key: &'a str) -> [(&'static str, SqlValue); 3] {
    let [session, key] = key_filter(session, key);
    [session, key, ("open", SqlValue::Int(1))]
}

/// The open row of (`session`, `key`), if any, as committed.
pub fn open_row(store: &Store, session: &str, key: &str) -> agentrt::Result<Option<CallRow>> {
    let rows = store.rows_where(CALLS_TABLE, &open_key_filter(session, key), 1)?;
    Ok(rows.first().and_then(CallRow::from_row))
}

/// Every row of `session`, oldest first.
pub fn session_rows(store: &Store, session: &str) -> agentrt::Result<Vec<CallRow>> {
    let rows = store.rows_where(CALLS_TABLE, &[("session", SqlValue::from(session))], 0)?;
    Ok(rows.iter().filter_map(CallRow::from_row).collect())
}

/// The open rows of `session` (one per request key), oldest first.
pub fn open_rows(store: &Store, session: &str) -> agentrt::Result<Vec<CallRow>> {
    let filter = [
        ("session", SqlValue::from(session)),
        ("open", SqlValue::Int(1)),
    ];
    let rows = store.rows_where(CALLS_TABLE, &filter, 0)?;
    Ok(rows.iter().filter_map(CallRow::from_row).collect())
}

/// Every row of (`session`, `key`), oldest first.
pub fn key_rows(store: &Store, session: &str, key: &str) -> agentrt::Result<Vec<CallRow>> {
    let rows = store.rows_where(CALLS_TABLE, &key_filter(session, key), 0)?;
    Ok(rows.iter().filter_map(CallRow::from_row).collect())
}

/// The index's part of a new run's first write group: the previous open
/// row of the key (`expected`, as the caller saw it) is closed and the new
/// run's row inserted open. If the key's open row is no longer the one the
/// caller saw, another call won the race: nothing is written and
/// [`agentrt::Error::InvalidInput`] about the request key is returned (see
/// [`is_lost_race`]).
pub fn claim(
    tx: &mut WriteTx<'_>,
    row: &CallRow,
    expected: Option<&str>,
    at: Timestamp,
) -> agentrt::Result<()> {
    let current = tx
        .rows_where(
            CALLS_TABLE,
            &open_key_filter(&row.session, &row.request_key),
            1,
        )?
        .first()
        .and_then(CallRow::from_row)
        .map(|r| r.run_id);
    if current.as_deref() != expected {
        return Err(agentrt::Error::InvalidInput {
            what: "request key",
            detail: "another call of the same request began a run first".into(),
        });
    }
    open_new_row(tx, row, expected, at)
}

/// Closes the key's open row `previous` (if any) and inserts `row` open.
fn open_new_row(
    tx: &mut WriteTx<'_>,
    row: &CallRow,
    previous: Option<&str>,
    at: Timestamp,
) -> agentrt::Result<()> {
    if let Some(previous) = previous {
        tx.update_row(
            CALLS_TABLE,
            previous,
            &[
                ("open", SqlValue::Int(0)),
                ("closed_at", SqlValue::from(at.to_string().as_str())),
            ],
            &[("open", SqlValue::Int(1))],
        )?;
    }
    tx.insert_row(
        CALLS_TABLE,
        &[
            ("run_id", SqlValue::from(row.run_id.as_str())),
            ("session", SqlValue::from(row.session.as_str())),
            ("request_key", SqlValue::from(row.request_key.as_str())),
            ("tool", SqlValue::from(row.tool.as_str())),
            ("side_effect", SqlValue::from(row.side_effect.as_str())),
            ("created_at", SqlValue::from(at.to_string().as_str())),
            ("open", SqlValue::Int(1)),
        ],
    )?;
    Ok(())
}

/// The index's part of a new run's first write group when the caller
/// believes the request is new in the session: the run's row is inserted
/// open only if (`session`, `key`) has no row at all, open or closed.
/// Otherwise nothing is written and [`agentrt::Error::InvalidInput`] about
/// a seen request key is returned (see [`is_seen`]): the caller decides
/// the call the long way, with the key's history read.
pub fn claim_new(tx: &mut WriteTx<'_>, row: &CallRow, at: Timestamp) -> agentrt::Result<()> {
    let seen = tx.rows_where(CALLS_TABLE, &key_filter(&row.session, &row.request_key), 1)?;
    if !seen.is_empty() {
        return Err(agentrt::Error::InvalidInput {
            what: SEEN_KEY,
            detail: "the request was made before in this session".into(),
        });
    }
    open_new_row(tx, row, None, at)
}

/// What [`claim_new`]'s refusal names.
const SEEN_KEY: &str = "seen request key";

/// Whether `error` is [`claim_new`]'s refusal: the request has rows.
pub fn is_seen(error: &agentrt::Error) -> bool {
    matches!(error, agentrt::Error::InvalidInput { what, .. } if *what == SEEN_KEY)
}

/// Whether `error` is [`claim`]'s refusal: another call of the same
/// request began a run first.
pub fn is_lost_race(error: &agentrt::Error) -> bool {
    matches!(error, agentrt::Error::InvalidInput { what, .. } if *what == "request key")
}

/// `{"k":v,…}` of canonical members in sorted key order (the caller sorts).
pub(crate) fn object(members: &[(&str, &str)]) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in members.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(&mut out, key);
        out.push(':');
        out.push_str(value);
    }
    out.push('}');
    out
}

/// The store's options with the proxy's index, as serving opens it.
pub(crate) fn store_options() -> agentrt::StoreOptions {
    agentrt::StoreOptions {
        extensions: vec![INDEX],
        ..agentrt::StoreOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use agentrt::store::NewRun;
    use agentrt::{EventType, StoreOptions};

    use super::*;

    fn at() -> Timestamp {
        Timestamp::parse("2026-10-01T09:00:00Z").expect("time")
    }

    fn row(run_id: &str) -> CallRow {
        CallRow {
            run_id: run_id.into(),
            session: "s".into(),
            request_key: "k".into(),
            tool: "fs_write".into(),
            side_effect: "write".into(),
            created_at: String::new(),
            open: true,
        }
    }

    /// Begins run `run_id` and claims its row in one write group.
    fn begin(
        store: &Store,
        run_id: &str,
        claim_row: impl FnOnce(&mut WriteTx<'_>, &CallRow) -> agentrt::Result<()>,
    ) -> agentrt::Result<()> {
        store
            .write(|tx| {
                tx.insert_run(&NewRun {
                    id: run_id,
                    goal: "g",
                    limits_json: "{}",
                    created_at: at(),
                    lease_owner: "me",
                    lease_expires_at: at(),
                })?;
                tx.append_event(run_id, "", &at(), EventType::RunCreated, "{}")?;
                claim_row(tx, &row(run_id))
            })
            .map(|_| ())
    }

    fn open_ids(store: &Store) -> Vec<String> {
        open_rows(store, "s")
            .expect("rows")
            .into_iter()
            .map(|r| r.run_id)
            .collect()
    }

    /// One open row per key rests on the claims' own checks, made inside
    /// the write transaction (the table has no unique index for it): a
    /// claim that saw no open row, or a new-request claim, loses to a run
    /// that claimed the key first, and nothing of it is written.
    #[test]
    fn a_second_claim_of_the_same_key_is_refused_and_one_row_stays_open() {
        let dir = tempfile::tempdir().expect("dir");
        let options = StoreOptions {
            extensions: vec![INDEX],
            ..StoreOptions::default()
        };
        let store = Store::open_with(dir.path().join("index.db"), options).expect("store");

        begin(&store, "r1", |tx, r| claim_new(tx, r, at())).expect("first claim");
        let stale = begin(&store, "r2", |tx, r| claim(tx, r, None, at()))
            .expect_err("a claim that saw no open row");
        assert!(is_lost_race(&stale), "{stale:?}");
        let seen = begin(&store, "r3", |tx, r| claim_new(tx, r, at()))
            .expect_err("a new-request claim of a seen key");
        assert!(is_seen(&seen), "{seen:?}");
        assert_eq!(open_ids(&store), ["r1"]);
        assert!(
            store.get_run("r2").is_err(),
            "the refused run is not written"
        );

        begin(&store, "r4", |tx, r| claim(tx, r, Some("r1"), at())).expect("the next claim");
        assert_eq!(open_ids(&store), ["r4"]);
        assert_eq!(key_rows(&store, "s", "k").expect("rows").len(), 2);
    }
}
