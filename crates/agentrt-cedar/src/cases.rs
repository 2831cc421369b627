//! A policy's test cases: requests stated outside any run, each with the
//! outcome its author expects (`agentrt policy test`), and the tool list a
//! policy is checked against (`agentrt policy check --tools`).
//!
//! A cases file is one JSON array; each case:
//!
//! ```json
//! {"name": "a draft may be written", "tool": "fs_write_file",
//!  "args": {"path": "notes/drafts/a.md"}, "principal": "laptop",
//!  "resource": "fs", "labels": {"team": "docs"}, "run": {"calls_of_tool": 20},
//!  "recent": {"hour": 3},
//!  "expect": "allow", "reason_contains": "drafts"}
//! ```
//!
//! Only `tool` and `expect` are required; `args` defaults to `{}`,
//! `principal` to `anonymous`, `resource` to the tool's side-effect class,
//! `run`'s and `recent`'s counts to 0 (`recent` for a policy with windows). `expect` is `allow`, `require_approval`, `deny` or
//! `abort`.

use std::collections::BTreeMap;

use agentrt::{Canonical, Outcome, ToolSpec};
use serde::Deserialize;

use crate::facts::{Facts, RunFacts};
use crate::policy::{ANONYMOUS, CedarPolicy};

/// A cases or tools file that cannot be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {detail}")]
pub struct CasesError {
    /// Which file, or which case.
    pub what: String,
    /// What is wrong.
    pub detail: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    name: Option<String>,
    tool: String,
    #[serde(default = "empty_object")]
    args: Canonical,
    principal: Option<String>,
    resource: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    run: RunFacts,
    #[serde(default)]
    recent: BTreeMap<String, i64>,
    expect: String,
    reason_contains: Option<String>,
}

fn empty_object() -> Canonical {
    Canonical::empty_object()
}

/// One case, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Its name (`case N`, from 1, when the file gives none).
    pub name: String,
    /// The request.
    pub facts: Facts,
    /// The outcome expected.
    pub expect: Outcome,
    /// Text the reason must contain, if any.
    pub reason_contains: Option<String>,
}

/// A case's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case.
    pub case: Case,
    /// The outcome the policy gave (a deny when the request could not be
    /// put to Cedar, as `evaluate` decides it).
    pub outcome: Outcome,
    /// Its reason.
    pub reason: String,
}

impl CaseResult {
    /// Whether the policy gave the expected outcome (and reason text).
    pub fn passed(&self) -> bool {
        self.outcome == self.case.expect
            && self
                .case
                .reason_contains
                .as_deref()
                .is_none_or(|want| self.reason.contains(want))
    }
}

/// Reads a JSON file's bytes through the core's boundary check (no
/// repeated key, no trailing data) into `T`.
fn read_json<T: serde::de::DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T, CasesError> {
    let bad = |detail: String| CasesError {
        what: what.to_owned(),
        detail,
    };
    let canonical = Canonical::parse(bytes).map_err(|e| bad(e.to_string()))?;
    serde_json::from_str(canonical.as_str()).map_err(|e| bad(e.to_string()))
}

/// The tools of a tools file: one JSON array of tool specs as the core
/// writes them (`name`, `description`, `input_schema`, `side_effect`,
/// `timeout_ms`).
///
/// # Errors
///
/// The file is not such an array.
pub fn read_tools(bytes: &[u8]) -> Result<Vec<ToolSpec>, CasesError> {
    read_json(bytes, "the tools file")
}

#[derive(Deserialize)]
struct ManifestFile {
    server: String,
    tools: BTreeMap<String, PinnedFile>,
}

#[derive(Deserialize)]
struct PinnedFile {
    description: String,
    input_schema: Canonical,
    #[serde(default)]
    annotations: Option<serde_json::Value>,
}

