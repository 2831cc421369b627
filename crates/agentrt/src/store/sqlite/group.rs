//! The SQLite engine of a write group: every statement a group runs.

use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::{OptionalExtension, ToSql, params_from_iter};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{Approval, ApprovalStatus, CallStatus, ModelCall, RunStatus, StepStatus};

use super::super::changes::{
    ApprovalChange, Assignment, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard,
};
use super::super::dialect::SqliteDialect;
use super::super::digest::{digest_row, mark_sql};
use super::super::extension::{ExtensionTable, SqlValue, quoted, quoted_list};
use super::super::group_rows::{GroupRows, RowTable, SealedEvent};
use super::super::read_rows::StoredValue;
use super::{SqliteRows, sql_value, stored};

/// Events per multi-row `INSERT` (8 parameters each).
const EVENTS_PER_INSERT: usize = 32;

/// `INSERT INTO events … VALUES (…), …` for 1 to [`EVENTS_PER_INSERT`]
/// events, at index `n - 1`.
static INSERT_EVENTS: LazyLock<Vec<String>> = LazyLock::new(|| {
    (1..=EVENTS_PER_INSERT)
        .map(|n| {
            let mut sql = String::from(
                "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, rows_json, hash) VALUES ",
            );
            for i in 0..n {
                if i > 0 {
                    sql.push_str(", ");
                }
                sql.push_str("(?, ?, ?, ?, ?, ?, ?, ?)");
            }
            sql
        })
        .collect()
});

fn text(t: &Timestamp) -> Value {
    Value::Text(t.to_string())
}

