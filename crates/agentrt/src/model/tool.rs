use serde::{Deserialize, Serialize};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::is_default;
use super::text_enum;
use crate::cancel::Cancel;
use crate::json::{Canonical, JsonError};

/// A boxed, sendable future (what tools, agents and models return).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

text_enum! {
    /// What calling a tool can do to the world. The default policy allows
    /// the first two, asks an operator for the third and denies the fourth.
    pub enum SideEffect {
        /// Reads only; safe to run again.
        ReadOnly => "read_only",
        /// Changes local state the agent owns.
        LocalMutation => "local_mutation",
        /// Changes something outside (a repository, a ticket, a message).
        RemoteMutation => "remote_mutation",
        /// Destroys data.
        Destructive => "destructive",
    }
}

/// What a tool is: name, description, JSON Schema of its arguments, side
/// effect class, timeout and whether success ends the run.
///
/// ```
/// use agentrt::{SideEffect, ToolSpec};
/// use std::time::Duration;
/// let spec = ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly)
///     .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#)
///     .unwrap()
///     .with_timeout(Duration::from_secs(5));
/// assert_eq!(spec.timeout_ms, 5000);
/// assert_eq!(spec.hash().len(), 64);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Unique name.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments, canonical.
    pub input_schema: Canonical,
    /// The side effect class.
    pub side_effect: SideEffect,
    /// How long a call may run, in milliseconds.
    pub timeout_ms: u64,
    /// Success completes the run with the tool's content as its result.
    #[serde(default, skip_serializing_if = "is_default")]
    pub terminal: bool,
}

impl ToolSpec {
    /// Timeout of a spec built with [`ToolSpec::new`].
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// A spec with schema `{"type":"object"}` and a 30 s timeout.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        side_effect: SideEffect,
    ) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: Canonical::parse_str(r#"{"type":"object"}"#)
                .unwrap_or_else(|_| Canonical::empty_object()),
            side_effect,
            timeout_ms: 30_000,
            terminal: false,
        }
    }

    /// Sets the argument schema.
    pub fn with_schema(mut self, schema: Canonical) -> ToolSpec {
        self.input_schema = schema;
        self
    }

    /// Sets the argument schema from JSON text.
    pub fn with_schema_str(self, schema: &str) -> Result<ToolSpec, JsonError> {
        Ok(self.with_schema(Canonical::parse_str(schema)?))
    }

    /// Sets the timeout (whole milliseconds).
    pub fn with_timeout(mut self, timeout: Duration) -> ToolSpec {
        self.timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self
    }

    /// Marks the tool terminal: its success completes the run.
    pub fn terminal(mut self) -> ToolSpec {
        self.terminal = true;
        self
    }

    /// The spec as canonical JSON (what its hash covers).
    pub fn to_canonical(&self) -> Result<Canonical, JsonError> {
        Canonical::from_serialize(self)
    }

    /// The spec hash: BLAKE3 of its canonical JSON (empty if it cannot be
    /// encoded, which registration refuses).
    pub fn hash(&self) -> String {
        self.to_canonical().map(|c| c.hash()).unwrap_or_default()
    }
}

/// One call of a tool.
#[derive(Debug, Clone)]
pub struct ToolCall {
    /// The run.
    pub run_id: String,
    /// The step.
    pub step_id: String,
    /// The arguments, canonical, already checked against the schema.
    pub args: Canonical,
    /// Fires when the caller cancels; a tool may stop early.
    pub cancel: Cancel,
}

impl ToolCall {
    /// Decodes the arguments into `T`.
    pub fn args_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, ToolError> {
        serde_json::from_str(self.args.as_str()).map_err(|e| ToolError::Failed {
            message: format!("arguments do not decode: {e}"),
        })
    }
}

/// What a tool returned: content (JSON bytes) and a one-line summary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The content as JSON text; content that is not acceptable JSON
    /// becomes a tool error that keeps the bytes.
    pub content: Vec<u8>,
    /// One line for people and for models beyond the recent window.
    pub summary: String,
}

impl ToolResult {
    /// Content from JSON text or bytes.
    pub fn raw(content: impl Into<Vec<u8>>) -> ToolResult {
        ToolResult {
            content: content.into(),
            summary: String::new(),
        }
    }

