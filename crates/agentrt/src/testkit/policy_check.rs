//! Policy conformance tables.
//!
//! [`check_policy`] puts a table of cases to a policy the way the loop
//! does: the tool must be registered, the arguments must pass the boundary
//! check and then the tool's schema, and only then is the policy asked. Every
//! case whose answer differs from the one it wants lands in one
//! [`Disagreements`] table. [`never()`] asserts a policy never gives one
//! outcome to a class of tools over fuzzed arguments, and [`stand_in`] gives
//! tests registered tools without their effects.
//!
//! Each policy is asked about a fresh RUNNING run (id `policy-check-run`,
//! goal `policy check`, default limits, created at the Unix epoch, step
//! count 1: the step being judged) with no earlier steps and no approvals;
//! the step id is `policy-check-step`.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::fuzz::Fuzz;
use crate::clock::Timestamp;
use crate::json::Canonical;
use crate::model::{
    BoxFuture, Decision, Limits, NewRunFields, Outcome, PolicyDecision, RecordedDecision, Run,
    RunView, SideEffect, Tool, ToolCall, ToolError, ToolRequest, ToolResult, ToolSpec,
};
use crate::policy::Policy;
use crate::registry::Registry;
use crate::text::sanitize;

/// The run id of the view policies are asked with.
const RUN_ID: &str = "policy-check-run";
/// The step id of the requests policies are asked about.
const STEP_ID: &str = "policy-check-step";

/// What a case expects: a policy outcome, or that the runtime refuses the
/// request before the policy sees it.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt::testkit::policy_check::Want;
/// assert_eq!(Want::from(Outcome::Deny), Want::Outcome(Outcome::Deny));
/// assert_eq!(Want::Refused.to_string(), "refused");
/// assert_eq!(Want::Outcome(Outcome::RequireApproval).to_string(), "require_approval");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// The policy answers this outcome.
    Outcome(Outcome),
    /// The runtime refuses the request (unknown tool, arguments that are
    /// not acceptable JSON or fail the schema); the policy is never asked.
    Refused,
}

impl From<Outcome> for Want {
    fn from(outcome: Outcome) -> Want {
        Want::Outcome(outcome)
    }
}

impl fmt::Display for Want {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Want::Outcome(o) => f.write_str(o.as_str()),
            Want::Refused => f.write_str("refused"),
        }
    }
}

/// One row of a conformance table: a named tool request and what it should
/// get.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt::testkit::policy_check::{PolicyCase, Want};
/// let case = PolicyCase::new("reads are allowed", "fs_read", r#"{"path":"a"}"#, Outcome::Allow);
/// assert_eq!(case.want, Want::Outcome(Outcome::Allow));
/// let bad = PolicyCase::new("broken JSON is refused", "fs_read", b"{".to_vec(), Want::Refused);
/// assert_eq!(bad.args, b"{");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyCase {
    /// The case's name, shown in the table.
    pub name: String,
    /// The tool the request names.
    pub tool: String,
    /// The argument bytes, as an agent would send them (blank means `{}`).
    pub args: Vec<u8>,
    /// What the request should get.
    pub want: Want,
}

impl PolicyCase {
    /// A case; `want` is a [`Want`] or an [`Outcome`].
    ///
    /// ```
    /// use agentrt::Outcome;
    /// use agentrt::testkit::policy_check::{PolicyCase, Want};
    /// let case = PolicyCase::new("pushes ask first", "git_push", "{}", Outcome::RequireApproval);
    /// assert_eq!(case.want, Want::Outcome(Outcome::RequireApproval));
    /// ```
    pub fn new(
        name: impl Into<String>,
        tool: impl Into<String>,
        args: impl Into<Vec<u8>>,
        want: impl Into<Want>,
    ) -> PolicyCase {
        PolicyCase {
            name: name.into(),
            tool: tool.into(),
            args: args.into(),
            want: want.into(),
        }
    }
}

