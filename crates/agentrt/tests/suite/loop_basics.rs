//! The governed loop: happy path, invalid decisions, denials, limits.

use crate::engine;

use std::sync::Arc;

use crate::common::*;
use agentrt::*;
use agentrt::{
    clock::ManualClock, model::DecisionKind, model::ObservationKind, model::Origin, model::Step,
    model::StepStatus,
};

#[tokio::test]
async fn happy_path_writes_the_exact_event_sequence() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let agent = ScriptedAgent::new([
        Decision::tool_call("fs_read", r#"{"path":"a"}"#),
        Decision::complete(r#"{"done":true}"#),
    ]);
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![read.clone()]),
            &clock,
            &rec,
        ),
        agent,
    )
    .unwrap();
    let run = driver
        .start(Some("r1"), "read a", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.reason, Some(TerminalReason::GoalCompleted));
    assert_eq!(run.result.as_ref().unwrap().as_str(), r#"{"done":true}"#);
    assert_eq!(
        rec.types(),
        [
            "run.created",
            "run.started",
            "step.started",
            "step.decided",
            "step.policy",
            "step.tool_started",
            "step.tool_finished",
            "step.started",
            "step.decided",
            "run.finished"
        ]
    );
    // Counted by type without reading the events, on every engine.
    assert_eq!(store.event_count("r1", &EventType::StepStarted).unwrap(), 2);
    assert_eq!(store.event_count("r1", &EventType::StepPolicy).unwrap(), 1);
    assert_eq!(
        store.event_count("r1", &EventType::PolicyShadow).unwrap(),
        0
    );
    assert_eq!(
        store.event_count("nope", &EventType::RunCreated).unwrap(),
        0
    );
    // The tool got the driver's run and step ids.
    let seen = read.seen.lock().unwrap().clone();
    let steps = store.list_steps("r1").unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].run_id, "r1");
    assert_eq!(seen[0].step_id, steps[0].id);
    // The store agrees with the observer.
    let stored: Vec<String> = store
        .list_events("r1")
        .unwrap()
        .iter()
        .map(|e| e.event_type.to_string())
        .collect();
    assert_eq!(stored, rec.types());
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].status, StepStatus::Done);
    assert_eq!(steps[1].status, StepStatus::Done);
    let stored_run = store.get_run("r1").unwrap();
    assert_eq!(stored_run, run);
}

fn decided_payload(store: &Store, run: &str) -> Vec<serde_json::Value> {
    store
        .list_events(run)
        .unwrap()
        .iter()
        .filter(|e| e.event_type == EventType::StepDecided)
        .map(|e| serde_json::from_str(&e.payload).unwrap())
        .collect()
}

#[tokio::test]
async fn decisions_are_recorded_verbatim_and_bad_args_land_in_invalid_args() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let mut not_utf8 = Decision::tool_call("fs_read", vec![b'{', 0xff, b'}']);
    not_utf8.reason = "bytes".into();
    let agent = ScriptedAgent::new([
        Decision::tool_call("fs_read", "{\"path\": \"a\", }").with_reason("trailing comma"),
        not_utf8,
        Decision::tool_call("fs_read", r#"{ "path" : "b" }"#).with_origin(Origin::Model),
        Decision::complete("\"ok\""),
    ]);
    let limits = Limits::default().max_consecutive_tool_failures(5);
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![read.clone()]),
            &clock,
            &rec,
        ),
        agent,
    )
    .unwrap();
    let run = driver.start(Some("r"), "g", limits).await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let decided = decided_payload(&store, "r");
    assert_eq!(decided[0]["invalid_args"], "{\"path\": \"a\", }");
    assert!(decided[0].get("args").is_none());
    assert_eq!(decided[0]["reason"], "trailing comma");
    assert_eq!(decided[1]["invalid_args"], "e/99");
    assert_eq!(decided[1]["invalid_base64"], true);
    assert_eq!(decided[2]["args"], serde_json::json!({"path": "b"}));
    assert_eq!(decided[2]["origin"], "model");
    let steps = store.list_steps("r").unwrap();
    assert_eq!(
        steps[0].decision.as_ref().unwrap().invalid_args.as_deref(),
        Some("{\"path\": \"a\", }")
    );
    assert_eq!(
        steps[0].observation.as_ref().unwrap().kind,
        ObservationKind::InvalidDecision
    );
    // Only the valid call reached the tool, with canonical arguments.
    assert_eq!(read.count(), 1);
    assert_eq!(
        read.seen.lock().unwrap()[0].args.as_str(),
        r#"{"path":"b"}"#
    );
}

