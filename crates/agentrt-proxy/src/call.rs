//! One run per `tools/call` (periphery §4.3, §4.4 rules 1–2): a call of a
//! request whose run waits on an approval collects it (holding up to
//! `hold` on the core's decision wait; one whose approval lapsed has it
//! expired and is decided again); one whose run is executing under
//! a live lease is `IN_PROGRESS`; otherwise a new run begins, its index row
//! written in the run's first write group, and the call is proposed,
//! decided, executed and answered. Deciding happens under one mutex;
//! executing and holding outside it.
//!
//! A run whose lease expired (its proxy died mid-call) is taken over
//! first (rule 3): a change cut off while executing is `INTERRUPTED` until
//! an operator decides; anything else ends and the call goes on.
//!
//! Then rules 4–5 ([`crate::repeat`]) refuse a request rejected,
//! cancelled or expired within the window, and a change that already ran.
//!
//! Rule 6 asks again about a change whose last attempt's outcome is
//! unknown (the policy told of the attempt through [`crate::policy::Reruns`]);
//! rule 7 caps the approvals a session may have waiting.
//!
//! While another request to the same tool has an unknown outcome, other
//! changes to the tool are blocked, naming the question about it; one
//! nobody is asked about is asked again first, and runs of the tool a dead
//! proxy left behind are taken over first.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::operator::{Awaited, Operator};
use agentrt::{
    Canonical, Decision, Gate, Labels, Limits, RunStatus, Store, Timestamp, ToolSpec,
    VerdictOutcome, gate::Session, model::Origin,
};

use crate::answer::{self, Answer};
use crate::caller::Caller;
use crate::config::Config;
use crate::flight::Flights;
use crate::history::{self, AskAgain, Unresolved};
use crate::index::{self, CallRow};
use crate::key_state::{self, INTERRUPTION, OnCall};
use crate::notices::Notices;
use crate::repeat::{self, Attempt, Refusal};

/// What the proxy needs to answer calls.
pub struct Proxy {
    gate: Gate,
    operator: Operator,
    config: Arc<Config>,
    specs: BTreeMap<String, ToolSpec>,
    origins: BTreeMap<String, (String, String)>,
    reruns: crate::policy::Reruns,
    decide: tokio::sync::Mutex<()>,
    /// Request keys this process has seen (see [`SeenKeys`]).
    seen: SeenKeys,
    /// Runs this process saw settle, whose rows the next run's first
    /// write group closes (see [`SettledRuns`]).
    settled: SettledRuns,
    notices: Notices,
    flights: Flights,
}

/// How a new run claims its request's index row.
enum Claiming {
    /// The request has no row in the session (checked in the group).
    New,
    /// After the key's open row as read (none: no open row).
    After(Option<String>),
}

/// The request keys this process has begun runs for, as 64-bit prefixes:
/// a hint that a request is new, which the run's first write group then
/// checks against the index. Bounded: when full it starts over, which
/// only sends calls the long way once more.
#[derive(Default)]
struct SeenKeys(Mutex<std::collections::HashSet<u64>>);

/// The most keys [`SeenKeys`] remembers (about 16 MiB).
const SEEN_KEYS_MAX: usize = 1 << 20;

impl SeenKeys {
    /// Whether `key` is new to this process (and remembers it).
    fn first_time(&self, key: &str) -> bool {
        let Some(prefix) = key.get(..16).and_then(|p| u64::from_str_radix(p, 16).ok()) else {
            return false;
        };
        let Ok(mut seen) = self.0.lock() else {
            return false;
        };
        if seen.len() >= SEEN_KEYS_MAX {
            seen.clear();
        }
        seen.insert(prefix)
    }
}

/// The runs this process saw finish with a known outcome (or none), not
/// yet closed in the index: the next run's first write group closes their
/// rows ([`index::settle`]), and until then rule 7 knows them settled
/// without reading them. Bounded: past [`SETTLED_MAX`] a run is not
/// listed, and rule 7 reads its row like any other open one.
#[derive(Default)]
struct SettledRuns(Mutex<Vec<String>>);

/// The most runs [`SettledRuns`] lists.
const SETTLED_MAX: usize = 1024;

/// The most rows one run's first write group closes as settled.
const SETTLE_MAX: usize = 256;

impl SettledRuns {
    /// Lists `run_id`.
    fn push(&self, run_id: &str) {
        if let Ok(mut runs) = self.0.lock()
            && runs.len() < SETTLED_MAX
        {
            runs.push(run_id.to_owned());
        }
    }

