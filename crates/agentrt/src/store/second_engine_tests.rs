//! A second engine behind [`GroupRows`]: a small in-memory one, enough for
//! runs, labels, steps, specs and events. The same write groups run on it
//! and on SQLite must leave the same events, the same links and the same
//! row listings: the chain is the front's ([`WriteTx`]), not an engine's.

use std::collections::{BTreeMap, HashMap};

use super::changes::{
    ApprovalChange, LeaseChange, NewRun, NewStep, RunChange, RunGuard, StepChange, StepGuard,
};
use super::extension::{ExtensionTable, Registry, SqlValue};
use super::group_rows::{GroupRows, RowTable, SealedEvent};
use super::read::Page;
use super::read_rows::{Cut, ReadRows, StoredRow, StoredValue};
use super::schema::StateTable;
use super::{Store, WriteTx};
use crate::chain::{RowValue, row_digest};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, Event, EventType, Labels, ModelCall, Run, RunStatus, Step, StepStatus, TerminalReason,
};

#[derive(Debug, Clone, PartialEq)]
enum Cell {
    Int(i64),
    Text(String),
}

type Row = BTreeMap<&'static str, Cell>;

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

fn int(n: u64) -> Cell {
    Cell::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn unsupported(what: &str) -> Error {
    Error::Internal {
        detail: format!("the memory engine has no {what}"),
    }
}

/// The tables, each row keyed by its key column, with SQLite's defaults.
#[derive(Default)]
struct Memory {
    tables: HashMap<StateTable, BTreeMap<String, Row>>,
    events: Vec<(Event, String, String)>,
}

impl Memory {
    fn row(&self, table: StateTable, key: &str) -> Option<&Row> {
        self.tables.get(&table)?.get(key)
    }

    fn text_of(&self, table: StateTable, key: &str, column: &str) -> Option<String> {
        match self.row(table, key)?.get(column)? {
            Cell::Text(t) => Some(t.clone()),
            Cell::Int(_) => None,
        }
    }

    fn run_meets(&self, run_id: &str, g: &RunGuard<'_>) -> bool {
        let Some(run) = self.row(StateTable::Runs, run_id) else {
            return false;
        };
        let has = |column: &str, want: &Cell| run.get(column) == Some(want);
        (g.statuses.is_empty() || g.statuses.iter().any(|s| has("status", &text(s.as_str()))))
            && g.lease_owner.is_none_or(|o| has("lease_owner", &text(o)))
            && g.lease_live_at.as_ref().is_none_or(|at| {
                matches!(run.get("lease_expires_at"), Some(Cell::Text(t)) if *t > at.to_string())
            })
            && g.step_count.is_none_or(|n| has("step_count", &int(n)))
    }
}

impl ReadRows for Memory {
    fn run(&self, _: &str, _: Cut) -> Result<Option<Run>> {
        Err(unsupported("run reads"))
    }

    fn runs(&self, _: &super::RunFilter, _: u64, _: u64, _: Cut) -> Result<Page<Run>> {
        Err(unsupported("run reads"))
    }

    fn run_exists(&self, run_id: &str) -> Result<bool> {
        Ok(self.row(StateTable::Runs, run_id).is_some())
    }

    fn lease(&self, run_id: &str) -> Result<Option<(String, String)>> {
        Ok(self
            .text_of(StateTable::Runs, run_id, "lease_owner")
            .zip(self.text_of(StateTable::Runs, run_id, "lease_expires_at")))
    }

    fn run_head(&self, run_id: &str) -> Result<i64> {
        Ok(self
            .events
            .iter()
            .filter(|(e, _, _)| e.run_id == run_id)
            .map(|(e, _, _)| e.seq)
            .max()
            .unwrap_or(0))
    }

    fn last_seq(&self) -> Result<i64> {
        Ok(self.events.iter().map(|(e, _, _)| e.seq).max().unwrap_or(0))
    }

    fn steps(&self, _: &str) -> Result<Vec<Step>> {
        Err(unsupported("step reads"))
    }

    fn steps_page(&self, _: &str, _: u64, _: u64, _: Cut) -> Result<Page<Step>> {
        Err(unsupported("step reads"))
    }

    fn approvals(&self, _: &str) -> Result<Vec<Approval>> {
        Err(unsupported("approvals"))
    }

    fn first_approvals(&self, _: &str, _: u64) -> Result<(Vec<Approval>, u64)> {
        Err(unsupported("approvals"))
    }

    fn approval(&self, _: &str, _: &str, _: Cut) -> Result<Option<Approval>> {
        Err(unsupported("approvals"))
    }

    fn pending_approvals_page(&self, _: &str, _: u64, _: u64, _: Cut) -> Result<Page<Approval>> {
        Err(unsupported("approvals"))
    }

    fn pending_approval_ids(&self, _: &str, _: u64, _: Cut) -> Result<(Vec<String>, u64)> {
        Err(unsupported("approvals"))
    }

    fn pending_counts(&self, _: &[&str]) -> Result<Vec<(String, u64, String)>> {
        Err(unsupported("approvals"))
    }

    fn events_page(&self, _: &str, _: u64, _: u64, _: Cut) -> Result<Page<Event>> {
        Err(unsupported("event pages"))
    }

    fn event_count(&self, _: &str, _: &str) -> Result<u64> {
        Err(unsupported("event pages"))
    }

    fn events_after(&self, _: Option<&str>, _: i64, _: u64) -> Result<Vec<Event>> {
        Err(unsupported("event pages"))
    }

    fn tool_spec(&self, hash: &str) -> Result<Option<String>> {
        Ok(self.text_of(StateTable::ToolSpecs, hash, "spec_json"))
    }

    fn model_calls(&self, _: &str) -> Result<Vec<ModelCall>> {
        Err(unsupported("model calls"))
    }

    fn model_call(&self, _: &str) -> Result<Option<ModelCall>> {
        Err(unsupported("model calls"))
    }

    fn extension_rows(
        &self,
        _: &ExtensionTable,
        _: &[(&'static str, &SqlValue)],
        _: u64,
    ) -> Result<Vec<StoredRow>> {
        Err(unsupported("extension tables"))
    }

    fn extension_rows_by(
        &self,
        _: &ExtensionTable,
        _: &super::read_rows::ExtensionQuery<'_>,
    ) -> Result<Vec<StoredRow>> {
        Err(unsupported("extension tables"))
    }
}

impl GroupRows for Memory {
    fn insert_run(&mut self, run: &NewRun<'_>) -> Result<()> {
        let mut row = Row::new();
        for column in StateTable::Runs.digested_columns() {
            let text_column = column.ends_with("_json")
                || column.starts_with("reason")
                || column.ends_with("_at");
            let empty = if text_column { text("") } else { Cell::Int(0) };
            row.insert(column, empty);
        }
        for (column, value) in [
            ("id", run.id.to_owned()),
            ("goal", run.goal.to_owned()),
            ("status", RunStatus::Running.as_str().to_owned()),
            ("limits_json", run.limits_json.to_owned()),
            ("created_at", run.created_at.to_string()),
            ("started_at", run.created_at.to_string()),
            ("lease_owner", run.lease_owner.to_owned()),
            ("lease_expires_at", run.lease_expires_at.to_string()),
        ] {
            row.insert(column, text(value));
        }
        let runs = self.tables.entry(StateTable::Runs).or_default();
        if runs.insert(run.id.to_owned(), row).is_some() {
            return Err(unsupported("second run under one id"));
        }
        Ok(())
    }

    fn insert_run_labels(&mut self, run_id: &str, labels_json: &str) -> Result<()> {
        let row = Row::from([("run_id", text(run_id)), ("labels_json", text(labels_json))]);
        self.tables
            .entry(StateTable::RunLabels)
            .or_default()
            .insert(run_id.to_owned(), row);
        Ok(())
    }

    fn update_run(
        &mut self,
        run_id: &str,
        guard: &RunGuard<'_>,
        change: &RunChange<'_>,
    ) -> Result<bool> {
        if !self.run_meets(run_id, guard) {
            return Ok(false);
        }
        let Some(run) = self
            .tables
            .get_mut(&StateTable::Runs)
            .and_then(|t| t.get_mut(run_id))
        else {
            return Ok(false);
        };
        if let Some(s) = change.status {
            run.insert("status", text(s.as_str()));
        }
        if let Some((reason, detail)) = change.reason {
            run.insert("reason", text(reason.as_str()));
            run.insert("reason_detail", text(detail));
        }
        if let Some(t) = &change.finished_at {
            run.insert("finished_at", text(t.to_string()));
        }
        if let Some(r) = change.result {
            run.insert("result_json", text(r.as_str()));
        }
        match &change.lease {
            LeaseChange::Keep => {}
            LeaseChange::Set { owner, expires_at } => {
                run.insert("lease_owner", text(*owner));
                run.insert("lease_expires_at", text(expires_at.to_string()));
            }
            LeaseChange::Clear => {
                run.insert("lease_owner", text(""));
                run.insert("lease_expires_at", text(""));
            }
        }
        if let Some(Cell::Int(n)) = run.get_mut("step_count") {
            *n += i64::try_from(change.step_count_add).unwrap_or(0);
        }
        if change.active_ms_add > 0 || change.totals.is_some() {
            return Err(unsupported("run accounting"));
        }
        Ok(true)
    }

    fn insert_step(&mut self, step: &NewStep<'_>) -> Result<()> {
        let mut row = Row::new();
        for column in StateTable::Steps.digested_columns() {
            row.insert(column, text(""));
        }
        row.insert("id", text(step.id));
        row.insert("run_id", text(step.run_id));
        row.insert("idx", int(step.index));
        row.insert("status", text(step.status.as_str()));
        row.insert("started_at", text(step.started_at.to_string()));
        self.tables
            .entry(StateTable::Steps)
            .or_default()
            .insert(step.id.to_owned(), row);
        Ok(())
    }

    fn update_step(
        &mut self,
        step_id: &str,
        guard: &StepGuard<'_>,
        change: &StepChange<'_>,
    ) -> Result<bool> {
        if guard.granted_by.is_some() {
            return Err(unsupported("grant guard"));
        }
        let Some(status) = self.text_of(StateTable::Steps, step_id, "status") else {
            return Ok(false);
        };
        let status_ok =
            guard.statuses.is_empty() || guard.statuses.iter().any(|s| s.as_str() == status);
        let run_ok = guard
            .run
            .as_ref()
            .is_none_or(|(run_id, g)| self.run_meets(run_id, g));
        if !(status_ok && run_ok) {
            return Ok(false);
        }
        let Some(step) = self
            .tables
            .get_mut(&StateTable::Steps)
            .and_then(|t| t.get_mut(step_id))
        else {
            return Ok(false);
        };
        if let Some(s) = change.status {
            step.insert("status", text(s.as_str()));
        }
        for (column, value) in [
            ("decision_json", change.decision_json),
            ("policy_json", change.policy_json),
            ("spec_hash", change.spec_hash),
            ("policy_id", change.policy_id),
        ] {
            if let Some(v) = value {
                step.insert(column, text(v));
            }
        }
        if let Some((json, hash)) = change.observation {
            step.insert("observation_json", text(json));
            step.insert("observation_hash", text(hash));
        }
        if let Some(t) = &change.started_at {
            step.insert("started_at", text(t.to_string()));
        }
        if let Some(t) = &change.finished_at {
            step.insert(
                "finished_at",
                text(t.map(|t| t.to_string()).unwrap_or_default()),
            );
        }
        Ok(true)
    }

    fn insert_approval(&mut self, _: &Approval) -> Result<()> {
        Err(unsupported("approvals"))
    }

    fn update_approval(&mut self, _: &str, _: &ApprovalChange<'_>) -> Result<bool> {
        Err(unsupported("approvals"))
    }

    fn insert_spec(&mut self, hash: &str, spec_json: &str) -> Result<bool> {
        let specs = self.tables.entry(StateTable::ToolSpecs).or_default();
        if specs.contains_key(hash) {
            return Ok(false);
        }
        let row = Row::from([("hash", text(hash)), ("spec_json", text(spec_json))]);
        specs.insert(hash.to_owned(), row);
        Ok(true)
    }

    fn insert_model_call(&mut self, _: &ModelCall, _: &str, _: &Timestamp) -> Result<bool> {
        Err(unsupported("model calls"))
    }

    fn complete_model_call(&mut self, _: &ModelCall) -> Result<bool> {
        Err(unsupported("model calls"))
    }

    fn insert_extension_row(
        &mut self,
        _: &ExtensionTable,
        _: &[(&'static str, &SqlValue)],
    ) -> Result<StoredValue> {
        Err(unsupported("extension tables"))
    }

    fn update_extension_row(
        &mut self,
        _: &ExtensionTable,
        _: &SqlValue,
        _: &[(&'static str, &SqlValue)],
        _: &[(&'static str, &SqlValue)],
    ) -> Result<bool> {
        Err(unsupported("extension tables"))
    }

    fn chain_head(&self) -> Result<(i64, String)> {
        Ok(self
            .events
            .last()
            .map(|(e, _, hash)| (e.seq, hash.clone()))
            .unwrap_or_default())
    }

    fn mark_written(&mut self, table: RowTable<'_>, key: &str, _: i64) -> Result<Option<String>> {
        let RowTable::Core(table) = table else {
            return Err(unsupported("extension tables"));
        };
        let Some(row) = self.row(table, key) else {
            return Ok(None);
        };
        let values: Vec<RowValue<'_>> = table
            .digested_columns()
            .iter()
            .map(|column| match row.get(column) {
                Some(Cell::Int(n)) => RowValue::Int(*n),
                Some(Cell::Text(t)) => RowValue::Text(t.as_bytes()),
                None => RowValue::Text(b""),
            })
            .collect();
        Ok(Some(row_digest(table.name(), &values)))
    }

    fn insert_events(&mut self, events: &[SealedEvent<'_>]) -> Result<()> {
        for sealed in events {
            self.events.push((
                sealed.event.clone(),
                sealed.rows.to_owned(),
                sealed.hash.to_owned(),
            ));
        }
        Ok(())
    }
}

fn at(s: &str) -> Timestamp {
    Timestamp::parse(s).unwrap_or_else(|_| Timestamp::from_unix_nanos(0))
}

/// The groups both engines run, in order; each returns what its guarded
/// changes reported.
/// A write group that reports what its guarded changes did.
type Group = Box<dyn Fn(&mut WriteTx<'_>) -> Result<Vec<bool>>>;

fn groups() -> Vec<Group> {
    let t0 = at("2026-10-01T09:00:00Z");
    let t1 = at("2026-10-01T09:00:01.5Z");
    let lease = at("2026-10-01T09:05:00Z");
    vec![
        Box::new(move |tx| {
            tx.insert_run(&NewRun {
                id: "r1",
                goal: "ship it",
                limits_json: r#"{"max_steps":3}"#,
                created_at: t0,
                lease_owner: "host-a",
                lease_expires_at: lease,
            })?;
            let labels = Labels::parse(["ticket=T-7", "host=a"])?;
            tx.insert_run_labels("r1", &labels)?;
            tx.append_event(
                "r1",
                "",
                &t0,
                EventType::RunCreated,
                r#"{"goal":"ship it"}"#,
            )?;
            Ok(vec![])
        }),
        Box::new(move |tx| {
            tx.insert_spec("h1", r#"{"name":"fs_read"}"#)?;
            tx.insert_step(&NewStep {
                id: "s1",
                run_id: "r1",
                index: 0,
                status: StepStatus::Deciding,
                started_at: t1,
            })?;
            let counted = tx.update_run(
                "r1",
                &RunGuard {
                    statuses: &[RunStatus::Running],
                    lease_owner: Some("host-a"),
                    lease_live_at: Some(t1),
                    step_count: Some(0),
                    ..RunGuard::default()
                },
                &RunChange {
                    step_count_add: 1,
                    ..RunChange::default()
                },
            )?;
            tx.append_event("r1", "s1", &t1, EventType::StepStarted, r#"{"index":0}"#)?;
            Ok(vec![counted])
        }),
        Box::new(move |tx| {
            // A stale owner, then the step in the wrong status: neither
            // applies, on either engine.
            let stale = tx.update_run(
                "r1",
                &RunGuard {
                    lease_owner: Some("host-b"),
                    ..RunGuard::default()
                },
                &RunChange {
                    status: Some(RunStatus::Failed),
                    ..RunChange::default()
                },
            )?;
            let wrong = tx.update_step(
                "s1",
                &StepGuard {
                    statuses: &[StepStatus::Executing],
                    ..StepGuard::default()
                },
                &StepChange {
                    status: Some(StepStatus::Done),
                    ..StepChange::default()
                },
            )?;
            let decided = tx.update_step(
                "s1",
                &StepGuard {
                    statuses: &[StepStatus::Deciding],
                    run: Some((
                        "r1",
                        RunGuard {
                            lease_owner: Some("host-a"),
                            ..RunGuard::default()
                        },
                    )),
                    granted_by: None,
                },
                &StepChange {
                    status: Some(StepStatus::Done),
                    observation: Some((r#"{"ok":true}"#, "obs-hash")),
                    finished_at: Some(Some(t1)),
                    spec_hash: Some("h1"),
                    ..StepChange::default()
                },
            )?;
            // The spec is there already: no second row, no digest.
            tx.insert_spec("h1", r#"{"name":"fs_read"}"#)?;
            tx.append_event(
                "r1",
                "s1",
                &t1,
                EventType::StepToolFinished,
                r#"{"ok":true}"#,
            )?;
            Ok(vec![stale, wrong, decided])
        }),
        Box::new(move |tx| {
            // A lease-only change needs no event and is not digested.
            let released = tx.update_run(
                "r1",
                &RunGuard::default(),
                &RunChange {
                    lease: LeaseChange::Clear,
                    ..RunChange::default()
                },
            )?;
            Ok(vec![released])
        }),
        Box::new(move |tx| {
            let result =
                Canonical::parse(br#"{"done":1}"#).map_err(|e| unsupported(&e.to_string()))?;
            let ended = tx.update_run(
                "r1",
                &RunGuard {
                    statuses: &[RunStatus::Running],
                    ..RunGuard::default()
                },
                &RunChange {
                    status: Some(RunStatus::Completed),
                    reason: Some((TerminalReason::GoalCompleted, "")),
                    finished_at: Some(t1),
                    result: Some(&result),
                    ..RunChange::default()
                },
            )?;
            tx.append_event("r1", "", &t1, EventType::RunFinished, r#"{}"#)?;
            tx.append_event("r1", "", &t1, EventType::RunFinished, r#"{"again":1}"#)?;
            Ok(vec![ended])
        }),
    ]
}

#[test]
fn a_second_engine_behind_group_rows_yields_the_same_chain_as_sqlite() {
    let store = Store::open(":memory:").expect("open");
    let mut memory = Memory::default();
    let registry = Registry::default();
    for (i, group) in groups().iter().enumerate() {
        let (on_sqlite, _) = store.write(|tx| group(tx)).expect("sqlite group");
        let on_memory = {
            let mut tx = WriteTx::new(&mut memory, &registry);
            let value = group(&mut tx).expect("memory group");
            tx.finish().expect("memory seal");
            value
        };
        assert_eq!(on_sqlite, on_memory, "group {i}: the guards decide alike");
    }
    // The same reads answer alike through the neutral interface.
    let sqlite_reads = store
        .read(|rows| {
            Ok((
                rows.lease("r1")?,
                rows.run_head("r1")?,
                rows.tool_spec("h1")?,
            ))
        })
        .expect("sqlite reads");
    let memory_reads = (
        memory.lease("r1").expect("lease"),
        memory.run_head("r1").expect("head"),
        memory.tool_spec("h1").expect("spec"),
    );
    assert_eq!(sqlite_reads, memory_reads);
    assert_eq!(
        sqlite_reads.0,
        Some((String::new(), String::new())),
        "the lease was released"
    );
    let sqlite_events: Vec<(i64, String, String, String)> = store
        .sqlite("a test")
        .unwrap()
        .read_conn(|c| {
            let mut stmt = c
                .prepare("SELECT seq, type, rows_json, hash FROM events ORDER BY seq")
                .map_err(Error::from_sqlite)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .map_err(Error::from_sqlite)?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .map_err(Error::from_sqlite)
        })
        .expect("events");
    let memory_events: Vec<(i64, String, String, String)> = memory
        .events
        .iter()
        .map(|(e, rows, hash)| {
            (
                e.seq,
                e.event_type.as_str().to_owned(),
                rows.clone(),
                hash.clone(),
            )
        })
        .collect();
    assert_eq!(sqlite_events.len(), 5);
    assert!(
        sqlite_events[1].2.contains("tool_specs") && sqlite_events[2].2.contains("\"steps\""),
        "the listings name the rows written: {sqlite_events:?}"
    );
    assert_eq!(sqlite_events, memory_events);
    let report =
        crate::verify::verify(&store, &crate::verify::VerifyOptions::default()).expect("verify");
    assert!(report.broken.is_none(), "{report:?}");
}
