//! What a policy sees: the tool request it judges and a view of the run.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

use super::approval::Approval;
use super::run::Run;
use super::step::Step;
use super::tool::ToolSpec;
use crate::json::Canonical;

/// The tool request a policy judges: the registered spec and the canonical
/// arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// The run.
    pub run_id: String,
    /// The step.
    pub step_id: String,
    /// The tool as registered now.
    pub spec: ToolSpec,
    /// The arguments, canonical (`{}` when the agent gave none).
    pub args: Canonical,
}

/// What a policy sees of the run: the run as read, the steps before the
/// evaluated one and the run's approvals. Shared, immutable snapshots.
#[derive(Debug, Clone)]
pub struct RunView {
    /// The run as read when the step was evaluated.
    pub run: Run,
    /// Steps before the evaluated one, in index order.
    pub steps: Arc<Vec<Arc<Step>>>,
    /// The run's approvals, in creation order.
    pub approvals: Arc<Vec<Approval>>,
}
