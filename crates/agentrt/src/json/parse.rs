//! One-pass validating parser: bytes to a flat [`Tree`].
//!
//! The input's UTF-8 is validated first (invalid UTF-8 anywhere is reported
//! before any other problem). Then one pass checks grammar, escapes,
//! surrogates, number limits, depth and duplicate keys while building the
//! tree. The parser is iterative (an explicit stack of open containers), so
//! nesting costs heap, not call stack; the depth limit is enforced when a
//! bracket opens.

use std::borrow::Cow;

use super::scan::find_special;
use super::{JsonError, MAX_DEPTH, MAX_EXPONENT, MAX_NUMBER_CHARS};

/// A parsed JSON value in a flat arena.
///
/// Nodes are stored in post-order: every child has a smaller index than its
/// container, and the root is the last node.
#[derive(Debug)]
pub(crate) struct Tree<'a> {
    pub(crate) nodes: Vec<Node<'a>>,
    /// Children of arrays, each array owning a contiguous range.
    pub(crate) items: Vec<usize>,
    /// Members of objects (decoded key, value node), each object owning a
    /// contiguous range sorted by the key's UTF-8 bytes.
    pub(crate) members: Vec<(Cow<'a, str>, usize)>,
}

/// One JSON value. Strings are decoded; number literals are kept as written.
#[derive(Debug)]
pub(crate) enum Node<'a> {
    Null,
    True,
    False,
    Number(&'a str),
    Str(Cow<'a, str>),
    /// `items[start..end]`
    Array {
        start: usize,
        end: usize,
    },
    /// `members[start..end]`
    Object {
        start: usize,
        end: usize,
    },
}

impl<'a> Tree<'a> {
    /// Index of the root node.
    pub(crate) fn root(&self) -> usize {
        self.nodes.len().saturating_sub(1)
    }

    /// Parses and checks `input`. Blank input (empty or only JSON whitespace)
    /// yields a tree holding a single `null`.
    pub(crate) fn parse(input: &'a [u8]) -> Result<Tree<'a>, JsonError> {
        let text = std::str::from_utf8(input).map_err(|e| JsonError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        Tree::parse_str(text)
    }

    /// [`Tree::parse`] for text (already known to be UTF-8).
    pub(crate) fn parse_str(text: &'a str) -> Result<Tree<'a>, JsonError> {
        Parser::new(text).run()
    }
}

/// An open array or object.
struct Frame<'a> {
    is_object: bool,
    /// Where this container's children start in the matching scratch stack.
    scratch_start: usize,
    /// The key read for the member whose value is being parsed (objects only).
    key: Option<Cow<'a, str>>,
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    nodes: Vec<Node<'a>>,
    items: Vec<usize>,
    members: Vec<(Cow<'a, str>, usize)>,
    stack: Vec<Frame<'a>>,
    item_scratch: Vec<usize>,
    member_scratch: Vec<(Cow<'a, str>, usize)>,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn syntax(offset: usize, detail: &'static str) -> JsonError {
    JsonError::Syntax { offset, detail }
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        // A rough guess that avoids most regrowth for typical tool-call JSON
        // without over-allocating for large inputs.
        let guess = (bytes.len() / 8).min(1024);
        Parser {
            text,
            bytes,
            pos: 0,
            nodes: Vec::with_capacity(guess),
            items: Vec::new(),
            members: Vec::with_capacity(guess / 2),
            stack: Vec::new(),
            item_scratch: Vec::new(),
            member_scratch: Vec::new(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while let Some(&b) = self.bytes.get(self.pos) {
            if !is_ws(b) {
                break;
            }
            self.pos += 1;
        }
    }

    /// `text[start..end]`; both ends are at ASCII bytes or the end of the
    /// input, hence on char boundaries.
    fn slice(&self, start: usize, end: usize) -> Result<&'a str, JsonError> {
        // Unreachable error: the ends are char boundaries.
        self.text
            .get(start..end)
            .ok_or(JsonError::InvalidUtf8 { offset: start })
    }

    fn push(&mut self, node: Node<'a>) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn run(mut self) -> Result<Tree<'a>, JsonError> {
        self.skip_ws();
        if self.pos == self.bytes.len() {
            self.nodes.push(Node::Null);
            return Ok(self.finish());
        }
        'value: loop {
            let Some(mut done) = self.start_value()? else {
                // A container opened; its first value comes next.
                continue 'value;
            };

            // `done` is a complete value: attach it to the open container and
            // close containers for as long as their closing bracket follows.
            loop {
                let Some(frame) = self.stack.last_mut() else {
                    self.skip_ws();
                    if self.pos != self.bytes.len() {
                        return Err(JsonError::TrailingData { offset: self.pos });
                    }
                    return Ok(self.finish());
                };
                let is_object = frame.is_object;
                if is_object {
                    let key = frame.key.take().unwrap_or_default();
                    self.member_scratch.push((key, done));
                } else {
                    self.item_scratch.push(done);
                }
                self.skip_ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.skip_ws();
                        if is_object {
                            self.read_key()?;
                        }
                        continue 'value;
                    }
                    Some(b']') if !is_object => {
                        self.pos += 1;
                        done = self.close_array();
                    }
                    Some(b'}') if is_object => {
                        self.pos += 1;
                        done = self.close_object()?;
                    }
                    found => {
                        let detail = match (found, is_object) {
                            (None, false) => "unterminated array",
                            (None, true) => "unterminated object",
                            (Some(_), false) => "expected ',' or ']'",
                            (Some(_), true) => "expected ',' or '}'",
                        };
                        return Err(syntax(self.pos, detail));
                    }
                }
            }
        }
    }

    /// Reads the value starting at `pos` (whitespace already skipped).
    /// Returns its node, or `None` if it opened a non-empty container (whose
    /// first value, after its key for an object, starts at `pos`).
    fn start_value(&mut self) -> Result<Option<usize>, JsonError> {
        let node = match self.peek() {
            Some(open @ (b'[' | b'{')) => {
                if self.stack.len() >= MAX_DEPTH {
                    return Err(JsonError::TooDeep { max: MAX_DEPTH });
                }
                let is_object = open == b'{';
                self.pos += 1;
                self.skip_ws();
                let close = if is_object { b'}' } else { b']' };
                if self.peek() != Some(close) {
                    let scratch_start = if is_object {
                        self.member_scratch.len()
                    } else {
                        self.item_scratch.len()
                    };
                    self.stack.push(Frame {
                        is_object,
                        scratch_start,
                        key: None,
                    });
                    if is_object {
                        self.read_key()?;
                    }
                    return Ok(None);
                }
                self.pos += 1;
                if is_object {
                    let at = self.members.len();
                    Node::Object { start: at, end: at }
                } else {
                    let at = self.items.len();
                    Node::Array { start: at, end: at }
                }
            }
            Some(b'"') => Node::Str(self.read_string()?),
            Some(b'-' | b'0'..=b'9') => Node::Number(self.read_number()?),
            Some(b't') => {
                self.read_literal(b"true")?;
                Node::True
            }
            Some(b'f') => {
                self.read_literal(b"false")?;
                Node::False
            }
            Some(b'n') => {
                self.read_literal(b"null")?;
                Node::Null
            }
            Some(_) | None => return Err(syntax(self.pos, "expected a value")),
        };
        Ok(Some(self.push(node)))
    }

    fn finish(self) -> Tree<'a> {
        Tree {
            nodes: self.nodes,
            items: self.items,
            members: self.members,
        }
    }

    fn close_array(&mut self) -> usize {
        let start_scratch = self.stack.pop().map_or(0, |f| f.scratch_start);
        let start = self.items.len();
        self.items.extend(self.item_scratch.drain(start_scratch..));
        let end = self.items.len();
        self.push(Node::Array { start, end })
    }

    fn close_object(&mut self) -> Result<usize, JsonError> {
        let start_scratch = self.stack.pop().map_or(0, |f| f.scratch_start);
        let own = &mut self.member_scratch[start_scratch..];
        // `str` orders by UTF-8 bytes; keys are unique after the check below,
        // so an unstable sort is deterministic.
        own.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        if let Some(pair) = own.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(JsonError::DuplicateKey {
                key: pair[0].0.clone().into_owned(),
            });
        }
        let start = self.members.len();
        self.members
            .extend(self.member_scratch.drain(start_scratch..));
        let end = self.members.len();
        Ok(self.push(Node::Object { start, end }))
    }

    /// Reads `"key"` `:` and leaves `pos` at the start of the member's value.
    fn read_key(&mut self) -> Result<(), JsonError> {
        match self.peek() {
            Some(b'"') => {}
            Some(_) => {
                return Err(syntax(self.pos, "expected a string key"));
            }
            None => return Err(syntax(self.pos, "unterminated object")),
        }
        let key = self.read_string()?;
        self.skip_ws();
        match self.peek() {
            Some(b':') => self.pos += 1,
            _ => return Err(syntax(self.pos, "expected ':'")),
        }
        self.skip_ws();
        if let Some(frame) = self.stack.last_mut() {
            frame.key = Some(key);
        }
        Ok(())
    }

    fn read_literal(&mut self, word: &'static [u8]) -> Result<(), JsonError> {
        if self
            .bytes
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(word))
        {
            self.pos += word.len();
            Ok(())
        } else {
            Err(syntax(
                self.pos,
                "invalid literal (expected true, false or null)",
            ))
        }
    }

    /// Reads a number literal at `pos` and returns it as written.
    fn read_number(&mut self) -> Result<&'a str, JsonError> {
        let bytes = self.bytes;
        let start = self.pos;
        let mut i = start;
        let digits_from = |mut i: usize| {
            while bytes.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        if bytes.get(i) == Some(&b'-') {
            i += 1;
        }
        match bytes.get(i) {
            Some(b'0') => {
                i += 1;
                if bytes.get(i).is_some_and(u8::is_ascii_digit) {
                    return Err(syntax(i, "leading zero in number"));
                }
            }
            Some(b'1'..=b'9') => i = digits_from(i + 1),
            _ => return Err(syntax(i, "expected a digit")),
        }
        if bytes.get(i) == Some(&b'.') {
            i += 1;
            let end = digits_from(i);
            if end == i {
                return Err(syntax(i, "expected a digit after the decimal point"));
            }
            i = end;
        }
        let mut exponent: u64 = 0;
        if matches!(bytes.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(bytes.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            let end = digits_from(i);
            if end == i {
                return Err(syntax(i, "expected a digit in the exponent"));
            }
            for &d in &bytes[i..end] {
                // Saturate just past the limit: only "over or not" matters.
                exponent = (exponent * 10 + u64::from(d - b'0')).min(MAX_EXPONENT + 1);
            }
            i = end;
        }
        let length = i - start;
        if length > MAX_NUMBER_CHARS {
            return Err(JsonError::NumberTooLong {
                offset: start,
                length,
            });
        }
        if exponent > MAX_EXPONENT {
            return Err(JsonError::ExponentTooLarge { offset: start });
        }
        self.pos = i;
        self.slice(start, i)
    }

    /// Reads a string literal at `pos` (the opening quote) and returns it
    /// decoded: borrowed when it has no escapes.
    fn read_string(&mut self) -> Result<Cow<'a, str>, JsonError> {
        let bytes = self.bytes;
        let quote = self.pos;
        let mut i = quote + 1;
        let mut run_start = i;
        let mut owned: Option<String> = None;
        loop {
            i = find_special(bytes, i);
            let run = self.slice(run_start, i)?;
            match bytes.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(run),
                        Some(mut s) => {
                            s.push_str(run);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(b'\\') => {
                    let s = owned.get_or_insert_with(|| String::with_capacity(i - quote + 16));
                    s.push_str(run);
                    let (c, len) = decode_escape(bytes, i)?;
                    s.push(c);
                    i += len;
                    run_start = i;
                }
                Some(_) => return Err(syntax(i, "control character in string")),
                None => return Err(syntax(quote, "unterminated string")),
            }
        }
    }
}

