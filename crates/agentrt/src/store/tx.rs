//! Write groups: the typed row operations of one IMMEDIATE transaction.

use std::sync::LazyLock;

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, ToSql, params_from_iter};

use crate::chain;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, Event, EventType, Labels, Run, RunStatus, Step, StepStatus,
    TerminalReason,
};

use super::digest::{Written, digest_row, mark_sql};
use super::extension::Registry;
use super::read;
use super::schema::StateTable;

/// A run to insert.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// The id.
    pub id: &'a str,
    /// The goal.
    pub goal: &'a str,
    /// The limits as JSON.
    pub limits_json: &'a str,
    /// Creation (and start) time.
    pub created_at: Timestamp,
    /// The lease owner.
    pub lease_owner: &'a str,
    /// The lease expiry (wall clock).
    pub lease_expires_at: Timestamp,
}

/// Conditions a run row must meet for an update to apply (compare-and-set).
#[derive(Debug, Clone, Default)]
pub struct RunGuard<'a> {
    /// The statuses the run may be in (empty: any).
    pub statuses: &'a [RunStatus],
    /// The lease owner the run must have.
    pub lease_owner: Option<&'a str>,
    /// The lease must not have expired at this wall-clock instant.
    pub lease_live_at: Option<Timestamp>,
    /// The step count the run must have.
    pub step_count: Option<u64>,
}

/// What happens to the lease columns.
#[derive(Debug, Clone, Default)]
pub enum LeaseChange<'a> {
    /// Leave them.
    #[default]
    Keep,
    /// Set owner and expiry.
    Set {
        /// The owner.
        owner: &'a str,
        /// The expiry (wall clock).
        expires_at: Timestamp,
    },
    /// Clear both.
    Clear,
}

/// Changes to a run row.
#[derive(Debug, Clone, Default)]
pub struct RunChange<'a> {
    /// New status.
    pub status: Option<RunStatus>,
    /// Terminal reason and detail.
    pub reason: Option<(TerminalReason, &'a str)>,
    /// Finish time.
    pub finished_at: Option<Timestamp>,
    /// Result of a completed run.
    pub result: Option<&'a Canonical>,
    /// Lease columns.
    pub lease: LeaseChange<'a>,
    /// Steps started to add.
    pub step_count_add: u64,
    /// Active milliseconds to add (saturating).
    pub active_ms_add: u64,
    /// Model accounting totals to set (calls, usage, estimated cost).
    pub totals: Option<(u64, crate::model::Usage, i64)>,
}

/// A step to insert.
#[derive(Debug, Clone)]
pub struct NewStep<'a> {
    /// The id.
    pub id: &'a str,
    /// The run.
    pub run_id: &'a str,
    /// Its index.
    pub index: u64,
    /// Its status.
    pub status: StepStatus,
    /// Start time.
    pub started_at: Timestamp,
}

/// Conditions a step row (and optionally its run) must meet.
#[derive(Debug, Clone, Default)]
pub struct StepGuard<'a> {
    /// The statuses the step may be in (empty: any).
    pub statuses: &'a [StepStatus],
    /// The run's id and conditions, checked in the same statement.
    pub run: Option<(&'a str, RunGuard<'a>)>,
    /// An approval that must be the step's latest (by insertion order) and
    /// approved: a session acting on a grant it read earlier acts only if no
    /// newer approval of the step has superseded it since.
    pub granted_by: Option<&'a str>,
}

/// Changes to a step row. Text fields set to `Some("")` clear the column.
#[derive(Debug, Clone, Default)]
pub struct StepChange<'a> {
    /// New status.
    pub status: Option<StepStatus>,
    /// Decision JSON.
    pub decision_json: Option<&'a str>,
    /// Policy decision JSON.
    pub policy_json: Option<&'a str>,
    /// Observation JSON and its content hash.
    pub observation: Option<(&'a str, &'a str)>,
    /// Start time.
    pub started_at: Option<Timestamp>,
    /// Finish time (`Some(None)` clears it).
    pub finished_at: Option<Option<Timestamp>>,
    /// Spec hash.
    pub spec_hash: Option<&'a str>,
    /// Policy id.
    pub policy_id: Option<&'a str>,
}