/// A policy that counts how often it is asked.
#[derive(Default, Clone)]
struct CountingPolicy(Arc<std::sync::atomic::AtomicUsize>);

impl Policy for CountingPolicy {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(PolicyDecision::allow())
    }
}

#[tokio::test]
async fn every_invalid_form_fails_the_step_and_the_run_continues() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let strict = Arc::new(Counting {
        spec: ToolSpec::new("strict", "needs a path", SideEffect::ReadOnly)
            .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}"#)
            .unwrap(),
        ..Counting::new("strict", SideEffect::ReadOnly)
    });
    let cases: Vec<(Decision, &str)> = vec![
        (
            Decision::tool_call("nope", "{}"),
            "no tool named \"nope\" is registered",
        ),
        (Decision::tool_call("", "{}"), "names no tool"),
        (
            Decision::new(DecisionKind::Other(String::new())),
            "has no kind",
        ),
        (
            Decision::new(DecisionKind::Other("launch".into())),
            "\"launch\" is not a decision kind",
        ),
        (Decision::new(DecisionKind::Truncated), "cut off"),
        (
            Decision::new(DecisionKind::NoToolCall),
            "without calling a tool",
        ),
        (
            Decision {
                origin: "martian".into(),
                ..Decision::tool_call("strict", r#"{"path":"a"}"#)
            },
            "origin \"martian\"",
        ),
        (
            Decision::tool_call("strict", r#"{"path":7}"#),
            "do not match the schema at /path",
        ),
        (
            Decision::tool_call("strict", r#"{}"#),
            "do not match the schema",
        ),
        (Decision::complete("{bad"), "result is not acceptable JSON"),
    ];
    let n = cases.len() as u64;
    let mut decisions: Vec<Decision> = cases.iter().map(|(d, _)| d.clone()).collect();
    decisions.push(Decision::complete("1"));
    let policy = CountingPolicy::default();
    let limits = Limits::default()
        .max_consecutive_tool_failures(100)
        .max_steps(100);
    let mut driver = Driver::new(
        config(
            &store,
            policy.clone(),
            shared(vec![strict.clone()]),
            &clock,
            &rec,
        ),
        ScriptedAgent::new(decisions),
    )
    .unwrap();
    let run = driver.start(Some("r"), "g", limits).await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.step_count, n + 1);
    let steps = store.list_steps("r").unwrap();
    for (i, (_, want)) in cases.iter().enumerate() {
        let o = steps[i].observation.as_ref().unwrap();
        assert_eq!(o.kind, ObservationKind::InvalidDecision, "case {i}");
        assert_eq!(steps[i].status, StepStatus::Failed);
        let error = o.content.as_ref().unwrap().to_value()["error"]
            .as_str()
            .unwrap()
            .to_owned();
        assert!(error.contains(want), "case {i}: {error} lacks {want}");
        assert!(o.summary.starts_with("invalid decision: "));
    }
    assert_eq!(strict.count(), 0, "the tool never saw an invalid decision");
    assert_eq!(
        policy.0.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nor did the policy"
    );
    // An invalid step writes decided then failed, never policy.
    let types = rec.types();
    assert!(!types.contains(&"step.policy".to_string()));
}

#[test]
fn registration_refuses_every_bad_spec() {
    let store = engine::store();
    let make = |spec: ToolSpec| -> Arc<dyn Tool> {
        Arc::new(tool_fn(spec, |_| async { Ok(ToolResult::raw("1")) }))
    };
    let ok = ToolSpec::new("ok", "", SideEffect::ReadOnly);
    let cases: Vec<(Vec<Arc<dyn Tool>>, &str)> = vec![
        (
            vec![make(ToolSpec::new("", "", SideEffect::ReadOnly))],
            "name is empty",
        ),
        (vec![make(ok.clone()), make(ok.clone())], "same name"),
        (
            vec![make(ToolSpec {
                timeout_ms: 0,
                ..ok.clone()
            })],
            "timeout",
        ),
        (
            vec![make(ok.clone().with_schema(Canonical::null()))],
            "blank",
        ),
        (
            vec![make(ok.clone().with_schema_str("[1,2]").unwrap())],
            "object or boolean",
        ),
        (
            vec![make(
                ok.clone()
                    .with_schema_str(r#"{"type":"nonsense"}"#)
                    .unwrap(),
            )],
            "does not compile",
        ),
        (
            vec![make(
                ok.clone()
                    .with_schema_str(r#"{"$ref":"https://example.invalid/schema.json"}"#)
                    .unwrap(),
            )],
            "does not compile",
        ),
        (
            vec![make(
                ok.clone()
                    .with_schema_str(r#"{"$ref":"file:///etc/passwd"}"#)
                    .unwrap(),
            )],
            "does not compile",
        ),
    ];
    for (i, (tools, want)) in cases.into_iter().enumerate() {
        let err = Gate::new(GateConfig::new(store.clone(), DefaultPolicy, tools))
            .err()
            .expect("refused");
        match &err {
            Error::InvalidTool { reason, .. } => {
                assert!(reason.contains(want), "case {i}: {reason}")
            }
            other => panic!("case {i}: {other:?}"),
        }
    }
    // A schema nested past the depth limit cannot even be built.
    let deep = format!("{}{}", "[".repeat(300), "]".repeat(300));
    assert!(matches!(
        ToolSpec::new("d", "", SideEffect::ReadOnly).with_schema_str(&deep),
        Err(JsonError::TooDeep { .. })
    ));
    // Local references work offline.
    let local = ok
        .with_schema_str(r##"{"$defs":{"p":{"type":"string"}},"type":"object","properties":{"path":{"$ref":"#/$defs/p"}}}"##)
        .unwrap();
    assert!(Gate::new(GateConfig::new(store, DefaultPolicy, vec![make(local)])).is_ok());
}

fn tool_with<F, Fut>(name: &str, class: SideEffect, timeout_ms: u64, f: F) -> Arc<dyn Tool>
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    let spec =
        ToolSpec::new(name, "", class).with_timeout(std::time::Duration::from_millis(timeout_ms));
    Arc::new(tool_fn(spec, f))
}

#[tokio::test]
async fn tool_failures_become_observations() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let tools = vec![
        tool_with("slow", SideEffect::ReadOnly, 50, |_| async {
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            Ok(ToolResult::raw("1"))
        }),
        tool_with("boom", SideEffect::ReadOnly, 1000, |_| async {
            panic!("kaboom")
        }),
        tool_with("err", SideEffect::ReadOnly, 1000, |_| async {
            Err(ToolError::failed("disk full"))
        }),
        tool_with("junk", SideEffect::ReadOnly, 1000, |_| async {
            Ok(ToolResult::raw("not json"))
        }),
        tool_with("bytes", SideEffect::ReadOnly, 1000, |_| async {
            Ok(ToolResult::raw(vec![0xffu8, 0xfe]))
        }),
        tool_with("deep", SideEffect::ReadOnly, 1000, |_| async {
            Ok(ToolResult::raw("[".repeat(300) + &"]".repeat(300)))
        }),
        tool_with("stop", SideEffect::ReadOnly, 1000, |_| async {
            Err(ToolError::abort("the repository is gone"))
        }),
    ];
    let agent = ScriptedAgent::new(
        ["slow", "boom", "err", "junk", "bytes", "deep", "stop"]
            .map(|t| Decision::tool_call(t, "{}")),
    );
    let limits = Limits::default().max_consecutive_tool_failures(100);
    let mut driver =
        Driver::new(config(&store, DefaultPolicy, tools, &clock, &rec), agent).unwrap();
    let run = driver.start(Some("r"), "g", limits).await.unwrap();
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.reason, Some(TerminalReason::ToolAbort));
    assert_eq!(run.reason_detail, "the repository is gone");
    let steps = store.list_steps("r").unwrap();
    let field = |i: usize, k: &str| -> serde_json::Value {
        steps[i]
            .observation
            .as_ref()
            .unwrap()
            .content
            .as_ref()
            .unwrap()
            .to_value()[k]
            .clone()
    };
    for s in &steps {
        assert_eq!(s.status, StepStatus::Failed);
        assert_eq!(
            s.observation.as_ref().unwrap().kind,
            ObservationKind::ToolError
        );
    }
    assert_eq!(field(0, "failure"), "timeout");
    assert_eq!(
        steps[1].observation.as_ref().unwrap().summary,
        "boom panicked"
    );
    assert_eq!(field(1, "error"), "panic: kaboom");
    assert_eq!(field(2, "failure"), "error");
    assert_eq!(field(2, "error"), "disk full");
    assert_eq!(field(3, "failure"), "invalid_content");
    assert_eq!(
        field(3, "content"),
        "not json",
        "bad content keeps its bytes"
    );
    assert_eq!(field(4, "content_base64"), "//4=");
    assert_eq!(field(5, "failure"), "invalid_content");
    assert_eq!(field(6, "failure"), "abort");
    // Failed tool steps write tool_finished then step.failed.
    let types = rec.types();
    let finished = types.iter().filter(|t| *t == "step.tool_finished").count();
    let failed = types.iter().filter(|t| *t == "step.failed").count();
    assert_eq!((finished, failed), (7, 7));
}

#[tokio::test]
async fn terminal_tool_success_completes_the_run_with_its_content() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let finish: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("finish", "", SideEffect::ReadOnly).terminal(),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("finished")) },
    ));
    let agent = ScriptedAgent::new([Decision::tool_call("finish", r#"{"answer":42}"#)]);
    let mut driver = Driver::new(
        config(&store, DefaultPolicy, vec![finish], &clock, &rec),
        agent,
    )
    .unwrap();
    let run = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.reason_detail, "terminal tool finish");
    assert_eq!(run.result.unwrap().as_str(), r#"{"answer":42}"#);
    // The step end and the run end are one commit: the last events share the transaction.
    let types = rec.types();
    assert_eq!(
        &types[types.len() - 2..],
        ["step.tool_finished", "run.finished"]
    );
    assert_eq!(store.list_steps("r").unwrap().len(), 1);
}

#[tokio::test]
async fn a_caller_cancel_after_the_tool_ran_is_returned_after_the_outcome_is_recorded() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let (handle, signal) = cancel_pair();
    let h = handle.clone();
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("t", "", SideEffect::LocalMutation),
        move |_| {
            h.cancel();
            async { Ok(ToolResult::raw("\"did it\"")) }
        },
    ));
    let agent = ScriptedAgent::new([Decision::tool_call("t", "{}"), Decision::complete("1")]);
    let mut driver = Driver::new(
        config(&store, DefaultPolicy, vec![tool], &clock, &rec),
        agent,
    )
    .unwrap()
    .with_cancel(signal);
    let err = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled));
    let steps = store.list_steps("r").unwrap();
    assert_eq!(
        steps[0].status,
        StepStatus::Done,
        "the outcome was recorded first"
    );
    assert_eq!(
        steps[0]
            .observation
            .as_ref()
            .unwrap()
            .content
            .as_ref()
            .unwrap()
            .as_str(),
        "\"did it\""
    );
}

