//! The crash-and-resume harness: runs a scenario, stops its loop at chosen
//! crash points as a crash would, resumes it in a fresh instance after the
//! lease expires, lets a scripted operator decide approvals, and checks the
//! invariants that make a side effect never run twice by accident, and
//! that the audit chain verifies intact.
//!
//! Leases are measured by a clock of the harness's own: a crashed
//! instance's lease expires when the harness moves that clock past it, not
//! after a wait, so a loaded machine cannot change what a scenario does.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::agent::{Agent, StepInput};
use crate::clock::{Clock, ManualClock, Timestamp, lock};
use crate::error::Error;
use crate::gate::{CrashHook, CrashPoint, Gate, GateConfig, Session, VerdictOutcome};
use crate::ids::IdSource;
use crate::model::{
    Approval, ApprovalStatus, BoxFuture, Decision, Event, EventType, Limits, Run, RunStatus, Step,
    StepStatus, Tool, ToolCall, ToolError, ToolResult, ToolSpec,
};
use crate::operator::{DecideOptions, Operator};
use crate::policy::Policy;
use crate::reconcile::Reconcile;
use crate::store::Store;
use crate::{AgentError, Driver};

/// Makes a fresh agent for each instance of the loop (a crashed instance's
/// agent is gone with it).
pub type AgentFactory = Arc<dyn Fn() -> Box<dyn Agent> + Send + Sync>;

/// A loop written outside the runtime, driving a session until it is done.
pub type LoopFn =
    Arc<dyn for<'a> Fn(&'a mut Session) -> BoxFuture<'a, crate::Result<()>> + Send + Sync>;

/// What the scripted operator does with a pending approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Approve it; the harness resumes the run.
    Approve,
    /// Reject it; the run is cancelled.
    Reject,
    /// Leave it pending; the scenario ends with the run waiting.
    Leave,
}

/// Who drives the scenario's loop.
#[derive(Clone)]
pub enum Driving {
    /// The runtime's Driver around an agent.
    Agent(AgentFactory),
    /// A foreign loop over a gate session.
    Loop(LoopFn),
}

/// A scenario: tools, policy, an agent or a foreign loop, and the run's
/// settings.
#[derive(Clone)]
pub struct Scenario {
    /// The tools (wrapped by the harness to count real calls per step).
    pub tools: Vec<Arc<dyn Tool>>,
    /// The policy.
    pub policy: Arc<dyn Policy>,
    /// The agent or the foreign loop.
    pub driving: Driving,
    /// The run's goal.
    pub goal: String,
    /// The run's limits.
    pub limits: Limits,
    /// The reconciliation hook, if any.
    pub reconcile: Option<Arc<dyn Reconcile>>,
    /// The operator's answer to each pending approval (default: approve).
    pub operator: Arc<dyn Fn(&Approval) -> Choice + Send + Sync>,
    /// The clock (default: system).
    pub clock: Option<Clock>,
    /// The id source (default: random).
    pub ids: Option<IdSource>,
    /// The database (default: a temporary file).
    pub db: Option<PathBuf>,
    /// The lease time-to-live (default 1 s). The harness expires a crashed
    /// instance's lease by moving its lease clock, without waiting.
    pub lease_ttl: Duration,
    /// Instances after which the harness gives up (default 20).
    pub max_instances: usize,
    /// Also re-check the run under its own policy: every evaluation must
    /// come out the same (default off).
    pub recheck: bool,
}

impl Scenario {
    /// A scenario driven by agents made by `agent`.
    pub fn with_agent(
        tools: Vec<Arc<dyn Tool>>,
        policy: impl Policy + 'static,
        agent: impl Fn() -> Box<dyn Agent> + Send + Sync + 'static,
    ) -> Scenario {
        Scenario::new(tools, policy, Driving::Agent(Arc::new(agent)))
    }

    /// A scenario driven by a foreign loop over the gate.
    pub fn with_loop(
        tools: Vec<Arc<dyn Tool>>,
        policy: impl Policy + 'static,
        driver: LoopFn,
    ) -> Scenario {
        Scenario::new(tools, policy, Driving::Loop(driver))
    }

