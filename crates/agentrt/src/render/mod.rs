//! What a model agent shows its model, and how it reads the reply (design
//! §18; control 74).
//!
//! [`request`] turns a [`StepInput`] into a [`ModelRequest`]; [`decide`]
//! turns the model's [`ModelResponse`](crate::ModelResponse) into a
//! [`Decision`](crate::Decision). A model agent is `render::request` →
//! [`Model::generate`](crate::Model::generate) → `render::decide`.
//!
//! # The conversation
//!
//! 1. One user turn with the opening text ([`RenderOptions::new`]'s
//!    required hook; usually the goal).
//! 2. For each earlier step that has a decision, in index order (steps
//!    without a decision are skipped and not counted):
//!    - an assistant turn: for a tool call, the reason (if any) as text
//!      and a `tool_use` block with id `step_<index>` and the canonical
//!      arguments (`{}` when absent); for any other decision, the reason,
//!      or [`ASSISTANT_PLACEHOLDER`] when it has none;
//!    - a user turn: for a tool call, a `tool_result` block answering that
//!      id, with `is_error` set when the observation is a failure (or the
//!      step was interrupted). Its
//!      content is the observation's content when the step is among the
//!      last [`RenderOptions::recent_results`] rendered steps and the
//!      content is at most [`RenderOptions::max_content_bytes`] bytes,
//!      otherwise [`SUMMARY_PREFIX`] and the summary; an interrupted step
//!      (or one without an observation) gets [`INTERRUPTED_TEXT`]. A call
//!      an operator edited before approving it starts with
//!      [`OPERATOR_EDIT_PREFIX`] and the arguments it ran with. For any
//!      other decision, a text nudge ([`nudge`]).
//!
//! Every fixed text is a `pub const` pinned by a test: replay keys hash the
//! rendered request, so changing a word invalidates every recording.
//!
//! Three hooks replace parts of the default rendering; each may return
//! `None` to fall back to the default: the tool-use id
//! ([`RenderOptions::with_tool_use_id`]), the assistant turn
//! ([`RenderOptions::with_assistant_turn`]) and the observation turn
//! ([`RenderOptions::with_observation`]). The defaults are public
//! ([`default_tool_use_id`], [`default_assistant_turn`],
//! [`default_observation`]) so a hook can wrap them.
//!
//! ```
//! use agentrt::render::{self, RenderOptions};
//! use agentrt::{ModelResponse, llm::StopReason, llm::ToolUse, Usage, model::DecisionKind};
//!
//! let opts = RenderOptions::new(|input| format!("Goal: {}", input.run.goal))
//!     .with_system("You are careful.");
//! # let _ = opts;
//! let reply = ModelResponse {
//!     text: " Reading first. ".into(),
//!     tool_uses: vec![ToolUse { id: "t1".into(), name: "fs_read".into(), args: r#"{"path":"a"}"#.into() }],
//!     stop_reason: Some(StopReason::ToolUse),
//!     usage: Usage::default(),
//!     raw: None,
//! };
//! let d = render::decide(&reply);
//! assert_eq!(d.kind, DecisionKind::ToolCall);
//! assert_eq!((d.tool.as_str(), d.reason.as_str(), d.origin.as_str()), ("fs_read", "Reading first.", "model"));
//! assert_eq!(d.args.as_deref(), Some(br#"{"path":"a"}"#.as_slice()));
//! ```

mod decide;

pub use decide::{
    CONTEXT_WINDOW_MESSAGE, NAME_BYTES, REASON_BYTES, REFUSAL_MESSAGE, decide, extra_calls_note,
    truncated_calls_note,
};

use std::fmt;
use std::sync::Arc;

use crate::agent::StepInput;
use crate::llm::{ContentBlock, Message, ModelRequest, ModelTool, Role};
use crate::model::{DecisionKind, ObservationKind, RecordedDecision, Step, StepStatus, ToolSpec};

/// How many of the last rendered steps show their full content by default.
pub const DEFAULT_RECENT_RESULTS: usize = 6;

/// The largest content shown in full by default, in bytes.
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 24_000;

/// Starts a result shown by its summary (outside the recent window, or
/// content too large).
pub const SUMMARY_PREFIX: &str = "[summary] ";

/// Starts the result of a call an operator edited before approving it:
/// the arguments it ran with follow, then (after [`OPERATOR_EDIT_NOTE`])
/// the operator's note when there is one, then a new line and the result.
pub const OPERATOR_EDIT_PREFIX: &str = "[operator edit] An operator changed this call before it ran. It ran with these arguments instead of yours: ";

