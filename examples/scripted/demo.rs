//! The demo's logic, shared by the example binary and its test.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agentrt::{
    Agent, AgentError, BoxFuture, Decision, DefaultPolicy, Driver, GateConfig, Limits, Observer,
    RunStatus, SideEffect, StepInput, Tool, ToolError, ToolResult, ToolSpec, text, tool_fn,
};

pub const USAGE: &str = "usage: cargo run --example scripted -- [--db PATH] [--resume RUN]

  --db PATH     the SQLite file to use (default agentrt-demo.db; created if missing),
                or a postgres:// URL (its schema created if missing)
  --resume RUN  resume RUN after its approval was decided";

/// The agent's plan, one decision per step: deterministic, so a resumed
/// process continues where the first one paused.
fn plan() -> Vec<Decision> {
    vec![
        Decision::tool_call("repo_read", r#"{"path":"README.md"}"#)
            .with_reason("look before changing anything"),
        Decision::tool_call("repo_read", r#"{"path": 42}"#)
            .with_reason("a malformed request: the path is a number"),
        Decision::tool_call("file_delete", r#"{"path":"CHANGELOG.md"}"#)
            .with_reason("tidy up (destructive: the policy denies it)"),
        Decision::tool_call(
            "pr_open",
            r#"{"title":"Fix the typo in README.md","branch":"fix-typo"}"#,
        )
        .with_reason("propose the fix (remote: an operator must approve it)"),
        Decision::complete(r#"{"pull_request":"opened"}"#).with_reason("the fix is proposed"),
    ]
}

struct PlanAgent {
    plan: Vec<Decision>,
}

impl Agent for PlanAgent {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let index = input.run.step_count.saturating_sub(1) as usize;
        let next = self.plan.get(index).cloned();
        Box::pin(
            async move { next.ok_or_else(|| AgentError::failed("the plan has no more steps")) },
        )
    }
}

fn tools(repo: Arc<Mutex<BTreeMap<String, String>>>) -> Vec<Arc<dyn Tool>> {
    let path_schema = r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#;
    let read_repo = Arc::clone(&repo);
    let read = tool_fn(
        ToolSpec::new(
            "repo_read",
            "Read a file of the repository",
            SideEffect::ReadOnly,
        )
        .with_schema_str(path_schema)
        .expect("the schema is valid JSON"),
        move |call| {
            let repo = Arc::clone(&read_repo);
            async move {
                #[derive(serde::Deserialize)]
                struct Args {
                    path: String,
                }
                let args: Args = call.args_as()?;
                let files = repo
                    .lock()
                    .map_err(|_| ToolError::failed("repository lock poisoned"))?;
                match files.get(&args.path) {
                    Some(text) => Ok(ToolResult::json(
                        &serde_json::json!({ "path": args.path, "text": text }),
                    )
                    .with_summary(format!(
                        "read {} ({} bytes)",
                        args.path,
                        text.len()
                    ))),
                    None => Err(ToolError::failed(format!("no file {}", args.path))),
                }
            }
        },
    );
    let delete_repo = Arc::clone(&repo);
    let delete = tool_fn(
        ToolSpec::new(
            "file_delete",
            "Delete a file of the repository",
            SideEffect::Destructive,
        )
        .with_schema_str(path_schema)
        .expect("the schema is valid JSON"),
        move |call| {
            let repo = Arc::clone(&delete_repo);
            async move {
                #[derive(serde::Deserialize)]
                struct Args {
                    path: String,
                }
                let args: Args = call.args_as()?;
                repo.lock()
                    .map_err(|_| ToolError::failed("repository lock poisoned"))?
                    .remove(&args.path);
                Ok(ToolResult::json(
                    &serde_json::json!({ "deleted": args.path }),
                ))
            }
        },
    );
    let open_pr = tool_fn(
        ToolSpec::new("pr_open", "Open a pull request on the remote", SideEffect::RemoteMutation)
            .with_schema_str(
                r#"{"type":"object","properties":{"title":{"type":"string"},"branch":{"type":"string"}},"required":["title","branch"]}"#,
            )
            .expect("the schema is valid JSON"),
        |call| async move {
            #[derive(serde::Deserialize)]
            struct Args {
                title: String,
                branch: String,
            }
            let args: Args = call.args_as()?;
            Ok(ToolResult::json(&serde_json::json!({ "number": 7, "title": args.title, "branch": args.branch }))
                .with_summary("opened pull request #7"))
        },
    );
    vec![Arc::new(read), Arc::new(delete), Arc::new(open_pr)]
}

/// The name the printed approve command records (`--by`): `$USER`, or
/// `operator` where it is not set.
pub fn operator_name() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .unwrap_or_else(|| "operator".to_owned())
}

/// What the demo was asked to do.
pub struct Options {
    /// The SQLite file, or a `postgres://` URL.
    pub db: PathBuf,
    /// Resume this run instead of starting one.
    pub resume: Option<String>,
}

/// How the demo's run stands when it returns.
pub struct Outcome {
    /// The run.
    pub run: agentrt::Run,
    /// The pending approval, when the run waits.
    pub approval: Option<String>,
}

/// Runs (or resumes) the demo, writing the operator's instructions or the
/// trace to `out` and events as they commit to `trace`.
pub async fn run(
    options: &Options,
    out: &mut dyn Write,
    trace: Arc<dyn Observer>,
) -> Result<Outcome, DemoError> {
    let store = examples::open_store(&options.db)?;
    let repo = Arc::new(Mutex::new(BTreeMap::from([
        (
            "README.md".to_owned(),
            "# Demo\n\nA smal typo.\n".to_owned(),
        ),
        ("CHANGELOG.md".to_owned(), "# Changelog\n".to_owned()),
    ])));
    let mut config = GateConfig::new(store.clone(), DefaultPolicy, tools(repo))
        .with_lease_owner("scripted-demo");
    config.observer = Some(trace);
    let mut driver = Driver::new(config, PlanAgent { plan: plan() })?;
    let run = match &options.resume {
        None => {
            driver
                .start(None, "fix the typo in README.md", Limits::default())
                .await?
        }
        Some(run_id) => driver.resume(run_id).await?,
    };
    let db = examples::shown_db(&options.db);
    let mut pending = None;
    match run.status {
        RunStatus::WaitingForApproval => {
            let (ids, _) = store.pending_approval_ids(&run.id, 1)?;
            let approval = ids.first().cloned().unwrap_or_default();
            pending = Some(approval.clone());
            writeln!(out)?;
            writeln!(
                out,
                "Run {} is waiting for an operator to approve the pull request.",
                run.id
            )?;
            writeln!(out, "See what is waiting:")?;
            writeln!(
                out,
                "  cargo run -p agentrt-cli -- --db {:?} show {}",
                db, run.id
            )?;
            writeln!(out, "Approve it:")?;
            writeln!(
                out,
                "  cargo run -p agentrt-cli -- --db {:?} approve {} --approval {} --by {:?}",
                db,
                run.id,
                approval,
                operator_name()
            )?;
            writeln!(
                out,
                "Then resume the run, which executes exactly the approved call:"
            )?;
            writeln!(
                out,
                "  cargo run --example scripted -- --db {:?} --resume {}",
                db, run.id
            )?;
        }
        status => {
            writeln!(out)?;
            writeln!(
                out,
                "Run {} is {status}{}.",
                run.id,
                run.reason.map(|r| format!(" ({r})")).unwrap_or_default()
            )?;
            writeln!(out, "The whole trace:")?;
            for event in store.list_events(&run.id)? {
                writeln!(
                    out,
                    "  {:>4}  {:<20} {}",
                    event.seq,
                    event.event_type.as_str(),
                    text::clip(&event.payload, 140)
                )?;
            }
            writeln!(out)?;
            writeln!(out, "List it with the operator CLI:")?;
            writeln!(
                out,
                "  cargo run -p agentrt-cli -- --db {:?} events {}",
                db, run.id
            )?;
        }
    }
    Ok(Outcome {
        run,
        approval: pending,
    })
}

/// Why the demo stopped.
#[derive(Debug)]
pub enum DemoError {
    /// The runtime refused or failed.
    Runtime(agentrt::Error),
    /// Writing the output failed.
    Output(std::io::Error),
}

impl std::fmt::Display for DemoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DemoError::Runtime(e) => write!(f, "{e}"),
            DemoError::Output(e) => write!(f, "writing output: {e}"),
        }
    }
}

impl From<agentrt::Error> for DemoError {
    fn from(e: agentrt::Error) -> DemoError {
        DemoError::Runtime(e)
    }
}

impl From<std::io::Error> for DemoError {
    fn from(e: std::io::Error) -> DemoError {
        DemoError::Output(e)
    }
}
