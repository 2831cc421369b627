//! Model budgets: every attempt recorded before dispatch, limits checked
//! before anything is sent, unknown outcomes charged conservatively.

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use agentrt::budget::{CallError, ModelCaller, ModelConfig, Price, PriceTable};
use agentrt::*;
use agentrt::{
    clock::ManualClock, ids::sequential_ids, llm::ContentBlock, llm::Message, llm::Role,
    llm::StopReason, model::CallStatus, model::ModelCall,
};
use common::*;
use proptest::prelude::*;
use tokio::sync::{Notify, watch};

/// What the fake model does on one call.
#[derive(Debug, Clone)]
enum Act {
    Reply(Usage),
    Fail(ModelError),
    Hang,
}

/// A model that plays a list of acts, and can look at the store while it
/// is called.
struct Fake {
    acts: Mutex<VecDeque<Act>>,
    calls: AtomicUsize,
    store: Option<Store>,
    seen_dispatched: Mutex<Vec<usize>>,
}

impl Fake {
    fn new(acts: Vec<Act>) -> Arc<Fake> {
        Arc::new(Fake {
            acts: Mutex::new(acts.into()),
            calls: AtomicUsize::new(0),
            store: None,
            seen_dispatched: Mutex::new(Vec::new()),
        })
    }
}

impl Model for Fake {
    fn name(&self) -> &str {
        "fake"
    }
    fn generate<'a>(
        &'a self,
        _: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(store) = &self.store {
            let rows = store.list_model_calls("r").unwrap();
            let dispatched = rows
                .iter()
                .filter(|c| c.status == CallStatus::Dispatched)
                .count();
            self.seen_dispatched.lock().unwrap().push(dispatched);
        }
        let act = self
            .acts
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Act::Reply(Usage::default()));
        Box::pin(async move {
            match act {
                Act::Reply(usage) => Ok(ModelResponse {
                    text: "ok".into(),
                    tool_uses: vec![],
                    stop_reason: Some(StopReason::EndTurn),
                    usage,
                    raw: Some("{}".into()),
                }),
                Act::Fail(e) => Err(e),
                Act::Hang => std::future::pending().await,
            }
        })
    }
}

fn price() -> Price {
    Price {
        input_per_mtok_micros: 2_000_000,
        output_per_mtok_micros: 10_000_000,
        cached_input_per_mtok_micros: 500_000,
    }
}

fn config_for(model: Arc<dyn Model>) -> ModelConfig {
    let mut c = ModelConfig::new(model, PriceTable::new().with("fake", price()));
    c.backoff = Duration::from_millis(1);
    c.call_timeout = Duration::from_millis(200);
    c
}

fn request(cap: Option<u64>) -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text("what is the answer? ".repeat(10))],
        }],
        tools: vec![],
        max_output_tokens: cap,
    }
}

/// An agent that calls the model `calls` times per step, then completes;
/// model errors end the run as the runtime maps them.
struct Caller {
    calls: usize,
    cap: Option<u64>,
}

impl Agent for Caller {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            for _ in 0..self.calls {
                model.generate(request(self.cap)).await?;
            }
            Ok(Decision::complete("1"))
        })
    }
}

struct Outcome {
    run: Run,
    calls: Vec<ModelCall>,
    events: Vec<Event>,
}

async fn run_with(store: Store, model: Arc<dyn Model>, limits: Limits, agent: Caller) -> Outcome {
    let clock = stepping_clock();
    let config = config(&store, DefaultPolicy, vec![], &clock, &Recorder::default())
        .with_model(config_for(model));
    let mut d = Driver::new(config, agent).unwrap();
    let run = d.start(Some("r"), "g", limits).await.unwrap();
    Outcome {
        calls: store.list_model_calls("r").unwrap(),
        events: store.list_events("r").unwrap(),
        run,
    }
}

fn caller(calls: usize, cap: Option<u64>) -> Caller {
    Caller { calls, cap }
}

#[tokio::test]
async fn every_attempt_has_a_row_before_dispatch_and_usage_and_cost_are_recorded() {
    let store = Store::open(":memory:").unwrap();
    let usage = Usage {
        input_tokens: 50,
        output_tokens: 20,
        cached_input_tokens: 10,
    };
    let mut fake = Fake::new(vec![Act::Reply(usage)]);
    Arc::get_mut(&mut fake).unwrap().store = Some(store.clone());
    let out = run_with(store, fake.clone(), Limits::default(), caller(1, Some(100))).await;
    assert_eq!(out.run.status, RunStatus::Completed);
    assert_eq!(
        *fake.seen_dispatched.lock().unwrap(),
        [1],
        "the row existed, dispatched, while the model ran"
    );
    assert_eq!(out.calls.len(), 1);
    let call = &out.calls[0];
    assert_eq!(
        (call.status, call.attempt, call.model.as_str()),
        (CallStatus::Ok, 1, "fake")
    );
    assert_eq!(call.usage, usage);
    assert_eq!(call.cost_micros, price().cost(&usage));
    assert!(call.completed_at.is_some());
    assert_eq!(
        (
            out.run.model_calls,
            out.run.usage,
            out.run.estimated_cost_micros
        ),
        (1, usage, call.cost_micros)
    );
    let types: Vec<_> = out
        .events
        .iter()
        .map(|e| e.event_type.to_string())
        .collect();
    assert!(
        types
            .windows(2)
            .any(|w| w == ["model.dispatched", "model.completed"])
    );
}

#[tokio::test]
async fn limits_refuse_before_anything_is_sent() {
    // A call limit: the second call is refused and nothing is sent.
    let fake = Fake::new(vec![]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default().max_model_calls(1),
        caller(2, Some(10)),
    )
    .await;
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    assert_eq!(out.calls.len(), 1);
    assert_eq!(out.run.reason, Some(TerminalReason::LimitModelCalls));
    assert!(
        out.events
            .iter()
            .any(|e| e.event_type == EventType::LimitExceeded)
    );

    // No output cap under a token limit, or under a cost limit for a priced model.
    for (limits, reason) in [
        (
            Limits::default().max_total_tokens(1_000_000),
            TerminalReason::LimitTokens,
        ),
        (
            Limits::default().max_estimated_cost_micros(1_000_000),
            TerminalReason::LimitCost,
        ),
    ] {
        let fake = Fake::new(vec![]);
        let out = run_with(
            Store::open(":memory:").unwrap(),
            fake.clone(),
            limits,
            caller(1, None),
        )
        .await;
        assert_eq!(out.run.reason, Some(reason));
        assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
        assert!(out.calls.is_empty());
    }
    // A projection past the token limit is refused.
    let fake = Fake::new(vec![]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default().max_total_tokens(50),
        caller(1, Some(40)),
    )
    .await;
    assert_eq!(out.run.reason, Some(TerminalReason::LimitTokens));
    assert_eq!(fake.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_free_model_needs_no_cap_under_a_cost_limit_and_an_unpriced_model_is_refused() {
    let fake = Fake::new(vec![]);
    let mut config = ModelConfig::new(fake.clone(), PriceTable::free(["fake"]));
    config.backoff = Duration::from_millis(1);
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let gate_config = config_for_gate(&store, &clock).with_model(config);
    let mut d = Driver::new(gate_config, caller(1, None)).unwrap();
    let run = d
        .start(
            Some("r"),
            "g",
            Limits::default().max_estimated_cost_micros(10),
        )
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);

    let unpriced = ModelConfig::new(fake, PriceTable::new());
    let err = Driver::new(
        config_for_gate(&store, &clock).with_model(unpriced),
        caller(1, None),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, Error::NoPrice { ref model } if model == "fake"),
        "{err:?}"
    );
}

