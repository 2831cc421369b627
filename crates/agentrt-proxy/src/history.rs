//! What deciding a call reads of the session's history (design §30),
//! every read bounded, so that planning a call costs the same in a session
//! of ten calls and in one of a hundred thousand:
//!
//! - rules 4–6 read the request's own runs, newest first, from the key
//!   index, and stop at the first that decides (rules 4–5: the first that
//!   refuses, or the first finished before the window; rule 6: the newest
//!   that ran the tool, or that asked about an earlier attempt), at most
//!   [`KEY_RUNS_READ`] runs;
//! - rule 7 reads the session's open rows (those of the tool, for an
//!   unknown outcome; all of them, for `max_pending`), which the proxy keeps
//!   few by settling a row once it sees its run finished with a known
//!   outcome or none;
//! - of each run, its steps, events and approvals are read capped: a run
//!   the proxy began has at most three steps, and one with more rows than
//!   the caps is refused as corrupt rather than judged on part of itself.

use std::time::Duration;

use agentrt::store::RunRecord;
use agentrt::{ApprovalStatus, RunStatus, Store, Timestamp, model::Step, model::ToolFailure};

use crate::index::{self, CallRow};
use crate::key_state::{self, INTERRUPTION};
use crate::repeat::{self, Attempt, Ending, Known, PastRun, ToolRan};
use crate::run_rows::{approvals, records, steps};

/// The newest runs of a request read first: most calls are decided by
/// the newest one or two.
const FIRST_RUNS: u64 = 8;
/// Most runs of one request read: past them, nothing refuses (rules 4–5)
/// and no attempt is unresolved (rule 6). Every run of a request whose
/// last attempt's outcome is unknown asks about it (or runs it), and is
/// decided on its own; only as many consecutive runs that the policy
/// denied outright could hide it.
pub const KEY_RUNS_READ: u64 = 64;

/// Which rules a walk over a request's runs decides.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Rules {
    /// Rules 4–6 for a new call at `now` with the tool's `window`.
    All {
        now: Timestamp,
        window: Duration,
        read_only: bool,
    },
    /// Rule 6 alone (rule 7's look at another request).
    Six,
}

impl Rules {
    /// Whether the runs read so far (newest first) decide every rule asked.
    fn decided(&self, past: &[PastRun]) -> bool {
        let six = past.iter().any(|p| p.tool != ToolRan::No);
        match *self {
            Rules::Six => six,
            Rules::All {
                now,
                window,
                read_only,
            } => {
                // The runs of a request follow one another (a run begins
                // only after the previous one finished), so once one
                // finished before the window, every older one did.
                let four_five = window.is_zero()
                    || repeat::judge(past, now, window, read_only).is_some()
                    || past
                        .last()
                        .is_some_and(|p| p.finished_at.add(window) <= now);
                four_five && (read_only || six)
            }
        }
    }
}

/// The finished runs of (`session`, `key`), newest first, as rules 4–6 see
/// them: read until they decide `rules`, at most [`KEY_RUNS_READ`]. Each
/// round is two reads (the key's newest index rows, then the records of
/// those not read yet, whole); most calls are decided by the first round,
/// which reads the newest run alone.
pub(crate) fn past_runs(
    store: &Store,
    session: &str,
    key: &str,
    rules: Rules,
) -> agentrt::Result<Vec<PastRun>> {
    let mut past = Vec::new();
    let mut read = 0;
    for limit in [1, FIRST_RUNS, KEY_RUNS_READ] {
        let rows = index::newest_key_rows(store, session, key, limit)?;
        let fetched = rows.len();
        let unread: Vec<&str> = rows.iter().skip(read).map(|r| r.run_id.as_str()).collect();
        read = fetched;
        for record in records(store, &unread)? {
            if let Some(run) = past_run(&record) {
                past.push(run);
                if rules.decided(&past) {
                    return Ok(past);
                }
            }
        }
        if u64::try_from(fetched).unwrap_or(u64::MAX) < limit {
            break;
        }
    }
    Ok(past)
}

/// A run as rules 4–6 see it, if it finished.
fn past_run(record: &RunRecord) -> Option<PastRun> {
    let run = &record.run;
    let finished_at = run.finished_at?;
    let approvals = &record.approvals;
    let latest = approvals.last();
    use agentrt::TerminalReason as R;
    let ending = match run.reason {
        Some(R::ApprovalRejected) => Ending::Rejected {
            note: latest.map(|a| a.note.clone()).unwrap_or_default(),
        },
        Some(R::OperatorCancelled) => Ending::Cancelled,
        Some(R::ApprovalExpired) => match latest {
            Some(a) => Ending::Expired {
                interruption: a.kind == INTERRUPTION,
                approval_id: a.id.clone(),
            },
            None => Ending::Other,
        },
        _ => Ending::Other,
    };
    let mut tool = run_tool_ran(record);
    if tool == ToolRan::No {
        // A run that did not run the tool but asked about an earlier
        // attempt (rules 6 and 7 ask in a fresh run) leaves that attempt
        // unresolved: rule 6 needs read no further back. (No known outcome
        // came between: the run was begun because there was none.)
        if let Some(attempt) = crate::policy::named_in(approvals) {
            tool = ToolRan::Unknown(attempt);
        }
    }
    Some(PastRun {
        finished_at,
        ending,
        tool,
    })
}

