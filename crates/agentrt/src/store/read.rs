//! Reads: rows to model values. A column that does not decode is reported
//! in the value's `decode_error` instead of failing the read, so a damaged
//! run can still be listed, shown and cancelled.

use rusqlite::types::Value;

use super::columns::RowColumns;
use super::read_rows::Cut;
pub use super::read_rows::Page;
use super::{RunFilter, Store};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, Event, EventType, Labels, Limits, Run, RunStatus, Step, StepStatus,
    TerminalReason, ToolSpec, Usage,
};

/// Collects decode problems of one row.
#[derive(Default)]
struct Problems(Vec<String>);

impl Problems {
    fn note(&mut self, column: &str, detail: impl std::fmt::Display) {
        self.0.push(format!("{column}: {detail}"));
    }

    fn into_option(self) -> Option<String> {
        if self.0.is_empty() {
            None
        } else {
            Some(self.0.join("; "))
        }
    }

    fn time(&mut self, column: &str, text: &str) -> Option<Timestamp> {
        if text.is_empty() {
            return None;
        }
        match Timestamp::parse(text) {
            Ok(t) => Some(t),
            Err(e) => {
                self.note(column, e);
                None
            }
        }
    }

    fn required_time(&mut self, column: &str, text: &str) -> Timestamp {
        self.time(column, text)
            .unwrap_or_else(|| Timestamp::from_unix_nanos(0))
    }

    fn canonical(&mut self, column: &str, text: &str) -> Option<Canonical> {
        if text.is_empty() {
            return None;
        }
        match Canonical::parse_str(text) {
            Ok(c) => Some(c),
            Err(e) => {
                self.note(column, e);
                None
            }
        }
    }

    fn json<T: serde::de::DeserializeOwned>(&mut self, column: &str, text: &str) -> Option<T> {
        if text.is_empty() {
            return None;
        }
        match serde_json::from_str(text) {
            Ok(v) => Some(v),
            Err(e) => {
                self.note(column, e);
                None
            }
        }
    }

    fn count(&mut self, column: &str, n: i64) -> u64 {
        u64::try_from(n).unwrap_or_else(|_| {
            self.note(column, format!("negative count {n}"));
            0
        })
    }
}

/// The columns of a run, selected from [`RUN_FROM`], in the order
/// [`run_from_row`] reads them.
pub const RUN_COLUMNS: &str = "id, goal, status, reason, reason_detail, limits_json, step_count, created_at, \
     finished_at, result_json, model_calls, input_tokens, output_tokens, cached_input_tokens, \
     estimated_cost_micros, active_ms, labels_json";

/// The rows [`RUN_COLUMNS`] are selected from: a run and its labels, if it
/// has any (`labels_json` is NULL when it has none). Conditions name the
/// run's columns as `runs.…`.
pub const RUN_FROM: &str = "runs LEFT JOIN run_labels ON run_labels.run_id = runs.id";

/// ` WHERE …` keeping only the runs `filter` keeps (empty when it keeps
/// all), and its parameters: one `EXISTS` per label over the run's stored
/// labels (a labels text that is not JSON matches nothing), and the status.
pub(super) fn run_filter(filter: &RunFilter) -> (String, Vec<Value>) {
    let mut params = Vec::with_capacity(filter.labels.len() * 2 + 1);
    let mut clauses: Vec<&str> = filter
        .labels
        .iter()
        .map(|(key, value)| {
            params.push(Value::Text(key.to_owned()));
            params.push(Value::Text(value.to_owned()));
            "EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(run_labels.labels_json) \
             THEN run_labels.labels_json ELSE '{}' END) j \
             WHERE j.key = ? AND j.type = 'text' AND j.value = ?)"
        })
        .collect();
    if let Some(status) = filter.status {
        params.push(Value::Text(status.as_str().to_owned()));
        clauses.push("runs.status = ?");
    }
    if clauses.is_empty() {
        return (String::new(), params);
    }
    (format!(" WHERE {}", clauses.join(" AND ")), params)
}

