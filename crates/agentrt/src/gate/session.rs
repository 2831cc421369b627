//! A session: one run driven through the gate, one step at a time.

use std::sync::Arc;

use super::lease::Lease;
use super::writes::{self, Draft, Settle, StepEnd, running};
use super::{Claim, CrashPoint, GateInner};
use crate::agent::{AgentError, StepInput};
use crate::cancel::Cancel;
use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{
    Approval, DecisionKind, DecisionProblems, EventType, Limits, NewRunFields, Observation,
    OperatorEdit, Origin, Outcome, PolicyDecision, RecordedDecision, Run, RunStatus, RunView, Step,
    StepStatus, TerminalReason, ToolRequest,
};
use crate::payload::{self, ViewCounts};
use crate::policy::PolicyError;
use crate::registry::Registered;
use crate::store::{LeaseChange, NewRun, RunChange, RunGuard, StepChange};

/// A satellite's rows written in a run's first write group (see
/// [`Gate::begin_with_rows`](crate::Gate::begin_with_rows)).
pub type SatelliteRows = Box<dyn FnOnce(&mut crate::store::WriteTx<'_>) -> Result<()> + Send>;

/// The open step as a loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    /// The step id.
    pub id: String,
    /// Its index in the run.
    pub index: u64,
}

/// What became of a proposal (or of an attach).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictOutcome {
    /// Attached to a run that continues; no step is decided yet.
    Open,
    /// The request may run: call [`Session::execute`].
    Allowed,
    /// The step failed (invalid decision, policy denial); the run continues.
    Denied,
    /// The run waits for an operator's approval.
    Pending,
    /// The run ended.
    Ended,
}

/// The verdict on a proposal.
#[derive(Debug, Clone)]
pub struct Verdict {
    /// What happened.
    pub outcome: VerdictOutcome,
    /// The request as the policy judged it (tool calls).
    pub request: Option<ToolRequest>,
    /// The step's observation (denied steps).
    pub observation: Option<Observation>,
    /// The approval the run waits for (pending).
    pub approval: Option<Approval>,
    /// The run after the verdict.
    pub run: Run,
}

impl Verdict {
    pub(super) fn of(outcome: VerdictOutcome, run: &Run) -> Verdict {
        Verdict {
            outcome,
            request: None,
            observation: None,
            approval: None,
            run: run.clone(),
        }
    }
}

/// How a decided request came to be allowed.
#[derive(Debug, Clone)]
pub(crate) enum Grant {
    /// Allowed by the policy now.
    Fresh {
        decision: RecordedDecision,
        decided_at: Timestamp,
    },
    /// An operator's approval, re-judged on resume.
    Resumed {
        approval_id: String,
        resumed_at: Timestamp,
        granted_at: Option<Timestamp>,
        /// Set when the approved request is an operator's edit of the
        /// model's: the step's observation carries it.
        edit: Option<OperatorEdit>,
    },
}

/// An allowed request waiting for `execute`.
#[derive(Debug, Clone)]
pub(crate) struct Allowed {
    pub request: ToolRequest,
    pub spec_hash: String,
    pub spec_json: Canonical,
    pub policy: PolicyDecision,
    pub view: ViewCounts,
    pub policy_at: Timestamp,
    pub grant: Grant,
    /// The `policy.shadow` payload when the shadow policy disagreed.
    pub shadow: Option<String>,
}

