//! Shared fixtures: tools, clocks and a recording observer.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::*;
use agentrt::{clock::ManualClock, ids::sequential_ids};

pub fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

/// A clock that advances 1 s per reading, from t0.
pub fn stepping_clock() -> ManualClock {
    ManualClock::new(t0()).stepping(Duration::from_secs(1))
}

/// An observer that keeps every event it hears.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<Event>>>);

impl Recorder {
    pub fn types(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|e| e.event_type.to_string())
            .collect()
    }
    pub fn events(&self) -> Vec<Event> {
        self.0.lock().unwrap().clone()
    }
}

impl Observer for Recorder {
    fn observe(&self, event: &Event) {
        self.0.lock().unwrap().push(event.clone());
    }
}

/// A tool that counts its calls and echoes its arguments.
pub struct Counting {
    pub spec: ToolSpec,
    pub calls: Arc<AtomicUsize>,
    pub seen: Arc<Mutex<Vec<ToolCall>>>,
}

impl Counting {
    pub fn new(name: &str, class: SideEffect) -> Counting {
        Counting {
            spec: ToolSpec::new(name, format!("{name} tool"), class),
            calls: Arc::new(AtomicUsize::new(0)),
            seen: Arc::new(Mutex::new(Vec::new())),
        }
    }
    pub fn count(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Tool for Counting {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push(call.clone());
        Box::pin(async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("ok")) })
    }
}

pub fn shared(tools: Vec<Arc<Counting>>) -> Vec<Arc<dyn Tool>> {
    tools.into_iter().map(|t| t as Arc<dyn Tool>).collect()
}

pub fn config(
    store: &Store,
    policy: impl Policy + 'static,
    tools: Vec<Arc<dyn Tool>>,
    clock: &ManualClock,
    rec: &Recorder,
) -> GateConfig {
    GateConfig::new(store.clone(), policy, tools)
        .with_clock(clock.clock())
        .with_ids(sequential_ids("id"))
        .with_observer(rec.clone())
}

/// `text` as an SQL string literal (the same in every dialect), for
/// statements run behind the store's back.
pub fn sql_text(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A satellite's schema, as the proxy's call index and the approver's
/// nonces would declare theirs: `proxy_calls` (an integer key SQLite
/// chooses) from migration 1, `proxy_nonces` (a text key) from 2.
pub mod proxy {
    use agentrt::store::{Extension, ExtensionTable, NewRun, SqlValue, WriteTx};
    use agentrt::{EventType, Result, StoreOptions};

    pub const CALLS_DDL: &str = "\
CREATE TABLE proxy_calls (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session     TEXT NOT NULL,
    request_key TEXT NOT NULL,
    run_id      TEXT NOT NULL,
    open        INTEGER NOT NULL DEFAULT 1,
    outcome     TEXT NOT NULL DEFAULT '',
    written_seq INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX proxy_calls_open ON proxy_calls (session, request_key) WHERE open = 1;
";

    pub const NONCES_DDL: &str = "\
CREATE TABLE proxy_nonces (
    nonce       TEXT NOT NULL PRIMARY KEY,
    seen_at     TEXT NOT NULL,
    uses        INTEGER NOT NULL,
    written_seq INTEGER NOT NULL DEFAULT 0
);
";

    pub const CALLS: ExtensionTable = ExtensionTable {
        name: "proxy_calls",
        key_column: "id",
        columns: &["id", "session", "request_key", "run_id", "open", "outcome"],
    };

    pub const NONCES: ExtensionTable = ExtensionTable {
        name: "proxy_nonces",
        key_column: "nonce",
        columns: &["nonce", "seen_at", "uses"],
    };

    /// Version 1: the call index only.
    pub const PROXY_V1: Extension = Extension {
        name: "proxy",
        migrations: &[(1, CALLS_DDL)],
        tables: &[CALLS],
    };

    /// Version 2: and the nonces.
    pub const PROXY: Extension = Extension {
        name: "proxy",
        migrations: &[(1, CALLS_DDL), (2, NONCES_DDL)],
        tables: &[CALLS, NONCES],
    };

    pub fn options(extension: Extension) -> StoreOptions {
        StoreOptions {
            extensions: vec![extension],
            ..StoreOptions::default()
        }
    }

    pub fn new_run(id: &str) -> NewRun<'_> {
        NewRun {
            id,
            goal: "call fs_read",
            limits_json: "{}",
            created_at: super::t0(),
            lease_owner: "agentrt-proxy:s1",
            lease_expires_at: super::t0(),
        }
    }

    /// Claims a call: its index row, then its run, in one group (as the
    /// proxy does), with the event that explains both. Returns the row's key.
    pub fn claim(tx: &mut WriteTx<'_>, session: &str, key: &str, run: &str) -> Result<SqlValue> {
        let id = tx.insert_row(
            "proxy_calls",
            &[
                ("session", session.into()),
                ("request_key", key.into()),
                ("run_id", run.into()),
            ],
        )?;
        tx.insert_run(&new_run(run))?;
        tx.append_event(run, "", &super::t0(), EventType::RunCreated, "{}")?;
        Ok(id)
    }

    /// Records a nonce with an event of run `run`.
    pub fn nonce(tx: &mut WriteTx<'_>, nonce: &str, run: &str) -> Result<SqlValue> {
        let key = tx.insert_row(
            "proxy_nonces",
            &[
                ("nonce", nonce.into()),
                ("seen_at", "2026-10-01T09:00:00.000000000Z".into()),
                ("uses", 1.into()),
            ],
        )?;
        tx.append_event(run, "", &super::t0(), EventType::RunStarted, "{}")?;
        Ok(key)
    }

    /// Closes call `id` if it is open, with an event of run `run`.
    pub fn close(tx: &mut WriteTx<'_>, id: i64, outcome: &str, run: &str) -> Result<bool> {
        let closed = tx.update_row(
            "proxy_calls",
            id,
            &[("open", 0.into()), ("outcome", outcome.into())],
            &[("open", 1.into())],
        )?;
        if closed {
            tx.append_event(run, "", &super::t0(), EventType::RunFinished, "{}")?;
        }
        Ok(closed)
    }
}
