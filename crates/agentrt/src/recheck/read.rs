//! Reading a run's record for a re-check: its events a page at a time
//! (keeping what the re-check needs of each), then its steps a page at a
//! time, then the approvals the views counted, whole.

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

use super::{MAX_APPROVALS, PAGE_ROWS};
use crate::clock::Timestamp;
use crate::error::Result;
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, Event, EventType, Labels, Limits, Outcome, PolicyDecision, RunStatus,
    Step,
};
use crate::store::Store;

/// The detail prefix of the `step.failed` a policy error writes.
pub(super) const POLICY_ERROR: &str = "policy error: ";

/// What `run.created` says of the run, or why it cannot be used.
pub(super) enum Created {
    Missing,
    Damaged(String),
    Found {
        at: Timestamp,
        goal: String,
        limits: Limits,
        labels: Labels,
    },
}

/// The view counts a `step.policy` recorded.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(super) struct RecordedView {
    pub status: RunStatus,
    pub step_count: u64,
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub estimated_cost_micros: i64,
    pub active_ms: u64,
    pub steps: u64,
    pub approvals: u64,
}

/// A `step.policy` payload as decoded.
pub(super) struct Recorded {
    pub decision: PolicyDecision,
    pub policy_id: String,
    pub spec_hash: String,
    pub view: Option<RecordedView>,
}

/// The payload as stored; every field optional so a cut or damaged one
/// still decodes far enough to say what is wrong.
#[derive(Deserialize)]
struct PolicyWire {
    outcome: Option<Outcome>,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    kind: String,
    capability: Option<Canonical>,
    presentation: Option<Canonical>,
    #[serde(default = "one_approver")]
    approvers: u8,
    #[serde(default)]
    policy_id: String,
    #[serde(default)]
    spec_hash: String,
    view: Option<RecordedView>,
    #[serde(default)]
    truncated: bool,
}

fn one_approver() -> u8 {
    1
}

fn decode_policy(payload: &str) -> std::result::Result<Recorded, String> {
    let wire: PolicyWire = serde_json::from_str(payload)
        .map_err(|e| format!("its step.policy does not decode: {e}"))?;
    if wire.truncated {
        return Err("its step.policy is longer than a page read carries".into());
    }
    let outcome = wire.outcome.ok_or("its step.policy records no outcome")?;
    Ok(Recorded {
        decision: PolicyDecision {
            outcome,
            reason: wire.reason,
            kind: wire.kind,
            capability: wire.capability,
            presentation: wire.presentation,
            approvers: wire.approvers,
        },
        policy_id: wire.policy_id,
        spec_hash: wire.spec_hash,
        view: wire.view,
    })
}

/// What one item of the re-check is.
pub(super) enum ItemKind {
    /// A `step.policy`, decoded or why it does not.
    Policy(Box<std::result::Result<Recorded, String>>),
    /// The `step.failed` of a policy that failed: no evaluation recorded.
    PolicyFailed {
        /// The policy's error.
        error: String,
        /// The step had a `step.policy` before (so this was on resume).
        again: bool,
    },
}

/// One evaluation to re-check: an event of the run and what it recorded.
pub(super) struct Item {
    pub seq: i64,
    pub step_id: String,
    pub at: String,
    pub kind: ItemKind,
    /// The arguments of an operator's edit the step carried when the
    /// policy was asked (`approval.edited`, until `approval.edit_refused`):
    /// the request handed to the policy had these, not the model's.
    pub edited_args: Option<Canonical>,
}

/// One `approval.decided`: when, and the status it set.
pub(super) struct Decided {
    pub seq: i64,
    pub status: ApprovalStatus,
}

/// What a re-check reads of a run.
pub(super) struct Record {
    pub created: Created,
    pub items: Vec<Item>,
    /// Each approval's `approval.decided` events, in seq order.
    pub decided: HashMap<String, Vec<Decided>>,
    /// Step indexes as `step.started` recorded them, by step id.
    pub started: HashMap<String, u64>,
    pub steps: Vec<Step>,
    by_id: HashMap<String, usize>,
    /// The run's first approvals, as many as the views counted (at most
    /// [`MAX_APPROVALS`]), and how many the run has.
    pub approvals: Vec<Approval>,
    pub approval_count: u64,
}

/// The scan over a run's events, in seq order.
struct Scan {
    created: Created,
    items: Vec<Item>,
    decided: HashMap<String, Vec<Decided>>,
    started: HashMap<String, u64>,
    evaluated: HashSet<String>,
    /// Each step's standing edit, by step id.
    edits: HashMap<String, Canonical>,
    /// The type and step of the event before the one being read.
    previous: Option<(EventType, String)>,
}

#[derive(Deserialize)]
struct CreatedWire {
    goal: String,
    limits: Limits,
    /// Absent when the run was begun without labels.
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    truncated: bool,
}

#[derive(Deserialize)]
struct DecidedWire {
    approval_id: String,
    status: ApprovalStatus,
}

#[derive(Deserialize)]
struct EditedWire {
    args: Canonical,
}

#[derive(Deserialize)]
struct StartedWire {
    index: u64,
}

