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

/// Calls `each` with every character of valid JSON `text` and whether it
/// stands outside a string (a string's opening quote does; its content and
/// closing quote do not).
fn scan(text: &str, mut each: impl FnMut(char, bool)) {
    let (mut in_string, mut escaped) = (false, false);
    for c in text.chars() {
        if !in_string {
            in_string = c == '"';
            each(c, true);
            continue;
        }
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = false;
        }
        each(c, false);
    }
}

fn is_space(c: char) -> bool {
    u8::try_from(c).is_ok_and(is_json_space)
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
    let mut need_indent = false;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    scan(text, |c, outside| {
        if !outside {
            out.push(c);
            return;
        }
        if is_space(c) {
            return;
        }
        if need_indent {
            need_indent = false;
            if c == '}' || c == ']' {
                out.push(c);
                return;
            }
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
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
    });
    out
}

/// Copies valid JSON text without its insignificant whitespace.
pub(crate) fn compact_into(out: &mut String, text: &str) {
    scan(text, |c, outside| {
        if !outside || !is_space(c) {
            out.push(c);
        }
    });
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
