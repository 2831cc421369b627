//! A call's two ends that need no connection (design §27): the
//! arguments sent (checked against the operator's rule, fixed values
//! injected, and only if the protocol library will send exactly these
//! bytes), and the server's result mapped to the recorded content and its
//! summary.

use agentrt::json::{object_members, write_string};
use agentrt::{Canonical, ToolError, ToolResult};
use serde_json::{Map, Value};

use crate::check::OfferedTool;
use crate::listing::elements;

/// The most bytes of recorded content when the server description sets
/// none.
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 64 * 1024;

/// What ends recorded text that was cut.
const TRUNCATED: &str = "\n[truncated]";

/// The arguments to send for a call of `tool` with the model's `args`
/// (empty: `{}`): an object, none of its parameters denied or fixed by the
/// operator (never silently overridden), the fixed values then injected.
///
/// The protocol library (rmcp) takes a `serde_json` value, which rewrites
/// number spellings (`1e2` becomes `100.0`): arguments whose `serde_json`
/// round trip would change them are refused, so the bytes the policy
/// approved are the bytes sent.
///
/// ```
/// use std::time::Duration;
/// use agentrt::{Canonical, SideEffect, ToolSpec};
/// use agentrt_mcp::{OfferedTool, Rule, call_arguments};
///
/// let mut rule = Rule::new(SideEffect::LocalMutation).with_timeout(Duration::from_secs(5));
/// rule.fixed.insert("root".into(), Canonical::parse_str(r#""/srv""#).unwrap());
/// rule.deny.push("force".into());
/// let tool = OfferedTool {
///     upstream: "write_file".into(),
///     spec: ToolSpec::new("fs_write_file", "Writes.", SideEffect::LocalMutation),
///     rule,
/// };
/// let sent = call_arguments(&tool, br#"{"path": "a.txt"}"#).unwrap();
/// assert_eq!(sent.as_str(), r#"{"path":"a.txt","root":"/srv"}"#);
/// let denied = call_arguments(&tool, br#"{"force": true}"#).unwrap_err();
/// assert_eq!(denied.to_string(), r#"fs_write_file: parameter "force" is denied by the operator"#);
/// assert!(call_arguments(&tool, br#"{"n": 1e2}"#).is_err());
/// ```
pub fn call_arguments(tool: &OfferedTool, args: &[u8]) -> Result<Canonical, ToolError> {
    let name = &tool.spec.name;
    let fail = |detail: String| ToolError::failed(format!("{name}: {detail}"));
    let args = if args.iter().all(u8::is_ascii_whitespace) {
        Canonical::empty_object()
    } else {
        Canonical::parse(args)
            .map_err(|e| fail(format!("the arguments are not acceptable JSON: {e}")))?
    };
    let members =
        object_members(&args).ok_or_else(|| fail("the arguments are not a JSON object".into()))?;
    for (param, _) in &members {
        if tool.rule.deny.contains(param) {
            return Err(fail(format!(
                "parameter {param:?} is denied by the operator"
            )));
        }
        if tool.rule.fixed.contains_key(param) {
            return Err(fail(format!(
                "parameter {param:?} is fixed by the operator"
            )));
        }
    }
    let mut all: Vec<(String, Canonical)> = members;
    all.extend(tool.rule.fixed.iter().map(|(k, v)| (k.clone(), v.clone())));
    all.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut text = String::from("{");
    for (i, (key, value)) in all.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        write_string(&mut text, key);
        text.push(':');
        text.push_str(value.as_str());
    }
    text.push('}');
    let sent = Canonical::parse_str(&text).map_err(|e| {
        fail(format!(
            "the arguments with the fixed values are not JSON: {e}"
        ))
    })?;
    if serde_round_trip(&sent).as_ref() != Some(&sent) {
        return Err(fail(
            "the arguments would not reach the server as approved: the protocol library would \
             rewrite them (a number spelling such as 1e2 or 1.50, or a number out of range); \
             write numbers in their plain shortest form"
                .into(),
        ));
    }
    Ok(sent)
}

/// `args` as `serde_json` hands them to the protocol library and back.
fn serde_round_trip(args: &Canonical) -> Option<Canonical> {
    let value: Map<String, Value> = serde_json::from_str(args.as_str()).ok()?;
    let text = serde_json::to_string(&value).ok()?;
    Canonical::parse_str(&text).ok()
}