/// A run from a row of [`RUN_COLUMNS`]; a column that does not decode is
/// named in its `decode_error`.
pub fn run_from_row(r: &dyn RowColumns) -> Result<Run> {
    let mut p = Problems::default();
    let status_text: String = r.get(2)?;
    let status = RunStatus::parse(&status_text).unwrap_or_else(|| {
        p.note("status", format!("{status_text:?} is not a run status"));
        RunStatus::Failed
    });
    let reason_text: String = r.get(3)?;
    let reason = if reason_text.is_empty() {
        None
    } else {
        let parsed = TerminalReason::parse(&reason_text);
        if parsed.is_none() {
            p.note(
                "reason",
                format!("{reason_text:?} is not a terminal reason"),
            );
        }
        parsed
    };
    let limits_text: String = r.get(5)?;
    let limits = p
        .json::<Limits>("limits_json", &limits_text)
        .unwrap_or_default();
    let created: String = r.get(7)?;
    let finished: String = r.get(8)?;
    let result: String = r.get(9)?;
    let labels_text: Option<String> = r.get(16)?;
    let labels = match labels_text.as_deref().map(Labels::from_json) {
        None => Labels::new(),
        Some(Ok(labels)) => labels,
        Some(Err(e)) => {
            p.note("labels_json", e);
            Labels::new()
        }
    };
    let run = Run {
        id: r.get(0)?,
        goal: r.get(1)?,
        status,
        reason,
        reason_detail: r.get(4)?,
        limits,
        labels,
        step_count: p.count("step_count", r.get(6)?),
        created_at: p.required_time("created_at", &created),
        finished_at: p.time("finished_at", &finished),
        result: p.canonical("result_json", &result),
        model_calls: p.count("model_calls", r.get(10)?),
        usage: Usage {
            input_tokens: p.count("input_tokens", r.get(11)?),
            output_tokens: p.count("output_tokens", r.get(12)?),
            cached_input_tokens: p.count("cached_input_tokens", r.get(13)?),
        },
        estimated_cost_micros: r.get(14)?,
        active_ms: p.count("active_ms", r.get(15)?),
        decode_error: None,
    };
    Ok(Run {
        decode_error: p.into_option(),
        ..run
    })
}

/// The columns of a step, in the order [`step_from_row`] reads them.
pub const STEP_COLUMNS: &str = "id, run_id, idx, status, decision_json, policy_json, observation_json, \
     started_at, finished_at, spec_hash, policy_id";

/// A step from a row of [`STEP_COLUMNS`]; a column that does not decode
/// is named in its `decode_error`.
pub fn step_from_row(r: &dyn RowColumns) -> Result<Step> {
    let mut p = Problems::default();
    let status_text: String = r.get(3)?;
    let status = StepStatus::parse(&status_text).unwrap_or_else(|| {
        p.note("status", format!("{status_text:?} is not a step status"));
        StepStatus::Failed
    });
    let decision: String = r.get(4)?;
    let policy: String = r.get(5)?;
    let observation: String = r.get(6)?;
    let started: String = r.get(7)?;
    let finished: String = r.get(8)?;
    let step = Step {
        id: r.get(0)?,
        run_id: r.get(1)?,
        index: p.count("idx", r.get(2)?),
        status,
        decision: p.json("decision_json", &decision),
        policy: p.json("policy_json", &policy),
        observation: p.json("observation_json", &observation),
        started_at: p.required_time("started_at", &started),
        finished_at: p.time("finished_at", &finished),
        spec_hash: r.get(9)?,
        policy_id: r.get(10)?,
        decode_error: None,
    };
    Ok(Step {
        decode_error: p.into_option(),
        ..step
    })
}

/// The columns of an approval, in the order [`approval_from_row`] reads them.
pub const APPROVAL_COLUMNS: &str = "id, run_id, step_id, kind, capability_json, presentation_json, \
     request_json, hash, status, created_at, decided_at, decided_by, note, expires_at";

