//! The gate: the sequence of one governed action (step, propose, execute)
//! for any loop, and the write groups that record it.
//!
//! A step costs two durable commits when its tool runs: one makes "this
//! tool is about to run" durable (decision, policy verdict and tool start
//! together, since nothing outside the process happens between them), the
//! other records the result together with the start of the next step (or
//! the end of the run). A decision that runs no tool costs one commit.

mod execute;
mod interruption;
pub(crate) mod lease;
mod limits;
mod resume;
mod session;
mod takeover;
mod tool_run;
mod unknown;
mod verdicts;
mod writes;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::agent::Observer;
use crate::clock::{Clock, Timestamp, lock, system_clock};
use crate::error::{Error, Result};
use crate::ids::{IdSource, ordered_ids, random_id};
use crate::model::{Event, Labels, Limits, Tool};
use crate::policy::{Policy, check_policy_id};
use crate::reconcile::Reconcile;
use crate::registry::Registry;
use crate::store::{Store, WriteTx};

pub(crate) use resume::check_hash as resume_check_hash;
use session::FirstWrite;
pub use session::{SatelliteRows, Session, StepInfo, Verdict, VerdictOutcome};

/// The default lease time-to-live.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

/// What a gate needs: the store, the policy and the tools, plus optional
/// observer, clock, id source and lease settings.
///
/// ```
/// use agentrt::{DefaultPolicy, GateConfig, Store};
/// let config = GateConfig::new(Store::open(":memory:").unwrap(), DefaultPolicy, vec![]);
/// # let _ = config;
/// ```
pub struct GateConfig {
    /// The database.
    pub store: Store,
    /// The policy every tool request is put to.
    pub policy: Arc<dyn Policy>,
    /// A shadow policy asked beside `policy` on every request it answers;
    /// when their outcomes differ a `policy.shadow` event is written with
    /// the decision. Nothing it says changes an outcome (design §42).
    pub shadow: Option<Arc<dyn Policy>>,
    /// The tools, registered once.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Receives committed events, in order.
    pub observer: Option<Arc<dyn Observer>>,
    /// The clock read once per recorded state change (default: system).
    pub clock: Clock,
    /// The clock leases are measured by (default: the system's wall clock).
    /// Leases are compared across processes, so every gate on a database
    /// must use the same wall clock; tests inject a [`crate::clock::ManualClock`]
    /// to expire a lease without waiting for it.
    pub lease_clock: Clock,
    /// The id source (default: [`crate::ids::ordered_ids`], 128-bit hex that
    /// increases within the process).
    pub ids: IdSource,
    /// How long a lease lasts without renewal (default 30 s).
    pub lease_ttl: Duration,
    /// A label for this process's leases (default `agentrt`); a random
    /// suffix makes each gate's owner distinct.
    pub lease_owner: String,
    /// The consumer's reconciliation hook for runs taken over after a crash
    /// (default none: an operator decides interrupted side effects).
    pub reconcile: Option<Arc<dyn Reconcile>>,
    /// The model the gate hands its agents through an accounting caller
    /// (default none).
    pub model: Option<crate::budget::ModelConfig>,
    /// Test hook called at each crash point (see `testkit`).
    pub(crate) crash_hook: Option<CrashHook>,
}

/// The places a test can stop a loop as a crash would: the task never gets
/// past the point, its store is closed, and its lease stays behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CrashPoint {
    /// A step was started (committed), before the agent decides.
    StepStarted,
    /// A decision was recorded.
    StepDecided,
    /// The policy allowed a request; nothing about it is written yet.
    PolicyAllowed,
    /// A tool start was committed; the tool has not run.
    ToolStarted,
    /// The tool returned; its outcome is not recorded yet.
    ToolEffect,
    /// A tool's outcome was recorded.
    ToolFinished,
    /// A waiting run was resumed (committed).
    RunResumed,
    /// A takeover marked interrupted steps (committed).
    StepInterrupted,
    /// Attach returned an approved request that is not executed yet.
    AttachAllowed,
}

impl CrashPoint {
    /// Every crash point.
    pub const ALL: [CrashPoint; 9] = [
        CrashPoint::StepStarted,
        CrashPoint::StepDecided,
        CrashPoint::PolicyAllowed,
        CrashPoint::ToolStarted,
        CrashPoint::ToolEffect,
        CrashPoint::ToolFinished,
        CrashPoint::RunResumed,
        CrashPoint::StepInterrupted,
        CrashPoint::AttachAllowed,
    ];

