//! A run's events, in seq order, turned into finished spans.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentrt::{Event, EventType, Timestamp};
use opentelemetry::trace::{
    Event as SpanEvent, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;

use crate::attributes::{int_of, ours, str_of, text};
use crate::ids::{SpanKindName, span_id, trace_id};

/// The instrumentation scope every span names.
pub const SCOPE: &str = "agentrt-export-otel";

/// What the spans carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpansOptions {
    /// Longest text attribute, in bytes (0: 1024).
    pub max_text: usize,
    /// Export tool arguments and results (bounded, sanitized). Off by
    /// default: they may hold secrets.
    pub content: bool,
}

impl Default for SpansOptions {
    fn default() -> SpansOptions {
        SpansOptions {
            max_text: 1024,
            content: false,
        }
    }
}

/// A span being built.
#[derive(Debug, Clone)]
struct Open {
    name: &'static str,
    kind: SpanKind,
    id: SpanId,
    parent: SpanId,
    start: SystemTime,
    attributes: Vec<KeyValue>,
    events: Vec<SpanEvent>,
    status: Status,
}

/// What is open of one run.
#[derive(Debug, Default)]
struct RunState {
    run: Option<Open>,
    step: Option<Open>,
    /// The open step's tool execution.
    tool: Option<Open>,
    /// Whether the open step was interrupted.
    interrupted: bool,
    models: HashMap<String, Open>,
    approvals: HashMap<String, Open>,
}

/// Turns events into spans. One `Spans` must see each run's events in seq
/// order; runs may interleave.
#[derive(Debug)]
pub struct Spans {
    options: SpansOptions,
    runs: HashMap<String, RunState>,
    /// Named by every span; built once.
    scope: InstrumentationScope,
}

impl Default for Spans {
    fn default() -> Spans {
        Spans::new(SpansOptions::default())
    }
}

fn time_of(event: &Event) -> SystemTime {
    let nanos = Timestamp::parse(&event.at)
        .map(|t| t.as_unix_nanos())
        .unwrap_or(0);
    match u64::try_from(nanos) {
        Ok(n) => UNIX_EPOCH + Duration::from_nanos(n),
        Err(_) => UNIX_EPOCH,
    }
}

impl Spans {
    /// A span maker with `options`.
    pub fn new(mut options: SpansOptions) -> Spans {
        if options.max_text == 0 {
            options.max_text = 1024;
        }
        Spans {
            options,
            runs: HashMap::new(),
            scope: InstrumentationScope::builder(SCOPE).build(),
        }
    }

    /// Whether it holds anything of run `run_id` (a run it has seen begin
    /// and not yet end).
    pub fn knows(&self, run_id: &str) -> bool {
        self.runs.contains_key(run_id)
    }