/// What a request got.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt::testkit::policy_check::Got;
/// assert_eq!(Got::Outcome(Outcome::Allow).to_string(), "allow");
/// assert_eq!(Got::Refused("no tool".into()).to_string(), "refused: no tool");
/// assert_eq!(Got::PolicyError("boom".into()).to_string(), "error: boom");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    /// The policy's answer.
    Outcome(Outcome),
    /// The runtime refused the request, saying why (the loop's text).
    Refused(String),
    /// The policy failed (or panicked); the loop would end the run
    /// `internal_error`.
    PolicyError(String),
    /// The tools could not be registered, so no request could be made (the
    /// runtime would refuse to start); never agrees with any want.
    ToolsRefused(String),
}

impl Got {
    /// Whether this is what `want` asks for.
    ///
    /// ```
    /// use agentrt::Outcome;
    /// use agentrt::testkit::policy_check::{Got, Want};
    /// assert!(Got::Refused("x".into()).agrees(Want::Refused));
    /// assert!(!Got::PolicyError("x".into()).agrees(Want::Outcome(Outcome::Deny)));
    /// ```
    pub fn agrees(&self, want: Want) -> bool {
        match (self, want) {
            (Got::Outcome(got), Want::Outcome(wanted)) => *got == wanted,
            (Got::Refused(_), Want::Refused) => true,
            _ => false,
        }
    }
}

impl fmt::Display for Got {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Got::Outcome(o) => f.write_str(o.as_str()),
            Got::Refused(why) => write!(f, "refused: {why}"),
            Got::PolicyError(e) => write!(f, "error: {e}"),
            Got::ToolsRefused(why) => write!(f, "tools refused: {why}"),
        }
    }
}

/// A case that got something other than it wanted.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt::testkit::policy_check::{Disagreement, Got, Want};
/// let row = Disagreement {
///     case: "deletes pass".into(),
///     tool: "rm".into(),
///     want: Want::Outcome(Outcome::Allow),
///     got: Got::Outcome(Outcome::Deny),
/// };
/// assert_eq!(row.got.to_string(), "deny");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// The case's name.
    pub case: String,
    /// The tool it named.
    pub tool: String,
    /// What it wanted.
    pub want: Want,
    /// What it got.
    pub got: Got,
}

/// Every disagreement of a [`check_policy`] table, in case order.
///
/// `Display` (and `Debug`, so a failed `unwrap` shows it) is an aligned
/// text table with the columns case, tool, want and got; cells are made
/// safe to print on one line.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt::testkit::policy_check::{Disagreement, Disagreements, Got, Want};
/// let table = Disagreements {
///     rows: vec![Disagreement {
///         case: "deletes pass".into(),
///         tool: "rm".into(),
///         want: Want::Outcome(Outcome::Allow),
///         got: Got::Outcome(Outcome::Deny),
///     }],
/// };
/// assert_eq!(
///     table.to_string(),
///     "case          tool  want   got\n\
///      deletes pass  rm    allow  deny\n"
/// );
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Disagreements {
    /// One row per disagreeing case.
    pub rows: Vec<Disagreement>,
}

impl fmt::Display for Disagreements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows: Vec<[String; 4]> = self
            .rows
            .iter()
            .map(|r| {
                [
                    r.case.clone(),
                    r.tool.clone(),
                    r.want.to_string(),
                    r.got.to_string(),
                ]
            })
            .collect();
        f.write_str(&table(["case", "tool", "want", "got"], &rows))
    }
}

impl fmt::Debug for Disagreements {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} disagreement(s):\n{self}", self.rows.len())
    }
}

impl std::error::Error for Disagreements {}

