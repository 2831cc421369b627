//! The mcp example's logic, shared by the binary and its tests.
//!
//! Everything lives in one operator directory (`--dir`, created `0700`):
//!
//! - `sandbox/`: the filesystem server's only root, seeded with two notes;
//! - `manifest.json` and `rules.json`: the operator's files, `0600` (pin
//!   writes them; `read_manifest` and `read_rules` refuse them otherwise);
//! - `mcp.db`: the store.
//!
//! Replay keys hash the whole model request, so nothing the model sees may
//! depend on where that directory is: the goal and the recorded calls name
//! paths relative to the sandbox (the server resolves a relative path
//! against its root and answers with the path as given), the tool list is
//! the pinned one, and no tool whose answer names an absolute path
//! (`list_allowed_directories`, `search_files`, `get_file_info`) has a rule.

#[path = "../shared/model_source.rs"]
mod model_source;
pub use model_source::Source;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentrt::budget::{ModelConfig, PriceTable};
use agentrt::render::{self, RenderOptions};
use agentrt::{
    Agent, AgentError, BoxFuture, Decision, Driver, GateConfig, Limits, Observer, Policy,
    PolicyDecision, PolicyError, RunStatus, RunView, SideEffect, StepInput, Store, Timestamp, Tool,
    ToolRequest, ToolResult, ToolSpec, ids::IdSource, tool_fn,
};
use agentrt_mcp::{Manifest, Server, read_manifest, read_rules, write_private};

/// The model name recordings are kept under.
pub const MODEL_NAME: &str = "mcp";

/// The operator's rules, as committed in `examples/mcp/rules.json`: four
/// reads and `write_file` (a local mutation; the server calls it
/// destructive, hence `allow_hint_mismatch`).
pub const RULES: &str = include_str!("rules.json");

/// What the agent is asked to do (paths relative to the sandbox).
pub const GOAL: &str = "Read the two notes in the notes directory and write the tasks that are still open to todo.md, grouped by day.";

/// The most lines of a write's content an operator is shown.
pub const PREVIEW_LINES: usize = 5;

/// The most bytes of a write's preview, its marker included.
pub const PREVIEW_BYTES: usize = 240;

/// The notes the sandbox is seeded with, relative to it.
pub const NOTES: [(&str, &str); 2] = [
    (
        "notes/monday.md",
        "# Monday\n\n- [x] book the venue\n- [ ] send the invitations\n- [ ] order the cake\n",
    ),
    (
        "notes/tuesday.md",
        "# Tuesday\n\n- [x] send the invitations\n- [ ] pick up the cake\n- [ ] confirm the speakers\n",
    ),
];

/// Where the example keeps its files.
#[derive(Debug, Clone)]
pub struct Layout {
    /// The operator directory.
    pub dir: PathBuf,
}

impl Layout {
    /// The server's root.
    pub fn sandbox(&self) -> PathBuf {
        self.dir.join("sandbox")
    }
    /// The pinned manifest.
    pub fn manifest(&self) -> PathBuf {
        self.dir.join("manifest.json")
    }
    /// The operator's rules.
    pub fn rules(&self) -> PathBuf {
        self.dir.join("rules.json")
    }
    /// The store.
    pub fn db(&self) -> PathBuf {
        self.dir.join("mcp.db")
    }
}

/// The filesystem server, started by Node with the sandbox as its root.
pub fn server(entry: &Path, sandbox: &Path) -> Result<Server, String> {
    let utf8 = |p: &Path| {
        p.to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not valid UTF-8", p.display()))
    };
    check_entry(entry)?;
    let mut server = Server::command("fs", &["node", &utf8(entry)?, &utf8(sandbox)?]);
    // Node's first start on a cold machine can be slow.
    server.connect_timeout = Some(Duration::from_secs(60));
    Ok(server)
}

/// Refuses an entry point that is not there, before anything is done.
fn check_entry(entry: &Path) -> Result<(), String> {
    if entry.is_file() {
        Ok(())
    } else {
        Err(format!(
            "no server entry point at {}: install it with npm ci (see the README)",
            entry.display()
        ))
    }
}

/// Creates `dir` (and its missing parents) private to the owner.
fn private_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))
}

