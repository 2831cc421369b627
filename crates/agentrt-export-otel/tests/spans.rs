//! A scripted run's events turned into spans: names, parents, ids derived
//! from the run, GenAI attribute names, statuses, and no tool content
//! unless asked for.

use std::sync::Arc;

use agentrt::{
    DecideOptions, Decision, DefaultPolicy, Driver, Event, EventType, GateConfig, Limits, Operator,
    RunStatus, ScriptedAgent, SideEffect, Store, Tool, ToolResult, ToolSpec, tool_fn,
};
use agentrt_export_otel::{SpanKindName, Spans, SpansOptions, span_id, trace_id};
use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::SpanData;

fn push() -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ))
}

/// A run that pushes (approved by an operator) and completes: its events.
async fn approved_run() -> Vec<Event> {
    let store = Store::open(":memory:").unwrap();
    let config = || GateConfig::new(store.clone(), DefaultPolicy, vec![push()]);
    let agent = ScriptedAgent::new(vec![Decision::tool_call("push", r#"{"secret":"hunter2"}"#)]);
    let paused = Driver::new(config(), agent)
        .unwrap()
        .start(Some("r1"), "ship it", Limits::default())
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals("r1").unwrap().remove(0);
    let options = DecideOptions {
        by: "alice",
        note: "",
        shown_hash: Some(&approval.hash),
    };
    Operator::new(store.clone())
        .approve("r1", &approval.id, &options)
        .unwrap();
    let agent = ScriptedAgent::new(vec![Decision::complete("true")]);
    let done = Driver::new(config(), agent)
        .unwrap()
        .resume("r1")
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Completed);
    store.list_events("r1").unwrap()
}

fn spans_of(events: &[Event], options: SpansOptions) -> Vec<SpanData> {
    let mut spans = Spans::new(options);
    events.iter().flat_map(|e| spans.handle(e)).collect()
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| &kv.value)
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test]
async fn a_run_becomes_a_tree_of_spans_in_its_own_trace() {
    let events = approved_run().await;
    let spans = spans_of(&events, SpansOptions::default());
    let run = named(&spans, "agentrt.run");
    let steps = named(&spans, "agentrt.step");
    let approvals = named(&spans, "agentrt.approval");
    assert_eq!(
        (run.len(), steps.len(), approvals.len()),
        (1, 2, 1),
        "{spans:#?}"
    );
    let run = run[0];
    assert!(
        spans
            .iter()
            .all(|s| s.span_context.trace_id() == trace_id("r1"))
    );
    assert_eq!(run.span_context.span_id(), span_id(SpanKindName::Run, "r1"));
    assert_eq!(run.parent_span_id, SpanId::INVALID);
    assert_eq!(run.status, Status::Ok);
    assert_eq!(
        attr(run, "gen_ai.operation.name"),
        Some(&Value::from("invoke_agent"))
    );
    assert_eq!(
        attr(run, "agentrt.run.status"),
        Some(&Value::from("COMPLETED"))
    );
    assert_eq!(attr(run, "agentrt.run.goal"), Some(&Value::from("ship it")));
    for step in &steps {
        assert_eq!(step.parent_span_id, run.span_context.span_id());
        assert_eq!(step.span_kind, SpanKind::Internal);
    }
    let pushed = steps
        .iter()
        .find(|s| attr(s, "gen_ai.tool.name").is_some())
        .expect("the push step");
    assert_eq!(attr(pushed, "gen_ai.tool.name"), Some(&Value::from("push")));
    assert_eq!(
        attr(pushed, "gen_ai.operation.name"),
        Some(&Value::from("execute_tool"))
    );
    assert_eq!(
        attr(pushed, "agentrt.step.status"),
        Some(&Value::from("done"))
    );
    assert_eq!(approvals[0].parent_span_id, pushed.span_context.span_id());
    let tools = named(&spans, "agentrt.tool");
    assert_eq!(tools.len(), 1, "the push ran once");
    assert_eq!(tools[0].parent_span_id, pushed.span_context.span_id());
    assert_eq!(
        attr(tools[0], "gen_ai.tool.name"),
        Some(&Value::from("push"))
    );
    assert_eq!(
        attr(tools[0], "gen_ai.operation.name"),
        Some(&Value::from("execute_tool"))
    );
    assert!(
        tools[0].start_time >= approvals[0].end_time,
        "it ran once approved"
    );
    assert_eq!(
        attr(approvals[0], "agentrt.approval.status"),
        Some(&Value::from("approved"))
    );
    assert_eq!(
        attr(approvals[0], "agentrt.approval.by"),
        Some(&Value::from("alice"))
    );
    assert!(run.start_time <= run.end_time && pushed.start_time >= run.start_time);
    let names: Vec<&str> = run.events.iter().map(|e| e.name.as_ref()).collect();
    assert!(names.contains(&"run.started"), "{names:?}");
    // The same events give the same spans.
    let again = spans_of(&events, SpansOptions::default());
    let ids = |s: &[SpanData]| {
        s.iter()
            .map(|s| s.span_context.span_id())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&spans), ids(&again));
}

