//! Planning a call under the deciding mutex: rules 1–2 on the request's
//! own runs, a takeover of a dead proxy's run (rule 3), rules 4–5's
//! refusals, rule 6's unknown attempt and rule 7's blocks, else a new run.

use std::time::Duration;

use agentrt::{Decision, Timestamp, ToolSpec, VerdictOutcome, model::Origin};

use super::{Claiming, Plan, Proxy, Unavailable, end_run};
use crate::answer::{self, Answer};
use crate::caller::Asker;
use crate::history::{self, AskAgain, Unresolved};
use crate::key_state::{self, OnCall};
use crate::repeat::{self, Refusal};

/// What a takeover leaves.
pub(super) enum TakenOver {
    /// The run ended: the call goes on to a new run.
    Ended,
    /// The call is answered by this plan.
    Paused(Plan),
}

/// The most runs rule 7 takes over before one call is answered.
pub(super) const TAKEOVER_ROUNDS: usize = 8;

impl Proxy {
    /// Decides what a call of `spec` with request `key` does (rules 1–2,
    /// else a new run), under the deciding mutex.
    pub(super) async fn plan(&self, spec: &ToolSpec, key: Option<&str>, asker: Asker<'_>) -> Plan {
        // A request this process has not seen, to a tool no cross-call
        // rule reads other rows for, begins its run at once: its first
        // write group checks that the key has no row at all, which is
        // what rules 1–6 would have read.
        if let Some(key) = key
            && self.only_own_rows(spec)
            && self.seen.first_time(key)
        {
            return self
                .begin(spec, Some(key), Claiming::New, asker, None, Vec::new())
                .await;
        }
        let now = Timestamp::now();
        let read_only = spec.side_effect == agentrt::SideEffect::ReadOnly;
        let rules = history::Rules::All {
            now,
            window: self.window(&spec.name),
            read_only,
        };
        // One trip off the executor: the key's state and, when a new run
        // may begin, its earlier runs (rules 4–6).
        let session = self.config.session.clone();
        let read = match key {
            None => Ok((OnCall::NewRun { previous: None }, None)),
            Some(key) => {
                let key = key.to_owned();
                self.off_executor(move |store| {
                    let facts = key_state::read(store, &session, &key, now)?;
                    let on_call = key_state::on_call(key_state::classify(facts));
                    let past = match on_call {
                        OnCall::NewRun { .. } => {
                            Some(history::past_runs(store, &session, &key, rules)?)
                        }
                        _ => None,
                    };
                    Ok((on_call, past))
                })
                .await
            }
        };
        let Ok((on_call, past)) = read else {
            return Plan::Unavailable;
        };
        let previous = match on_call {
            OnCall::Hold {
                run_id,
                approval_id,
                interruption,
            } => {
                return Plan::Hold {
                    run_id,
                    approval_id,
                    interruption,
                };
            }
            OnCall::Collect { run_id } => return Plan::Attach { run_id },
            OnCall::InProgress => return Plan::InProgress,
            OnCall::TakeOver { run_id } => match self.take_over(&run_id, &spec.name).await {
                TakenOver::Ended => Some(run_id),
                TakenOver::Paused(plan) => return plan,
            },
            OnCall::NewRun { previous } => previous,
        };
        let mut rerun = None;
        if let Some(key) = key {
            let past = match past {
                Some(past) => past,
                // After a takeover: read now.
                None => {
                    let (session, key) = (self.config.session.clone(), key.to_owned());
                    match self
                        .off_executor(move |store| history::past_runs(store, &session, &key, rules))
                        .await
                    {
                        Ok(past) => past,
                        Err(_) => return Plan::Unavailable,
                    }
                }
            };
            let window = self.window(&spec.name);
            if let Some(refusal) = repeat::judge(&past, now, window, read_only) {
                return Plan::Refused(refused(refusal));
            }
            if !read_only {
                rerun = repeat::unknown_attempt(&past);
            }
        }
        // Rows rule 7 saw settled, closed by the new run's first write.
        let mut settled = Vec::new();
        // Rule 7: while another request to the same tool has an unknown
        // outcome, a change is blocked, naming the question about it.
        if !read_only {
            match self.unknown_on_tool(spec, key, &mut settled).await {
                Ok(Some(approval_id)) => {
                    return Plan::Refused(answer::blocked_by_unknown(&approval_id));
                }
                Ok(None) => {}
                Err(Unavailable) => return Plan::Unavailable,
            }
        }
        // Rule 7: a call that will ask for an approval while the session
        // has `max_pending` waiting is blocked without asking.
        if self.asks_approval(spec) {
            let session = self.config.session.clone();
            let known = self.settled.listed();
            let waiting = self
                .off_executor(move |store| history::waiting_approvals(store, &session, &known))
                .await;
            match waiting {
                Ok(looked) if looked.found >= u64::from(self.config.max_pending) => {
                    return Plan::Refused(answer::blocked_by_pending(looked.found));
                }
                Ok(looked) => settled.extend(looked.settled),
                Err(_) => return Plan::Unavailable,
            }
        }
        self.begin(spec, key, Claiming::After(previous), asker, rerun, settled)
            .await
    }

