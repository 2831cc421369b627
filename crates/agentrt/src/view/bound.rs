//! Approvals bounded for display: long strings shown as head and tail
//! around a marker, the JSON around them kept canonical.

use std::borrow::Cow;

use super::MAX_FIELD_BYTES;
use crate::json::layout::{is_json_space, string_end};
use crate::json::{Canonical, write_string};
use crate::model::Approval;

/// Bytes of the head kept by [`bound_text`].
const HEAD_BYTES: usize = MAX_FIELD_BYTES / 2;
/// Bytes of the tail kept by [`bound_text`].
const TAIL_BYTES: usize = MAX_FIELD_BYTES / 2;

/// `s` itself when it is at most [`MAX_FIELD_BYTES`] bytes; otherwise its
/// first 1000 bytes and its last 1000 bytes (cut on character boundaries)
/// around the marker `…[N bytes omitted]…`, where N counts the bytes left
/// out.
///
/// ```
/// use agentrt::view::bound_text;
/// assert_eq!(bound_text("short"), "short");
/// let long = format!("{}{}", "a".repeat(2500), "b".repeat(2500));
/// let shown = bound_text(&long);
/// assert!(shown.starts_with(&"a".repeat(1000)));
/// assert!(shown.contains("…[3000 bytes omitted]…"));
/// assert!(shown.ends_with(&"b".repeat(1000)));
/// ```
pub fn bound_text(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_FIELD_BYTES {
        return Cow::Borrowed(s);
    }
    let head = floor_prefix(s, HEAD_BYTES);
    let tail = ceil_suffix(s, TAIL_BYTES);
    let omitted = s.len() - head.len() - tail.len();
    Cow::Owned(format!(
        "{head}\u{2026}[{omitted} bytes omitted]\u{2026}{tail}"
    ))
}

/// `value` with every string over [`MAX_FIELD_BYTES`] bytes bounded by
/// [`bound_text`]. Object keys, numbers and the order of members are kept,
/// so the result is still canonical.
///
/// ```
/// use agentrt::json::Canonical;
/// use agentrt::view::bound_value;
/// let v = Canonical::parse_str(&format!(r#"{{"n":1.50,"s":"{}"}}"#, "x".repeat(5000)))?;
/// let b = bound_value(&v);
/// assert!(b.as_str().starts_with(r#"{"n":1.50,"s":"xxx"#));
/// assert!(b.as_str().contains("[3000 bytes omitted]"));
/// # Ok::<(), agentrt::json::JsonError>(())
/// ```
pub fn bound_value(value: &Canonical) -> Canonical {
    match bound_json(value.as_str()) {
        Cow::Borrowed(_) => value.clone(),
        // Strings were replaced by canonically escaped strings; keys and
        // everything else were copied: the text stays canonical.
        Cow::Owned(text) => Canonical::assume_canonical(text),
    }
}

/// `approval` with its capability, presentation and request bounded by
/// [`bound_value`]. The hash is never altered: it is the hash of the
/// approval as stored.
pub fn bound_approval(approval: &Approval) -> Approval {
    Approval {
        capability: bound_value(&approval.capability),
        presentation: bound_value(&approval.presentation),
        request: bound_value(&approval.request),
        ..approval.clone()
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a character
/// boundary.
pub(super) fn floor_prefix(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// The longest suffix of `s` of at most `max` bytes starting on a
/// character boundary.
fn ceil_suffix(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while start < s.len() && !s.is_char_boundary(start) {
        start += 1;
    }
    s.get(start..).unwrap_or_default()
}

/// JSON text with every string value (not key) over [`MAX_FIELD_BYTES`]
/// bytes bounded; borrowed when nothing changed.
pub(super) fn bound_json(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if bytes.len() <= MAX_FIELD_BYTES + 2 {
        return Cow::Borrowed(text);
    }
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'"' {
            i += 1;
            continue;
        }
        let end = string_end(bytes, i);
        let is_key = bytes
            .get(end + 1..)
            .and_then(|rest| rest.iter().find(|b| !is_json_space(**b)))
            == Some(&b':');
        if !is_key
            && end - i + 1 > MAX_FIELD_BYTES + 2
            && let Some(token) = text.get(i..=end)
            && let Ok(value) = serde_json::from_str::<String>(token)
            && value.len() > MAX_FIELD_BYTES
        {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(text.get(copied..i).unwrap_or_default());
            write_string(o, &bound_text(&value));
            copied = end + 1;
        }
        i = end + 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(text.get(copied..).unwrap_or_default());
            Cow::Owned(o)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_text_keeps_head_and_tail_on_char_boundaries() {
        let s = "é".repeat(1500); // 3000 bytes
        let b = bound_text(&s);
        let (head, rest) = b.split_once('\u{2026}').unwrap_or_default();
        assert!(head.len() <= HEAD_BYTES && head.len() >= HEAD_BYTES - 1);
        assert!(rest.starts_with('['));
        assert!(b.contains(" bytes omitted]"));
    }

    #[test]
    fn bound_json_leaves_keys_and_short_strings() {
        let key = "k".repeat(3000);
        let text = format!(r#"{{"{key}":"v","s":"{}"}}"#, "x".repeat(2001));
        let out = bound_json(&text);
        assert!(out.contains(&key));
        assert!(out.contains("…[1 bytes omitted]…"));
        let short = r#"{"a":"b"}"#;
        assert!(matches!(bound_json(short), Cow::Borrowed(_)));
    }
}