/// An approval from a row of [`APPROVAL_COLUMNS`]; a column that does not
/// decode is named in its `decode_error`.
pub fn approval_from_row(r: &dyn RowColumns) -> Result<Approval> {
    let mut p = Problems::default();
    let status_text: String = r.get(8)?;
    let status = ApprovalStatus::parse(&status_text).unwrap_or_else(|| {
        p.note(
            "status",
            format!("{status_text:?} is not an approval status"),
        );
        ApprovalStatus::Expired
    });
    let cap: String = r.get(4)?;
    let pres: String = r.get(5)?;
    let req: String = r.get(6)?;
    let created: String = r.get(9)?;
    let decided: String = r.get(10)?;
    let expires: String = r.get(13)?;
    let required = |p: &mut Problems, column: &str, text: &str| {
        if text.is_empty() {
            p.note(column, "empty");
        }
        p.canonical(column, text).unwrap_or_else(Canonical::null)
    };
    let approval = Approval {
        id: r.get(0)?,
        run_id: r.get(1)?,
        step_id: r.get(2)?,
        kind: r.get(3)?,
        capability: required(&mut p, "capability_json", &cap),
        presentation: required(&mut p, "presentation_json", &pres),
        request: required(&mut p, "request_json", &req),
        hash: r.get(7)?,
        status,
        created_at: p.required_time("created_at", &created),
        decided_at: p.time("decided_at", &decided),
        decided_by: r.get(11)?,
        note: r.get(12)?,
        expires_at: p.time("expires_at", &expires),
        decode_error: None,
    };
    Ok(Approval {
        decode_error: p.into_option(),
        ..approval
    })
}

/// The columns of an event, in the order [`event_from_row`] reads them.
pub const EVENT_COLUMNS: &str = "seq, run_id, step_id, at, type, payload_json";

/// An event from a row of [`EVENT_COLUMNS`].
pub fn event_from_row(r: &dyn RowColumns) -> Result<Event> {
    let type_text: String = r.get(4)?;
    Ok(Event {
        seq: r.get(0)?,
        run_id: r.get(1)?,
        step_id: r.get(2)?,
        at: r.get(3)?,
        event_type: EventType::from_text(&type_text),
        payload: r.get(5)?,
    })
}

impl Store {
    /// The run with this id.
    pub fn get_run(&self, run_id: &str) -> Result<Run> {
        self.read(|rows| rows.run(run_id, Cut::Whole))?
            .ok_or_else(|| Error::NotFound {
                what: "run",
                id: run_id.to_owned(),
            })
    }

    /// Runs, newest first (insertion order); `limit` 0 means all.
    pub fn list_runs(&self, limit: u64, offset: u64) -> Result<Page<Run>> {
        self.list_runs_labelled(limit, offset, &Labels::new())
    }

    /// The runs that carry every label of `labels` (all runs for none),
    /// newest first; `limit` 0 means all. The total counts the matching
    /// runs only.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::*;
    /// let store = Store::open(":memory:")?;
    /// let gate = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, vec![]))?;
    /// let labels = Labels::parse(["host=build-7", "ticket=OPS-12"])?;
    /// gate.begin_labelled(Some("r1"), "tag", Limits::default(), labels).await?.close().await?;
    /// gate.begin(Some("r2"), "plain", Limits::default()).await?.close().await?;
    /// let page = store.list_runs_labelled(0, 0, &Labels::parse(["host=build-7"])?)?;
    /// assert_eq!((page.total, page.items[0].id.as_str()), (1, "r1"));
    /// assert_eq!(page.items[0].labels.get("ticket"), Some("OPS-12"));
    /// assert_eq!(store.list_runs(0, 0)?.total, 2);
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub fn list_runs_labelled(
        &self,
        limit: u64,
        offset: u64,
        labels: &Labels,
    ) -> Result<Page<Run>> {
        let filter = RunFilter::labelled(labels.clone());
        self.read(|rows| rows.runs(&filter, limit, offset, Cut::Whole))
    }

    /// A run's steps in index order.
    pub fn list_steps(&self, run_id: &str) -> Result<Vec<Step>> {
        self.read(|rows| rows.steps(run_id))
    }