fn config_for_gate(store: &Store, clock: &ManualClock) -> GateConfig {
    config(store, DefaultPolicy, vec![], clock, &Recorder::default())
}

#[tokio::test]
async fn transient_failures_are_retried_permanent_ones_not_and_exhaustion_is_model_unavailable() {
    let transient = || {
        Act::Fail(ModelError::Transient {
            message: "429".into(),
            retry_after: None,
        })
    };
    // Retried, each attempt counted, then success.
    let fake = Fake::new(vec![transient(), transient(), Act::Reply(Usage::default())]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.status, RunStatus::Completed);
    assert_eq!(
        out.calls.iter().map(|c| c.attempt).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(out.calls[0].status, CallStatus::Error);
    assert_eq!(
        out.calls[0].cost_micros, 0,
        "a transient failure is charged nothing"
    );
    assert_eq!(out.run.model_calls, 3);
    // Exhausted: model_unavailable, without limit.exceeded.
    let fake = Fake::new(vec![transient(), transient(), transient()]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.reason, Some(TerminalReason::ModelUnavailable));
    assert_eq!(out.calls.len(), 3);
    assert!(
        !out.events
            .iter()
            .any(|e| e.event_type == EventType::LimitExceeded)
    );
    // A permanent failure is not retried and costs nothing: the agent fails.
    for permanent in [
        ModelError::Other {
            message: "bad request".into(),
        },
        ModelError::Status {
            status: 401,
            message: "no key".into(),
        },
    ] {
        let fake = Fake::new(vec![Act::Fail(permanent)]);
        let out = run_with(
            Store::open(":memory:").unwrap(),
            fake.clone(),
            Limits::default(),
            caller(1, Some(10)),
        )
        .await;
        assert_eq!(out.calls.len(), 1);
        assert_eq!(out.calls[0].cost_micros, 0);
        assert_eq!(out.run.reason, Some(TerminalReason::AgentError));
    }
}

#[tokio::test]
async fn unknown_outcomes_are_charged_the_estimate() {
    let fake = Fake::new(vec![
        Act::Hang,
        Act::Fail(ModelError::ConnectionLost {
            message: "reset".into(),
        }),
        Act::Reply(Usage {
            input_tokens: 1,
            output_tokens: 1,
            cached_input_tokens: 0,
        }),
    ]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default(),
        caller(1, Some(64)),
    )
    .await;
    assert_eq!(out.run.status, RunStatus::Completed);
    let estimate = ModelCaller::estimate(&request(Some(64)));
    for c in &out.calls[..2] {
        assert_eq!(c.status, CallStatus::Ambiguous);
        assert_eq!(c.usage, estimate, "charged the projection");
        assert_eq!(c.cost_micros, price().cost(&estimate));
    }
    let total: i64 = out.calls.iter().map(|c| c.cost_micros).sum();
    assert_eq!(out.run.estimated_cost_micros, total);
}

#[tokio::test]
async fn a_call_in_flight_when_the_caller_cancels_is_recorded_ambiguous() {
    let store = Store::open(":memory:").unwrap();
    let fake = Fake::new(vec![Act::Hang]);
    let clock = stepping_clock();
    let (handle, signal) = cancel_pair();
    let mut config = config_for(fake.clone());
    config.call_timeout = Duration::from_secs(60);
    let gate_config = config_for_gate(&store, &clock).with_model(config);
    let mut d = Driver::new(gate_config, caller(1, Some(10)))
        .unwrap()
        .with_cancel(signal);
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        handle.cancel();
    });
    let err = d
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap_err();
    canceller.await.unwrap();
    assert!(matches!(err, Error::Cancelled), "{err:?}");
    let calls = store.list_model_calls("r").unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status, CallStatus::Ambiguous);
    assert_eq!(calls[0].usage, ModelCaller::estimate(&request(Some(10))));
}

#[tokio::test]
async fn served_errors_are_charged_and_unusable_usage_is_charged_the_estimate() {
    let served = Usage {
        input_tokens: 30,
        output_tokens: 0,
        cached_input_tokens: 0,
    };
    let fake = Fake::new(vec![Act::Fail(ModelError::Served {
        message: "content filter".into(),
        usage: served,
    })]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.calls.len(), 1, "not retried");
    assert_eq!(out.calls[0].usage, served);
    assert_eq!(out.run.reason, Some(TerminalReason::AgentError));

    let impossible = Usage {
        input_tokens: 5,
        output_tokens: 1,
        cached_input_tokens: 9,
    };
    let fake = Fake::new(vec![Act::Reply(impossible)]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.calls.len(), 1);
    assert_eq!(out.calls[0].status, CallStatus::Error);
    assert_eq!(
        out.calls[0].usage,
        ModelCaller::estimate(&request(Some(10)))
    );
    assert_eq!(out.run.reason, Some(TerminalReason::ModelUnavailable));
}

// On the runtime's paused clock: waits take no time, and a wait that
// should not happen shows as elapsed time, not as a hang.
#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured_and_an_unfittable_wait_ends_without_sleeping() {
    let fake = Fake::new(vec![
        Act::Fail(ModelError::Transient {
            message: "429".into(),
            retry_after: Some(Duration::from_millis(300)),
        }),
        Act::Reply(Usage::default()),
    ]);
    let started = tokio::time::Instant::now();
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.status, RunStatus::Completed);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited the Retry-After"
    );

    let fake = Fake::new(vec![Act::Fail(ModelError::Transient {
        message: "429".into(),
        retry_after: Some(Duration::from_secs(3600)),
    })]);
    let started = tokio::time::Instant::now();
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.reason, Some(TerminalReason::ModelUnavailable));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "did not sleep an hour"
    );
    assert_eq!(out.calls.len(), 1);
}

