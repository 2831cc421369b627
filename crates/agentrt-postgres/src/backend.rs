//! The core's `Backend` on PostgreSQL: write groups, reads, lease renewals
//! and the change signal.
//!
//! A write group is one transaction (READ COMMITTED) whose first statement
//! locks the chain head row (`SELECT … FOR UPDATE` on `agentrt_chain`).
//! Groups of every host therefore queue on that row instead of
//! conflicting: once a group holds it, every later statement of the group
//! sees every group committed before, its guards are checked in the
//! statements that make its changes, and no other group commits until it
//! ends. A lone group sends `BEGIN` and the lock with its first request
//! (the first statement it needs an answer to, and what it deferred); a
//! batch takes the lock before its groups run. Taking the lock is the one
//! statement that can meet a serialization failure or a broken deadlock:
//! the request that took it goes again, whole, before the group saw any
//! answer, so a group commits whole or not at all.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use agentrt::clock::Timestamp;
use agentrt::store::ExtensionShape;
use agentrt::store::engine::{Backend, BatchedGroup, ChainRows, ChangeSignal, GroupRows, ReadRows};
use agentrt::{Error, Result};
use tokio_postgres::Client;

use crate::batch::{Batcher, Outcome};
use crate::chain_read::ChainSnapshot;
use crate::endpoint::Endpoint;
use crate::error::{Describe, pg_error};
use crate::extensions::ExtensionTables;
use crate::group::lease_time;
use crate::pool::{Conn, Pool};
use crate::rows::{Locked, PgRows};
use crate::runtime::{IoRuntime, block_on, round_trip, send_only};

/// The store's engine on one PostgreSQL database.
pub(crate) struct PgBackend {
    pub(crate) pool: Pool,
    pub(crate) endpoint: Endpoint,
    pub(crate) runtime: Arc<IoRuntime>,
    pub(crate) about: Describe,
    pub(crate) batcher: Batcher,
    /// Whether opening may create and migrate (extension tables too).
    pub(crate) migrate: bool,
    /// The extension tables, once [`Backend::sync_extensions`] made them.
    pub(crate) extensions: OnceLock<ExtensionTables>,
}

/// A read's transaction: one snapshot for all its statements.
const BEGIN_SNAPSHOT: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

/// A write group's open transaction: rolled back when dropped before its
/// commit (an error or a panic in the group), so the pooled connection is
/// never handed on inside a transaction.
struct OpenGroup<'a> {
    client: &'a Client,
    ended: bool,
}

impl Drop for OpenGroup<'_> {
    fn drop(&mut self) {
        if !self.ended {
            // A failure leaves the connection broken, and the pool drops it.
            let _ = round_trip(self.client.batch_execute("ROLLBACK"));
        }
    }
}

/// The extension tables of a store opened without any.
static NO_EXTENSIONS: LazyLock<ExtensionTables> = LazyLock::new(ExtensionTables::default);

impl PgBackend {
    /// The store's extension tables (none until synced).
    fn extension_tables(&self) -> &ExtensionTables {
        self.extensions.get().unwrap_or(&NO_EXTENSIONS)
    }

    /// Opens a batch's transaction holding the chain head's lock, before
    /// any of its groups runs: what the lock answered. A connection found
    /// dead fails it (the pool runs it again on another).
    fn begin_locked(&self, conn: &mut Conn) -> Result<Locked> {
        let rows = PgRows::unbegun(
            &conn.client,
            &mut conn.statements,
            self.extension_tables(),
            None,
        );
        let locked = rows.locked();
        drop(rows);
        if locked.is_err() {
            // The transaction, if it began, is aborted: end it.
            let _ = round_trip(conn.client.batch_execute("ROLLBACK"));
        }
        locked
    }

