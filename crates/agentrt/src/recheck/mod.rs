//! Re-checking a run (design §17): every policy evaluation the run
//! recorded is rebuilt from the record as the policy saw it, handed again to
//! a policy, and the answer compared with the one recorded.
//!
//! A policy is synchronous and pure over what it is handed (decision 8), so
//! under the policy a run ran with, a re-check answers the same; one that
//! reads anything else (a clock, a file, a counter) may not. Under another
//! policy, a re-check names the steps it would have decided otherwise.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> agentrt::Result<()> {
//! use std::sync::Arc;
//! use agentrt::recheck::{RecheckOptions, write_recheck};
//! use agentrt::{Decision, Driver, GateConfig, Limits, Outcome, ScriptedAgent, SideEffect};
//! use agentrt::{SideEffectPolicy, Store, ToolResult, ToolSpec, tool_fn};
//! let rules = |remote| SideEffectPolicy::new().with(SideEffect::RemoteMutation, remote);
//! let push = ToolSpec::new("push", "Push a branch", SideEffect::RemoteMutation);
//! let push = Arc::new(tool_fn(push, |_| async { Ok(ToolResult::raw("{}")) }));
//! let store = Store::open(":memory:")?;
//! let config = GateConfig::new(store.clone(), rules(Outcome::Allow).with_id("v1"), vec![push]);
//! let agent = ScriptedAgent::new([Decision::tool_call("push", "{}"), Decision::complete("1")]);
//! Driver::new(config, agent)?.start(Some("r1"), "publish", Limits::default()).await?;
//!
//! // Would the new rules have decided the old run alike?
//! let strict = rules(Outcome::Deny).with_id("v2");
//! let report = agentrt::recheck::recheck(&store, "r1", &strict, &RecheckOptions::default())?;
//! assert_eq!(report.differing_steps(), [0]);
//! write_recheck(&report, &mut std::io::stdout()).ok();
//! # Ok(())
//! # }
//! ```
//!
//! A re-check writes nothing and reads no clock. It reads the run's events
//! and steps a page of [`PAGE_ROWS`] at a time (each text column capped as
//! every page read is), the approvals the views counted whole (at most
//! [`MAX_APPROVALS`]), and each spec whole, by its verified hash.

mod check;
mod read;
mod rebuild;
#[cfg(test)]
mod tests;
mod text;

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{PolicyDecision, ToolSpec};
use crate::policy::{Policy, check_policy_id};
use crate::store::Store;

pub use text::write_recheck;

/// How many events or steps one read of a re-check takes.
pub const PAGE_ROWS: u64 = 128;

/// How many of a run's approvals a re-check reads whole; an evaluation
/// whose view counted more is not re-checkable.
pub const MAX_APPROVALS: u64 = 1024;

/// What [`recheck`] takes beyond the run and the policy.
#[derive(Debug, Clone, Default)]
pub struct RecheckOptions {
    /// `None`: each request carries the spec recorded with its evaluation
    /// (read by its hash, verified). `Some`: the tools as registered now;
    /// each request carries its tool's current spec, and a request whose
    /// tool is missing, or whose arguments the current schema refuses, is
    /// `different` (it would be refused before the policy).
    pub tools: Option<Vec<ToolSpec>>,
}

/// Which spec a re-checked request carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecSource {
    /// The spec recorded with the evaluation, by its hash.
    Recorded,
    /// The spec of the tool named in [`RecheckOptions::tools`].
    Current,
}

impl SpecSource {
    /// `recorded` or `current`.
    pub fn as_str(&self) -> &'static str {
        match self {
            SpecSource::Recorded => "recorded",
            SpecSource::Current => "current",
        }
    }
}

/// What one recorded evaluation came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecheckResult {
    /// Answered alike: the same outcome and, for `require_approval`, the
    /// same approval kind and hash.
    Same,
    /// Answered otherwise, or the policy failed.
    Different,
    /// A `step.policy` no policy wrote: an interrupted side effect's or a
    /// reconciliation's pause.
    NotAPolicyEvaluation,
    /// The record cannot rebuild it; `detail` says why.
    NotRecheckable,
}

