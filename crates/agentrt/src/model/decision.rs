use serde::{Deserialize, Serialize};

use super::is_default;
use crate::json::{Canonical, JsonError};

/// What an agent decided to do at a step.
///
/// `ToolCall`, `Complete` and `Fail` are the real kinds; `Truncated` and
/// `NoToolCall` are recorded by model agents for replies that cannot be
/// acted on, and are always invalid, as is any other kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Call a tool with arguments.
    ToolCall,
    /// The goal is reached; `result` carries the outcome.
    Complete,
    /// The agent gives up; `message` says why.
    Fail,
    /// The model's reply was cut off (always invalid).
    Truncated,
    /// The model replied without a tool call (always invalid).
    NoToolCall,
    /// Any other kind text, kept as given (always invalid).
    Other(String),
}

impl DecisionKind {
    /// The stored text.
    pub fn as_str(&self) -> &str {
        match self {
            DecisionKind::ToolCall => "tool_call",
            DecisionKind::Complete => "complete",
            DecisionKind::Fail => "fail",
            DecisionKind::Truncated => "truncated",
            DecisionKind::NoToolCall => "no_tool_call",
            DecisionKind::Other(s) => s,
        }
    }

    /// The kind with this text; unknown texts become [`DecisionKind::Other`].
    pub fn from_text(text: &str) -> DecisionKind {
        match text {
            "tool_call" => DecisionKind::ToolCall,
            "complete" => DecisionKind::Complete,
            "fail" => DecisionKind::Fail,
            "truncated" => DecisionKind::Truncated,
            "no_tool_call" => DecisionKind::NoToolCall,
            other => DecisionKind::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for DecisionKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for DecisionKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(DecisionKind::from_text(&text))
    }
}

/// Who produced a decision. Recorded only: it is outside every hash and
/// never shown to a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A model proposed it.
    Model,
    /// A fixed plan proposed it.
    Plan,
    /// A person proposed it.
    Operator,
}

impl Origin {
    /// The stored text.
    pub fn as_str(&self) -> &'static str {
        match self {
            Origin::Model => "model",
            Origin::Plan => "plan",
            Origin::Operator => "operator",
        }
    }

    /// `true` for the texts a decision may carry: empty, `model`, `plan`, `operator`.
    pub fn is_valid_text(text: &str) -> bool {
        matches!(text, "" | "model" | "plan" | "operator")
    }
}

/// A decision as an agent proposes it: the kind plus raw argument or result
/// bytes, exactly as the agent (or its model) wrote them.
///
/// ```
/// use agentrt::Decision;
/// let d = Decision::tool_call("fs_read", r#"{"path": "README.md"}"#).with_reason("look first");
/// assert_eq!(d.tool, "fs_read");
/// let done = Decision::complete(r#"{"answer": 42}"#);
/// let give_up = Decision::fail("the file does not exist");
/// # let _ = (done, give_up);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub kind: DecisionKind,
    /// The tool to call (`ToolCall` only).
    pub tool: String,
    /// The tool's arguments as JSON bytes (`ToolCall`); absent means `{}`.
    pub args: Option<Vec<u8>>,
    /// Why, in the agent's words.
    pub reason: String,
    /// The result as JSON bytes (`Complete`).
    pub result: Option<Vec<u8>>,
    /// Why the agent gave up (`Fail`).
    pub message: String,
    /// Who proposed it: empty, `model`, `plan` or `operator`.
    pub origin: String,
}

impl Decision {
    /// A decision of any kind with nothing else set.
    pub fn new(kind: DecisionKind) -> Decision {
        Decision {
            kind,
            tool: String::new(),
            args: None,
            reason: String::new(),
            result: None,
            message: String::new(),
            origin: String::new(),
        }
    }

    /// Call `tool` with `args` (JSON text or bytes, as written).
    pub fn tool_call(tool: impl Into<String>, args: impl Into<Vec<u8>>) -> Decision {
        Decision {
            tool: tool.into(),
            args: Some(args.into()),
            ..Decision::new(DecisionKind::ToolCall)
        }
    }

    /// The goal is reached with `result` (JSON text or bytes).
    pub fn complete(result: impl Into<Vec<u8>>) -> Decision {
        Decision {
            result: Some(result.into()),
            ..Decision::new(DecisionKind::Complete)
        }
    }

    /// The agent gives up, saying why.
    pub fn fail(message: impl Into<String>) -> Decision {
        Decision {
            message: message.into(),
            ..Decision::new(DecisionKind::Fail)
        }
    }

    /// Sets the reason.
    pub fn with_reason(mut self, reason: impl Into<String>) -> Decision {
        self.reason = reason.into();
        self
    }

    /// Sets the origin.
    pub fn with_origin(mut self, origin: Origin) -> Decision {
        self.origin = origin.as_str().to_owned();
        self
    }
}