fn act() -> impl Strategy<Value = Act> {
    let usage = (0u64..400, 0u64..400, 0u64..400).prop_map(|(i, o, c)| Usage {
        input_tokens: i,
        output_tokens: o,
        cached_input_tokens: c,
    });
    prop_oneof![
        usage.clone().prop_map(Act::Reply),
        Just(Act::Fail(ModelError::Transient {
            message: "503".into(),
            retry_after: None
        })),
        Just(Act::Fail(ModelError::Timeout {
            message: "slow".into()
        })),
        Just(Act::Fail(ModelError::ConnectionLost {
            message: "cut".into()
        })),
        usage.prop_map(|u| Act::Fail(ModelError::Served {
            message: "no".into(),
            usage: u
        })),
        Just(Act::Fail(ModelError::UnusableUsage {
            message: "negative".into()
        })),
        Just(Act::Fail(ModelError::Other {
            message: "400".into()
        })),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// No sequence of replies, errors or timeouts lets the recorded spend pass
    /// the cost limit, and every attempt is on record with its charge.
    #[test]
    fn recorded_spend_never_passes_the_cost_limit(
        acts in proptest::collection::vec(act(), 1..24),
        limit in 1i64..20_000,
        cap in 1u64..400,
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let store = Store::open(":memory:").unwrap();
        let fake = Fake::new(acts);
        let out = rt.block_on(run_with(
            store,
            fake.clone(),
            Limits::default().max_estimated_cost_micros(limit).max_steps(100),
            caller(30, Some(cap)),
        ));
        prop_assert!(out.run.estimated_cost_micros <= limit, "spent {} of {}", out.run.estimated_cost_micros, limit);
        prop_assert_eq!(out.calls.len(), fake.calls.load(Ordering::SeqCst), "one row per attempt sent");
        prop_assert_eq!(out.run.model_calls as usize, out.calls.len());
        let total: i64 = out.calls.iter().map(|c| c.cost_micros).sum();
        prop_assert_eq!(out.run.estimated_cost_micros, total);
        for c in &out.calls {
            prop_assert!(c.status != CallStatus::Dispatched, "every attempt has an outcome");
            prop_assert_eq!(c.cost_micros, price().cost(&c.usage));
        }
    }
}

// Calls truly in flight at once: every caller is its own task (or thread)
// on a multi-thread runtime, and the model parks each call until the test
// has seen every admitted call arrive and every other one refused, so the
// admitted calls are all in flight together and none is charged yet. No
// sleep decides anything: the test waits on counters it is told about, and
// a wait that runs out fails the test.

/// How far a burst of callers has got: calls parked at the model, and
/// calls that returned without reaching it.
#[derive(Default)]
struct Progress {
    arrived: AtomicUsize,
    returned: AtomicUsize,
    changed: Notify,
}

impl Progress {
    fn note(&self, counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_one();
    }

    fn reset(&self) {
        self.arrived.store(0, Ordering::SeqCst);
        self.returned.store(0, Ordering::SeqCst);
    }

    /// Waits until `n` callers have arrived at the model or returned; a
    /// burst that never gets there fails the test.
    async fn settled(&self, n: usize) {
        let wait = async {
            loop {
                let changed = self.changed.notified();
                if self.arrived.load(Ordering::SeqCst) + self.returned.load(Ordering::SeqCst) >= n {
                    return;
                }
                changed.await;
            }
        };
        tokio::time::timeout(Duration::from_secs(60), wait)
            .await
            .expect("every caller reaches the model or is refused");
    }
}

/// A model that parks every call until the test opens it; each reply
/// reports the usage set for its request's system text (none by default).
struct Parked {
    progress: Arc<Progress>,
    calls: AtomicUsize,
    open: watch::Sender<bool>,
    usage: HashMap<String, Usage>,
}

impl Parked {
    fn new(usage: HashMap<String, Usage>) -> Arc<Parked> {
        Arc::new(Parked {
            progress: Arc::default(),
            calls: AtomicUsize::new(0),
            open: watch::channel(false).0,
            usage,
        })
    }
}

impl Model for Parked {
    fn name(&self) -> &str {
        "fake"
    }
    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        let usage = self.usage.get(&request.system).copied().unwrap_or_default();
        let mut open = self.open.subscribe();
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.progress.note(&self.progress.arrived);
        Box::pin(async move {
            open.wait_for(|open| *open)
                .await
                .map_err(|_| ModelError::Other {
                    message: "the test dropped the model".into(),
                })?;
            Ok(ModelResponse {
                text: "ok".into(),
                tool_uses: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage,
                raw: Some("{}".into()),
            })
        })
    }
}

/// How a burst's callers start. Each way leaves every admitted call parked
/// at the model, in flight with the others.
#[derive(Debug, Clone, Copy)]
enum Start {
    /// All at once, each on its own task.
    Together,
    /// Each once the one before it is parked at the model or refused.
    OneAtATime,
    /// All at once, each on its own thread, each admitted one held between
    /// its check and its dispatch until every caller has been checked: the
    /// window in which only its reservation counts it.
    HeldBeforeDispatch,
}

/// Holds each caller between its limit check and its dispatch (where the
/// call's id is drawn) while armed, until every caller of the burst has
/// been checked: held here, or returned refused.
#[derive(Default)]
struct Gatepost {
    state: Mutex<Checked>,
    changed: Condvar,
}

#[derive(Default)]
struct Checked {
    callers: Option<usize>,
    held: usize,
    returned: usize,
}

impl Gatepost {
    fn arm(&self, callers: usize) {
        *self.state.lock().unwrap() = Checked {
            callers: Some(callers),
            ..Checked::default()
        };
    }

    fn disarm(&self) {
        self.state.lock().unwrap().callers = None;
        self.changed.notify_all();
    }

    fn returned(&self) {
        self.state.lock().unwrap().returned += 1;
        self.changed.notify_all();
    }

    fn hold(&self) {
        let mut state = self.state.lock().unwrap();
        if state.callers.is_none() {
            return;
        }
        state.held += 1;
        self.changed.notify_all();
        let (state, wait) = self
            .changed
            .wait_timeout_while(state, Duration::from_secs(60), |s| {
                s.callers.is_some_and(|n| s.held + s.returned < n)
            })
            .unwrap();
        drop(state);
        assert!(
            !wait.timed_out(),
            "every caller is held before dispatch or refused"
        );
    }
}

/// A call's result as the burst saw it: a limit's reason, or another error.
type Answer = Result<(), Option<TerminalReason>>;

/// What one burst saw: each caller's answer, and the store while every
/// admitted call was parked at the model.
struct Round {
    answers: Vec<Answer>,
    rows_parked: Vec<ModelCall>,
    run_parked: Run,
}

