//! The proxy's call index (design §28): one row per run the proxy
//! began, in its own table of the same SQLite file, written through the
//! core's extension point in the run's first write group (so the run's
//! creation explains it, and a row never exists without its run). A claim
//! reads the key's newest row and writes its own in one write transaction,
//! which SQLite serialises across processes, so two racers for the same
//! request begin one run between them.
//!
//! A row is *open* while its call may still need the proxy: its run runs
//! or waits, or its request's last attempt has an unknown outcome, or the
//! proxy has not yet seen it settle. It is closed when the next run of its
//! request begins (a key has at most one open row, its newest), or when
//! the proxy sees its run finished with a known outcome or none (*settled*,
//! written in a later run's first write group: see [`settle`]). So the
//! open rows of a session are the few that rule 7 and the status tool must
//! look at, found by an index, however long the session is.

use agentrt::json::write_string;
use agentrt::store::{
    Extension, ExtensionRow, ExtensionTable, RowOrder, RowQuery, SqlValue, WriteTx,
};
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
        // The session's open rows (rule 7, the status tool), and its rows
        // settled since a time, newest first, without reading the rest.
        (
            3,
            "CREATE INDEX proxy_calls_open ON proxy_calls (session, open, closed_at);",
        ),
        // A session's calls of one tool since a time: what a Cedar
        // policy's windows count (`context.recent`).
        (
            4,
            "CREATE INDEX proxy_calls_tool ON proxy_calls (session, tool, created_at);",
        ),
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
/// the canonical JSON of the arguments (design §2). Key order,
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