/// What the tool of a run did, from its record.
fn run_tool_ran(record: &RunRecord) -> ToolRan {
    let steps_with = |kind: agentrt::EventType| -> Vec<String> {
        record
            .events
            .iter()
            .filter(|e| e.event_type == kind)
            .map(|e| e.step_id.clone())
            .collect()
    };
    let started = steps_with(agentrt::EventType::StepToolStarted);
    let cut = steps_with(agentrt::EventType::StepInterrupted);
    let asked: Vec<String> = record
        .approvals
        .iter()
        .filter(|a| a.kind == INTERRUPTION)
        .map(|a| a.step_id.clone())
        .collect();
    tool_ran(
        &record.run.id,
        &record.steps,
        &StepMarks {
            started: &started,
            asked: &asked,
            cut: &cut,
        },
    )
}

/// Which steps of a run their events and approvals mark.
struct StepMarks<'a> {
    /// Their tool started.
    started: &'a [String],
    /// An operator was asked about an unknown outcome of theirs.
    asked: &'a [String],
    /// They were cut off (their run taken over while they executed).
    cut: &'a [String],
}

/// What a run's tool did, from its steps: the last step that called it
/// decides. A step whose tool started and that an operator was asked
/// about (an interruption) made an attempt whose outcome is unknown,
/// whatever the question's answer wrote over its observation: cut off if
/// its run was taken over while it executed, else no answer.
fn tool_ran(run_id: &str, steps: &[Step], marks: &StepMarks<'_>) -> ToolRan {
    use agentrt::model::ObservationKind as K;
    for step in steps.iter().rev() {
        let Some(observation) = &step.observation else {
            continue;
        };
        let unknown = |ended: &'static str| {
            ToolRan::Unknown(Attempt {
                run_id: run_id.to_owned(),
                step_id: step.id.clone(),
                started_at: step.started_at.to_string(),
                ended,
            })
        };
        match observation.kind {
            K::ToolResult => return ToolRan::Known(Known::Succeeded),
            K::ToolError => {
                return match observation.tool_failure() {
                    Some(ToolFailure::InvalidContent) => ToolRan::Known(Known::Unrecorded),
                    // Timed out, no answer, cut short: not known.
                    Some(ToolFailure::Timeout) => unknown("timed_out"),
                    Some(ToolFailure::UnknownOutcome) => unknown("no_answer"),
                    Some(ToolFailure::Cancelled) => unknown("cut_off"),
                    Some(ToolFailure::Failed | ToolFailure::Abort) | None => {
                        ToolRan::Known(Known::ServerError)
                    }
                };
            }
            K::Interrupted => return unknown("cut_off"),
            K::PolicyDenied | K::InvalidDecision => {
                if marks.started.contains(&step.id) && marks.asked.contains(&step.id) {
                    return unknown(if marks.cut.contains(&step.id) {
                        "cut_off"
                    } else {
                        "no_answer"
                    });
                }
            }
        }
    }
    ToolRan::No
}

/// Where an unknown outcome of another request to a tool stands.
pub(crate) enum Unresolved {
    /// An operator is asked about it: this approval.
    Asked(String),
    /// A run of the tool was left running by a dead proxy.
    Abandoned(String),
    /// Nobody is asked about it.
    NobodyAsked(Box<AskAgain>),
}

/// What asking again about an unknown outcome needs.
pub(crate) struct AskAgain {
    /// The request's key.
    pub(crate) key: String,
    /// The key's finished run, closed when the new one begins.
    pub(crate) previous: String,
    /// The attempt asked about.
    pub(crate) attempt: Attempt,
    /// The recorded request's arguments (canonical).
    pub(crate) args: Vec<u8>,
}

/// What rule 7's look at the session's open rows found, and the rows it
/// saw settled (their runs finished, their requests' last attempts known
/// or none), which the next run's first write group closes.
pub(crate) struct Looked<T> {
    /// What was found.
    pub(crate) found: T,
    /// The runs whose rows settled.
    pub(crate) settled: Vec<String>,
}