#[tokio::test]
async fn a_caller_cancel_during_the_tool_leaves_an_interrupted_observation() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let (handle, signal) = cancel_pair();
    let h = handle.clone();
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("t", "", SideEffect::LocalMutation),
        move |_| {
            h.cancel();
            async {
                tokio::time::sleep(std::time::Duration::from_secs(10)).await;
                Ok(ToolResult::raw("1"))
            }
        },
    ));
    let agent = ScriptedAgent::new([Decision::tool_call("t", "{}")]);
    let mut driver = Driver::new(
        config(&store, DefaultPolicy, vec![tool], &clock, &rec),
        agent,
    )
    .unwrap()
    .with_cancel(signal);
    let err = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Cancelled));
    let step = &store.list_steps("r").unwrap()[0];
    assert_eq!(step.status, StepStatus::Interrupted);
    let o = step.observation.as_ref().unwrap();
    assert_eq!(o.kind, ObservationKind::Interrupted);
    assert_eq!(
        o.content.as_ref().unwrap().to_value()["failure"],
        "cancelled"
    );
    let run = store.get_run("r").unwrap();
    assert_eq!(
        run.status,
        RunStatus::Running,
        "the run is left for a resume"
    );
    assert_eq!(store.lease("r").unwrap().0, "", "and holds no lease");
}