impl Allowed {
    /// The decision's events as the policy `policy_id` gave it.
    pub(crate) fn policy_events(&self, policy_id: &str) -> writes::PolicyEvents {
        writes::PolicyEvents {
            policy: payload::step_policy(&self.policy, policy_id, &self.spec_hash, Some(self.view)),
            shadow: self.shadow.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum State {
    Active,
    Over,
    Closed(Option<String>),
}

/// One run driven through the gate. Calls are sequential: one open step
/// at a time.
pub struct Session {
    pub(crate) gate: Arc<GateInner>,
    pub(crate) run: Run,
    pub(crate) history: Arc<Vec<Arc<Step>>>,
    pub(crate) approvals: Arc<Vec<Approval>>,
    pub(crate) current: Option<Step>,
    pub(crate) handed_out: bool,
    pub(crate) allowed: Option<Allowed>,
    pub(crate) state: State,
    pub(crate) cancel: Cancel,
    pub(crate) lease: Lease,
    /// The open step's accounting model caller (made when it is handed out).
    pub(crate) caller: Option<crate::budget::ModelCaller>,
    /// Model totals the callers wrote, to fold into the cached run.
    pub(crate) totals: crate::budget::SharedTotals,
    /// A call (`step`, `propose`, `execute`, `fail`) is in progress. Left
    /// set when the caller dropped the call's future before it returned.
    pub(crate) in_call: bool,
    /// Whether the run's row is stored, or its first write still waits.
    pub(crate) row: RunRow,
    pub(crate) _claim: Claim,
}

/// When a run's first write group is committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FirstWrite {
    /// When it begins.
    Now,
    /// With the session's first write.
    Deferred,
}

/// Where the run's own row stands, for this session.
pub(crate) enum RunRow {
    /// Stored.
    Stored,
    /// Its first write waits for the session's first write group (in a
    /// mutex only so that the session stays `Sync`).
    Waiting(std::sync::Mutex<Unwritten>),
    /// Its deferred first write was refused: never stored.
    Refused,
}

/// A run's first write, not yet committed, and how its error reads.
pub(crate) struct Unwritten {
    write: SatelliteRows,
    error: Box<dyn FnOnce(Error) -> Error + Send>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("run", &self.run.id)
            .field("status", &self.run.status)
            .field("state", &self.state)
            .finish()
    }
}

pub(crate) fn misuse(run: &Run, detail: &str) -> Error {
    Error::RunState {
        run: run.id.clone(),
        status: run.status,
        detail: detail.to_owned(),
    }
}

fn is_constraint(e: &Error) -> bool {
    matches!(
        e,
        Error::Database {
            kind: crate::error::DatabaseErrorKind::Constraint,
            ..
        }
    )
}

/// Asks the gate's policy, turning a panic into a policy error.
pub(crate) fn evaluate(
    gate: &GateInner,
    request: &ToolRequest,
    view: &RunView,
) -> Result<PolicyDecision, PolicyError> {
    crate::policy::evaluate_guarded(gate.policy.as_ref(), request, view)
}

/// The `policy.shadow` payload when the gate has a shadow policy, the
/// policy answered (`answer`), and the shadow's outcome for `request`
/// differs (a shadow that fails disagrees as `error`); `None` otherwise
/// (design §42).
pub(crate) fn shadow_disagreement(
    gate: &GateInner,
    request: &ToolRequest,
    view: &RunView,
    answer: &std::result::Result<PolicyDecision, PolicyError>,
) -> Option<String> {
    let (shadow, shadow_id) = gate.shadow.as_ref()?;
    let enforced = answer.as_ref().ok()?;
    match crate::policy::evaluate_guarded(shadow.as_ref(), request, view) {
        Ok(d) if d.outcome == enforced.outcome => None,
        Ok(d) => Some(payload::policy_shadow(
            enforced.outcome,
            Some(d.outcome),
            &d.reason,
            shadow_id,
        )),
        Err(e) => Some(payload::policy_shadow(
            enforced.outcome,
            None,
            &e.to_string(),
            shadow_id,
        )),
    }
}

/// Why a recorded decision cannot be acted on, if it cannot.
fn invalid_reason(
    d: &RecordedDecision,
    problems: &DecisionProblems,
    registered: Option<&Registered>,
) -> Option<String> {
    if !Origin::is_valid_text(&d.origin) {
        return Some(format!(
            "origin {:?} is not one of model, plan, operator",
            d.origin
        ));
    }
    match &d.kind {
        DecisionKind::Complete => problems
            .result
            .as_ref()
            .map(|e| format!("the result is not acceptable JSON: {e}")),
        DecisionKind::Fail => None,
        DecisionKind::ToolCall => {
            if d.tool.trim().is_empty() {
                return Some("the tool call names no tool".into());
            }
            if registered.is_none() {
                return Some(format!("no tool named {:?} is registered", d.tool));
            }
            problems
                .args
                .as_ref()
                .map(|e| format!("the arguments are not acceptable JSON: {e}"))
        }
        DecisionKind::Truncated => {
            Some("the model's reply was cut off before the decision was complete".into())
        }
        DecisionKind::NoToolCall => Some("the model replied without calling a tool".into()),
        DecisionKind::Other(k) if k.is_empty() => Some("the decision has no kind".into()),
        DecisionKind::Other(k) => Some(format!("{k:?} is not a decision kind")),
    }
}

pub(crate) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

impl Session {
    pub(crate) fn new(gate: Arc<GateInner>, run: Run, claim: Claim) -> Session {
        Session {
            gate,
            run,
            history: Arc::new(Vec::new()),
            approvals: Arc::new(Vec::new()),
            current: None,
            handed_out: false,
            allowed: None,
            state: State::Active,
            cancel: Cancel::never(),
            lease: Lease::none(),
            caller: None,
            totals: crate::budget::SharedTotals::default(),
            in_call: false,
            row: RunRow::Stored,
            _claim: claim,
        }
    }

