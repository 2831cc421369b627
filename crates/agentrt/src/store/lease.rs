//! Lease renewal on a connection of its own.

use std::time::Duration;

use rusqlite::Connection;

use super::{Engine, Store, open};
use crate::clock::{Timestamp, lock};
use crate::error::{Error, Result};

fn renew(conn: &Connection, run_id: &str, owner: &str, expires_at: &Timestamp) -> Result<bool> {
    let mut stmt = conn
        .prepare_cached(
            "UPDATE runs SET lease_expires_at = ?1 WHERE id = ?2 AND lease_owner = ?3 AND status = 'RUNNING'",
        )
        .map_err(Error::from_sqlite)?;
    let n = stmt
        .execute(rusqlite::params![expires_at.to_string(), run_id, owner])
        .map_err(Error::from_sqlite)?;
    Ok(n == 1)
}

impl Store {
    /// Extends `owner`'s lease on a RUNNING run to `expires_at` (by the
    /// lease clock; an engine with a clock of its own sets its now + `ttl`
    /// instead); `false` when the run is no longer leased to `owner` (the
    /// lease is lost).
    ///
    /// File stores use a dedicated connection, so the heartbeat is never
    /// queued behind the main connection's work.
    pub(crate) fn renew_lease(
        &self,
        run_id: &str,
        owner: &str,
        expires_at: Timestamp,
        ttl: Duration,
    ) -> Result<bool> {
        let db = match &self.inner.engine {
            Engine::Sqlite(db) => db,
            Engine::Backend(backend) => {
                return backend.renew_lease(run_id, owner, &expires_at, ttl);
            }
        };
        let Some(path) = &db.file else {
            return db.read_conn(|c| renew(c, run_id, owner, &expires_at));
        };
        let mut slot = lock(&db.heartbeat);
        if slot.is_none() {
            *slot = Some(open::heartbeat_connection(path)?);
        }
        match slot.as_ref() {
            Some(conn) => renew(conn, run_id, owner, &expires_at),
            None => Ok(false),
        }
    }
}