    fn new(tools: Vec<Arc<dyn Tool>>, policy: impl Policy + 'static, driving: Driving) -> Scenario {
        Scenario {
            tools,
            policy: Arc::new(policy),
            driving,
            goal: "testkit scenario".into(),
            limits: Limits::default(),
            reconcile: None,
            operator: Arc::new(|_| Choice::Approve),
            clock: None,
            ids: None,
            db: None,
            lease_ttl: Duration::from_secs(1),
            max_instances: 20,
            recheck: false,
        }
    }
}

/// Stop the loop the `nth` time (from 1) it reaches `point`, counted
/// across all instances of the scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Crash {
    /// Where.
    pub point: CrashPoint,
    /// Which time.
    pub nth: usize,
}

impl Crash {
    /// The first time the loop reaches `point`.
    pub fn at(point: CrashPoint) -> Crash {
        Crash { point, nth: 1 }
    }

    /// The `nth` time the loop reaches `point`.
    pub fn nth(point: CrashPoint, nth: usize) -> Crash {
        Crash { point, nth }
    }
}

/// What a scenario left behind.
#[derive(Debug, Clone)]
pub struct Report {
    /// The run as it ended (terminal, or waiting when the operator left it).
    pub run: Run,
    /// Its steps.
    pub steps: Vec<Step>,
    /// Its approvals.
    pub approvals: Vec<Approval>,
    /// Its events.
    pub events: Vec<Event>,
    /// Real tool calls per step id.
    pub calls: BTreeMap<String, usize>,
    /// What the agents were handed, in order, across instances.
    pub inputs: Vec<StepInput>,
    /// The crashes taken, in order.
    pub crashes: Vec<Crash>,
    /// How many times the run was resumed in a fresh instance.
    pub resumes: usize,
}

/// Why a scenario did not pass.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The runtime failed.
    #[error("the runtime failed: {0}")]
    Runtime(#[from] Error),
    /// An invariant does not hold.
    #[error("invariants broken:\n  {}", .0.join("\n  "))]
    Broken(Vec<String>),
    /// Some crash points were never reached.
    #[error("crash points never reached: {0:?}")]
    Unreached(Vec<Crash>),
    /// The run did not settle within `max_instances` instances.
    #[error("the run did not settle within {0} instances")]
    TooManyInstances(usize),
}

#[derive(Default)]
struct Crashes {
    seen: BTreeMap<&'static str, usize>,
    pending: Vec<Crash>,
    taken: Vec<Crash>,
}

/// Counts real calls per step across instances.
struct Counted {
    inner: Arc<dyn Tool>,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
}

impl Tool for Counted {
    fn spec(&self) -> ToolSpec {
        self.inner.spec()
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        *lock(&self.calls).entry(call.step_id.clone()).or_default() += 1;
        self.inner.call(call)
    }
}

/// Keeps what the agent is handed.
struct Recording {
    inner: Box<dyn Agent>,
    inputs: Arc<Mutex<Vec<StepInput>>>,
}

impl Agent for Recording {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        lock(&self.inputs).push(input.clone());
        self.inner.decide(input)
    }
}

struct Shared {
    /// The clock every instance's leases are measured by.
    leases: ManualClock,
    crashes: Arc<Mutex<Crashes>>,
    calls: Arc<Mutex<BTreeMap<String, usize>>>,
    inputs: Arc<Mutex<Vec<StepInput>>>,
}

fn crash_hook(crashes: Arc<Mutex<Crashes>>, signal: mpsc::UnboundedSender<Crash>) -> CrashHook {
    Arc::new(move |point: CrashPoint| {
        let hit = {
            let mut state = lock(&crashes);
            let n = {
                let seen = state.seen.entry(point.name()).or_default();
                *seen += 1;
                *seen
            };
            let found = state
                .pending
                .iter()
                .position(|c| c.point == point && c.nth == n);
            found.map(|i| {
                let crash = state.pending.remove(i);
                state.taken.push(crash);
                crash
            })
        };
        if let Some(crash) = hit {
            let _ = signal.send(crash);
            // Park here forever: the harness aborts this instance.
            return Box::pin(std::future::pending());
        }
        Box::pin(async {})
    })
}