/// Seeds a missing sandbox with [`NOTES`]; leaves an existing one alone.
fn seed(sandbox: &Path, out: &mut dyn Write) -> Result<(), String> {
    if sandbox.exists() {
        return Ok(());
    }
    for (name, text) in NOTES {
        let path = sandbox.join(name);
        if let Some(parent) = path.parent() {
            private_dir(parent)?;
        }
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let _ = writeln!(out, "seeded {} with two notes", sandbox.display());
    Ok(())
}

/// The pin step: seeds the sandbox, pins the server's tools into
/// `manifest.json`, writes the committed rules to `rules.json` (both
/// `0600`), and prints one line per pinned tool.
pub async fn pin(
    layout: &Layout,
    entry: &Path,
    at: Timestamp,
    out: &mut dyn Write,
) -> Result<Manifest, String> {
    check_entry(entry)?;
    private_dir(&layout.dir)?;
    let sandbox = layout.sandbox();
    seed(&sandbox, out)?;
    let sandbox = sandbox
        .canonicalize()
        .map_err(|e| format!("{}: {e}", sandbox.display()))?;
    let manifest = agentrt_mcp::pin(&server(entry, &sandbox)?, at)
        .await
        .map_err(|e| e.to_string())?;
    write_private(&layout.manifest(), manifest.to_json().as_bytes()).map_err(|e| e.to_string())?;
    write_private(&layout.rules(), RULES.as_bytes()).map_err(|e| e.to_string())?;
    for tool in manifest.tools.values() {
        let _ = writeln!(
            out,
            "{:<28} {:<26} {}",
            agentrt::text::sanitize(&tool.name),
            hints(tool.annotations.as_ref()),
            first_line(&tool.description, 72)
        );
    }
    let _ = writeln!(
        out,
        "pinned {} tools into {}; rules in {}",
        manifest.tools.len(),
        layout.manifest().display(),
        layout.rules().display()
    );
    Ok(manifest)
}

/// The hints a server claims for a tool (`-` for none): shown, never used.
fn hints(annotations: Option<&agentrt::Canonical>) -> String {
    let value = annotations.map(agentrt::Canonical::to_value);
    let claimed: Vec<&str> = [
        ("readOnlyHint", "read-only"),
        ("destructiveHint", "destructive"),
        ("idempotentHint", "idempotent"),
        ("openWorldHint", "open-world"),
    ]
    .into_iter()
    .filter(|(key, _)| value.as_ref().and_then(|v| v[*key].as_bool()) == Some(true))
    .map(|(_, word)| word)
    .collect();
    if claimed.is_empty() {
        "-".into()
    } else {
        claimed.join(",")
    }
}

/// The first line of `text`, sanitized, at most `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut shown: String = line.chars().take(max).collect();
    if shown.len() < line.len() {
        shown.pop();
        shown.push('…');
    }
    agentrt::text::sanitize(&shown)
}

/// Allows reads, sends every local mutation to an operator (approval
/// `file_write`, showing the path, the size and a bounded preview), denies
/// everything else. Pure over the request: on resume the same write asks
/// for the same approval, which the operator has granted.
pub struct FileWriteAsks;

impl Policy for FileWriteAsks {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        match request.spec.side_effect {
            SideEffect::ReadOnly => Ok(PolicyDecision::allow()),
            SideEffect::LocalMutation => {
                let args = request.args.to_value();
                let path = args["path"].as_str().unwrap_or_default();
                let content = args["content"].as_str().unwrap_or_default();
                PolicyDecision::need_approval_json(
                    "file_write",
                    format!("write {} line(s) to {path}", content.lines().count()),
                    &serde_json::json!({ "tool": request.spec.name, "path": path }),
                    &presentation(&request.spec.name, path, content),
                )
                .map_err(PolicyError::new)
            }
            _ => Ok(PolicyDecision::deny(
                "this demo allows reads and sends file writes to an operator; nothing else",
            )),
        }
    }

    fn policy_id(&self) -> Option<String> {
        Some("examples/mcp/file-write-asks/1".into())
    }
}

/// What an operator is shown for a write of `content` to `path` by `tool`:
/// a question, the path, the line and byte counts and a bounded
/// [`preview`] (the whole content is in the approval's arguments).
pub fn presentation(tool: &str, path: &str, content: &str) -> serde_json::Value {
    let lines = content.lines().count();
    serde_json::json!({
        "question": format!("Let the agent write {lines} line(s), {} bytes, to {path}?", content.len()),
        "tool": tool,
        "path": path,
        "lines": lines,
        "bytes": content.len(),
        "preview": preview(content),
    })
}

