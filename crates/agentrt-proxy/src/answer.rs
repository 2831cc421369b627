//! What the host's model sees (design §32): a result as recorded, an
//! upstream tool error as an error result, and everything else as prose
//! under a fixed prefix. Nothing here names the operator's command, the
//! database, the configuration or a run id; approval ids are shown.

use agentrt::{
    Canonical, Timestamp, model::Observation, model::ObservationKind, model::OperatorEdit,
};

/// The most bytes of a quoted reason or note.
const QUOTE: usize = 500;
/// The most bytes of a quoted error.
const ERROR_QUOTE: usize = 1000;
/// The most bytes of a quoted result or upstream error.
const RESULT_QUOTE: usize = 64 * 1024;

/// One answer to a `tools/call`.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// The tool ran: its recorded content as text, and as structured
    /// content when it is an object.
    Result {
        /// The content as text (a JSON string's own text).
        text: String,
        /// The content when it is a JSON object.
        structured: Option<serde_json::Value>,
        /// Set when an operator changed the call before it ran: said to
        /// the host in a text block of its own before the result
        /// (`EDITED: …`), the result's text and structure left as they are.
        edited: Option<String>,
    },
    /// Prose under a prefix (or an upstream error): `is_error` as the
    /// result's `isError`.
    Prose {
        /// The text, starting with its prefix.
        text: String,
        /// Whether the host sees an error result.
        is_error: bool,
    },
}

impl Answer {
    fn prose(prefix: &str, text: String, is_error: bool) -> Answer {
        Answer::Prose {
            text: format!("{prefix}: {text}"),
            is_error,
        }
    }

    /// The answer's text.
    pub fn text(&self) -> &str {
        match self {
            Answer::Result { text, .. } | Answer::Prose { text, .. } => text,
        }
    }
}

/// `text` on one line (newlines as spaces), sanitized, at most `max`
/// bytes, cut on a character.
pub fn quote(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    let clean = agentrt::text::sanitize(&one_line);
    if clean.len() <= max {
        return clean;
    }
    let mut end = max.saturating_sub(3);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &clean[..end])
}

/// The string field `name` of a runtime observation's content.
fn field(observation: &Observation, name: &str) -> Option<String> {
    let content = observation.content.as_ref()?;
    let value: serde_json::Value = serde_json::from_str(content.as_str()).ok()?;
    value.get(name)?.as_str().map(str::to_owned)
}

/// A recorded result: a JSON string as its text, other JSON as its text,
/// an object also as structured content.
pub fn result(content: Option<&Canonical>) -> Answer {
    let Some(content) = content else {
        return Answer::Result {
            text: String::new(),
            structured: None,
            edited: None,
        };
    };
    let value: Option<serde_json::Value> = serde_json::from_str(content.as_str()).ok();
    match value {
        Some(serde_json::Value::String(text)) => Answer::Result {
            text,
            structured: None,
            edited: None,
        },
        Some(object @ serde_json::Value::Object(_)) => Answer::Result {
            text: content.as_str().to_owned(),
            structured: Some(object),
            edited: None,
        },
        _ => Answer::Result {
            text: content.as_str().to_owned(),
            structured: None,
            edited: None,
        },
    }
}

/// The answer for a step's observation after the tool ran or was refused;
/// a call an operator edited says so ([`edited`]).
pub fn observed(observation: &Observation) -> Answer {
    let answer = observed_as_recorded(observation);
    match &observation.operator_edit {
        None => answer,
        Some(edit) => with_edit(answer, edited(edit)),
    }
}

/// `EDITED`: an operator changed the call before it ran, and how.
pub fn edited(edit: &OperatorEdit) -> String {
    let note = if edit.note.is_empty() {
        String::new()
    } else {
        format!(" Their note: {}.", quote(&edit.note, QUOTE))
    };
    format!(
        "EDITED: An operator changed this call before it ran. It ran with the arguments {} instead of the ones sent.{note}",
        quote(edit.args.as_str(), RESULT_QUOTE)
    )
}

/// `answer` with the edit said first: a result keeps its text and
/// structure (the edit is a block of its own), prose gets it as its first
/// line.
fn with_edit(answer: Answer, said: String) -> Answer {
    match answer {
        Answer::Result {
            text, structured, ..
        } => Answer::Result {
            text,
            structured,
            edited: Some(said),
        },
        Answer::Prose { text, is_error } => Answer::Prose {
            text: format!("{said}\n{text}"),
            is_error,
        },
    }
}