/// An aligned text table: a header row, then the rows; every column but the
/// last padded to its widest cell; cells sanitized.
fn table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let clean = |s: &str| sanitize(s);
    let header = header.map(clean);
    let rows: Vec<[String; N]> = rows.iter().map(|r| r.clone().map(|c| clean(&c))).collect();
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i + 1 < N {
                line.push_str(&format!("{cell:<width$}  "));
            } else {
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The runtime's acceptance and a fresh view, shared by every case.
struct Bench {
    registry: Registry,
    view: RunView,
}

impl Bench {
    /// Registers the tools as the gate would (stand-ins carry the specs).
    fn new(tools: &[ToolSpec]) -> Result<Bench, String> {
        let tools: Vec<Arc<dyn Tool>> = tools
            .iter()
            .map(|spec| Arc::new(StandIn::from_spec(spec.clone())) as Arc<dyn Tool>)
            .collect();
        let registry = Registry::new(tools).map_err(|e| e.to_string())?;
        Ok(Bench {
            registry,
            view: fresh_view(),
        })
    }

    /// The request the loop would put to the policy, or why it refuses it
    /// first (the loop's own texts).
    fn request(&self, tool: &str, args: &[u8]) -> Result<ToolRequest, String> {
        let (recorded, problems) = RecordedDecision::record(&Decision::tool_call(tool, args));
        if recorded.tool.trim().is_empty() {
            return Err("the tool call names no tool".into());
        }
        let Some(registered) = self.registry.get(&recorded.tool) else {
            return Err(format!("no tool named {:?} is registered", recorded.tool));
        };
        if let Some(e) = problems.args {
            return Err(format!("the arguments are not acceptable JSON: {e}"));
        }
        let args = recorded.args_or_empty();
        registered.schema.check(&args)?;
        Ok(ToolRequest {
            run_id: RUN_ID.into(),
            step_id: STEP_ID.into(),
            spec: registered.spec.clone(),
            args,
        })
    }

    /// The policy's decision, or what stopped it.
    fn judge(&self, policy: &dyn Policy, tool: &str, args: &[u8]) -> Result<PolicyDecision, Got> {
        let request = self.request(tool, args).map_err(Got::Refused)?;
        crate::policy::evaluate_guarded(policy, &request, &self.view)
            .map_err(|e| Got::PolicyError(e.message))
    }
}

/// A fresh RUNNING run at its first step, with no steps and no approvals.
fn fresh_view() -> RunView {
    let mut run = Run::new_running(NewRunFields {
        id: RUN_ID.into(),
        goal: "policy check".into(),
        limits: Limits::default(),
        labels: crate::model::Labels::new(),
        created_at: Timestamp::from_unix_nanos(0),
    });
    // The policy sees the step being judged already counted.
    run.step_count = 1;
    RunView {
        run,
        steps: Arc::new(Vec::new()),
        approvals: Arc::new(Vec::new()),
    }
}

/// Runs every case through the runtime's own acceptance (tool registered,
/// boundary check, schema check, exactly as the loop does; blank arguments
/// mean `{}`) and then through the policy, asked with the view of a fresh
/// RUNNING run (see the [module docs](self)). A panicking policy is a
/// policy error, never a panic here.
///
/// # Errors
///
/// One table of every case whose answer differs from its want. If the
/// tools cannot be registered (empty or repeated name, zero timeout, a
/// schema that does not compile), every case gets [`Got::ToolsRefused`].
///
/// ```
/// use agentrt::testkit::policy_check::{PolicyCase, Want, check_policy};
/// use agentrt::{DefaultPolicy, Outcome, SideEffect, ToolSpec};
/// let tools = [
///     ToolSpec::new("fs_read", "", SideEffect::ReadOnly)
///         .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#)?,
///     ToolSpec::new("rm", "", SideEffect::Destructive),
/// ];
/// let cases = [
///     PolicyCase::new("reads pass", "fs_read", r#"{"path":"a"}"#, Outcome::Allow),
///     PolicyCase::new("a read without a path", "fs_read", "{}", Want::Refused),
///     PolicyCase::new("deletes are denied", "rm", r#"{"path":"/"}"#, Outcome::Deny),
///     PolicyCase::new("no such tool", "sudo", "{}", Want::Refused),
/// ];
/// assert_eq!(check_policy(&DefaultPolicy, &tools, &cases), Ok(()));
///
/// let wrong = [PolicyCase::new("deletes pass", "rm", "{}", Outcome::Allow)];
/// let table = check_policy(&DefaultPolicy, &tools, &wrong).unwrap_err();
/// assert_eq!(table.rows.len(), 1);
/// assert!(table.to_string().contains("deletes pass  rm    allow  deny"));
/// # Ok::<(), agentrt::JsonError>(())
/// ```
pub fn check_policy(
    policy: &dyn Policy,
    tools: &[ToolSpec],
    cases: &[PolicyCase],
) -> Result<(), Disagreements> {
    let bench = Bench::new(tools);
    let rows: Vec<Disagreement> = cases
        .iter()
        .filter_map(|case| {
            let got = match &bench {
                Err(why) => Got::ToolsRefused(why.clone()),
                Ok(bench) => match bench.judge(policy, &case.tool, &case.args) {
                    Ok(decision) => Got::Outcome(decision.outcome),
                    Err(got) => got,
                },
            };
            (!got.agrees(case.want)).then(|| Disagreement {
                case: case.name.clone(),
                tool: case.tool.clone(),
                want: case.want,
                got,
            })
        })
        .collect();
    if rows.is_empty() {
        Ok(())
    } else {
        Err(Disagreements { rows })
    }
}

/// A request that got the outcome [`never()`] forbids.
///
/// ```
/// use agentrt::json::Canonical;
/// use agentrt::testkit::policy_check::Hit;
/// let hit = Hit { tool: "rm".into(), args: Canonical::parse_str(r#"{"path":"/"}"#)?, reason: "ok".into() };
/// assert_eq!(hit.args.as_str(), r#"{"path":"/"}"#);
/// # Ok::<(), agentrt::JsonError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The tool.
    pub tool: String,
    /// The arguments, canonical.
    pub args: Canonical,
    /// The policy's reason.
    pub reason: String,
}