    pub(crate) async fn begin(
        gate: Arc<GateInner>,
        run_id: Option<&str>,
        goal: &str,
        limits: Limits,
        labels: crate::model::Labels,
        rows: Option<SatelliteRows>,
        first_write: FirstWrite,
    ) -> Result<Session> {
        limits.validate()?;
        let run_id = match run_id {
            Some(id) if id.trim().is_empty() => {
                return Err(Error::InvalidInput {
                    what: "run id",
                    detail: "the run id is empty; give a non-empty id or none for a random one"
                        .into(),
                });
            }
            Some(id) => id.to_owned(),
            None => gate.new_id(),
        };
        let claim = Claim::take(&gate, &run_id)?;
        let limits_json = to_json(&limits);
        let at = gate.now();
        let run = Run::new_running(NewRunFields {
            id: run_id.clone(),
            goal: goal.to_owned(),
            limits,
            labels,
            created_at: at,
        });
        let mut draft = Draft::new(&run, None);
        // Deferred, the first step is opened in memory now and written
        // with the session's first write; a run a limit would end before
        // its first step is written at once, as it always was.
        let first_step = match first_write {
            FirstWrite::Deferred
                if super::limits::check(&run, std::iter::empty::<&Arc<Step>>(), || gate.now())
                    .is_none() =>
            {
                let (step_id, started_at) = (gate.new_id(), gate.now());
                writes::opened_step(&mut draft, step_id.clone(), started_at);
                Some((step_id, started_at))
            }
            _ => None,
        };
        let specs: Vec<&str> = gate.registry.iter().map(|r| r.spec_hash.as_str()).collect();
        let created = payload::run_created(goal, &run.labels, &limits, specs);
        let labels = run.labels.clone();
        let g = Arc::clone(&gate);
        let (id, goal) = (run_id.clone(), goal.to_owned());
        // Set when the satellite's rows failed, so its error is returned
        // as it is, not read as a taken run id.
        let satellite_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let failed = Arc::clone(&satellite_failed);
        let deferred = first_step.is_some();
        let mut opened = Draft::new(&run, None);
        let write_run = move |tx: &mut crate::store::WriteTx<'_>| -> Result<Draft> {
            let run_id = id;
            tx.insert_run(&NewRun {
                id: &run_id,
                goal: &goal,
                limits_json: &limits_json,
                created_at: at,
                lease_owner: &g.owner,
                lease_expires_at: g.lease_expiry_in(tx)?,
            })?;
            tx.insert_run_labels(&run_id, &labels)?;
            if let Some(rows) = rows {
                rows(tx).inspect_err(|_| {
                    failed.store(true, std::sync::atomic::Ordering::SeqCst);
                })?;
            }
            for r in g.registry.iter() {
                tx.insert_spec(&r.spec_hash, r.spec_json.as_str())?;
            }
            tx.append_event(&run_id, "", &at, EventType::RunCreated, &created)?;
            tx.append_event(&run_id, "", &at, EventType::RunStarted, &payload::empty())?;
            match first_step {
                Some((step_id, started_at)) => {
                    writes::start_step_as(&g, tx, &mut opened, step_id, started_at)?;
                }
                None => writes::open_next_or_settle(&g, tx, &mut opened, &[])?,
            }
            Ok(opened)
        };
        let taken_id = move |e: Error| -> Error {
            if is_constraint(&e) && !satellite_failed.load(std::sync::atomic::Ordering::SeqCst) {
                return Error::InvalidInput {
                    what: "run id",
                    detail: format!(
                        "a run with id {run_id:?} already exists; choose another id, or resume it"
                    ),
                };
            }
            e
        };
        let (draft, row) = if deferred {
            let unwritten = Unwritten {
                write: Box::new(move |tx| write_run(tx).map(|_| ())),
                error: Box::new(taken_id),
            };
            (draft, RunRow::Waiting(std::sync::Mutex::new(unwritten)))
        } else {
            let written = gate.write(write_run).await.map_err(taken_id)?;
            (written, RunRow::Stored)
        };
        let mut session = Session::new(gate, run, claim);
        session.apply(draft);
        session.row = row;
        // Held at once, deferred too, so the first write is guarded as any
        // other; its first renewal finds the row when that write came
        // straight away, as it should.
        session.hold_lease();
        Ok(session)
    }