fn observed_as_recorded(observation: &Observation) -> Answer {
    match observation.kind {
        ObservationKind::ToolResult => result(observation.content.as_ref()),
        ObservationKind::ToolError => {
            let error = field(observation, "error").unwrap_or_else(|| observation.summary.clone());
            Answer::Prose {
                text: quote(&error, RESULT_QUOTE),
                is_error: true,
            }
        }
        ObservationKind::PolicyDenied => {
            let reason =
                field(observation, "reason").unwrap_or_else(|| observation.summary.clone());
            denied(&reason)
        }
        ObservationKind::InvalidDecision => {
            let error = field(observation, "error").unwrap_or_else(|| observation.summary.clone());
            invalid(&error)
        }
        ObservationKind::Interrupted => in_progress(),
    }
}

/// `DENIED`: the policy refused.
pub fn denied(reason: &str) -> Answer {
    Answer::prose(
        "DENIED",
        format!(
            "The policy refused this request: {}. Nothing was executed.",
            quote(reason, QUOTE)
        ),
        true,
    )
}

/// The schema validator's internal URL, cut out of a reason.
fn without_schema_url(error: &str) -> String {
    match error.find(" with '") {
        Some(at) if error[at..].contains("://tools/") => {
            let rest = &error[at + 7..];
            match rest.find('\'') {
                Some(end) => format!("{}{}", &error[..at], &rest[end + 1..]),
                None => error[..at].to_owned(),
            }
        }
        _ => error.to_owned(),
    }
}

/// `INVALID`: the arguments fail the schema.
pub fn invalid(error: &str) -> Answer {
    Answer::prose(
        "INVALID",
        format!(
            "The arguments do not fit the tool's input schema: {}. Nothing was executed. Correct the arguments and call the tool again.",
            quote(&without_schema_url(error), ERROR_QUOTE)
        ),
        true,
    )
}

/// `PENDING_APPROVAL`: in this order, that it waits (with the approval
/// id), that nothing ran, what not to do, to tell the user, and how to
/// run it once approved.
pub fn pending(approval_id: &str) -> Answer {
    Answer::prose(
        "PENDING_APPROVAL",
        format!(
            "This request is waiting for an operator's approval (approval {}). Nothing was executed. \
             Do not call this tool again until you are told it was approved, do not try another tool \
             for the same goal, and do not ask the user to approve it: the operator decides elsewhere. \
             Tell the user that the request is waiting for an operator's approval. After it is approved, \
             call this tool again with exactly the same arguments to run it and get the result.",
            quote(approval_id, QUOTE)
        ),
        false,
    )
}

/// `REJECTED`: an operator rejected the request, with the note; identical
/// requests are refused until `until`.
pub fn rejected(note: &str, until: Option<Timestamp>) -> Answer {
    let note = if note.trim().is_empty() {
        String::new()
    } else {
        format!(" with the note \"{}\"", quote(note, QUOTE))
    };
    let until = until.map_or(String::new(), |t| {
        format!(" Identical requests are refused until {t}.")
    });
    Answer::prose(
        "REJECTED",
        format!(
            "An operator rejected this request{note}. Nothing was executed.{until} Do not try another tool for the same goal; tell the user."
        ),
        true,
    )
}

/// `REJECTED` for a request an operator cancelled; identical requests are
/// refused until `until`.
pub fn cancelled(until: Option<Timestamp>) -> Answer {
    let until = until.map_or(String::new(), |t| {
        format!(" Identical requests are refused until {t}.")
    });
    Answer::prose(
        "REJECTED",
        format!(
            "An operator cancelled this request. Nothing was executed.{until} Do not try another tool for the same goal; tell the user."
        ),
        true,
    )
}

/// `DUPLICATE`: an identical change already ran within the window.
pub fn duplicate(at: Timestamp, outcome: &str, until: Timestamp) -> Answer {
    Answer::prose(
        "DUPLICATE",
        format!(
            "An identical request already ran at {at} and {outcome}. It was not run again. \
             Identical requests are refused until {until}. Do not try another tool for the same goal; \
             tell the user, who can ask for it again later if it is really meant."
        ),
        true,
    )
}

/// `EXPIRED`: the approval lapsed before it was used.
pub fn expired(approval_id: &str) -> Answer {
    Answer::prose(
        "EXPIRED",
        format!(
            "The approval this request waited for (approval {}) expired before it was used. Nothing was executed. Tell the user; call the tool again only if the user asks for it.",
            quote(approval_id, QUOTE)
        ),
        true,
    )
}

/// `IN_PROGRESS`: the same request is executing, or its outcome is not
/// known yet.
pub fn in_progress() -> Answer {
    Answer::prose(
        "IN_PROGRESS",
        "The same request is executing now, or its outcome is not known yet. Call this tool again shortly with exactly the same arguments to get the result.".into(),
        false,
    )
}

/// `UNKNOWN_OUTCOME`: sent, no answer; an operator decides whether it
/// runs again.
pub fn unknown_outcome(approval_id: Option<&str>) -> Answer {
    let asking = approval_id.map_or(String::new(), |id| {
        format!(" (approval {})", quote(id, QUOTE))
    });
    Answer::prose(
        "UNKNOWN_OUTCOME",
        format!(
            "The request timed out or got no answer, so it may have taken effect. It will not run again unless an operator decides so{asking}. Do not call this tool again for it and do not try another tool for the same goal; tell the user."
        ),
        false,
    )
}