impl RecheckResult {
    /// The stored text (`same`, `different`, …).
    pub fn as_str(&self) -> &'static str {
        match self {
            RecheckResult::Same => "same",
            RecheckResult::Different => "different",
            RecheckResult::NotAPolicyEvaluation => "not_a_policy_evaluation",
            RecheckResult::NotRecheckable => "not_recheckable",
        }
    }

    /// `true` for [`RecheckResult::Different`].
    pub fn is_different(&self) -> bool {
        *self == RecheckResult::Different
    }

    /// `true` when the policy was asked again (same or different).
    pub fn was_rechecked(&self) -> bool {
        matches!(self, RecheckResult::Same | RecheckResult::Different)
    }
}

/// The identity of the policy re-checked under, against the identities the
/// evaluations recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Identity {
    /// One side, or both, has no identity, or nothing was re-checked.
    Unknown,
    /// Both sides have one, and some evaluation recorded another.
    Changed,
    /// Every re-checked evaluation recorded the identity the policy has.
    Unchanged,
}

/// One recorded evaluation and what re-checking it came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The step's index (`None` when the record has no such step).
    pub step_index: Option<u64>,
    /// The step.
    pub step_id: String,
    /// The seq of its `step.policy` (of its `step.failed` for a policy
    /// that failed).
    pub seq: i64,
    /// The tool the step's decision named (empty when unknown).
    pub tool: String,
    /// Made when an approved request was resumed.
    pub on_resume: bool,
    /// What it came to.
    pub result: RecheckResult,
    /// The decision recorded (`None` when none was, or it does not decode).
    pub recorded: Option<PolicyDecision>,
    /// The policy's answer now (`None` when it was not asked or failed).
    pub rechecked: Option<PolicyDecision>,
    /// The hash of the approval the recorded decision asks for, over the
    /// recorded request.
    pub recorded_hash: Option<String>,
    /// The hash of the approval the answer now asks for, over the request
    /// re-checked.
    pub rechecked_hash: Option<String>,
    /// What differs, or why it was not re-checked. The policy's reason is
    /// never a difference: it is in `rechecked`.
    pub detail: String,
    /// The spec the re-checked request carried (`None` when not asked).
    pub spec_source: Option<SpecSource>,
    /// The policy id the evaluation recorded (empty for none).
    pub policy_id: String,
}

/// What [`recheck`] found for one run. Its JSON form also carries `same`,
/// `differences`, `rechecked`, `not_recheckable` and `complete`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RecheckReport {
    /// The run.
    pub run_id: String,
    /// Its status when re-checked.
    pub run_status: crate::model::RunStatus,
    /// The id of the policy re-checked under (empty for none).
    pub policy_id: String,
    /// That id against the ids the evaluations recorded.
    pub identity: Identity,
    /// `current` when [`RecheckOptions::tools`] was given.
    pub spec_source: SpecSource,
    /// What holds for the whole run (a run not finished, nothing recorded).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The evaluations, in the order they were recorded.
    pub evaluations: Vec<Evaluation>,
}

impl RecheckReport {
    fn count(&self, result: RecheckResult) -> usize {
        self.evaluations
            .iter()
            .filter(|e| e.result == result)
            .count()
    }

    /// No evaluation differs (true also when nothing was re-checked: see
    /// [`rechecked`](Self::rechecked) and [`complete`](Self::complete)).
    pub fn same(&self) -> bool {
        self.differences() == 0
    }

    /// How many evaluations differ.
    pub fn differences(&self) -> usize {
        self.count(RecheckResult::Different)
    }

    /// How many evaluations the policy was asked again.
    pub fn rechecked(&self) -> usize {
        self.count(RecheckResult::Same) + self.count(RecheckResult::Different)
    }

    /// How many evaluations the record could not rebuild.
    pub fn not_recheckable(&self) -> usize {
        self.count(RecheckResult::NotRecheckable)
    }

    /// No evaluation is `not_recheckable` (a run with none is complete).
    pub fn complete(&self) -> bool {
        self.not_recheckable() == 0
    }

