//! `approve <run>` / `reject <run>`: select the approval, print it, get
//! consent, then decide bound to the hash of what was printed.

use std::io::{Read, Write};
use std::sync::Arc;

use agentrt::text::sanitize;
use agentrt::view::{self, BlockOptions, RunSummary};
use agentrt::{
    Approval, ApprovalStatus, DecideOptions, Error, Event, Observer, Operator, RunStatus, Store,
};
use serde::Serialize;

use crate::args::{Decide, EditSource, Invocation, Verb};
use crate::consent::{self, Answer};
use crate::error::CliError;
use crate::output::{self, line, raw};

/// The largest edit read, in bytes: arguments, not documents.
const MAX_EDIT_BYTES: u64 = 1 << 20;

/// The JSON report.
#[derive(Serialize)]
struct Report<'a> {
    run: &'a RunSummary,
    approval: Approval,
    /// The approval an edit replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    edited: Option<&'a str>,
}

pub fn run(
    store: &Store,
    decide: &Decide,
    inv: &Invocation,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // An edit is read before anything is shown: a file that cannot be read
    // or is not an object decides nothing.
    let edit = decide.edit.as_ref().map(read_edit).transpose()?;
    let approval = view::pending_approval(store, &decide.run, decide.approval.as_deref())?;
    if !inv.json {
        let db_path = inv.db.shown();
        let options = BlockOptions {
            db_path: Some(&db_path),
            stamp: &output::stamp,
        };
        raw(out, &view::approval_block(&approval, &options))?;
        if let Some(args) = &edit {
            line(
                out,
                "The edited arguments, approved instead of the request's:",
            )?;
            line(out, &format!("  {}", sanitize(args.as_str())))?;
        }
    }
    if let Some(problem) = &approval.decode_error {
        return Err(CliError::Failed(format!(
            "approval {} cannot be decided: it does not read back whole ({problem}); nothing was decided",
            approval.id
        )));
    }
    consent(decide, &approval, edit.is_some(), inv.json, out)?;
    let tracer: Arc<dyn Observer> = Arc::new(trace_to_stderr);
    let operator = Operator::new(store.clone()).with_observer(tracer);
    let options = DecideOptions {
        by: &decide.by,
        note: &decide.note,
        shown_hash: Some(&approval.hash),
    };
    let decided = match (decide.verb, &edit) {
        (Verb::Approve, Some(args)) => {
            operator.approve_edited(&decide.run, &approval.id, args.as_str(), &options)
        }
        (Verb::Approve, None) => operator.approve(&decide.run, &approval.id, &options),
        (Verb::Reject, _) => operator.reject(&decide.run, &approval.id, &options),
    }
    .map_err(decide_error)?;
    let edited = edit.is_some().then_some(approval.id.as_str());
    let summary = view::run_summary(store, &decide.run)?;
    if inv.json {
        return output::json(
            out,
            &Report {
                run: &summary,
                approval: view::bound_approval(&decided),
                edited,
            },
        );
    }
    let replaced = edited
        .map(|id| format!(" (an edit of approval {}, now edited)", sanitize(id)))
        .unwrap_or_default();
    if decided.status == ApprovalStatus::Pending {
        // The first of two approvers (design §46).
        line(
            out,
            &format!(
                "approval {}: approved by {} (1 of {}): it waits for another approver",
                sanitize(&decided.id),
                sanitize(&decided.decided_by),
                agentrt::approval::approvers_needed(&decided)
            ),
        )?;
    } else {
        line(
            out,
            &format!(
                "approval {}: {} by {}{replaced}",
                sanitize(&decided.id),
                decided.status,
                sanitize(&decided.decided_by)
            ),
        )?;
    }
    let mut status = format!("run {}: {}", sanitize(&summary.id), summary.status);
    if let Some(reason) = summary.reason {
        status.push_str(&format!(" ({reason})"));
    }
    line(out, &status)?;
    if decided.status == ApprovalStatus::Approved && summary.status == RunStatus::WaitingForApproval
    {
        line(
            out,
            &format!(
                "run {} stays waiting until the consumer resumes it (Driver::resume in the program that owns the run)",
                sanitize(&summary.id)
            ),
        )?;
    }
    Ok(())
}

