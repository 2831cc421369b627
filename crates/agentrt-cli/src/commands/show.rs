//! `show <run>`: the run, a block per pending approval, and its steps.

use std::io::Write;

use agentrt::text::{cap_with_count, clip, sanitize};
use agentrt::view::{self, BlockOptions, MAX_TEXT_FIELD_BYTES, RunSummary, StepSummary};
use agentrt::{EventType, Store};

use super::footer;
use crate::args::{Invocation, Paging};
use crate::error::CliError;
use crate::output::{self, cell, line, raw};

/// The detail page, and the shadow policy's disagreements when there are
/// any (the field is left out otherwise, so the output of a run without a
/// shadow is unchanged).
#[derive(serde::Serialize)]
struct Shown<'a> {
    #[serde(flatten)]
    detail: &'a view::Detail,
    #[serde(skip_serializing_if = "is_zero")]
    shadow_disagreements: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Step summaries are clipped to this many bytes in the table.
const SUMMARY_BYTES: usize = 60;

pub fn run(
    store: &Store,
    run_id: &str,
    paging: Paging,
    inv: &Invocation,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let detail = view::detail_page(store, run_id, paging.limit, paging.offset)?;
    // A shadow policy's disagreements with the decisions (design §42).
    let shadow = store.event_count(run_id, &EventType::PolicyShadow)?;
    if inv.json {
        return output::json(
            out,
            &Shown {
                detail: &detail,
                shadow_disagreements: shadow,
            },
        );
    }
    for text in header(&detail.run) {
        line(out, &text)?;
    }
    if shadow > 0 {
        line(
            out,
            &format!(
                "shadow  the shadow policy disagreed with {shadow} decision(s): agentrt events {}",
                sanitize(run_id)
            ),
        )?;
    }
    let db_path = inv.db.shown();
    let options = BlockOptions {
        db_path: Some(&db_path),
        stamp: &output::stamp,
    };
    for approval in &detail.approvals {
        raw(out, &view::approval_block(approval, &options))?;
    }
    if detail.approvals_truncated() {
        let next = detail.offset.saturating_add(detail.approvals.len() as u64);
        line(out, "")?;
        line(
            out,
            &format!(
                "... {} more pending approval(s) not shown; rerun with --offset {next} to see them",
                detail.approvals_total.saturating_sub(next)
            ),
        )?;
    }
    if !detail.steps.is_empty() {
        line(out, "")?;
        let rows: Vec<Vec<String>> = detail.steps.iter().map(step_row).collect();
        let headers = [
            "STEP",
            "TOOL",
            "DECISION",
            "STATUS",
            "POLICY",
            "OBSERVATION",
            "SUMMARY",
        ];
        for text in output::table(&headers, &rows) {
            line(out, &text)?;
        }
    }
    if let Some(text) = footer(
        "step(s)",
        detail.offset,
        detail.steps.len(),
        detail.steps_total,
    ) {
        line(out, &text)?;
    }
    Ok(())
}

/// `run`, `goal`, `labels` (one `key=value` a line, when the run has
/// any), `status`, `steps`, `created`, and `model` when the run called a
/// model; field names eight wide.
fn header(run: &RunSummary) -> Vec<String> {
    let capped = |s: &str| cap_with_count(&sanitize(s), MAX_TEXT_FIELD_BYTES);
    let mut status = run.status.as_str().to_owned();
    if let Some(reason) = run.reason {
        status.push_str(&format!(" ({reason})"));
    }
    if !run.reason_detail.is_empty() {
        status.push_str(&format!(": {}", capped(&run.reason_detail)));
    }
    let mut created = output::stamp(&run.created_at);
    if let Some(finished) = &run.finished_at {
        created.push_str(&format!("  finished {}", output::stamp(finished)));
    }
    let mut lines = vec![
        format!("run     {}", sanitize(&run.id)),
        format!("goal    {}", capped(&run.goal)),
    ];
    for (i, (key, value)) in run.labels.iter().enumerate() {
        let name = if i == 0 { "labels" } else { "" };
        lines.push(format!("{name:<8}{}", sanitize(&format!("{key}={value}"))));
    }
    lines.extend([
        format!("status  {status}"),
        format!("steps   {}", run.steps),
        format!("created {created}"),
    ]);
    if run.model_calls > 0 {
        lines.push(format!(
            "model   {} call(s), {} in, {} out, estimated {}",
            run.model_calls,
            run.usage.input_tokens,
            run.usage.output_tokens,
            output::dollars(run.estimated_cost_micros)
        ));
    }
    lines
}

fn step_row(step: &StepSummary) -> Vec<String> {
    let summary = match (&step.summary, &step.decode_error) {
        (s, Some(problem)) if s.is_empty() => format!("unread: {problem}"),
        (s, _) => s.clone(),
    };
    vec![
        step.index.to_string(),
        cell(&step.tool),
        cell(&step.decision),
        cell(step.status.as_str()),
        cell(&step.policy),
        cell(&step.observation),
        cell(&clip(&summary, SUMMARY_BYTES)),
    ]
}
