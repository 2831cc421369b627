//! Executing an allowed request: the write group that makes "this tool
//! is about to run" durable, the tool itself, and the write group that
//! records its outcome with the next step.

use std::sync::Arc;

use super::CrashPoint;
use super::session::{Grant, Session, State, misuse, to_json};
use super::tool_run::{self, Then};
use super::unknown::UnknownOutcome;
use super::writes::{self, ResumedStart, Settle, StepEnd, running};
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::model::{
    EventType, Observation, ObservationKind, RunStatus, Step, StepStatus, TerminalReason,
};
use crate::payload::{self};
use crate::store::{LeaseChange, RunChange, RunGuard, StepChange, StepGuard};

impl Session {
    /// Runs the allowed request once and records its outcome.
    ///
    /// Returns the observation; if the caller cancelled while the tool ran,
    /// the outcome is recorded first and [`Error::Cancelled`] returned.
    ///
    /// A call whose outcome is unknown (the spec's timeout, a panic,
    /// [`ToolError::Unknown`](crate::ToolError::Unknown)) of a tool that is
    /// not read-only is never retried: the step follows the interruption
    /// contract. Without a reconciliation hook the run pauses on an
    /// `interrupted_side_effect` approval of the same step (the session is
    /// then over: [`Session::step`] returns `None`, [`Session::run`] is
    /// WAITING); with one, the hook settles it. A read-only tool's unknown
    /// outcome is a tool error, and the run goes on.
    pub async fn execute(&mut self) -> Result<Observation> {
        self.begin_call()?;
        let r = self.execute_inner().await;
        self.in_call = false;
        r
    }