fn config(
    scenario: &Scenario,
    store: Store,
    shared: &Shared,
    instance: usize,
    hook: CrashHook,
) -> GateConfig {
    let tools: Vec<Arc<dyn Tool>> = scenario
        .tools
        .iter()
        .map(|t| {
            Arc::new(Counted {
                inner: Arc::clone(t),
                calls: Arc::clone(&shared.calls),
            }) as Arc<dyn Tool>
        })
        .collect();
    let mut config = GateConfig::new(store, NoPolicy, tools)
        .with_lease_ttl(scenario.lease_ttl)
        .with_lease_clock(shared.leases.clock())
        .with_lease_owner(format!("testkit-{instance}"))
        .with_crash_hook(hook);
    config.policy = Arc::clone(&scenario.policy);
    config.reconcile = scenario.reconcile.clone();
    if let Some(clock) = &scenario.clock {
        config.clock = Arc::clone(clock);
    }
    if let Some(ids) = &scenario.ids {
        config.ids = Arc::clone(ids);
    }
    config
}

/// A placeholder replaced by the scenario's policy.
struct NoPolicy;

impl Policy for NoPolicy {
    fn evaluate(
        &self,
        _: &crate::model::ToolRequest,
        _: &crate::model::RunView,
    ) -> Result<crate::model::PolicyDecision, crate::policy::PolicyError> {
        Err(crate::policy::PolicyError::new("no policy"))
    }
}

/// One instance: start (first) or resume the run and drive it until it
/// pauses or ends.
async fn instance(
    scenario: Scenario,
    config: GateConfig,
    run_id: String,
    first: bool,
    inputs: Arc<Mutex<Vec<StepInput>>>,
) -> crate::Result<Run> {
    match &scenario.driving {
        Driving::Agent(factory) => {
            let agent = Recording {
                inner: factory(),
                inputs,
            };
            let mut driver = Driver::new(config, agent)?;
            if first {
                driver
                    .start(Some(&run_id), &scenario.goal, scenario.limits)
                    .await
            } else {
                driver.resume(&run_id).await
            }
        }
        Driving::Loop(body) => {
            let gate = Gate::new(config)?;
            let mut session = if first {
                gate.begin(Some(&run_id), &scenario.goal, scenario.limits)
                    .await?
            } else {
                let (mut session, verdict) = gate.attach(&run_id).await?;
                if verdict.outcome == VerdictOutcome::Allowed {
                    session.execute().await?;
                }
                session
            };
            body(&mut session).await?;
            let run = session.run().clone();
            session.close().await?;
            Ok(run)
        }
    }
}

