//! What an event tells an operator: a [`Notice`], built from the log and
//! the approval as it stands when the notice is made.

use agentrt::text::{clip, sanitize};
use agentrt::view::bound_text;
use agentrt::{Approval, ApprovalStatus, Event, EventType, Store, Timestamp};
use serde::{Deserialize, Serialize};

use crate::Pending;

/// Why a notice is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoticeKind {
    /// A run waits for an operator's approval.
    ApprovalRequested,
    /// A side-effecting call was cut short and its outcome is unknown: the
    /// run waits for an operator (an `interrupted_side_effect` approval).
    UnknownOutcome,
    /// A run ended FAILED (when the configuration asks for these).
    RunFailed,
    /// An approval still waits after `remind_after_seconds`.
    Reminder,
}

/// How a failed run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The terminal reason (`limit_exceeded`, `goal_failed`, …).
    #[serde(default)]
    pub reason: String,
    /// What happened, bounded.
    #[serde(default)]
    pub detail: String,
}

/// One notice: what the signed webhook's body carries (with `link` when
/// the page is configured), and what the chat message and the e-mail say.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Notice {
    /// Why it is sent.
    pub kind: NoticeKind,
    /// The same for every delivery of this notice, also after a restart:
    /// `agentrt:<seq>` for the event at `seq`, `agentrt:<seq>:reminder`
    /// for its reminder. A receiver that keeps the keys it saw acts once.
    pub idempotency_key: String,
    /// The event it tells of (a reminder: the request's event).
    pub seq: i64,
    /// The run.
    pub run_id: String,
    /// When the event was recorded.
    pub at: String,
    /// The approval as it stands, bounded (approvals and reminders).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Pending>,
    /// How the run ended (a failed run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<RunEnd>,
}

#[derive(Deserialize)]
struct Requested {
    approval_id: String,
    #[serde(default)]
    reason: String,
}

#[derive(Deserialize)]
struct Finished {
    status: String,
    #[serde(flatten)]
    end: RunEnd,
}

/// What [`notice_for`] needs to know of the configuration.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tell {
    /// Failed runs are told too.
    pub run_failed: bool,
}

/// Whether `event` may call for a notice (without reading the store).
pub(crate) fn may_tell(event: &Event, tell: Tell) -> bool {
    match event.event_type {
        EventType::ApprovalRequested => true,
        EventType::RunFinished => tell.run_failed,
        _ => false,
    }
}

/// The notice `event` calls for, read from `store` at `now`: `None` for
/// an event nobody is told of, and for an approval that was decided (or
/// expired) before its notice was made (a backlog after downtime tells
/// only what still waits).
pub(crate) fn notice_for(
    store: &Store,
    event: &Event,
    tell: Tell,
    now: Timestamp,
) -> agentrt::Result<Option<Notice>> {
    match event.event_type {
        EventType::ApprovalRequested => {
            let Ok(requested) = serde_json::from_str::<Requested>(&event.payload) else {
                return Ok(None);
            };
            let approval = match store.get_approval_capped(&event.run_id, &requested.approval_id) {
                Ok(approval) => approval,
                Err(agentrt::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
            };
            if approval.status != ApprovalStatus::Pending {
                return Ok(None);
            }
            let kind = if approval.kind == agentrt::model::INTERRUPTED_SIDE_EFFECT {
                NoticeKind::UnknownOutcome
            } else {
                NoticeKind::ApprovalRequested
            };
            Ok(Some(Notice {
                kind,
                idempotency_key: format!("agentrt:{}", event.seq),
                seq: event.seq,
                run_id: event.run_id.clone(),
                at: event.at.clone(),
                approval: Some(Pending::new(&approval, &requested.reason, now)),
                run: None,
            }))
        }
        EventType::RunFinished if tell.run_failed => {
            let Ok(finished) = serde_json::from_str::<Finished>(&event.payload) else {
                return Ok(None);
            };
            if finished.status != "FAILED" {
                return Ok(None);
            }
            Ok(Some(Notice {
                kind: NoticeKind::RunFailed,
                idempotency_key: format!("agentrt:{}", event.seq),
                seq: event.seq,
                run_id: event.run_id.clone(),
                at: event.at.clone(),
                approval: None,
                run: Some(RunEnd {
                    reason: clip(&finished.end.reason, 64),
                    detail: bound_text(&finished.end.detail).into_owned(),
                }),
            }))
        }
        _ => Ok(None),
    }
}

/// The reminder of `notice` (an approval's), with the approval as it now
/// stands.
pub(crate) fn reminder(notice: &Notice, approval: &Approval, now: Timestamp) -> Notice {
    let reason = notice
        .approval
        .as_ref()
        .map(|p| p.reason.as_str())
        .unwrap_or_default();
    Notice {
        kind: NoticeKind::Reminder,
        idempotency_key: format!("agentrt:{}:reminder", notice.seq),
        approval: Some(Pending::new(approval, reason, now)),
        ..notice.clone()
    }
}

impl Notice {
    /// One line saying what happened (an e-mail's subject), sanitized.
    pub fn subject(&self) -> String {
        let run = clip(&self.run_id, 80);
        let tool = self
            .approval
            .as_ref()
            .map(|p| agentrt::view::approval_tool(&p.approval))
            .filter(|t| !t.is_empty())
            .map(|t| format!(" ({})", clip(&t, 60)))
            .unwrap_or_default();
        match self.kind {
            NoticeKind::ApprovalRequested => format!("agentrt: run {run} waits for approval{tool}"),
            NoticeKind::UnknownOutcome => {
                format!("agentrt: run {run} waits: a call's outcome is unknown{tool}")
            }
            NoticeKind::RunFailed => format!("agentrt: run {run} failed"),
            NoticeKind::Reminder => format!("agentrt: reminder: run {run} still waits{tool}"),
        }
    }

    /// The plain text: the subject, the approval (the webhook's text
    /// block: bounded, sanitized) or the run's end, the link when given,
    /// and how to decide from a shell. Everything a model or a tool wrote
    /// is in it as sanitized text only.
    pub fn text(&self, link: Option<&Link>) -> String {
        use std::fmt::Write;
        let mut out = self.subject();
        out.push_str("\n\n");
        if let Some(shown) = &self.approval {
            out.push_str(&crate::webhook::approval_text(shown));
        }
        if let Some(end) = &self.run {
            let _ = writeln!(out, "run     {}", sanitize(&self.run_id));
            let _ = writeln!(out, "reason  {}", sanitize(&end.reason));
            let _ = writeln!(out, "detail  {}", sanitize(&end.detail));
        }
        if let Some(link) = link {
            let _ = write!(
                out,
                "\nOpen the approval page (the link signs in once, within {} minutes):\n{}\n",
                link.minutes, link.url
            );
        }
        if let Some(shown) = &self.approval {
            let _ = write!(
                out,
                "\nOr from a shell: agentrt --db DB show {run}, then agentrt --db DB approve {run} --approval {id} (or reject)\n",
                run = sanitize(&self.run_id),
                id = sanitize(&shown.approval.id),
            );
        }
        let _ = write!(out, "\nnotice {}\n", self.idempotency_key);
        out
    }
}

/// A page link put in one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The one-time login link.
    pub url: String,
    /// How long it stays usable.
    pub minutes: u64,
}