#[derive(Deserialize)]
struct FailedWire {
    #[serde(default)]
    detail: String,
}

impl Scan {
    fn new() -> Scan {
        Scan {
            created: Created::Missing,
            items: Vec::new(),
            decided: HashMap::new(),
            started: HashMap::new(),
            evaluated: HashSet::new(),
            edits: HashMap::new(),
            previous: None,
        }
    }

    fn event(&mut self, e: &Event) {
        let previous = self
            .previous
            .replace((e.event_type.clone(), e.step_id.clone()));
        match e.event_type {
            EventType::RunCreated => self.created = created(e),
            EventType::StepStarted => {
                if let Ok(s) = serde_json::from_str::<StartedWire>(&e.payload) {
                    self.started.insert(e.step_id.clone(), s.index);
                }
            }
            EventType::ApprovalDecided => {
                if let Ok(d) = serde_json::from_str::<DecidedWire>(&e.payload) {
                    self.decided
                        .entry(d.approval_id)
                        .or_default()
                        .push(Decided {
                            seq: e.seq,
                            status: d.status,
                        });
                }
            }
            EventType::ApprovalEdited => {
                if let Ok(edit) = serde_json::from_str::<EditedWire>(&e.payload) {
                    self.edits.insert(e.step_id.clone(), edit.args);
                }
            }
            EventType::ApprovalEditRefused => {
                self.edits.remove(&e.step_id);
            }
            EventType::StepPolicy => {
                self.evaluated.insert(e.step_id.clone());
                self.push(e, ItemKind::Policy(Box::new(decode_policy(&e.payload))));
            }
            EventType::StepFailed => self.failed(e, previous),
            _ => {}
        }
    }

    /// A `step.failed` of a policy error is an item unless a `step.policy`
    /// of the same step was written just before it.
    fn failed(&mut self, e: &Event, previous: Option<(EventType, String)>) {
        let Ok(f) = serde_json::from_str::<FailedWire>(&e.payload) else {
            return;
        };
        let Some(error) = f.detail.strip_prefix(POLICY_ERROR) else {
            return;
        };
        if previous == Some((EventType::StepPolicy, e.step_id.clone())) {
            return;
        }
        let kind = ItemKind::PolicyFailed {
            error: error.to_owned(),
            again: self.evaluated.contains(&e.step_id),
        };
        self.push(e, kind);
    }

    fn push(&mut self, e: &Event, kind: ItemKind) {
        self.items.push(Item {
            seq: e.seq,
            step_id: e.step_id.clone(),
            at: e.at.clone(),
            kind,
            edited_args: self.edits.get(&e.step_id).cloned(),
        });
    }
}

fn created(e: &Event) -> Created {
    let wire = match serde_json::from_str::<CreatedWire>(&e.payload) {
        Ok(w) if w.truncated => {
            return Created::Damaged("its run.created is longer than a page read carries".into());
        }
        Ok(w) => w,
        Err(err) => return Created::Damaged(format!("its run.created does not decode: {err}")),
    };
    match Timestamp::parse(&e.at) {
        Ok(at) => Created::Found {
            at,
            goal: wire.goal,
            limits: wire.limits,
            labels: wire.labels,
        },
        Err(err) => Created::Damaged(format!("its run.created time does not parse: {err}")),
    }
}

impl Record {
    /// Reads the record of `run_id`: events and steps a page at a time, and
    /// the approvals the views counted, whole.
    pub fn read(store: &Store, run_id: &str) -> Result<Record> {
        let mut scan = Scan::new();
        let mut after = 0;
        loop {
            let page = store.events_after_capped(Some(run_id), after, PAGE_ROWS)?;
            for e in &page {
                scan.event(e);
                after = e.seq;
            }
            if (page.len() as u64) < PAGE_ROWS {
                break;
            }
        }
        let steps = read_steps(store, run_id)?;
        let by_id = steps
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        let need = scan
            .items
            .iter()
            .filter_map(|item| match &item.kind {
                ItemKind::Policy(recorded) => recorded.as_ref().as_ref().ok()?.view,
                ItemKind::PolicyFailed { .. } => None,
            })
            .map(|v| v.approvals)
            .max()
            .unwrap_or(0);
        let (approvals, approval_count) = store.first_approvals(run_id, need.min(MAX_APPROVALS))?;
        Ok(Record {
            created: scan.created,
            items: scan.items,
            decided: scan.decided,
            started: scan.started,
            steps,
            by_id,
            approvals,
            approval_count,
        })
    }

    /// The stored step with this id.
    pub fn step(&self, id: &str) -> Option<&Step> {
        self.by_id.get(id).and_then(|&i| self.steps.get(i))
    }
}

fn read_steps(store: &Store, run_id: &str) -> Result<Vec<Step>> {
    let mut steps = Vec::new();
    loop {
        let page = store.steps_page_capped(run_id, PAGE_ROWS, steps.len() as u64)?;
        let read = (steps.len() + page.items.len()) as u64;
        let done = page.items.is_empty() || read >= page.total;
        steps.extend(page.items);
        if done {
            return Ok(steps);
        }
    }
}