/// A call's result, mapped: `result` is the raw JSON of the `tools/call`
/// result (from the bytes the server sent, so big integers survive), `cap`
/// the most bytes of recorded content.
///
/// Structured content that fits the cap is recorded as it is; otherwise
/// the content blocks are joined by newlines (text as is, every other kind
/// named, `[image omitted]` and so on) and recorded as a JSON string of at
/// most `cap` encoded bytes, cut on a character boundary and ending
/// `\n[truncated]`. The summary is `<server>/<tool>: <N> bytes`, then
/// `, truncated` and `, structured content of <M> bytes dropped for the
/// text` as they apply. `isError` makes the call a tool error (`<summary>,
/// error: <text>`): the agent sees it and works around it. A result that
/// is not acceptable JSON or not an object is an unknown outcome
/// ([`ToolError::Unknown`]): the server answered, but not with anything
/// that says the call did not run.
///
/// ```
/// use agentrt_mcp::map_result;
///
/// let r = map_result("fs", "read_file", r#"{"content":[{"type":"text","text":"hello"}]}"#, 1024).unwrap();
/// assert_eq!(r.content, br#""hello""#);
/// assert_eq!(r.summary, "fs/read_file: 7 bytes");
/// let e = map_result("fs", "read_file", r#"{"content":[{"type":"text","text":"no such file"}],"isError":true}"#, 1024)
///     .unwrap_err();
/// assert_eq!(e.to_string(), "fs/read_file: 14 bytes, error: no such file");
/// ```
pub fn map_result(
    server: &str,
    tool: &str,
    result: &str,
    cap: usize,
) -> Result<ToolResult, ToolError> {
    let label = format!("{server}/{tool}");
    // The server answered, but with nothing this client can read as a
    // result: what it did is not known.
    let result = Canonical::parse_str(result).map_err(|e| {
        ToolError::unknown(format!(
            "{label}: the result is not acceptable JSON: {e}; what the server did is not known"
        ))
    })?;
    let members = object_members(&result).ok_or_else(|| {
        ToolError::unknown(format!(
            "{label}: the result is not a JSON object; what the server did is not known"
        ))
    })?;
    let field = |key: &str| members.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let is_error = field("isError").is_some_and(|v| v.as_str() == "true");
    let structured = field("structuredContent").filter(|v| !v.is_null());
    let text = joined_text(field("content"));

    let (content, cut, dropped) = match structured {
        Some(s) if s.as_str().len() <= cap => (s.as_str().to_owned(), false, None),
        _ => {
            let dropped = structured.map(|s| s.as_str().len());
            let shown = if text.is_empty() && dropped.is_some() {
                "[structured content dropped: too large]".to_owned()
            } else {
                text.clone()
            };
            let (encoded, cut) = encode_capped(&shown, cap);
            (encoded, cut, dropped)
        }
    };
    let mut summary = format!("{label}: {} bytes", content.len());
    if cut || dropped.is_some() {
        summary.push_str(", truncated");
    }
    if let Some(m) = dropped {
        summary.push_str(&format!(
            ", structured content of {m} bytes dropped for the text"
        ));
    }
    if is_error {
        return Err(ToolError::failed(format!("{summary}, error: {text}")));
    }
    Ok(ToolResult::raw(content).with_summary(summary))
}

/// The content blocks joined by newlines: text as it is, other kinds
/// named. Read with the core's parser, not serde_json's: a block holding
/// a number beyond `f64` or nesting past 128 levels would otherwise drop
/// every block's text.
fn joined_text(content: Option<&Canonical>) -> String {
    let Some(blocks) = content.and_then(elements) else {
        return String::new();
    };
    let parts: Vec<String> = blocks
        .iter()
        .map(|block| {
            let members = object_members(block).unwrap_or_default();
            let string = |key: &str| {
                members
                    .iter()
                    .find(|(k, _)| k == key)
                    .and_then(|(_, v)| serde_json::from_str::<String>(v.as_str()).ok())
            };
            match (string("type").as_deref().unwrap_or(""), string("text")) {
                ("text", Some(text)) => text,
                ("image", _) => "[image omitted]".into(),
                ("audio", _) => "[audio omitted]".into(),
                ("resource_link", _) => "[resource link omitted]".into(),
                ("resource", _) => "[embedded resource omitted]".into(),
                _ => "[content omitted]".into(),
            }
        })
        .collect();
    parts.join("\n")
}

/// The encoded length of one character in a JSON string.
fn encoded_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\u{8}' | '\u{c}' | '\n' | '\r' | '\t' => 2,
        c if (c as u32) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// `text` as a JSON string of at most `cap` bytes (raised to fit the
/// marker), cut on a character boundary and ending with the marker when it
/// does not fit; whether it was cut.
fn encode_capped(text: &str, cap: usize) -> (String, bool) {
    let full: usize = 2 + text.chars().map(encoded_len).sum::<usize>();
    if full <= cap {
        let mut out = String::with_capacity(full);
        write_string(&mut out, text);
        return (out, false);
    }
    let marker: usize = TRUNCATED.chars().map(encoded_len).sum();
    let cap = cap.max(2 + marker);
    let budget = cap - 2 - marker;
    let mut used = 0;
    let mut end = 0;
    for (at, c) in text.char_indices() {
        let n = encoded_len(c);
        if used + n > budget {
            break;
        }
        used += n;
        end = at + c.len_utf8();
    }
    let mut kept = String::with_capacity(end + TRUNCATED.len());
    kept.push_str(&text[..end]);
    kept.push_str(TRUNCATED);
    let mut out = String::with_capacity(cap);
    write_string(&mut out, &kept);
    (out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_kept_when_a_block_holds_what_serde_json_cannot() {
        // Found by the fuzz target: one such block emptied the whole text.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let result = format!(
            r#"{{"content":[{{"type":"text","text":"hello"}},{{"type":"image","data":"","n":1e400}},{{"type":"audio","x":{deep}}}]}}"#
        );
        let r = map_result("fs", "read", &result, 1024).unwrap();
        assert_eq!(r.content, br#""hello\n[image omitted]\n[audio omitted]""#);
    }

    #[test]
    fn cut_text_fits_the_cap_exactly_and_never_splits_a_character() {
        for cap in [0, 5, 16, 17, 18, 19, 20, 31, 64] {
            for text in [
                "ééééééééééééééééééééééé",
                "a\"b\\c\nd\u{1}e".repeat(5).as_str(),
            ] {
                let (encoded, cut) = encode_capped(text, cap);
                let marker_min = 2 + TRUNCATED.chars().map(encoded_len).sum::<usize>();
                assert!(encoded.len() <= cap.max(marker_min), "{cap}: {encoded}");
                let back: String = serde_json::from_str(&encoded).expect("a JSON string");
                if cut {
                    assert!(back.ends_with(TRUNCATED));
                    assert!(text.starts_with(back.trim_end_matches(TRUNCATED)));
                } else {
                    assert_eq!(back, text);
                }
            }
        }
    }
}