/// An agent that takes `think` of the clock's time to decide each step,
/// as a model call would.
struct Slow {
    clock: ManualClock,
    think: std::time::Duration,
    decisions: ScriptedAgent,
}

impl Agent for Slow {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        self.clock.advance(self.think);
        self.decisions.decide(input)
    }
}

#[tokio::test]
async fn a_tools_duration_is_measured_from_the_tools_start_not_the_steps() {
    use std::time::Duration;
    let store = engine::store();
    let clock = ManualClock::new(t0());
    let rec = Recorder::default();
    let tool_clock = clock.clone();
    let fast: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("fast", "fails at once", SideEffect::ReadOnly),
        move |_| {
            tool_clock.advance(Duration::from_millis(250));
            async { Err(ToolError::failed("no such file")) }
        },
    ));
    let agent = Slow {
        clock: clock.clone(),
        think: Duration::from_millis(3_788),
        decisions: ScriptedAgent::new([Decision::tool_call("fast", "{}"), Decision::complete("1")]),
    };
    let mut driver = Driver::new(
        config(&store, DefaultPolicy, vec![fast], &clock, &rec),
        agent,
    )
    .unwrap();
    let run = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    let finished = rec
        .events()
        .into_iter()
        .find(|e| e.event_type == EventType::StepToolFinished)
        .unwrap();
    let payload: serde_json::Value = serde_json::from_str(&finished.payload).unwrap();
    assert_eq!(payload["duration_ms"], 250, "{}", finished.payload);
    // The step's active time still counts the decision.
    let steps = store.list_steps("r").unwrap();
    let step = &steps[0];
    assert_eq!(
        step.finished_at.unwrap().as_unix_nanos() - step.started_at.as_unix_nanos(),
        4_038_000_000
    );
    assert_eq!(run.active_ms, 4_038 + 3_788);
}

