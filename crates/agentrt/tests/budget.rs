//! Model budgets: every attempt recorded before dispatch, limits checked
//! before anything is sent, unknown outcomes charged conservatively.

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::budget::{ModelCaller, ModelConfig, Price, PriceTable};
use agentrt::*;
use common::*;
use proptest::prelude::*;

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

/// An agent that calls the model `calls` times per step (concurrently when
/// asked), then completes; model errors end the run as the runtime maps them.
struct Caller {
    calls: usize,
    concurrent: bool,
    cap: Option<u64>,
    results: Arc<Mutex<Vec<Result<(), String>>>>,
}

impl Agent for Caller {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            if self.concurrent {
                let (a, b) = tokio::join!(
                    model.generate(request(self.cap)),
                    model.generate(request(self.cap))
                );
                for r in [a, b] {
                    self.results
                        .lock()
                        .unwrap()
                        .push(r.map(|_| ()).map_err(|e| e.to_string()));
                }
                return Ok(Decision::complete("1"));
            }
            for _ in 0..self.calls {
                let r = model.generate(request(self.cap)).await;
                self.results
                    .lock()
                    .unwrap()
                    .push(r.as_ref().map(|_| ()).map_err(|e| e.to_string()));
                r.map_err(AgentError::from)?;
            }
            Ok(Decision::complete("1"))
        })
    }
}

struct Outcome {
    run: Run,
    calls: Vec<ModelCall>,
    events: Vec<Event>,
    results: Vec<Result<(), String>>,
}

async fn run_with(store: Store, model: Arc<dyn Model>, limits: Limits, agent: Caller) -> Outcome {
    let results = Arc::clone(&agent.results);
    let clock = stepping_clock();
    let config = config(&store, DefaultPolicy, vec![], &clock, &Recorder::default())
        .with_model(config_for(model));
    let mut d = Driver::new(config, agent).unwrap();
    let run = d.start(Some("r"), "g", limits).await.unwrap();
    Outcome {
        calls: store.list_model_calls("r").unwrap(),
        events: store.list_events("r").unwrap(),
        results: results.lock().unwrap().clone(),
        run,
    }
}

fn caller(calls: usize, cap: Option<u64>) -> Caller {
    Caller {
        calls,
        concurrent: false,
        cap,
        results: Arc::new(Mutex::new(Vec::new())),
    }
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
        matches!(err, Error::NoPrice(ref p) if p.model == "fake"),
        "{err:?}"
    );
}

fn config_for_gate(store: &Store, clock: &ManualClock) -> GateConfig {
    config(store, DefaultPolicy, vec![], clock, &Recorder::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_in_one_step_reserve_so_only_one_passes_a_limit_of_one() {
    let fake = Fake::new(vec![
        Act::Reply(Usage::default()),
        Act::Reply(Usage::default()),
    ]);
    let agent = Caller {
        calls: 0,
        concurrent: true,
        cap: Some(10),
        results: Arc::new(Mutex::new(Vec::new())),
    };
    let out = run_with(
        Store::open(":memory:").unwrap(),
        fake.clone(),
        Limits::default().max_model_calls(1),
        agent,
    )
    .await;
    let passed = out.results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(passed, 1, "{:?}", out.results);
    assert_eq!(fake.calls.load(Ordering::SeqCst), 1);
    assert_eq!(out.calls.len(), 1);
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

#[tokio::test]
async fn retry_after_is_honoured_and_an_unfittable_wait_ends_without_sleeping() {
    let fake = Fake::new(vec![
        Act::Fail(ModelError::Transient {
            message: "429".into(),
            retry_after: Some(Duration::from_millis(300)),
        }),
        Act::Reply(Usage::default()),
    ]);
    let started = std::time::Instant::now();
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
    let started = std::time::Instant::now();
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
