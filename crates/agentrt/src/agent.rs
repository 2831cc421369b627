//! Agents: whatever decides the next step (a model behind `render`, a plan,
//! a script), and what they are handed.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::budget::CallError;
use crate::model::{Approval, BoxFuture, Decision, Run, Step, TerminalReason, ToolSpec};

/// What an agent is handed at each step: copies it may keep, isolated from
/// the runtime's own state.
#[derive(Debug, Clone)]
pub struct StepInput {
    /// The run as read before this step (its `step_count` includes this step).
    pub run: Run,
    /// The steps before this one, in index order.
    pub steps: Arc<Vec<Arc<Step>>>,
    /// The run's approvals, in creation order.
    pub approvals: Arc<Vec<Approval>>,
    /// The registered tools, by name.
    pub tools: Arc<Vec<ToolSpec>>,
    /// The step's accounting model caller, when the gate has a model.
    pub model: Option<crate::budget::ModelCaller>,
}

/// Why an agent could not decide. The run ends (the reason depends on the
/// variant) unless the caller cancelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The agent failed (`agent_error`).
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
    },
    /// A limit stopped the agent (the reason is recorded, with `limit.exceeded`).
    #[error("{detail}")]
    Limit {
        /// The limit's terminal reason.
        reason: TerminalReason,
        /// What was exceeded.
        detail: String,
    },
    /// The model could not be reached after retries (`model_unavailable`).
    #[error("model unavailable: {detail}")]
    ModelUnavailable {
        /// The last failure.
        detail: String,
    },
    /// The caller cancelled; the step is left in flight.
    #[error("cancelled")]
    Cancelled,
    /// This instance lost the run's lease: nothing more may be sent.
    #[error("lost the lease on the run")]
    LeaseLost,
}

impl AgentError {
    /// A failure with this message.
    pub fn failed(message: impl std::fmt::Display) -> AgentError {
        AgentError::Failed {
            message: message.to_string(),
        }
    }
}

/// Decides the next step.
pub trait Agent: Send {
    /// The decision for the step described by `input`.
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>>;
}

/// An agent that replays a fixed list of decisions, then fails.
///
/// ```
/// use agentrt::{Decision, ScriptedAgent};
/// let agent = ScriptedAgent::new([
///     Decision::tool_call("fs_read", r#"{"path":"a"}"#),
///     Decision::complete(r#""done""#),
/// ]);
/// # let _ = agent;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ScriptedAgent {
    decisions: VecDeque<Decision>,
    inputs: Vec<StepInput>,
    record: bool,
}

impl ScriptedAgent {
    /// An agent that returns `decisions` in order.
    pub fn new(decisions: impl IntoIterator<Item = Decision>) -> ScriptedAgent {
        ScriptedAgent {
            decisions: decisions.into_iter().collect(),
            inputs: Vec::new(),
            record: false,
        }
    }

    /// Keeps every input it is handed (see [`ScriptedAgent::inputs`]).
    /// Off by default: kept inputs share the run's history, so the session
    /// copies the history on each later step.
    pub fn recording_inputs(mut self) -> ScriptedAgent {
        self.record = true;
        self
    }

    /// The inputs it was handed, in order (when recording).
    pub fn inputs(&self) -> &[StepInput] {
        &self.inputs
    }

    /// How many decisions are left.
    pub fn remaining(&self) -> usize {
        self.decisions.len()
    }
}

impl Agent for ScriptedAgent {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        if self.record {
            self.inputs.push(input.clone());
        }
        let next = self.decisions.pop_front();
        Box::pin(async move {
            next.ok_or_else(|| AgentError::failed("the script has no more decisions"))
        })
    }
}

/// Receives every event after its transaction commits, in order.
pub trait Observer: Send + Sync {
    /// One committed event.
    fn observe(&self, event: &crate::model::Event);
}

impl<F: Fn(&crate::model::Event) + Send + Sync> Observer for F {
    fn observe(&self, event: &crate::model::Event) {
        self(event)
    }
}

/// A model call's failure as the agent reports it.
impl From<CallError> for AgentError {
    fn from(e: CallError) -> AgentError {
        match e {
            CallError::Limit { reason, detail } => AgentError::Limit { reason, detail },
            CallError::ModelUnavailable { .. } => AgentError::ModelUnavailable {
                detail: e.to_string(),
            },
            CallError::Cancelled => AgentError::Cancelled,
            CallError::LeaseLost => AgentError::LeaseLost,
            other => AgentError::failed(other),
        }
    }
}