    /// Lists `run_ids` again (their write group was not written).
    fn put_back(&self, run_ids: Vec<String>) {
        for run_id in run_ids {
            self.push(&run_id);
        }
    }

    /// The runs listed.
    fn listed(&self) -> Vec<String> {
        self.0.lock().map(|runs| runs.clone()).unwrap_or_default()
    }

    /// Takes up to `most` runs off the list.
    fn take(&self, most: usize) -> Vec<String> {
        let Ok(mut runs) = self.0.lock() else {
            return Vec::new();
        };
        let most = most.min(runs.len());
        runs.drain(..most).collect()
    }
}

/// What a takeover leaves.
enum TakenOver {
    /// The run ended: the call goes on to a new run.
    Ended,
    /// The call is answered by this plan.
    Paused(Plan),
}

/// The most runs rule 7 takes over before one call is answered.
const TAKEOVER_ROUNDS: usize = 8;

/// The records could not be read or written.
struct Unavailable;

/// How often a held call with a progress token is told it still waits.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// A call's hold: how long it may wait in all, from when it began.
struct Hold {
    total: Duration,
    began: tokio::time::Instant,
}

impl Hold {
    fn new(total: Duration) -> Hold {
        Hold {
            total,
            began: tokio::time::Instant::now(),
        }
    }

    fn waited(&self) -> Duration {
        self.began.elapsed()
    }

    fn left(&self) -> Duration {
        self.total.saturating_sub(self.waited())
    }
}

/// How a hold ended.
enum Held {
    /// With this answer.
    Answered(Answer),
    /// The approval lapsed (this answer if the call is not decided again).
    Lapsed(Answer),
}

/// What a verdict leads to.
enum Next {
    /// The answer.
    Done(Answer),
    /// A run begun for a request believed new was never stored (the
    /// request has rows after all, or another call began it first):
    /// decide the call again.
    Again,
    /// Hold on this approval of this run.
    Hold {
        run_id: String,
        approval_id: String,
        interruption: bool,
    },
}

/// What the decision under the mutex found for a request.
enum Plan {
    /// Hold on this pending approval of this run.
    Hold {
        run_id: String,
        approval_id: String,
        interruption: bool,
    },
    /// The run's approval was granted: attach and execute.
    Attach { run_id: String },
    /// The same request executes under a live lease.
    InProgress,
    /// A new run began.
    Began(Box<Session>),
    /// An earlier attempt was cut off while it ran: an operator decides.
    Interrupted(String),
    /// Rules 4–5 refuse the call.
    Refused(Answer),
    /// A run for a request believed new was not begun (the request has
    /// rows after all): decide the call again, the long way.
    Again,
    /// The records could not be read or written.
    Unavailable,
}

impl Proxy {
    /// A proxy over `gate` (its tools registered, its policy the proxy's);
    /// `specs` are the registered tools and `origins` maps each to its
    /// server and the server's own name for it; `reruns` is shared with
    /// the policy (rule 6); operator notices go to `notices`.
    pub fn new(
        gate: Gate,
        config: Arc<Config>,
        specs: BTreeMap<String, ToolSpec>,
        origins: BTreeMap<String, (String, String)>,
        reruns: crate::policy::Reruns,
        notices: Box<dyn Write + Send>,
    ) -> Proxy {
        let operator = Operator::new(gate.store().clone());
        Proxy {
            gate,
            operator,
            config,
            specs,
            origins,
            reruns,
            decide: tokio::sync::Mutex::new(()),
            seen: SeenKeys::default(),
            settled: SettledRuns::default(),
            notices: Notices::new(notices),
            flights: Flights::new(),
        }
    }

    /// The registered tools, by name.
    pub fn specs(&self) -> &BTreeMap<String, ToolSpec> {
        &self.specs
    }