/// An agent that, in one step, sends each round's requests from clones of
/// the step's model caller, each on its own task or thread, waits until
/// every admitted call is parked at the model and every other one refused,
/// looks at the store, then lets them finish.
struct Burst {
    rounds: Vec<Vec<ModelRequest>>,
    start: Start,
    model: Arc<Parked>,
    post: Arc<Gatepost>,
    store: Store,
    seen: Arc<Mutex<Vec<Round>>>,
}

impl Agent for Burst {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let caller = input.model.clone().expect("a model is configured");
            let progress = Arc::clone(&self.model.progress);
            for requests in &self.rounds {
                progress.reset();
                self.model.open.send_replace(false);
                if let Start::HeldBeforeDispatch = self.start {
                    self.post.arm(requests.len());
                }
                let mut tasks = Vec::new();
                for (i, request) in requests.iter().cloned().enumerate() {
                    let caller = caller.clone();
                    let told = Arc::clone(&progress);
                    let task = match self.start {
                        Start::Together | Start::OneAtATime => tokio::spawn(async move {
                            let answer = caller.generate(request).await;
                            told.note(&told.returned);
                            answer
                        }),
                        Start::HeldBeforeDispatch => {
                            let post = Arc::clone(&self.post);
                            let runtime = tokio::runtime::Handle::current();
                            tokio::task::spawn_blocking(move || {
                                let answer = runtime.block_on(caller.generate(request));
                                post.returned();
                                told.note(&told.returned);
                                answer
                            })
                        }
                    };
                    tasks.push(task);
                    if let Start::OneAtATime = self.start {
                        progress.settled(i + 1).await;
                    }
                }
                progress.settled(requests.len()).await;
                self.post.disarm();
                let run_parked = self.store.get_run("r").unwrap();
                let rows_parked = self.store.list_model_calls("r").unwrap();
                self.model.open.send_replace(true);
                let mut answers = Vec::new();
                for task in tasks {
                    answers.push(match task.await.expect("the caller's task ends") {
                        Ok(_) => Ok(()),
                        Err(CallError::Limit { reason, .. }) => Err(Some(reason)),
                        Err(_) => Err(None),
                    });
                }
                self.seen.lock().unwrap().push(Round {
                    answers,
                    rows_parked,
                    run_parked,
                });
            }
            Ok(Decision::complete("1"))
        })
    }
}

struct BurstOutcome {
    run: Run,
    calls: Vec<ModelCall>,
    rounds: Vec<Round>,
    sent: usize,
}

async fn run_bursts(
    limits: Limits,
    price: Price,
    rounds: Vec<Vec<ModelRequest>>,
    usage: HashMap<String, Usage>,
    start: Start,
) -> BurstOutcome {
    let store = Store::open(":memory:").unwrap();
    let model = Parked::new(usage);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let post = Arc::new(Gatepost::default());
    let ids = {
        let post = Arc::clone(&post);
        let next = sequential_ids("id");
        Arc::new(move || {
            post.hold();
            next()
        })
    };
    let agent = Burst {
        rounds,
        start,
        model: Arc::clone(&model),
        post,
        store: store.clone(),
        seen: Arc::clone(&seen),
    };
    let mut model_config = ModelConfig::new(model.clone(), PriceTable::new().with("fake", price));
    // Long enough that no parked call times out while the test watches it.
    model_config.call_timeout = Duration::from_secs(600);
    let clock = stepping_clock();
    let config = config_for_gate(&store, &clock)
        .with_ids(ids)
        .with_model(model_config);
    let mut d = Driver::new(config, agent).unwrap();
    let run = d.start(Some("r"), "g", limits).await.unwrap();
    let rounds = std::mem::take(&mut *seen.lock().unwrap());
    BurstOutcome {
        run,
        calls: store.list_model_calls("r").unwrap(),
        rounds,
        sent: model.calls.load(Ordering::SeqCst),
    }
}

/// The limit a burst is held to.
#[derive(Debug, Clone, Copy)]
enum Bound {
    Calls,
    Tokens,
    Cost,
}

