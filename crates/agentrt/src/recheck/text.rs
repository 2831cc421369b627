//! A re-check report as text for a terminal (design §18).

use std::collections::BTreeSet;
use std::fmt::{self, Write as _};

use super::{Evaluation, Identity, RecheckReport, RecheckResult};
use crate::text::clip;

/// How many bytes of one value a re-check line shows.
pub const MAX_FIELD_BYTES: usize = 240;

/// `s` sanitized for one terminal line and cut at [`MAX_FIELD_BYTES`].
fn field(s: &str) -> String {
    clip(s, MAX_FIELD_BYTES)
}

/// Writes `report` as text: a header (run, status, how many of the
/// re-checked evaluations differ, the policy identity, the spec source),
/// one line per evaluation with the differences first, each marked
/// `DIFFERENT`, `same` or `skipped`, then the notes. Every value the
/// record or a policy chose is sanitized and cut at 240 bytes, so each
/// evaluation is one line. The report's `Display` is the same text.
///
/// ```
/// use agentrt::recheck::{Identity, RecheckReport, SpecSource, write_recheck};
/// let report = RecheckReport {
///     run_id: "r1".into(),
///     run_status: agentrt::RunStatus::Completed,
///     policy_id: String::new(),
///     identity: Identity::Unknown,
///     spec_source: SpecSource::Recorded,
///     notes: vec!["no policy evaluation is recorded".into()],
///     evaluations: vec![],
/// };
/// let mut out = Vec::new();
/// write_recheck(&report, &mut out).unwrap();
/// assert_eq!(
///     String::from_utf8(out).unwrap(),
///     "run r1 COMPLETED: 0 of 0 re-checked evaluations differ; policy identity unknown; recorded specs\n\
///      note: no policy evaluation is recorded\n"
/// );
/// ```
pub fn write_recheck<W: std::io::Write + ?Sized>(
    report: &RecheckReport,
    out: &mut W,
) -> std::io::Result<()> {
    out.write_all(report.to_string().as_bytes())
}

impl fmt::Display for RecheckReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "run {} {}: {} of {} re-checked evaluations differ; {}; {} specs",
            field(&self.run_id),
            self.run_status,
            self.differences(),
            self.rechecked(),
            identity(self),
            self.spec_source.as_str()
        )?;
        let (differ, rest): (Vec<&Evaluation>, Vec<&Evaluation>) = self
            .evaluations
            .iter()
            .partition(|e| e.result.is_different());
        for e in differ.into_iter().chain(rest) {
            f.write_str(&line(e))?;
        }
        for note in &self.notes {
            writeln!(f, "note: {}", field(note))?;
        }
        Ok(())
    }
}

fn identity(report: &RecheckReport) -> String {
    match report.identity {
        Identity::Unknown => "policy identity unknown".to_owned(),
        Identity::Unchanged => format!("policy unchanged: \"{}\"", field(&report.policy_id)),
        Identity::Changed => {
            let recorded: BTreeSet<&str> = report
                .evaluations
                .iter()
                .filter(|e| e.result.was_rechecked() && e.policy_id != report.policy_id)
                .map(|e| e.policy_id.as_str())
                .collect();
            let recorded: Vec<String> = recorded
                .into_iter()
                .map(|id| format!("\"{}\"", field(id)))
                .collect();
            format!(
                "policy changed: recorded {}, given \"{}\"",
                recorded.join(", "),
                field(&report.policy_id)
            )
        }
    }
}

/// One evaluation's line.
fn line(e: &Evaluation) -> String {
    let mark = match e.result {
        RecheckResult::Different => "DIFFERENT",
        RecheckResult::Same => "same     ",
        RecheckResult::NotAPolicyEvaluation | RecheckResult::NotRecheckable => "skipped  ",
    };
    let step = e
        .step_index
        .map_or_else(|| "?".to_owned(), |i| i.to_string());
    let mut tool = if e.tool.is_empty() {
        "-".to_owned()
    } else {
        field(&e.tool)
    };
    if e.on_resume {
        tool.push_str(" (on resume)");
    }
    let mut out = format!("{mark} step {step} seq {} {tool}: ", e.seq);
    let recorded = e.recorded.as_ref().map_or("none", |d| d.outcome.as_str());
    match e.result {
        RecheckResult::Same => {
            out.push_str(recorded);
            push_detail(&mut out, &e.detail);
        }
        RecheckResult::Different => {
            let now = e.rechecked.as_ref().map_or("none", |d| d.outcome.as_str());
            let why = match (&e.rechecked, e.detail.is_empty()) {
                (Some(d), true) => d.reason.as_str(),
                _ => e.detail.as_str(),
            };
            let _ = write!(out, "{recorded} -> {now}");
            push_detail(&mut out, why);
        }
        RecheckResult::NotAPolicyEvaluation | RecheckResult::NotRecheckable => {
            out.push_str(&field(&e.detail));
        }
    }
    out.push('\n');
    out
}

fn push_detail(out: &mut String, detail: &str) {
    if !detail.is_empty() {
        out.push_str(": ");
        out.push_str(&field(detail));
    }
}