#[tokio::test]
async fn tool_arguments_are_exported_only_when_asked_and_then_bounded() {
    let events = approved_run().await;
    let plain = spans_of(&events, SpansOptions::default());
    let all = |spans: &[SpanData]| {
        spans
            .iter()
            .flat_map(|s| s.attributes.iter().map(|kv| kv.value.as_str().into_owned()))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        !all(&plain).contains("hunter2"),
        "no tool content by default"
    );
    let with = spans_of(
        &events,
        SpansOptions {
            max_text: 12,
            content: true,
        },
    );
    let text = all(&with);
    assert!(text.contains(r#"{"secret":"h"#), "{text}");
    assert!(text.contains("…[truncated: "), "{text}");
}

fn event(seq: i64, event_type: EventType, step: &str, payload: &str) -> Event {
    Event {
        seq,
        run_id: "m1".into(),
        step_id: step.into(),
        at: format!("2026-10-01T09:00:0{seq}.000000000Z"),
        event_type,
        payload: payload.into(),
    }
}

#[test]
fn a_model_attempt_is_a_client_span_with_gen_ai_usage_and_a_failed_one_is_an_error() {
    let events = [
        event(1, EventType::RunCreated, "", r#"{"goal":"g"}"#),
        event(2, EventType::StepStarted, "s1", r#"{"index":0}"#),
        event(
            3,
            EventType::ModelDispatched,
            "s1",
            r#"{"call_id":"c1","attempt":1,"model":"gpt-x"}"#,
        ),
        event(
            4,
            EventType::ModelCompleted,
            "s1",
            r#"{"call_id":"c1","attempt":1,"status":"completed","model":"gpt-x","usage":{"input_tokens":12,"output_tokens":5},"cost_micros":30}"#,
        ),
        event(
            5,
            EventType::ModelDispatched,
            "s1",
            r#"{"call_id":"c2","attempt":2,"model":"gpt-x"}"#,
        ),
        event(
            6,
            EventType::ModelFailed,
            "s1",
            r#"{"call_id":"c2","attempt":2,"error":"timeout"}"#,
        ),
        event(
            7,
            EventType::RunFinished,
            "",
            r#"{"status":"FAILED","reason":"model_error","detail":"gave up","steps":1}"#,
        ),
    ];
    let spans = spans_of(&events, SpansOptions::default());
    let models = named(&spans, "agentrt.model");
    assert_eq!(models.len(), 2);
    let step = named(&spans, "agentrt.step")[0];
    assert_eq!(
        step.span_context.span_id(),
        span_id(SpanKindName::Step, "s1")
    );
    let ok = models
        .iter()
        .find(|s| s.span_context.span_id() == span_id(SpanKindName::Model, "c1"))
        .unwrap();
    assert_eq!(ok.span_kind, SpanKind::Client);
    assert_eq!(ok.parent_span_id, step.span_context.span_id());
    assert_eq!(
        attr(ok, "gen_ai.request.model"),
        Some(&Value::from("gpt-x"))
    );
    assert_eq!(attr(ok, "gen_ai.usage.input_tokens"), Some(&Value::I64(12)));
    assert_eq!(attr(ok, "gen_ai.usage.output_tokens"), Some(&Value::I64(5)));
    let failed = models
        .iter()
        .find(|s| s.span_context.span_id() == span_id(SpanKindName::Model, "c2"))
        .unwrap();
    assert!(matches!(failed.status, Status::Error { .. }));
    let run = named(&spans, "agentrt.run")[0];
    assert!(
        matches!(run.status, Status::Error { .. }),
        "a failed run is an error"
    );
}

#[tokio::test]
async fn the_caller_an_access_token_named_is_the_runs_end_user() {
    let store = Store::open(":memory:").unwrap();
    let labels = agentrt::Labels::parse([
        "caller.issuer=https://id.example.com",
        "caller.subject=alice",
    ])
    .unwrap();
    let agent = ScriptedAgent::new(vec![Decision::complete("true")]);
    Driver::new(
        GateConfig::new(store.clone(), DefaultPolicy, vec![push()]),
        agent,
    )
    .unwrap()
    .start_labelled(Some("r2"), "ship it", Limits::default(), labels)
    .await
    .unwrap();
    let spans = spans_of(&store.list_events("r2").unwrap(), SpansOptions::default());
    let run = named(&spans, "agentrt.run")[0];
    assert_eq!(attr(run, "enduser.id"), Some(&Value::from("alice")));
    assert_eq!(
        attr(run, "agentrt.caller.issuer"),
        Some(&Value::from("https://id.example.com"))
    );
    // A run without the labels names no end user.
    let spans = spans_of(&approved_run().await, SpansOptions::default());
    assert_eq!(attr(named(&spans, "agentrt.run")[0], "enduser.id"), None);
}