/// `callers` calls in flight at once under a limit that fits exactly `fits`
/// of them: exactly `fits` are sent, the rest are refused before dispatch,
/// and the recorded spend stays within the limit. Each reply uses the whole
/// projection it was admitted under.
async fn exactly_the_calls_that_fit_pass(bound: Bound, fits: u64, callers: usize) {
    let request = request(Some(100));
    let estimate = ModelCaller::estimate(&request);
    let tokens = estimate.input_tokens + estimate.output_tokens;
    let cost = price().cost(&estimate);
    assert!(cost > 1, "a call costs more than 1 µ$");
    let (limits, reason) = match bound {
        Bound::Calls => (
            Limits::default().max_model_calls(fits),
            TerminalReason::LimitModelCalls,
        ),
        Bound::Tokens => (
            Limits::default().max_total_tokens(fits * tokens + tokens - 1),
            TerminalReason::LimitTokens,
        ),
        Bound::Cost => (
            Limits::default().max_estimated_cost_micros(fits as i64 * cost + cost - 1),
            TerminalReason::LimitCost,
        ),
    };
    let fits = fits as usize;
    for start in [
        Start::Together,
        Start::OneAtATime,
        Start::HeldBeforeDispatch,
    ] {
        let out = run_bursts(
            limits,
            price(),
            vec![vec![request.clone(); callers]],
            HashMap::from([(String::new(), estimate)]),
            start,
        )
        .await;
        let round = &out.rounds[0];
        let passed = round.answers.iter().filter(|a| a.is_ok()).count();
        assert_eq!(passed, fits, "{bound:?} {start:?}: {:?}", round.answers);
        assert!(
            round
                .answers
                .iter()
                .all(|a| a.is_ok() || *a == Err(Some(reason))),
            "{bound:?} {start:?}: the others are refused by the limit: {:?}",
            round.answers
        );
        assert_eq!(
            out.sent, fits,
            "{bound:?} {start:?}: the model saw only those"
        );
        // While parked, every admitted call is dispatched and none is charged.
        assert_eq!(round.rows_parked.len(), fits);
        assert!(
            round
                .rows_parked
                .iter()
                .all(|c| c.status == CallStatus::Dispatched)
        );
        assert_eq!(
            (
                round.run_parked.model_calls,
                round.run_parked.usage,
                round.run_parked.estimated_cost_micros
            ),
            (fits as u64, Usage::default(), 0),
            "{bound:?} {start:?}: the recorded totals do not include calls in flight"
        );
        // Finished: each charged as reported, within the limit.
        assert_eq!(out.run.status, RunStatus::Completed);
        assert_eq!(out.calls.len(), fits);
        assert!(out.calls.iter().all(|c| c.status == CallStatus::Ok));
        assert_eq!(out.run.model_calls, fits as u64);
        let used = out.run.usage.input_tokens + out.run.usage.output_tokens;
        assert_eq!(used, fits as u64 * tokens);
        let total: i64 = out.calls.iter().map(|c| c.cost_micros).sum();
        assert_eq!(out.run.estimated_cost_micros, total);
        assert_eq!(total, fits as i64 * cost);
        match bound {
            Bound::Calls => assert!(out.run.model_calls <= limits.max_model_calls),
            Bound::Tokens => assert!(used <= limits.max_total_tokens),
            Bound::Cost => assert!(total <= limits.max_estimated_cost_micros),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_calls_in_one_step_reserve_so_only_one_passes_a_limit_of_one() {
    exactly_the_calls_that_fit_pass(Bound::Calls, 1, 2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_in_flight_together_pass_a_call_limit_only_as_far_as_it_fits() {
    exactly_the_calls_that_fit_pass(Bound::Calls, 3, 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_in_flight_together_pass_a_token_limit_only_as_far_as_it_fits() {
    exactly_the_calls_that_fit_pass(Bound::Tokens, 3, 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_in_flight_together_pass_a_cost_limit_only_as_far_as_it_fits() {
    exactly_the_calls_that_fit_pass(Bound::Cost, 3, 6).await;
}

/// An agent that hands its step's model caller to the test, then makes one
/// call.
struct Handing {
    slot: Arc<Mutex<Option<ModelCaller>>>,
}

impl Agent for Handing {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            *self.slot.lock().unwrap() = Some(model.clone());
            model.generate(request(Some(100))).await?;
            Ok(Decision::complete("1"))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_finished_calls_charge_replaces_its_reservation_at_once() {
    // A token limit that fits exactly two calls, and replies that use their
    // whole projection. The moment the first call's completion is
    // observable, a second call (sent from another thread) must see the
    // first call's charge alone, not its charge and its reservation too.
    let request = request(Some(100));
    let estimate = ModelCaller::estimate(&request);
    let tokens = estimate.input_tokens + estimate.output_tokens;
    let fake = Fake::new(vec![Act::Reply(estimate), Act::Reply(estimate)]);
    let slot: Arc<Mutex<Option<ModelCaller>>> = Arc::default();
    let second: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
    let observer = {
        let slot = Arc::clone(&slot);
        let second = Arc::clone(&second);
        move |event: &Event| {
            if event.event_type != EventType::ModelCompleted {
                return;
            }
            // Taken once: the second call's own completion finds it empty.
            let Some(model) = slot.lock().unwrap().take() else {
                return;
            };
            let request = request.clone();
            let answer = std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                rt.block_on(model.generate(request))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .join()
            .unwrap();
            *second.lock().unwrap() = Some(answer);
        }
    };
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let config = config_for_gate(&store, &clock)
        .with_observer(observer)
        .with_model(config_for(fake.clone()));
    let mut d = Driver::new(config, Handing { slot }).unwrap();
    let run = d
        .start(
            Some("r"),
            "g",
            Limits::default().max_total_tokens(2 * tokens),
        )
        .await
        .unwrap();
    assert_eq!(
        second.lock().unwrap().clone(),
        Some(Ok(())),
        "the second call fits beside the first call's charge"
    );
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 2);
    assert_eq!(run.usage.input_tokens + run.usage.output_tokens, 2 * tokens);
}

#[tokio::test]
async fn a_cached_input_rate_above_the_input_rate_cannot_carry_a_reply_past_the_cost_limit() {
    // Cached input priced above uncached input: a reply whose input is all
    // cached costs more than the projection priced at the input rate.
    let dear_cache = Price {
        input_per_mtok_micros: 1_000_000,
        output_per_mtok_micros: 1_000_000,
        cached_input_per_mtok_micros: 9_000_000,
    };
    let request = request(Some(100));
    let estimate = ModelCaller::estimate(&request);
    let all_cached = Usage {
        cached_input_tokens: estimate.input_tokens,
        ..estimate
    };
    assert!(dear_cache.cost(&all_cached) > dear_cache.cost(&estimate));
    let limit = dear_cache.cost(&estimate);
    let fake = Fake::new(vec![Act::Reply(all_cached)]);
    let mut model_config =
        ModelConfig::new(fake.clone(), PriceTable::new().with("fake", dear_cache));
    model_config.backoff = Duration::from_millis(1);
    let store = Store::open(":memory:").unwrap();
    let clock = stepping_clock();
    let config = config_for_gate(&store, &clock).with_model(model_config);
    let mut d = Driver::new(config, caller(1, Some(100))).unwrap();
    let run = d
        .start(
            Some("r"),
            "g",
            Limits::default().max_estimated_cost_micros(limit),
        )
        .await
        .unwrap();
    assert!(
        run.estimated_cost_micros <= limit,
        "spent {} of {limit}",
        run.estimated_cost_micros
    );
    assert_eq!(run.reason, Some(TerminalReason::LimitCost));
    assert_eq!(
        fake.calls.load(Ordering::SeqCst),
        0,
        "refused before dispatch"
    );
}

/// A request told apart by its system text, so its reply's usage can be
/// chosen whatever order the calls arrive in.
fn tagged(tag: String, cap: u64) -> ModelRequest {
    ModelRequest {
        system: tag,
        ..request(Some(cap))
    }
}

/// One caller of a burst: its output cap and how much of its projection the
/// reply uses (percent of input, of output, and of the input served from
/// the cache).
fn burst_caller() -> impl Strategy<Value = (u64, u64, u64, u64)> {
    (1u64..400, 40u64..=100, 40u64..=100, 0u64..=100)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Callers truly in flight at once, in bursts, with random caps,
    /// replies (within the cap), prices and cost limits: the recorded spend
    /// never passes the cost limit, and every call sent is on record with
    /// its charge.
    #[test]
    fn concurrent_callers_never_carry_the_recorded_spend_past_the_cost_limit(
        bursts in proptest::collection::vec(proptest::collection::vec(burst_caller(), 1..6), 1..4),
        rates in (0i64..5_000_000, 0i64..20_000_000, 0i64..10_000_000),
        fits in 0i64..5,
        slack in 0i64..100,
        start in prop_oneof![
            Just(Start::Together),
            Just(Start::OneAtATime),
            Just(Start::HeldBeforeDispatch),
        ],
    ) {
        let price = Price {
            input_per_mtok_micros: rates.0,
            output_per_mtok_micros: rates.1,
            cached_input_per_mtok_micros: rates.2,
        };
        let mut rounds = Vec::new();
        let mut usage = HashMap::new();
        let mut dearest = 0;
        for (b, burst) in bursts.iter().enumerate() {
            let mut requests = Vec::new();
            for (c, &(cap, input_pct, output_pct, cached_pct)) in burst.iter().enumerate() {
                let request = tagged(format!("burst {b} caller {c}"), cap);
                let estimate = ModelCaller::estimate(&request);
                let input_tokens = estimate.input_tokens * input_pct / 100;
                usage.insert(request.system.clone(), Usage {
                    input_tokens,
                    output_tokens: estimate.output_tokens * output_pct / 100,
                    cached_input_tokens: input_tokens * cached_pct / 100,
                });
                dearest = dearest.max(price.cost(&estimate));
                requests.push(request);
            }
            rounds.push(requests);
        }
        let limit = (dearest * fits + dearest * slack / 100).max(1);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .unwrap();
        let out = rt.block_on(run_bursts(
            Limits::default().max_estimated_cost_micros(limit),
            price,
            rounds,
            usage,
            start,
        ));
        prop_assert_eq!(out.run.status, RunStatus::Completed);
        prop_assert!(out.run.estimated_cost_micros <= limit, "spent {} of {}", out.run.estimated_cost_micros, limit);
        let total: i64 = out.calls.iter().map(|c| c.cost_micros).sum();
        prop_assert_eq!(out.run.estimated_cost_micros, total);
        prop_assert!(total <= limit, "rows charged {} of {}", total, limit);
        prop_assert_eq!(out.calls.len(), out.sent, "one row per call sent");
        prop_assert_eq!(out.run.model_calls as usize, out.sent);
        for c in &out.calls {
            prop_assert_eq!(c.status, CallStatus::Ok);
            prop_assert_eq!(c.cost_micros, price.cost(&c.usage));
        }
        let mut spent_before = 0;
        for round in &out.rounds {
            prop_assert!(
                round.answers.iter().all(|a| a.is_ok() || *a == Err(Some(TerminalReason::LimitCost))),
                "only the cost limit refuses: {:?}", round.answers
            );
            prop_assert_eq!(
                round.run_parked.estimated_cost_micros, spent_before,
                "nothing in flight is charged yet"
            );
            let admitted = round.answers.iter().filter(|a| a.is_ok()).count();
            let parked = round.rows_parked.iter().filter(|c| c.status == CallStatus::Dispatched).count();
            prop_assert_eq!(parked, admitted, "every admitted call was in flight at once");
            spent_before = out.calls.iter().take(round.rows_parked.len()).map(|c| c.cost_micros).sum();
        }
    }
}

#[test]
fn the_estimate_is_a_third_of_the_requests_json_bytes_plus_one_and_its_output_cap() {
    let mut req = ModelRequest {
        system: String::new(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text("hi")],
        }],
        tools: vec![],
        max_output_tokens: Some(64),
    };
    let json = serde_json::to_string(&req).unwrap();
    assert_eq!(
        json,
        r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_output_tokens":64}"#
    );
    assert_eq!(json.len(), 93);
    assert_eq!(
        ModelCaller::estimate(&req),
        Usage {
            input_tokens: 93 / 3 + 1,
            output_tokens: 64,
            cached_input_tokens: 0,
        }
    );
    req.max_output_tokens = None;
    assert_eq!(ModelCaller::estimate(&req).output_tokens, 0);
}

/// A model that keeps the output cap of every request it is sent.
#[derive(Default)]
struct Caps(Mutex<Vec<Option<u64>>>);

impl Model for Caps {
    fn name(&self) -> &str {
        "fake"
    }
    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.0.lock().unwrap().push(request.max_output_tokens);
        Box::pin(async {
            Ok(ModelResponse {
                text: "ok".into(),
                tool_uses: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage: Usage::default(),
                raw: None,
            })
        })
    }
}

/// An agent that sends one request per cap, then completes.
struct Asks(Vec<Option<u64>>);

impl Agent for Asks {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            for cap in &self.0 {
                model.generate(request(*cap)).await?;
            }
            Ok(Decision::complete("1"))
        })
    }
}

#[tokio::test]
async fn the_per_call_output_limit_clamps_and_fills_every_requests_cap() {
    for (limits, sent) in [
        (
            Limits::default().max_output_tokens_per_call(50),
            [Some(50), Some(10), Some(50)],
        ),
        (Limits::default(), [None, Some(10), Some(100)]),
    ] {
        let model = Arc::new(Caps::default());
        let store = Store::open(":memory:").unwrap();
        let config =
            config_for_gate(&store, &stepping_clock()).with_model(config_for(model.clone()));
        let mut d = Driver::new(config, Asks(vec![None, Some(10), Some(100)])).unwrap();
        let run = d.start(Some("r"), "g", limits).await.unwrap();
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(*model.0.lock().unwrap(), sent);
    }
}

#[tokio::test]
async fn under_a_limit_a_reply_counting_past_its_projection_on_either_side_is_unusable() {
    let estimate = ModelCaller::estimate(&request(Some(10)));
    let over_output = Usage {
        input_tokens: estimate.input_tokens,
        output_tokens: 11,
        cached_input_tokens: 0,
    };
    let over_input = Usage {
        input_tokens: estimate.input_tokens + 1,
        output_tokens: 10,
        cached_input_tokens: 0,
    };
    for usage in [over_output, over_input] {
        let fake = Fake::new(vec![Act::Reply(usage)]);
        let out = run_with(
            Store::open(":memory:").unwrap(),
            fake,
            Limits::default().max_total_tokens(1_000_000),
            caller(1, Some(10)),
        )
        .await;
        assert_eq!(out.calls.len(), 1, "{usage:?}");
        assert_eq!(out.calls[0].status, CallStatus::Error, "{usage:?}");
        assert_eq!(
            out.calls[0].usage, estimate,
            "{usage:?}: charged the projection"
        );
        assert_eq!(out.run.reason, Some(TerminalReason::ModelUnavailable));
    }
    // Exactly the projection is a plausible count.
    let fake = Fake::new(vec![Act::Reply(estimate)]);
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default().max_total_tokens(1_000_000),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.status, RunStatus::Completed);
    assert_eq!(
        (out.calls[0].status, out.calls[0].usage),
        (CallStatus::Ok, estimate)
    );
}

/// An agent that keeps what its step's model handle says of itself.
#[derive(Default)]
struct Describes(Arc<Mutex<Vec<(String, String)>>>);

impl Agent for Describes {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        let model = input.model.clone().expect("a model is configured");
        self.0
            .lock()
            .unwrap()
            .push((model.model_name().to_owned(), format!("{model:?}")));
        Box::pin(async { Ok(Decision::complete("1")) })
    }
}

#[tokio::test]
async fn the_model_handle_and_its_config_name_the_model_run_and_step_they_stand_for() {
    let config = config_for(Fake::new(vec![]));
    assert_eq!(
        format!("{config:?}"),
        "ModelConfig { model: \"fake\", call_timeout: 200ms, max_retries: 2 }"
    );
    let store = Store::open(":memory:").unwrap();
    let agent = Describes::default();
    let seen = agent.0.clone();
    let mut d = Driver::new(
        config_for_gate(&store, &stepping_clock()).with_model(config),
        agent,
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    let step = store.list_steps("r").unwrap().remove(0);
    assert_eq!(
        *seen.lock().unwrap(),
        [(
            "fake".to_owned(),
            format!(
                "ModelCaller {{ run: \"r\", step: \"{}\", model: \"fake\" }}",
                step.id
            )
        )]
    );
}

/// A model that plays a list of acts and keeps when (by the runtime's
/// clock, paused in these tests) each call came.
struct Timed {
    acts: Mutex<VecDeque<Act>>,
    at: Mutex<Vec<tokio::time::Instant>>,
}

impl Timed {
    fn new(acts: Vec<Act>) -> Arc<Timed> {
        Arc::new(Timed {
            acts: Mutex::new(acts.into()),
            at: Mutex::new(Vec::new()),
        })
    }

    /// When each call came, from `start`.
    fn offsets(&self, start: tokio::time::Instant) -> Vec<Duration> {
        self.at.lock().unwrap().iter().map(|t| *t - start).collect()
    }
}

impl Model for Timed {
    fn name(&self) -> &str {
        "fake"
    }
    fn generate<'a>(
        &'a self,
        _: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        self.at.lock().unwrap().push(tokio::time::Instant::now());
        let act = self
            .acts
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Act::Reply(Usage::default()));
        Box::pin(async move {
            match act {
                Act::Reply(usage) => Ok(ModelResponse {
                    text: "ok".into(),
                    tool_uses: vec![],
                    stop_reason: Some(StopReason::EndTurn),
                    usage,
                    raw: None,
                }),
                Act::Fail(e) => Err(e),
                Act::Hang => std::future::pending().await,
            }
        })
    }
}

