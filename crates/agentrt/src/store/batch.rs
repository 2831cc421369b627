//! One write transaction on the write connection, for the writer thread's
//! batches and for [`Store::write`](super::Store::write) alike.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Runs one statement without parameters (cached after its first use).
fn run(conn: &Connection, sql: &str) -> Result<()> {
    conn.prepare_cached(sql)
        .and_then(|mut stmt| stmt.execute([]))
        .map(|_| ())
        .map_err(Error::from_sqlite)
}

/// One IMMEDIATE transaction on the write connection, begun, ended and
/// divided into savepoints through cached statements: rusqlite's
/// `Transaction` parses its `BEGIN` and `COMMIT` anew each time, about a
/// tenth of a small commit's own work (docs/performance.md, issue 15).
/// Dropped unfinished, it rolls back.
pub(super) struct Batch<'c> {
    pub(super) conn: &'c Connection,
    open: bool,
}

impl<'c> Batch<'c> {
    pub(super) fn begin(conn: &'c Connection) -> Result<Batch<'c>> {
        run(conn, "BEGIN IMMEDIATE")?;
        Ok(Batch { conn, open: true })
    }

    /// Runs one statement without parameters inside the transaction.
    pub(super) fn run(&self, sql: &str) -> Result<()> {
        run(self.conn, sql)
    }

    pub(super) fn commit(mut self) -> Result<()> {
        self.run("COMMIT")?;
        self.open = false;
        Ok(())
    }

    pub(super) fn rollback(mut self) -> Result<()> {
        self.open = false;
        self.run("ROLLBACK")
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        // A failed COMMIT may leave the transaction open; SQLite may also
        // have rolled it back itself (then there is nothing to end).
        if self.open && !self.conn.is_autocommit() {
            let _ = self.run("ROLLBACK");
        }
    }
}