    /// A page of a run's steps in index order; `limit` 0 means all.
    pub fn steps_page(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Step>> {
        self.read(|rows| rows.steps_page(run_id, limit, offset, Cut::Whole))
    }

    /// A run's approvals in creation order.
    pub fn list_approvals(&self, run_id: &str) -> Result<Vec<Approval>> {
        self.read(|rows| rows.approvals(run_id))
    }

    /// A page of a run's pending approvals in creation order, with the total.
    pub fn pending_approvals_page(
        &self,
        run_id: &str,
        limit: u64,
        offset: u64,
    ) -> Result<Page<Approval>> {
        self.read(|rows| rows.pending_approvals_page(run_id, limit, offset, Cut::Whole))
    }

    /// The ids of a run's pending approvals (at most `limit`), and how many
    /// there are.
    pub fn pending_approval_ids(&self, run_id: &str, limit: u64) -> Result<(Vec<String>, u64)> {
        self.read(|rows| rows.pending_approval_ids(run_id, limit, Cut::Whole))
    }

    /// One approval, which must belong to `run_id`.
    pub fn get_approval(&self, run_id: &str, approval_id: &str) -> Result<Approval> {
        self.read(|rows| rows.approval(run_id, approval_id, Cut::Whole))?
            .ok_or_else(|| Error::NotFound {
                what: "approval",
                id: approval_id.to_owned(),
            })
    }

    /// A run's events in seq order.
    pub fn list_events(&self, run_id: &str) -> Result<Vec<Event>> {
        Ok(self.events_page(run_id, 0, 0)?.items)
    }

    /// How many of a run's events are of type `event_type` (one count, no
    /// event read): how `agentrt show` counts a shadow policy's
    /// disagreements.
    pub fn event_count(&self, run_id: &str, event_type: &EventType) -> Result<u64> {
        self.read(|rows| rows.event_count(run_id, event_type.as_str()))
    }

    /// A page of a run's events in seq order; `limit` 0 means all.
    pub fn events_page(&self, run_id: &str, limit: u64, offset: u64) -> Result<Page<Event>> {
        self.read(|rows| rows.events_page(run_id, limit, offset, Cut::Whole))
    }

    /// The spec recorded under `hash`; refuses JSON that no longer hashes to
    /// its key.
    pub fn tool_spec(&self, hash: &str) -> Result<ToolSpec> {
        let json = self.read(|rows| rows.tool_spec(hash))?;
        let json = json.ok_or_else(|| Error::NotFound {
            what: "tool spec",
            id: hash.to_owned(),
        })?;
        let corrupt = |detail: String| Error::Corrupt {
            table: "tool_specs",
            id: hash.to_owned(),
            detail,
        };
        let canonical = Canonical::parse_str(&json).map_err(|e| corrupt(e.to_string()))?;
        if canonical.hash() != hash {
            return Err(corrupt(
                "the stored spec no longer hashes to its key".into(),
            ));
        }
        serde_json::from_str(canonical.as_str()).map_err(|e| corrupt(e.to_string()))
    }

    /// The run's lease owner and expiry text, and the engine's own clock
    /// read with them when it has one (see [`WriteTx::clock_now`](super::WriteTx::clock_now)).
    pub fn lease_and_clock(&self, run_id: &str) -> Result<(String, String, Option<Timestamp>)> {
        self.read(|rows| Ok((rows.lease(run_id)?, rows.clock_now()?)))
            .and_then(|(lease, now)| {
                let (owner, expires) = lease.ok_or_else(|| Error::NotFound {
                    what: "run",
                    id: run_id.to_owned(),
                })?;
                Ok((owner, expires, now))
            })
    }

    /// The run's lease owner and expiry text (empty when not leased).
    pub fn lease(&self, run_id: &str) -> Result<(String, String)> {
        self.read(|rows| rows.lease(run_id))?
            .ok_or_else(|| Error::NotFound {
                what: "run",
                id: run_id.to_owned(),
            })
    }
}
