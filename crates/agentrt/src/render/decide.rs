//! [`decide`]: a model's reply as a decision.

use crate::llm::{ModelResponse, StopReason, ToolUse};
use crate::model::{Decision, DecisionKind, Origin};
use crate::text::truncate;

/// The longest decision reason [`decide`] writes, in bytes.
pub const REASON_BYTES: usize = 500;

/// The longest tool name a note of unexecuted calls shows, in bytes.
pub const NAME_BYTES: usize = 64;

/// The failure message of a refusal.
pub const REFUSAL_MESSAGE: &str = "the model refused";

/// The failure message of a conversation that outgrew the context window.
pub const CONTEXT_WINDOW_MESSAGE: &str = "the conversation outgrew the model's context window";

/// What separates the model's text from a note in a reason.
const NOTE_SEPARATOR: &str = "\n";

/// The decision for a model's reply, by stop reason:
///
/// | stop reason | decision |
/// |---|---|
/// | `refusal` | `fail` with [`REFUSAL_MESSAGE`] |
/// | `model_context_window_exceeded` | `fail` with [`CONTEXT_WINDOW_MESSAGE`] |
/// | `max_tokens` | `truncated` (a cut-off call is never run) |
/// | anything else, or none, without a tool use | `no_tool_call` |
/// | anything else, or none, with tool uses | `tool_call` of the first, arguments as the model wrote them |
///
/// The origin is `model`. The reason is the model's text, trimmed; when
/// calls go unexecuted (the extra calls of a tool call, every call of a
/// truncated reply) a note counting and naming them follows
/// ([`extra_calls_note`], [`truncated_calls_note`]; names cut to
/// [`NAME_BYTES`] each). The text is cut first so the note fits (keeping at
/// least half of [`REASON_BYTES`] for the text), then the composed reason
/// is cut to [`REASON_BYTES`]; no cut splits a character.
///
/// ```
/// use agentrt::render::decide;
/// use agentrt::{model::DecisionKind, ModelResponse, llm::StopReason, Usage};
/// let reply = ModelResponse {
///     text: "I cannot help with that.".into(),
///     tool_uses: vec![],
///     stop_reason: Some(StopReason::Refusal),
///     usage: Usage::default(),
///     raw: None,
/// };
/// let d = decide(&reply);
/// assert_eq!(d.kind, DecisionKind::Fail);
/// assert_eq!(d.message, "the model refused");
/// assert_eq!(d.reason, "I cannot help with that.");
/// ```
#[must_use]
pub fn decide(resp: &ModelResponse) -> Decision {
    let text = resp.text.trim();
    let decision = match resp.stop_reason {
        Some(StopReason::Refusal) => {
            Decision::fail(REFUSAL_MESSAGE).with_reason(compose(text, None))
        }
        Some(StopReason::ModelContextWindowExceeded) => {
            Decision::fail(CONTEXT_WINDOW_MESSAGE).with_reason(compose(text, None))
        }
        Some(StopReason::MaxTokens) => Decision::new(DecisionKind::Truncated)
            .with_reason(compose(text, truncated_calls_note(&resp.tool_uses))),
        _ => tool_decision(text, &resp.tool_uses),
    };
    decision.with_origin(Origin::Model)
}

/// `tool_call` of the first use, or `no_tool_call`.
fn tool_decision(text: &str, uses: &[ToolUse]) -> Decision {
    match uses.split_first() {
        None => Decision::new(DecisionKind::NoToolCall).with_reason(compose(text, None)),
        Some((first, rest)) => Decision::tool_call(first.name.clone(), first.args.as_bytes())
            .with_reason(compose(text, extra_calls_note(rest))),
    }
}

/// The note for tool calls after the first, which are not executed; `None`
/// when there are none.
///
/// ```
/// use agentrt::llm::ToolUse;
/// use agentrt::render::extra_calls_note;
/// let call = |name: &str| ToolUse { id: String::new(), name: name.into(), args: "{}".into() };
/// assert_eq!(extra_calls_note(&[]), None);
/// assert_eq!(extra_calls_note(&[call("b")]).as_deref(), Some("[1 more tool call not executed: b]"));
/// assert_eq!(
///     extra_calls_note(&[call("b"), call("c")]).as_deref(),
///     Some("[2 more tool calls not executed: b, c]")
/// );
/// ```
#[must_use]
pub fn extra_calls_note(extra: &[ToolUse]) -> Option<String> {
    (!extra.is_empty()).then(|| {
        format!(
            "[{} more {} not executed: {}]",
            extra.len(),
            calls_word(extra.len()),
            names(extra)
        )
    })
}

/// The note for the tool calls of a reply cut off at the output cap, none
/// of which is executed; `None` when there are none.
///
/// ```
/// use agentrt::llm::ToolUse;
/// use agentrt::render::truncated_calls_note;
/// let call = |name: &str| ToolUse { id: String::new(), name: name.into(), args: "{\"pa".into() };
/// assert_eq!(
///     truncated_calls_note(&[call("fs_write")]).as_deref(),
///     Some("[cut off at the output limit: 1 tool call not executed: fs_write]")
/// );
/// ```
#[must_use]
pub fn truncated_calls_note(uses: &[ToolUse]) -> Option<String> {
    (!uses.is_empty()).then(|| {
        format!(
            "[cut off at the output limit: {} {} not executed: {}]",
            uses.len(),
            calls_word(uses.len()),
            names(uses)
        )
    })
}

/// `tool call` or `tool calls`.
fn calls_word(n: usize) -> &'static str {
    if n == 1 { "tool call" } else { "tool calls" }
}

/// The names, each cut to [`NAME_BYTES`], joined by `, `.
fn names(uses: &[ToolUse]) -> String {
    uses.iter()
        .map(|u| truncate(&u.name, NAME_BYTES))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `text`, then the note on its own line, within [`REASON_BYTES`].
fn compose(text: &str, note: Option<String>) -> String {
    let Some(note) = note else {
        return truncate(text, REASON_BYTES);
    };
    if text.is_empty() {
        return truncate(&note, REASON_BYTES);
    }
    let room = REASON_BYTES
        .saturating_sub(note.len() + NOTE_SEPARATOR.len())
        .max(REASON_BYTES / 2);
    let head = truncate(text, room);
    truncate(&format!("{head}{NOTE_SEPARATOR}{note}"), REASON_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compose_keeps_the_note_when_the_text_is_long() {
        let text = "é".repeat(400);
        let reason = compose(&text, Some("[1 more tool call not executed: b]".into()));
        assert!(reason.len() <= REASON_BYTES);
        assert!(reason.ends_with("\n[1 more tool call not executed: b]"));
        assert!(reason.contains('…'));
    }

    #[test]
    fn compose_without_a_note_cuts_the_text() {
        assert_eq!(compose("short", None), "short");
        assert_eq!(compose("", None), "");
        let long = "x".repeat(600);
        assert_eq!(compose(&long, None).len(), REASON_BYTES);
    }
}
