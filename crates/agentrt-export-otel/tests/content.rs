//! What leaves the machine without `--content`: runs whose tools fail with
//! a secret in their error text (a tool error, an unknown outcome, an
//! abort that fails the run, an interrupted side effect), a policy whose
//! denial quotes the arguments and a model that names a tool that does
//! not exist, recorded by the real runtime in a SQLite file, then turned
//! into spans by the library and sent by the binary to an OTLP/HTTP
//! endpoint on 127.0.0.1. Nothing exported holds the secret; each failure
//! leaves as its kind and its length in bytes. With `--content` the text
//! is there.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use agentrt::{
    Decision, DefaultPolicy, Driver, EventType, GateConfig, Limits, Operator, Policy,
    PolicyDecision, PolicyError, RunStatus, RunView, ScriptedAgent, SideEffect, Store, Tool,
    ToolError, ToolRequest, ToolSpec, tool_fn,
};
use agentrt_export_otel::{Spans, SpansOptions};
use opentelemetry::trace::Status;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span as ProtoSpan;
use opentelemetry_sdk::trace::SpanData;
use prost::Message;

/// What every failing tool, the policy and the model put in their text.
const SECRET: &str = "SECRET-7f3a-hunter2";

fn failing(name: &str, side_effect: SideEffect, error: fn(String) -> ToolError) -> Arc<dyn Tool> {
    let name = name.to_owned();
    Arc::new(tool_fn(
        ToolSpec::new(&name, "fails", side_effect),
        move |_call| {
            let message = format!("{SECRET}: token=abc in the upstream's answer");
            async move { Err(error(message)) }
        },
    ))
}

fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        failing("fetch", SideEffect::ReadOnly, |message| ToolError::Failed {
            message,
        }),
        failing("probe", SideEffect::ReadOnly, |message| {
            ToolError::Unknown { message }
        }),
        failing("deploy", SideEffect::ReadOnly, |detail| {
            ToolError::AbortRun { detail }
        }),
        failing("write", SideEffect::LocalMutation, |message| {
            ToolError::Unknown { message }
        }),
        failing("rm", SideEffect::LocalMutation, |message| {
            ToolError::Failed { message }
        }),
    ]
}

/// Denies `rm` with a reason that quotes the request's arguments.
struct Quoting;

impl Policy for Quoting {
    fn evaluate(
        &self,
        request: &ToolRequest,
        view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        if request.spec.name == "rm" {
            return Ok(PolicyDecision::deny(format!(
                "no deletes: {}",
                request.args.as_str()
            )));
        }
        DefaultPolicy.evaluate(request, view)
    }
}

/// Two runs in `db`: `r1` fails a tool, loses a read-only call's outcome,
/// is denied a delete whose arguments hold the secret, names a tool that
/// does not exist, and is failed by a tool's abort; `r2` loses the
/// outcome of a local write, pauses for an operator and is cancelled.
fn record_failures(db: &Path) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let store = Store::open(db).unwrap();
            let config = || GateConfig::new(store.clone(), Quoting, tools());
            let limits = Limits {
                max_consecutive_tool_failures: 10,
                ..Limits::default()
            };
            let args = format!(r#"{{"path":"{SECRET}"}}"#);
            let agent = ScriptedAgent::new(vec![
                Decision::tool_call("fetch", "{}"),
                Decision::tool_call("probe", "{}"),
                Decision::tool_call("rm", args.as_str()),
                Decision::tool_call(format!("{SECRET}_tool"), "{}"),
                Decision::tool_call("deploy", "{}"),
            ]);
            let failed = Driver::new(config(), agent)
                .unwrap()
                .start(Some("r1"), "tidy up", limits)
                .await
                .unwrap();
            assert_eq!(failed.status, RunStatus::Failed);

            let agent = ScriptedAgent::new(vec![Decision::tool_call("write", "{}")]);
            let paused = Driver::new(config(), agent)
                .unwrap()
                .start(Some("r2"), "write it", limits)
                .await
                .unwrap();
            assert_eq!(paused.status, RunStatus::WaitingForApproval);
            Operator::new(store.clone())
                .cancel("r2", "alice", "not now")
                .unwrap();
        });
}

