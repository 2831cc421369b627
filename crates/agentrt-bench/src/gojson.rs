//! The encoding rules of the result file, which are Go's `encoding/json`
//! rules: `json.MarshalIndent(v, "", "  ")` with HTML escaping on. They are
//! kept for byte compatibility (decision 11) and written down here as
//! dedicated functions:
//!
//! - strings: `"` and `\` escaped, `\n \r \t \b \f` in short form, other
//!   control characters as `\u00xx` (lowercase hex), `<`, `>`, `&` as
//!   `\u003c`, `\u003e`, `\u0026`, U+2028 and U+2029 as `\u2028`, `\u2029`,
//!   everything else (DEL and non-ASCII included) raw;
//! - raw JSON values are compacted (whitespace outside strings dropped,
//!   string contents kept as written, with the HTML characters and U+2028/9
//!   escaped);
//! - the compact document is then indented: two spaces per level, `": "`
//!   after keys, empty objects and arrays stay `{}` and `[]`.

use std::collections::BTreeMap;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// A JSON value in the shape the encoder writes, fields in declared order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Node {
    Str(String),
    Int(i64),
    UInt(u64),
    /// Compact JSON text, written with HTML escaping applied.
    Raw(String),
    Obj(Vec<(String, Node)>),
    Arr(Vec<Node>),
}

/// Builds an object node field by field, with Go's `omitempty`.
#[derive(Default)]
pub(crate) struct Obj(Vec<(String, Node)>);

impl Obj {
    pub(crate) fn new() -> Obj {
        Obj::default()
    }

    pub(crate) fn field(mut self, key: &str, value: Node) -> Obj {
        self.0.push((key.to_string(), value));
        self
    }

    pub(crate) fn str(self, key: &str, value: &str) -> Obj {
        self.field(key, Node::Str(value.to_string()))
    }

    /// A string field left out when empty.
    pub(crate) fn str_omit(self, key: &str, value: &str) -> Obj {
        if value.is_empty() {
            self
        } else {
            self.str(key, value)
        }
    }

    pub(crate) fn int(self, key: &str, value: i64) -> Obj {
        self.field(key, Node::Int(value))
    }

    pub(crate) fn uint(self, key: &str, value: u64) -> Obj {
        self.field(key, Node::UInt(value))
    }

    /// A list of strings left out when empty.
    pub(crate) fn strs_omit(self, key: &str, values: &[String]) -> Obj {
        if values.is_empty() {
            self
        } else {
            let items = values.iter().map(|v| Node::Str(v.clone())).collect();
            self.field(key, Node::Arr(items))
        }
    }

    /// A map left out when empty; keys sorted bytewise.
    pub(crate) fn map_omit<V>(
        self,
        key: &str,
        map: &BTreeMap<String, V>,
        f: impl Fn(&V) -> Node,
    ) -> Obj {
        if map.is_empty() {
            self
        } else {
            let entries = map.iter().map(|(k, v)| (k.clone(), f(v))).collect();
            self.field(key, Node::Obj(entries))
        }
    }

    pub(crate) fn build(self) -> Node {
        Node::Obj(self.0)
    }
}

/// Appends `s` as a JSON string literal, escaped as Go escapes it.
pub(crate) fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{0}'..='\u{1f}' => {
                let b = c as u8;
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Compacts valid JSON text: whitespace outside strings is dropped, string
/// contents are kept byte for byte except that, with `escape_html`, `<`,
/// `>`, `&`, U+2028 and U+2029 are written as `\u` escapes (Go's
/// `appendCompact`). With `escape_html` off this is Go's `json.Compact`.
pub(crate) fn compact(raw: &str, escape_html: bool) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in raw.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            match c {
                '<' | '>' | '&' if escape_html => {
                    out.push_str("\\u00");
                    let b = c as u8;
                    out.push(HEX[usize::from(b >> 4)] as char);
                    out.push(HEX[usize::from(b & 0xf)] as char);
                }
                '\u{2028}' if escape_html => out.push_str("\\u2028"),
                '\u{2029}' if escape_html => out.push_str("\\u2029"),
                c => out.push(c),
            }
        } else {
            match c {
                ' ' | '\t' | '\n' | '\r' => {}
                '"' => {
                    in_string = true;
                    out.push(c);
                }
                c => out.push(c),
            }
        }
    }
    out
}

/// Writes the node as compact JSON, Go style.
pub(crate) fn write_compact(out: &mut String, node: &Node) {
    match node {
        Node::Str(s) => write_string(out, s),
        Node::Int(n) => out.push_str(&n.to_string()),
        Node::UInt(n) => out.push_str(&n.to_string()),
        Node::Raw(raw) => out.push_str(&compact(raw, true)),
        Node::Obj(entries) => {
            out.push('{');
            for (i, (k, v)) in entries.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, k);
                out.push(':');
                write_compact(out, v);
            }
            out.push('}');
        }
        Node::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_compact(out, v);
            }
            out.push(']');
        }
    }
}

