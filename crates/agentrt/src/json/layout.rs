//! JSON text laid out again without parsing it into values: whitespace
//! dropped or indented, string ends found. The text is valid JSON already
//! (checked by the caller); numbers and strings are copied as written.

/// Index of the quote closing the string that opens at `start` (or the
/// last byte, for an unterminated string).
pub(crate) fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while let Some(&b) = bytes.get(j) {
        match b {
            b'\\' => j += 2,
            b'"' => return j,
            _ => j += 1,
        }
    }
    bytes.len().saturating_sub(1)
}

pub(crate) fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// Re-indents JSON text with two spaces per level, one member or element
/// per line, `": "` after keys, and `{}`/`[]` for empty containers.
/// Number literals and strings are copied as written.
///
/// ```
/// use agentrt::view::pretty_json;
/// assert_eq!(pretty_json(r#"{"a":[1,2.50],"b":{}}"#), "{\n  \"a\": [\n    1,\n    2.50\n  ],\n  \"b\": {}\n}");
/// ```
pub fn pretty_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut need_indent = false;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        if need_indent {
            need_indent = false;
            if c == '}' || c == ']' {
                out.push(c);
                continue;
            }
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                need_indent = true;
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Copies valid JSON text without its insignificant whitespace.
pub(crate) fn compact_into(out: &mut String, text: &str) {
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_json_handles_escapes_and_nesting() {
        assert_eq!(pretty_json("[]"), "[]");
        assert_eq!(pretty_json(r#""a\"{b""#), r#""a\"{b""#);
        assert_eq!(
            pretty_json(r#"{"a":{"b":[{}]}}"#),
            "{\n  \"a\": {\n    \"b\": [\n      {}\n    ]\n  }\n}"
        );
    }

    #[test]
    fn compact_removes_only_insignificant_whitespace() {
        let mut out = String::new();
        compact_into(&mut out, "{ \"a b\" : [ 1 , \"\\\" x\" ] }");
        assert_eq!(out, r#"{"a b":[1,"\" x"]}"#);
    }
}