/// What [`never()`] found: every (tool, arguments) that got the forbidden
/// outcome, and whatever could not be checked.
///
/// `Display` (and `Debug`, so a failed `unwrap` shows it) lists the hits
/// as a table of tool, args and reason, then the unchecked items.
///
/// ```
/// use agentrt::json::Canonical;
/// use agentrt::testkit::policy_check::{Hit, NeverViolations};
/// use agentrt::{Outcome, SideEffect};
/// let found = NeverViolations {
///     class: SideEffect::Destructive,
///     outcome: Outcome::Allow,
///     hits: vec![Hit { tool: "rm".into(), args: Canonical::parse_str("{}")?, reason: "fine".into() }],
///     unchecked: vec![],
/// };
/// assert_eq!(
///     found.to_string(),
///     "the policy answered allow for destructive tools:\n\
///      tool  args  reason\n\
///      rm    {}    fine\n"
/// );
/// # Ok::<(), agentrt::JsonError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct NeverViolations {
    /// The class of tools checked.
    pub class: SideEffect,
    /// The outcome that must never be answered.
    pub outcome: Outcome,
    /// Each distinct request that got it, in tool and generation order.
    pub hits: Vec<Hit>,
    /// What could not be checked (tools that cannot be registered, tools
    /// the fuzzer found no arguments for, generated arguments the runtime
    /// refused).
    pub unchecked: Vec<String>,
}

impl fmt::Display for NeverViolations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.hits.is_empty() {
            writeln!(
                f,
                "the policy answered {} for {} tools:",
                self.outcome, self.class
            )?;
            let rows: Vec<[String; 3]> = self
                .hits
                .iter()
                .map(|h| {
                    let args = crate::text::truncate(h.args.as_str(), 200);
                    [h.tool.clone(), args, h.reason.clone()]
                })
                .collect();
            f.write_str(&table(["tool", "args", "reason"], &rows))?;
        }
        if !self.unchecked.is_empty() {
            writeln!(f, "could not check:")?;
            for item in &self.unchecked {
                writeln!(f, "  {}", sanitize(item))?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for NeverViolations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} hit(s):\n{self}", self.hits.len())
    }
}

impl std::error::Error for NeverViolations {}