/// The edited arguments: at most [`MAX_EDIT_BYTES`] of UTF-8 from the
/// file or stdin, a JSON object (the core checks it again, and against the
/// tool's schema).
fn read_edit(source: &EditSource) -> Result<agentrt::Canonical, CliError> {
    let (name, reader): (String, Box<dyn Read>) = match source {
        EditSource::Stdin => ("stdin".to_owned(), Box::new(std::io::stdin())),
        EditSource::File(path) => {
            let name = sanitize(&path.display().to_string());
            let file = std::fs::File::open(path)
                .map_err(|e| CliError::Failed(format!("--edit {name}: {e}")))?;
            (name, Box::new(file))
        }
    };
    let mut bytes = Vec::new();
    reader
        .take(MAX_EDIT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::Failed(format!("--edit {name}: {e}")))?;
    if bytes.len() as u64 > MAX_EDIT_BYTES {
        return Err(CliError::Failed(format!(
            "--edit {name}: larger than {MAX_EDIT_BYTES} bytes; nothing was decided"
        )));
    }
    let args = agentrt::Canonical::parse(&bytes).map_err(|e| {
        CliError::Failed(format!(
            "--edit {name}: not acceptable JSON ({e}); nothing was decided"
        ))
    })?;
    if !args.is_object() {
        return Err(CliError::Failed(format!(
            "--edit {name}: the arguments must be a JSON object; nothing was decided"
        )));
    }
    Ok(args)
}

/// Consent: `--approval`, `--yes`, or a typed y/yes at an interactive
/// terminal (text output only).
fn consent(
    decide: &Decide,
    approval: &Approval,
    edited: bool,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    if decide.approval.is_some() || decide.yes {
        return Ok(());
    }
    let verb = decide.verb.name();
    let id = sanitize(&approval.id);
    let answer = if !json && consent::stdin_is_terminal() {
        let with = if edited {
            " with the edited arguments"
        } else {
            ""
        };
        let prompt = format!(
            "{verb} approval {id} of run {}{with}? [y/N] ",
            sanitize(&decide.run)
        );
        let stdin = std::io::stdin();
        let mut input = stdin.lock();
        consent::ask(out, &mut input, &prompt).map_err(CliError::Output)?
    } else {
        Answer::Nothing
    };
    match answer {
        Answer::Yes => Ok(()),
        Answer::No => Err(CliError::Failed(format!(
            "declined at the prompt; approval {id} was not decided"
        ))),
        Answer::Nothing => Err(CliError::Usage(format!(
            "{verb} needs consent: name the approval with --approval {id}, or pass --yes (stdin is not an interactive terminal, or no answer was typed)"
        ))),
    }
}

/// Each committed event of the decision, as a trace line on stderr.
fn trace_to_stderr(event: &Event) {
    let text = view::event_line_with(event, output::stamp_ms);
    // An observer cannot report a failure; the decision is committed.
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// A decision's refusal, by variant.
fn decide_error(e: Error) -> CliError {
    let message = match &e {
        Error::ApprovalChanged { approval, .. } => format!(
            "approval {approval} changed after it was shown; nothing was decided; run the command again to see it as it is now"
        ),
        Error::ApprovalExpired { approval } => {
            format!("approval {approval} is not pending: it expired before it was decided")
        }
        Error::SameApprover { approval, by } => format!(
            "approval {approval} needs two approvers and {by} approved it already; another person must decide it; nothing was decided"
        ),
        Error::RunState { run, status, .. } => format!(
            "run {run} is {status}: an approval can be decided only while its run waits for approval"
        ),
        _ => e.to_string(),
    };
    CliError::Failed(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(e: Error) -> String {
        match decide_error(e) {
            CliError::Failed(m) => m,
            other => panic!("expected a failure, got {other:?}"),
        }
    }

    #[test]
    fn a_changed_approval_says_so_and_asks_for_a_rerun() {
        let m = message(Error::ApprovalChanged {
            approval: "a1".into(),
            shown: "x".into(),
            stored: "y".into(),
        });
        assert!(m.contains("changed after it was shown"), "{m}");
        assert!(m.contains("run the command again"), "{m}");
        assert!(m.contains("nothing was decided"), "{m}");
    }

    #[test]
    fn expiry_and_run_state_are_named() {
        let m = message(Error::ApprovalExpired {
            approval: "a1".into(),
        });
        assert!(m.contains("not pending") && m.contains("expired"), "{m}");
        let m = message(Error::RunState {
            run: "r1".into(),
            status: RunStatus::Cancelled,
            detail: String::new(),
        });
        assert!(m.starts_with("run r1 is CANCELLED"), "{m}");
    }
}