/// Rule 7's look at the other requests (not `own_key`) to `tool` in
/// `session`: the first open row whose outcome is unknown, with where it
/// stands. A question an operator approved settles it (the re-run waits
/// for its call); one rejected or expired does not.
///
/// Rows of `known` (runs this process saw settle) are skipped unread.
pub(crate) fn unresolved(
    store: &Store,
    session: &str,
    tool: &str,
    own_key: Option<&str>,
    known: &[String],
) -> agentrt::Result<Looked<Option<Unresolved>>> {
    let now = Timestamp::now();
    let mut settled = Vec::new();
    let mut found = None;
    for row in index::open_rows(store, session, Some(tool))? {
        if Some(row.request_key.as_str()) == own_key || known.contains(&row.run_id) {
            continue;
        }
        let run = store.get_run(&row.run_id)?;
        match run.status {
            RunStatus::WaitingForApproval => {
                let question = approvals(store, &row.run_id)?
                    .into_iter()
                    .find(|a| a.kind == INTERRUPTION && a.status == ApprovalStatus::Pending);
                if let Some(question) = question {
                    found = Some(Unresolved::Asked(question.id));
                    break;
                }
            }
            RunStatus::Running => {
                if key_state::lease_expired(store, &row.run_id, now)? {
                    found = Some(Unresolved::Abandoned(row.run_id));
                    break;
                }
            }
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled => {
                match nobody_asked(store, session, &row)? {
                    Some(again) => {
                        found = Some(Unresolved::NobodyAsked(Box::new(again)));
                        break;
                    }
                    None => settled.push(row.run_id),
                }
            }
        }
    }
    Ok(Looked { found, settled })
}

/// The key of `row` (its run finished) if its last attempt's outcome is
/// unknown: newest run first, the first whose tool ran (or that asked
/// about an attempt) decides.
fn nobody_asked(store: &Store, session: &str, row: &CallRow) -> agentrt::Result<Option<AskAgain>> {
    let past = past_runs(store, session, &row.request_key, Rules::Six)?;
    let Some(attempt) = repeat::unknown_attempt(&past) else {
        return Ok(None);
    };
    let step = steps(store, &attempt.run_id)?
        .into_iter()
        .find(|s| s.id == attempt.step_id);
    let Some(args) = step.and_then(|s| s.decision).and_then(|d| d.args) else {
        return Ok(None);
    };
    Ok(Some(AskAgain {
        key: row.request_key.clone(),
        previous: row.run_id.clone(),
        attempt,
        args: args.as_str().as_bytes().to_vec(),
    }))
}

/// How many approvals of `session`'s runs wait for an operator (read from
/// the open rows: a waiting run's row is open). Rows of read-only tools
/// whose runs finished are settled on the way (reads are never unknown);
/// rows of `known` (runs this process saw settle) are skipped unread.
pub(crate) fn waiting_approvals(
    store: &Store,
    session: &str,
    known: &[String],
) -> agentrt::Result<Looked<u64>> {
    let mut waiting = 0;
    let mut settled = Vec::new();
    for row in index::open_rows(store, session, None)? {
        if known.contains(&row.run_id) {
            continue;
        }
        let run = store.get_run(&row.run_id)?;
        match run.status {
            RunStatus::WaitingForApproval => {
                let pending = approvals(store, &run.id)?
                    .iter()
                    .any(|a| a.status == ApprovalStatus::Pending);
                if pending {
                    waiting += 1;
                }
            }
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
                if row.side_effect == agentrt::SideEffect::ReadOnly.as_str() =>
            {
                settled.push(row.run_id);
            }
            _ => {}
        }
    }
    Ok(Looked {
        found: waiting,
        settled,
    })
}

#[cfg(test)]
mod tests {
    use agentrt::model::{Observation, ObservationKind, StepStatus};

    use super::*;

    fn failed_with(failure: &str) -> Step {
        Step {
            id: "s1".into(),
            run_id: "r1".into(),
            index: 0,
            status: StepStatus::Failed,
            decision: None,
            policy: None,
            observation: Some(Observation::runtime(
                ObservationKind::ToolError,
                &[("tool", "read"), ("failure", failure)],
                "read failed",
            )),
            started_at: Timestamp::from_unix_nanos(0),
            finished_at: None,
            spec_hash: String::new(),
            policy_id: String::new(),
            decode_error: None,
        }
    }

    /// A read-only tool's failure (a `tool_error`) is judged by the
    /// runtime's recorded word: timed out, no answer and cancelled leave
    /// the outcome unknown; bad content was an answer not recorded; a
    /// reported error or a word not known is the server's error.
    #[test]
    fn a_tool_error_is_judged_by_its_recorded_failure() {
        let marks = StepMarks {
            started: &[],
            asked: &[],
            cut: &[],
        };
        let ended = |failure: &str| match tool_ran("r1", &[failed_with(failure)], &marks) {
            ToolRan::Unknown(attempt) => Ok(attempt.ended),
            ToolRan::Known(known) => Err(known),
            ToolRan::No => panic!("the tool ran"),
        };
        assert_eq!(ended("timeout"), Ok("timed_out"));
        assert_eq!(ended("unknown_outcome"), Ok("no_answer"));
        assert_eq!(ended("cancelled"), Ok("cut_off"));
        assert_eq!(ended("invalid_content"), Err(Known::Unrecorded));
        assert_eq!(ended("error"), Err(Known::ServerError));
        assert_eq!(ended("abort"), Err(Known::ServerError));
        assert_eq!(ended("melted"), Err(Known::ServerError));
    }
}
