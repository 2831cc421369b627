//! A run's events, in seq order, turned into finished spans.

use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentrt::{
    Event, EventType, Outcome, TerminalReason, Timestamp, model::CallStatus, model::DecisionKind,
    model::ObservationKind,
};
use opentelemetry::trace::{
    Event as SpanEvent, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use serde_json::Value;

use crate::attributes::{int_of, ours, push_text, str_of, text};
use crate::failure::{Failure, failure_status};
use crate::ids::{SpanKindName, span_id, trace_id};

/// The instrumentation scope every span names.
pub const SCOPE: &str = "agentrt-export-otel";

/// What the spans carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpansOptions {
    /// Longest text attribute, in bytes (0: 1024).
    pub max_text: usize,
    /// Export the text a model, a tool, a policy or a server chose
    /// (bounded, sanitized): tool arguments, results and errors, policy
    /// and approval reasons, model errors, step and run details, a tool
    /// name the runtime did not recognise. Off by default: they may hold
    /// secrets. Without it a failure leaves as its kind and its length in
    /// bytes only.
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
    /// The tool the open step's decision named, held back until the
    /// runtime shows it knows the tool (`step.policy`, `step.tool_started`):
    /// before that it is the model's text.
    proposed_tool: Option<String>,
    /// A tool that finished with an error, waiting for the event that says
    /// what kind of failure it was.
    failing: Option<Failing>,
}

