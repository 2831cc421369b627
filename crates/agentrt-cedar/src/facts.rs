//! A Cedar request's facts, apart from any run: what a request and its
//! run's view put to Cedar, and what a policy's test case states.

use std::collections::BTreeMap;

use agentrt::Canonical;
use agentrt::json::JsonError;
use serde::Deserialize;

use crate::policy::ANONYMOUS;

/// What the run did before the request (the context's `run`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunFacts {
    /// Steps before this one.
    pub steps: i64,
    /// Of which failed.
    pub failed_steps: i64,
    /// Earlier steps that called this tool.
    pub calls_of_tool: i64,
    /// Approvals the run has.
    pub approvals: i64,
    /// Model calls so far.
    pub model_calls: i64,
    /// Input tokens so far.
    pub input_tokens: i64,
    /// Output tokens so far.
    pub output_tokens: i64,
    /// Estimated cost so far, in micro-dollars.
    pub cost_micros: i64,
}

/// One request as Cedar sees it: the tool (the action), its arguments,
/// the principal, the resource (`None`: the tool's side-effect class), the
/// run's labels (`"key=value"`) and what the run did so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub args: Canonical,
    /// The principal's id.
    pub principal: String,
    /// The resource's id; `None` for the tool's side-effect class.
    pub resource: Option<String>,
    /// The run's labels, each `key=value`.
    pub labels: Vec<String>,
    /// Each window's count of earlier calls (`context.recent`, for a
    /// policy made [`with_windows`](crate::CedarPolicy::with_windows));
    /// a window missing here is 0.
    pub recent: BTreeMap<String, i64>,
    /// What the run did before.
    pub run: RunFacts,
}

impl Facts {
    /// A request for `tool` with `args` (JSON text) by the anonymous
    /// principal, in a run that has done nothing yet.
    ///
    /// # Errors
    ///
    /// `args` is not JSON the core accepts.
    pub fn new(tool: &str, args: &str) -> Result<Facts, JsonError> {
        Ok(Facts {
            tool: tool.to_owned(),
            args: Canonical::parse_str(args)?,
            principal: ANONYMOUS.to_owned(),
            resource: None,
            labels: Vec::new(),
            recent: BTreeMap::new(),
            run: RunFacts::default(),
        })
    }
}