/// Allows every request, under a stated id.
struct AllowAll;

impl Policy for AllowAll {
    fn evaluate(&self, _: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        Ok(PolicyDecision::allow())
    }
    fn policy_id(&self) -> Option<String> {
        Some("allow-all/1".into())
    }
}

#[tokio::test]
async fn the_tool_start_makes_the_decision_and_the_verdict_durable_before_the_tool_runs() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    // The tool reads its own step row while it runs: what a crash now
    // would leave behind.
    let during: Arc<std::sync::Mutex<Vec<Step>>> = Arc::default();
    let (watched, seen) = (store.clone(), during.clone());
    let tool: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("push", "", SideEffect::RemoteMutation),
        move |call| {
            let step = watched
                .list_steps(&call.run_id)
                .unwrap()
                .into_iter()
                .find(|s| s.id == call.step_id)
                .unwrap();
            seen.lock().unwrap().push(step);
            async { Ok(ToolResult::raw("1")) }
        },
    ));
    let mut driver = Driver::new(
        config(&store, AllowAll, vec![tool], &clock, &rec),
        ScriptedAgent::new([
            Decision::tool_call("push", r#"{"ref":"main"}"#),
            Decision::complete("1"),
        ]),
    )
    .unwrap();
    let run = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let policy_event = store
        .list_events("r")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == EventType::StepPolicy)
        .unwrap();
    let spec_hash =
        serde_json::from_str::<serde_json::Value>(&policy_event.payload).unwrap()["spec_hash"]
            .as_str()
            .unwrap()
            .to_owned();
    assert!(!spec_hash.is_empty());
    let during = during.lock().unwrap().clone();
    assert_eq!(during.len(), 1);
    let after = store.list_steps("r").unwrap().remove(0);
    for (when, step) in [("while the tool runs", &during[0]), ("after", &after)] {
        let decision = step.decision.as_ref().expect(when);
        assert_eq!(
            (
                decision.tool.as_str(),
                decision.args.as_ref().unwrap().as_str()
            ),
            ("push", r#"{"ref":"main"}"#),
            "{when}"
        );
        assert_eq!(step.policy, Some(PolicyDecision::allow()), "{when}");
        assert_eq!(step.spec_hash, spec_hash, "{when}");
        assert_eq!(step.policy_id, "allow-all/1", "{when}");
    }
    assert_eq!(during[0].status, StepStatus::Executing);
    assert_eq!(after.status, StepStatus::Done);
}