/// The first [`PREVIEW_LINES`] lines of `content`, at most
/// [`PREVIEW_BYTES`] bytes, cut on a character boundary and ending with
/// `…` when anything was left out.
pub fn preview(content: &str) -> String {
    const MORE: &str = "…";
    let shown: Vec<&str> = content.lines().take(PREVIEW_LINES).collect();
    let mut text = shown.join("\n");
    let whole = content.lines().count() <= PREVIEW_LINES;
    if whole && text.len() <= PREVIEW_BYTES {
        return text;
    }
    let mut end = text.len().min(PREVIEW_BYTES - MORE.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MORE);
    text
}

/// An agent made of `render` around the step's model caller.
pub struct ModelAgent {
    options: RenderOptions,
}

impl ModelAgent {
    /// The agent with this example's texts (no path in them: replay keys).
    pub fn new() -> ModelAgent {
        let options = RenderOptions::new(|input: &StepInput| {
            format!(
                "Goal: {}\nUse the tools to reach it, one tool call per reply. Call finish when done.",
                input.run.goal
            )
        })
        .with_system(
            "You are a careful assistant working in a sandbox directory. \
             Give every path relative to it (notes/monday.md), never an absolute one.",
        )
        .with_max_output_tokens(1024);
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

/// The terminal `finish` tool, in memory.
pub fn finish() -> Result<Arc<dyn Tool>, String> {
    let spec = ToolSpec::new(
        "finish",
        "Report the outcome and end the run",
        SideEffect::ReadOnly,
    )
    .terminal()
    .with_schema_str(
        r#"{"type":"object","properties":{"summary":{"type":"string"}},"required":["summary"]}"#,
    )
    .map_err(|e| e.to_string())?;
    Ok(Arc::new(tool_fn(spec, |call| async move {
        Ok(ToolResult::raw(call.args.as_str()).with_summary("finished"))
    })))
}

/// What the run step was asked to do.
pub struct Options {
    /// The operator directory (pinned first).
    pub layout: Layout,
    /// The server's entry point (`dist/index.js`).
    pub entry: PathBuf,
    /// Where replies come from.
    pub source: Source,
    /// Resume this run instead of starting one.
    pub resume: Option<String>,
    /// The id of a new run (random when absent).
    pub run_id: Option<String>,
}

/// The run as it stands after the step, and the approval it waits for.
pub struct Finished {
    /// The run.
    pub run: agentrt::Run,
    /// The pending approval, when it waits.
    pub approval: Option<String>,
}

/// The run step: loads the pinned, classified tools (printing the load
/// report), then starts or resumes the run; the server is closed after.
pub async fn run(
    options: &Options,
    observer: Arc<dyn Observer>,
    clock: Option<agentrt::Clock>,
    ids: Option<IdSource>,
    out: &mut dyn Write,
) -> Result<Finished, String> {
    let layout = &options.layout;
    let manifest =
        read_manifest(&layout.manifest()).map_err(|e| format!("{e} (run the pin step first)"))?;
    let rules = read_rules(&layout.rules()).map_err(|e| e.to_string())?;
    let sandbox = layout.sandbox();
    let sandbox = sandbox
        .canonicalize()
        .map_err(|e| format!("{}: {e} (run the pin step first)", sandbox.display()))?;
    let loaded = agentrt_mcp::load(&server(&options.entry, &sandbox)?, &manifest, &rules)
        .await
        .map_err(|e| e.to_string())?;
    let _ = write!(out, "{}", loaded.report.text());
    let mut tools = loaded.tools.clone();
    let driven = match finish() {
        Ok(finish) => {
            tools.push(finish);
            drive(options, tools, observer, clock, ids, out).await
        }
        Err(e) => Err(e),
    };
    loaded.connection.close().await;
    driven
}

/// Starts or resumes the run with `tools`.
async fn drive(
    options: &Options,
    tools: Vec<Arc<dyn Tool>>,
    observer: Arc<dyn Observer>,
    clock: Option<agentrt::Clock>,
    ids: Option<IdSource>,
    out: &mut dyn Write,
) -> Result<Finished, String> {
    let store = Store::open(options.layout.db()).map_err(|e| e.to_string())?;
    let model = model_source::model(&options.source, MODEL_NAME)?;
    let mut config = GateConfig::new(store.clone(), FileWriteAsks, tools)
        .with_model(ModelConfig::new(model, PriceTable::free([MODEL_NAME])))
        .with_lease_owner("examples-mcp");
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
        None => driver.start(options.run_id.as_deref(), GOAL, limits).await,
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