    async fn execute_inner(&mut self) -> Result<Observation> {
        self.usable()?;
        let Some(allowed) = self.allowed.take() else {
            return Err(misuse(
                &self.run,
                "nothing to execute: no allowed request on this step",
            ));
        };
        let Some(mut step) = self.current.clone() else {
            return Err(misuse(&self.run, "nothing to execute: no open step"));
        };
        let gate = Arc::clone(&self.gate);
        let Some(registered) = gate.registry.get(&allowed.request.spec.name) else {
            return Err(misuse(&self.run, "the allowed tool is not registered"));
        };
        let tool = Arc::clone(&registered.tool);
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let policy_events = allowed.policy_events(&gate.policy_id);
        let mut draft = self.draft();

        if matches!(allowed.grant, Grant::Fresh { .. }) {
            self.check_lease()?;
        }

        // Write group 1: make "this tool is about to run" durable.
        // When the tool started, as its `step.tool_started` event says: a
        // tool's duration is measured from here, not from the step's start
        // (which includes the agent's decision and its model calls).
        let (started, tool_started_at) = match &allowed.grant {
            Grant::Fresh {
                decision,
                decided_at,
            } => {
                let decision_json = to_json(decision);
                let policy_json = to_json(&allowed.policy);
                let tool_started =
                    payload::tool_started(&allowed.request.spec.name, &allowed.request.args, None);
                step.decision = Some(decision.clone());
                step.policy = Some(allowed.policy.clone());
                step.spec_hash = allowed.spec_hash.clone();
                step.policy_id = gate.policy_id.clone();
                let g = Arc::clone(&gate);
                let (run_id, step_id, decided_at) = (run_id.clone(), step_id.clone(), *decided_at);
                let (spec_hash, policy_at) = (allowed.spec_hash.clone(), allowed.policy_at);
                let policy_events = policy_events.clone();
                let r = self
                    .write(move |tx| {
                        let gate = g;
                        // By the engine's clock where it has one, judged in
                        // the statement; else by the gate's lease clock.
                        let guard = StepGuard {
                            statuses: &[StepStatus::Deciding],
                            run: Some((
                                &run_id,
                                RunGuard {
                                    lease_live_at: Some(gate.lease_now()),
                                    lease_live_by_engine: true,
                                    ..running(&gate)
                                },
                            )),
                            granted_by: None,
                        };
                        let change = StepChange {
                            status: Some(StepStatus::Executing),
                            decision_json: Some(&decision_json),
                            policy_json: Some(&policy_json),
                            spec_hash: Some(&spec_hash),
                            policy_id: Some(&gate.policy_id),
                            ..StepChange::default()
                        };
                        if !tx.update_step(&step_id, &guard, &change)? {
                            return Ok(false);
                        }
                        tx.append_event(
                            &run_id,
                            &step_id,
                            &decided_at,
                            EventType::StepDecided,
                            &decision_json,
                        )?;
                        writes::append_policy(tx, &run_id, &step_id, &policy_at, &policy_events)?;
                        tx.append_event(
                            &run_id,
                            &step_id,
                            &policy_at,
                            EventType::StepToolStarted,
                            &tool_started,
                        )?;
                        Ok(true)
                    })
                    .await;
                (self.closing(r)?, allowed.policy_at)
            }
            Grant::Resumed {
                approval_id,
                resumed_at,
                granted_at,
                ..
            } => {
                let start_at = gate.now();
                let grant_ttl = self.run.limits.grant_ttl_ms;
                if let Some(granted) = granted_at
                    && grant_ttl > 0
                    && start_at > granted.add(std::time::Duration::from_millis(grant_ttl))
                {
                    return self
                        .expire_grant_at_execute(approval_id.clone(), start_at)
                        .await;
                }
                let tool_started = payload::tool_started(
                    &allowed.request.spec.name,
                    &allowed.request.args,
                    Some(approval_id),
                );
                let resumed = payload::run_resumed_approval(approval_id);
                step.started_at = start_at;
                let g = Arc::clone(&gate);
                let (run_id, step_id, resumed_at) = (run_id.clone(), step_id.clone(), *resumed_at);
                let approval = approval_id.clone();
                let (spec_hash, spec_json) = (allowed.spec_hash.clone(), allowed.spec_json.clone());
                let policy_events = policy_events.clone();
                let run_copy = draft.run.clone();
                let r = self
                    .write(move |tx| {
                        let gate = g;
                        let approval_id = &approval;
                        // The step moves only while the run still waits and the
                        // grant is still the step's latest approval, approved:
                        // another session may have paused the step again since
                        // this one read it.
                        let moved = tx.update_step(
                            &step_id,
                            &StepGuard {
                                statuses: &[StepStatus::AwaitingApproval],
                                run: Some((
                                    &run_id,
                                    RunGuard {
                                        statuses: &[RunStatus::WaitingForApproval],
                                        ..RunGuard::default()
                                    },
                                )),
                                granted_by: Some(approval_id),
                            },
                            &StepChange {
                                status: Some(StepStatus::Executing),
                                started_at: Some(start_at),
                                ..StepChange::default()
                            },
                        )?;
                        if !moved {
                            return writes::refuse_stale_grant(
                                tx,
                                &gate,
                                &run_id,
                                &step_id,
                                approval_id,
                                &start_at,
                            );
                        }
                        let change = RunChange {
                            status: Some(RunStatus::Running),
                            lease: LeaseChange::Set {
                                owner: &gate.owner,
                                expires_at: gate.lease_expiry_in(tx)?,
                            },
                            ..RunChange::default()
                        };
                        let guard = RunGuard {
                            statuses: &[RunStatus::WaitingForApproval],
                            ..RunGuard::default()
                        };
                        if !tx.update_run(&run_id, &guard, &change)? {
                            return Err(misuse(&run_copy, "the run changed under this session"));
                        }
                        tx.insert_spec(&spec_hash, spec_json.as_str())?;
                        tx.append_event(&run_id, "", &resumed_at, EventType::RunResumed, &resumed)?;
                        writes::append_policy(tx, &run_id, &step_id, &resumed_at, &policy_events)?;
                        tx.append_event(
                            &run_id,
                            &step_id,
                            &start_at,
                            EventType::StepToolStarted,
                            &tool_started,
                        )?;
                        Ok(ResumedStart::Started)
                    })
                    .await;
                let ok = match self.closing(r)? {
                    ResumedStart::Started => true,
                    ResumedStart::Taken => false,
                    ResumedStart::Superseded { latest } => {
                        self.run = self.reread_run().await?;
                        self.state = State::Over;
                        return Err(Error::GrantSuperseded {
                            approval: approval_id.clone(),
                            latest,
                        });
                    }
                };
                if ok {
                    draft.run.status = RunStatus::Running;
                    self.run.status = RunStatus::Running;
                    self.state = State::Active;
                    self.hold_lease();
                }
                (ok, start_at)
            }
        };
        if !started {
            if matches!(allowed.grant, Grant::Resumed { .. }) {
                // Another resumer took the run first: it runs the grant.
                self.run = self.reread_run().await?;
                self.state = State::Over;
                return Err(misuse(
                    &self.run,
                    "another session resumed this run first; nothing ran here",
                ));
            }
            self.changed_under_us().await?;
            return Err(misuse(
                &self.run,
                "the run changed before the tool started; nothing ran",
            ));
        }
        step.status = StepStatus::Executing;
        self.current = Some(step.clone());
        match allowed.grant {
            Grant::Fresh { .. } => self.gate.crash_point(CrashPoint::StepDecided).await,
            Grant::Resumed { .. } => self.gate.crash_point(CrashPoint::RunResumed).await,
        }
        self.gate.crash_point(CrashPoint::ToolStarted).await;

        // The effect.
        let call = crate::model::ToolCall {
            run_id: run_id.clone(),
            step_id: step_id.clone(),
            args: allowed.request.args.clone(),
            cancel: self.cancel.clone(),
        };
        let ran = tool_run::run(tool, call, allowed.request.spec.timeout_ms, &self.cancel).await;
        let tool_name = allowed.request.spec.name.clone();
        self.gate.crash_point(CrashPoint::ToolEffect).await;
        let mut outcome = tool_run::observe(&tool_name, allowed.request.spec.side_effect, ran);
        if let Grant::Resumed {
            edit: Some(edit), ..
        } = &allowed.grant
        {
            outcome.observation.operator_edit = Some(edit.clone());
        }
        let observation = outcome.observation.clone();
        if let Then::Unknown(reason) = outcome.then {
            return self
                .unknown_outcome(UnknownOutcome {
                    step,
                    request: allowed.request,
                    spec_hash: allowed.spec_hash,
                    spec_json: allowed.spec_json,
                    tool_started_at,
                    observation,
                    reason,
                })
                .await;
        }
        let cancelled = outcome.then == Then::Cancelled;
        let status = match observation.kind {
            ObservationKind::ToolResult => StepStatus::Done,
            ObservationKind::Interrupted => StepStatus::Interrupted,
            _ => StepStatus::Failed,
        };
        let terminal = allowed.request.spec.terminal && status == StepStatus::Done;
        let history = Arc::clone(&self.history);

        // Write group 2: the outcome, with the next step or the run's end.
        let g = Arc::clone(&gate);
        let (ended_step, observed, name) = (step.clone(), observation.clone(), tool_name.clone());
        let r = self
            .write(move |tx| {
                let (gate, step, observation, tool_name) = (g, ended_step, observed, name);
                let end_at = gate.now();
                let ended = writes::end_step(
                    tx,
                    &mut draft,
                    step.clone(),
                    end_at,
                    StepEnd {
                        status,
                        observation: Some(observation.clone()),
                        from: &[StepStatus::Executing],
                        run_guard: running(&gate),
                        extra: StepChange::default(),
                        count_active: true,
                        granted_by: None,
                    },
                )?;
                if ended.is_none() {
                    return Ok((None, end_at));
                }
                let duration = end_at.millis_since(&tool_started_at);
                tx.append_event(
                    &run_id,
                    &step_id,
                    &end_at,
                    EventType::StepToolFinished,
                    &payload::tool_finished(&tool_name, duration, &observation, false),
                )?;
                if status == StepStatus::Failed {
                    tx.append_event(
                        &run_id,
                        &step_id,
                        &end_at,
                        EventType::StepFailed,
                        &payload::step_failed(&observation.summary, Some(&observation)),
                    )?;
                }
                if let Then::Abort(detail) = &outcome.then {
                    writes::settle(
                        &gate,
                        tx,
                        &mut draft,
                        Settle {
                            status: RunStatus::Failed,
                            reason: TerminalReason::ToolAbort,
                            detail: detail.clone(),
                            result: None,
                            from: RunStatus::Running,
                        },
                    )?;
                } else if terminal {
                    writes::settle(
                        &gate,
                        tx,
                        &mut draft,
                        Settle {
                            status: RunStatus::Completed,
                            reason: TerminalReason::GoalCompleted,
                            detail: format!("terminal tool {tool_name}"),
                            result: observation.content.clone(),
                            from: RunStatus::Running,
                        },
                    )?;
                } else if cancelled {
                    tx.update_run(
                        &run_id,
                        &running(&gate),
                        &RunChange {
                            lease: LeaseChange::Clear,
                            ..RunChange::default()
                        },
                    )?;
                } else {
                    writes::open_next_or_settle(&gate, tx, &mut draft, &history)?;
                }
                Ok((Some(draft), end_at))
            })
            .await;
        let (recorded, end_at) = self.closing(r)?;
        let Some(draft) = recorded else {
            return self
                .record_late(
                    &tool_name,
                    &step,
                    tool_started_at,
                    Some(end_at),
                    observation,
                )
                .await;
        };
        self.apply(draft);
        self.gate.crash_point(CrashPoint::ToolFinished).await;
        if cancelled || self.cancel.is_cancelled() {
            self.state = State::Closed(Some("cancelled by the caller".into()));
            return Err(Error::Cancelled);
        }
        Ok(observation)
    }