/// Decodes the escape whose backslash is at `at`; returns the character and
/// the escape's length in bytes.
fn decode_escape(bytes: &[u8], at: usize) -> Result<(char, usize), JsonError> {
    let c = match bytes.get(at + 1) {
        Some(b'"') => '"',
        Some(b'\\') => '\\',
        Some(b'/') => '/',
        Some(b'b') => '\u{8}',
        Some(b'f') => '\u{c}',
        Some(b'n') => '\n',
        Some(b'r') => '\r',
        Some(b't') => '\t',
        Some(b'u') => return decode_unicode_escape(bytes, at),
        Some(_) => return Err(syntax(at, "invalid escape")),
        None => return Err(syntax(at, "unterminated string")),
    };
    Ok((c, 2))
}

/// Decodes `\uXXXX` (or a `\uXXXX\uXXXX` surrogate pair) at `at`.
fn decode_unicode_escape(bytes: &[u8], at: usize) -> Result<(char, usize), JsonError> {
    let unit = hex4(bytes, at + 2).ok_or_else(|| syntax(at, "invalid \\u escape"))?;
    let code = match unit {
        0xD800..=0xDBFF => {
            let low = if bytes.get(at + 6) == Some(&b'\\') && bytes.get(at + 7) == Some(&b'u') {
                hex4(bytes, at + 8).ok_or_else(|| syntax(at + 6, "invalid \\u escape"))?
            } else {
                return Err(JsonError::LoneSurrogate { offset: at });
            };
            if !(0xDC00..=0xDFFF).contains(&low) {
                return Err(JsonError::LoneSurrogate { offset: at });
            }
            let code = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
            return char::from_u32(code)
                .map(|c| (c, 12))
                .ok_or(JsonError::LoneSurrogate { offset: at });
        }
        0xDC00..=0xDFFF => return Err(JsonError::LoneSurrogate { offset: at }),
        other => other,
    };
    char::from_u32(code)
        .map(|c| (c, 6))
        .ok_or(JsonError::LoneSurrogate { offset: at })
}

/// Four hex digits (either case) at `at`.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let mut v = 0u32;
    for &d in digits {
        let n = match d {
            b'0'..=b'9' => d - b'0',
            b'a'..=b'f' => d - b'a' + 10,
            b'A'..=b'F' => d - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u32::from(n);
    }
    Some(v)
}
