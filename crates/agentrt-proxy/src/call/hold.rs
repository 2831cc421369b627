//! Holding a call on an approval until it is decided, the hold runs out,
//! the host gives up or the proxy stops; collecting a granted approval by
//! attaching to its run (the policy asked again, the recorded request run).

use std::time::Duration;

use agentrt::operator::Awaited;

use super::{Next, Proxy};
use crate::answer::{self, Answer};
use crate::caller::Caller;
use crate::key_state::INTERRUPTION;

/// How often a held call with a progress token is told it still waits.
pub(super) const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A call's hold: how long it may wait in all, from when it began.
pub(super) struct Hold {
    total: Duration,
    began: tokio::time::Instant,
}

impl Hold {
    pub(super) fn new(total: Duration) -> Hold {
        Hold {
            total,
            began: tokio::time::Instant::now(),
        }
    }

    pub(super) fn waited(&self) -> Duration {
        self.began.elapsed()
    }

    pub(super) fn left(&self) -> Duration {
        self.total.saturating_sub(self.waited())
    }
}

/// How a hold ended.
pub(super) enum Held {
    /// With this answer.
    Answered(Answer),
    /// The approval lapsed (this answer if the call is not decided again).
    Lapsed(Answer),
}

impl Proxy {
    /// Holds the call on approval `approval_id` of `run_id` until `hold`
    /// runs out, the host gives up or the proxy stops, telling the host
    /// its progress about once a second; an approval decided in time is
    /// collected (the policy asked again, the recorded request run).
    pub(super) async fn hold(
        &self,
        run_id: &str,
        approval_id: &str,
        interruption: bool,
        hold: &Hold,
        caller: &mut Caller,
    ) -> Held {
        let mut waiting_for = approval_id.to_owned();
        let mut interruption = interruption;
        loop {
            let left = hold.left();
            // With a progress token the wait is cut in seconds, each
            // still woken by the decision's commit (no polling).
            let slice = if caller.progress.is_some() {
                left.min(PROGRESS_EVERY)
            } else {
                left
            };
            let waited = tokio::select! {
                waited = self.operator.wait_for_decision(run_id, &waiting_for, slice) => waited,
                // Nobody waits for the answer any more: the hold ends as
                // if it ran out (the approval still waits).
                () = caller.given_up() => return held_out(&waiting_for, interruption),
                () = self.flights.stopping() => return held_out(&waiting_for, interruption),
            };
            return match waited {
                Ok(Awaited::Approved(_)) => match self.attach_once(run_id).await {
                    Next::Done(answer) => Held::Answered(answer),
                    // Attaching never begins a run.
                    Next::Again => Held::Answered(answer::unavailable(false)),
                    // The policy asked again for another approval.
                    Next::Hold {
                        approval_id,
                        interruption: asks_again,
                        ..
                    } => {
                        waiting_for = approval_id;
                        interruption = asks_again;
                        continue;
                    }
                },
                Ok(Awaited::Rejected(a)) => {
                    let until = a
                        .decided_at
                        .map(|t| t.add(self.config.repeat_window))
                        .filter(|_| !self.config.repeat_window.is_zero());
                    Held::Answered(answer::rejected(&a.note, until))
                }
                Ok(Awaited::Expired(a)) => Held::Lapsed(answer::expired(&a.id)),
                Ok(Awaited::Superseded { latest, .. }) => {
                    waiting_for = latest.id.clone();
                    interruption = latest.kind == INTERRUPTION;
                    continue;
                }
                Ok(Awaited::RunEnded(_)) => Held::Answered(answer::cancelled(None)),
                // A slice ran out, not the hold.
                Ok(Awaited::TimedOut) if slice < left => {
                    if let Some(progress) = &caller.progress {
                        progress(hold.waited().as_secs(), hold.total.as_secs()).await;
                    }
                    continue;
                }
                Ok(Awaited::TimedOut) => held_out(&waiting_for, interruption),
                Ok(_) | Err(_) => Held::Answered(answer::unavailable(false)),
            };
        }
    }

    /// Attaches to a run whose approval was granted: the policy is asked
    /// again, and the recorded request (never this call's bytes) runs;
    /// or the approval the policy now asks for.
    pub(super) async fn attach_once(&self, run_id: &str) -> Next {
        // Rule 6's fact for a re-run asked before this process started:
        // the policy asked again must see the attempt its question named.
        let known = self.reruns.lock().is_ok_and(|r| r.contains_key(run_id));
        if !known {
            let id = run_id.to_owned();
            match self
                .off_executor(move |store| crate::policy::named_attempt(store, &id))
                .await
            {
                Ok(Some(attempt)) => {
                    if let Ok(mut reruns) = self.reruns.lock() {
                        reruns.insert(run_id.to_owned(), attempt);
                    }
                }
                Ok(None) => {}
                Err(_) => return Next::Done(answer::unavailable(false)),
            }
        }
        let (mut session, verdict) = match self.gate.attach(run_id).await {
            Ok(attached) => attached,
            Err(agentrt::Error::RunLeased { .. }) => return Next::Done(answer::in_progress()),
            Err(_) => return Next::Done(answer::unavailable(false)),
        };
        let next = self.after_verdict(&mut session, verdict).await;
        let _ = session.close().await;
        next.unwrap_or_else(|_| Next::Done(answer::unavailable(true)))
    }
}

/// The answer of a hold that ran out on approval `approval_id`.
pub(super) fn held_out(approval_id: &str, interruption: bool) -> Held {
    Held::Answered(if interruption {
        answer::interrupted(approval_id)
    } else {
        answer::pending(approval_id)
    })
}
