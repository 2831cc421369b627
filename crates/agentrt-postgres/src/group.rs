//! The engine's side of a write group: the core's `GroupRows` on
//! PostgreSQL. Every guarded change checks its guard in the statement
//! that makes it; the chain head is the `agentrt_chain` row the group
//! locked before it ran (see `backend`).

use std::fmt::Write as _;

use agentrt::chain::{RowValue, row_digest};
use agentrt::clock::Timestamp;
use agentrt::model::{Approval, ApprovalStatus, CallStatus, ModelCall, RunStatus, StepStatus};
use agentrt::store::engine::schema::StateTable;
use agentrt::store::engine::{Assignment, GroupRows, RowTable, SealedEvent, StoredValue};
use agentrt::store::{
    ApprovalChange, ExtensionTable, NewRun, NewStep, RunChange, RunGuard, SqlValue, StepChange,
    StepGuard,
};
use agentrt::{Error, Result};

use crate::dialect::Postgres;
use crate::error::pg_error;
use crate::rows::{Param, PgRows, count, digest_row, int, text};

/// The channel every commit of events is announced on, with the new head
/// seq as the payload.
pub(crate) const CHANNEL: &str = "agentrt_events";

/// The statement that subscribes to [`CHANNEL`] (`LISTEN` takes an
/// identifier, not a parameter).
pub(crate) const LISTEN: &str = "LISTEN agentrt_events";

/// Events per multi-row `INSERT` (8 parameters each).
const EVENTS_PER_INSERT: usize = 64;

/// An instant the server computes (`instant`, a SQL timestamp expression)
/// as lease times are stored: UTC, nine decimals, `Z`.
pub(crate) fn lease_time(instant: &str) -> String {
    format!("(to_char(({instant}) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '000Z')")
}

fn time(t: &Timestamp) -> Param {
    text(t.to_string())
}

/// Appends `AND col IN (?, …)` for a non-empty status list.
fn push_in(sql: &mut String, params: &mut Vec<Param>, col: &str, statuses: &[&str]) {
    if statuses.is_empty() {
        return;
    }
    let marks = vec!["?"; statuses.len()].join(", ");
    let _ = write!(sql, " AND {col} IN ({marks})");
    params.extend(statuses.iter().map(|s| text(*s)));
}

fn push_run_guard(sql: &mut String, params: &mut Vec<Param>, prefix: &str, g: &RunGuard<'_>) {
    let statuses: Vec<&str> = g.statuses.iter().map(RunStatus::as_str).collect();
    push_in(sql, params, &format!("{prefix}status"), &statuses);
    if let Some(owner) = g.lease_owner {
        let _ = write!(sql, " AND {prefix}lease_owner = ?");
        params.push(text(owner));
    }
    if g.lease_live_by_engine {
        // The server's clock, read by this statement: no answer needed
        // before it. Byte order, as SQLite compares the stored text.
        let now = lease_time("clock_timestamp()");
        let _ = write!(sql, " AND {prefix}lease_expires_at > {now} COLLATE \"C\"");
    } else if let Some(at) = &g.lease_live_at {
        let _ = write!(sql, " AND {prefix}lease_expires_at > ? COLLATE \"C\"");
        params.push(time(at));
    }
    if let Some(n) = g.step_count {
        let _ = write!(sql, " AND {prefix}step_count = ?");
        params.push(count(n));
    }
}

/// An update's `SET` list in PostgreSQL's dialect, its values bound in
/// order.
fn set_clause(sets: &[Assignment<'_>], params: &mut Vec<Param>) -> String {
    let (sql, values) = Assignment::set_list(sets, &Postgres);
    params.extend(values.into_iter().map(|value| match value {
        SqlValue::Int(n) => int(n),
        SqlValue::Text(t) => text(t),
    }));
    sql
}

/// A text column's value in a row digest.
fn t(value: &str) -> RowValue<'_> {
    RowValue::Text(value.as_bytes())
}

/// An integer column's value in a row digest (a count saturates, as its
/// parameter does).
fn n(value: u64) -> RowValue<'static> {
    RowValue::Int(i64::try_from(value).unwrap_or(i64::MAX))
}

/// The empty text a column not given on insert defaults to.
const EMPTY: RowValue<'static> = RowValue::Text(b"");