    /// Runs a batch of write groups in one transaction holding the chain
    /// head's lock (see `batch`): a group alone as its own transaction,
    /// several each in a savepoint, so a group that fails or panics rolls
    /// back alone. No group is reported done before the `COMMIT` answered.
    pub(crate) fn run_batch(&self, groups: Vec<BatchedGroup>) -> Vec<Outcome> {
        let count = groups.len();
        if count == 1 {
            // Its own transaction: its deferred statements go with the
            // COMMIT, and no savepoint is needed.
            let mut group = groups.into_iter().next();
            let ran = catch_unwind(AssertUnwindSafe(|| {
                self.write_group(&mut |rows| match group.take() {
                    Some(group) => group(rows),
                    None => Err(Error::Internal {
                        detail: "a write group of a batch ran twice".into(),
                    }),
                })
            }));
            return vec![match ran {
                Ok(result) => Outcome::Done(result),
                Err(panic) => Outcome::Panicked(panic),
            }];
        }
        let mut outcomes: Vec<Option<Outcome>> = (0..count).map(|_| None).collect();
        let mut succeeded = Vec::with_capacity(count);
        let ended = self.pool.with_started(
            |conn| self.begin_locked(conn),
            |conn, Locked { now, mut head }| {
                let mut open = OpenGroup {
                    client: &conn.client,
                    ended: false,
                };
                for (i, group) in groups.into_iter().enumerate() {
                    let mut rows = PgRows::new(
                        &conn.client,
                        &mut conn.statements,
                        self.extension_tables(),
                        Some(now),
                        Some(head.clone()),
                    );
                    rows.defer_simple("SAVEPOINT agentrt_group");
                    let ran = match catch_unwind(AssertUnwindSafe(|| group(&mut rows))) {
                        Ok(Ok(())) => rows.flush().map_err(Outcome::from),
                        Ok(Err(e)) => Err(Outcome::Done(Err(e))),
                        Err(panic) => Err(Outcome::Panicked(panic)),
                    };
                    match ran {
                        Ok(()) => {
                            head = rows.held_head().unwrap_or(head);
                            succeeded.push(i);
                        }
                        Err(outcome) => {
                            outcomes[i] = Some(outcome);
                            // Nothing sent, nothing to undo; else back to the
                            // group's own savepoint (the newest of that name).
                            if rows.sent_any() {
                                drop(rows);
                                round_trip(
                                    conn.client
                                        .batch_execute("ROLLBACK TO SAVEPOINT agentrt_group"),
                                )
                                .map_err(|e| pg_error(&e))?;
                            }
                        }
                    }
                }
                if succeeded.is_empty() {
                    return Ok(());
                }
                round_trip(conn.client.batch_execute("COMMIT")).map_err(|e| pg_error(&e))?;
                open.ended = true;
                Ok(())
            },
        );
        // The transaction failed: none of its groups committed.
        if let Err(e) = &ended {
            for i in succeeded.drain(..) {
                outcomes[i] = None;
            }
            for outcome in &mut outcomes {
                outcome.get_or_insert_with(|| Outcome::Done(Err(e.for_each_group())));
            }
        }
        for i in succeeded {
            outcomes[i] = Some(Outcome::Done(Ok(())));
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    Outcome::Done(Err(Error::Internal {
                        detail: "a write group of a batch was not run".into(),
                    }))
                })
            })
            .collect()
    }

    /// Runs `f` on one read-only REPEATABLE READ transaction of `conn`:
    /// one snapshot for the whole read, as a SQLite read transaction.
    /// `BEGIN` goes with the first query and the `COMMIT` is not waited
    /// for, so a read of one query is one round trip.
    fn snapshot_on(
        &self,
        conn: &mut Conn,
        f: impl FnOnce(&PgRows<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut open = OpenGroup {
            client: &conn.client,
            ended: false,
        };
        let rows = PgRows::new(
            &conn.client,
            &mut conn.statements,
            self.extension_tables(),
            None,
            None,
        );
        rows.defer_simple(BEGIN_SNAPSHOT);
        f(&rows)?;
        if rows.sent_any() {
            // Nothing to wait for: the snapshot was read, and the
            // connection's next request queues behind the `COMMIT`.
            send_only(conn.client.batch_execute("COMMIT"));
        }
        open.ended = true;
        Ok(())
    }
}