fn transient_after(retry_after: Option<Duration>) -> Act {
    Act::Fail(ModelError::Transient {
        message: "429".into(),
        retry_after,
    })
}

/// Runs one step that makes one model call through `config`, on the
/// runtime's paused clock; returns the run and when each call came.
async fn timed_run(model: Arc<Timed>, config: ModelConfig, limits: Limits) -> (Run, Vec<Duration>) {
    let store = Store::open(":memory:").unwrap();
    let gate = config_for_gate(&store, &stepping_clock()).with_model(config);
    let mut d = Driver::new(gate, caller(1, Some(10))).unwrap();
    let start = tokio::time::Instant::now();
    let run = d.start(Some("r"), "g", limits).await.unwrap();
    (run, model.offsets(start))
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_doubling_from_the_first_wait() {
    let model = Timed::new(vec![
        transient_after(None),
        transient_after(None),
        transient_after(None),
    ]);
    let mut config = ModelConfig::new(model.clone(), PriceTable::new().with("fake", price()));
    config.max_retries = 3;
    config.backoff = Duration::from_secs(1);
    let (run, at) = timed_run(model, config, Limits::default()).await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(
        at,
        [0, 1, 3, 7].map(Duration::from_secs),
        "waits of 1 s, 2 s, 4 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_up_to_the_maximum_is_waited_and_one_past_it_ends_the_calls() {
    let most = Duration::from_secs(2);
    for (retry_after, waited) in [(most, true), (most + Duration::from_millis(1), false)] {
        let model = Timed::new(vec![transient_after(Some(retry_after))]);
        let mut config = ModelConfig::new(model.clone(), PriceTable::new().with("fake", price()));
        config.backoff = Duration::from_millis(1);
        config.max_retry_after = most;
        let (run, at) = timed_run(model, config, Limits::default()).await;
        if waited {
            assert_eq!(run.status, RunStatus::Completed);
            assert_eq!(at, [Duration::ZERO, most]);
        } else {
            assert_eq!(run.reason, Some(TerminalReason::ModelUnavailable));
            assert!(
                run.reason_detail.contains("beyond the 2 s allowed"),
                "{run:?}"
            );
            assert_eq!(at, [Duration::ZERO], "no second call, no wait");
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_wait_that_would_pass_the_elapsed_or_active_time_limit_ends_the_calls_unslept() {
    let minute = Duration::from_secs(60);
    // The Now clock steps 1 s per reading: a few seconds have elapsed when
    // the first attempt fails; no step has ended, so no active time is
    // counted yet.
    for (limits, retry_after, fits, limit) in [
        (
            Limits::default().max_elapsed_time(minute),
            Duration::from_secs(59),
            false,
            "elapsed-time",
        ),
        (
            Limits::default().max_elapsed_time(minute),
            Duration::from_secs(10),
            true,
            "elapsed-time",
        ),
        (
            Limits::default().max_active_time(minute),
            minute,
            false,
            "active-time",
        ),
        (
            Limits::default().max_active_time(minute),
            Duration::from_secs(59),
            true,
            "active-time",
        ),
    ] {
        let model = Timed::new(vec![transient_after(Some(retry_after))]);
        let mut config = ModelConfig::new(model.clone(), PriceTable::new().with("fake", price()));
        config.backoff = Duration::from_millis(1);
        let (run, at) = timed_run(model, config, limits).await;
        if fits {
            assert_eq!(run.status, RunStatus::Completed, "{limit} {retry_after:?}");
            assert_eq!(at, [Duration::ZERO, retry_after]);
        } else {
            assert_eq!(run.reason, Some(TerminalReason::ModelUnavailable));
            assert!(
                run.reason_detail
                    .contains(&format!("would pass the run's {limit} limit")),
                "{run:?}"
            );
            assert_eq!(at, [Duration::ZERO], "{limit}: no wait, no second call");
        }
    }
}

#[tokio::test]
async fn exhaustion_names_the_last_failure_recorded_in_the_step() {
    let fake = Fake::new(
        ["first", "second", "third"]
            .map(|m| {
                Act::Fail(ModelError::Transient {
                    message: m.into(),
                    retry_after: None,
                })
            })
            .to_vec(),
    );
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake,
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.reason, Some(TerminalReason::ModelUnavailable));
    assert_eq!(
        out.run.reason_detail,
        "model unavailable: model unavailable after 3 attempt(s): transient: third"
    );
}

/// Two calls of one step: every attempt of `a` fails, its last one only
/// once `b` was dispatched meanwhile; `b` succeeds.
#[derive(Default)]
struct Overlap {
    a_attempts: AtomicUsize,
    a_last_in_flight: Notify,
    b_dispatched: Notify,
}

impl Model for Overlap {
    fn name(&self) -> &str {
        "fake"
    }
    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            if request.system == "b" {
                self.b_dispatched.notify_one();
                return Ok(ModelResponse {
                    text: "ok".into(),
                    tool_uses: vec![],
                    stop_reason: Some(StopReason::EndTurn),
                    usage: Usage::default(),
                    raw: None,
                });
            }
            let n = self.a_attempts.fetch_add(1, Ordering::SeqCst) + 1;
            if n == 3 {
                self.a_last_in_flight.notify_one();
                within_a_minute(self.b_dispatched.notified(), "b is dispatched").await;
            }
            Err(ModelError::Transient {
                message: format!("a{n}"),
                retry_after: None,
            })
        })
    }
}

/// Sends `a`, and `b` while `a`'s last attempt is in flight; keeps what
/// `a` ended with.
struct Overlapping {
    model: Arc<Overlap>,
    a_ended: Arc<Mutex<Option<String>>>,
}

impl Agent for Overlapping {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let caller = input.model.clone().expect("a model is configured");
            let a = caller.generate(tagged("a".into(), 10));
            let b = async {
                within_a_minute(
                    self.model.a_last_in_flight.notified(),
                    "a's last attempt is in flight",
                )
                .await;
                caller.generate(tagged("b".into(), 10)).await
            };
            let (a, b) = tokio::join!(a, b);
            b.unwrap();
            *self.a_ended.lock().unwrap() = a.err().map(|e| e.to_string());
            Ok(Decision::complete("1"))
        })
    }
}

