//! Strings from simple regular expressions: literals, `.`, classes (with
//! ranges and negation), `\d \w \s` and their negations, escapes, groups
//! (plain, non-capturing, named), alternation, `* + ? {n} {n,} {n,m}` (lazy
//! or not), anchors `^ $ \b \A \z`. Anything else (look-around,
//! back-references, Unicode classes, flags) is not generated from.

use super::rng::Rng;

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Node {
    /// Matches the empty string (anchors).
    Empty,
    Lit(char),
    /// One character of these ranges (or, negated, outside them).
    Set {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
    /// Any character but a newline.
    Any,
    /// One of several sequences.
    Alt(Vec<Vec<Node>>),
    Repeat {
        node: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

const DIGIT: &[(char, char)] = &[('0', '9')];
const WORD: &[(char, char)] = &[('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
const SPACE: &[(char, char)] = &[(' ', ' '), ('\t', '\r')];
/// Longest counted repetition generated from.
const MAX_COUNT: u32 = 10_000;

/// What an escape stands for.
enum Esc {
    Char(char),
    Set(&'static [(char, char)], bool),
    Empty,
}

/// Parses `p`; `None` if it uses anything outside the subset.
pub(super) fn parse(p: &str) -> Option<Node> {
    let mut parser = Parser {
        chars: p.chars().collect(),
        pos: 0,
        depth: 0,
    };
    let node = parser.alternation()?;
    (parser.pos == parser.chars.len()).then_some(node)
}

/// A string matching `node` (`None` if a negated class has no printable
/// ASCII member).
pub(super) fn generate(node: &Node, rng: &mut Rng) -> Option<String> {
    let mut out = String::new();
    emit(node, rng, &mut out)?;
    Some(out)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn alternation(&mut self) -> Option<Node> {
        self.depth += 1;
        if self.depth > 32 {
            return None;
        }
        let mut branches = vec![self.sequence()?];
        while self.eat('|') {
            branches.push(self.sequence()?);
        }
        self.depth -= 1;
        Some(Node::Alt(branches))
    }

    fn sequence(&mut self) -> Option<Vec<Node>> {
        let mut seq = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let atom = self.atom()?;
            seq.push(self.quantified(atom)?);
        }
        Some(seq)
    }

    fn atom(&mut self) -> Option<Node> {
        match self.bump()? {
            '(' => self.group(),
            '[' => self.class(),
            '.' => Some(Node::Any),
            '^' | '$' => Some(Node::Empty),
            '\\' => Some(match self.escape(false)? {
                Esc::Char(c) => Node::Lit(c),
                Esc::Set(ranges, negated) => Node::Set {
                    ranges: ranges.to_vec(),
                    negated,
                },
                Esc::Empty => Node::Empty,
            }),
            '*' | '+' | '?' | '{' | ')' => None,
            c => Some(Node::Lit(c)),
        }
    }

    fn group(&mut self) -> Option<Node> {
        if self.eat('?') {
            match self.bump()? {
                ':' => {}
                'P' if self.eat('<') => self.skip_name()?,
                '<' if !matches!(self.peek(), Some('=' | '!')) => self.skip_name()?,
                _ => return None,
            }
        }
        let inner = self.alternation()?;
        self.eat(')').then_some(inner)
    }

    fn skip_name(&mut self) -> Option<()> {
        while self.bump()? != '>' {}
        Some(())
    }

    fn escape(&mut self, in_class: bool) -> Option<Esc> {
        let c = self.bump()?;
        Some(match c {
            'd' => Esc::Set(DIGIT, false),
            'D' => Esc::Set(DIGIT, true),
            'w' => Esc::Set(WORD, false),
            'W' => Esc::Set(WORD, true),
            's' => Esc::Set(SPACE, false),
            'S' => Esc::Set(SPACE, true),
            'n' => Esc::Char('\n'),
            't' => Esc::Char('\t'),
            'r' => Esc::Char('\r'),
            'f' => Esc::Char('\u{c}'),
            'v' => Esc::Char('\u{b}'),
            'x' => Esc::Char(self.hex(2)?),
            'u' => Esc::Char(self.hex(4)?),
            'b' | 'B' | 'A' | 'z' if !in_class => Esc::Empty,
            c if c.is_ascii_alphanumeric() => return None,
            c => Esc::Char(c),
        })
    }

    /// `HH…` (`n` digits) or `{H…}`.
    fn hex(&mut self, n: usize) -> Option<char> {
        let mut text = String::new();
        if self.eat('{') {
            loop {
                match self.bump()? {
                    '}' => break,
                    c => text.push(c),
                }
            }
        } else {
            for _ in 0..n {
                text.push(self.bump()?);
            }
        }
        char::from_u32(u32::from_str_radix(&text, 16).ok()?)
    }

    fn class(&mut self) -> Option<Node> {
        let negated = self.eat('^');
        let mut ranges = Vec::new();
        let mut first = true;
        loop {
            let c = self.bump()?;
            if c == ']' && !first {
                break;
            }
            first = false;
            if c == '[' {
                return None;
            }
            let lo = match self.class_char(c)? {
                Esc::Char(ch) => ch,
                Esc::Set(set, false) => {
                    ranges.extend_from_slice(set);
                    continue;
                }
                _ => return None,
            };
            let is_range =
                self.peek() == Some('-') && self.chars.get(self.pos + 1).is_some_and(|n| *n != ']');
            if is_range {
                self.pos += 1;
                let c = self.bump()?;
                let Esc::Char(hi) = self.class_char(c)? else {
                    return None;
                };
                if hi < lo {
                    return None;
                }
                ranges.push((lo, hi));
            } else {
                ranges.push((lo, lo));
            }
        }
        Some(Node::Set { ranges, negated })
    }

    fn class_char(&mut self, c: char) -> Option<Esc> {
        if c == '\\' {
            self.escape(true)
        } else {
            Some(Esc::Char(c))
        }
    }

    fn quantified(&mut self, atom: Node) -> Option<Node> {
        let (min, max) = match self.peek() {
            Some('*') => (0, None),
            Some('+') => (1, None),
            Some('?') => (0, Some(1)),
            Some('{') => return self.counted(atom),
            _ => return Some(atom),
        };
        self.pos += 1;
        self.eat('?');
        Some(repeat(atom, min, max))
    }

    /// `{n}`, `{n,}` or `{n,m}` after an atom.
    fn counted(&mut self, atom: Node) -> Option<Node> {
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.bump()? {
                '}' => break,
                c => text.push(c),
            }
        }
        let number = |s: &str| s.trim().parse::<u32>().ok().filter(|n| *n <= MAX_COUNT);
        let (min, max) = match text.split_once(',') {
            None => {
                let n = number(&text)?;
                (n, Some(n))
            }
            Some((lo, "")) => (number(lo)?, None),
            Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
        };
        if max.is_some_and(|m| m < min) {
            return None;
        }
        self.eat('?');
        Some(repeat(atom, min, max))
    }
}

fn repeat(node: Node, min: u32, max: Option<u32>) -> Node {
    Node::Repeat {
        node: Box::new(node),
        min,
        max,
    }
}

fn emit(node: &Node, rng: &mut Rng, out: &mut String) -> Option<()> {
    match node {
        Node::Empty => {}
        Node::Lit(c) => out.push(*c),
        Node::Any => out.push(printable(rng)),
        Node::Set { ranges, negated } => out.push(pick_char(ranges, *negated, rng)?),
        Node::Alt(branches) => {
            for n in rng.pick(branches)? {
                emit(n, rng, out)?;
            }
        }
        Node::Repeat { node, min, max } => {
            let extra = max.map_or(4, |m| m.saturating_sub(*min).min(8));
            let times = u64::from(*min) + rng.below(u64::from(extra) + 1);
            for _ in 0..times {
                emit(node, rng, out)?;
            }
        }
    }
    Some(())
}

fn printable(rng: &mut Rng) -> char {
    char::from_u32(0x20 + u32::try_from(rng.below(95)).unwrap_or(0)).unwrap_or('a')
}

fn pick_char(ranges: &[(char, char)], negated: bool, rng: &mut Rng) -> Option<char> {
    let inside = |c: char| ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi);
    if negated {
        return (0..64).map(|_| printable(rng)).find(|c| !inside(*c));
    }
    let sizes: Vec<u64> = ranges
        .iter()
        .map(|(lo, hi)| u64::from(*hi as u32 - *lo as u32) + 1)
        .collect();
    for _ in 0..8 {
        let mut at = rng.below(sizes.iter().sum());
        for ((lo, _), size) in ranges.iter().zip(&sizes) {
            if at < *size {
                let code = (*lo as u32).saturating_add(u32::try_from(at).unwrap_or(0));
                match char::from_u32(code) {
                    Some(c) => return Some(c),
                    None => break, // a surrogate: draw again
                }
            }
            at -= size;
        }
    }
    None
}
