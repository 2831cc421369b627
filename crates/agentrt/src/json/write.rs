//! The canonical writer: a [`Tree`] to compact text.

use super::parse::{Node, Tree};
use super::scan::find_special;

/// Writes `s` as a JSON string literal (with quotes) in the canonical escaping
/// onto `out`.
///
/// The escaping is fixed: `\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, other
/// control characters below U+0020 as `\u00xx` (lowercase hex), and every
/// other character written raw as UTF-8 (including `/`, DEL, U+2028, U+2029
/// and all non-ASCII).
///
/// ```
/// let mut out = String::new();
/// agentrt::json::write_string(&mut out, "a\"/\u{1}é\n");
/// assert_eq!(out, r#""a\"/\u0001é\n""#);
/// ```
pub fn write_string(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut run_start = 0;
    loop {
        let i = find_special(bytes, run_start);
        // `i` is at an ASCII byte or the end, hence a char boundary: `get`
        // cannot fail.
        out.push_str(s.get(run_start..i).unwrap_or_default());
        let Some(&b) = bytes.get(i) else {
            break;
        };
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xf)]));
            }
        }
        run_start = i + 1;
    }
    out.push('"');
}

/// Writes node `root` of `tree` (and everything under it) canonically:
/// no whitespace, numbers as written, object members already sorted.
pub(crate) fn write_node(tree: &Tree<'_>, root: usize, out: &mut String) {
    /// An open container: its node and the next child to write.
    struct Open {
        node: usize,
        next: usize,
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut pending = Some(root);
    loop {
        if let Some(node) = pending.take() {
            match tree.nodes.get(node) {
                Some(Node::Null) | None => out.push_str("null"),
                Some(Node::True) => out.push_str("true"),
                Some(Node::False) => out.push_str("false"),
                Some(Node::Number(n)) => out.push_str(n),
                Some(Node::Str(s)) => write_string(out, s),
                Some(Node::Array { start, .. }) => {
                    out.push('[');
                    stack.push(Open { node, next: *start });
                }
                Some(Node::Object { start, .. }) => {
                    out.push('{');
                    stack.push(Open { node, next: *start });
                }
            }
        }
        let Some(open) = stack.last_mut() else {
            return;
        };
        match tree.nodes.get(open.node) {
            Some(Node::Array { start, end }) => {
                if open.next < *end {
                    if open.next > *start {
                        out.push(',');
                    }
                    pending = tree.items.get(open.next).copied();
                    open.next += 1;
                } else {
                    out.push(']');
                    stack.pop();
                }
            }
            Some(Node::Object { start, end }) => {
                if open.next < *end {
                    if open.next > *start {
                        out.push(',');
                    }
                    if let Some((key, value)) = tree.members.get(open.next) {
                        write_string(out, key);
                        out.push(':');
                        pending = Some(*value);
                    }
                    open.next += 1;
                } else {
                    out.push('}');
                    stack.pop();
                }
            }
            // Only containers are pushed.
            _ => {
                stack.pop();
            }
        }
    }
}
