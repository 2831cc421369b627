//! The live example's logic, shared by the binary and its replay test.

#[path = "../shared/model_source.rs"]
mod model_source;
pub use model_source::Source;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use agentrt::budget::{ModelConfig, PriceTable};
use agentrt::render::{self, RenderOptions};
use agentrt::{
    Agent, AgentError, ApprovalStatus, BoxFuture, Decision, Driver, GateConfig, Limits, Observer,
    Policy, PolicyDecision, PolicyError, RunStatus, RunView, SideEffect, StepInput, Tool,
    ToolRequest, ToolResult, ToolSpec, ids::IdSource, tool_fn,
};

/// The model name recordings are kept under.
pub const MODEL_NAME: &str = "live";

/// What the example was asked to do.
pub struct Options {
    /// The SQLite file.
    pub db: PathBuf,
    /// Where replies come from.
    pub source: Source,
    /// Resume this run instead of starting one.
    pub resume: Option<String>,
    /// The id of a new run (random when absent).
    pub run_id: Option<String>,
}

/// Sends the first change (a local or remote mutation) to an operator,
/// allows reads, denies destruction. Pure over the view: once an approval
/// of the run is granted, later changes go through.
pub struct FirstChangeAsks;

impl Policy for FirstChangeAsks {
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        match request.spec.side_effect {
            SideEffect::ReadOnly => Ok(PolicyDecision::allow()),
            SideEffect::Destructive => {
                Ok(PolicyDecision::deny("destructive tools are not allowed"))
            }
            _ if view
                .approvals
                .iter()
                .any(|a| a.status == ApprovalStatus::Approved) =>
            {
                Ok(PolicyDecision::allow_because(
                    "an operator approved the first change",
                ))
            }
            _ => PolicyDecision::need_approval_json(
                "first_change",
                "the first change of a run goes to an operator",
                &serde_json::json!({ "tool": request.spec.name }),
                &serde_json::json!({ "tool": request.spec.name, "args": request.args.to_value() }),
            )
            .map_err(PolicyError::new),
        }
    }

    fn policy_id(&self) -> Option<String> {
        Some("examples/live/first-change-asks/1".into())
    }
}

/// An agent made of `render` around the step's model caller.
pub struct ModelAgent {
    options: RenderOptions,
}

impl ModelAgent {
    /// The agent with this example's opening text.
    pub fn new() -> ModelAgent {
        let options = RenderOptions::new(|input: &StepInput| {
            format!(
                "Goal: {}\nUse the tools to reach it, one tool call per reply. Call finish when done.",
                input.run.goal
            )
        })
        .with_system("You are a careful repository assistant.")
        .with_max_output_tokens(512);
        ModelAgent { options }
    }
}

impl Default for ModelAgent {
    fn default() -> Self {
        ModelAgent::new()
    }
}

impl Agent for ModelAgent {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input
                .model
                .clone()
                .ok_or_else(|| AgentError::failed("the gate has no model"))?;
            let reply = model
                .generate(render::request(input, &self.options))
                .await?;
            Ok(render::decide(&reply))
        })
    }
}

/// The tools: read a file, open a pull request (a remote change), finish.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    let read = tool_fn(
        ToolSpec::new(
            "repo_read",
            "Read a file of the repository",
            SideEffect::ReadOnly,
        )
        .with_schema_str(
            r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#,
        )
        .expect("a valid schema"),
        |call| async move {
            let path = call.args.to_value()["path"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            match path.as_str() {
                "README.md" => Ok(ToolResult::json(
                    &serde_json::json!({ "path": path, "text": "# Demo\n\nA smal typo.\n" }),
                )
                .with_summary("read README.md")),
                other => Err(agentrt::ToolError::failed(format!("no file {other}"))),
            }
        },
    );
    let pr = tool_fn(
        ToolSpec::new("pr_open", "Open a pull request", SideEffect::RemoteMutation)
            .with_schema_str(r#"{"type":"object","properties":{"title":{"type":"string"},"branch":{"type":"string"}},"required":["title","branch"]}"#)
            .expect("a valid schema"),
        |_| async { Ok(ToolResult::json(&serde_json::json!({ "number": 7 })).with_summary("opened pull request #7")) },
    );
    let finish = tool_fn(
        ToolSpec::new(
            "finish",
            "Report the outcome and end the run",
            SideEffect::ReadOnly,
        )
        .terminal(),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("finished")) },
    );
    vec![Arc::new(read), Arc::new(pr), Arc::new(finish)]
}

/// The run as it stands after the example, and the approval it waits for.
pub struct Finished {
    /// The run.
    pub run: agentrt::Run,
    /// The pending approval, when it waits.
    pub approval: Option<String>,
}

/// Runs (or resumes) the example.
pub async fn run(
    options: &Options,
    observer: Arc<dyn Observer>,
    clock: Option<agentrt::Clock>,
    ids: Option<IdSource>,
    out: &mut dyn Write,
) -> Result<Finished, String> {
    let store = examples::open_store(&options.db).map_err(|e| e.to_string())?;
    let model = model_source::model(&options.source, MODEL_NAME)?;
    let mut config = GateConfig::new(store.clone(), FirstChangeAsks, tools())
        .with_model(ModelConfig::new(model, PriceTable::free([MODEL_NAME])))
        .with_lease_owner("examples-live");
    config.observer = Some(observer);
    if let Some(clock) = clock {
        config.clock = clock;
    }
    if let Some(ids) = ids {
        config.ids = ids;
    }
    let mut driver = Driver::new(config, ModelAgent::new()).map_err(|e| e.to_string())?;
    let limits = Limits::default().max_steps(12).max_model_calls(12);
    let run = match &options.resume {
        Some(id) => driver.resume(id).await,
        None => {
            driver
                .start(
                    options.run_id.as_deref(),
                    "fix the typo in README.md and open a pull request",
                    limits,
                )
                .await
        }
    }
    .map_err(|e| e.to_string())?;
    let mut approval = None;
    if run.status == RunStatus::WaitingForApproval {
        let (ids, _) = store
            .pending_approval_ids(&run.id, 1)
            .map_err(|e| e.to_string())?;
        approval = ids.first().cloned();
        let _ = writeln!(
            out,
            "run {} waits for approval {}",
            run.id,
            approval.clone().unwrap_or_default()
        );
    } else {
        let _ = writeln!(out, "run {}: {}", run.id, run.status);
    }
    Ok(Finished { run, approval })
}