    /// The point's name: the event it follows (`step.started`, …).
    pub fn name(&self) -> &'static str {
        match self {
            CrashPoint::StepStarted => "step.started",
            CrashPoint::StepDecided => "step.decided",
            CrashPoint::PolicyAllowed => "policy.allowed",
            CrashPoint::ToolStarted => "step.tool_started",
            CrashPoint::ToolEffect => "tool.effect",
            CrashPoint::ToolFinished => "step.tool_finished",
            CrashPoint::RunResumed => "run.resumed",
            CrashPoint::StepInterrupted => "step.interrupted",
            CrashPoint::AttachAllowed => "attach.allowed",
        }
    }

    /// The point with this name.
    pub fn from_name(name: &str) -> Option<CrashPoint> {
        CrashPoint::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// A crash hook: awaited at each crash point; a hook that never completes
/// parks the loop there.
pub type CrashHook = Arc<dyn Fn(CrashPoint) -> crate::model::BoxFuture<'static, ()> + Send + Sync>;

impl GateConfig {
    /// A configuration with the defaults.
    pub fn new(
        store: Store,
        policy: impl Policy + 'static,
        tools: Vec<Arc<dyn Tool>>,
    ) -> GateConfig {
        GateConfig {
            store,
            policy: Arc::new(policy),
            shadow: None,
            tools,
            observer: None,
            clock: system_clock(),
            lease_clock: system_clock(),
            ids: ordered_ids(),
            lease_ttl: DEFAULT_LEASE_TTL,
            lease_owner: "agentrt".into(),
            reconcile: None,
            model: None,
            crash_hook: None,
        }
    }

    /// Sets the model agents call (through the step's accounting caller).
    pub fn with_model(mut self, model: crate::budget::ModelConfig) -> GateConfig {
        self.model = Some(model);
        self
    }

    /// Sets the crash hook (tests only).
    #[cfg(feature = "testkit")]
    pub fn with_crash_hook(mut self, hook: CrashHook) -> GateConfig {
        self.crash_hook = Some(hook);
        self
    }

    /// Sets the reconciliation hook.
    pub fn with_reconcile(mut self, hook: impl Reconcile + 'static) -> GateConfig {
        self.reconcile = Some(Arc::new(hook));
        self
    }

    /// Asks `shadow` beside the policy on every request: a disagreement is
    /// recorded as a `policy.shadow` event in the decision's own write
    /// group; the outcome stays the policy's.
    ///
    /// ```
    /// use agentrt::{DefaultPolicy, GateConfig, PolicyDecision, PolicyError, Policy, RunView, Store, ToolRequest};
    /// struct DenyAll;
    /// impl Policy for DenyAll {
    ///     fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
    ///         Ok(PolicyDecision::deny("trying a stricter policy"))
    ///     }
    /// }
    /// let config = GateConfig::new(Store::open(":memory:")?, DefaultPolicy, vec![]).with_shadow(DenyAll);
    /// assert!(config.shadow.is_some());
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn with_shadow(mut self, shadow: impl Policy + 'static) -> GateConfig {
        self.shadow = Some(Arc::new(shadow));
        self
    }

    /// Sets the observer.
    pub fn with_observer(mut self, observer: impl Observer + 'static) -> GateConfig {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Sets the clock.
    pub fn with_clock(mut self, clock: Clock) -> GateConfig {
        self.clock = clock;
        self
    }

    /// Sets the clock leases are measured by (see [`GateConfig::lease_clock`]).
    ///
    /// ```
    /// use agentrt::{DefaultPolicy, GateConfig, clock::ManualClock, Store, Timestamp};
    /// let leases = ManualClock::new(Timestamp::parse("2026-10-01T09:00:00Z").unwrap());
    /// let config = GateConfig::new(Store::open(":memory:").unwrap(), DefaultPolicy, vec![])
    ///     .with_lease_clock(leases.clock());
    /// # let _ = config;
    /// ```
    pub fn with_lease_clock(mut self, clock: Clock) -> GateConfig {
        self.lease_clock = clock;
        self
    }

    /// Sets the id source.
    pub fn with_ids(mut self, ids: IdSource) -> GateConfig {
        self.ids = ids;
        self
    }

    /// Sets the lease time-to-live.
    pub fn with_lease_ttl(mut self, ttl: Duration) -> GateConfig {
        self.lease_ttl = ttl;
        self
    }

    /// Sets the lease owner label.
    pub fn with_lease_owner(mut self, owner: impl Into<String>) -> GateConfig {
        self.lease_owner = owner.into();
        self
    }
}

pub(crate) struct GateInner {
    pub store: Store,
    pub policy: Arc<dyn Policy>,
    pub policy_id: String,
    /// The shadow policy and its id.
    pub shadow: Option<(Arc<dyn Policy>, String)>,
    pub registry: Registry,
    pub observer: Option<Arc<dyn Observer>>,
    pub clock: Clock,
    pub lease_clock: Clock,
    pub ids: IdSource,
    pub lease_ttl: Duration,
    pub owner: String,
    pub reconcile: Option<Arc<dyn Reconcile>>,
    pub model: Option<(Arc<crate::budget::ModelConfig>, crate::budget::Price)>,
    crash_hook: Option<CrashHook>,
    claims: Mutex<HashSet<String>>,
}

impl GateInner {
    pub fn now(&self) -> Timestamp {
        (self.clock)()
    }

    pub fn new_id(&self) -> String {
        (self.ids)()
    }

    /// Now by the lease clock (the wall clock unless a test set one).
    pub fn lease_now(&self) -> Timestamp {
        (self.lease_clock)()
    }

    /// A lease expiry from now by the lease clock.
    pub fn lease_expiry(&self) -> Timestamp {
        self.lease_now().add(self.lease_ttl)
    }

    /// Now for the leases a write group sets and judges: the engine's own
    /// clock when it has one every host shares, else the lease clock.
    pub fn lease_now_in(&self, tx: &crate::store::WriteTx<'_>) -> Result<Timestamp> {
        Ok(tx.clock_now()?.unwrap_or_else(|| self.lease_now()))
    }

    /// A lease expiry set in a write group: [`GateInner::lease_now_in`]
    /// plus the lease's time-to-live.
    pub fn lease_expiry_in(&self, tx: &crate::store::WriteTx<'_>) -> Result<Timestamp> {
        Ok(self.lease_now_in(tx)?.add(self.lease_ttl))
    }

    /// Whether a stored lease is held by someone now: judged by the
    /// engine's clock read with it when there is one, else the lease
    /// clock.
    pub fn lease_held(&self, owner: &str, expires_at: &str, engine_now: Option<Timestamp>) -> bool {
        lease::held(
            owner,
            expires_at,
            engine_now.unwrap_or_else(|| self.lease_now()),
        )
    }

    /// Runs one write group on the store's writer thread (never on the
    /// executor; committed with the groups of other runs that arrive
    /// meanwhile) and hands its events to the observer after the commit.
    pub async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        let (value, events) = self.store.write_async(f).await?;
        self.deliver(&events);
        Ok(value)
    }

    /// Awaits the crash hook at `point`, if one is set.
    pub async fn crash_point(&self, point: CrashPoint) {
        if let Some(hook) = &self.crash_hook {
            hook(point).await;
        }
    }

    pub fn deliver(&self, events: &[Event]) {
        if let Some(observer) = &self.observer {
            for event in events {
                observer.observe(event);
            }
        }
    }
}

impl crate::budget::CallHost for GateInner {
    fn store(&self) -> &crate::store::Store {
        &self.store
    }

    fn now(&self) -> Timestamp {
        GateInner::now(self)
    }

    fn new_id(&self) -> String {
        GateInner::new_id(self)
    }

    fn lease_now_in(&self, tx: &WriteTx<'_>) -> Result<Timestamp> {
        GateInner::lease_now_in(self, tx)
    }

    fn owner(&self) -> &str {
        &self.owner
    }

    fn deliver(&self, events: &[Event]) {
        GateInner::deliver(self, events)
    }
}

/// Marks a run as driven by this gate; a second session on it is refused.
pub(crate) struct Claim {
    gate: Arc<GateInner>,
    run_id: String,
}

impl Claim {
    pub fn take(gate: &Arc<GateInner>, run_id: &str) -> Result<Claim> {
        if !lock(&gate.claims).insert(run_id.to_owned()) {
            let expires_at = gate
                .store
                .lease(run_id)
                .map(|(_, expires)| expires)
                .unwrap_or_default();
            return Err(Error::RunLeased {
                run: run_id.to_owned(),
                owner: gate.owner.clone(),
                expires_at,
            });
        }
        Ok(Claim {
            gate: Arc::clone(gate),
            run_id: run_id.to_owned(),
        })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.gate.claims).remove(&self.run_id);
    }
}

