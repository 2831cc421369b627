//! One run per `tools/call` (design §28, §30 rules 1–2): a call of a
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

mod begin;
mod hold;
mod plan;
mod seen;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use agentrt::operator::Operator;
use agentrt::{
    Canonical, Decision, Gate, Store, Timestamp, ToolSpec, gate::Session, model::Origin,
};

use crate::answer::{self, Answer};
use crate::caller::Caller;
use crate::config::Config;
use crate::flight::Flights;
use crate::index;
use crate::notices::Notices;
use crate::oauth::Identity;
use hold::{Held, Hold};
use seen::{SeenKeys, SettledRuns};

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

/// The records could not be read or written.
struct Unavailable;

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
    /// A new run began (nothing written yet), with the runs its first
    /// write group settles in the call index.
    Began(Box<Session>, Vec<String>),
    /// An earlier attempt was cut off while it ran: an operator decides.
    Interrupted(String),
    /// Rules 4–5 refuse the call.
    Refused(Answer),
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
        self.status_for(args, None).await
    }

    /// Answers the status tool for `caller`: with a caller an OAuth token
    /// named, only that caller's requests are told of.
    pub async fn status_for(&self, args: Option<&[u8]>, caller: Option<Arc<Identity>>) -> Answer {
        let asked = match crate::status::asked_id(args) {
            Ok(asked) => asked,
            Err(problem) => return answer::invalid(&problem),
        };
        let session = self.config.session.clone();
        self.off_executor(move |store| {
            crate::status::status(
                store,
                &session,
                asked.as_deref(),
                Timestamp::now(),
                caller.as_deref(),
            )
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
            .map(|c| match &caller.identity {
                None => index::request_key(name, &c),
                Some(who) => index::caller_request_key(name, &c, &who.issuer, &who.subject),
            });
        let hold = Hold::new(self.config.hold);
        let mut lapsed_before = false;
        loop {
            let plan = {
                let _deciding = self.decide.lock().await;
                self.plan(spec, key.as_deref(), caller.asker()).await
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
                Plan::Began(session, settling) => {
                    self.first_step(*session, settling, name, bytes.clone())
                        .await
                }
                Plan::Interrupted(approval_id) => Next::Done(answer::interrupted(&approval_id)),
                Plan::Refused(answer) => Next::Done(answer),
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