    /// Store reads off the async workers, on the core's blocking hop.
    async fn off_executor<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Store) -> agentrt::Result<T> + Send + 'static,
    ) -> agentrt::Result<T> {
        self.gate.store().off_executor(read).await
    }

    /// Stops taking calls: a new call is answered `UNAVAILABLE`, and the
    /// calls held on an approval end now (as if their hold ran out).
    /// Calls executing upstream go on; [`Proxy::landed`] waits for them.
    pub fn stop(&self) {
        self.flights.stop();
    }

    /// Resolves when no call is in flight (after [`Proxy::stop`], when
    /// every call taken has finished and been recorded).
    pub async fn landed(&self) {
        self.flights.landed().await;
    }

    /// The status tool's name.
    pub fn status_tool(&self) -> &str {
        &self.config.status_tool
    }

    /// Answers the status tool (never a run; reads only).
    pub async fn status(&self, args: Option<&[u8]>) -> Answer {
        let asked = match crate::status::asked_id(args) {
            Ok(asked) => asked,
            Err(problem) => return answer::invalid(&problem),
        };
        let session = self.config.session.clone();
        self.off_executor(move |store| {
            crate::status::status(store, &session, asked.as_deref(), Timestamp::now())
        })
        .await
        .unwrap_or_else(|_| answer::unavailable(false))
    }

    /// Answers one call of `name` with `args` (absent or `null`: `{}`),
    /// made in the HTTP session `http_session` if any; `None` when the
    /// proxy offers no such tool. [`Proxy::call_as`] with the host's side.
    pub async fn call(
        &self,
        name: &str,
        args: Option<&[u8]>,
        http_session: Option<&str>,
    ) -> Option<Answer> {
        let mut caller = Caller::default();
        caller.http_session = http_session.map(str::to_owned);
        self.call_as(name, args, &mut caller).await
    }

    /// Answers one call of `name` with `args` from `caller`: a call held
    /// on an approval tells `caller` its progress and ends when `caller`
    /// gives up or the proxy stops; `None` when the proxy offers no such
    /// tool.
    pub async fn call_as(
        &self,
        name: &str,
        args: Option<&[u8]>,
        caller: &mut Caller,
    ) -> Option<Answer> {
        let spec = self.specs.get(name)?;
        let Some(_boarded) = self.flights.board() else {
            return Some(answer::stopping());
        };
        let bytes: Vec<u8> = match args {
            None => b"{}".to_vec(),
            Some(b) if b.trim_ascii() == b"null" => b"{}".to_vec(),
            Some(b) => b.to_vec(),
        };
        // Arguments the canonical form refuses have no key: no cross-call
        // rule applies and the gate records them invalid.
        let key = Canonical::parse(&bytes)
            .ok()
            .map(|c| index::request_key(name, &c));
        let hold = Hold::new(self.config.hold);
        let mut lapsed_before = false;
        loop {
            let plan = {
                let _deciding = self.decide.lock().await;
                self.plan(spec, key.as_deref(), caller.http_session.as_deref())
                    .await
            };
            let next = match plan {
                Plan::Unavailable => Next::Done(answer::unavailable(false)),
                Plan::InProgress => Next::Done(answer::in_progress()),
                Plan::Hold {
                    run_id,
                    approval_id,
                    interruption,
                } => Next::Hold {
                    run_id,
                    approval_id,
                    interruption,
                },
                Plan::Attach { run_id } => self.attach_once(&run_id).await,
                Plan::Began(session) => self.first_step(*session, name, bytes.clone()).await,
                Plan::Interrupted(approval_id) => Next::Done(answer::interrupted(&approval_id)),
                Plan::Refused(answer) => Next::Done(answer),
                Plan::Again => Next::Again,
            };
            let (run_id, approval_id, interruption) = match next {
                Next::Done(answer) => return Some(answer),
                // The key is known now: decided the long way.
                Next::Again => continue,
                Next::Hold {
                    run_id,
                    approval_id,
                    interruption,
                } => (run_id, approval_id, interruption),
            };
            match self
                .hold(&run_id, &approval_id, interruption, &hold, caller)
                .await
            {
                Held::Answered(answer) => return Some(answer),
                // Rule 1: an approval that lapsed is expired and the call
                // decided again (once: it may ask anew, and that question
                // lapsing too is the answer).
                Held::Lapsed(answer) if lapsed_before => return Some(answer),
                Held::Lapsed(_) => lapsed_before = true,
            }
        }
    }

    /// Decides what a call of `spec` with request `key` does (rules 1–2,
    /// else a new run), under the deciding mutex.
    async fn plan(&self, spec: &ToolSpec, key: Option<&str>, http_session: Option<&str>) -> Plan {
        // A request this process has not seen, to a tool no cross-call
        // rule reads other rows for, begins its run at once: its first
        // write group checks that the key has no row at all, which is
        // what rules 1–6 would have read.
        if let Some(key) = key
            && self.only_own_rows(spec)
            && self.seen.first_time(key)
        {
            return self
                .begin(
                    spec,
                    Some(key),
                    Claiming::New,
                    http_session,
                    None,
                    Vec::new(),
                )
                .await;
        }
        let now = Timestamp::now();
        let read_only = spec.side_effect == agentrt::SideEffect::ReadOnly;
        let rules = history::Rules::All {
            now,
            window: self.window(&spec.name),
            read_only,
        };
        // One trip off the executor: the key's state and, when a new run
        // may begin, its earlier runs (rules 4–6).
        let session = self.config.session.clone();
        let read = match key {
            None => Ok((OnCall::NewRun { previous: None }, None)),
            Some(key) => {
                let key = key.to_owned();
                self.off_executor(move |store| {
                    let facts = key_state::read(store, &session, &key, now)?;
                    let on_call = key_state::on_call(key_state::classify(facts));
                    let past = match on_call {
                        OnCall::NewRun { .. } => {
                            Some(history::past_runs(store, &session, &key, rules)?)
                        }
                        _ => None,
                    };
                    Ok((on_call, past))
                })
                .await
            }
        };
        let Ok((on_call, past)) = read else {
            return Plan::Unavailable;
        };
        let previous = match on_call {
            OnCall::Hold {
                run_id,
                approval_id,
                interruption,
            } => {
                return Plan::Hold {
                    run_id,
                    approval_id,
                    interruption,
                };
            }
            OnCall::Collect { run_id } => return Plan::Attach { run_id },
            OnCall::InProgress => return Plan::InProgress,
            OnCall::TakeOver { run_id } => match self.take_over(&run_id, &spec.name).await {
                TakenOver::Ended => Some(run_id),
                TakenOver::Paused(plan) => return plan,
            },
            OnCall::NewRun { previous } => previous,
        };
        let mut rerun = None;
        if let Some(key) = key {
            let past = match past {
                Some(past) => past,
                // After a takeover: read now.
                None => {
                    let (session, key) = (self.config.session.clone(), key.to_owned());
                    match self
                        .off_executor(move |store| history::past_runs(store, &session, &key, rules))
                        .await
                    {
                        Ok(past) => past,
                        Err(_) => return Plan::Unavailable,
                    }
                }
            };
            let window = self.window(&spec.name);
            if let Some(refusal) = repeat::judge(&past, now, window, read_only) {
                return Plan::Refused(refused(refusal));
            }
            if !read_only {
                rerun = repeat::unknown_attempt(&past);
            }
        }
        // Rows rule 7 saw settled, closed by the new run's first write.
        let mut settled = Vec::new();
        // Rule 7: while another request to the same tool has an unknown
        // outcome, a change is blocked, naming the question about it.
        if !read_only {
            match self.unknown_on_tool(spec, key, &mut settled).await {
                Ok(Some(approval_id)) => {
                    return Plan::Refused(answer::blocked_by_unknown(&approval_id));
                }
                Ok(None) => {}
                Err(Unavailable) => return Plan::Unavailable,
            }
        }
        // Rule 7: a call that will ask for an approval while the session
        // has `max_pending` waiting is blocked without asking.
        if self.asks_approval(spec) {
            let session = self.config.session.clone();
            let known = self.settled.listed();
            let waiting = self
                .off_executor(move |store| history::waiting_approvals(store, &session, &known))
                .await;
            match waiting {
                Ok(looked) if looked.found >= u64::from(self.config.max_pending) => {
                    return Plan::Refused(answer::blocked_by_pending(looked.found));
                }
                Ok(looked) => settled.extend(looked.settled),
                Err(_) => return Plan::Unavailable,
            }
        }
        self.begin(
            spec,
            key,
            Claiming::After(previous),
            http_session,
            rerun,
            settled,
        )
        .await
    }

    /// Whether deciding a call of `spec` reads only its own request's
    /// rows: a read-only tool (rule 7's unknown outcomes are about
    /// changes) whose calls ask no approval (rule 7's `max_pending`).
    fn only_own_rows(&self, spec: &ToolSpec) -> bool {
        spec.side_effect == agentrt::SideEffect::ReadOnly && !self.asks_approval(spec)
    }

    /// Rule 7: the question an operator is asked about another request to
    /// `spec`'s tool whose outcome is unknown. If nothing waits about it
    /// (the question expired or was rejected, the step limit, a crash
    /// before asking) it is asked again in a fresh run first, so a tool is
    /// never blocked with nothing to act on; runs of the tool left behind
    /// by a dead proxy are taken over first.
    async fn unknown_on_tool(
        &self,
        spec: &ToolSpec,
        own_key: Option<&str>,
        settled: &mut Vec<String>,
    ) -> Result<Option<String>, Unavailable> {
        // A takeover that ends a run can uncover the next one; each round
        // settles one row, and the rows are few.
        for _ in 0..TAKEOVER_ROUNDS {
            let session = self.config.session.clone();
            let (tool, own) = (spec.name.clone(), own_key.map(str::to_owned));
            let known = self.settled.listed();
            let looked = self
                .off_executor(move |store| {
                    history::unresolved(store, &session, &tool, own.as_deref(), &known)
                })
                .await
                .map_err(|_| Unavailable)?;
            settled.extend(looked.settled);
            match looked.found {
                None => return Ok(None),
                Some(Unresolved::Asked(approval_id)) => return Ok(Some(approval_id)),
                Some(Unresolved::Abandoned(run_id)) => {
                    match self.take_over(&run_id, &spec.name).await {
                        TakenOver::Paused(Plan::Interrupted(approval_id)) => {
                            return Ok(Some(approval_id));
                        }
                        // Ended, or another proxy took it first.
                        TakenOver::Ended | TakenOver::Paused(Plan::InProgress) => {}
                        TakenOver::Paused(_) => return Err(Unavailable),
                    }
                }
                Some(Unresolved::NobodyAsked(again)) => {
                    return self.ask_again(spec, *again).await.map(Some);
                }
            }
        }
        Err(Unavailable)
    }

    /// Asks again, in a fresh run of its request, about an attempt whose
    /// outcome is unknown: the recorded request proposed by the operator's
    /// side, the policy told of the attempt (rule 6's question). Nothing
    /// is executed: the approval's id, or unavailable.
    async fn ask_again(&self, spec: &ToolSpec, again: AskAgain) -> Result<String, Unavailable> {
        let plan = self
            .begin(
                spec,
                Some(&again.key),
                Claiming::After(Some(again.previous)),
                None,
                Some(again.attempt),
                Vec::new(),
            )
            .await;
        let Plan::Began(session) = plan else {
            return Err(Unavailable);
        };
        let mut session = *session;
        let asked = async {
            session.step().await?;
            let decision =
                Decision::tool_call(&spec.name, again.args).with_origin(Origin::Operator);
            session.propose(decision).await
        }
        .await;
        let asked = match asked {
            Ok(verdict) if verdict.outcome == VerdictOutcome::Pending => {
                verdict.approval.map(|approval| {
                    self.notice(&approval.id, &approval.kind, &verdict.run.id, &spec.name);
                    approval.id
                })
            }
            // Denied: the tool is refused now, and so is this call.
            Ok(verdict) if verdict.outcome == VerdictOutcome::Denied => {
                let _ = end_run(&mut session, "one call per run: the question was refused").await;
                None
            }
            // Never executed here: the question is the only thing asked.
            _ => None,
        };
        let _ = session.close().await;
        asked.ok_or(Unavailable)
    }

    /// Whether the policy's outcome for `spec` is to ask an operator (its
    /// rule's outcome, else its class's).
    fn asks_approval(&self, spec: &ToolSpec) -> bool {
        let rule = self.origins.get(&spec.name).and_then(|(server, upstream)| {
            self.config
                .servers
                .iter()
                .find(|s| &s.server.name == server)
                .and_then(|s| s.rules.get(upstream))
        });
        let outcome = rule
            .and_then(|r| r.outcome)
            .or_else(|| self.config.policy.get(&spec.side_effect).copied());
        outcome == Some(agentrt::Outcome::RequireApproval)
    }

    /// The repeat window of a registered tool: its rule's, else the
    /// session's.
    fn window(&self, name: &str) -> Duration {
        let (server, upstream) = match self.origins.get(name) {
            Some(origin) => (origin.0.as_str(), origin.1.as_str()),
            None => return self.config.repeat_window,
        };
        self.config
            .servers
            .iter()
            .find(|s| s.server.name == server)
            .and_then(|s| s.rules.get(upstream))
            .and_then(|r| r.repeat_window)
            .unwrap_or(self.config.repeat_window)
    }

    /// Takes over a run whose lease expired (the core's interruption
    /// contract): a tool that is not read-only cut off while executing
    /// pauses the run on an `interrupted_side_effect` approval (the call
    /// answers `INTERRUPTED`); otherwise (a read cut off, a call cut before
    /// its tool ran or after its outcome was recorded) the run is ended
    /// and the call goes on to a new run.
    async fn take_over(&self, run_id: &str, tool: &str) -> TakenOver {
        let (mut session, verdict) = match self.gate.attach(run_id).await {
            Ok(attached) => attached,
            Err(agentrt::Error::RunLeased { .. }) => {
                return TakenOver::Paused(Plan::InProgress);
            }
            Err(_) => return TakenOver::Paused(Plan::Unavailable),
        };
        let taken = match verdict.outcome {
            VerdictOutcome::Pending => match verdict.approval {
                Some(approval) => {
                    self.notice(&approval.id, &approval.kind, run_id, tool);
                    TakenOver::Paused(Plan::Interrupted(approval.id))
                }
                None => TakenOver::Paused(Plan::Unavailable),
            },
            VerdictOutcome::Ended => TakenOver::Ended,
            _ => match end_run(&mut session, "one call per run: the call was cut off").await {
                Ok(()) => TakenOver::Ended,
                Err(_) => TakenOver::Paused(Plan::Unavailable),
            },
        };
        let _ = session.close().await;
        taken
    }

    /// Begins a new run for a call, its index row (closing the key's
    /// finished one) in the run's first write group, with the rows seen
    /// settled (`settled`, and those this process saw settle) closed.
    async fn begin(
        &self,
        spec: &ToolSpec,
        key: Option<&str>,
        claiming: Claiming,
        http_session: Option<&str>,
        rerun: Option<Attempt>,
        mut settled: Vec<String>,
    ) -> Plan {
        let config = &self.config;
        let run_id = format!("{}.{}", config.session, &agentrt::ids::random_id()[..16]);
        let server = self
            .origins
            .get(&spec.name)
            .map(|o| o.0.clone())
            .unwrap_or_default();
        let mut labels = vec![
            format!("mcp.session={}", config.session),
            format!("mcp.server={server}"),
            format!("mcp.tool={}", spec.name),
        ];
        if let Some(id) = http_session {
            labels.push(format!("mcp.http_session={id}"));
        }
        let labels = Labels::parse(labels);
        let Ok(labels) = labels else {
            return Plan::Unavailable;
        };
        let limits = Limits {
            max_steps: 3,
            max_consecutive_tool_failures: 3,
            loop_threshold: 3,
            approval_ttl_ms: millis(config.approval_ttl),
            grant_ttl_ms: millis(config.grant_ttl),
            ..Limits::default()
        };
        // A call without a key (arguments the canonical form refuses)
        // still gets a row, keyed by its own run, so it matches nothing.
        let row = CallRow {
            run_id: run_id.clone(),
            session: config.session.clone(),
            request_key: key.map_or_else(|| format!("none:{run_id}"), str::to_owned),
            tool: spec.name.clone(),
            side_effect: spec.side_effect.as_str().to_owned(),
            created_at: String::new(),
            open: true,
        };
        let at = Timestamp::now();
        let deferred = matches!(claiming, Claiming::New);
        settled.extend(self.settled.take(SETTLE_MAX.saturating_sub(settled.len())));
        settled.truncate(SETTLE_MAX);
        let settling = settled.clone();
        let rows: agentrt::gate::SatelliteRows = Box::new(move |tx| {
            match claiming {
                Claiming::New => index::claim_new(tx, &row, at)?,
                Claiming::After(previous) => index::claim(tx, &row, previous.as_deref(), at)?,
            }
            for run_id in &settling {
                index::settle(tx, run_id, at)?;
            }
            Ok(())
        });
        let goal = format!("call {}", spec.name);
        // Rule 6: the policy asks about the earlier attempt this run
        // re-runs (told before the run's request is proposed).
        if let Some(attempt) = rerun
            && let Ok(mut reruns) = self.reruns.lock()
        {
            reruns.insert(run_id.clone(), attempt);
        }
        // A request believed new is written with its tool's start (one
        // commit fewer); a refused claim then shows in `first_step`.
        let began = if deferred {
            self.gate
                .begin_deferred_with_rows(Some(&run_id), &goal, limits, labels, rows)
                .await
        } else {
            self.gate
                .begin_with_rows(Some(&run_id), &goal, limits, labels, rows)
                .await
        };
        if began.is_err() {
            // Nothing was written: the rows stay open until a later run.
            self.settled.put_back(settled);
        }
        match began {
            Ok(session) => Plan::Began(Box::new(session)),
            Err(e) if index::is_seen(&e) => Plan::Again,
            // Another process began the same request first: this call is
            // in progress there.
            Err(e) if index::is_lost_race(&e) => Plan::InProgress,
            Err(_) => Plan::Unavailable,
        }
    }

    /// Proposes the model's call in the run's first step: the answer, or
    /// the approval to hold on.
    async fn first_step(&self, mut session: Session, name: &str, args: Vec<u8>) -> Next {
        let next = async {
            session.step().await?;
            let decision = Decision::tool_call(name, args).with_origin(Origin::Model);
            let verdict = session.propose(decision).await?;
            self.after_verdict(&mut session, verdict).await
        }
        .await;
        let _ = session.close().await;
        let stored = session.stored();
        // The session holds the run's claim until dropped: a hold that
        // collects the approval attaches to the run anew.
        drop(session);
        match next {
            Ok(next) => next,
            // The run's deferred first write was refused: nothing was
            // stored and nothing ran.
            Err(e) if !stored && (index::is_seen(&e) || index::is_lost_race(&e)) => Next::Again,
            Err(_) => Next::Done(answer::unavailable(true)),
        }
    }

    /// What a verdict leads to: execute, end the run refused, or pause.
    async fn after_verdict(
        &self,
        session: &mut Session,
        verdict: agentrt::Verdict,
    ) -> agentrt::Result<Next> {
        let answer = match verdict.outcome {
            VerdictOutcome::Allowed => {
                let observation = session.execute().await?;
                let answer = answer::observed(&observation);
                if session.run().status == RunStatus::WaitingForApproval {
                    // An unknown outcome paused the run on an interruption.
                    let run_id = session.run().id.clone();
                    let approval = self
                        .off_executor(move |store| store.list_approvals(&run_id))
                        .await
                        .ok()
                        .and_then(|a| a.last().map(|a| a.id.clone()));
                    return Ok(Next::Done(answer::unknown_outcome(approval.as_deref())));
                }
                if !session.done() {
                    end_run(session, "one call per run: the tool reported an error").await?;
                }
                // The tool ran with a known outcome (or is a read): the
                // row has settled.
                self.settled.push(&session.run().id);
                answer
            }
            VerdictOutcome::Denied => {
                let answer = verdict
                    .observation
                    .as_ref()
                    .map_or_else(|| answer::denied(""), answer::observed);
                end_run(session, "one call per run: the request was refused").await?;
                // A refused read has settled; a refused change leaves its
                // request's last attempt as it was (rule 7 looks).
                let read = verdict.request.as_ref().map(|r| r.spec.side_effect);
                if read == Some(agentrt::SideEffect::ReadOnly) {
                    self.settled.push(&session.run().id);
                }
                answer
            }
            VerdictOutcome::Pending => {
                let Some(approval) = verdict.approval else {
                    return Ok(Next::Done(answer::unavailable(false)));
                };
                let tool = verdict.request.as_ref().map(|r| r.spec.name.as_str());
                self.notice(
                    &approval.id,
                    &approval.kind,
                    &verdict.run.id,
                    tool.unwrap_or(""),
                );
                return Ok(Next::Hold {
                    run_id: verdict.run.id.clone(),
                    interruption: approval.kind == INTERRUPTION,
                    approval_id: approval.id,
                });
            }
            VerdictOutcome::Ended | VerdictOutcome::Open => answer::unavailable(false),
        };
        Ok(Next::Done(answer))
    }

    /// Tells the operator on stderr that an approval waits (through the
    /// notices' own thread: never waits for stderr).
    fn notice(&self, approval_id: &str, kind: &str, run_id: &str, tool: &str) {
        let db = &self.config.database;
        self.notices.send(format!(
            "agentrt-proxy: approval {approval_id} ({kind}) for {tool} waits for an operator: run {run_id}\n\
             agentrt-proxy:   decide with: agentrt --db \"{db}\" approve {run_id} --approval {approval_id}   (or reject)\n"
        ));
    }

    /// How many operator notices were dropped because the notices' writer
    /// (stderr) did not keep up.
    pub fn dropped_notices(&self) -> u64 {
        self.notices.dropped()
    }

    /// Holds the call on approval `approval_id` of `run_id` until `hold`
    /// runs out, the host gives up or the proxy stops, telling the host
    /// its progress about once a second; an approval decided in time is
    /// collected (the policy asked again, the recorded request run).
    async fn hold(
        &self,
        run_id: &str,
        approval_id: &str,
        interruption: bool,
        hold: &Hold,
        caller: &mut Caller,
    ) -> Held {
        let mut waiting_for = approval_id.to_owned();
        let mut interruption = interruption;
        loop {
            let left = hold.left();
            // With a progress token the wait is cut in seconds, each
            // still woken by the decision's commit (no polling).
            let slice = if caller.progress.is_some() {
                left.min(PROGRESS_EVERY)
            } else {
                left
            };
            let waited = tokio::select! {
                waited = self.operator.wait_for_decision(run_id, &waiting_for, slice) => waited,
                // Nobody waits for the answer any more: the hold ends as
                // if it ran out (the approval still waits).
                () = caller.given_up() => return held_out(&waiting_for, interruption),
                () = self.flights.stopping() => return held_out(&waiting_for, interruption),
            };
            return match waited {
                Ok(Awaited::Approved(_)) => match self.attach_once(run_id).await {
                    Next::Done(answer) => Held::Answered(answer),
                    // Attaching never begins a run.
                    Next::Again => Held::Answered(answer::unavailable(false)),
                    // The policy asked again for another approval.
                    Next::Hold {
                        approval_id,
                        interruption: asks_again,
                        ..
                    } => {
                        waiting_for = approval_id;
                        interruption = asks_again;
                        continue;
                    }
                },
                Ok(Awaited::Rejected(a)) => {
                    let until = a
                        .decided_at
                        .map(|t| t.add(self.config.repeat_window))
                        .filter(|_| !self.config.repeat_window.is_zero());
                    Held::Answered(answer::rejected(&a.note, until))
                }
                Ok(Awaited::Expired(a)) => Held::Lapsed(answer::expired(&a.id)),
                Ok(Awaited::Superseded { latest, .. }) => {
                    waiting_for = latest.id.clone();
                    interruption = latest.kind == INTERRUPTION;
                    continue;
                }
                Ok(Awaited::RunEnded(_)) => Held::Answered(answer::cancelled(None)),
                // A slice ran out, not the hold.
                Ok(Awaited::TimedOut) if slice < left => {
                    if let Some(progress) = &caller.progress {
                        progress(hold.waited().as_secs(), hold.total.as_secs()).await;
                    }
                    continue;
                }
                Ok(Awaited::TimedOut) => held_out(&waiting_for, interruption),
                Ok(_) | Err(_) => Held::Answered(answer::unavailable(false)),
            };
        }
    }

    /// Attaches to a run whose approval was granted: the policy is asked
    /// again, and the recorded request (never this call's bytes) runs;
    /// or the approval the policy now asks for.
    async fn attach_once(&self, run_id: &str) -> Next {
        // Rule 6's fact for a re-run asked before this process started:
        // the policy asked again must see the attempt its question named.
        let known = self.reruns.lock().is_ok_and(|r| r.contains_key(run_id));
        if !known {
            let id = run_id.to_owned();
            match self
                .off_executor(move |store| crate::policy::named_attempt(store, &id))
                .await
            {
                Ok(Some(attempt)) => {
                    if let Ok(mut reruns) = self.reruns.lock() {
                        reruns.insert(run_id.to_owned(), attempt);
                    }
                }
                Ok(None) => {}
                Err(_) => return Next::Done(answer::unavailable(false)),
            }
        }
        let (mut session, verdict) = match self.gate.attach(run_id).await {
            Ok(attached) => attached,
            Err(agentrt::Error::RunLeased { .. }) => return Next::Done(answer::in_progress()),
            Err(_) => return Next::Done(answer::unavailable(false)),
        };
        let next = self.after_verdict(&mut session, verdict).await;
        let _ = session.close().await;
        next.unwrap_or_else(|_| Next::Done(answer::unavailable(true)))
    }
}

/// The answer of a hold that ran out on approval `approval_id`.
fn held_out(approval_id: &str, interruption: bool) -> Held {
    Held::Answered(if interruption {
        answer::interrupted(approval_id)
    } else {
        answer::pending(approval_id)
    })
}

/// Ends a run the call is done with: a `fail` decision of origin
/// `operator` in a new step.
async fn end_run(session: &mut Session, reason: &str) -> agentrt::Result<()> {
    if session.done() {
        return Ok(());
    }
    if session.step().await?.is_none() {
        return Ok(());
    }
    session
        .propose(Decision::fail(reason).with_origin(Origin::Operator))
        .await?;
    Ok(())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// The answer of a refusal by rules 4–5.
fn refused(refusal: Refusal) -> Answer {
    match refusal {
        Refusal::Rejected { note, until } => answer::rejected(&note, Some(until)),
        Refusal::Cancelled { until } => answer::cancelled(Some(until)),
        Refusal::Expired { approval_id } => answer::expired(&approval_id),
        Refusal::Duplicate { at, outcome, until } => answer::duplicate(at, outcome.words(), until),
    }
}