/// Changes to an approval row, applied only while it is pending with the
/// given hash.
#[derive(Debug, Clone)]
pub struct ApprovalChange<'a> {
    /// New status.
    pub status: ApprovalStatus,
    /// The status it must have now.
    pub from: ApprovalStatus,
    /// The hash it must have now.
    pub hash: &'a str,
    /// Decision time (`None` keeps it).
    pub decided_at: Option<Timestamp>,
    /// Decider (`None` keeps it).
    pub decided_by: Option<&'a str>,
    /// Note (`None` keeps it).
    pub note: Option<&'a str>,
}

/// One write group, inside an open transaction (its own, or a savepoint of
/// a batch that group commit shares among several groups). The store
/// commits or rolls back around it; the group never commits itself.
///
/// Events are buffered and chained at commit: the state rows the
/// transaction inserted or updated are read back, digested into its last
/// event's `rows_json` and marked with that event's seq (`written_seq`),
/// then every event is inserted with its link (see [`crate::chain`]). A
/// transaction that appends no event digests nothing: the writes without
/// an event (the lease heartbeat, a session releasing its lease) touch
/// only lease columns, which row digests leave out. Any other change of a
/// state row needs an event to explain it, or `verify` reports the row.
/// Rows of extension tables ([`WriteTx::insert_row`],
/// [`WriteTx::update_row`]) are state rows like the core's.
pub struct WriteTx<'c> {
    tx: &'c Connection,
    /// The extension tables registered with the store.
    extensions: &'c Registry,
    /// Appended events, without seq until commit.
    events: Vec<Event>,
    /// The state rows written, in write order (duplicates allowed).
    written: Vec<(Written, String)>,
}

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