/// A policy's id, checked; a refusal's reason starts with `whose`.
fn checked_id(policy: &dyn Policy, whose: &str) -> Result<String> {
    let id = policy.policy_id().unwrap_or_default();
    check_policy_id(&id).map_err(|reason| Error::InvalidPolicyId {
        reason: format!("{whose}{reason}"),
    })?;
    Ok(id)
}

/// Governs tool calls for loops written anywhere: [`Gate::begin`] starts a
/// run, [`Gate::attach`] resumes one; both return a [`Session`].
#[derive(Clone)]
pub struct Gate {
    inner: Arc<GateInner>,
}

impl Gate {
    /// Registers the tools (refusing bad specs) and reads the policy's id.
    pub fn new(config: GateConfig) -> Result<Gate> {
        let registry = Registry::new(config.tools)?;
        let policy_id = checked_id(config.policy.as_ref(), "")?;
        let shadow = match config.shadow {
            None => None,
            Some(shadow) => {
                let id = checked_id(shadow.as_ref(), "the shadow policy's: ")?;
                Some((shadow, id))
            }
        };
        let owner = format!("{}/{}", config.lease_owner, &random_id()[..12]);
        let model = match config.model {
            None => None,
            Some(m) => {
                let price = m.prices.price_for(m.model.name())?;
                Some((Arc::new(m), price))
            }
        };
        Ok(Gate {
            inner: Arc::new(GateInner {
                store: config.store,
                policy: config.policy,
                policy_id,
                shadow,
                registry,
                observer: config.observer,
                clock: config.clock,
                lease_clock: config.lease_clock,
                ids: config.ids,
                lease_ttl: config.lease_ttl,
                owner,
                reconcile: config.reconcile,
                model,
                crash_hook: config.crash_hook,
                claims: Mutex::new(HashSet::new()),
            }),
        })
    }

