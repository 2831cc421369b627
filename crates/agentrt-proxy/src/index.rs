//! The proxy's call index (periphery §4.3): one row per run the proxy
//! began, in its own table of the same SQLite file, written through the
//! core's extension point in the run's first write group (so the run's
//! creation explains it, and a row never exists without its run). At most
//! one row per (session, request key) is open: the partial unique index
//! makes two racers for the same request begin one run between them.

use agentrt::json::write_string;
use agentrt::store::{Extension, ExtensionRow, ExtensionTable, SqlValue, WriteTx};
use agentrt::{Canonical, Store, Timestamp};

/// The table.
pub const CALLS_TABLE: &str = "proxy_calls";

/// The proxy's extension: its table and migrations.
pub const INDEX: Extension = Extension {
    name: "proxy",
    migrations: &[(
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
    )],
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
/// request began a run first (or, across processes, the open-row index
/// refused a second open row).
pub fn is_lost_race(error: &agentrt::Error) -> bool {
    match error {
        agentrt::Error::InvalidInput { what, .. } => *what == "request key",
        agentrt::Error::Database { kind, .. } => *kind == agentrt::DatabaseErrorKind::Constraint,
        _ => false,
    }
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