    /// Runs `f` as the session's next write group, with the run's own
    /// first write before it in the same group when that is still
    /// unwritten ([`FirstWrite::Deferred`]). If the run's first write
    /// fails, nothing is written and the session closes.
    pub(crate) async fn write<T, F>(&mut self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut crate::store::WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        let unwritten = match std::mem::replace(&mut self.row, RunRow::Stored) {
            RunRow::Waiting(unwritten) => unwritten,
            row => {
                self.row = row;
                return self.gate.write(f).await;
            }
        };
        let Unwritten { write, error } = unwritten
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let first_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let failed = Arc::clone(&first_failed);
        let r = self
            .gate
            .write(move |tx| {
                write(tx)
                    .inspect_err(|_| failed.store(true, std::sync::atomic::Ordering::SeqCst))?;
                f(tx)
            })
            .await;
        match r {
            Err(e) if first_failed.load(std::sync::atomic::Ordering::SeqCst) => {
                let e = error(e);
                self.row = RunRow::Refused;
                self.lease.stop();
                self.state = State::Closed(Some(format!("the run was never written: {e}")));
                Err(e)
            }
            other => other,
        }
    }

    /// Folds a committed draft into the cached state.
    pub(crate) fn apply(&mut self, draft: Draft) {
        let same_step = match (&self.current, &draft.current) {
            (Some(a), Some(b)) => a.id == b.id,
            _ => false,
        };
        if !same_step {
            self.handed_out = false;
            self.caller = None;
        }
        self.run = draft.run;
        if !draft.finished.is_empty() {
            Arc::make_mut(&mut self.history).extend(draft.finished);
        }
        if !draft.approvals.is_empty() {
            let list = Arc::make_mut(&mut self.approvals);
            for a in draft.approvals {
                match list.iter_mut().find(|x| x.id == a.id) {
                    Some(slot) => *slot = a,
                    None => list.push(a),
                }
            }
        }
        self.current = draft.current;
        if draft.over {
            self.state = State::Over;
            self.lease.stop();
        } else {
            self.lease.renewed(self.gate.lease_expiry());
        }
    }

