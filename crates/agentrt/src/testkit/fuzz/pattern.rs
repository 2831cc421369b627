//! Strings from a schema's `pattern`, by proptest's regular-expression
//! strategy (`string_regex_parsed`) over the pattern as `regex-syntax`
//! parses it, seeded from the fuzzer's own generator so a seed gives the
//! same strings.
//!
//! Anchors and word boundaries (`^ $ \b \B \A \z`), which proptest does
//! not generate from, are dropped first: a JSON Schema pattern is
//! unanchored, so a whole match of the rest still matches, and a string
//! that an anchor in the middle of a pattern would refuse is caught by
//! the check every candidate goes through. Look-around and
//! back-references, which `regex-syntax` does not parse, are not
//! generated from: the caller falls back to random strings. `\d`, `\w`
//! and `\s` (and their negations) are read as ECMA-262 reads them, as
//! the runtime's check does: `\d` is `[0-9]`, not every Unicode digit.

use proptest::strategy::{Strategy, ValueTree};
use proptest::string::{RegexGeneratorStrategy, string_regex_parsed};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use regex_syntax::hir::{Hir, HirKind};

use super::rng::Rng;

/// A pattern proptest can generate strings from.
#[derive(Debug)]
pub(super) struct Pattern(RegexGeneratorStrategy<String>);

/// Deepest pattern generated from (a deeper one is left to random
/// strings; the rewrite below recurses).
const MAX_NESTING: u32 = 64;

/// Parses `p`; `None` if `regex-syntax` refuses it (look-around,
/// back-references, bad syntax) or it nests deeper than [`MAX_NESTING`].
pub(super) fn parse(p: &str) -> Option<Pattern> {
    let hir = regex_syntax::ParserBuilder::new()
        .nest_limit(MAX_NESTING)
        .build()
        .parse(&ecma_classes(p))
        .ok()?;
    string_regex_parsed(&without_looks(&hir)).ok().map(Pattern)
}

/// A string matching `pattern`, drawn with `rng` (`None` if proptest
/// cannot draw one).
pub(super) fn generate(pattern: &Pattern, rng: &mut Rng) -> Option<String> {
    let mut seed = [0u8; 32];
    for part in seed.chunks_exact_mut(8) {
        part.copy_from_slice(&rng.next().to_le_bytes());
    }
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    pattern
        .0
        .new_tree(&mut runner)
        .ok()
        .map(|tree| tree.current())
}

/// ECMA-262's `\d \w \s` (and negations) as `regex-syntax` classes (its
/// own are Unicode's); every other escape is kept as written. A class is
/// valid inside a class too (`[\d.]` becomes `[[0-9].]`, a union).
fn ecma_classes(p: &str) -> String {
    const SPACE: &str = "\\t\\n\\x0B\\x0C\\r \\u{A0}\\u{1680}\\u{2000}-\\u{200A}\\u{2028}\\u{2029}\\u{202F}\\u{205F}\\u{3000}\\u{FEFF}";
    let mut out = String::with_capacity(p.len());
    let mut chars = p.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => {
                out.push('[');
                out.push_str(SPACE);
                out.push(']');
            }
            Some('S') => {
                out.push_str("[^");
                out.push_str(SPACE);
                out.push(']');
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `hir` with every look-around assertion (anchors, word boundaries)
/// replaced by the empty match.
fn without_looks(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Look(_) => Hir::empty(),
        HirKind::Repetition(r) => {
            let mut r = r.clone();
            r.sub = Box::new(without_looks(&r.sub));
            Hir::repetition(r)
        }
        HirKind::Capture(c) => {
            let mut c = c.clone();
            c.sub = Box::new(without_looks(&c.sub));
            Hir::capture(c)
        }
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(without_looks).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(without_looks).collect()),
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => hir.clone(),
    }
}
