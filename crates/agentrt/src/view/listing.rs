//! Run and step summaries, paged listings over the store's bounded reads,
//! and which approval an operator means.

use serde::{Serialize, Serializer};

use super::MAX_LISTED_APPROVALS;
use super::bound::bound_approval;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{
    Approval, ApprovalStatus, Labels, Run, RunStatus, Step, StepStatus, TerminalReason, Usage,
};
use crate::store::{PAGE_READ_ROWS, Page, Store};

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// One run as listed: `{id, goal, labels?, status, reason?, reason_detail?,
/// steps, created_at, finished_at?, pending_approval_id?, model_calls?,
/// usage?, estimated_cost_micros?}` in JSON (optional fields omitted when
/// empty or zero; `labels` is an object of strings).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub id: String,
    /// The goal, in full (as far as the page read returns it).
    pub goal: String,
    /// The labels the run was begun with.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<TerminalReason>,
    /// Detail of the reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason_detail: String,
    /// Steps started.
    pub steps: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it finished (never set for a run that has not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// The pending approval, only for a run waiting for approval with
    /// exactly one pending approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_approval_id: Option<String>,
    /// Model call attempts charged.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub model_calls: u64,
    /// Tokens charged.
    #[serde(skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    /// Estimated spend in micro-dollars.
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub estimated_cost_micros: i64,
}

impl RunSummary {
    /// The summary of `run`. `pending_approval_id` is kept only when the
    /// run is waiting for approval.
    pub fn from_run(run: &Run, pending_approval_id: Option<String>) -> RunSummary {
        RunSummary {
            id: run.id.clone(),
            goal: run.goal.clone(),
            labels: run.labels.clone(),
            status: run.status,
            reason: run.reason,
            reason_detail: run.reason_detail.clone(),
            steps: run.step_count,
            created_at: run.created_at,
            finished_at: run.finished_at,
            pending_approval_id: pending_approval_id
                .filter(|_| run.status == RunStatus::WaitingForApproval),
            model_calls: run.model_calls,
            usage: run.usage,
            estimated_cost_micros: run.estimated_cost_micros,
        }
    }
}

/// One step as listed: `{index, id, tool?, decision?, status, policy?,
/// observation?, summary?}` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    /// Position in the run.
    pub index: u64,
    /// The step id.
    pub id: String,
    /// The tool the decision named.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The decision kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub decision: String,
    /// Where the step stands.
    pub status: StepStatus,
    /// The policy's outcome.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub policy: String,
    /// The observation kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub observation: String,
    /// The observation's summary.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Why a column of the step could not be read (not part of the JSON
    /// form; text views may show it).
    #[serde(skip)]
    pub decode_error: Option<String>,
}

impl StepSummary {
    /// The summary of `step`.
    pub fn from_step(step: &Step) -> StepSummary {
        let decision = step.decision.as_ref();
        StepSummary {
            index: step.index,
            id: step.id.clone(),
            tool: decision.map(|d| d.tool.clone()).unwrap_or_default(),
            decision: decision
                .map(|d| d.kind.as_str().to_owned())
                .unwrap_or_default(),
            status: step.status,
            policy: step
                .policy
                .as_ref()
                .map(|p| p.outcome.as_str().to_owned())
                .unwrap_or_default(),
            observation: step
                .observation
                .as_ref()
                .map(|o| o.kind.as_str().to_owned())
                .unwrap_or_default(),
            summary: step
                .observation
                .as_ref()
                .map(|o| o.summary.clone())
                .unwrap_or_default(),
            decode_error: step.decode_error.clone(),
        }
    }
}

/// A page of runs, newest first: `{"runs":[…],"total":N,"limit":L,
/// "offset":O,"truncated":true}` in JSON (`truncated` omitted when false).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsPage {
    /// The runs of this page.
    pub runs: Vec<RunSummary>,
    /// How many runs there are.
    pub total: u64,
    /// The page size asked for (0: all).
    pub limit: u64,
    /// How many runs were skipped.
    pub offset: u64,
    /// More runs exist past this page.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// A run with a page of its steps and pending approvals (they share
/// `limit` and `offset`). In JSON the approvals are bounded
/// ([`bound_approval`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detail {
    /// The run.
    pub run: RunSummary,
    /// The page of steps, in index order.
    pub steps: Vec<StepSummary>,
    /// How many steps the run has.
    pub steps_total: u64,
    /// More steps exist past this page.
    #[serde(skip_serializing_if = "is_false")]
    pub steps_truncated: bool,
    /// The page of pending approvals, in creation order (as read; bounded
    /// in JSON).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_bounded_list"
    )]
    pub approvals: Vec<Approval>,
    /// How many approvals of the run are pending.
    pub approvals_total: u64,
    /// The approval the run waits for, when it waits for exactly one
    /// (bounded in JSON).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_bounded_option"
    )]
    pub waiting_approval: Option<Approval>,
    /// The page size asked for (0: all).
    pub limit: u64,
    /// How many steps (and pending approvals) were skipped.
    pub offset: u64,
}

impl Detail {
    /// More pending approvals exist past this page.
    pub fn approvals_truncated(&self) -> bool {
        self.offset.saturating_add(self.approvals.len() as u64) < self.approvals_total
    }
}

fn serialize_bounded_list<S: Serializer>(list: &[Approval], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(bound_approval))
}

fn serialize_bounded_option<S: Serializer>(
    approval: &Option<Approval>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match approval {
        Some(a) => bound_approval(a).serialize(s),
        None => s.serialize_none(),
    }
}