    /// Starts the heartbeat of the lease this session just took, if the
    /// run is running.
    pub(crate) fn hold_lease(&mut self) {
        if self.state == State::Active && self.run.status == RunStatus::Running {
            self.lease = Lease::hold(&self.gate, &self.run.id);
        }
    }

    /// The accounting caller for the open step, when the gate has a model.
    pub(super) fn make_caller(&mut self) {
        // A model call's row needs the run's row: none before the run's
        // deferred first write (see `Gate::begin_deferred_with_rows`).
        if !self.stored() {
            return;
        }
        let (Some((config, price)), Some(step)) = (&self.gate.model, &self.current) else {
            return;
        };
        let lease = self.lease.handle();
        self.caller = Some(crate::budget::ModelCaller::new(
            Arc::clone(&self.gate) as Arc<dyn crate::budget::CallHost>,
            Arc::clone(config),
            *price,
            self.run.limits,
            self.run.created_at,
            self.run.id.clone(),
            step.id.clone(),
            Arc::new(move || lease.ok()),
            self.cancel.clone(),
            self.totals.clone(),
        ));
    }

    /// Folds the model totals the step's callers wrote into the cached run.
    pub(crate) fn sync_totals(&mut self) {
        if let Some((calls, usage, cost)) = self.totals.take() {
            self.run.model_calls = calls;
            self.run.usage = usage;
            self.run.estimated_cost_micros = cost;
        }
    }

    /// The open step's accounting model caller (`None` without a model, or
    /// for an attached grant). It refuses once the lease is lost.
    pub fn model(&self) -> Option<&crate::budget::ModelCaller> {
        self.caller.as_ref()
    }

    /// Refuses to go on once the lease is lost or lapsed: nothing more may
    /// start a tool or a model call.
    pub(super) fn check_lease(&mut self) -> Result<()> {
        if self.run.status == RunStatus::Running && !self.lease.ok() {
            self.lease.stop();
            self.state = State::Closed(Some("lost the lease".into()));
            return Err(Error::LeaseLost {
                run: self.run.id.clone(),
            });
        }
        Ok(())
    }

    pub(super) fn draft(&self) -> Draft {
        Draft::new(&self.run, None)
    }

    /// Starts a call. A call whose future was dropped before it returned
    /// may have had a write committed that the session never applied: its
    /// cached state can no longer be trusted, so it closes.
    pub(super) fn begin_call(&mut self) -> Result<()> {
        if self.in_call {
            self.lease.stop();
            self.state = State::Closed(Some(
                "an earlier call on this session was dropped before it returned; attach the run again"
                    .into(),
            ));
        }
        self.usable()?;
        self.in_call = true;
        Ok(())
    }

    /// Refuses calls on a closed session.
    pub(super) fn usable(&self) -> Result<()> {
        match &self.state {
            State::Closed(cause) => Err(Error::SessionClosed {
                cause: cause.clone(),
            }),
            _ => Ok(()),
        }
    }

    /// Refuses calls once the run paused or ended.
    pub(super) fn active(&self) -> Result<()> {
        self.usable()?;
        if self.state == State::Over {
            return Err(misuse(
                &self.run,
                "the session is over: the run paused or ended",
            ));
        }
        Ok(())
    }

    /// A failed write closes the session (the cause is kept).
    /// The run as stored now, read off the executor.
    pub(super) async fn reread_run(&self) -> Result<Run> {
        let id = self.run.id.clone();
        self.gate
            .store
            .off_executor(move |store| store.get_run(&id))
            .await
    }