/// Awaits `f`; fails the test if it has not happened within a minute of
/// the runtime's clock (paused in the tests using it: a wait that cannot
/// end fails at once instead of hanging).
async fn within_a_minute<F: std::future::Future>(f: F, what: &str) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .unwrap_or_else(|_| panic!("never happened: {what}"))
}

#[tokio::test(start_paused = true)]
async fn exhaustion_reads_past_a_success_recorded_meanwhile_in_the_step() {
    let model = Arc::new(Overlap::default());
    let a_ended = Arc::new(Mutex::new(None));
    let store = Store::open(":memory:").unwrap();
    let mut d = Driver::new(
        config_for_gate(&store, &stepping_clock()).with_model(config_for(model.clone())),
        Overlapping {
            model,
            a_ended: a_ended.clone(),
        },
    )
    .unwrap();
    d.start(Some("r"), "g", Limits::default()).await.unwrap();
    // b's row came after a's last attempt's row.
    let rows: Vec<_> = store
        .list_model_calls("r")
        .unwrap()
        .into_iter()
        .map(|c| (c.status, c.error))
        .collect();
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[3], (CallStatus::Ok, String::new()));
    assert_eq!(
        a_ended.lock().unwrap().as_deref(),
        Some("model unavailable after 3 attempt(s): transient: a3")
    );
}

