//! The cedar example's logic, shared by the example binary and its test.

use std::io::Write;
use std::sync::Arc;

use agentrt::verify::{VerifyOptions, verify};
use agentrt::{
    Decision, Driver, EventType, GateConfig, Labels, Limits, RunStatus, ScriptedAgent, SideEffect,
    Store, Tool, ToolResult, ToolSpec, ids::sequential_ids, tool_fn,
};
use agentrt_cedar::CedarPolicy;

pub const USAGE: &str = "usage: cargo run --example cedar -- [--db PATH]

  --db PATH  the SQLite file to record the runs in (default: in memory), or a
             postgres:// URL";

/// The enforced policy (docs/policy.md walks through it).
pub const POLICY: &str = include_str!("policy.cedar");
/// A stricter policy tried beside it.
pub const SHADOW: &str = include_str!("shadow.cedar");

/// The tools the policy decides: (name, class, JSON Schema).
const TOOLS: &[(&str, SideEffect, &str)] = &[
    (
        "write_file",
        SideEffect::LocalMutation,
        r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}"#,
    ),
    (
        "delete_file",
        SideEffect::Destructive,
        r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#,
    ),
    (
        "push",
        SideEffect::RemoteMutation,
        r#"{"type":"object","properties":{"branch":{"type":"string"}},"required":["branch"]}"#,
    ),
    (
        "send_mail",
        SideEffect::RemoteMutation,
        r#"{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"body":{"type":"string"}},"required":["to","subject","body"]}"#,
    ),
    (
        "deploy",
        SideEffect::RemoteMutation,
        r#"{"type":"object","properties":{"service":{"type":"string"},"environment":{"type":"string","enum":["staging","prod"]}},"required":["service","environment"]}"#,
    ),
];

/// The tools' specs (what `tools.json` holds).
pub fn specs() -> Result<Vec<ToolSpec>, agentrt::json::JsonError> {
    TOOLS
        .iter()
        .map(|(name, class, schema)| {
            ToolSpec::new(
                *name,
                format!("{} (example)", name.replace('_', " ")),
                *class,
            )
            .with_schema_str(schema)
        })
        .collect()
}

/// Each tool answers with its arguments: what matters here is the
/// decision about calling it.
fn tools() -> Result<Vec<Arc<dyn Tool>>, agentrt::json::JsonError> {
    Ok(specs()?
        .into_iter()
        .map(|spec| {
            let name = spec.name.clone();
            Arc::new(tool_fn(spec, move |call| {
                let name = name.clone();
                async move {
                    Ok(ToolResult::raw(call.args.as_str()).with_summary(format!("{name} done")))
                }
            })) as Arc<dyn Tool>
        })
        .collect())
}

/// The runs: id, labels, goal, decisions.
pub fn runs() -> Vec<(&'static str, [&'static str; 2], &'static str, Vec<Decision>)> {
    let call = |tool: &str, args: &str| Decision::tool_call(tool, args);
    vec![
        (
            "docs-1",
            ["principal=ann", "group=docs"],
            "draft the plan, push the fix, update the README",
            vec![
                call(
                    "write_file",
                    r#"{"path":"notes/drafts/plan.md","content":"the plan"}"#,
                ),
                call("push", r#"{"branch":"fix-typo"}"#),
                call(
                    "write_file",
                    r#"{"path":"README.md","content":"new README"}"#,
                ),
            ],
        ),
        (
            "release-1",
            ["principal=rel", "group=release"],
            "deploy the api and tell ops",
            vec![
                call("deploy", r#"{"service":"api","environment":"prod"}"#),
                call(
                    "send_mail",
                    r#"{"to":"ops@example.com","subject":"deployed","body":"api"}"#,
                ),
                Decision::complete(r#"{"deployed":"api"}"#),
            ],
        ),
        (
            "docs-2",
            ["principal=bob", "group=docs"],
            "deploy the api and tell a friend",
            vec![
                call("deploy", r#"{"service":"api","environment":"prod"}"#),
                call(
                    "send_mail",
                    r#"{"to":"friend@elsewhere.org","subject":"hi","body":"api"}"#,
                ),
                Decision::complete("\"done\""),
            ],
        ),
    ]
}

/// What one run came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    /// The run.
    pub run_id: String,
    /// Its status.
    pub status: RunStatus,
    /// Each step's tool, outcome and reason.
    pub decided: Vec<(String, String, String)>,
    /// How many times the shadow policy disagreed.
    pub shadow_disagreements: usize,
}

/// Records the runs under the Cedar policy (the shadow beside it), prints
/// what each request got, and verifies the chain.
pub async fn run(
    store: &Store,
    out: &mut dyn Write,
) -> Result<Vec<Ran>, Box<dyn std::error::Error>> {
    let specs = specs()?;
    let policy = CedarPolicy::new(POLICY, &specs)?;
    let shadow = CedarPolicy::new(SHADOW, &specs)?;
    writeln!(out, "policy {}", policy.identity())?;
    writeln!(out, "shadow {}\n", shadow.identity())?;
    let (policy, shadow) = (Arc::new(policy), Arc::new(shadow));
    let mut ran = Vec::new();
    for (id, labels, goal, decisions) in runs() {
        let config = GateConfig::new(store.clone(), Arc::clone(&policy), tools()?)
            .with_shadow(Arc::clone(&shadow))
            .with_ids(sequential_ids(&format!("{id}-")));
        let mut driver = Driver::new(config, ScriptedAgent::new(decisions))?;
        let run = driver
            .start_labelled(Some(id), goal, Limits::default(), Labels::parse(labels)?)
            .await?;
        let decided: Vec<(String, String, String)> = store
            .list_steps(id)?
            .into_iter()
            .filter_map(|s| {
                let (decision, policy) = (s.decision?, s.policy?);
                Some((
                    decision.tool,
                    policy.outcome.as_str().to_owned(),
                    policy.reason,
                ))
            })
            .collect();
        let shadow_disagreements = store
            .list_events(id)?
            .iter()
            .filter(|e| e.event_type == EventType::PolicyShadow)
            .count();
        writeln!(out, "run {id} ({}): {}", labels.join(", "), run.status)?;
        for (tool, outcome, reason) in &decided {
            writeln!(out, "  {tool}: {outcome}: {reason}")?;
        }
        writeln!(
            out,
            "  the shadow policy disagreed {shadow_disagreements} time(s)"
        )?;
        ran.push(Ran {
            run_id: id.to_owned(),
            status: run.status,
            decided,
            shadow_disagreements,
        });
    }
    let report = verify(store, &VerifyOptions::default())?;
    writeln!(
        out,
        "\nverify: {}",
        if report.intact() { "intact" } else { "BROKEN" }
    )?;
    if !report.intact() {
        return Err("the chain does not verify".into());
    }
    Ok(ran)
}