    /// The indexes of the steps with an evaluation that differs, each once,
    /// in order.
    pub fn differing_steps(&self) -> Vec<u64> {
        let steps: BTreeSet<u64> = self
            .evaluations
            .iter()
            .filter(|e| e.result.is_different())
            .filter_map(|e| e.step_index)
            .collect();
        steps.into_iter().collect()
    }
}

/// The report's JSON form: its fields and the counts beside them.
#[derive(Serialize)]
struct Wire<'a> {
    run_id: &'a str,
    run_status: crate::model::RunStatus,
    policy_id: &'a str,
    identity: Identity,
    spec_source: SpecSource,
    notes: &'a [String],
    evaluations: &'a [Evaluation],
    same: bool,
    differences: usize,
    rechecked: usize,
    not_recheckable: usize,
    complete: bool,
}

impl Serialize for RecheckReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        Wire {
            run_id: &self.run_id,
            run_status: self.run_status,
            policy_id: &self.policy_id,
            identity: self.identity,
            spec_source: self.spec_source,
            notes: &self.notes,
            evaluations: &self.evaluations,
            same: self.same(),
            differences: self.differences(),
            rechecked: self.rechecked(),
            not_recheckable: self.not_recheckable(),
            complete: self.complete(),
        }
        .serialize(s)
    }
}

/// Replays every policy evaluation `run_id` recorded through `policy`, in
/// the order they were recorded, and reports per evaluation whether the
/// policy decides the same now.
///
/// # Errors
///
/// [`Error::NotFound`] for a run the store does not have;
/// [`Error::InvalidPolicyId`] for a policy whose id a gate would refuse;
/// [`Error::InvalidTool`] for current tools a gate could not register;
/// store errors. What the record cannot rebuild is not an error: it is an
/// evaluation marked `not_recheckable`.
///
/// ```
/// use agentrt::recheck::RecheckOptions;
/// use agentrt::{DefaultPolicy, Error, Store};
/// let store = Store::open(":memory:").unwrap();
/// let err = agentrt::recheck::recheck(&store, "nope", &DefaultPolicy, &RecheckOptions::default());
/// assert!(matches!(err, Err(Error::NotFound { what: "run", .. })));
/// ```
pub fn recheck(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
    options: &RecheckOptions,
) -> Result<RecheckReport> {
    let given = policy.policy_id().unwrap_or_default();
    check_policy_id(&given).map_err(|reason| Error::InvalidPolicyId { reason })?;
    let current = options
        .tools
        .as_ref()
        .map(|specs| check::Current::new(specs))
        .transpose()?;
    let run = store.get_run_capped(run_id)?;
    let record = read::Record::read(store, run_id)?;
    let mut checker = check::Checker::new(store, &record, run_id, policy, current.as_ref());
    let evaluations = record
        .items
        .iter()
        .map(|item| checker.check(item))
        .collect::<Result<Vec<_>>>()?;
    let mut notes = Vec::new();
    if !run.status.is_terminal() {
        notes.push(format!(
            "the run is {}: re-checked up to its current state",
            run.status
        ));
    }
    if evaluations.is_empty() {
        notes.push("no policy evaluation is recorded".to_owned());
    }
    Ok(RecheckReport {
        run_id: run_id.to_owned(),
        run_status: run.status,
        identity: identity(&given, &evaluations),
        policy_id: given,
        spec_source: if current.is_some() {
            SpecSource::Current
        } else {
            SpecSource::Recorded
        },
        notes,
        evaluations,
    })
}

/// Unknown when nothing was re-checked or either side of a re-checked
/// evaluation lacks an id; changed when any recorded id differs.
fn identity(given: &str, evaluations: &[Evaluation]) -> Identity {
    let asked: Vec<&Evaluation> = evaluations
        .iter()
        .filter(|e| e.result.was_rechecked())
        .collect();
    if asked.is_empty() || given.is_empty() || asked.iter().any(|e| e.policy_id.is_empty()) {
        return Identity::Unknown;
    }
    if asked.iter().any(|e| e.policy_id != given) {
        Identity::Changed
    } else {
        Identity::Unchanged
    }
}