/// The request key of a call by the caller `issuer`/`subject` (an OAuth
/// token's): the same tool and arguments from another caller is another
/// request, so no caller is held on, attached to or refused by another's.
///
/// ```
/// use agentrt::Canonical;
/// use agentrt_proxy::{caller_request_key, request_key};
/// let args = Canonical::parse_str(r#"{"a":1}"#).unwrap();
/// let alice = caller_request_key("fs_write", &args, "https://id.example", "alice");
/// assert_ne!(alice, caller_request_key("fs_write", &args, "https://id.example", "bob"));
/// assert_ne!(alice, request_key("fs_write", &args));
/// ```
pub fn caller_request_key(tool: &str, args: &Canonical, issuer: &str, subject: &str) -> String {
    let mut bytes =
        Vec::with_capacity(tool.len() + args.as_str().len() + issuer.len() + subject.len() + 4);
    bytes.extend_from_slice(tool.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(args.as_bytes());
    // The arguments are JSON (no NUL inside): the parts cannot run together.
    bytes.push(0);
    bytes.extend_from_slice(b"caller");
    bytes.push(0);
    bytes.extend_from_slice(issuer.as_bytes());
    bytes.push(0);
    bytes.extend_from_slice(subject.as_bytes());
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
    /// Whether it is open: its call not yet settled (see the module's
    /// documentation); a key has at most one open row, its newest.
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

/// The filter of `session`'s rows that are open (`true`) or closed.
fn open_filter(session: &str, open: bool) -> [(&'static str, SqlValue); 2] {
    [
        ("session", SqlValue::from(session)),
        ("open", SqlValue::Int(i64::from(open))),
    ]
}

fn decoded(rows: &[ExtensionRow]) -> Vec<CallRow> {
    rows.iter().filter_map(CallRow::from_row).collect()
}

/// The newest row of (`session`, `key`), open or closed, if any, as
/// committed: one row read from the key index.
pub fn newest_row(store: &Store, session: &str, key: &str) -> agentrt::Result<Option<CallRow>> {
    let filter = key_filter(session, key);
    let rows = store.rows_by(
        CALLS_TABLE,
        &RowQuery::matching(&filter).newest_first().limit(1),
    )?;
    Ok(rows.first().and_then(CallRow::from_row))
}

/// The newest `limit` rows of (`session`, `key`), newest first.
pub fn newest_key_rows(
    store: &Store,
    session: &str,
    key: &str,
    limit: u64,
) -> agentrt::Result<Vec<CallRow>> {
    let filter = key_filter(session, key);
    let query = RowQuery::matching(&filter).newest_first().limit(limit);
    Ok(decoded(&store.rows_by(CALLS_TABLE, &query)?))
}

/// The most open rows one read returns: far more than a session has
/// open (its calls running or waiting, and requests whose outcome is
/// unknown), so that only a database whose rows were written open by an
/// older proxy, with more requests than this, is read in parts (each call
/// settles what it read).
pub const OPEN_ROWS_READ: u64 = 4096;

/// The open rows of `session` (of `tool` only, when given), oldest first,
/// at most [`OPEN_ROWS_READ`].
pub fn open_rows(
    store: &Store,
    session: &str,
    tool: Option<&str>,
) -> agentrt::Result<Vec<CallRow>> {
    let [session, open] = open_filter(session, true);
    let filter: Vec<(&str, SqlValue)> = match tool {
        Some(tool) => vec![session, open, ("tool", SqlValue::from(tool))],
        None => vec![session, open],
    };
    let query = RowQuery::matching(&filter).limit(OPEN_ROWS_READ);
    Ok(decoded(&store.rows_by(CALLS_TABLE, &query)?))
}

/// The newest `limit` open rows of `session`, newest first.
pub fn newest_open_rows(store: &Store, session: &str, limit: u64) -> agentrt::Result<Vec<CallRow>> {
    let filter = open_filter(session, true);
    let query = RowQuery::matching(&filter).newest_first().limit(limit);
    Ok(decoded(&store.rows_by(CALLS_TABLE, &query)?))
}

/// The rows of `session` closed at or after `since`, the latest closed
/// first, at most `limit`.
pub fn closed_since(
    store: &Store,
    session: &str,
    since: Timestamp,
    limit: u64,
) -> agentrt::Result<Vec<CallRow>> {
    let filter = open_filter(session, false);
    let since = SqlValue::from(since.to_string());
    let query = RowQuery {
        at_least: Some(("closed_at", &since)),
        order: RowOrder::Highest("closed_at"),
        ..RowQuery::matching(&filter).limit(limit)
    };
    Ok(decoded(&store.rows_by(CALLS_TABLE, &query)?))
}

/// The run ids of `session`'s newest `limit` calls, newest first.
pub fn newest_runs(store: &Store, session: &str, limit: u64) -> agentrt::Result<Vec<String>> {
    let filter = [("session", SqlValue::from(session))];
    let query = RowQuery::matching(&filter).newest_first().limit(limit);
    Ok(decoded(&store.rows_by(CALLS_TABLE, &query)?)
        .into_iter()
        .map(|row| row.run_id)
        .collect())
}

/// Where a window's count stops: a policy compares it with smaller
/// numbers, and a call reads at most this many rows per window.
pub const MAX_WINDOW_COUNT: u64 = 1_000;

/// For each window, how many calls of `tool` `session` began within it
/// before `now` (at most [`MAX_WINDOW_COUNT`]), read from the tool index.
pub fn recent_counts(
    store: &Store,
    session: &str,
    tool: &str,
    now: Timestamp,
    windows: &std::collections::BTreeMap<String, std::time::Duration>,
) -> agentrt::Result<std::collections::BTreeMap<String, u64>> {
    let filter = [
        ("session", SqlValue::from(session)),
        ("tool", SqlValue::from(tool)),
    ];
    let mut counts = std::collections::BTreeMap::new();
    for (name, window) in windows {
        let nanos = i128::try_from(window.as_nanos()).unwrap_or(i128::MAX);
        let since = Timestamp::from_unix_nanos(now.as_unix_nanos().saturating_sub(nanos));
        let since = SqlValue::from(since.to_string());
        let query = RowQuery {
            at_least: Some(("created_at", &since)),
            order: RowOrder::Highest("created_at"),
            ..RowQuery::matching(&filter).limit(MAX_WINDOW_COUNT)
        };
        counts.insert(
            name.clone(),
            store.rows_by(CALLS_TABLE, &query)?.len() as u64,
        );
    }
    Ok(counts)
}

/// Every row of `session`, oldest first.
pub fn session_rows(store: &Store, session: &str) -> agentrt::Result<Vec<CallRow>> {
    let rows = store.rows_where(CALLS_TABLE, &[("session", SqlValue::from(session))], 0)?;
    Ok(decoded(&rows))
}

/// Every row of (`session`, `key`), oldest first.
#[cfg(test)]
pub fn key_rows(store: &Store, session: &str, key: &str) -> agentrt::Result<Vec<CallRow>> {
    let rows = store.rows_where(CALLS_TABLE, &key_filter(session, key), 0)?;
    Ok(decoded(&rows))
}

/// The newest row of (`session`, `key`) as the group `tx` sees it.
fn newest_in(tx: &WriteTx<'_>, session: &str, key: &str) -> agentrt::Result<Option<CallRow>> {
    let filter = key_filter(session, key);
    let rows = tx.rows_by(
        CALLS_TABLE,
        &RowQuery::matching(&filter).newest_first().limit(1),
    )?;
    Ok(rows.first().and_then(CallRow::from_row))
}

/// The index's part of a new run's first write group: the key's newest
/// row (`expected`, as the caller saw it, its run finished) is closed if
/// still open and the new run's row inserted open. If the key's newest row
/// is no longer the one the caller saw, another call won the race: nothing
/// is written and [`agentrt::Error::ClaimHeld`] naming the request key is
/// returned (see [`is_lost_race`]).
pub fn claim(
    tx: &mut WriteTx<'_>,
    row: &CallRow,
    expected: Option<&str>,
    at: Timestamp,
) -> agentrt::Result<()> {
    let current = newest_in(tx, &row.session, &row.request_key)?.map(|r| r.run_id);
    if current.as_deref() != expected {
        return Err(agentrt::Error::ClaimHeld {
            claim: LOST_RACE,
            detail: "another call of the same request began a run first".into(),
        });
    }
    open_new_row(tx, row, expected, at)
}

/// Closes the key's newest row `previous` (if any, and still open) and
/// inserts `row` open.
fn open_new_row(
    tx: &mut WriteTx<'_>,
    row: &CallRow,
    previous: Option<&str>,
    at: Timestamp,
) -> agentrt::Result<()> {
    if let Some(previous) = previous {
        settle(tx, previous, at)?;
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
/// Otherwise nothing is written and [`agentrt::Error::ClaimHeld`] naming
/// a seen request key is returned (see [`is_seen`]): the caller decides
/// the call the long way, with the key's history read.
pub fn claim_new(tx: &mut WriteTx<'_>, row: &CallRow, at: Timestamp) -> agentrt::Result<()> {
    if newest_in(tx, &row.session, &row.request_key)?.is_some() {
        return Err(agentrt::Error::ClaimHeld {
            claim: SEEN_KEY,
            detail: "the request was made before in this session".into(),
        });
    }
    open_new_row(tx, row, None, at)
}

/// Closes the row of run `run_id` at `at` if it is open (a row closed
/// already, by the next run of its request or by another process, stays
/// as it is): the proxy saw its run finished and its request's last
/// attempt, if any, with a known outcome. Written in a later run's first
/// write group, whose creation event explains it; whether it applied.
pub fn settle(tx: &mut WriteTx<'_>, run_id: &str, at: Timestamp) -> agentrt::Result<bool> {
    tx.update_row(
        CALLS_TABLE,
        run_id,
        &[
            ("open", SqlValue::Int(0)),
            ("closed_at", SqlValue::from(at.to_string().as_str())),
        ],
        &[("open", SqlValue::Int(1))],
    )
}

/// What [`claim_new`]'s refusal names.
const SEEN_KEY: &str = "seen request key";

/// What [`claim`]'s refusal names.
const LOST_RACE: &str = "request key";

/// Whether `error` is [`claim_new`]'s refusal: the request has rows.
pub fn is_seen(error: &agentrt::Error) -> bool {
    error.held_claim() == Some(SEEN_KEY)
}

/// Whether `error` is [`claim`]'s refusal: another call of the same
/// request began a run first.
pub fn is_lost_race(error: &agentrt::Error) -> bool {
    error.held_claim() == Some(LOST_RACE)
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
pub(crate) fn store_options(durability: agentrt::Durability) -> agentrt::StoreOptions {
    agentrt::StoreOptions {
        durability,
        extensions: vec![INDEX],
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
        open_rows(store, "s", None)
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