impl PgRows<'_> {
    /// Runs a guarded `UPDATE` of `table`'s row `key` and notes the digest
    /// of the row it returns; whether it changed the row.
    fn update_returning(
        &self,
        table: StateTable,
        key: &str,
        sql: &str,
        params: &[Param],
    ) -> Result<bool> {
        let sql = format!("{sql} RETURNING {}", table.digested_columns().join(", "));
        let rows = self.query(&sql, params)?;
        let Some(row) = rows.first() else {
            return Ok(false);
        };
        self.wrote_row(table, key, digest_row(table.name(), row)?);
        Ok(true)
    }

    /// Notes the digest of a row inserted with `values` (every digested
    /// column, in order).
    fn inserted(&self, table: StateTable, key: &str, values: &[RowValue<'_>]) {
        self.wrote_row(table, key, row_digest(table.name(), values));
    }
}

impl GroupRows for PgRows<'_> {
    fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()> {
        self.defer(
            "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at, lease_owner, lease_expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                text(run.id),
                text(run.goal),
                text(RunStatus::Running.as_str()),
                text(run.limits_json),
                time(&run.created_at),
                time(&run.created_at),
                text(run.lease_owner),
                time(&run.lease_expires_at),
            ],
        )?;
        let created = run.created_at.to_string();
        #[rustfmt::skip]
        self.inserted(StateTable::Runs, run.id, &[
            t(run.id), t(run.goal), t(RunStatus::Running.as_str()), EMPTY, EMPTY,
            t(run.limits_json), n(0), t(&created), t(&created), EMPTY, EMPTY,
            n(0), n(0), n(0), n(0), n(0), n(0),
        ]);
        Ok(())
    }

    fn insert_run_labels(&mut self, run_id: &str, labels_json: &str) -> Result<()> {
        self.defer(
            "INSERT INTO run_labels (run_id, labels_json) VALUES (?, ?)",
            vec![text(run_id), text(labels_json)],
        )?;
        self.inserted(StateTable::RunLabels, run_id, &[t(run_id), t(labels_json)]);
        Ok(())
    }

    fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool> {
        let mut params: Vec<Param> = Vec::new();
        let sets = set_clause(&change.assignments(), &mut params);
        let mut sql = format!("UPDATE runs SET {sets} WHERE id = ?");
        params.push(text(run_id));
        let unguarded = guard.statuses.is_empty()
            && guard.lease_owner.is_none()
            && guard.lease_live_at.is_none()
            && !guard.lease_live_by_engine
            && guard.step_count.is_none();
        if unguarded {
            // Nothing to decide: sent with the next request, which fails
            // if the run is missing (the store never deletes one).
            self.forget_row(StateTable::Runs, run_id);
            self.defer_one(&sql, params, format!("an update of run {run_id:?}"))?;
            return Ok(true);
        }
        push_run_guard(&mut sql, &mut params, "", guard);
        self.update_returning(StateTable::Runs, run_id, &sql, &params)
    }

    fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()> {
        self.defer(
            "INSERT INTO steps (id, run_id, idx, status, started_at) VALUES (?, ?, ?, ?, ?)",
            vec![
                text(step.id),
                text(step.run_id),
                count(step.index),
                text(step.status.as_str()),
                time(&step.started_at),
            ],
        )?;
        let started = step.started_at.to_string();
        #[rustfmt::skip]
        self.inserted(StateTable::Steps, step.id, &[
            t(step.id), t(step.run_id), n(step.index), t(step.status.as_str()),
            EMPTY, EMPTY, EMPTY, EMPTY, t(&started), EMPTY, EMPTY, EMPTY,
        ]);
        Ok(())
    }

    fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool> {
        let mut params: Vec<Param> = Vec::new();
        let sets = set_clause(&change.assignments(), &mut params);
        let mut sql = format!("UPDATE steps SET {sets} WHERE id = ?");
        params.push(text(step_id));
        let statuses: Vec<&str> = guard.statuses.iter().map(StepStatus::as_str).collect();
        push_in(&mut sql, &mut params, "status", &statuses);
        if let Some((run_id, run_guard)) = &guard.run {
            sql.push_str(" AND EXISTS (SELECT 1 FROM runs r WHERE r.id = ?");
            params.push(text(*run_id));
            push_run_guard(&mut sql, &mut params, "r.", run_guard);
            sql.push(')');
        }
        if let Some(approval_id) = guard.granted_by {
            sql.push_str(
                " AND EXISTS (SELECT 1 FROM approvals a WHERE a.id = ? AND a.run_id = steps.run_id
                   AND a.step_id = steps.id AND a.status = ?
                   AND NOT EXISTS (SELECT 1 FROM approvals b WHERE b.run_id = a.run_id
                       AND b.step_id = a.step_id AND b.pos > a.pos))",
            );
            params.push(text(approval_id));
            params.push(text(ApprovalStatus::Approved.as_str()));
        }
        self.update_returning(StateTable::Steps, step_id, &sql, &params)
    }

    fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        self.defer(
            "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
                 request_json, hash, status, created_at, decided_at, decided_by, note, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                text(&a.id),
                text(&a.run_id),
                text(&a.step_id),
                text(&a.kind),
                text(a.capability.as_str()),
                text(a.presentation.as_str()),
                text(a.request.as_str()),
                text(&a.hash),
                text(a.status.as_str()),
                time(&a.created_at),
                text(a.decided_at.map(|t| t.to_string()).unwrap_or_default()),
                text(&a.decided_by),
                text(&a.note),
                text(a.expires_at.map(|t| t.to_string()).unwrap_or_default()),
            ],
        )?;
        let created = a.created_at.to_string();
        let decided = a.decided_at.map(|t| t.to_string()).unwrap_or_default();
        let expires = a.expires_at.map(|t| t.to_string()).unwrap_or_default();
        #[rustfmt::skip]
        self.inserted(StateTable::Approvals, &a.id, &[
            t(&a.id), t(&a.run_id), t(&a.step_id), t(&a.kind), t(a.capability.as_str()),
            t(a.presentation.as_str()), t(a.request.as_str()), t(&a.hash), t(a.status.as_str()),
            t(&created), t(&decided), t(&a.decided_by), t(&a.note), t(&expires),
        ]);
        Ok(())
    }

    fn update_approval(&mut self, approval_id: &str, change: &ApprovalChange<'_>) -> Result<bool> {
        let mut sets = vec!["status = ?"];
        let mut params = vec![text(change.status.as_str())];
        if let Some(t) = &change.decided_at {
            sets.push("decided_at = ?");
            params.push(time(t));
        }
        if let Some(by) = change.decided_by {
            sets.push("decided_by = ?");
            params.push(text(by));
        }
        if let Some(note) = change.note {
            sets.push("note = ?");
            params.push(text(note));
        }
        let sql = format!(
            "UPDATE approvals SET {} WHERE id = ? AND status = ? AND hash = ?{}",
            sets.join(", "),
            if change.by_was.is_some() {
                " AND decided_by = ?"
            } else {
                ""
            }
        );
        params.extend([
            text(approval_id),
            text(change.from.as_str()),
            text(change.hash),
        ]);
        if let Some(by) = change.by_was {
            params.push(text(by));
        }
        self.update_returning(StateTable::Approvals, approval_id, &sql, &params)
    }

    fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<bool> {
        let inserted = self.execute(
            "INSERT INTO tool_specs (hash, spec_json) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING",
            &[text(hash), text(spec_json)],
        )?;
        if inserted == 1 {
            self.inserted(StateTable::ToolSpecs, hash, &[t(hash), t(spec_json)]);
        }
        Ok(inserted == 1)
    }

    fn insert_model_call(
        &mut self,
        call: &ModelCall,
        owner: &str,
        wall: &Timestamp,
    ) -> Result<bool> {
        let n = self.execute(
            "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at)
             SELECT ?::text, ?::text, ?::text, ?::bigint, ?::text, ?::text, ?::text
             WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'RUNNING'
                           AND lease_owner = ? AND lease_expires_at > ? COLLATE \"C\")",
            &[
                text(&call.id),
                text(&call.run_id),
                text(&call.step_id),
                int(i64::from(call.attempt)),
                text(CallStatus::Dispatched.as_str()),
                text(&call.model),
                time(&call.dispatched_at),
                text(&call.run_id),
                text(owner),
                time(wall),
            ],
        )?;
        Ok(n == 1)
    }

    fn complete_model_call(&mut self, call: &ModelCall) -> Result<bool> {
        let n = self.execute(
            "UPDATE model_calls SET status = ?, input_tokens = ?, output_tokens = ?,
                 cached_input_tokens = ?, cost_micros = ?, latency_ms = ?, error = ?, completed_at = ?
             WHERE id = ? AND status = 'dispatched'",
            &[
                text(call.status.as_str()),
                count(call.usage.input_tokens),
                count(call.usage.output_tokens),
                count(call.usage.cached_input_tokens),
                int(call.cost_micros),
                count(call.latency_ms),
                text(&call.error),
                text(call.completed_at.map(|t| t.to_string()).unwrap_or_default()),
                text(&call.id),
            ],
        )?;
        Ok(n == 1)
    }

    fn insert_extension_row(
        &mut self,
        table: &ExtensionTable,
        values: &[(&'static str, &SqlValue)],
    ) -> Result<StoredValue> {
        self.insert_extension(table, values)
    }

    fn update_extension_row(
        &mut self,
        table: &ExtensionTable,
        key: &SqlValue,
        set: &[(&'static str, &SqlValue)],
        guard: &[(&'static str, &SqlValue)],
    ) -> Result<bool> {
        self.update_extension(table, key, set, guard)
    }

    fn chain_head(&self) -> Result<(i64, String)> {
        // A write group reads the head with its lock.
        self.begin()?;
        if let Some(head) = self.held_head() {
            return Ok(head);
        }
        let rows = self.query(
            "SELECT head_seq, head_hash FROM agentrt_chain WHERE id = 1",
            &[],
        )?;
        let Some(row) = rows.first() else {
            return Err(Error::Internal {
                detail: "the database has no chain head row (agentrt_chain)".into(),
            });
        };
        let seq: i64 = row.try_get(0).map_err(|e| pg_error(&e))?;
        let hash: String = row.try_get(1).map_err(|e| pg_error(&e))?;
        Ok((seq, hash))
    }

    fn mark_written(&mut self, table: RowTable<'_>, key: &str, seq: i64) -> Result<Option<String>> {
        Ok(self.mark_all_written(&[(table, key)], seq)?.pop().flatten())
    }

    fn mark_all_written(
        &mut self,
        rows: &[(RowTable<'_>, &str)],
        seq: i64,
    ) -> Result<Vec<Option<String>>> {
        let mut digests: Vec<Option<String>> = Vec::with_capacity(rows.len());
        // The rows whose digest the group did not note: read as marked.
        let mut queries = Vec::new();
        let mut asked = Vec::new();
        for (i, (table, key)) in rows.iter().enumerate() {
            let core = match table {
                RowTable::Core(core) => *core,
                RowTable::Extension(t) => {
                    if let Some(digest) = self.mark_extension_noted(t, key, seq)? {
                        digests.push(Some(digest));
                    } else if let Some(query) = self.mark_extension_query(t, key, seq)? {
                        queries.push(query);
                        asked.push((i, t.name));
                        digests.push(None);
                    } else {
                        digests.push(None);
                    }
                    continue;
                }
            };
            if let Some(digest) = self.written_digest(core, key) {
                self.defer(
                    &format!(
                        "UPDATE {} SET written_seq = ? WHERE {} = ?",
                        core.name(),
                        core.key_column()
                    ),
                    vec![int(seq), text(*key)],
                )?;
                digests.push(Some(digest));
                continue;
            }
            let sql = format!(
                "UPDATE {name} SET written_seq = ? WHERE {key_column} = ? RETURNING {columns}",
                name = core.name(),
                key_column = core.key_column(),
                columns = core.digested_columns().join(", "),
            );
            queries.push((sql, vec![int(seq), text(*key)]));
            asked.push((i, core.name()));
            digests.push(None);
        }
        if queries.is_empty() {
            return Ok(digests);
        }
        // One request for every row read (and the statements deferred).
        let answers = self.query_all(&queries)?;
        for ((i, name), rows) in asked.into_iter().zip(answers) {
            digests[i] = match rows.first() {
                Some(row) => Some(digest_row(name, row)?),
                None => None,
            };
        }
        Ok(digests)
    }

    fn insert_events(&mut self, events: &[SealedEvent<'_>]) -> Result<()> {
        let Some(last) = events.last() else {
            return Ok(());
        };
        for chunk in events.chunks(EVENTS_PER_INSERT) {
            let mut sql = String::from(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, rows_json, hash) VALUES ",
            );
            let mut params: Vec<Param> = Vec::with_capacity(chunk.len() * 8);
            for (i, sealed) in chunk.iter().enumerate() {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str("(?, ?, ?, ?, ?, ?, ?, ?)");
                let event = sealed.event;
                params.extend([
                    int(event.seq),
                    text(&event.run_id),
                    text(&event.step_id),
                    text(&event.at),
                    text(event.event_type.as_str()),
                    text(&event.payload),
                    text(sealed.rows),
                    text(sealed.hash),
                ]);
            }
            self.defer(&sql, params)?;
        }
        // The head moves with its events; the notice is delivered at commit.
        self.defer(
            "WITH head AS (UPDATE agentrt_chain SET head_seq = ?, head_hash = ? WHERE id = 1)
             SELECT pg_notify(?, ?)",
            vec![
                int(last.event.seq),
                text(last.hash),
                text(CHANNEL),
                text(last.event.seq.to_string()),
            ],
        )?;
        self.moved_head(last.event.seq, last.hash);
        Ok(())
    }
}