    /// The spans `event` finishes (none while they are still open).
    pub fn handle(&mut self, event: &Event) -> Vec<SpanData> {
        let payload: Value = serde_json::from_str(&event.payload).unwrap_or(Value::Null);
        let at = time_of(event);
        let run_id = event.run_id.clone();
        let mut done = Vec::new();
        let state = self.runs.entry(run_id.clone()).or_default();
        let open = |name, kind, span: SpanKindName, id: &str, parent, attributes| Open {
            name,
            kind,
            id: span_id(span, id),
            parent,
            start: at,
            attributes,
            events: Vec::new(),
            status: Status::Unset,
        };
        let run_span = span_id(SpanKindName::Run, &run_id);
        let mut finished: Vec<(Open, SystemTime)> = Vec::new();
        let max = self.options.max_text;
        let content = self.options.content;
        match &event.event_type {
            EventType::RunCreated => {
                let mut attributes = vec![
                    ours("run.id", run_id.clone()),
                    KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                ];
                if let Some(goal) = str_of(&payload, "goal") {
                    attributes.push(ours("run.goal", text(goal, max)));
                }
                state.run = Some(open(
                    "agentrt.run",
                    SpanKind::Internal,
                    SpanKindName::Run,
                    &run_id,
                    SpanId::INVALID,
                    attributes,
                ));
            }
            EventType::StepStarted => {
                if let Some(tool) = state.tool.take() {
                    finished.push((end_tool(tool, "unknown"), at));
                }
                if let Some(step) = state.step.take() {
                    finished.push((end_step(step, state.interrupted, "step.started"), at));
                }
                state.interrupted = false;
                let mut attributes = vec![
                    ours("run.id", run_id.clone()),
                    ours("step.id", event.step_id.clone()),
                ];
                if let Some(index) = int_of(&payload, "index") {
                    attributes.push(ours("step.index", index));
                }
                state.step = Some(open(
                    "agentrt.step",
                    SpanKind::Internal,
                    SpanKindName::Step,
                    &event.step_id,
                    run_span,
                    attributes,
                ));
            }
            EventType::StepDecided
            | EventType::StepPolicy
            | EventType::StepToolStarted
            | EventType::StepInterrupted
            | EventType::ApprovalRequested => {
                if let Some(step) = state.step.as_mut() {
                    step.events.push(span_event(event, at));
                    describe_step(step, event, &payload, max, content);
                    if event.event_type == EventType::StepInterrupted {
                        state.interrupted = true;
                        if let Some(tool) = state.tool.take() {
                            finished.push((end_tool(tool, "interrupted"), at));
                        }
                    }
                }
                if event.event_type == EventType::StepToolStarted {
                    if let Some(tool) = state.tool.take() {
                        finished.push((end_tool(tool, "unknown"), at));
                    }
                    let parent = state.step.as_ref().map_or(run_span, |s| s.id);
                    let mut attributes = vec![
                        ours("run.id", run_id.clone()),
                        ours("step.id", event.step_id.clone()),
                        KeyValue::new("gen_ai.operation.name", "execute_tool"),
                    ];
                    if let Some(name) = str_of(&payload, "tool") {
                        attributes.push(KeyValue::new("gen_ai.tool.name", text(name, max)));
                    }
                    if let Some(approval) = str_of(&payload, "approval_id") {
                        attributes.push(ours("approval.id", approval.to_owned()));
                    }
                    state.tool = Some(open(
                        "agentrt.tool",
                        SpanKind::Internal,
                        SpanKindName::Tool,
                        &format!("{}#{}", event.step_id, event.seq),
                        parent,
                        attributes,
                    ));
                }
                if event.event_type == EventType::ApprovalRequested
                    && let Some(id) = str_of(&payload, "approval_id")
                {
                    let parent = state.step.as_ref().map_or(run_span, |s| s.id);
                    let mut attributes = vec![
                        ours("run.id", run_id.clone()),
                        ours("step.id", event.step_id.clone()),
                        ours("approval.id", id.to_owned()),
                    ];
                    for key in ["kind", "hash"] {
                        if let Some(v) = str_of(&payload, key) {
                            attributes.push(ours(&format!("approval.{key}"), v.to_owned()));
                        }
                    }
                    if let Some(reason) = str_of(&payload, "reason") {
                        attributes.push(ours("approval.reason", text(reason, max)));
                    }
                    let span = open(
                        "agentrt.approval",
                        SpanKind::Internal,
                        SpanKindName::Approval,
                        id,
                        parent,
                        attributes,
                    );
                    state.approvals.insert(id.to_owned(), span);
                }
            }
            EventType::ApprovalDecided => {
                if let Some(id) = str_of(&payload, "approval_id")
                    && let Some(mut span) = state.approvals.remove(id)
                {
                    if let Some(status) = str_of(&payload, "status") {
                        span.attributes
                            .push(ours("approval.status", status.to_owned()));
                    }
                    if let Some(by) = str_of(&payload, "by") {
                        span.attributes.push(ours("approval.by", text(by, max)));
                    }
                    finished.push((span, at));
                }
            }
            EventType::StepToolFinished => {
                let late = payload
                    .get("late")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let error = str_of(&payload, "error");
                if late {
                    let duration = int_of(&payload, "duration_ms").unwrap_or(0).max(0) as u64;
                    let mut span = open(
                        "agentrt.tool.late",
                        SpanKind::Internal,
                        SpanKindName::Late,
                        &event.seq.to_string(),
                        state
                            .step
                            .as_ref()
                            .map_or(span_id(SpanKindName::Step, &event.step_id), |s| s.id),
                        vec![
                            ours("run.id", run_id.clone()),
                            ours("step.id", event.step_id.clone()),
                        ],
                    );
                    span.start = at
                        .checked_sub(Duration::from_millis(duration))
                        .unwrap_or(at);
                    finished.push((span, at));
                } else if let Some(mut step) = state.step.take() {
                    if let Some(mut tool) = state.tool.take() {
                        if let Some(ms) = int_of(&payload, "duration_ms") {
                            tool.attributes.push(ours("tool.duration_ms", ms));
                        }
                        if let Some(error) = error {
                            tool.status = Status::Error {
                                description: Cow::Owned(text(error, max)),
                            };
                        }
                        finished.push((tool, at));
                    }
                    describe_step(&mut step, event, &payload, max, content);
                    let status = if error.is_some() { "failed" } else { "done" };
                    if let Some(error) = error {
                        step.attributes.push(ours("tool.error", text(error, max)));
                        step.status = Status::Error {
                            description: Cow::Owned(text(error, max)),
                        };
                    }
                    step.attributes.push(ours("step.status", status));
                    step.attributes.push(ours("step.end", "step.tool_finished"));
                    finished.push((step, at));
                }
            }
            EventType::StepFailed => {
                if let Some(tool) = state.tool.take() {
                    finished.push((end_tool(tool, "failed"), at));
                }
                if let Some(mut step) = state.step.take() {
                    let detail = str_of(&payload, "detail").unwrap_or_default();
                    step.attributes.push(ours("step.status", "failed"));
                    step.attributes.push(ours("step.end", "step.failed"));
                    step.attributes.push(ours("step.detail", text(detail, max)));
                    step.status = Status::Error {
                        description: Cow::Owned(text(detail, max)),
                    };
                    finished.push((step, at));
                }
            }
            EventType::ModelDispatched => {
                if let Some(call) = str_of(&payload, "call_id") {
                    let parent = state.step.as_ref().map_or(run_span, |s| s.id);
                    let mut attributes = vec![
                        ours("run.id", run_id.clone()),
                        ours("step.id", event.step_id.clone()),
                        KeyValue::new("gen_ai.operation.name", "chat"),
                    ];
                    if let Some(model) = str_of(&payload, "model") {
                        attributes.push(KeyValue::new("gen_ai.request.model", model.to_owned()));
                    }
                    if let Some(attempt) = int_of(&payload, "attempt") {
                        attributes.push(ours("model.attempt", attempt));
                    }
                    let span = open(
                        "agentrt.model",
                        SpanKind::Client,
                        SpanKindName::Model,
                        call,
                        parent,
                        attributes,
                    );
                    state.models.insert(call.to_owned(), span);
                }
            }
            EventType::ModelCompleted | EventType::ModelFailed => {
                if let Some(call) = str_of(&payload, "call_id")
                    && let Some(mut span) = state.models.remove(call)
                {
                    if let Some(usage) = payload.get("usage") {
                        for (key, name) in [
                            ("input_tokens", "gen_ai.usage.input_tokens"),
                            ("output_tokens", "gen_ai.usage.output_tokens"),
                        ] {
                            if let Some(n) = int_of(usage, key) {
                                span.attributes.push(KeyValue::new(name, n));
                            }
                        }
                    }
                    if let Some(cost) = int_of(&payload, "cost_micros") {
                        span.attributes.push(ours("model.cost_micros", cost));
                    }
                    if event.event_type == EventType::ModelFailed {
                        let error = str_of(&payload, "error").unwrap_or("model call failed");
                        span.status = Status::Error {
                            description: Cow::Owned(text(error, max)),
                        };
                    }
                    finished.push((span, at));
                }
            }
            EventType::RunFinished => {
                if let Some(tool) = state.tool.take() {
                    finished.push((end_tool(tool, "unknown"), at));
                }
                if let Some(step) = state.step.take() {
                    finished.push((end_step(step, state.interrupted, "run.finished"), at));
                }
                for (_, mut span) in state.approvals.drain() {
                    span.attributes.push(ours("approval.status", "pending"));
                    finished.push((span, at));
                }
                for (_, mut span) in state.models.drain() {
                    span.attributes.push(ours("model.status", "unknown"));
                    finished.push((span, at));
                }
                if let Some(mut run) = state.run.take() {
                    let status = str_of(&payload, "status").unwrap_or_default();
                    run.attributes.push(ours("run.status", status.to_owned()));
                    for key in ["reason", "by"] {
                        if let Some(v) = str_of(&payload, key) {
                            run.attributes
                                .push(ours(&format!("run.{key}"), v.to_owned()));
                        }
                    }
                    if let Some(detail) = str_of(&payload, "detail") {
                        run.attributes.push(ours("run.detail", text(detail, max)));
                    }
                    if let Some(steps) = int_of(&payload, "steps") {
                        run.attributes.push(ours("run.steps", steps));
                    }
                    run.status = match status {
                        "COMPLETED" => Status::Ok,
                        "FAILED" => Status::Error {
                            description: Cow::Owned(text(
                                str_of(&payload, "detail").unwrap_or("the run failed"),
                                max,
                            )),
                        },
                        _ => Status::Unset,
                    };
                    if status == "CANCELLED" {
                        let mut cancelled = span_event(event, at);
                        cancelled.name = Cow::Borrowed("run.cancelled");
                        run.events.push(cancelled);
                    }
                    finished.push((run, at));
                }
                self.runs.remove(&run_id);
            }
            _ => {
                // Run-level events (run.started, lease.taken_over,
                // limit.exceeded, loop.detected, run.resumed, and any other)
                // are events on the run span, or a zero-length span of
                // their own when no run span is open.
                match state.run.as_mut() {
                    Some(run) => run.events.push(span_event(event, at)),
                    None => finished.push((
                        open(
                            "agentrt.event",
                            SpanKind::Internal,
                            SpanKindName::Event,
                            &event.seq.to_string(),
                            run_span,
                            vec![
                                ours("run.id", run_id.clone()),
                                ours("event.type", event.event_type.as_str().to_owned()),
                            ],
                        ),
                        at,
                    )),
                }
            }
        }
        let trace = trace_id(&run_id);
        for (span, end) in finished {
            done.push(finish(span, trace, end, &self.scope));
        }
        done
    }
}