    /// This gate's lease owner name.
    pub fn owner(&self) -> &str {
        &self.inner.owner
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.inner.store
    }

    /// Starts a run (with `run_id`, or a fresh one from the id source) and opens its first step.
    pub async fn begin(&self, run_id: Option<&str>, goal: &str, limits: Limits) -> Result<Session> {
        self.begin_run(run_id, goal, limits, Labels::new(), None, FirstWrite::Now)
            .await
    }

    /// What every `begin` comes to.
    async fn begin_run(
        &self,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: Labels,
        rows: Option<SatelliteRows>,
        first_write: FirstWrite,
    ) -> Result<Session> {
        let gate = Arc::clone(&self.inner);
        Session::begin(gate, run_id, goal, limits, labels, rows, first_write).await
    }

    /// [`Gate::begin`] with labels: recorded in `run.created` and in the
    /// run's `run_labels` row, in the run's first write group (covered by
    /// the chain), and filterable with [`Store::list_runs_labelled`].
    /// Empty labels begin the run exactly as [`Gate::begin`] does.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::*;
    /// let gate = Gate::new(GateConfig::new(Store::open(":memory:")?, DefaultPolicy, vec![]))?;
    /// let labels = Labels::parse(["mcp.session=4f2a", "host=build-7"])?;
    /// let mut session = gate.begin_labelled(None, "triage", Limits::default(), labels).await?;
    /// assert_eq!(session.run().labels.get("host"), Some("build-7"));
    /// let stored = gate.store().get_run(&session.run().id)?;
    /// assert_eq!(stored.labels, session.run().labels);
    /// session.close().await?;
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub async fn begin_labelled(
        &self,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: Labels,
    ) -> Result<Session> {
        self.begin_run(run_id, goal, limits, labels, None, FirstWrite::Now)
            .await
    }

