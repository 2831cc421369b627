//! The status tool (design §32): what the session's requests wait for,
//! or what became of one approval, read from the store only. It never
//! executes, decides or writes anything, and is never a run.

use std::time::Duration;

use agentrt::{ApprovalStatus, Canonical, Run, RunStatus, Store, Timestamp};

use crate::answer::{Answer, quote};
use crate::index::{self, CallRow};
use crate::oauth::{ISSUER_LABEL, Identity, SUBJECT_LABEL};

/// The most index rows read.
const MAX_ROWS: u64 = 200;
/// How far back an approval is known.
const RECENT: Duration = Duration::from_secs(3600);

/// The status tool's input schema.
pub const STATUS_SCHEMA: &str = r#"{"additionalProperties":false,"properties":{"approval_id":{"description":"An approval id from an earlier answer","type":"string"}},"type":"object"}"#;

/// The status tool's description.
pub const STATUS_DESCRIPTION: &str = "Says which of this session's requests wait for an operator's approval, or, given an approval_id, what became of that request. It never runs anything.";

/// The approval id the status tool was asked about, from its raw
/// arguments; `Err` with the problem for anything but `{}` or
/// `{"approval_id": "…"}`.
pub fn asked_id(args: Option<&[u8]>) -> Result<Option<String>, String> {
    let bytes = args.unwrap_or(b"{}");
    let canonical = Canonical::parse(bytes).map_err(|e| e.to_string())?;
    let members =
        agentrt::json::object_members(&canonical).ok_or("the arguments are not a JSON object")?;
    let mut id = None;
    for (key, value) in members {
        if key != "approval_id" {
            return Err(format!(
                "unknown argument {key:?}: only approval_id is taken"
            ));
        }
        let text: String = serde_json::from_str(value.as_str())
            .map_err(|_| "approval_id is not a string".to_owned())?;
        id = Some(text);
    }
    Ok(id)
}

fn age(since: Timestamp, now: Timestamp) -> String {
    let secs = now.millis_since(&since) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        _ => format!("{}h{}m", secs / 3600, secs % 3600 / 60),
    }
}

/// Whether `run` was begun by `caller` (any run, when the caller is not
/// known: the stdio host and the token file's holder are the operator's
/// own host).
fn callers(run: &Run, caller: Option<&Identity>) -> bool {
    caller.is_none_or(|who| {
        run.labels.get(ISSUER_LABEL) == Some(who.issuer.as_str())
            && run.labels.get(SUBJECT_LABEL) == Some(who.subject.as_str())
    })
}

/// The answer of the status tool for `session` at `now`; with a `caller`
/// (an OAuth token's), only that caller's requests are told of.
pub fn status(
    store: &Store,
    session: &str,
    asked: Option<&str>,
    now: Timestamp,
    caller: Option<&Identity>,
) -> agentrt::Result<Answer> {
    let text = match asked {
        None => waiting(
            store,
            &index::newest_open_rows(store, session, MAX_ROWS)?,
            now,
            caller,
        )?,
        Some(id) => about(store, &recent_rows(store, session, now)?, id, now, caller)?,
    };
    Ok(Answer::Prose {
        text: format!("GATE_STATUS: {text}"),
        is_error: false,
    })
}

/// The session's rows the status tool reads (design §32): those unsettled (open)
/// or settled within the last hour, newest first, at most [`MAX_ROWS`].
/// Open rows come first: they are the ones whose requests may still wait.
fn recent_rows(store: &Store, session: &str, now: Timestamp) -> agentrt::Result<Vec<CallRow>> {
    let mut rows = index::newest_open_rows(store, session, MAX_ROWS)?;
    let room = MAX_ROWS.saturating_sub(rows.len() as u64);
    if room > 0 {
        let recent = i128::try_from(RECENT.as_nanos()).unwrap_or(i128::MAX);
        let since = Timestamp::from_unix_nanos(now.as_unix_nanos().saturating_sub(recent));
        rows.extend(index::closed_since(store, session, since, room)?);
    }
    Ok(rows)
}