/// A step ended by something other than its own outcome.
fn end_step(mut step: Open, interrupted: bool, by: &'static str) -> Open {
    let status = if interrupted { "interrupted" } else { "ended" };
    step.attributes.push(ours("step.status", status));
    step.attributes.push(ours("step.end", by));
    step
}

/// A tool execution ended by something other than its own finish.
fn end_tool(mut tool: Open, status: &'static str) -> Open {
    tool.attributes.push(ours("tool.status", status));
    tool
}

/// What a step event tells about its step.
fn describe_step(step: &mut Open, event: &Event, payload: &Value, max: usize, content: bool) {
    match &event.event_type {
        EventType::StepDecided => {
            if let Some(kind) = str_of(payload, "kind") {
                step.attributes.push(ours("decision.kind", kind.to_owned()));
            }
            if let Some(tool) = str_of(payload, "tool") {
                step.attributes
                    .push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                step.attributes
                    .push(KeyValue::new("gen_ai.tool.name", text(tool, max)));
            }
            if content && let Some(args) = payload.get("args") {
                step.attributes
                    .push(ours("decision.args", text(&args.to_string(), max)));
            }
        }
        EventType::StepPolicy => {
            for key in ["outcome", "kind", "policy_id", "spec_hash"] {
                if let Some(v) = str_of(payload, key) {
                    let name = match key {
                        "policy_id" => "policy.id".to_owned(),
                        other => format!("policy.{other}"),
                    };
                    step.attributes.push(ours(&name, v.to_owned()));
                }
            }
            if let Some(reason) = str_of(payload, "reason") {
                step.attributes
                    .push(ours("policy.reason", text(reason, max)));
            }
        }
        EventType::StepToolStarted => {
            if let Some(tool) = str_of(payload, "tool") {
                step.attributes.push(ours("tool.name", text(tool, max)));
            }
        }
        EventType::StepToolFinished => {
            if let Some(ms) = int_of(payload, "duration_ms") {
                step.attributes.push(ours("tool.duration_ms", ms));
            }
            if let Some(hash) = str_of(payload, "content_hash") {
                step.attributes
                    .push(ours("tool.content_hash", hash.to_owned()));
            }
            if content && let Some(summary) = str_of(payload, "summary") {
                step.attributes
                    .push(ours("tool.summary", text(summary, max)));
            }
        }
        _ => {}
    }
}

fn span_event(event: &Event, at: SystemTime) -> SpanEvent {
    SpanEvent::new(
        event.event_type.as_str().to_owned(),
        at,
        vec![ours("event.seq", event.seq)],
        0,
    )
}

fn finish(
    span: Open,
    trace: opentelemetry::trace::TraceId,
    end: SystemTime,
    scope: &InstrumentationScope,
) -> SpanData {
    // Non-exhaustive: built from its default, its public field set.
    let mut events = SpanEvents::default();
    events.events = span.events;
    SpanData {
        span_context: SpanContext::new(
            trace,
            span.id,
            TraceFlags::SAMPLED,
            false,
            TraceState::default(),
        ),
        parent_span_id: span.parent,
        parent_span_is_remote: false,
        span_kind: span.kind,
        name: Cow::Borrowed(span.name),
        start_time: span.start,
        end_time: end.max(span.start),
        attributes: span.attributes,
        dropped_attributes_count: 0,
        events,
        links: SpanLinks::default(),
        status: span.status,
        instrumentation_scope: scope.clone(),
    }
}