/// Runs `scenario`, crashing at `crashes`, and checks the invariants.
pub async fn run(scenario: &Scenario, crashes: &[Crash]) -> Result<Report, HarnessError> {
    let dir = tempfile_dir()?;
    let db = scenario
        .db
        .clone()
        .unwrap_or_else(|| dir.join("testkit.db"));
    let run_id = format!("testkit-{}", crate::ids::random_id());
    let shared = Shared {
        leases: ManualClock::new(Timestamp::now()),
        crashes: Arc::new(Mutex::new(Crashes {
            pending: crashes.to_vec(),
            ..Crashes::default()
        })),
        calls: Arc::new(Mutex::new(BTreeMap::new())),
        inputs: Arc::new(Mutex::new(Vec::new())),
    };
    let mut resumes = 0;
    let mut first = true;
    let mut settled = None;
    for n in 1..=scenario.max_instances {
        let (signal, mut crashed) = mpsc::unbounded_channel();
        let store = Store::open(&db)?;
        let hook = crash_hook(Arc::clone(&shared.crashes), signal);
        let config = config(scenario, store.clone(), &shared, n, hook);
        let mut task = tokio::spawn(instance(
            scenario.clone(),
            config,
            run_id.clone(),
            first,
            Arc::clone(&shared.inputs),
        ));
        // A finished instance drops the hook's sender: only a received
        // crash counts as one.
        let ended = tokio::select! {
            biased;
            joined = &mut task => Some(joined),
            Some(_) = crashed.recv() => None,
        };
        // Past any lease an instance took: the next one may take over.
        let expire = || {
            shared
                .leases
                .advance(scenario.lease_ttl + Duration::from_millis(1))
        };
        match ended {
            None => {
                // The crashed instance is gone (its heartbeat stopped)
                // before its lease is let expire.
                task.abort();
                let _ = task.await;
                drop(store);
                expire();
                first = false;
                resumes += 1;
            }
            Some(Err(join)) => {
                return Err(HarnessError::Broken(vec![format!(
                    "the loop task failed: {join}"
                )]));
            }
            Some(Ok(Err(Error::RunLeased { .. }))) => {
                expire();
                first = false;
                resumes += 1;
            }
            Some(Ok(Err(e))) => return Err(HarnessError::Runtime(e)),
            Some(Ok(Ok(run))) => {
                first = false;
                match run.status {
                    RunStatus::WaitingForApproval => {
                        if !decide_pending(scenario, &store, &run)? {
                            settled = Some(run);
                            break;
                        }
                        // A rejection (or an expiry) may have ended the run.
                        let now = store.get_run(&run.id)?;
                        if now.status.is_terminal() {
                            settled = Some(now);
                            break;
                        }
                        resumes += 1;
                    }
                    RunStatus::Running => resumes += 1,
                    _ => {
                        settled = Some(run);
                        break;
                    }
                }
            }
        }
    }
    let Some(_) = settled else {
        return Err(HarnessError::TooManyInstances(scenario.max_instances));
    };
    let unreached = lock(&shared.crashes).pending.clone();
    if !unreached.is_empty() {
        return Err(HarnessError::Unreached(unreached));
    }
    let store = Store::open(&db)?;
    let report = Report {
        run: store.get_run(&run_id)?,
        steps: store.list_steps(&run_id)?,
        approvals: store.list_approvals(&run_id)?,
        events: store.list_events(&run_id)?,
        calls: lock(&shared.calls).clone(),
        inputs: lock(&shared.inputs).clone(),
        crashes: lock(&shared.crashes).taken.clone(),
        resumes,
    };
    let (owner, _) = store.lease(&run_id)?;
    let mut problems = invariants(&report);
    if !owner.is_empty() {
        problems.push(format!("a lease is left on the run: {owner}"));
    }
    let chain = crate::verify::verify(&store, &crate::verify::VerifyOptions::default())?;
    if let Some(broken) = &chain.broken {
        problems.push(format!(
            "the audit chain does not verify: broken at seq {}: {}",
            broken.seq, broken.detail
        ));
    }
    if scenario.recheck
        && let Err(e) = super::recheck::recheck_partial(&store, &run_id, &*scenario.policy)
            .map_err(|e| e.to_string())
            .and_then(|partial| {
                if partial.report.differences() > 0 {
                    Err(partial.report.to_string())
                } else {
                    Ok(())
                }
            })
    {
        problems.push(format!(
            "the run does not re-check the same under its own policy: {e}"
        ));
    }
    drop(dir);
    if problems.is_empty() {
        Ok(report)
    } else {
        Err(HarnessError::Broken(problems))
    }
}

/// A private temporary directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir, HarnessError> {
    let path = std::env::temp_dir().join(format!("agentrt-testkit-{}", crate::ids::random_id()));
    std::fs::create_dir(&path).map_err(|e| HarnessError::Runtime(Error::io(&path, e)))?;
    Ok(TempDir(path))
}

/// Lets the scripted operator decide every pending approval; `false` when
/// it leaves one pending.
fn decide_pending(scenario: &Scenario, store: &Store, run: &Run) -> Result<bool, HarnessError> {
    let operator = Operator::new(store.clone());
    for approval in store.list_approvals(&run.id)? {
        if approval.status != ApprovalStatus::Pending {
            continue;
        }
        let options = DecideOptions {
            by: "testkit",
            note: "",
            shown_hash: Some(&approval.hash),
        };
        match (scenario.operator)(&approval) {
            Choice::Approve => {
                operator.approve(&run.id, &approval.id, &options)?;
            }
            Choice::Reject => {
                operator.reject(&run.id, &approval.id, &options)?;
            }
            Choice::Leave => return Ok(false),
        }
    }
    Ok(true)
}