/// Asserts a policy never answers `outcome` for any tool of `class` over
/// the arguments `fuzz.valid` generates for it (each request accepted by
/// the runtime first, as in [`check_policy`]). Tools of other classes are
/// not asked about; with no tool of `class` it holds trivially. A policy
/// error (or panic) is not `outcome`.
///
/// # Errors
///
/// Every distinct (tool, arguments) that got `outcome`, and anything that
/// could not be checked.
///
/// ```
/// use agentrt::testkit::{fuzz::Fuzz, policy_check::never};
/// use agentrt::{DefaultPolicy, Outcome, SideEffect, ToolSpec};
/// let tools = [
///     ToolSpec::new("rm", "", SideEffect::Destructive)
///         .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#)?,
///     ToolSpec::new("ls", "", SideEffect::ReadOnly),
/// ];
/// let fuzz = Fuzz::default();
/// assert!(never(&DefaultPolicy, &tools, SideEffect::Destructive, Outcome::Allow, &fuzz).is_ok());
/// let found = never(&DefaultPolicy, &tools, SideEffect::ReadOnly, Outcome::Allow, &fuzz).unwrap_err();
/// assert!(found.hits.iter().all(|h| h.tool == "ls"));
/// # Ok::<(), agentrt::JsonError>(())
/// ```
pub fn never(
    policy: &dyn Policy,
    tools: &[ToolSpec],
    class: SideEffect,
    outcome: Outcome,
    fuzz: &Fuzz,
) -> Result<(), NeverViolations> {
    let mut found = NeverViolations {
        class,
        outcome,
        hits: Vec::new(),
        unchecked: Vec::new(),
    };
    match Bench::new(tools) {
        Err(why) => found.unchecked.push(why),
        Ok(bench) => {
            for spec in tools.iter().filter(|s| s.side_effect == class) {
                never_for(&bench, policy, spec, fuzz, &mut found);
            }
        }
    }
    if found.hits.is_empty() && found.unchecked.is_empty() {
        Ok(())
    } else {
        Err(found)
    }
}

/// Puts one tool's fuzzed arguments to the policy.
fn never_for(
    bench: &Bench,
    policy: &dyn Policy,
    spec: &ToolSpec,
    fuzz: &Fuzz,
    found: &mut NeverViolations,
) {
    let values = match fuzz.valid(spec) {
        Ok(values) => values,
        Err(e) => {
            found.unchecked.push(e.to_string());
            return;
        }
    };
    for args in values {
        match bench.judge(policy, &spec.name, args.as_bytes()) {
            Ok(decision) if decision.outcome == found.outcome => {
                let hit = Hit {
                    tool: spec.name.clone(),
                    args,
                    reason: decision.reason,
                };
                if !found.hits.contains(&hit) {
                    found.hits.push(hit);
                }
            }
            Err(Got::Refused(why)) => found.unchecked.push(format!(
                "tool {:?}: generated arguments {} were refused: {why}",
                spec.name,
                crate::text::truncate(args.as_str(), 200)
            )),
            Ok(_) | Err(_) => {}
        }
    }
}

/// A stand-in tool: a spec, and calls that succeed with `{}` and are
/// counted. For policy tests that need registered tools without their
/// effects. Clones share the count, so keep a clone to read it after
/// handing the tool to a driver.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use agentrt::testkit::policy_check::stand_in;
/// use agentrt::*;
/// let push = stand_in("git_push", SideEffect::RemoteMutation);
/// let ls = stand_in("ls", SideEffect::ReadOnly);
/// let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(push.clone()), Arc::new(ls.clone())];
/// let agent = ScriptedAgent::new([Decision::tool_call("ls", "{}"), Decision::tool_call("git_push", "{}")]);
/// let mut driver = Driver::new(GateConfig::new(Store::open(":memory:")?, DefaultPolicy, tools), agent)?;
/// let run = driver.start(None, "look, then push", Limits::default()).await?;
/// assert_eq!(run.status, RunStatus::WaitingForApproval);
/// assert_eq!((ls.calls(), push.calls()), (1, 0));
/// # Ok::<(), agentrt::Error>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct StandIn {
    spec: ToolSpec,
    calls: Arc<AtomicUsize>,
}

/// A [`StandIn`] named `name` of side-effect class `class`, with the
/// schema `{"type":"object"}` and a 30 s timeout.
///
/// ```
/// use agentrt::SideEffect;
/// use agentrt::testkit::policy_check::stand_in;
/// let rm = stand_in("rm", SideEffect::Destructive);
/// assert_eq!(rm.spec().input_schema.as_str(), r#"{"type":"object"}"#);
/// assert_eq!(rm.calls(), 0);
/// ```
pub fn stand_in(name: &str, class: SideEffect) -> StandIn {
    StandIn::from_spec(ToolSpec::new(name, "stand-in tool (no effect)", class))
}