    /// Content serialised from a serde value.
    pub fn json<T: Serialize + ?Sized>(value: &T) -> ToolResult {
        match serde_json::to_vec(value) {
            Ok(bytes) => ToolResult::raw(bytes),
            // Unserialisable values become content the runtime refuses, so
            // the failure is recorded instead of hidden.
            Err(e) => ToolResult::raw(format!("unserialisable content: {e}")),
        }
    }

    /// Sets the summary.
    pub fn with_summary(mut self, summary: impl Into<String>) -> ToolResult {
        self.summary = summary.into();
        self
    }
}

/// How a tool call failed.
///
/// A tool tells a failure whose outcome is known ([`ToolError::Failed`]:
/// nothing happened) from one whose outcome is not
/// ([`ToolError::Unknown`]: the request went out and may have taken
/// effect). The runtime never retries an unknown outcome of a tool that is
/// not read-only: the step follows the interruption contract (an operator
/// approves a re-run, or the [`Reconcile`](crate::reconcile::Reconcile) hook settles
/// it).
///
/// ```
/// use agentrt::ToolError;
/// // The connection dropped after the request was sent: it may have landed.
/// let lost = ToolError::unknown("connection reset after the request was sent");
/// assert!(lost.is_unknown());
/// // The server refused the request: nothing happened.
/// assert!(!ToolError::failed("404 no such repository").is_unknown());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The call failed and nothing happened (a known outcome); the run
    /// continues with a tool error, and the agent may try again.
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
    },
    /// The call was made but its outcome is unknown: a timeout after the
    /// request was sent, a lost connection. A read-only tool's unknown
    /// outcome is a tool error like [`ToolError::Failed`]; any other
    /// tool's pauses the run for an operator (an `interrupted_side_effect`
    /// approval) or goes to the reconciliation hook; it is never run again
    /// without one of them.
    #[error("{message}")]
    Unknown {
        /// What is known about the call.
        message: String,
    },
    /// The call failed and the run must end (`tool_abort`).
    #[error("{detail}")]
    AbortRun {
        /// Why the run ends.
        detail: String,
    },
}

impl ToolError {
    /// A failure with this message: nothing happened.
    pub fn failed(message: impl std::fmt::Display) -> ToolError {
        ToolError::Failed {
            message: message.to_string(),
        }
    }

    /// A call whose outcome is unknown, with what is known about it.
    ///
    /// ```
    /// use agentrt::ToolError;
    /// let e = ToolError::unknown("timed out waiting for the reply");
    /// assert_eq!(e.to_string(), "timed out waiting for the reply");
    /// ```
    pub fn unknown(message: impl std::fmt::Display) -> ToolError {
        ToolError::Unknown {
            message: message.to_string(),
        }
    }

    /// An abort with this detail.
    pub fn abort(detail: impl std::fmt::Display) -> ToolError {
        ToolError::AbortRun {
            detail: detail.to_string(),
        }
    }

    /// `true` for [`ToolError::Unknown`]: the call may have taken effect.
    pub fn is_unknown(&self) -> bool {
        matches!(self, ToolError::Unknown { .. })
    }
}

/// A tool: a spec and an async call.
///
/// Implement it for a type, or build one from a closure with [`tool_fn`].
pub trait Tool: Send + Sync {
    /// The spec (read once, at registration).
    fn spec(&self) -> ToolSpec;
    /// Runs the call. The runtime applies the spec's timeout and turns a
    /// panic into a tool error; for a tool that is not read-only, a
    /// timeout, a panic and [`ToolError::Unknown`] are unknown outcomes
    /// (the call had started), which the runtime never retries on its own.
    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>>;
}

/// A [`Tool`] made of a spec and a closure; see [`tool_fn`].
pub struct FnTool<F> {
    spec: ToolSpec,
    f: F,
}

/// Builds a tool from a spec and an async closure.
///
/// ```
/// use agentrt::{SideEffect, ToolResult, ToolSpec, tool_fn};
/// let echo = tool_fn(ToolSpec::new("echo", "Echo the arguments", SideEffect::ReadOnly), |call| async move {
///     Ok(ToolResult::raw(call.args.as_str()).with_summary("echoed"))
/// });
/// # let _ = echo;
/// ```
pub fn tool_fn<F, Fut>(spec: ToolSpec, f: F) -> FnTool<F>
where
    F: Fn(ToolCall) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    FnTool { spec, f }
}

impl<F, Fut> Tool for FnTool<F>
where
    F: Fn(ToolCall) -> Fut + Send + Sync,
    Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
{
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'_, Result<ToolResult, ToolError>> {
        Box::pin((self.f)(call))
    }
}