/// `INTERRUPTED`: an earlier attempt of this request was cut off while it
/// ran; an operator decides whether it runs again.
pub fn interrupted(approval_id: &str) -> Answer {
    Answer::prose(
        "INTERRUPTED",
        format!(
            "An earlier attempt of this request was cut off while it was running, so it may have taken effect. \
             It will not run again unless an operator decides so (approval {}). Do not call this tool again for it \
             and do not try another tool for the same goal; tell the user. If the operator approves, call this tool \
             again with exactly the same arguments.",
            quote(approval_id, QUOTE)
        ),
        false,
    )
}

/// `BLOCKED`: the session already has `waiting` approvals waiting, the
/// most it may.
pub fn blocked_by_pending(waiting: u64) -> Answer {
    let requests = if waiting == 1 {
        "1 request".to_owned()
    } else {
        format!("{waiting} requests")
    };
    Answer::prose(
        "BLOCKED",
        format!(
            "{requests} of this session already wait for an operator's approval, the most allowed. \
             Nothing was executed and no approval was asked. Tell the user; call this tool again \
             after the operator has decided the waiting requests."
        ),
        true,
    )
}

/// `BLOCKED`: another request to the same tool has an unknown outcome an
/// operator is asked about.
pub fn blocked_by_unknown(approval_id: &str) -> Answer {
    Answer::prose(
        "BLOCKED",
        format!(
            "Another request to this tool may have taken effect without an answer, and an operator is asked about it \
             (approval {}). Until it is decided this tool runs nothing. Nothing was executed. Do not try another tool \
             for the same goal; tell the user.",
            quote(approval_id, QUOTE)
        ),
        true,
    )
}

/// `UNAVAILABLE`: the proxy could not read or write its records.
pub fn unavailable(executed: bool) -> Answer {
    let what = if executed {
        "The request may have been executed; do not call it again"
    } else {
        "Nothing was executed"
    };
    Answer::prose(
        "UNAVAILABLE",
        format!("The proxy could not read or write its records. {what}. Tell the user."),
        true,
    )
}

/// `UNAVAILABLE`: the proxy is stopping and takes no new call.
pub fn stopping() -> Answer {
    Answer::prose(
        "UNAVAILABLE",
        "The proxy is stopping and takes no new calls. Nothing was executed. Tell the user.".into(),
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_its_text_and_an_object_also_structured() {
        let text = |c: &str| result(Some(&Canonical::parse_str(c).unwrap()));
        assert_eq!(
            text(r#""line one\nline two""#),
            Answer::Result {
                text: "line one\nline two".into(),
                structured: None,
                edited: None,
            }
        );
        assert_eq!(
            text("[1,2]"),
            Answer::Result {
                text: "[1,2]".into(),
                structured: None,
                edited: None,
            }
        );
        match text(r#"{"n":1}"#) {
            Answer::Result {
                text, structured, ..
            } => {
                assert_eq!(text, r#"{"n":1}"#);
                assert_eq!(structured, Some(serde_json::json!({"n": 1})));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pending_answer_says_each_thing_in_order_and_names_no_run() {
        let text = pending("a-17").text().to_owned();
        assert!(text.starts_with("PENDING_APPROVAL: This request is waiting for an operator's approval (approval a-17). Nothing was executed."), "{text}");
        let order = [
            "(approval a-17)",
            "Nothing was executed",
            "Do not call this tool again until you are told it was approved",
            "do not try another tool",
            "do not ask the user to approve",
            "Tell the user",
            "exactly the same arguments",
        ];
        let mut at = 0;
        for part in order {
            let found = text[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} after {at}: {text}"));
            at += found + part.len();
        }
        assert!(!text.contains("run") || !text.contains("agentrt"), "{text}");
    }

    #[test]
    fn quotes_are_one_line_sanitized_and_bounded() {
        assert_eq!(quote("a\nb\r\nc", 100), "a b  c");
        let long = "é".repeat(400);
        let q = quote(&long, 500);
        assert!(q.len() <= 500 && q.ends_with("..."), "{}", q.len());
        assert_eq!(quote("\u{1b}[2J", 100), "\\x1b[2J");
    }

    #[test]
    fn an_invalid_answer_leaves_out_the_validators_internal_url() {
        let text = invalid(
            "\"x\" is not of type \"integer\" with 'agentrt://tools/fs_write#/properties/n'",
        )
        .text()
        .to_owned();
        assert!(text.contains("\"x\" is not of type \"integer\"."), "{text}");
        assert!(!text.contains("://tools/"), "{text}");
    }
}