    /// [`Gate::begin_labelled`] that also writes a satellite's rows in the
    /// run's first write group: `rows` runs in that group's transaction
    /// after the run's row and before its events, so the run's creation
    /// explains them (the chain covers them) and either the run and the
    /// rows are written or neither is. An error from `rows` (a satellite's
    /// own constraint, say) writes nothing and is returned as it is.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::store::{Extension, ExtensionTable, SqlValue};
    /// use agentrt::*;
    /// use agentrt::{gate::SatelliteRows};
    /// const CALLS: Extension = Extension {
    ///     name: "calls",
    ///     migrations: &[(1, "CREATE TABLE calls_index (run_id TEXT NOT NULL PRIMARY KEY,
    ///         written_seq INTEGER NOT NULL DEFAULT 0)")],
    ///     tables: &[ExtensionTable { name: "calls_index", key_column: "run_id", columns: &["run_id"] }],
    /// };
    /// let options = StoreOptions { extensions: vec![CALLS], ..StoreOptions::default() };
    /// let gate = Gate::new(GateConfig::new(Store::open_with(":memory:", options)?, DefaultPolicy, vec![]))?;
    /// let rows = |run: &'static str| -> SatelliteRows {
    ///     Box::new(move |tx| tx.insert_row("calls_index", &[("run_id", SqlValue::from(run))]).map(|_| ()))
    /// };
    /// let mut session = gate.begin_with_rows(Some("r1"), "g", Limits::default(), Labels::new(), rows("r1")).await?;
    /// assert!(gate.store().row("calls_index", "r1")?.is_some());
    /// session.close().await?;
    /// // The row's constraint refuses the second run: neither is written.
    /// let refused = gate.begin_with_rows(Some("r2"), "g", Limits::default(), Labels::new(), rows("r1")).await;
    /// assert!(matches!(refused, Err(Error::Database { .. })), "{refused:?}");
    /// assert!(matches!(gate.store().get_run("r2"), Err(Error::NotFound { .. })));
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub async fn begin_with_rows(
        &self,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: Labels,
        rows: SatelliteRows,
    ) -> Result<Session> {
        self.begin_run(run_id, goal, limits, labels, Some(rows), FirstWrite::Now)
            .await
    }

    /// [`Gate::begin_with_rows`] whose first write group is committed with
    /// the session's first write instead of at once: one commit fewer for
    /// a caller that decides straight away (a tool call allowed at once is
    /// two commits in all). Until then nothing is stored ([`Session::stored`]
    /// is `false`); it must come before the lease's first renewal (a third
    /// of its time to live), and the first step has no model caller (a
    /// model call's row needs the run's). If it is refused on the run's
    /// own part (a taken id, the satellite's rows), nothing is written,
    /// the error is the one [`Gate::begin_with_rows`] would have returned
    /// and the session closes.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use agentrt::*;
    /// use agentrt::{gate::SatelliteRows, gate::Session};
    /// let gate = Gate::new(GateConfig::new(Store::open(":memory:")?, DefaultPolicy, vec![]))?;
    /// let rows: SatelliteRows = Box::new(|_| Ok(()));
    /// let mut session = gate
    ///     .begin_deferred_with_rows(Some("r1"), "g", Limits::default(), Labels::new(), rows)
    ///     .await?;
    /// assert!(matches!(gate.store().get_run("r1"), Err(Error::NotFound { .. })));
    /// session.step().await?;
    /// let verdict = session.propose(Decision::complete(br#""done""#.to_vec())).await?;
    /// assert_eq!(verdict.outcome, VerdictOutcome::Ended);
    /// assert_eq!(gate.store().get_run("r1")?.status, RunStatus::Completed);
    /// # Ok::<(), agentrt::Error>(()) }).unwrap();
    /// ```
    pub async fn begin_deferred_with_rows(
        &self,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: Labels,
        rows: SatelliteRows,
    ) -> Result<Session> {
        self.begin_run(
            run_id,
            goal,
            limits,
            labels,
            Some(rows),
            FirstWrite::Deferred,
        )
        .await
    }

    /// Attaches to an existing run: a run waiting for approval is resumed
    /// (the policy is asked again); the verdict says what happened.
    pub async fn attach(&self, run_id: &str) -> Result<(Session, Verdict)> {
        let (session, verdict) = Session::attach(Arc::clone(&self.inner), run_id).await?;
        if verdict.outcome == VerdictOutcome::Allowed {
            self.inner.crash_point(CrashPoint::AttachAllowed).await;
        }
        Ok((session, verdict))
    }
}