    /// Whether deciding a call of `spec` reads only its own request's
    /// rows: a read-only tool (rule 7's unknown outcomes are about
    /// changes) whose calls ask no approval (rule 7's `max_pending`).
    pub(super) fn only_own_rows(&self, spec: &ToolSpec) -> bool {
        spec.side_effect == agentrt::SideEffect::ReadOnly && !self.asks_approval(spec)
    }

    /// Rule 7: the question an operator is asked about another request to
    /// `spec`'s tool whose outcome is unknown. If nothing waits about it
    /// (the question expired or was rejected, the step limit, a crash
    /// before asking) it is asked again in a fresh run first, so a tool is
    /// never blocked with nothing to act on; runs of the tool left behind
    /// by a dead proxy are taken over first.
    pub(super) async fn unknown_on_tool(
        &self,
        spec: &ToolSpec,
        own_key: Option<&str>,
        settled: &mut Vec<String>,
    ) -> Result<Option<String>, Unavailable> {
        // A takeover that ends a run can uncover the next one; each round
        // settles one row, and the rows are few.
        for _ in 0..TAKEOVER_ROUNDS {
            let session = self.config.session.clone();
            let (tool, own) = (spec.name.clone(), own_key.map(str::to_owned));
            let known = self.settled.listed();
            let looked = self
                .off_executor(move |store| {
                    history::unresolved(store, &session, &tool, own.as_deref(), &known)
                })
                .await
                .map_err(|_| Unavailable)?;
            settled.extend(looked.settled);
            match looked.found {
                None => return Ok(None),
                Some(Unresolved::Asked(approval_id)) => return Ok(Some(approval_id)),
                Some(Unresolved::Abandoned(run_id)) => {
                    match self.take_over(&run_id, &spec.name).await {
                        TakenOver::Paused(Plan::Interrupted(approval_id)) => {
                            return Ok(Some(approval_id));
                        }
                        // Ended, or another proxy took it first.
                        TakenOver::Ended | TakenOver::Paused(Plan::InProgress) => {}
                        TakenOver::Paused(_) => return Err(Unavailable),
                    }
                }
                Some(Unresolved::NobodyAsked(again)) => {
                    return self.ask_again(spec, *again).await.map(Some);
                }
            }
        }
        Err(Unavailable)
    }