    /// The tool finished after an operator ended the run: the outcome goes
    /// into a late `step.tool_finished` after `run.finished`; the step row
    /// and the run stay as the operator left them.
    pub(super) async fn record_late(
        &mut self,
        tool: &str,
        step: &Step,
        tool_started_at: Timestamp,
        end_at: Option<Timestamp>,
        observation: Observation,
    ) -> Result<Observation> {
        let run = self.reread_run().await?;
        if !run.status.is_terminal() {
            self.changed_under_us().await?;
            return Err(misuse(&self.run, "the step changed while its tool ran"));
        }
        let gate = Arc::clone(&self.gate);
        let at = end_at.unwrap_or_else(|| gate.now());
        let duration = at.millis_since(&tool_started_at);
        let late = payload::tool_finished(tool, duration, &observation, true);
        let (run_id, step_id) = (run.id.clone(), step.id.clone());
        let r = self
            .write(move |tx| {
                tx.append_event(&run_id, &step_id, &at, EventType::StepToolFinished, &late)
            })
            .await;
        self.closing(r)?;
        self.run = run;
        self.state = State::Over;
        self.current = None;
        Ok(observation)
    }

    /// A grant that lapsed between attach and execute (grant TTL).
    pub(super) async fn expire_grant_at_execute(
        &mut self,
        approval_id: String,
        at: Timestamp,
    ) -> Result<Observation> {
        let r = super::resume::expire(self, &approval_id, at, true).await;
        self.closing(r)?;
        Err(Error::ApprovalExpired {
            approval: approval_id,
        })
    }
}
