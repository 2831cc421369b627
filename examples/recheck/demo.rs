//! The recheck example's logic, shared by the example binary and its test.

use std::io::Write;
use std::sync::Arc;

use agentrt::recheck::{RecheckOptions, write_recheck};
use agentrt::{
    Decision, Driver, GateConfig, Limits, Outcome, Policy, RunStatus, ScriptedAgent, SideEffect,
    SideEffectPolicy, Store, Tool, ToolResult, ToolSpec, ids::sequential_ids, tool_fn,
};

pub const USAGE: &str = "usage: cargo run --example recheck -- [--db PATH]

  --db PATH  the SQLite file to record the runs in (default: in memory), or a
             postgres:// URL";

/// The identity of the policy the runs ran under.
pub const LENIENT: &str = "rules v1: mutations allowed";
/// The identity of the policy they are re-checked under.
pub const STRICT: &str = "rules v2: nothing leaves the machine";

/// Reads and local changes allowed, publishing allowed, deleting denied.
pub fn lenient() -> SideEffectPolicy {
    rules(LENIENT, Outcome::Allow)
}

/// The same, except that nothing is published any more.
pub fn strict() -> SideEffectPolicy {
    rules(STRICT, Outcome::Deny)
}

fn rules(id: &str, remote: Outcome) -> SideEffectPolicy {
    SideEffectPolicy::new()
        .with(SideEffect::ReadOnly, Outcome::Allow)
        .with(SideEffect::LocalMutation, Outcome::Allow)
        .with(SideEffect::RemoteMutation, remote)
        .with(SideEffect::Destructive, Outcome::Deny)
        .with_id(id)
}

/// Each tool answers with its arguments: what matters here is the
/// decision about calling it.
fn tools() -> Result<Vec<Arc<dyn Tool>>, agentrt::Error> {
    let schema = r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#;
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (name, class) in [
        ("read", SideEffect::ReadOnly),
        ("write", SideEffect::LocalMutation),
        ("publish", SideEffect::RemoteMutation),
    ] {
        let spec = ToolSpec::new(name, format!("{name} a file of the notes"), class)
            .with_schema_str(schema)?;
        tools.push(Arc::new(tool_fn(spec, move |call| async move {
            Ok(ToolResult::raw(call.args.as_str()).with_summary(format!("{name} done")))
        })));
    }
    Ok(tools)
}

fn call(tool: &str, path: &str) -> Decision {
    Decision::tool_call(tool, format!(r#"{{"path":"{path}"}}"#))
}

/// The runs recorded under the lenient policy: id, goal, decisions.
pub fn runs() -> Vec<(&'static str, &'static str, Vec<Decision>)> {
    vec![
        (
            "notes-1",
            "summarize the notes and post the summary",
            vec![
                call("read", "notes.md"),
                call("write", "summary.md"),
                call("publish", "summary.md"),
                Decision::complete(r#"{"published":"summary.md"}"#),
            ],
        ),
        (
            "notes-2",
            "tidy the notes",
            vec![
                call("read", "notes.md"),
                call("write", "notes.md"),
                Decision::complete(r#"{"tidied":"notes.md"}"#),
            ],
        ),
        (
            "notes-3",
            "announce the release, then its changelog",
            vec![
                call("publish", "release.md"),
                call("read", "CHANGELOG.md"),
                call("publish", "CHANGELOG.md"),
                Decision::complete(r#"{"published":2}"#),
            ],
        ),
    ]
}

/// What the stricter policy would have decided otherwise in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rechecked {
    /// The run.
    pub run_id: String,
    /// The steps it would have decided otherwise, by index.
    pub differing: Vec<u64>,
    /// The steps it would have stopped (denied), with their tool.
    pub stopped: Vec<(u64, String)>,
}

/// Records the runs under the lenient policy, then re-checks each under
/// the strict one and writes the reports to `out`.
pub async fn run(
    store: &Store,
    out: &mut dyn Write,
) -> Result<Vec<Rechecked>, Box<dyn std::error::Error>> {
    for (id, goal, decisions) in runs() {
        let config = GateConfig::new(store.clone(), lenient(), tools()?)
            .with_ids(sequential_ids(&format!("{id}-")));
        let mut driver = Driver::new(config, ScriptedAgent::new(decisions))?;
        let run = driver.start(Some(id), goal, Limits::default()).await?;
        writeln!(
            out,
            "run {id} ran under {LENIENT:?} and is {}: {goal}",
            run.status
        )?;
        if run.status != RunStatus::Completed {
            return Err(format!("run {id} did not complete: {}", run.reason_detail).into());
        }
    }
    let strict = strict();
    writeln!(out, "\nre-checked under {STRICT:?}:")?;
    let mut found = Vec::new();
    for (id, _, _) in runs() {
        found.push(recheck_one(store, id, &strict, out)?);
    }
    let differ = found.iter().filter(|r| !r.differing.is_empty()).count();
    writeln!(
        out,
        "{} run(s) re-checked: {differ} would have been decided otherwise",
        found.len()
    )?;
    Ok(found)
}

/// Re-checks one run and writes its report and the steps it would stop.
fn recheck_one(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
    out: &mut dyn Write,
) -> Result<Rechecked, Box<dyn std::error::Error>> {
    let report = agentrt::recheck::recheck(store, run_id, policy, &RecheckOptions::default())?;
    write_recheck(&report, out)?;
    let stopped: Vec<(u64, String)> = report
        .evaluations
        .iter()
        .filter(|e| e.result.is_different())
        .filter(|e| e.rechecked.as_ref().map(|d| d.outcome) == Some(Outcome::Deny))
        .filter_map(|e| Some((e.step_index?, e.tool.clone())))
        .collect();
    for (step, tool) in &stopped {
        writeln!(out, "would have been stopped: step {step}, {tool}")?;
    }
    writeln!(out)?;
    Ok(Rechecked {
        run_id: run_id.to_owned(),
        differing: report.differing_steps(),
        stopped,
    })
}