/// A tool that finished with an error. Its kind is not in
/// `step.tool_finished`: a failed step's `step.failed`, written with the
/// finish, carries the observation; any other next event of the run means
/// the step was marked interrupted (an outcome the runtime cannot know).
#[derive(Debug)]
struct Failing {
    step_id: String,
    /// The tool's span and when it ended.
    tool: Option<(Open, SystemTime)>,
    /// The error's text, for `content` only.
    error: String,
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
        // A tool failure waits for this event to say what kind it was.
        let failing = match state.failing.take() {
            Some(f) if event.event_type == EventType::StepFailed && event.step_id == f.step_id => {
                Some(f)
            }
            Some(f) => {
                // No `step.failed` with the finish: the step was marked
                // interrupted, its outcome unknown.
                if let Some((mut tool, end)) = f.tool {
                    let kind = ObservationKind::Interrupted.as_str();
                    tool.attributes.push(ours("tool.status", "interrupted"));
                    tool.status = failure_status(content.then_some(f.error.as_str()), kind, max);
                    finished.push((tool, end));
                }
                state.interrupted = true;
                None
            }
            None => None,
        };
        match &event.event_type {
            EventType::RunCreated => {
                let mut attributes = vec![
                    ours("run.id", run_id.clone()),
                    KeyValue::new("gen_ai.operation.name", "invoke_agent"),
                ];
                // The goal is the text of whoever started the run (the
                // program, the operator), not of a model or a tool.
                if let Some(goal) = str_of(&payload, "goal") {
                    attributes.push(ours("run.goal", text(goal, max)));
                }
                // The caller an OAuth token named (the proxy's `caller.*`
                // labels): who asked, as the token's issuer says.
                let labels = payload.get("labels");
                let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
                if let Some(subject) = label("caller.subject") {
                    attributes.push(KeyValue::new("enduser.id", text(subject, max)));
                }
                if let Some(issuer) = label("caller.issuer") {
                    attributes.push(ours("caller.issuer", text(issuer, max)));
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
                state.proposed_tool = None;
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
                match event.event_type {
                    EventType::StepDecided if !content => {
                        state.proposed_tool = str_of(&payload, "tool").map(|t| text(t, max));
                    }
                    EventType::StepPolicy | EventType::StepToolStarted => {
                        // Only a request for a tool the runtime knows
                        // reaches the policy or runs.
                        if let (Some(step), Some(tool)) =
                            (state.step.as_mut(), state.proposed_tool.take())
                        {
                            step.attributes
                                .push(KeyValue::new("gen_ai.tool.name", tool));
                        }
                    }
                    _ => {}
                }
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
                    // A policy's reason may quote the request: content.
                    if let Some(reason) = str_of(&payload, "reason") {
                        push_text(&mut attributes, "approval.reason", reason, max, content);
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
                    // An operator's label, recorded as given.
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
                    if let Some(error) = error {
                        let failure = Failure::of(payload.get("observation"));
                        failure.describe(&mut span.attributes);
                        push_text(&mut span.attributes, "tool.error", error, max, content);
                        span.status =
                            failure_status(content.then_some(error), &failure.description(), max);
                    }
                    finished.push((span, at));
                } else if let Some(mut step) = state.step.take() {
                    let mut tool = state.tool.take();
                    if let Some(tool) = tool.as_mut()
                        && let Some(ms) = int_of(&payload, "duration_ms")
                    {
                        tool.attributes.push(ours("tool.duration_ms", ms));
                    }
                    describe_step(&mut step, event, &payload, max, content);
                    match error {
                        None => {
                            step.attributes.push(ours("step.status", "done"));
                            step.attributes.push(ours("step.end", "step.tool_finished"));
                            finished.extend(tool.map(|t| (t, at)));
                            finished.push((step, at));
                        }
                        Some(error) => {
                            // The tool's error is its text: its length
                            // always, the text only with `content`. The
                            // step stays open for the event that says what
                            // kind of failure it was.
                            if let Some(tool) = tool.as_mut() {
                                push_text(&mut tool.attributes, "tool.error", error, max, content);
                            }
                            push_text(&mut step.attributes, "tool.error", error, max, content);
                            state.step = Some(step);
                            state.failing = Some(Failing {
                                step_id: event.step_id.clone(),
                                tool: tool.map(|t| (t, at)),
                                error: if content {
                                    error.to_owned()
                                } else {
                                    String::new()
                                },
                            });
                        }
                    }
                }
            }
            EventType::StepFailed => {
                let failure = Failure::of(payload.get("observation"));
                match failing {
                    Some(Failing {
                        tool: Some((mut tool, end)),
                        error,
                        ..
                    }) => {
                        tool.attributes.push(ours("tool.status", "failed"));
                        failure.describe(&mut tool.attributes);
                        tool.status = failure_status(
                            content.then_some(error.as_str()),
                            &failure.description(),
                            max,
                        );
                        finished.push((tool, end));
                    }
                    _ => {
                        if let Some(tool) = state.tool.take() {
                            finished.push((end_tool(tool, "failed"), at));
                        }
                    }
                }
                if let Some(mut step) = state.step.take() {
                    // The detail is the observation's summary: a tool's
                    // error, a policy's reason, what was wrong with the
                    // model's request.
                    let detail = str_of(&payload, "detail").unwrap_or_default();
                    step.attributes.push(ours("step.status", "failed"));
                    step.attributes.push(ours("step.end", "step.failed"));
                    failure.describe(&mut step.attributes);
                    push_text(&mut step.attributes, "step.detail", detail, max, content);
                    step.status =
                        failure_status(content.then_some(detail), &failure.description(), max);
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
                    let status = str_of(&payload, "status").and_then(CallStatus::parse);
                    if let Some(status) = status {
                        span.attributes.push(ours("model.status", status.as_str()));
                    }
                    if event.event_type == EventType::ModelFailed {
                        // The provider's error: a server's text.
                        let error = str_of(&payload, "error").filter(|e| !e.is_empty());
                        if let Some(error) = error {
                            push_text(&mut span.attributes, "model.error", error, max, content);
                        }
                        let kind = status.map_or("error", |s| s.as_str());
                        span.status = failure_status(error.filter(|_| content), kind, max);
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
                    let reason = str_of(&payload, "reason").and_then(TerminalReason::parse);
                    if let Some(reason) = reason {
                        run.attributes.push(ours("run.reason", reason.as_str()));
                    }
                    // Who ended it: an operator's label, recorded as given.
                    if let Some(by) = str_of(&payload, "by") {
                        run.attributes.push(ours("run.by", text(by, max)));
                    }
                    // The detail may be a tool's abort text, the model's
                    // reason for giving up, a result: content.
                    let detail = str_of(&payload, "detail");
                    if let Some(detail) = detail {
                        push_text(&mut run.attributes, "run.detail", detail, max, content);
                    }
                    if let Some(steps) = int_of(&payload, "steps") {
                        run.attributes.push(ours("run.steps", steps));
                    }
                    run.status = match status {
                        "COMPLETED" => Status::Ok,
                        "FAILED" => failure_status(
                            detail.filter(|d| content && !d.is_empty()),
                            reason.map_or("failed", |r| r.as_str()),
                            max,
                        ),
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
            // A kind the runtime does not know is the model's text.
            match str_of(payload, "kind").map(DecisionKind::from_text) {
                Some(DecisionKind::Other(kind)) if content => {
                    step.attributes
                        .push(ours("decision.kind", text(&kind, max)));
                }
                Some(DecisionKind::Other(_)) => {
                    step.attributes.push(ours("decision.kind", "other"))
                }
                Some(kind) => step
                    .attributes
                    .push(ours("decision.kind", kind.as_str().to_owned())),
                None => {}
            }
            if let Some(tool) = str_of(payload, "tool") {
                step.attributes
                    .push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
                // The model's text until the runtime knows the tool (see
                // `RunState::proposed_tool`).
                if content {
                    step.attributes
                        .push(KeyValue::new("gen_ai.tool.name", text(tool, max)));
                }
            }
            if content && let Some(args) = payload.get("args") {
                step.attributes
                    .push(ours("decision.args", text(&args.to_string(), max)));
            }
        }
        EventType::StepPolicy => {
            if let Some(outcome) = str_of(payload, "outcome").and_then(Outcome::parse) {
                step.attributes
                    .push(ours("policy.outcome", outcome.as_str()));
            }
            // The policy's labels (its author's words, like a tool's name);
            // its reason may quote the request, so it is content.
            for (key, name) in [
                ("kind", "policy.kind"),
                ("policy_id", "policy.id"),
                ("spec_hash", "policy.spec_hash"),
            ] {
                if let Some(v) = str_of(payload, key) {
                    step.attributes.push(ours(name, text(v, max)));
                }
            }
            if let Some(reason) = str_of(payload, "reason") {
                push_text(&mut step.attributes, "policy.reason", reason, max, content);
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