#[tokio::test]
async fn a_call_projected_to_reach_a_limit_exactly_is_sent_and_one_past_it_is_not() {
    let estimate = ModelCaller::estimate(&request(Some(10)));
    let cost = price().cost(&estimate);
    let tokens = estimate.input_tokens + estimate.output_tokens;
    for (limits, sent) in [
        (Limits::default().max_estimated_cost_micros(cost), true),
        (Limits::default().max_estimated_cost_micros(cost - 1), false),
        (Limits::default().max_total_tokens(tokens), true),
        (Limits::default().max_total_tokens(tokens - 1), false),
    ] {
        let fake = Fake::new(vec![]);
        let out = run_with(
            Store::open(":memory:").unwrap(),
            fake.clone(),
            limits,
            caller(1, Some(10)),
        )
        .await;
        assert_eq!(
            fake.calls.load(Ordering::SeqCst),
            usize::from(sent),
            "{limits:?}"
        );
        assert_eq!(out.run.status == RunStatus::Completed, sent, "{limits:?}");
    }
}

/// Makes one call while the stored lease has lapsed (refused), then, the
/// lease renewed, another; keeps both answers.
struct AcrossALapse {
    store: Store,
    answers: Arc<Mutex<Vec<std::result::Result<(), String>>>>,
}

impl AcrossALapse {
    fn lease_until(&self, expires_at: Timestamp) {
        let (owner, _) = self.store.lease("r").unwrap();
        self.store
            .write(|tx| {
                tx.update_run(
                    "r",
                    &agentrt::store::RunGuard::default(),
                    &agentrt::store::RunChange {
                        lease: agentrt::store::LeaseChange::Set {
                            owner: &owner,
                            expires_at,
                        },
                        ..Default::default()
                    },
                )
            })
            .unwrap();
    }
}

impl Agent for AcrossALapse {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            self.lease_until(Timestamp::parse("2000-01-01T00:00:00Z").unwrap());
            let lapsed = model.generate(request(Some(10))).await;
            self.lease_until(Timestamp::now().add(Duration::from_secs(3600)));
            let renewed = model.generate(request(Some(10))).await;
            let mut answers = self.answers.lock().unwrap();
            for answer in [lapsed, renewed] {
                answers.push(answer.map(|_| ()).map_err(|e| e.to_string()));
            }
            Ok(Decision::complete("1"))
        })
    }
}

#[tokio::test]
async fn a_call_refused_for_a_lapsed_lease_gives_back_what_it_reserved() {
    let store = Store::open(":memory:").unwrap();
    let fake = Fake::new(vec![]);
    let answers = Arc::new(Mutex::new(Vec::new()));
    let mut d = Driver::new(
        config_for_gate(&store, &stepping_clock()).with_model(config_for(fake.clone())),
        AcrossALapse {
            store: store.clone(),
            answers: answers.clone(),
        },
    )
    .unwrap();
    // Room for exactly one call: the refused one must not keep it.
    let run = d
        .start(Some("r"), "g", Limits::default().max_model_calls(1))
        .await
        .unwrap();
    assert_eq!(
        *answers.lock().unwrap(),
        [
            Err("lost the lease on the run; nothing was sent".to_owned()),
            Ok(())
        ]
    );
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    assert_eq!(store.list_model_calls("r").unwrap().len(), 1);
}

#[tokio::test]
async fn without_a_token_or_cost_limit_a_reply_past_its_projection_is_charged_as_reported() {
    let estimate = ModelCaller::estimate(&request(Some(10)));
    let reported = Usage {
        input_tokens: estimate.input_tokens + 1,
        output_tokens: 11,
        cached_input_tokens: 0,
    };
    let out = run_with(
        Store::open(":memory:").unwrap(),
        Fake::new(vec![Act::Reply(reported)]),
        Limits::default(),
        caller(1, Some(10)),
    )
    .await;
    assert_eq!(out.run.status, RunStatus::Completed);
    assert_eq!(
        (out.calls[0].status, out.calls[0].usage),
        (CallStatus::Ok, reported)
    );
}