impl<'c> WriteTx<'c> {
    pub(super) fn new(tx: &'c Connection, extensions: &'c Registry) -> WriteTx<'c> {
        WriteTx {
            tx,
            extensions,
            events: Vec::new(),
            written: Vec::new(),
        }
    }

    /// The transaction's connection (for the extension row operations).
    pub(super) fn conn(&self) -> &'c Connection {
        self.tx
    }

    /// The extension tables registered with the store.
    pub(super) fn extensions(&self) -> &'c Registry {
        self.extensions
    }

    /// The name of a written table.
    fn table_name(&self, table: Written) -> &'static str {
        match table {
            Written::Core(t) => t.name(),
            Written::Extension(i) => self.extensions.name(i),
        }
    }

    /// Seals the group (see [`WriteTx`]) and returns its events, ready for
    /// the enclosing transaction to commit.
    pub(super) fn finish(mut self) -> Result<Vec<Event>> {
        if self.events.is_empty() {
            // A state change with no event to explain it would stay out of
            // the chain: refuse it (dropping the transaction rolls back).
            if let Some((table, id)) = self.written.first() {
                return Err(Error::UnexplainedWrite {
                    table: self.table_name(*table),
                    id: id.clone(),
                    rows: self.written.len(),
                });
            }
        } else {
            self.seal()?;
        }
        Ok(self.events)
    }

    /// Notes that this transaction wrote a state row.
    pub(super) fn wrote(&mut self, table: StateTable, id: &str) {
        self.written.push((Written::Core(table), id.to_owned()));
    }

    /// Notes that this transaction wrote a row of extension table `index`.
    pub(super) fn wrote_extension_row(&mut self, index: usize, key: String) {
        self.written.push((Written::Extension(index), key));
    }

    /// Chains the buffered events onto the log: digests the written rows
    /// into the last event, gives every event its seq and link, and
    /// inserts them.
    fn seal(&mut self) -> Result<()> {
        let (head_seq, mut prev) = self.read_head()?;
        let count = i64::try_from(self.events.len()).unwrap_or(i64::MAX);
        let last_seq = head_seq.saturating_add(count);
        let rows = self.digest_written(last_seq)?;
        let last = self.events.len() - 1;
        let mut links = Vec::with_capacity(self.events.len());
        for (i, event) in self.events.iter_mut().enumerate() {
            event.seq = head_seq.saturating_add(1 + i as i64);
            let hash = chain::link(&chain::Link {
                prev: &prev,
                seq: event.seq,
                run_id: &event.run_id,
                step_id: &event.step_id,
                at: &event.at,
                event_type: event.event_type.as_str(),
                payload: &event.payload,
                rows: if i == last { &rows } else { "" },
            });
            prev.clone_from(&hash);
            links.push(hash);
        }
        self.insert_events(&links, &rows)
    }

    /// Reads back every state row written, marks it with `last_seq` and
    /// returns the `rows_json` listing of their digests.
    fn digest_written(&mut self, last_seq: i64) -> Result<String> {
        let mut written = std::mem::take(&mut self.written);
        if written.is_empty() {
            return Ok(String::new());
        }
        written.sort_unstable();
        written.dedup();
        let mut entries = Vec::with_capacity(written.len());
        for (table, id) in written {
            let (name, sql, columns) = match table {
                Written::Core(t) => (t.name(), mark_sql(t), t.digested_columns().len()),
                Written::Extension(i) => {
                    let t = self.extensions.get(i)?;
                    (t.table.name, t.mark_sql.as_str(), t.table.columns.len())
                }
            };
            let mut stmt = self.tx.prepare_cached(sql).map_err(Error::from_sqlite)?;
            let digest = stmt
                .query_row(rusqlite::params![last_seq, id], |r| {
                    digest_row(name, columns, r)
                })
                .optional()
                .map_err(Error::from_sqlite)?;
            // A row written and gone again in the same transaction has
            // nothing to digest (the store never deletes one today).
            if let Some(digest) = digest {
                entries.push((name, id, digest));
            }
        }
        Ok(chain::rows_json(&mut entries))
    }

    /// Inserts the sealed events, up to [`EVENTS_PER_INSERT`] per statement.
    fn insert_events(&self, links: &[String], rows: &str) -> Result<()> {
        let last = self.events.len() - 1;
        let mut start = 0;
        for chunk in self.events.chunks(EVENTS_PER_INSERT) {
            let types: Vec<&str> = chunk.iter().map(|e| e.event_type.as_str()).collect();
            let mut params: Vec<&dyn ToSql> = Vec::with_capacity(chunk.len() * 8);
            for (i, (event, kind)) in chunk.iter().zip(&types).enumerate() {
                let index = start + i;
                params.push(&event.seq);
                params.push(&event.run_id);
                params.push(&event.step_id);
                params.push(&event.at);
                params.push(kind);
                params.push(&event.payload);
                params.push(if index == last { &rows } else { &"" });
                params.push(&links[index]);
            }
            let mut stmt = self
                .tx
                .prepare_cached(&INSERT_EVENTS[chunk.len() - 1])
                .map_err(Error::from_sqlite)?;
            stmt.execute(params.as_slice())
                .map_err(Error::from_sqlite)?;
            start += chunk.len();
        }
        Ok(())
    }

    pub(super) fn exec(&self, sql: &str, params: Vec<Value>) -> Result<usize> {
        let mut stmt = self.tx.prepare_cached(sql).map_err(Error::from_sqlite)?;
        stmt.execute(params_from_iter(params))
            .map_err(Error::from_sqlite)
    }

    /// Inserts a run as RUNNING with its lease.
    pub fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()> {
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
        self.wrote(StateTable::Runs, run.id);
        Ok(())
    }

    /// Records a run's labels (their canonical JSON), chained like the run's
    /// row; writes nothing for no labels. Once per run: a second call for
    /// the same run is refused by the table's key.
    pub fn insert_run_labels(&mut self, run_id: &str, labels: &Labels) -> Result<()> {
        if labels.is_empty() {
            return Ok(());
        }
        self.exec(
            "INSERT INTO run_labels (run_id, labels_json) VALUES (?, ?)",
            vec![
                Value::Text(run_id.to_owned()),
                Value::Text(labels.to_canonical().into_string()),
            ],
        )?;
        self.wrote(StateTable::RunLabels, run_id);
        Ok(())
    }

    /// Updates a run if it meets `guard`; `false` if it did not.
    pub fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool> {
        let mut sql = String::from("UPDATE runs SET ");
        let mut sets: Vec<&str> = Vec::new();
        let mut params: Vec<Value> = Vec::new();
        if let Some(s) = change.status {
            sets.push("status = ?");
            params.push(Value::Text(s.as_str().to_owned()));
        }
        if let Some((reason, detail)) = change.reason {
            sets.push("reason = ?");
            params.push(Value::Text(reason.as_str().to_owned()));
            sets.push("reason_detail = ?");
            params.push(Value::Text(detail.to_owned()));
        }
        if let Some(t) = &change.finished_at {
            sets.push("finished_at = ?");
            params.push(text(t));
        }
        if let Some(r) = change.result {
            sets.push("result_json = ?");
            params.push(Value::Text(r.as_str().to_owned()));
        }
        match &change.lease {
            LeaseChange::Keep => {}
            LeaseChange::Set { owner, expires_at } => {
                sets.push("lease_owner = ?");
                params.push(Value::Text((*owner).to_owned()));
                sets.push("lease_expires_at = ?");
                params.push(text(expires_at));
            }
            LeaseChange::Clear => {
                sets.push("lease_owner = ''");
                sets.push("lease_expires_at = ''");
            }
        }
        if change.step_count_add > 0 {
            sets.push("step_count = step_count + ?");
            params.push(int(change.step_count_add));
        }
        if change.active_ms_add > 0 {
            sets.push("active_ms = MIN(active_ms + ?, 9223372036854775807)");
            params.push(int(change.active_ms_add.min(i64::MAX as u64 / 2)));
        }
        if let Some((calls, usage, cost)) = change.totals {
            sets.push("model_calls = ?");
            params.push(int(calls));
            sets.push("input_tokens = ?");
            params.push(int(usage.input_tokens));
            sets.push("output_tokens = ?");
            params.push(int(usage.output_tokens));
            sets.push("cached_input_tokens = ?");
            params.push(int(usage.cached_input_tokens));
            sets.push("estimated_cost_micros = ?");
            params.push(Value::Integer(cost.max(0)));
        }
        // The lease columns are outside the row digest: a change of the
        // lease alone (a heartbeat, a release) needs no event.
        let digested = sets
            .iter()
            .any(|set| !set.starts_with("lease_owner") && !set.starts_with("lease_expires_at"));
        if sets.is_empty() {
            sets.push("id = id");
        }
        sql.push_str(&sets.join(", "));
        sql.push_str(" WHERE id = ?");
        params.push(Value::Text(run_id.to_owned()));
        push_run_guard(&mut sql, &mut params, "", guard);
        let changed = self.exec(&sql, params)? == 1;
        if changed && digested {
            self.wrote(StateTable::Runs, run_id);
        }
        Ok(changed)
    }

    /// Inserts a step.
    pub fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()> {
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
        self.wrote(StateTable::Steps, step.id);
        Ok(())
    }

    /// Updates a step if it (and its run) meet `guard`; `false` if not.
    pub fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool> {
        let mut sql = String::from("UPDATE steps SET ");
        let mut sets: Vec<&str> = Vec::new();
        let mut params: Vec<Value> = Vec::new();
        if let Some(s) = change.status {
            sets.push("status = ?");
            params.push(Value::Text(s.as_str().to_owned()));
        }
        let texts = [
            ("decision_json = ?", change.decision_json),
            ("policy_json = ?", change.policy_json),
            ("spec_hash = ?", change.spec_hash),
            ("policy_id = ?", change.policy_id),
        ];
        for (set, value) in texts {
            if let Some(v) = value {
                sets.push(set);
                params.push(Value::Text(v.to_owned()));
            }
        }
        if let Some((json, hash)) = change.observation {
            sets.push("observation_json = ?");
            params.push(Value::Text(json.to_owned()));
            sets.push("observation_hash = ?");
            params.push(Value::Text(hash.to_owned()));
        }
        if let Some(t) = &change.started_at {
            sets.push("started_at = ?");
            params.push(text(t));
        }
        if let Some(t) = &change.finished_at {
            sets.push("finished_at = ?");
            params.push(t.as_ref().map(text).unwrap_or(Value::Text(String::new())));
        }
        let digested = !sets.is_empty();
        if sets.is_empty() {
            sets.push("id = id");
        }
        sql.push_str(&sets.join(", "));
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
        let changed = self.exec(&sql, params)? == 1;
        if changed && digested {
            self.wrote(StateTable::Steps, step_id);
        }
        Ok(changed)
    }

    /// Inserts an approval.
    pub fn insert_approval(&mut self, a: &Approval) -> Result<()> {
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
        self.wrote(StateTable::Approvals, &a.id);
        Ok(())
    }

    /// Updates an approval that is still in `change.from` with `change.hash`;
    /// `false` if it is not.
    pub fn update_approval(
        &mut self,
        approval_id: &str,
        change: &ApprovalChange<'_>,
    ) -> Result<bool> {
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
            "UPDATE approvals SET {} WHERE id = ? AND status = ? AND hash = ?",
            sets.join(", ")
        );
        params.push(Value::Text(approval_id.to_owned()));
        params.push(Value::Text(change.from.as_str().to_owned()));
        params.push(Value::Text(change.hash.to_owned()));
        let changed = self.exec(&sql, params)? == 1;
        if changed {
            self.wrote(StateTable::Approvals, approval_id);
        }
        Ok(changed)
    }

    /// Records a tool spec under its hash (kept if already there).
    pub fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<()> {
        let inserted = self.exec(
            "INSERT OR IGNORE INTO tool_specs (hash, spec_json) VALUES (?, ?)",
            vec![
                Value::Text(hash.to_owned()),
                Value::Text(spec_json.to_owned()),
            ],
        )?;
        // A spec already stored keeps the event that first wrote it.
        if inserted == 1 {
            self.wrote(StateTable::ToolSpecs, hash);
        }
        Ok(())
    }

    /// Appends an event, chained to the one before it when the transaction
    /// commits.
    pub fn append_event(
        &mut self,
        run_id: &str,
        step_id: &str,
        at: &Timestamp,
        event_type: EventType,
        payload: &str,
    ) -> Result<()> {
        // The seq and the link are given at commit (`seal`).
        self.events.push(Event {
            seq: 0,
            run_id: run_id.to_owned(),
            step_id: step_id.to_owned(),
            at: at.to_string(),
            event_type,
            payload: payload.to_owned(),
        });
        Ok(())
    }

    /// The chain head: the highest seq ever used and the hash of the
    /// highest stored event ("" for an empty log).
    fn read_head(&self) -> Result<(i64, String)> {
        let mut stmt = self
            .tx
            .prepare_cached(
                "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0),
                            COALESCE((SELECT MAX(seq) FROM events), 0)),
                        COALESCE((SELECT hash FROM events ORDER BY seq DESC LIMIT 1), '')",
            )
            .map_err(Error::from_sqlite)?;
        stmt.query_row([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))
            .map_err(Error::from_sqlite)
    }

    /// Reads a run inside the transaction.
    pub fn run(&self, run_id: &str) -> Result<Option<Run>> {
        read::get_run(self.tx, run_id)
    }

    /// Reads a run's steps inside the transaction.
    pub fn steps(&self, run_id: &str) -> Result<Vec<Step>> {
        read::list_steps(self.tx, run_id)
    }

    /// Reads a run's approvals inside the transaction.
    pub fn approvals(&self, run_id: &str) -> Result<Vec<Approval>> {
        read::list_approvals(self.tx, run_id)
    }

    /// Reads one approval of a run inside the transaction.
    pub fn approval(&self, run_id: &str, approval_id: &str) -> Result<Option<Approval>> {
        read::get_approval(self.tx, run_id, approval_id)
    }

    /// The run's lease: owner and expiry text.
    pub fn lease(&self, run_id: &str) -> Result<Option<(String, String)>> {
        self.tx
            .query_row(
                "SELECT lease_owner, lease_expires_at FROM runs WHERE id = ?",
                [run_id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(Error::from_sqlite)
    }
}
