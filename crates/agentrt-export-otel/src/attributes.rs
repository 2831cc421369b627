//! Attribute values from event payloads.

use opentelemetry::KeyValue;
use serde_json::Value;

/// `text` sanitized (no control characters) and cut at `max` bytes on a
/// character boundary, with how long it was: `…[truncated: N bytes]`.
pub(crate) fn text(s: &str, max: usize) -> String {
    let clean = agentrt::text::sanitize(s);
    if clean.len() <= max {
        return clean;
    }
    let mut end = max;
    while end > 0 && !clean.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…[truncated: {} bytes]", &clean[..end], s.len())
}

/// The string member `key` of `payload`.
pub(crate) fn str_of<'a>(payload: &'a Value, key: &str) -> Option<&'a str> {
    payload.get(key).and_then(Value::as_str)
}

/// The integer member `key` of `payload`.
pub(crate) fn int_of(payload: &Value, key: &str) -> Option<i64> {
    payload.get(key).and_then(Value::as_i64)
}

/// `agentrt.<name>` = `value`.
pub(crate) fn ours(name: &str, value: impl Into<opentelemetry::Value>) -> KeyValue {
    KeyValue::new(format!("agentrt.{name}"), value)
}

/// A text another party chose, as `agentrt.<name>_bytes` (its length)
/// and, with `content`, `agentrt.<name>` (bounded, sanitized).
pub(crate) fn push_text(
    attributes: &mut Vec<KeyValue>,
    name: &str,
    value: &str,
    max: usize,
    content: bool,
) {
    attributes.push(ours(
        &format!("{name}_bytes"),
        i64::try_from(value.len()).unwrap_or(i64::MAX),
    ));
    if content {
        attributes.push(ours(name, text(value, max)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_on_a_character_boundary_and_says_how_long_it_was() {
        assert_eq!(text("short", 10), "short");
        assert_eq!(text("ééé", 3), "é…[truncated: 6 bytes]");
        assert_eq!(
            text("a\u{1b}[31mb", 100),
            agentrt::text::sanitize("a\u{1b}[31mb")
        );
    }
}