impl Backend for PgBackend {
    fn write_group(&self, group: &mut dyn FnMut(&mut dyn GroupRows) -> Result<()>) -> Result<()> {
        self.pool.with(|conn| {
            let reconnect = || Pool::connect(&self.runtime, &self.endpoint);
            // `BEGIN` and the lock go with the group's first request, which
            // goes again on a new connection if this one is found dead.
            let mut rows = PgRows::unbegun(
                &conn.client,
                &mut conn.statements,
                self.extension_tables(),
                Some(&reconnect),
            );
            // The statements the group deferred go with the COMMIT.
            let ran = group(&mut rows).and_then(|()| rows.finish("COMMIT"));
            let began = rows.sent_any();
            if let Some(replacement) = rows.into_replacement() {
                // The dead connection closes; the new one takes its place.
                *conn = replacement;
            }
            if ran.is_err() && began {
                // Whatever is left open ends here; should this fail too, the
                // connection is broken and the pool drops it.
                let _ = round_trip(conn.client.batch_execute("ROLLBACK"));
            }
            ran
        })
    }

    fn write_batched(&self, group: BatchedGroup) -> Result<()> {
        self.batcher.submit(group, |groups| self.run_batch(groups))
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadRows) -> Result<()>) -> Result<()> {
        // A read that fails on a connection the server closed runs again
        // on another: it only read.
        self.pool
            .with_reconnecting(|conn| self.snapshot_on(conn, |rows| f(rows)).map(Ok))
    }

    fn chain_read(&self, f: &mut dyn FnMut(&dyn ChainRows) -> Result<()>) -> Result<()> {
        // `verify`'s walk runs once: it may have reported part of the log.
        self.pool
            .with(|conn| self.snapshot_on(conn, |rows| f(&ChainSnapshot::new(rows))))
    }

    fn renew_lease(
        &self,
        run_id: &str,
        owner: &str,
        _expires_at: &Timestamp,
        ttl: Duration,
    ) -> Result<bool> {
        // The server's clock + ttl, as the text a `Timestamp` shows.
        let ttl_micros = i64::try_from(ttl.as_micros()).unwrap_or(i64::MAX);
        // One statement, run again as it is on a connection found closed:
        // setting the expiry to the server's now + ttl twice is setting it.
        let sql = format!(
            "UPDATE runs SET lease_expires_at = {}
             WHERE id = $2 AND lease_owner = $3 AND status = 'RUNNING'",
            lease_time("clock_timestamp() + $1::bigint * interval '1 microsecond'")
        );
        self.pool.with_reconnecting(|conn| {
            round_trip(
                conn.client
                    .execute(sql.as_str(), &[&ttl_micros, &run_id, &owner]),
            )
            .map(|changed| Ok(changed == 1))
            .map_err(|e| pg_error(&e))
        })
    }

    fn watch(&self, signal: ChangeSignal) -> Result<()> {
        let (ready, started) = tokio::sync::oneshot::channel();
        self.runtime.handle()?.spawn(crate::listener::listen(
            self.endpoint.clone(),
            signal,
            ready,
        ));
        // Subscribed once `LISTEN` is in effect: a commit after this call
        // returns is heard.
        match block_on(started) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(stopped()),
        }
    }

    fn describe(&self) -> String {
        self.about.to_string()
    }

    fn sync_extensions(&self, extensions: &[ExtensionShape]) -> Result<()> {
        let tables = self.pool.with(|conn| {
            crate::extensions::sync(&mut conn.client, &self.about, extensions, self.migrate)
        })?;
        self.extensions.set(tables).map_err(|_| Error::Internal {
            detail: "the extension tables were synced twice".into(),
        })
    }
}

fn stopped() -> Error {
    Error::Internal {
        detail: "the PostgreSQL store's listener stopped before it listened".into(),
    }
}