/// Introduces the operator's note in an edited call's result.
pub const OPERATOR_EDIT_NOTE: &str = " Their note: ";

/// Stands in for an empty summary after [`SUMMARY_PREFIX`] or in a nudge.
pub const EMPTY_SUMMARY: &str = "(no summary)";

/// The result of an interrupted step (or one with no observation).
pub const INTERRUPTED_TEXT: &str = "[interrupted] The outcome of this call is unknown: it was cut short before its result was recorded. Check the current state, and call the tool again if it is still needed.";

/// The assistant turn of a decision that is not a tool call and has no
/// reason.
pub const ASSISTANT_PLACEHOLDER: &str = "(no text)";

/// The nudge after a reply without a tool call (`no_tool_call`).
pub const NUDGE_NO_TOOL_CALL: &str =
    "Your last reply did not call a tool, so nothing was done. Reply with exactly one tool call.";

/// The nudge after a reply cut off at the output cap (`truncated`).
pub const NUDGE_TRUNCATED: &str = "Your last reply was cut off at the output limit, so nothing was done. Reply with exactly one tool call, and keep it shorter.";

/// Starts the nudge after any other decision that was not acted on; the
/// step's summary follows.
pub const NUDGE_GENERIC: &str = "Your last reply could not be acted on: ";

/// Makes the opening user text of a conversation.
pub type OpeningHook = Arc<dyn Fn(&StepInput) -> String + Send + Sync>;

/// Chooses the tool-use id of a step (`None`: the default `step_<index>`).
pub type ToolUseIdHook = Arc<dyn Fn(&Step) -> Option<String> + Send + Sync>;

/// Renders one turn of a step (`None`: the default turn).
pub type TurnHook = Arc<dyn Fn(&RenderedStep<'_>) -> Option<Message> + Send + Sync>;

/// How [`messages`] and [`request`] render a conversation.
#[derive(Clone)]
pub struct RenderOptions {
    /// The opening user text (required).
    pub opening: OpeningHook,
    /// The system prompt (empty: none).
    pub system: String,
    /// How many of the last rendered steps show their content
    /// ([`DEFAULT_RECENT_RESULTS`]).
    pub recent_results: usize,
    /// The largest content shown in full, in bytes
    /// ([`DEFAULT_MAX_CONTENT_BYTES`]).
    pub max_content_bytes: usize,
    /// The output cap sent with the request.
    pub max_output_tokens: Option<u64>,
    /// Replaces the default tool-use id.
    pub tool_use_id: Option<ToolUseIdHook>,
    /// Replaces the default assistant turn.
    pub assistant_turn: Option<TurnHook>,
    /// Replaces the default observation turn.
    pub observation: Option<TurnHook>,
}

impl fmt::Debug for RenderOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RenderOptions")
            .field("system", &self.system)
            .field("recent_results", &self.recent_results)
            .field("max_content_bytes", &self.max_content_bytes)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("tool_use_id", &self.tool_use_id.is_some())
            .field("assistant_turn", &self.assistant_turn.is_some())
            .field("observation", &self.observation.is_some())
            .finish_non_exhaustive()
    }
}

impl RenderOptions {
    /// Options with the opening hook and every default.
    pub fn new(opening: impl Fn(&StepInput) -> String + Send + Sync + 'static) -> RenderOptions {
        RenderOptions {
            opening: Arc::new(opening),
            system: String::new(),
            recent_results: DEFAULT_RECENT_RESULTS,
            max_content_bytes: DEFAULT_MAX_CONTENT_BYTES,
            max_output_tokens: None,
            tool_use_id: None,
            assistant_turn: None,
            observation: None,
        }
    }

    /// Sets the system prompt.
    #[must_use]
    pub fn with_system(mut self, system: impl Into<String>) -> RenderOptions {
        self.system = system.into();
        self
    }

    /// Sets how many of the last rendered steps show their content.
    #[must_use]
    pub fn with_recent_results(mut self, n: usize) -> RenderOptions {
        self.recent_results = n;
        self
    }

    /// Sets the largest content shown in full, in bytes.
    #[must_use]
    pub fn with_max_content_bytes(mut self, n: usize) -> RenderOptions {
        self.max_content_bytes = n;
        self
    }

    /// Sets the output cap sent with each request.
    #[must_use]
    pub fn with_max_output_tokens(mut self, n: u64) -> RenderOptions {
        self.max_output_tokens = Some(n);
        self
    }