    pub(super) fn closing<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && !matches!(e, Error::RunState { .. })
        {
            self.state = State::Closed(Some(e.to_string()));
        }
        r
    }

    /// Sets the cancellation signal the session's tool calls watch.
    pub fn set_cancel(&mut self, cancel: Cancel) {
        self.cancel = cancel;
    }

    /// Whether the run is stored: `false` while a deferred first write
    /// ([`Gate::begin_deferred_with_rows`](crate::Gate::begin_deferred_with_rows))
    /// waits, and after it failed.
    pub fn stored(&self) -> bool {
        matches!(self.row, RunRow::Stored)
    }

    /// The run as last written or read.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The approval the run waits on, as this session wrote or read it:
    /// the latest pending one while the run is waiting for approval
    /// (after [`Session::propose`] paused it, or [`Session::execute`] met
    /// an unknown outcome and opened an interruption), else `None`. No
    /// read: the session keeps what it wrote.
    pub fn waiting_approval(&self) -> Option<&Approval> {
        if self.run.status != crate::model::RunStatus::WaitingForApproval {
            return None;
        }
        self.approvals
            .iter()
            .rev()
            .find(|a| a.status == crate::model::ApprovalStatus::Pending)
    }

    /// `true` while this session's lease heartbeat task runs (a closed or
    /// finished session has none).
    pub fn heartbeat_running(&self) -> bool {
        self.lease.beating()
    }

    /// The open step, if any.
    pub fn current(&self) -> Option<&Step> {
        self.current.as_ref()
    }

    /// `true` once the run paused, ended, or the session was closed.
    pub fn done(&self) -> bool {
        self.state != State::Active
    }

    /// What an agent would be handed now: with an open step, exactly the
    /// agent's input; otherwise the run and all its steps. Reads no clock.
    pub fn input(&self) -> StepInput {
        // With a step open, the agent sees the steps before it; otherwise
        // (paused, ended) every step the run has.
        let steps = match &self.current {
            Some(step) if self.state != State::Active => {
                let mut all = (*self.history).clone();
                all.push(Arc::new(step.clone()));
                Arc::new(all)
            }
            _ => Arc::clone(&self.history),
        };
        StepInput {
            run: self.run.clone(),
            steps,
            approvals: Arc::clone(&self.approvals),
            tools: self.gate.registry.specs(),
            model: self.caller.clone(),
        }
    }

    /// Opens the next step (limits checked first). `None` when a limit or
    /// an earlier outcome ended the run.
    pub async fn step(&mut self) -> Result<Option<StepInfo>> {
        self.begin_call()?;
        let r = self.step_inner().await;
        self.in_call = false;
        r
    }

    async fn step_inner(&mut self) -> Result<Option<StepInfo>> {
        if self.state == State::Over {
            return Ok(None);
        }
        if self.current.is_none() {
            let gate = Arc::clone(&self.gate);
            let history = Arc::clone(&self.history);
            let mut draft = self.draft();
            let g = Arc::clone(&gate);
            let r = self
                .write(move |tx| {
                    writes::open_next_or_settle(&g, tx, &mut draft, &history)?;
                    Ok(draft)
                })
                .await;
            let draft = self.closing(r)?;
            self.apply(draft);
            if self.state != State::Active {
                return Ok(None);
            }
        } else if self.handed_out || self.allowed.is_some() {
            return Err(misuse(
                &self.run,
                "a step is already open; propose a decision for it first",
            ));
        }
        let Some(info) = self.current.as_ref().map(|step| StepInfo {
            id: step.id.clone(),
            index: step.index,
        }) else {
            return Ok(None);
        };
        self.handed_out = true;
        self.make_caller();
        self.gate.crash_point(CrashPoint::StepStarted).await;
        Ok(Some(info))
    }

    /// Records a decision for the open step and decides it: invalid
    /// decisions and policy denials fail the step (the run goes on), a
    /// completion or failure ends the run, an approval pauses it, an
    /// allowed request waits for [`Session::execute`].
    pub async fn propose(&mut self, decision: crate::model::Decision) -> Result<Verdict> {
        self.begin_call()?;
        let r = self.propose_and_mark(decision).await;
        self.in_call = false;
        r
    }

    async fn propose_and_mark(&mut self, decision: crate::model::Decision) -> Result<Verdict> {
        let verdict = self.propose_inner(decision).await?;
        let point = match verdict.outcome {
            VerdictOutcome::Allowed => CrashPoint::PolicyAllowed,
            _ => CrashPoint::StepDecided,
        };
        self.gate.crash_point(point).await;
        Ok(verdict)
    }

    pub(super) async fn propose_inner(
        &mut self,
        decision: crate::model::Decision,
    ) -> Result<Verdict> {
        self.active()?;
        self.sync_totals();
        self.check_lease()?;
        let step = match &self.current {
            Some(s)
                if self.handed_out
                    && s.status == StepStatus::Deciding
                    && self.allowed.is_none() =>
            {
                s.clone()
            }
            Some(_) if self.allowed.is_some() => {
                return Err(misuse(
                    &self.run,
                    "this step already has an allowed decision; execute it",
                ));
            }
            _ => return Err(misuse(&self.run, "no open step; call step() first")),
        };
        let gate = Arc::clone(&self.gate);
        let decided_at = gate.now();
        let (recorded, problems) = RecordedDecision::record(&decision);
        let registered = match recorded.kind {
            DecisionKind::ToolCall => gate.registry.get(&recorded.tool),
            _ => None,
        };
        let spec_hash = registered.map(|r| r.spec_hash.clone()).unwrap_or_default();
        if let Some(problem) = invalid_reason(&recorded, &problems, registered) {
            return self
                .record_invalid(step, recorded, spec_hash, decided_at, problem)
                .await;
        }
        match recorded.kind {
            DecisionKind::Complete => {
                let result = recorded.result.clone();
                self.record_end(
                    step,
                    recorded,
                    decided_at,
                    RunStatus::Completed,
                    TerminalReason::GoalCompleted,
                    String::new(),
                    result,
                )
                .await
            }
            DecisionKind::Fail => {
                let message = recorded.message.clone();
                self.record_end(
                    step,
                    recorded,
                    decided_at,
                    RunStatus::Failed,
                    TerminalReason::GoalFailed,
                    message,
                    None,
                )
                .await
            }
            _ => {
                let Some(registered) = registered else {
                    return Err(misuse(&self.run, "unregistered tool passed validation"));
                };
                let args = recorded.args_or_empty();
                if let Err(problem) = registered.schema.check(&args) {
                    return self
                        .record_invalid(step, recorded, spec_hash, decided_at, problem)
                        .await;
                }
                let request = ToolRequest {
                    run_id: self.run.id.clone(),
                    step_id: step.id.clone(),
                    spec: registered.spec.clone(),
                    args,
                };
                let spec_json = registered.spec_json.clone();
                let view = RunView {
                    run: self.run.clone(),
                    steps: Arc::clone(&self.history),
                    approvals: Arc::clone(&self.approvals),
                };
                let counts = ViewCounts::of(&self.run, self.history.len(), self.approvals.len());
                let answer = evaluate(&gate, &request, &view);
                let shadow = shadow_disagreement(&gate, &request, &view, &answer);
                // The view shares the history; release it before the write
                // appends to the history, or the append copies it.
                drop(view);
                let policy_at = gate.now();
                let policy = match answer {
                    Err(e) => {
                        return self
                            .record_policy_error(step, recorded, spec_hash, decided_at, e)
                            .await;
                    }
                    Ok(p) => p,
                };
                let allowed = Allowed {
                    request,
                    spec_hash,
                    spec_json,
                    policy,
                    view: counts,
                    policy_at,
                    grant: Grant::Fresh {
                        decision: recorded,
                        decided_at,
                    },
                    shadow,
                };
                match allowed.policy.outcome {
                    Outcome::Allow => {
                        let mut verdict = Verdict::of(VerdictOutcome::Allowed, &self.run);
                        verdict.request = Some(allowed.request.clone());
                        self.allowed = Some(allowed);
                        Ok(verdict)
                    }
                    Outcome::Deny | Outcome::Abort => self.record_denied(step, allowed).await,
                    Outcome::RequireApproval => self.pause(step, allowed).await,
                }
            }
        }
    }

    /// Ends the run because the agent could not decide (like an agent
    /// error in the Driver). A cancellation leaves the step in flight.
    pub async fn fail(&mut self, error: AgentError) -> Result<Run> {
        self.begin_call()?;
        let r = self.fail_inner(error).await;
        self.in_call = false;
        r
    }

    async fn fail_inner(&mut self, error: AgentError) -> Result<Run> {
        self.active()?;
        self.sync_totals();
        if error == AgentError::Cancelled {
            self.state = State::Closed(Some("cancelled by the caller".into()));
            return Err(Error::Cancelled);
        }
        if error == AgentError::LeaseLost {
            self.lease.stop();
            self.state = State::Closed(Some("lost the lease".into()));
            return Err(Error::LeaseLost {
                run: self.run.id.clone(),
            });
        }
        let Some(step) = self.current.clone() else {
            return Err(misuse(&self.run, "no open step to fail"));
        };
        let reason = match &error {
            AgentError::Limit { reason, .. } => *reason,
            AgentError::ModelUnavailable { .. } => TerminalReason::ModelUnavailable,
            _ => TerminalReason::AgentError,
        };
        let detail = error.to_string();
        let gate = Arc::clone(&self.gate);
        let mut draft = self.draft();
        let run_id = self.run.id.clone();
        let step_id = step.id.clone();
        let g = Arc::clone(&gate);
        let r = self
            .write(move |tx| {
                let gate = g;
                let end_at = gate.now();
                let ended = writes::end_step(
                    tx,
                    &mut draft,
                    step,
                    end_at,
                    StepEnd {
                        status: StepStatus::Failed,
                        observation: None,
                        from: &[StepStatus::Deciding],
                        run_guard: running(&gate),
                        extra: StepChange::default(),
                        count_active: true,
                        granted_by: None,
                    },
                )?;
                if ended.is_none() {
                    return Ok(None);
                }
                tx.append_event(
                    &run_id,
                    &step_id,
                    &end_at,
                    EventType::StepFailed,
                    &payload::step_failed(&format!("agent error: {detail}"), None),
                )?;
                writes::settle(
                    &gate,
                    tx,
                    &mut draft,
                    Settle {
                        status: RunStatus::Failed,
                        reason,
                        detail: detail.clone(),
                        result: None,
                        from: RunStatus::Running,
                    },
                )?;
                Ok(Some(draft))
            })
            .await;
        let Some(draft) = self.closing(r)? else {
            self.changed_under_us().await?;
            return Ok(self.run.clone());
        };
        self.apply(draft);
        Ok(self.run.clone())
    }

    /// Releases the lease and ends the session; an open step is left as a
    /// crash would leave it. A no-op on a closed session.
    pub async fn close(&mut self) -> Result<()> {
        if matches!(self.state, State::Closed(_)) {
            return Ok(());
        }
        let was_active = self.state == State::Active;
        self.state = State::Closed(None);
        self.lease.stop();
        if was_active {
            let gate = Arc::clone(&self.gate);
            let run_id = self.run.id.clone();
            let g = Arc::clone(&gate);
            self.write(move |tx| {
                let gate = g;
                tx.update_run(
                    &run_id,
                    &RunGuard {
                        lease_owner: Some(&gate.owner),
                        ..RunGuard::default()
                    },
                    &RunChange {
                        lease: LeaseChange::Clear,
                        ..RunChange::default()
                    },
                )
            })
            .await?;
        }
        Ok(())
    }
}