/// The tools a pinned MCP manifest (as `agentrt-proxy pin` and agentrt-mcp
/// write it) offers under their default names (`<server>_<tool>`): what a
/// policy names and how their arguments are typed. A manifest holds no
/// operator's rules, so each class is read from the server's hints
/// (`readOnlyHint`: read_only; `destructiveHint`: destructive;
/// `openWorldHint`: remote_mutation; else local_mutation) and no tool is
/// renamed or loses a hidden parameter; for a proxy's exact offer, read
/// `agentrt-proxy tools`.
///
/// # Errors
///
/// The file is not a manifest.
pub fn read_manifest_tools(bytes: &[u8]) -> Result<Vec<ToolSpec>, CasesError> {
    let manifest: ManifestFile = read_json(bytes, "the manifest")?;
    Ok(manifest
        .tools
        .into_iter()
        .map(|(name, pinned)| {
            let hint = |key: &str| {
                pinned
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(key))
                    .and_then(serde_json::Value::as_bool)
                    .unwrap_or(false)
            };
            let class = if hint("readOnlyHint") {
                agentrt::SideEffect::ReadOnly
            } else if hint("destructiveHint") {
                agentrt::SideEffect::Destructive
            } else if hint("openWorldHint") {
                agentrt::SideEffect::RemoteMutation
            } else {
                agentrt::SideEffect::LocalMutation
            };
            let mut spec = ToolSpec::new(
                format!("{}_{name}", manifest.server),
                pinned.description,
                class,
            );
            spec.input_schema = pinned.input_schema;
            spec
        })
        .collect())
}

/// The cases of a cases file (see the [module docs](self)).
///
/// # Errors
///
/// The file is not an array of cases, or a case's `expect` is not an
/// outcome.
pub fn read_cases(bytes: &[u8]) -> Result<Vec<Case>, CasesError> {
    let files: Vec<CaseFile> = read_json(bytes, "the cases file")?;
    files
        .into_iter()
        .enumerate()
        .map(|(i, c)| {
            let name = c.name.unwrap_or_else(|| format!("case {}", i + 1));
            let expect = Outcome::parse(&c.expect).ok_or_else(|| CasesError {
                what: name.clone(),
                detail: format!(
                    "expect {:?} is not one of allow, require_approval, deny, abort",
                    c.expect
                ),
            })?;
            Ok(Case {
                facts: Facts {
                    tool: c.tool,
                    args: c.args,
                    principal: c.principal.unwrap_or_else(|| ANONYMOUS.to_owned()),
                    resource: c.resource,
                    labels: c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    recent: c.recent,
                    run: c.run,
                },
                name,
                expect,
                reason_contains: c.reason_contains,
            })
        })
        .collect()
}

/// Each case put to `policy`, in order.
///
/// ```
/// use agentrt::{SideEffect, ToolSpec};
/// use agentrt_cedar::CedarPolicy;
/// use agentrt_cedar::cases::{read_cases, run_cases};
/// let push = ToolSpec::new("push", "Push a branch", SideEffect::RemoteMutation)
///     .with_schema_str(r#"{"type":"object","properties":{"branch":{"type":"string"}},"required":["branch"]}"#)?;
/// let policy = CedarPolicy::new(
///     r#"permit(principal, action, resource);
///        @id("main") @approval("a push to main") permit(principal, action, resource)
///        when { context.args.branch == "main" };"#,
///     &[push],
/// )?;
/// let cases = read_cases(br#"[
///   {"tool": "push", "args": {"branch": "fix"}, "expect": "allow"},
///   {"tool": "push", "args": {"branch": "main"}, "expect": "allow"}
/// ]"#)?;
/// let results = run_cases(&policy, cases);
/// assert!(results[0].passed());
/// assert!(!results[1].passed(), "a push to main asks");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run_cases(policy: &CedarPolicy, cases: Vec<Case>) -> Vec<CaseResult> {
    cases
        .into_iter()
        .map(|case| {
            let decided = policy.decide(&case.facts);
            CaseResult {
                case,
                outcome: decided.outcome,
                reason: decided.reason,
            }
        })
        .collect()
}