/// Every text a span carries: its name, attribute values, status
/// description, and its events' names and attribute values.
fn texts_of(span: &SpanData) -> Vec<String> {
    let mut out = vec![span.name.to_string()];
    out.extend(
        span.attributes
            .iter()
            .map(|kv| kv.value.as_str().into_owned()),
    );
    if let Status::Error { description } = &span.status {
        out.push(description.to_string());
    }
    for event in span.events.iter() {
        out.push(event.name.to_string());
        out.extend(
            event
                .attributes
                .iter()
                .map(|kv| kv.value.as_str().into_owned()),
        );
    }
    out
}

fn attr(span: &SpanData, key: &str) -> Option<String> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| kv.value.as_str().into_owned())
}

/// The `error` of each step's (non-late) `step.tool_finished`, and the
/// `detail` of each `step.failed` and `run.finished`: the texts whose
/// lengths must leave.
fn stored_texts(db: &Path) -> HashMap<(String, &'static str), usize> {
    let store = Store::open(db).unwrap();
    let mut out = HashMap::new();
    for run in ["r1", "r2"] {
        for e in store.list_events(run).unwrap() {
            let payload: serde_json::Value = serde_json::from_str(&e.payload).unwrap();
            let (key, field) = match e.event_type {
                EventType::StepToolFinished => ("tool.error_bytes", "error"),
                EventType::StepFailed => ("step.detail_bytes", "detail"),
                EventType::RunFinished => ("run.detail_bytes", "detail"),
                _ => continue,
            };
            if let Some(text) = payload[field].as_str() {
                let id = if key == "run.detail_bytes" {
                    e.run_id.clone()
                } else {
                    e.step_id.clone()
                };
                out.insert((id, key), text.len());
            }
        }
    }
    out
}

fn spans_of(db: &Path, content: bool) -> Vec<SpanData> {
    let store = Store::open(db).unwrap();
    let mut spans = Spans::new(SpansOptions {
        content,
        ..SpansOptions::default()
    });
    let mut out = Vec::new();
    for run in ["r1", "r2"] {
        for e in store.list_events(run).unwrap() {
            out.extend(spans.handle(&e));
        }
    }
    out
}

