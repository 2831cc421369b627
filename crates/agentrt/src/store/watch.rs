//! Waiting for a run to change, whoever changes it.
//!
//! Commits through this store announce the highest event seq they wrote at
//! once. Commits by other processes (an operator's `agentrt approve`) are
//! noticed by one poller thread per store, which reads SQLite's
//! `data_version` (a counter that moves when another connection commits)
//! every [`POLL`] while anyone waits, and reads the new head only when it
//! moved. Waiters sleep on a watch channel: nobody busy-loops, and a
//! thousand waiters cost one cheap statement per poll.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use rusqlite::Connection;
use tokio::sync::watch;

use super::open;
use crate::clock::lock;
use crate::error::{Error, Result};
use crate::model::Event;

/// How often the poller looks for other processes' commits.
pub(super) const POLL: Duration = Duration::from_millis(20);

/// The committed head as this process knows it.
pub(super) struct Head {
    seq: watch::Sender<i64>,
    /// The poller thread runs (it ends when nobody waits).
    polling: Mutex<bool>,
}

impl Head {
    pub fn new() -> Head {
        Head {
            seq: watch::Sender::new(0),
            polling: Mutex::new(false),
        }
    }

    /// Announces committed events.
    pub fn committed(&self, events: &[Event]) {
        if let Some(top) = events.iter().map(|e| e.seq).max() {
            self.advance(top);
        }
    }

    pub(super) fn advance(&self, seq: i64) {
        self.seq.send_if_modified(|head| {
            let moved = seq > *head;
            if moved {
                *head = seq;
            }
            moved
        });
    }

    /// A receiver that wakes on every later head; for a file store, starts
    /// the poller if it is not running.
    pub fn subscribe(self: &Arc<Head>, file: Option<&PathBuf>) -> Result<watch::Receiver<i64>> {
        match file {
            Some(file) => self.subscribe_with(|| {
                let conn = open::reader_connection(file)?;
                let head = Arc::downgrade(self);
                std::thread::Builder::new()
                    .name("agentrt-watch".into())
                    .spawn(move || poll(&conn, &head))
                    .map(drop)
                    .map_err(|e| Error::Internal {
                        detail: format!("cannot start the store's change poller: {e}"),
                    })
            }),
            None => Ok(self.seq.subscribe()),
        }
    }

    /// A receiver that wakes on every later head; calls `start` to start
    /// the watcher of other commits when none runs.
    pub fn subscribe_with(
        &self,
        start: impl FnOnce() -> Result<()>,
    ) -> Result<watch::Receiver<i64>> {
        let receiver = self.seq.subscribe();
        let mut polling = lock(&self.polling);
        if !*polling {
            start()?;
            *polling = true;
        }
        Ok(receiver)
    }

    /// Whether anyone waits; when nobody does, the watcher must stop, and
    /// is marked stopped so that the next waiter starts one.
    pub(super) fn has_waiters(&self) -> bool {
        let mut polling = lock(&self.polling);
        if self.seq.receiver_count() == 0 {
            *polling = false;
            return false;
        }
        true
    }
}

/// The poller: while the store lives and someone waits, read
/// `data_version`; when it moved, publish the new head.
fn poll(conn: &Connection, head: &Weak<Head>) {
    let mut version = data_version(conn).ok();
    loop {
        std::thread::sleep(POLL);
        let Some(head) = head.upgrade() else {
            return;
        };
        if !head.has_waiters() {
            // Nobody waits: stop; the next waiter starts a poller.
            return;
        }
        let now = data_version(conn).ok();
        if now.is_some() && now != version {
            version = now;
            if let Ok(seq) = max_seq(conn) {
                head.advance(seq);
            }
        }
    }
}

fn data_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
}

fn max_seq(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM events", [], |r| r.get(0))
}