/// An update's `SET` list in SQLite's dialect, its values bound in order.
fn set_clause(sets: &[Assignment<'_>], params: &mut Vec<Value>) -> String {
    let (sql, values) = Assignment::set_list(sets, &SqliteDialect);
    params.extend(values.iter().map(sql_value));
    sql
}

fn int(n: u64) -> Value {
    Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Appends `AND col IN (?, …)` for a non-empty status list.
fn push_in(sql: &mut String, params: &mut Vec<Value>, col: &str, statuses: &[&str]) {
    if statuses.is_empty() {
        return;
    }
    sql.push_str(" AND ");
    sql.push_str(col);
    sql.push_str(" IN (");
    for (i, s) in statuses.iter().enumerate() {
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push('?');
        params.push(Value::Text((*s).to_owned()));
    }
    sql.push(')');
}

fn push_run_guard(sql: &mut String, params: &mut Vec<Value>, prefix: &str, g: &RunGuard<'_>) {
    let statuses: Vec<&str> = g.statuses.iter().map(RunStatus::as_str).collect();
    push_in(sql, params, &format!("{prefix}status"), &statuses);
    if let Some(owner) = g.lease_owner {
        sql.push_str(&format!(" AND {prefix}lease_owner = ?"));
        params.push(Value::Text(owner.to_owned()));
    }
    if let Some(at) = &g.lease_live_at {
        sql.push_str(&format!(" AND {prefix}lease_expires_at > ?"));
        params.push(text(at));
    }
    if let Some(n) = g.step_count {
        sql.push_str(&format!(" AND {prefix}step_count = ?"));
        params.push(int(n));
    }
}

impl GroupRows for SqliteRows<'_> {
    /// Inserts a run as RUNNING with its lease.
    fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()> {
        self.exec(
            "INSERT INTO runs (id, goal, status, limits_json, created_at, started_at, lease_owner, lease_expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                Value::Text(run.id.to_owned()),
                Value::Text(run.goal.to_owned()),
                Value::Text(RunStatus::Running.as_str().to_owned()),
                Value::Text(run.limits_json.to_owned()),
                text(&run.created_at),
                text(&run.created_at),
                Value::Text(run.lease_owner.to_owned()),
                text(&run.lease_expires_at),
            ],
        )?;
        Ok(())
    }

    /// Records a run's labels (their canonical JSON), chained like the run's
    /// row; writes nothing for no labels. Once per run: a second call for
    /// the same run is refused by the table's key.
    fn insert_run_labels(&mut self, run_id: &str, labels_json: &str) -> Result<()> {
        self.exec(
            "INSERT INTO run_labels (run_id, labels_json) VALUES (?, ?)",
            vec![
                Value::Text(run_id.to_owned()),
                Value::Text(labels_json.to_owned()),
            ],
        )?;
        Ok(())
    }

    /// Updates a run if it meets `guard`; `false` if it did not.
    fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool> {
        let mut params: Vec<Value> = Vec::new();
        let mut sql = format!(
            "UPDATE runs SET {}",
            set_clause(&change.assignments(), &mut params)
        );
        sql.push_str(" WHERE id = ?");
        params.push(Value::Text(run_id.to_owned()));
        push_run_guard(&mut sql, &mut params, "", guard);
        Ok(self.exec(&sql, params)? == 1)
    }

    /// Inserts a step.
    fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()> {
        self.exec(
            "INSERT INTO steps (id, run_id, idx, status, started_at) VALUES (?, ?, ?, ?, ?)",
            vec![
                Value::Text(step.id.to_owned()),
                Value::Text(step.run_id.to_owned()),
                int(step.index),
                Value::Text(step.status.as_str().to_owned()),
                text(&step.started_at),
            ],
        )?;
        Ok(())
    }

    /// Updates a step if it (and its run) meet `guard`; `false` if not.
    fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool> {
        let mut params: Vec<Value> = Vec::new();
        let mut sql = format!(
            "UPDATE steps SET {}",
            set_clause(&change.assignments(), &mut params)
        );
        sql.push_str(" WHERE id = ?");
        params.push(Value::Text(step_id.to_owned()));
        let statuses: Vec<&str> = guard.statuses.iter().map(StepStatus::as_str).collect();
        push_in(&mut sql, &mut params, "status", &statuses);
        if let Some((run_id, run_guard)) = &guard.run {
            sql.push_str(" AND EXISTS (SELECT 1 FROM runs r WHERE r.id = ?");
            params.push(Value::Text((*run_id).to_owned()));
            push_run_guard(&mut sql, &mut params, "r.", run_guard);
            sql.push(')');
        }
        if let Some(approval_id) = guard.granted_by {
            sql.push_str(
                " AND EXISTS (SELECT 1 FROM approvals a WHERE a.id = ? AND a.run_id = steps.run_id
                   AND a.step_id = steps.id AND a.status = ?
                   AND NOT EXISTS (SELECT 1 FROM approvals b WHERE b.run_id = a.run_id
                       AND b.step_id = a.step_id AND b.rowid > a.rowid))",
            );
            params.push(Value::Text(approval_id.to_owned()));
            params.push(Value::Text(ApprovalStatus::Approved.as_str().to_owned()));
        }
        Ok(self.exec(&sql, params)? == 1)
    }

    /// Inserts an approval.
    fn insert_approval(&mut self, a: &Approval) -> Result<()> {
        self.exec(
            "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
                 request_json, hash, status, created_at, decided_at, decided_by, note, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            vec![
                Value::Text(a.id.clone()),
                Value::Text(a.run_id.clone()),
                Value::Text(a.step_id.clone()),
                Value::Text(a.kind.clone()),
                Value::Text(a.capability.as_str().to_owned()),
                Value::Text(a.presentation.as_str().to_owned()),
                Value::Text(a.request.as_str().to_owned()),
                Value::Text(a.hash.clone()),
                Value::Text(a.status.as_str().to_owned()),
                text(&a.created_at),
                a.decided_at
                    .as_ref()
                    .map(text)
                    .unwrap_or(Value::Text(String::new())),
                Value::Text(a.decided_by.clone()),
                Value::Text(a.note.clone()),
                a.expires_at
                    .as_ref()
                    .map(text)
                    .unwrap_or(Value::Text(String::new())),
            ],
        )?;
        Ok(())
    }

    /// Updates an approval that is still in `change.from` with `change.hash`;
    /// `false` if it is not.
    fn update_approval(&mut self, approval_id: &str, change: &ApprovalChange<'_>) -> Result<bool> {
        let mut sets = vec!["status = ?"];
        let mut params = vec![Value::Text(change.status.as_str().to_owned())];
        if let Some(t) = &change.decided_at {
            sets.push("decided_at = ?");
            params.push(text(t));
        }
        if let Some(by) = change.decided_by {
            sets.push("decided_by = ?");
            params.push(Value::Text(by.to_owned()));
        }
        if let Some(note) = change.note {
            sets.push("note = ?");
            params.push(Value::Text(note.to_owned()));
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
        params.push(Value::Text(approval_id.to_owned()));
        params.push(Value::Text(change.from.as_str().to_owned()));
        params.push(Value::Text(change.hash.to_owned()));
        if let Some(by) = change.by_was {
            params.push(Value::Text(by.to_owned()));
        }
        Ok(self.exec(&sql, params)? == 1)
    }

    /// Records a tool spec under its hash (kept if already there).
    fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<bool> {
        let inserted = self.exec(
            "INSERT OR IGNORE INTO tool_specs (hash, spec_json) VALUES (?, ?)",
            vec![
                Value::Text(hash.to_owned()),
                Value::Text(spec_json.to_owned()),
            ],
        )?;
        Ok(inserted == 1)
    }

    fn insert_model_call(
        &mut self,
        call: &ModelCall,
        owner: &str,
        wall: &Timestamp,
    ) -> Result<bool> {
        let n = self.exec(
            "INSERT INTO model_calls (id, run_id, step_id, attempt, status, model, dispatched_at)
             SELECT ?, ?, ?, ?, ?, ?, ?
             WHERE EXISTS (SELECT 1 FROM runs WHERE id = ? AND status = 'RUNNING'
                           AND lease_owner = ? AND lease_expires_at > ?)",
            vec![
                Value::Text(call.id.clone()),
                Value::Text(call.run_id.clone()),
                Value::Text(call.step_id.clone()),
                Value::Integer(i64::from(call.attempt)),
                Value::Text(CallStatus::Dispatched.as_str().to_owned()),
                Value::Text(call.model.clone()),
                Value::Text(call.dispatched_at.to_string()),
                Value::Text(call.run_id.clone()),
                Value::Text(owner.to_owned()),
                Value::Text(wall.to_string()),
            ],
        )?;
        Ok(n == 1)
    }

    fn complete_model_call(&mut self, call: &ModelCall) -> Result<bool> {
        let n = self.exec(
            "UPDATE model_calls SET status = ?, input_tokens = ?, output_tokens = ?,
                 cached_input_tokens = ?, cost_micros = ?, latency_ms = ?, error = ?, completed_at = ?
             WHERE id = ? AND status = 'dispatched'",
            vec![
                Value::Text(call.status.as_str().to_owned()),
                int(call.usage.input_tokens),
                int(call.usage.output_tokens),
                int(call.usage.cached_input_tokens),
                Value::Integer(call.cost_micros),
                int(call.latency_ms),
                Value::Text(call.error.clone()),
                Value::Text(call.completed_at.map(|t| t.to_string()).unwrap_or_default()),
                Value::Text(call.id.clone()),
            ],
        )?;
        Ok(n == 1)
    }

    fn insert_extension_row(
        &mut self,
        table: &ExtensionTable,
        values: &[(&'static str, &SqlValue)],
    ) -> Result<StoredValue> {
        let names: Vec<&str> = values.iter().map(|(name, _)| *name).collect();
        let sql = format!(
            "{} RETURNING {}",
            table.insert_sql(&names),
            quoted(table.key_column)
        );
        let params = values.iter().map(|(_, v)| sql_value(v));
        let mut stmt = self.conn.prepare_cached(&sql).map_err(Error::from_sqlite)?;
        stmt.query_row(params_from_iter(params), |r| Ok(stored(r.get_ref(0)?)))
            .map_err(Error::from_sqlite)
    }

    fn update_extension_row(
        &mut self,
        table: &ExtensionTable,
        key: &SqlValue,
        set: &[(&'static str, &SqlValue)],
        guard: &[(&'static str, &SqlValue)],
    ) -> Result<bool> {
        let mut params: Vec<Value> = set.iter().map(|(_, v)| sql_value(v)).collect();
        params.push(sql_value(key));
        params.extend(guard.iter().map(|(_, v)| sql_value(v)));
        let set: Vec<&str> = set.iter().map(|(name, _)| *name).collect();
        let guard: Vec<&str> = guard.iter().map(|(name, _)| *name).collect();
        Ok(self.exec(&table.update_sql(&set, &guard), params)? == 1)
    }

    fn chain_head(&self) -> Result<(i64, String)> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
            .map_err(Error::from_sqlite)?;
        let head = stmt
            .query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .optional()
            .map_err(Error::from_sqlite)?;
        Ok(head.unwrap_or((0, String::new())))
    }

    fn mark_written(&mut self, table: RowTable<'_>, key: &str, seq: i64) -> Result<Option<String>> {
        let extension_sql;
        let ((select, update), columns) = match table {
            RowTable::Core(t) => (mark_sql(t), t.digested_columns().len()),
            RowTable::Extension(t) => {
                extension_sql = (
                    format!(
                        "SELECT rowid, {} FROM {} WHERE {} = ?1",
                        quoted_list(t.columns),
                        quoted(t.name),
                        quoted(t.key_column)
                    ),
                    format!(
                        "UPDATE {} SET written_seq = ?1 WHERE rowid = ?2",
                        quoted(t.name)
                    ),
                );
                (
                    (extension_sql.0.as_str(), extension_sql.1.as_str()),
                    t.columns.len(),
                )
            }
        };
        let name = table.name();
        let read = self
            .conn
            .prepare_cached(select)
            .and_then(|mut stmt| {
                stmt.query_row([key], |r| {
                    Ok((r.get::<_, i64>(0)?, digest_row(name, 1, columns, r)?))
                })
                .optional()
            })
            .map_err(Error::from_sqlite)?;
        let Some((rowid, digest)) = read else {
            return Ok(None);
        };
        self.conn
            .prepare_cached(update)
            .and_then(|mut stmt| stmt.execute(rusqlite::params![seq, rowid]))
            .map_err(Error::from_sqlite)?;
        Ok(Some(digest))
    }

    fn insert_events(&mut self, events: &[SealedEvent<'_>]) -> Result<()> {
        for chunk in events.chunks(EVENTS_PER_INSERT) {
            let types: Vec<&str> = chunk.iter().map(|e| e.event.event_type.as_str()).collect();
            let mut params: Vec<&dyn ToSql> = Vec::with_capacity(chunk.len() * 8);
            for (sealed, kind) in chunk.iter().zip(&types) {
                let event = sealed.event;
                params.push(&event.seq);
                params.push(&event.run_id);
                params.push(&event.step_id);
                params.push(&event.at);
                params.push(kind);
                params.push(&event.payload);
                params.push(&sealed.rows);
                params.push(&sealed.hash);
            }
            let mut stmt = self
                .conn
                .prepare_cached(&INSERT_EVENTS[chunk.len() - 1])
                .map_err(Error::from_sqlite)?;
            stmt.execute(params.as_slice())
                .map_err(Error::from_sqlite)?;
        }
        Ok(())
    }
}