/// A decision as the runtime records it: valid arguments and result in
/// canonical form; bytes that failed the boundary check moved verbatim into
/// `invalid_args` / `invalid_result` (base64 when either is not UTF-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedDecision {
    /// What the agent asked for.
    pub kind: DecisionKind,
    /// The tool named.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The arguments, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Canonical>,
    /// The agent's reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The result, canonical.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Canonical>,
    /// The failure message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Who proposed it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub origin: String,
    /// Argument bytes that were not acceptable JSON, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_args: Option<String>,
    /// Result bytes that were not acceptable JSON, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid_result: Option<String>,
    /// `invalid_args` and `invalid_result` are base64 (one was not UTF-8).
    #[serde(default, skip_serializing_if = "is_default")]
    pub invalid_base64: bool,
}

/// What the boundary check said about a decision's raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecisionProblems {
    /// Why the arguments were refused.
    pub args: Option<JsonError>,
    /// Why the result was refused.
    pub result: Option<JsonError>,
}

/// JSON whitespace only (or nothing): arguments or a result that count as absent.
pub(crate) fn is_blank(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

impl RecordedDecision {
    /// Records `d`: canonicalises acceptable arguments and result, moves
    /// refused bytes into the `invalid_*` fields, and reports why they were
    /// refused. Whitespace-only arguments or result count as absent.
    pub fn record(d: &Decision) -> (RecordedDecision, DecisionProblems) {
        let mut problems = DecisionProblems::default();
        let take = |raw: &Option<Vec<u8>>, slot: &mut Option<JsonError>| match raw.as_deref() {
            None => (None, None),
            Some(bytes) if is_blank(bytes) => (None, None),
            Some(bytes) => match Canonical::parse(bytes) {
                Ok(c) => (Some(c), None),
                Err(e) => {
                    *slot = Some(e);
                    (None, Some(bytes.to_vec()))
                }
            },
        };
        let (args, bad_args) = take(&d.args, &mut problems.args);
        let (result, bad_result) = take(&d.result, &mut problems.result);
        let not_utf8 = [&bad_args, &bad_result]
            .iter()
            .any(|b| b.as_ref().is_some_and(|b| std::str::from_utf8(b).is_err()));
        let encode = |b: Option<Vec<u8>>| {
            b.map(|bytes| {
                if not_utf8 {
                    base64(&bytes)
                } else {
                    String::from_utf8(bytes).unwrap_or_default()
                }
            })
        };
        let recorded = RecordedDecision {
            kind: d.kind.clone(),
            tool: d.tool.clone(),
            args,
            reason: d.reason.clone(),
            result,
            message: d.message.clone(),
            origin: d.origin.clone(),
            invalid_args: encode(bad_args),
            invalid_result: encode(bad_result),
            invalid_base64: not_utf8,
        };
        (recorded, problems)
    }

    /// The arguments, or `{}` when absent.
    pub fn args_or_empty(&self) -> Canonical {
        self.args.clone().unwrap_or_else(Canonical::empty_object)
    }
}

/// Standard base64 with padding.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, want) in cases {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    #[test]
    fn valid_args_are_canonical_and_blank_args_absent() {
        let (r, p) = RecordedDecision::record(&Decision::tool_call("t", r#"{ "b":1, "a":2 }"#));
        assert_eq!(r.args.unwrap().as_str(), r#"{"a":2,"b":1}"#);
        assert_eq!(p, DecisionProblems::default());
        let (r, _) = RecordedDecision::record(&Decision::tool_call("t", "  \n"));
        assert!(r.args.is_none() && r.invalid_args.is_none());
    }

    #[test]
    fn refused_args_are_kept_verbatim_and_base64_when_not_utf8() {
        let (r, p) = RecordedDecision::record(&Decision::tool_call("t", "{not json"));
        assert_eq!(r.invalid_args.as_deref(), Some("{not json"));
        assert!(!r.invalid_base64 && r.args.is_none() && p.args.is_some());

        let mut d = Decision::tool_call("t", vec![0xff, b'{']);
        d.result = Some(b"[1,".to_vec());
        let (r, p) = RecordedDecision::record(&d);
        assert!(r.invalid_base64);
        assert_eq!(
            r.invalid_args.as_deref(),
            Some(base64(&[0xff, b'{']).as_str())
        );
        assert_eq!(r.invalid_result.as_deref(), Some(base64(b"[1,").as_str()));
        assert!(p.args.is_some() && p.result.is_some());
    }

    #[test]
    fn unknown_kinds_round_trip_as_text() {
        let k: DecisionKind = serde_json::from_str(r#""launch""#).unwrap();
        assert_eq!(k, DecisionKind::Other("launch".into()));
        assert_eq!(serde_json::to_string(&k).unwrap(), r#""launch""#);
    }
}