/// The waiting approvals of the requests of `open` (the session's newest
/// open rows: a request that waits has its row open).
fn waiting(
    store: &Store,
    open: &[CallRow],
    now: Timestamp,
    caller: Option<&Identity>,
) -> agentrt::Result<String> {
    let mut lines = Vec::new();
    for row in open {
        let run = store.get_run(&row.run_id)?;
        if run.status != RunStatus::WaitingForApproval || !callers(&run, caller) {
            continue;
        }
        for approval in crate::run_rows::approvals(store, &run.id)? {
            if approval.status != ApprovalStatus::Pending {
                continue;
            }
            let args = crate::run_rows::steps(store, &run.id)?
                .iter()
                .find(|s| s.id == approval.step_id)
                .and_then(|s| s.decision.as_ref())
                .and_then(|d| d.args.as_ref())
                .map(|a| a.as_str().to_owned())
                .unwrap_or_default();
            lines.push(format!(
                "- approval {}: {} {} (waiting {})",
                approval.id,
                quote(&row.tool, 200),
                quote(&args, 200),
                age(approval.created_at, now)
            ));
        }
    }
    let mut text = match lines.len() {
        0 => "no request in this session is waiting for an operator's approval.".to_owned(),
        1 => format!(
            "1 request of this session waits for an operator's approval:\n{}",
            lines[0]
        ),
        n => format!(
            "{n} requests of this session wait for an operator's approval:\n{}",
            lines.join("\n")
        ),
    };
    if open.len() as u64 >= MAX_ROWS {
        text.push_str(&format!(
            "\nOnly the {MAX_ROWS} most recent unsettled requests were read; older ones may wait too."
        ));
    }
    Ok(text)
}

fn about(
    store: &Store,
    rows: &[CallRow],
    id: &str,
    now: Timestamp,
    caller: Option<&Identity>,
) -> agentrt::Result<String> {
    let unknown = format!(
        "no approval {} is known in this session from the last hour.",
        quote(id, 200)
    );
    for row in rows {
        let approvals = crate::run_rows::approvals(store, &row.run_id)?;
        let Some(position) = approvals.iter().position(|a| a.id == id) else {
            continue;
        };
        let approval = &approvals[position];
        if now.millis_since(&approval.created_at) > RECENT.as_millis() as u64 {
            return Ok(unknown);
        }
        let run = store.get_run(&row.run_id)?;
        // Another caller's approval is as unknown as one never made.
        if !callers(&run, caller) {
            return Ok(unknown);
        }
        let id = quote(id, 200);
        let later = approvals.get(position + 1);
        return Ok(match approval.status {
            ApprovalStatus::Pending if approval.kind == "interrupted_side_effect" => format!(
                "approval {id} asks an operator whether an attempt whose outcome is unknown may run again; it waits."
            ),
            ApprovalStatus::Pending => {
                format!("approval {id} waits for an operator's decision.")
            }
            ApprovalStatus::Rejected => format!(
                "approval {id} was rejected by an operator{}.",
                if approval.note.is_empty() {
                    String::new()
                } else {
                    format!(" with the note \"{}\"", quote(&approval.note, 500))
                }
            ),
            ApprovalStatus::Expired => {
                format!("approval {id} expired without a decision.")
            }
            ApprovalStatus::Edited => format!(
                "approval {id} was edited by an operator: approval {} binds the edited request.",
                later
                    .map(|next| next.id.as_str())
                    .unwrap_or("(not recorded)")
            ),
            ApprovalStatus::Approved => match (later, run.status) {
                (Some(next), _) => format!(
                    "approval {id} was approved, then superseded by approval {}.",
                    next.id
                ),
                (None, RunStatus::WaitingForApproval) => format!(
                    "approval {id} was approved and awaits collection: call the same tool again with exactly the same arguments."
                ),
                (None, RunStatus::Running) => {
                    format!("approval {id} was approved and its request is executing now.")
                }
                (None, RunStatus::Completed) => {
                    format!("approval {id} was approved and its request ran and succeeded.")
                }
                (None, _) => format!(
                    "approval {id} was approved but its request did not run to a result ({}).",
                    quote(run.reason.map(|r| r.as_str()).unwrap_or("ended"), 200)
                ),
            },
        });
    }
    Ok(unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_tool_takes_only_an_optional_approval_id() {
        assert_eq!(asked_id(None), Ok(None));
        assert_eq!(asked_id(Some(b"{}")), Ok(None));
        assert_eq!(
            asked_id(Some(br#"{"approval_id":"a1"}"#)),
            Ok(Some("a1".to_owned()))
        );
        assert!(asked_id(Some(br#"{"approval_id":1}"#)).is_err());
        assert!(asked_id(Some(br#"{"id":"a1"}"#)).is_err());
        assert!(asked_id(Some(b"[]")).is_err());
    }

    #[test]
    fn ages_read_like_people_write_them() {
        let t = Timestamp::parse("2026-12-01T09:00:00Z").unwrap();
        assert_eq!(age(t, t.add(Duration::from_secs(42))), "42s");
        assert_eq!(age(t, t.add(Duration::from_secs(125))), "2m");
        assert_eq!(age(t, t.add(Duration::from_secs(3725))), "1h2m");
    }
}