    /// Sets the tool-use id hook.
    #[must_use]
    pub fn with_tool_use_id(
        mut self,
        hook: impl Fn(&Step) -> Option<String> + Send + Sync + 'static,
    ) -> RenderOptions {
        self.tool_use_id = Some(Arc::new(hook));
        self
    }

    /// Sets the assistant-turn hook.
    #[must_use]
    pub fn with_assistant_turn(
        mut self,
        hook: impl Fn(&RenderedStep<'_>) -> Option<Message> + Send + Sync + 'static,
    ) -> RenderOptions {
        self.assistant_turn = Some(Arc::new(hook));
        self
    }

    /// Sets the observation-turn hook.
    #[must_use]
    pub fn with_observation(
        mut self,
        hook: impl Fn(&RenderedStep<'_>) -> Option<Message> + Send + Sync + 'static,
    ) -> RenderOptions {
        self.observation = Some(Arc::new(hook));
        self
    }
}

/// A step being rendered, as the turn hooks see it.
#[derive(Debug, Clone, Copy)]
pub struct RenderedStep<'a> {
    /// The step.
    pub step: &'a Step,
    /// Its decision.
    pub decision: &'a RecordedDecision,
    /// The tool-use id chosen for it.
    pub tool_use_id: &'a str,
    /// It is among the last `recent_results` rendered steps.
    pub recent: bool,
    /// The largest content shown in full, in bytes.
    pub max_content_bytes: usize,
}

/// The whole request for the step described by `input`: system prompt,
/// [`messages`], [`tools`] and the output cap.
#[must_use]
pub fn request(input: &StepInput, opts: &RenderOptions) -> ModelRequest {
    ModelRequest {
        system: opts.system.clone(),
        messages: messages(input, opts),
        tools: tools(&input.tools),
        max_output_tokens: opts.max_output_tokens,
    }
}

/// The tools as a model is told about them, in the input's order.
#[must_use]
pub fn tools(specs: &[ToolSpec]) -> Vec<ModelTool> {
    specs
        .iter()
        .map(|spec| ModelTool {
            name: spec.name.clone(),
            description: spec.description.clone(),
            input_schema: spec.input_schema.clone(),
        })
        .collect()
}

/// The conversation for the step described by `input` (see the
/// [module docs](self)).
#[must_use]
pub fn messages(input: &StepInput, opts: &RenderOptions) -> Vec<Message> {
    let rendered: Vec<(&Step, &RecordedDecision)> = input
        .steps
        .iter()
        .filter_map(|step| step.decision.as_ref().map(|d| (step.as_ref(), d)))
        .collect();
    let window_start = rendered.len().saturating_sub(opts.recent_results);
    let mut out = Vec::with_capacity(1 + 2 * rendered.len());
    out.push(user_text((opts.opening)(input)));
    for (position, (step, decision)) in rendered.into_iter().enumerate() {
        let id = tool_use_id(step, opts);
        let view = RenderedStep {
            step,
            decision,
            tool_use_id: &id,
            recent: position >= window_start,
            max_content_bytes: opts.max_content_bytes,
        };
        out.push(hooked(
            opts.assistant_turn.as_ref(),
            &view,
            default_assistant_turn,
        ));
        out.push(hooked(
            opts.observation.as_ref(),
            &view,
            default_observation,
        ));
    }
    out
}

/// The hook's turn, or the default when there is no hook or it declines.
fn hooked(
    hook: Option<&TurnHook>,
    view: &RenderedStep<'_>,
    default: fn(&RenderedStep<'_>) -> Message,
) -> Message {
    hook.and_then(|h| h(view)).unwrap_or_else(|| default(view))
}

/// The tool-use id of `step`: the hook's, or [`default_tool_use_id`].
fn tool_use_id(step: &Step, opts: &RenderOptions) -> String {
    opts.tool_use_id
        .as_ref()
        .and_then(|h| h(step))
        .unwrap_or_else(|| default_tool_use_id(step))
}

/// The default tool-use id of a step: `step_<index>` (the step's own
/// index, so ids stay stable when decision-less steps are skipped).
#[must_use]
pub fn default_tool_use_id(step: &Step) -> String {
    format!("step_{}", step.index)
}

/// The default assistant turn of a step (see the [module docs](self)).
#[must_use]
pub fn default_assistant_turn(view: &RenderedStep<'_>) -> Message {
    let d = view.decision;
    let mut content = Vec::with_capacity(2);
    if d.kind == DecisionKind::ToolCall {
        if !d.reason.is_empty() {
            content.push(ContentBlock::text(d.reason.clone()));
        }
        content.push(ContentBlock::tool_use(
            view.tool_use_id,
            d.tool.clone(),
            d.args_or_empty(),
        ));
    } else if d.reason.is_empty() {
        content.push(ContentBlock::text(ASSISTANT_PLACEHOLDER));
    } else {
        content.push(ContentBlock::text(d.reason.clone()));
    }
    Message {
        role: Role::Assistant,
        content,
    }
}

/// The default observation turn of a step (see the [module docs](self)).
#[must_use]
pub fn default_observation(view: &RenderedStep<'_>) -> Message {
    if view.decision.kind != DecisionKind::ToolCall {
        let summary = view.step.observation.as_ref().map(|o| o.summary.as_str());
        return user_text(nudge(&view.decision.kind, summary.unwrap_or_default()));
    }
    let (content, is_error) = result(view);
    Message {
        role: Role::User,
        content: vec![ContentBlock::tool_result(
            view.tool_use_id,
            content,
            is_error,
        )],
    }
}

/// The `tool_result` content of a tool-call step and whether it is an
/// error: an interrupted step (or one without an observation) is always
/// one, whatever it recorded.
fn result(view: &RenderedStep<'_>) -> (String, bool) {
    let Some(observation) = view.step.observation.as_ref() else {
        return (INTERRUPTED_TEXT.to_owned(), true);
    };
    if view.step.status == StepStatus::Interrupted
        || observation.kind == ObservationKind::Interrupted
    {
        return (INTERRUPTED_TEXT.to_owned(), true);
    }
    let text = match &observation.content {
        Some(content) if view.recent && content.as_str().len() <= view.max_content_bytes => {
            content.as_str().to_owned()
        }
        _ => summary_text(&observation.summary),
    };
    let text = match &observation.operator_edit {
        None => text,
        Some(edit) => edited_text(edit, &text),
    };
    (text, observation.is_failure())
}

/// An edited call's result: [`OPERATOR_EDIT_PREFIX`], the arguments it ran
/// with, the note (if any), a new line, then `result`.
fn edited_text(edit: &crate::model::OperatorEdit, result: &str) -> String {
    let mut out = String::with_capacity(
        OPERATOR_EDIT_PREFIX.len() + edit.args.as_str().len() + edit.note.len() + result.len() + 32,
    );
    out.push_str(OPERATOR_EDIT_PREFIX);
    out.push_str(edit.args.as_str());
    if !edit.note.is_empty() {
        out.push_str(OPERATOR_EDIT_NOTE);
        out.push_str(&edit.note);
    }
    out.push('\n');
    out.push_str(result);
    out
}

/// [`SUMMARY_PREFIX`] and the summary ([`EMPTY_SUMMARY`] when empty).
///
/// ```
/// use agentrt::render::summary_text;
/// assert_eq!(summary_text("read 3 lines"), "[summary] read 3 lines");
/// assert_eq!(summary_text(""), "[summary] (no summary)");
/// ```
#[must_use]
pub fn summary_text(summary: &str) -> String {
    format!("{SUMMARY_PREFIX}{}", or_empty(summary))
}

/// The user turn after a decision that is not a tool call, keyed on its
/// kind: [`NUDGE_NO_TOOL_CALL`], [`NUDGE_TRUNCATED`], or [`NUDGE_GENERIC`]
/// followed by the step's summary.
///
/// ```
/// use agentrt::model::DecisionKind;
/// use agentrt::render::{NUDGE_TRUNCATED, nudge};
/// assert_eq!(nudge(&DecisionKind::Truncated, "ignored"), NUDGE_TRUNCATED);
/// assert_eq!(
///     nudge(&DecisionKind::Complete, "the result is not JSON"),
///     "Your last reply could not be acted on: the result is not JSON"
/// );
/// ```
#[must_use]
pub fn nudge(kind: &DecisionKind, summary: &str) -> String {
    match kind {
        DecisionKind::NoToolCall => NUDGE_NO_TOOL_CALL.to_owned(),
        DecisionKind::Truncated => NUDGE_TRUNCATED.to_owned(),
        _ => format!("{NUDGE_GENERIC}{}", or_empty(summary)),
    }
}

/// `summary`, or [`EMPTY_SUMMARY`] when it is empty.
fn or_empty(summary: &str) -> &str {
    if summary.is_empty() {
        EMPTY_SUMMARY
    } else {
        summary
    }
}

/// A user turn of one text block.
fn user_text(text: String) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::text(text)],
    }
}