impl StandIn {
    /// A stand-in with this spec (its schema, timeout and terminal flag
    /// included).
    ///
    /// ```
    /// use agentrt::testkit::policy_check::StandIn;
    /// use agentrt::{SideEffect, ToolSpec};
    /// let spec = ToolSpec::new("fs_write", "", SideEffect::LocalMutation)
    ///     .with_schema_str(r#"{"type":"object","required":["path"]}"#)?;
    /// assert_eq!(StandIn::from_spec(spec.clone()).spec(), spec);
    /// # Ok::<(), agentrt::JsonError>(())
    /// ```
    pub fn from_spec(spec: ToolSpec) -> StandIn {
        StandIn {
            spec,
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// How many times this tool (or a clone) was called.
    ///
    /// ```
    /// let t = agentrt::testkit::policy_check::stand_in("t", agentrt::SideEffect::ReadOnly);
    /// assert_eq!(t.clone().calls(), t.calls());
    /// ```
    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    /// The spec (the same as [`Tool::spec`]).
    ///
    /// ```
    /// let t = agentrt::testkit::policy_check::stand_in("t", agentrt::SideEffect::ReadOnly);
    /// assert_eq!(t.spec().name, "t");
    /// ```
    pub fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }
}

impl Tool for StandIn {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, _call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(ToolResult::raw("{}").with_summary("stand-in: no effect")) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{DefaultPolicy, PolicyError};

    /// A policy answering from a function of the request.
    struct FnPolicy<F>(F);

    impl<F> Policy for FnPolicy<F>
    where
        F: Fn(&ToolRequest) -> Result<PolicyDecision, PolicyError> + Send + Sync,
    {
        fn evaluate(&self, r: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
            (self.0)(r)
        }
    }

    fn tools() -> Vec<ToolSpec> {
        let read = ToolSpec::new("fs_read", "", SideEffect::ReadOnly)
            .with_schema_str(
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#,
            )
            .expect("schema");
        vec![read, stand_in("rm", SideEffect::Destructive).spec()]
    }

