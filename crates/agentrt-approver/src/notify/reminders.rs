//! The approvals that will be reminded of: each pending approval told,
//! with when its reminder is due; rebuilt from the database at start.

use std::collections::HashMap;
use std::time::Duration;

use agentrt::{Event, EventType, RunStatus, Store, Timestamp};
use serde::Deserialize;

use super::notice::{Notice, Tell, notice_for};

/// Runs read at a time while rebuilding.
const RUN_PAGE: u64 = 500;
/// The newest runs looked at while rebuilding: waiting runs older than
/// these are not reminded of after a restart.
const MAX_RUNS_SCANNED: u64 = 10_000;
/// Events of one run read at a time while finding an approval's request.
const EVENT_PAGE: u64 = 500;

/// Pending approvals by id: when each is due, and its notice.
#[derive(Debug, Default)]
pub(crate) struct Reminders {
    waiting: HashMap<String, (Timestamp, Notice)>,
}

#[derive(Deserialize)]
struct Decided {
    approval_id: String,
}

impl Reminders {
    /// Remembers `notice` (an approval's) to remind of `wait` after the
    /// approval was requested.
    pub fn add(&mut self, notice: Notice, wait: Duration) {
        let Some(shown) = &notice.approval else {
            return;
        };
        let due = shown.approval.created_at.add(wait);
        self.waiting
            .insert(shown.approval.id.clone(), (due, notice));
    }

    /// Forgets what `event` settles: a decided approval, a finished run's.
    pub fn forget(&mut self, event: &Event) {
        match event.event_type {
            EventType::ApprovalDecided => {
                if let Ok(decided) = serde_json::from_str::<Decided>(&event.payload) {
                    self.waiting.remove(&decided.approval_id);
                }
            }
            EventType::RunFinished => self.waiting.retain(|_, (_, n)| n.run_id != event.run_id),
            _ => {}
        }
    }

    /// The earliest due time.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.waiting.values().map(|(due, _)| *due).min()
    }

    /// The notices due at `now`, oldest first, forgotten here (each is
    /// reminded of once).
    pub fn take_due(&mut self, now: Timestamp) -> Vec<Notice> {
        let mut due: Vec<(Timestamp, Notice)> = Vec::new();
        self.waiting.retain(|_, (at, notice)| {
            if *at <= now {
                due.push((*at, notice.clone()));
                false
            } else {
                true
            }
        });
        due.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.seq.cmp(&b.1.seq)));
        due.into_iter().map(|(_, n)| n).collect()
    }

    /// The pending approvals of the newest runs that wait for approval,
    /// each with the notice of its request (found in the run's events).
    pub fn rebuild(store: &Store, wait: Duration, now: Timestamp) -> agentrt::Result<Reminders> {
        let mut reminders = Reminders::default();
        let mut offset = 0;
        while offset < MAX_RUNS_SCANNED {
            let page = store.runs_page_capped(RUN_PAGE, offset)?;
            for run in page
                .items
                .iter()
                .filter(|r| r.status == RunStatus::WaitingForApproval)
            {
                let pending = store.pending_approvals_page_capped(&run.id, 0, 0)?;
                let mut ids: Vec<&str> = pending.items.iter().map(|a| a.id.as_str()).collect();
                let mut after = 0;
                while !ids.is_empty() {
                    let events = store.events_after_capped(Some(&run.id), after, EVENT_PAGE)?;
                    for event in &events {
                        after = event.seq;
                        if event.event_type != EventType::ApprovalRequested {
                            continue;
                        }
                        let tell = Tell { run_failed: false };
                        if let Some(notice) = notice_for(store, event, tell, now)? {
                            let id = notice.approval.as_ref().map(|p| p.approval.id.clone());
                            if let Some(id) = id {
                                ids.retain(|i| *i != id);
                                reminders.add(notice, wait);
                            }
                        }
                    }
                    if (events.len() as u64) < EVENT_PAGE {
                        break;
                    }
                }
            }
            offset += page.items.len() as u64;
            if (page.items.len() as u64) < RUN_PAGE {
                break;
            }
        }
        Ok(reminders)
    }
}