fn newline(out: &mut String, depth: usize) {
    out.push('\n');
    for _ in 0..depth {
        out.push_str("  ");
    }
}

/// Indents compact JSON text as Go's `json.Indent(dst, src, "", "  ")`.
pub(crate) fn indent(compact: &str) -> String {
    let mut out = String::with_capacity(compact.len() * 2);
    let mut need_indent = false;
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for c in compact.chars() {
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
        if need_indent && c != '}' && c != ']' {
            need_indent = false;
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                need_indent = true;
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            '}' | ']' => {
                if need_indent {
                    need_indent = false;
                } else {
                    depth = depth.saturating_sub(1);
                    newline(&mut out, depth);
                }
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// The node as Go's `MarshalIndent(v, "", "  ")` writes it, plus one `\n`.
pub(crate) fn to_indented(node: &Node) -> String {
    let mut compact_text = String::new();
    write_compact(&mut compact_text, node);
    let mut out = indent(&compact_text);
    out.push('\n');
    out
}

/// Every leaf of the node with its path (`a.b[2].c`), in document order, for
/// naming the first difference between two nodes.
pub(crate) fn leaves(node: &Node, path: &str, out: &mut Vec<(String, String)>) {
    match node {
        Node::Obj(entries) if !entries.is_empty() => {
            for (k, v) in entries {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                leaves(v, &p, out);
            }
        }
        Node::Arr(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, &format!("{path}[{i}]"), out);
            }
        }
        other => {
            let mut text = String::new();
            write_compact(&mut text, other);
            out.push((path.to_string(), text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> String {
        let mut out = String::new();
        write_string(&mut out, v);
        out
    }

    #[test]
    fn strings_are_escaped_as_go_escapes_them() {
        assert_eq!(s("plain"), r#""plain""#);
        assert_eq!(s("a<b>&c"), r#""a\u003cb\u003e\u0026c""#);
        assert_eq!(s("\u{2028}\u{2029}"), r#""\u2028\u2029""#);
        assert_eq!(s("\n\r\t\u{8}\u{c}"), r#""\n\r\t\b\f""#);
        assert_eq!(s("\u{0}\u{1}\u{1f}"), r#""\u0000\u0001\u001f""#);
        assert_eq!(s("\"\\/"), r#""\"\\/""#);
        assert_eq!(s("\u{7f}é—×😀"), "\"\u{7f}é—×😀\"");
    }

    #[test]
    fn compact_keeps_string_contents_and_escapes_html() {
        let raw = "{ \"a\" : [ 1 , 2.50 , \"x <y> \\\" & \\u00e9\" ],\n \"b\":{ } }";
        assert_eq!(
            compact(raw, false),
            r#"{"a":[1,2.50,"x <y> \" & \u00e9"],"b":{}}"#
        );
        assert_eq!(
            compact(raw, true),
            r#"{"a":[1,2.50,"x \u003cy\u003e \" \u0026 \u00e9"],"b":{}}"#
        );
        assert_eq!(compact("\"\u{2028}\"", true), r#""\u2028""#);
        assert_eq!(compact("\"a b\"", true), r#""a b""#);
    }

    #[test]
    fn indent_matches_go() {
        let got = indent(r#"{"a":[],"b":{},"c":[1,{"d":"x,y:{"}],"e":{"f":null}}"#);
        let want = "{\n  \"a\": [],\n  \"b\": {},\n  \"c\": [\n    1,\n    {\n      \"d\": \"x,y:{\"\n    }\n  ],\n  \"e\": {\n    \"f\": null\n  }\n}";
        assert_eq!(got, want);
    }

    #[test]
    fn omitempty_and_key_order() {
        let mut m = BTreeMap::new();
        m.insert("b".to_string(), 2i64);
        m.insert("a".to_string(), 1i64);
        let node = Obj::new()
            .str("z", "")
            .str_omit("y", "")
            .map_omit("m", &m, |v| Node::Int(*v))
            .map_omit("n", &BTreeMap::<String, i64>::new(), |v| Node::Int(*v))
            .strs_omit("notes", &[])
            .field("empty", Node::Arr(vec![]))
            .build();
        assert_eq!(
            to_indented(&node),
            "{\n  \"z\": \"\",\n  \"m\": {\n    \"a\": 1,\n    \"b\": 2\n  },\n  \"empty\": []\n}\n"
        );
    }
}
