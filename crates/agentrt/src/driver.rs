//! The Driver: the gate plus an agent, in a loop.

use crate::agent::{Agent, AgentError};
use crate::cancel::Cancel;
use crate::error::Result;
use crate::gate::{Gate, GateConfig, Session, VerdictOutcome};
use crate::model::{Labels, Limits, Run};

/// How long a cancelled agent gets to finish recording its model call.
const RECORDING_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs an agent under the gate: step, decide, propose, execute, until the
/// run pauses for an approval or ends.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use agentrt::*;
/// let store = Store::open(":memory:")?;
/// let echo: Arc<dyn Tool> = Arc::new(tool_fn(
///     ToolSpec::new("echo", "Echo the arguments", SideEffect::ReadOnly),
///     |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("echoed")) },
/// ));
/// let agent = ScriptedAgent::new([
///     Decision::tool_call("echo", r#"{"say":"hi"}"#),
///     Decision::complete(r#""said hi""#),
/// ]);
/// let mut driver = Driver::new(GateConfig::new(store, DefaultPolicy, vec![echo]), agent)?;
/// let run = driver.start(None, "say hi", Limits::default()).await?;
/// assert_eq!(run.status, RunStatus::Completed);
/// # Ok::<(), agentrt::Error>(()) }).unwrap();
/// ```
pub struct Driver<A: Agent> {
    gate: Gate,
    agent: A,
    cancel: Cancel,
}

impl<A: Agent> Driver<A> {
    /// A driver over a new gate.
    pub fn new(config: GateConfig, agent: A) -> Result<Driver<A>> {
        Ok(Driver {
            gate: Gate::new(config)?,
            agent,
            cancel: Cancel::never(),
        })
    }

    /// Sets the caller's cancellation signal.
    pub fn with_cancel(mut self, cancel: Cancel) -> Driver<A> {
        self.cancel = cancel;
        self
    }

    /// The gate underneath.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The agent.
    pub fn agent(&self) -> &A {
        &self.agent
    }

    /// The agent, mutably (to add decisions between runs, say).
    pub fn agent_mut(&mut self) -> &mut A {
        &mut self.agent
    }

    /// Starts a run and drives it until it pauses or ends.
    pub async fn start(&mut self, run_id: Option<&str>, goal: &str, limits: Limits) -> Result<Run> {
        let session = self.gate.begin(run_id, goal, limits).await?;
        self.drive(session, VerdictOutcome::Open).await
    }

    /// [`Driver::start`] with labels (see [`Gate::begin_labelled`]).
    pub async fn start_labelled(
        &mut self,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: Labels,
    ) -> Result<Run> {
        let session = self
            .gate
            .begin_labelled(run_id, goal, limits, labels)
            .await?;
        self.drive(session, VerdictOutcome::Open).await
    }

    /// Resumes a run (a granted approval runs once, after the policy is
    /// asked again) and drives it until it pauses or ends.
    pub async fn resume(&mut self, run_id: &str) -> Result<Run> {
        let (session, verdict) = self.gate.attach(run_id).await?;
        self.drive(session, verdict.outcome).await
    }

    async fn drive(&mut self, mut session: Session, first: VerdictOutcome) -> Result<Run> {
        session.set_cancel(self.cancel.clone());
        if first == VerdictOutcome::Allowed {
            session.execute().await?;
        }
        while session.step().await?.is_some() {
            // The input shares the session's history; it is dropped before
            // the next write so appending never copies the history.
            let input = session.input();
            let decided = {
                let mut decide = self.agent.decide(&input);
                tokio::select! {
                    biased;
                    d = &mut decide => d,
                    _ = self.cancel.cancelled() => {
                        // Give the agent's model call its own bounded time
                        // to record what it sent, then report the cancel.
                        let _ = tokio::time::timeout(RECORDING_GRACE, decide).await;
                        Err(AgentError::Cancelled)
                    }
                }
            };
            drop(input);
            let decision = match decided {
                Ok(d) => d,
                Err(e) => {
                    session.fail(e).await?;
                    break;
                }
            };
            let verdict = session.propose(decision).await?;
            if verdict.outcome == VerdictOutcome::Allowed {
                session.execute().await?;
            }
        }
        let run = session.run().clone();
        session.close().await?;
        Ok(run)
    }
}