#[test]
fn a_failing_tools_text_leaves_only_as_its_kind_and_length_unless_content_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    record_failures(&db);
    let stored = stored_texts(&db);

    let spans = spans_of(&db, false);
    for span in &spans {
        for text in texts_of(span) {
            assert!(!text.contains(SECRET), "{} leaks {text:?}", span.name);
        }
    }
    // The kinds, each on the step it happened to.
    let steps: Vec<&SpanData> = spans.iter().filter(|s| s.name == "agentrt.step").collect();
    let kinds: Vec<(Option<String>, Option<String>)> = steps
        .iter()
        .map(|s| {
            (
                attr(s, "agentrt.step.observation"),
                attr(s, "agentrt.tool.failure"),
            )
        })
        .collect();
    for expected in [
        (Some("tool_error"), Some("error")),
        (Some("tool_error"), Some("unknown_outcome")),
        (Some("policy_denied"), None),
        (Some("invalid_decision"), None),
        (Some("tool_error"), Some("abort")),
    ] {
        let expected = (expected.0.map(str::to_owned), expected.1.map(str::to_owned));
        assert!(kinds.contains(&expected), "{expected:?} in {kinds:?}");
    }
    let described: Vec<String> = steps
        .iter()
        .filter_map(|s| match &s.status {
            Status::Error { description } => Some(description.to_string()),
            _ => None,
        })
        .collect();
    assert!(
        described.contains(&"tool_error: unknown_outcome".to_owned()),
        "{described:?}"
    );
    // The lengths, exactly those of the texts left behind.
    let mut lengths = 0;
    for span in &spans {
        let id = attr(span, "agentrt.step.id").unwrap_or_default();
        let run = attr(span, "agentrt.run.id").unwrap_or_default();
        for key in ["tool.error_bytes", "step.detail_bytes", "run.detail_bytes"] {
            if let Some(n) = attr(span, &format!("agentrt.{key}")) {
                let owner = if key == "run.detail_bytes" { &run } else { &id };
                assert_eq!(
                    Some(n.parse::<usize>().unwrap()),
                    stored.get(&(owner.clone(), key)).copied(),
                    "{key} of {}",
                    span.name
                );
                lengths += 1;
            }
        }
    }
    assert!(lengths >= 8, "every failure has its length: {lengths}");
    let policy = steps
        .iter()
        .find(|s| attr(s, "agentrt.policy.outcome").as_deref() == Some("deny"))
        .expect("the denied delete");
    assert!(attr(policy, "agentrt.policy.reason_bytes").is_some());
    assert!(attr(policy, "agentrt.policy.reason").is_none());
    // The failed run: its reason, not its detail.
    let run = spans
        .iter()
        .find(|s| attr(s, "agentrt.run.id").as_deref() == Some("r1") && s.name == "agentrt.run")
        .unwrap();
    assert_eq!(
        run.status,
        Status::Error {
            description: "tool_abort".into()
        }
    );
    assert!(attr(run, "agentrt.run.detail").is_none());
    // The lost write: its tool span says interrupted; the approval it
    // paused on gives the length of its reason (which quotes the tool).
    let write = spans
        .iter()
        .find(|s| s.name == "agentrt.tool" && attr(s, "agentrt.run.id").as_deref() == Some("r2"))
        .unwrap();
    assert_eq!(
        attr(write, "agentrt.tool.status").as_deref(),
        Some("interrupted")
    );
    assert_eq!(
        write.status,
        Status::Error {
            description: "interrupted".into()
        }
    );
    let approval = spans.iter().find(|s| s.name == "agentrt.approval").unwrap();
    assert!(attr(approval, "agentrt.approval.reason_bytes").is_some());
    assert!(attr(approval, "agentrt.approval.reason").is_none());

    // With content, the texts are there (bounded, sanitized).
    let with = spans_of(&db, true);
    let all: Vec<String> = with.iter().flat_map(texts_of).collect();
    for key in [
        "agentrt.tool.error",
        "agentrt.step.detail",
        "agentrt.run.detail",
        "agentrt.policy.reason",
        "agentrt.approval.reason",
    ] {
        assert!(
            with.iter()
                .filter_map(|s| attr(s, key))
                .any(|v| v.contains(SECRET)),
            "{key} holds the text with content"
        );
    }
    assert!(all.iter().any(|t| t.contains(&format!("{SECRET}_tool"))));
}