    #[test]
    fn agreeing_cases_pass_and_each_disagreement_is_one_row() {
        let cases = [
            PolicyCase::new("read", "fs_read", r#"{"path":"a"}"#, Outcome::Allow),
            PolicyCase::new("rm wrongly allowed", "rm", "{}", Outcome::Allow),
            PolicyCase::new("rm denied", "rm", "", Outcome::Deny),
            PolicyCase::new(
                "read refused wrongly",
                "fs_read",
                r#"{"path":"b"}"#,
                Want::Refused,
            ),
        ];
        let table = check_policy(&DefaultPolicy, &tools(), &cases).expect_err("two rows");
        assert_eq!(
            table.rows,
            vec![
                Disagreement {
                    case: "rm wrongly allowed".into(),
                    tool: "rm".into(),
                    want: Want::Outcome(Outcome::Allow),
                    got: Got::Outcome(Outcome::Deny),
                },
                Disagreement {
                    case: "read refused wrongly".into(),
                    tool: "fs_read".into(),
                    want: Want::Refused,
                    got: Got::Outcome(Outcome::Allow),
                },
            ]
        );
        assert_eq!(
            table.to_string(),
            "case                  tool     want     got\n\
             rm wrongly allowed    rm       allow    deny\n\
             read refused wrongly  fs_read  refused  allow\n"
        );
    }

    #[test]
    fn refusals_use_the_loops_reasons() {
        let policy = FnPolicy(|_: &ToolRequest| Ok(PolicyDecision::allow()));
        let cases = [
            ("", "{}", "the tool call names no tool"),
            ("sudo", "{}", "no tool named \"sudo\" is registered"),
            ("fs_read", "{", "the arguments are not acceptable JSON: "),
            ("fs_read", r#"{"path":1,"path":2}"#, "repeats the key"),
            ("fs_read", "{}", "arguments do not match the schema"),
            ("fs_read", "null", "arguments do not match the schema"),
        ];
        for (tool, args, why) in cases {
            let case = PolicyCase::new("c", tool, args, Outcome::Allow);
            let table = check_policy(&policy, &tools(), &[case]).expect_err(tool);
            match &table.rows[..] {
                [
                    Disagreement {
                        got: Got::Refused(text),
                        ..
                    },
                ] => {
                    assert!(text.contains(why), "{text:?} lacks {why:?}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_panicking_or_failing_policy_is_a_policy_error() {
        let panics = FnPolicy(|_: &ToolRequest| -> Result<PolicyDecision, PolicyError> {
            panic!("policy bug")
        });
        let case = PolicyCase::new("c", "rm", "{}", Outcome::Deny);
        let table = check_policy(&panics, &tools(), std::slice::from_ref(&case)).expect_err("row");
        assert_eq!(
            table.rows[0].got,
            Got::PolicyError("the policy panicked: policy bug".into())
        );
        let fails = FnPolicy(|_: &ToolRequest| Err(PolicyError::new("no rules")));
        let table = check_policy(&fails, &tools(), &[case]).expect_err("row");
        assert_eq!(table.rows[0].got, Got::PolicyError("no rules".into()));
        assert!(table.to_string().contains("error: no rules"));
    }

    #[test]
    fn the_policy_sees_a_fresh_running_run_and_canonical_args() {
        let policy = FnPolicy(|r: &ToolRequest| {
            assert_eq!(r.args.as_str(), r#"{"path":"a b"}"#);
            assert_eq!((r.run_id.as_str(), r.step_id.as_str()), (RUN_ID, STEP_ID));
            Ok(PolicyDecision::deny("checked"))
        });
        let case = PolicyCase::new("c", "fs_read", r#"{ "path" : "a\u0020b" }"#, Outcome::Deny);
        assert_eq!(check_policy(&policy, &tools(), &[case]), Ok(()));
        let view = fresh_view();
        assert_eq!(view.run.status, crate::model::RunStatus::Running);
        assert_eq!(view.run.step_count, 1);
        assert!(view.steps.is_empty() && view.approvals.is_empty());
    }

    #[test]
    fn tools_that_cannot_register_fail_every_case() {
        let twice = [
            stand_in("a", SideEffect::ReadOnly).spec(),
            stand_in("a", SideEffect::ReadOnly).spec(),
        ];
        let case = PolicyCase::new("c", "a", "{}", Want::Refused);
        let table = check_policy(&DefaultPolicy, &twice, &[case]).expect_err("row");
        assert!(matches!(&table.rows[0].got, Got::ToolsRefused(why) if why.contains("same name")));
        let found = never(
            &DefaultPolicy,
            &twice,
            SideEffect::ReadOnly,
            Outcome::Deny,
            &Fuzz::default(),
        )
        .expect_err("unchecked");
        assert_eq!(found.unchecked.len(), 1);
    }

    #[test]
    fn never_names_the_argument_value_that_got_the_outcome() {
        let policy = FnPolicy(|r: &ToolRequest| {
            if r.args
                .get("path")
                .is_some_and(|p| p.as_str() == r#""/tmp""#)
            {
                Ok(PolicyDecision::allow_because("scratch space"))
            } else {
                DefaultPolicy.evaluate(r, &fresh_view())
            }
        });
        let rm = ToolSpec::new("rm", "", SideEffect::Destructive)
            .with_schema_str(r#"{"type":"object","properties":{"path":{"enum":["/","/tmp","/home"]}},"required":["path"],"additionalProperties":false}"#)
            .expect("schema");
        let found = never(
            &policy,
            &[rm],
            SideEffect::Destructive,
            Outcome::Allow,
            &Fuzz::default(),
        )
        .expect_err("the /tmp value is allowed");
        assert_eq!(found.hits.len(), 1);
        assert_eq!(found.hits[0].args.as_str(), r#"{"path":"/tmp"}"#);
        assert!(
            found
                .to_string()
                .contains(r#"rm    {"path":"/tmp"}  scratch space"#),
            "{found}"
        );
    }

    #[tokio::test]
    async fn stand_ins_count_calls_across_clones() {
        let t = stand_in("t", SideEffect::ReadOnly);
        let call = ToolCall {
            run_id: "r".into(),
            step_id: "s".into(),
            args: Canonical::empty_object(),
            cancel: crate::cancel::Cancel::never(),
        };
        let result = Tool::call(&t.clone(), call).await.expect("succeeds");
        assert_eq!(result.content, b"{}");
        assert_eq!(t.calls(), 1);
    }
}