    /// Asks again, in a fresh run of its request, about an attempt whose
    /// outcome is unknown: the recorded request proposed by the operator's
    /// side, the policy told of the attempt (rule 6's question). Nothing
    /// is executed: the approval's id, or unavailable.
    pub(super) async fn ask_again(
        &self,
        spec: &ToolSpec,
        again: AskAgain,
    ) -> Result<String, Unavailable> {
        let plan = self
            .begin(
                spec,
                Some(&again.key),
                Claiming::After(Some(again.previous)),
                // The question is about an earlier attempt, whose run
                // records who made it; nobody is asking now.
                Asker::default(),
                Some(again.attempt),
                Vec::new(),
            )
            .await;
        let Plan::Began(session, settling) = plan else {
            return Err(Unavailable);
        };
        let mut session = *session;
        let asked = async {
            session.step().await?;
            let decision =
                Decision::tool_call(&spec.name, again.args).with_origin(Origin::Operator);
            session.propose(decision).await
        }
        .await;
        let asked = match asked {
            Ok(verdict) if verdict.outcome == VerdictOutcome::Pending => {
                verdict.approval.map(|approval| {
                    self.notice(&approval.id, &approval.kind, &verdict.run.id, &spec.name);
                    approval.id
                })
            }
            // Denied: the tool is refused now, and so is this call.
            Ok(verdict) if verdict.outcome == VerdictOutcome::Denied => {
                let _ = end_run(&mut session, "one call per run: the question was refused").await;
                None
            }
            // Never executed here: the question is the only thing asked.
            _ => None,
        };
        self.close_began(&mut session, settling).await;
        asked.ok_or(Unavailable)
    }

    /// Whether the policy's outcome for `spec` is to ask an operator (its
    /// rule's outcome, else its class's).
    pub(super) fn asks_approval(&self, spec: &ToolSpec) -> bool {
        let rule = self.origins.get(&spec.name).and_then(|(server, upstream)| {
            self.config
                .servers
                .iter()
                .find(|s| &s.server.name == server)
                .and_then(|s| s.rules.get(upstream))
        });
        let outcome = rule
            .and_then(|r| r.outcome)
            .or_else(|| self.config.policy.get(&spec.side_effect).copied());
        outcome == Some(agentrt::Outcome::RequireApproval)
    }

    /// The repeat window of a registered tool: its rule's, else the
    /// session's.
    pub(super) fn window(&self, name: &str) -> Duration {
        let (server, upstream) = match self.origins.get(name) {
            Some(origin) => (origin.0.as_str(), origin.1.as_str()),
            None => return self.config.repeat_window,
        };
        self.config
            .servers
            .iter()
            .find(|s| s.server.name == server)
            .and_then(|s| s.rules.get(upstream))
            .and_then(|r| r.repeat_window)
            .unwrap_or(self.config.repeat_window)
    }

    /// Takes over a run whose lease expired (the core's interruption
    /// contract): a tool that is not read-only cut off while executing
    /// pauses the run on an `interrupted_side_effect` approval (the call
    /// answers `INTERRUPTED`); otherwise (a read cut off, a call cut before
    /// its tool ran or after its outcome was recorded) the run is ended
    /// and the call goes on to a new run.
    pub(super) async fn take_over(&self, run_id: &str, tool: &str) -> TakenOver {
        let (mut session, verdict) = match self.gate.attach(run_id).await {
            Ok(attached) => attached,
            Err(agentrt::Error::RunLeased { .. }) => {
                return TakenOver::Paused(Plan::InProgress);
            }
            Err(_) => return TakenOver::Paused(Plan::Unavailable),
        };
        let taken = match verdict.outcome {
            VerdictOutcome::Pending => match verdict.approval {
                Some(approval) => {
                    self.notice(&approval.id, &approval.kind, run_id, tool);
                    TakenOver::Paused(Plan::Interrupted(approval.id))
                }
                None => TakenOver::Paused(Plan::Unavailable),
            },
            VerdictOutcome::Ended => TakenOver::Ended,
            _ => match end_run(&mut session, "one call per run: the call was cut off").await {
                Ok(()) => TakenOver::Ended,
                Err(_) => TakenOver::Paused(Plan::Unavailable),
            },
        };
        let _ = session.close().await;
        taken
    }
}

/// The answer of a refusal by rules 4–5.
pub(super) fn refused(refusal: Refusal) -> Answer {
    match refusal {
        Refusal::Rejected { note, until } => answer::rejected(&note, Some(until)),
        Refusal::Cancelled { until } => answer::cancelled(Some(until)),
        Refusal::Expired { approval_id } => answer::expired(&approval_id),
        Refusal::Duplicate { at, outcome, until } => answer::duplicate(at, outcome.words(), until),
    }
}