/// Reads `limit` rows at `offset` with `read`, or, for `limit` 0, every
/// row from `offset` on, [`PAGE_READ_ROWS`] at a time. The total is the
/// first read's.
fn read_paged<T>(
    limit: u64,
    offset: u64,
    mut read: impl FnMut(u64, u64) -> Result<Page<T>>,
) -> Result<Page<T>> {
    if limit > 0 {
        return read(limit, offset);
    }
    let mut first = read(PAGE_READ_ROWS, offset)?;
    let mut got = first.items.len() as u64;
    let mut at = offset.saturating_add(got);
    while got == PAGE_READ_ROWS {
        let next = read(PAGE_READ_ROWS, at)?;
        got = next.items.len() as u64;
        at = at.saturating_add(got);
        first.items.extend(next.items);
    }
    Ok(first)
}

/// A page of runs, newest first; `limit` 0 reads them all, a page of
/// [`PAGE_READ_ROWS`] at a time. Each waiting run with exactly one pending
/// approval carries its id.
pub fn runs_page(store: &Store, limit: u64, offset: u64) -> Result<RunsPage> {
    runs_page_labelled(store, limit, offset, &Labels::new())
}

/// [`runs_page`] of the runs that carry every label of `labels` (all runs
/// for none); the total counts the matching runs only.
pub fn runs_page_labelled(
    store: &Store,
    limit: u64,
    offset: u64,
    labels: &Labels,
) -> Result<RunsPage> {
    let page = read_paged(limit, offset, |l, o| {
        store.runs_page_capped_labelled(l, o, labels)
    })?;
    let waiting: Vec<&str> = page
        .items
        .iter()
        .filter(|r| r.status == RunStatus::WaitingForApproval)
        .map(|r| r.id.as_str())
        .collect();
    let mut pending = store.pending_counts_capped(&waiting)?;
    let runs: Vec<RunSummary> = page
        .items
        .iter()
        .map(|r| {
            let id = pending.remove(&r.id).and_then(|p| p.only_id);
            RunSummary::from_run(r, id)
        })
        .collect();
    let truncated = offset.saturating_add(runs.len() as u64) < page.total;
    Ok(RunsPage {
        runs,
        total: page.total,
        limit,
        offset,
        truncated,
    })
}

/// The summary of one run ([`Error::NotFound`] if there is none).
pub fn run_summary(store: &Store, run_id: &str) -> Result<RunSummary> {
    let run = store.get_run_capped(run_id)?;
    let pending = if run.status == RunStatus::WaitingForApproval {
        store
            .pending_counts_capped(&[run.id.as_str()])?
            .remove(&run.id)
            .and_then(|p| p.only_id)
    } else {
        None
    };
    Ok(RunSummary::from_run(&run, pending))
}

/// A run with a page of its steps and of its pending approvals, sharing
/// `limit` and `offset` (`limit` 0 reads them all, a page at a time).
/// [`Error::NotFound`] if there is no such run.
pub fn detail_page(store: &Store, run_id: &str, limit: u64, offset: u64) -> Result<Detail> {
    let run = store.get_run_capped(run_id)?;
    let steps = read_paged(limit, offset, |l, o| store.steps_page_capped(run_id, l, o))?;
    let approvals = read_paged(limit, offset, |l, o| {
        store.pending_approvals_page_capped(run_id, l, o)
    })?;
    let waiting = run.status == RunStatus::WaitingForApproval && approvals.total == 1;
    let waiting_approval = if !waiting {
        None
    } else if let Some(first) = approvals.items.first() {
        Some(first.clone())
    } else {
        store
            .pending_approvals_page_capped(run_id, 1, 0)?
            .items
            .into_iter()
            .next()
    };
    let summary = RunSummary::from_run(&run, waiting_approval.as_ref().map(|a| a.id.clone()));
    let steps_truncated = offset.saturating_add(steps.items.len() as u64) < steps.total;
    Ok(Detail {
        run: summary,
        steps: steps.items.iter().map(StepSummary::from_step).collect(),
        steps_total: steps.total,
        steps_truncated,
        approvals: approvals.items,
        approvals_total: approvals.total,
        waiting_approval,
        limit,
        offset,
    })
}

/// The approval an operator means (design §12), read capped.
///
/// With `named`, that approval of that run, which must be pending
/// ([`Error::NotPending`] naming its status; [`Error::NotFound`] if the run
/// has no such approval). Without, the run's only pending approval:
/// [`Error::NoPendingApproval`] when there is none,
/// [`Error::AmbiguousApproval`] listing up to [`MAX_LISTED_APPROVALS`] ids
/// and how many more when there are several. [`Error::NotFound`] if there
/// is no such run.
pub fn pending_approval(store: &Store, run_id: &str, named: Option<&str>) -> Result<Approval> {
    let run = store.get_run_capped(run_id)?;
    if let Some(id) = named {
        let approval = store.get_approval_capped(run_id, id)?;
        if approval.status != ApprovalStatus::Pending {
            return Err(Error::NotPending {
                approval: approval.id,
                status: approval.status,
            });
        }
        return Ok(approval);
    }
    let listed = MAX_LISTED_APPROVALS as u64;
    let (ids, total) = store.pending_approval_ids_capped(run_id, listed + 1)?;
    match (ids.as_slice(), total) {
        (_, 0) | ([], _) => Err(Error::NoPendingApproval { run: run.id }),
        ([only], 1) => store.get_approval_capped(run_id, only),
        _ => {
            let ids: Vec<String> = ids.into_iter().take(MAX_LISTED_APPROVALS).collect();
            let more =
                usize::try_from(total.saturating_sub(ids.len() as u64)).unwrap_or(usize::MAX);
            Err(Error::AmbiguousApproval {
                run: run.id,
                ids,
                more,
            })
        }
    }
}
