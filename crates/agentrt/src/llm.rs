//! What agents send to models and get back, and what a model adapter
//! implements. Provider crates map their wire formats onto these types and
//! their transport failures onto [`ModelError`]; the accounting caller
//! (`budget`) is the only model handle an agent ever receives.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::json::Canonical;
use crate::model::{BoxFuture, Usage, is_default};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user side: the goal, tool results, nudges.
    User,
    /// The model's turns.
    Assistant,
}

/// What a content block holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockKind {
    /// Text.
    Text,
    /// A tool call the model made.
    ToolUse,
    /// A tool's result handed back.
    ToolResult,
}

/// One block of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentBlock {
    /// What the block holds.
    #[serde(rename = "type")]
    pub kind: BlockKind,
    /// Text (`text`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The tool use this result answers, or the tool use's id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool_use_id: String,
    /// The tool's name (`tool_use`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The tool's input (`tool_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Canonical>,
    /// The result's content (`tool_result`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    /// The result is a failure (`tool_result`).
    #[serde(default, skip_serializing_if = "is_default")]
    pub is_error: bool,
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock {
            kind: BlockKind::Text,
            text: text.into(),
            tool_use_id: String::new(),
            name: String::new(),
            input: None,
            content: String::new(),
            is_error: false,
        }
    }

    /// A tool use block.
    pub fn tool_use(
        id: impl Into<String>,
        name: impl Into<String>,
        input: Canonical,
    ) -> ContentBlock {
        ContentBlock {
            kind: BlockKind::ToolUse,
            tool_use_id: id.into(),
            name: name.into(),
            input: Some(input),
            ..ContentBlock::text("")
        }
    }

    /// A tool result block.
    pub fn tool_result(
        id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> ContentBlock {
        ContentBlock {
            kind: BlockKind::ToolResult,
            tool_use_id: id.into(),
            content: content.into(),
            is_error,
            ..ContentBlock::text("")
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote it.
    pub role: Role,
    /// Its blocks.
    pub content: Vec<ContentBlock>,
}

/// A tool as a model is told about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelTool {
    /// The name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its argument schema.
    pub input_schema: Canonical,
}

/// A request to a model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The system prompt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system: String,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ModelTool>,
    /// The cap on output tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
}

/// A tool call in a model's reply; the arguments are the model's raw text
/// (they may not even be JSON: the runtime records them verbatim).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolUse {
    /// The provider's id of the call.
    pub id: String,
    /// The tool named.
    pub name: String,
    /// The arguments as the model wrote them.
    pub args: String,
}

/// Why a model stopped, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It called a tool.
    ToolUse,
    /// It hit the output cap: the reply is cut off.
    MaxTokens,
    /// It refused.
    Refusal,
    /// The conversation outgrew its context window.
    ModelContextWindowExceeded,
    /// Anything else the provider said.
    #[serde(untagged)]
    Other(String),
}

/// A model's reply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// Its text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Its tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_uses: Vec<ToolUse>,
    /// Why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// What it used.
    #[serde(default)]
    pub usage: Usage,
    /// The provider's bytes, exactly as received (kept for replay and audit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// How a model call failed, as the accounting caller needs to know it:
/// adapters map their transport errors onto these variants, and the caller
/// never inspects text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// Try again later (408, 409, 425, 429, 5xx): charged nothing, retried.
    #[error("transient: {message}")]
    Transient {
        /// What the provider said.
        message: String,
        /// How long the provider asked to wait.
        retry_after: Option<Duration>,
    },
    /// The provider served an error and charged for it: charged as
    /// reported, not retried.
    #[error("served error: {message}")]
    Served {
        /// What the provider said.
        message: String,
        /// What it charged.
        usage: Usage,
    },
    /// The reply's usage is not a plausible count: charged the estimate,
    /// not retried.
    #[error("unusable usage: {message}")]
    UnusableUsage {
        /// What was wrong.
        message: String,
    },
    /// No reply in time: the outcome is unknown, charged the estimate,
    /// retried.
    #[error("timeout: {message}")]
    Timeout {
        /// Detail.
        message: String,
    },
    /// The connection broke (reset, cut body, closed): charged the
    /// estimate, retried.
    #[error("connection lost: {message}")]
    ConnectionLost {
        /// Detail.
        message: String,
    },
    /// The provider answered with an HTTP status that retrying will not
    /// change (a redirect, which is never followed, or a 4xx other than the
    /// transient ones): charged nothing, not retried.
    #[error("{message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// What the provider said (never a key).
        message: String,
    },
    /// The caller gave up while the call was in flight: charged the
    /// estimate.
    #[error("cancelled by the caller")]
    Cancelled,
    /// Anything else: charged nothing, not retried.
    #[error("{message}")]
    Other {
        /// Detail.
        message: String,
    },
}

/// A model: one request, one reply. Adapters do not retry (the accounting
/// caller does, and records every attempt).
pub trait Model: Send + Sync {
    /// The model's name, as priced and recorded.
    fn name(&self) -> &str;
    /// Sends one request.
    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_keep_unknown_texts() {
        let r: StopReason = serde_json::from_str(r#""max_tokens""#).unwrap();
        assert_eq!(r, StopReason::MaxTokens);
        let r: StopReason = serde_json::from_str(r#""pause_turn""#).unwrap();
        assert_eq!(r, StopReason::Other("pause_turn".into()));
        assert_eq!(
            serde_json::to_string(&StopReason::Other("x".into())).unwrap(),
            r#""x""#
        );
    }

    #[test]
    fn requests_serialise_with_optional_fields_omitted() {
        let req = ModelRequest {
            system: String::new(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentBlock::text("hi <you>")],
            }],
            tools: vec![],
            max_output_tokens: None,
        };
        assert_eq!(
            serde_json::to_string(&req).unwrap(),
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":"hi <you>"}]}]}"#
        );
    }
}
