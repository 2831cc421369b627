//! Rebuilding what a policy was handed from the record: the run view (from
//! `run.created` and the recorded view counts) and the request (from the
//! step's recorded arguments and a spec).

use std::sync::Arc;

use super::MAX_APPROVALS;
use super::read::{Created, Item, Record, RecordedView};
use crate::clock::Timestamp;
use crate::json::Canonical;
use crate::model::{Approval, ApprovalStatus, Run, RunView, Step, ToolRequest, ToolSpec, Usage};

/// Why an evaluation cannot be rebuilt, in words for its `detail`.
pub(super) type Why = String;

/// The view the policy was handed at `item`: the run from `run.created`
/// and the counts; the first `counts.steps` steps as stored; the first
/// `counts.approvals` approvals with the status they had then.
pub(super) fn run_view(
    record: &Record,
    run_id: &str,
    item: &Item,
    counts: &RecordedView,
) -> Result<RunView, Why> {
    let run = run_at(record, run_id, counts)?;
    let steps = first_steps(record, counts)?;
    let approvals = first_approvals(record, item, counts)?;
    Ok(RunView {
        run,
        steps: Arc::new(steps.into_iter().map(Arc::new).collect()),
        approvals: Arc::new(approvals),
    })
}

/// The run as a policy reads it: identity, goal, limits, labels and
/// creation time from `run.created`, the counts from the view; reason, detail, finish
/// time and result empty, as they are while a policy can be asked.
fn run_at(record: &Record, run_id: &str, v: &RecordedView) -> Result<Run, Why> {
    let (at, goal, limits, labels) = match &record.created {
        Created::Found {
            at,
            goal,
            limits,
            labels,
        } => (*at, goal, limits, labels),
        Created::Missing => return Err("its run.created is missing".into()),
        Created::Damaged(why) => return Err(why.clone()),
    };
    Ok(Run {
        id: run_id.to_owned(),
        goal: goal.clone(),
        status: v.status,
        reason: None,
        reason_detail: String::new(),
        limits: *limits,
        labels: labels.clone(),
        step_count: v.step_count,
        created_at: at,
        finished_at: None,
        result: None,
        model_calls: v.model_calls,
        usage: Usage {
            input_tokens: v.input_tokens,
            output_tokens: v.output_tokens,
            cached_input_tokens: v.cached_input_tokens,
        },
        estimated_cost_micros: v.estimated_cost_micros,
        active_ms: v.active_ms,
        decode_error: None,
    })
}

fn out_of_range(record: &Record, v: &RecordedView) -> Why {
    format!(
        "the view counted {} steps and {} approvals; the run has {} and {}",
        v.steps,
        v.approvals,
        record.steps.len(),
        record.approval_count
    )
}

fn first_steps(record: &Record, v: &RecordedView) -> Result<Vec<Step>, Why> {
    let steps = usize::try_from(v.steps)
        .ok()
        .and_then(|n| record.steps.get(..n))
        .ok_or_else(|| out_of_range(record, v))?;
    if let Some(damaged) = steps.iter().find(|s| s.decode_error.is_some()) {
        let problem = damaged.decode_error.as_deref().unwrap_or_default();
        return Err(format!("step {}: {problem}", damaged.index));
    }
    Ok(steps.to_vec())
}

fn first_approvals(record: &Record, item: &Item, v: &RecordedView) -> Result<Vec<Approval>, Why> {
    if v.approvals > record.approval_count {
        return Err(out_of_range(record, v));
    }
    let approvals = usize::try_from(v.approvals)
        .ok()
        .and_then(|n| record.approvals.get(..n))
        .ok_or_else(|| {
            format!(
                "the view counted {} approvals, more than the {MAX_APPROVALS} a re-check reads whole",
                v.approvals
            )
        })?;
    approvals
        .iter()
        .map(|a| status_at(record, a, item))
        .collect()
}

/// `a` with the status it had when `item` was written: that of its last
/// `approval.decided` before the item by seq, else pending with the
/// decision fields blanked. An approval with no `approval.decided` at all
/// is judged by its stored `decided_at` against the item's time.
fn status_at(record: &Record, a: &Approval, item: &Item) -> Result<Approval, Why> {
    if let Some(problem) = &a.decode_error {
        return Err(format!("approval {}: {problem}", a.id));
    }
    let status = match record.decided.get(&a.id) {
        Some(decided) => decided
            .iter()
            .take_while(|d| d.seq < item.seq)
            .last()
            .map_or(ApprovalStatus::Pending, |d| d.status),
        None => {
            let at = Timestamp::parse(&item.at)
                .map_err(|e| format!("its event time does not parse: {e}"))?;
            let decided_by_then = a.decided_at.is_some_and(|d| d <= at);
            if a.status != ApprovalStatus::Pending && decided_by_then {
                a.status
            } else {
                ApprovalStatus::Pending
            }
        }
    };
    let mut then = a.clone();
    then.status = status;
    if status == ApprovalStatus::Pending {
        then.decided_at = None;
        then.decided_by.clear();
        then.note.clear();
    }
    Ok(then)
}

/// The request as the loop built it: the run and step, `spec`, and the
/// arguments it was handed (the step's recorded ones, or an operator's
/// edit of them), canonical.
pub(super) fn request(run_id: &str, step: &Step, args: Canonical, spec: ToolSpec) -> ToolRequest {
    ToolRequest {
        run_id: run_id.to_owned(),
        step_id: step.id.clone(),
        spec,
        args,
    }
}
