//! A small pool of read connections to a file store. Under WAL a reader
//! sees the last commit and never waits for the writer, so reads do not
//! queue behind a batch that is committing.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex};

use rusqlite::Connection;

use super::open;
use crate::clock::lock;
use crate::error::{Error, Result};

/// Read connections a store opens at most.
pub(super) const MAX_READERS: usize = 4;

pub(super) struct Readers {
    file: PathBuf,
    state: Mutex<Pool>,
    freed: Condvar,
}

struct Pool {
    idle: Vec<Connection>,
    opened: usize,
}

impl Readers {
    pub fn new(file: PathBuf) -> Readers {
        Readers {
            file,
            state: Mutex::new(Pool {
                idle: Vec::new(),
                opened: 0,
            }),
            freed: Condvar::new(),
        }
    }

    /// Runs `f` on an idle read connection, opening one while fewer than
    /// [`MAX_READERS`] exist, else waiting for one to come back.
    pub fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let lent = Lent {
            conn: Some(self.take()?),
            readers: self,
        };
        let Some(conn) = lent.conn.as_ref() else {
            return Err(Error::Internal {
                detail: "a lent read connection went missing".into(),
            });
        };
        f(conn)
    }

    fn take(&self) -> Result<Connection> {
        let mut pool = lock(&self.state);
        loop {
            if let Some(conn) = pool.idle.pop() {
                return Ok(conn);
            }
            if pool.opened < MAX_READERS {
                pool.opened += 1;
                drop(pool);
                let opened = open::reader_connection(&self.file);
                if opened.is_err() {
                    lock(&self.state).opened -= 1;
                    self.freed.notify_one();
                }
                return opened;
            }
            pool = self
                .freed
                .wait(pool)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
    }
}

/// A connection out of the pool; it goes back when dropped, even if the
/// read panicked.
struct Lent<'a> {
    conn: Option<Connection>,
    readers: &'a Readers,
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            lock(&self.readers.state).idle.push(conn);
            self.readers.freed.notify_one();
        }
    }
}