/// Answers by the tool's name, under a stated id.
struct ByName;

impl Policy for ByName {
    fn evaluate(&self, req: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        match req.spec.name.as_str() {
            "denied" => Ok(PolicyDecision::deny("not this")),
            "aborted" => Ok(PolicyDecision::abort("stop")),
            "asked" => Ok(PolicyDecision::need_approval(
                "ask",
                "check first",
                None,
                None,
            )),
            "broken" => Err(PolicyError::new("broken")),
            _ => Ok(PolicyDecision::allow()),
        }
    }
    fn policy_id(&self) -> Option<String> {
        Some("by-name/1".into())
    }
}

#[tokio::test]
async fn every_verdict_leaves_the_decision_spec_hash_and_policy_on_the_step_row() {
    let strict = ToolSpec::new("strict", "", SideEffect::ReadOnly)
        .with_schema_str(r#"{"type":"object","required":["m"]}"#)
        .unwrap();
    let named = |name: &str| ToolSpec::new(name, "", SideEffect::LocalMutation);
    let specs = [
        strict,
        named("denied"),
        named("aborted"),
        named("asked"),
        named("broken"),
    ];
    let hash = |name: &str| specs.iter().find(|s| s.name == name).unwrap().hash();
    let tools: Vec<Arc<dyn Tool>> = specs
        .iter()
        .map(|spec| {
            Arc::new(tool_fn(spec.clone(), |_| async {
                Ok(ToolResult::raw("1"))
            })) as Arc<dyn Tool>
        })
        .collect();
    let store = engine::store();
    let clock = stepping_clock();
    let gate = Gate::new(config(&store, ByName, tools, &clock, &Recorder::default())).unwrap();
    let by_name = Some("by-name/1");
    // run, decision, step status, verdict, policy id, spec hash.
    let cases = [
        (
            "invalid",
            Decision::tool_call("strict", r#"{"n":1}"#),
            StepStatus::Failed,
            None,
            None,
            hash("strict"),
        ),
        (
            "complete",
            Decision::complete("1"),
            StepStatus::Done,
            None,
            None,
            String::new(),
        ),
        (
            "fail",
            Decision::fail("gave up"),
            StepStatus::Done,
            None,
            None,
            String::new(),
        ),
        (
            "error",
            Decision::tool_call("broken", "{}"),
            StepStatus::Failed,
            None,
            None,
            hash("broken"),
        ),
        (
            "deny",
            Decision::tool_call("denied", "{}"),
            StepStatus::Failed,
            Some(PolicyDecision::deny("not this")),
            by_name,
            hash("denied"),
        ),
        (
            "abort",
            Decision::tool_call("aborted", "{}"),
            StepStatus::Failed,
            Some(PolicyDecision::abort("stop")),
            by_name,
            hash("aborted"),
        ),
        (
            "pause",
            Decision::tool_call("asked", "{}"),
            StepStatus::AwaitingApproval,
            Some(PolicyDecision::need_approval(
                "ask",
                "check first",
                None,
                None,
            )),
            by_name,
            hash("asked"),
        ),
    ];
    for (run, decision, status, policy, policy_id, spec_hash) in cases {
        let mut session = gate.begin(Some(run), "g", Limits::default()).await.unwrap();
        session.step().await.unwrap().unwrap();
        session.propose(decision).await.unwrap();
        session.close().await.unwrap();
        let decided = store
            .list_events(run)
            .unwrap()
            .into_iter()
            .find(|e| e.event_type == EventType::StepDecided)
            .unwrap();
        let step = store.list_steps(run).unwrap().remove(0);
        assert_eq!(step.status, status, "{run}");
        assert_eq!(
            serde_json::to_string(step.decision.as_ref().unwrap()).unwrap(),
            decided.payload,
            "{run}: the row holds the recorded decision"
        );
        assert_eq!(step.spec_hash, spec_hash, "{run}");
        assert_eq!(step.policy, policy, "{run}");
        assert_eq!(step.policy_id, policy_id.unwrap_or_default(), "{run}");
    }
}

/// Issue 15: a gate's default ids increase within the process, so each new
/// step (and run) key lands at the right edge of its b-tree.
#[tokio::test]
async fn a_gates_default_ids_increase_step_after_step() {
    let store = engine::store();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let mut decisions: Vec<Decision> = (0..8)
        .map(|i| Decision::tool_call("fs_read", format!(r#"{{"path":"{i}"}}"#)))
        .collect();
    decisions.push(Decision::complete("true"));
    // The gate's own id source: no `with_ids`.
    let config = GateConfig::new(store.clone(), DefaultPolicy, shared(vec![read]));
    let mut driver = Driver::new(config, ScriptedAgent::new(decisions)).unwrap();
    let run = driver.start(None, "read", Limits::default()).await.unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.id.len(), 32);
    let ids: Vec<String> = store
        .list_steps(&run.id)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(ids.len(), 9);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "step ids in step order sort in that order: {ids:?}"
    );
    assert!(run.id < ids[0], "the run's id was made before its steps'");
}

/// A listing keeps the runs of one status and every label given, newest
/// first, and counts only those.
#[tokio::test]
async fn runs_are_listed_by_status_and_labels_newest_first() {
    let store = engine::store();
    let clock = stepping_clock();
    let rec = Recorder::default();
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let ids = agentrt::ids::sequential_ids("id");
    for (id, host, decisions) in [
        ("done-a", "a", vec![Decision::complete("1")]),
        ("wait-a", "a", vec![Decision::tool_call("push", "{}")]),
        ("wait-b", "b", vec![Decision::tool_call("push", "{}")]),
        ("done-b", "b", vec![Decision::complete("1")]),
    ] {
        let mut driver = Driver::new(
            config(
                &store,
                DefaultPolicy,
                shared(vec![push.clone()]),
                &clock,
                &rec,
            )
            .with_ids(ids.clone()),
            ScriptedAgent::new(decisions),
        )
        .unwrap();
        let labels = Labels::parse([format!("host={host}")]).unwrap();
        driver
            .start_labelled(Some(id), "g", Limits::default(), labels)
            .await
            .unwrap();
    }
    let listed = |filter: &store::RunFilter| {
        let page = store.runs_page_capped_filtered(10, 0, filter).unwrap();
        let ids: Vec<String> = page.items.into_iter().map(|r| r.id).collect();
        (page.total, ids)
    };
    let waiting = store::RunFilter::default().with_status(RunStatus::WaitingForApproval);
    assert_eq!(
        listed(&waiting),
        (2, vec!["wait-b".into(), "wait-a".into()])
    );
    let waiting_on_a = store::RunFilter::labelled(Labels::parse(["host=a"]).unwrap())
        .with_status(RunStatus::WaitingForApproval);
    assert_eq!(listed(&waiting_on_a), (1, vec!["wait-a".into()]));
    let on_b = store::RunFilter::labelled(Labels::parse(["host=b"]).unwrap());
    assert_eq!(listed(&on_b), (2, vec!["done-b".into(), "wait-b".into()]));
    assert_eq!(listed(&store::RunFilter::default()).0, 4);
    let page = store.runs_page_capped_filtered(1, 1, &waiting).unwrap();
    assert_eq!((page.total, page.items[0].id.as_str()), (2, "wait-a"));
}