/// The OTLP/HTTP requests the binary sends for `db`, with or without
/// `--content`, to an endpoint on 127.0.0.1 that keeps their bodies.
fn sent(db: &Path, cursor: &Path, content: bool) -> Vec<Vec<u8>> {
    let bodies: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let sink = Arc::clone(&bodies);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = runtime.block_on(async move {
        let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
            let sink = Arc::clone(&sink);
            async move {
                sink.lock().unwrap().push(body.to_vec());
                ""
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentrt-export-otel"));
    command
        .arg("--db")
        .arg(db)
        .arg("--cursor")
        .arg(cursor)
        .arg("--once")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stdin(Stdio::null());
    if content {
        command.arg("--content");
    }
    assert!(command.status().unwrap().success());
    drop(runtime);
    let bodies = bodies.lock().unwrap().clone();
    assert!(!bodies.is_empty(), "something was sent");
    bodies
}

fn proto_attr(span: &ProtoSpan, key: &str) -> Option<any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone())
        .and_then(|v| v.value)
}

#[test]
fn the_exporter_sends_a_failures_kind_and_length_and_its_text_only_with_content() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    record_failures(&db);

    let plain = sent(&db, &dir.path().join("plain.cursor"), false);
    let contains = |bodies: &[Vec<u8>], needle: &str| {
        bodies
            .iter()
            .any(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    };
    assert!(!contains(&plain, SECRET), "no byte of the text is sent");
    assert!(!contains(&plain, "token=abc"));
    let spans: Vec<ProtoSpan> = plain
        .iter()
        .flat_map(|b| {
            ExportTraceServiceRequest::decode(b.as_slice())
                .unwrap()
                .resource_spans
        })
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect();
    let string = |s: &str| Some(any_value::Value::StringValue(s.to_owned()));
    for failure in ["error", "unknown_outcome", "abort"] {
        let step = spans
            .iter()
            .find(|s| {
                s.name == "agentrt.step" && proto_attr(s, "agentrt.tool.failure") == string(failure)
            })
            .unwrap_or_else(|| panic!("a step that failed with {failure}"));
        assert_eq!(
            proto_attr(step, "agentrt.step.observation"),
            string("tool_error")
        );
        assert!(matches!(
            proto_attr(step, "agentrt.tool.error_bytes"),
            Some(any_value::Value::IntValue(n)) if n > SECRET.len() as i64
        ));
        let status = step.status.as_ref().unwrap();
        assert_eq!(status.message, format!("tool_error: {failure}"));
    }

    let with = sent(&db, &dir.path().join("content.cursor"), true);
    assert!(contains(&with, SECRET), "with --content the text is sent");
}

#[test]
fn a_failed_model_attempts_error_leaves_only_as_its_status_and_length() {
    let event = |seq: i64, event_type, payload: &str| agentrt::Event {
        seq,
        run_id: "m1".into(),
        step_id: "s1".into(),
        at: format!("2026-10-01T09:00:0{seq}.000000000Z"),
        event_type,
        payload: payload.into(),
    };
    let error = format!("upstream said {SECRET}");
    let events = [
        event(1, EventType::StepStarted, r#"{"index":0}"#),
        event(
            2,
            EventType::ModelDispatched,
            r#"{"call_id":"c1","attempt":1,"model":"m"}"#,
        ),
        event(
            3,
            EventType::ModelFailed,
            &serde_json::json!({"call_id":"c1","attempt":1,"status":"ambiguous","error":error})
                .to_string(),
        ),
    ];
    let mut spans = Spans::default();
    let model = events
        .iter()
        .flat_map(|e| spans.handle(e))
        .find(|s| s.name == "agentrt.model")
        .unwrap();
    assert!(texts_of(&model).iter().all(|t| !t.contains(SECRET)));
    assert_eq!(
        attr(&model, "agentrt.model.status").as_deref(),
        Some("ambiguous")
    );
    assert_eq!(
        attr(&model, "agentrt.model.error_bytes"),
        Some(error.len().to_string())
    );
    assert_eq!(
        model.status,
        Status::Error {
            description: "ambiguous".into()
        }
    );
    let mut spans = Spans::new(SpansOptions {
        content: true,
        ..SpansOptions::default()
    });
    let model = events
        .iter()
        .flat_map(|e| spans.handle(e))
        .find(|s| s.name == "agentrt.model")
        .unwrap();
    assert_eq!(attr(&model, "agentrt.model.error"), Some(error));
}

#[test]
fn a_decision_kind_the_runtime_does_not_know_leaves_as_other() {
    let event = |seq: i64, event_type, payload: &str| agentrt::Event {
        seq,
        run_id: "k1".into(),
        step_id: "s1".into(),
        at: format!("2026-10-01T09:00:0{seq}.000000000Z"),
        event_type,
        payload: payload.into(),
    };
    let events = [
        event(1, EventType::StepStarted, r#"{"index":0}"#),
        event(
            2,
            EventType::StepDecided,
            &serde_json::json!({"kind": SECRET}).to_string(),
        ),
        event(3, EventType::StepFailed, r#"{"detail":"invalid"}"#),
    ];
    let kind_of = |content| {
        let mut spans = Spans::new(SpansOptions {
            content,
            ..SpansOptions::default()
        });
        let step = events
            .iter()
            .flat_map(|e| spans.handle(e))
            .find(|s| s.name == "agentrt.step")
            .unwrap();
        attr(&step, "agentrt.decision.kind")
    };
    assert_eq!(kind_of(false).as_deref(), Some("other"));
    assert_eq!(kind_of(true).as_deref(), Some(SECRET));
}