/// The invariants of a settled scenario; each broken one as a sentence.
pub fn invariants(report: &Report) -> Vec<String> {
    let mut problems = Vec::new();
    let run = &report.run;
    if !(run.status.is_terminal() || run.status == RunStatus::WaitingForApproval) {
        problems.push(format!(
            "the run is {} (neither finished nor waiting)",
            run.status
        ));
    }
    for step in &report.steps {
        if matches!(step.status, StepStatus::Deciding | StepStatus::Executing) {
            problems.push(format!("step {} is left {}", step.index, step.status));
        }
        if step.status == StepStatus::AwaitingApproval
            && run.status != RunStatus::WaitingForApproval
        {
            problems.push(format!(
                "step {} awaits approval but the run is {}",
                step.index, run.status
            ));
        }
        let starts: Vec<&Event> = report
            .events
            .iter()
            .filter(|e| e.step_id == step.id && e.event_type == EventType::StepToolStarted)
            .collect();
        let approved = report
            .approvals
            .iter()
            .filter(|a| a.step_id == step.id && a.status == ApprovalStatus::Approved)
            .count();
        if starts.len() > 1 + approved {
            problems.push(format!(
                "step {} started its tool {} times with {approved} approved approval(s)",
                step.index,
                starts.len()
            ));
        }
        // Each start must end (finished or interrupted) before the next.
        let mut open = false;
        for e in report.events.iter().filter(|e| e.step_id == step.id) {
            match e.event_type {
                EventType::StepToolStarted if open => {
                    problems.push(format!(
                        "step {} started its tool again before the last start ended",
                        step.index
                    ));
                }
                EventType::StepToolStarted => open = true,
                EventType::StepToolFinished | EventType::StepInterrupted => open = false,
                _ => {}
            }
        }
        let calls = report.calls.get(&step.id).copied().unwrap_or(0);
        if calls > starts.len() {
            problems.push(format!(
                "step {}'s tool ran {calls} times but only {} start(s) are recorded",
                step.index,
                starts.len()
            ));
        }
    }
    let mut per_approval: BTreeMap<String, usize> = BTreeMap::new();
    for e in report
        .events
        .iter()
        .filter(|e| e.event_type == EventType::StepToolStarted)
    {
        if let Ok(payload) = serde_json::from_str::<serde_json::Value>(&e.payload)
            && let Some(id) = payload.get("approval_id").and_then(|v| v.as_str())
        {
            *per_approval.entry(id.to_owned()).or_default() += 1;
        }
    }
    for (id, n) in per_approval {
        if n > 1 {
            problems.push(format!("approval {id} started its tool {n} times"));
        }
    }
    problems
}

/// What an agent's `render` makes of each input it was handed, in order.
pub fn rendered(report: &Report, render: &dyn Fn(&StepInput) -> String) -> Vec<String> {
    report.inputs.iter().map(render).collect()
}

/// Checks that every input an agent was handed, live (across crashes,
/// pauses and resumes), renders byte-identically to the same input rebuilt
/// from the stored steps: an agent's model request depends only on what is
/// on record. Returns each step index whose renderings differ.
pub fn same_renders(
    report: &Report,
    render: &dyn Fn(&StepInput) -> String,
) -> Result<(), Vec<String>> {
    let mut problems = Vec::new();
    for live in &report.inputs {
        let before = live.run.step_count.saturating_sub(1);
        let stored: Vec<Arc<Step>> = report
            .steps
            .iter()
            .filter(|s| s.index < before)
            .cloned()
            .map(Arc::new)
            .collect();
        let rebuilt = StepInput {
            steps: Arc::new(stored),
            ..live.clone()
        };
        let (a, b) = (render(live), render(&rebuilt));
        if a != b {
            problems.push(format!(
                "step {before}: rendered live as {a:?} but from the record as {b:?}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
