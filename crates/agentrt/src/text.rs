//! Terminal-safe text: escaping untrusted strings and cutting them to size.
//!
//! Any text that a model, a policy, a tool or an MCP server could have chosen
//! goes through [`sanitize`] (or [`clip`], which sanitizes first) before it is
//! written to a terminal or into operator-facing prose. JSON output is never
//! escaped this way: serde_json already escapes what JSON needs.
//!
//! The rules, applied one `char` at a time:
//!
//! | input | output |
//! | --- | --- |
//! | invalid UTF-8 (only via [`sanitize_bytes`]) | U+FFFD |
//! | `\n`, `\r` | one space each, so a field stays on one line |
//! | other C0 controls (incl. `\t`, ESC), DEL, C1 controls U+0080–U+009F | `\xHH` (lowercase hex of the code point) |
//! | bidi controls, invisible format characters, U+2028/U+2029, tags U+E0000–U+E007F | `\u{xxxx}` (lowercase hex, at least 4 digits) |
//! | more than 4 consecutive combining marks | the first 4, then `[+N combining marks dropped]` |
//! | anything else | unchanged |
//!
//! Escapes are plain printable ASCII and a backslash passes through
//! unchanged, so `sanitize(&sanitize(x)) == sanitize(&x)`.
//!
//! [`truncate`] and [`cap_with_count`] only shorten text (for model-facing
//! text and for capped CLI fields); they never split a `char`.

use std::cmp::Ordering;
use std::fmt::Write as _;

/// The ellipsis appended by [`clip`], [`truncate`] and [`cap_with_count`].
const ELLIPSIS: &str = "\u{2026}";

/// How many combining marks in a row are kept; the rest of the run is dropped.
const MAX_COMBINING_RUN: usize = 4;

/// Code points printed as `\u{xxxx}`: sorted, disjoint, inclusive ranges.
///
/// Required by the specification:
/// - U+00AD soft hyphen; U+061C arabic letter mark; U+180E mongolian vowel
///   separator;
/// - U+200B–U+200F zero width space, ZWNJ, ZWJ, LRM, RLM;
/// - U+2028 line separator, U+2029 paragraph separator, U+202A–U+202E
///   LRE, RLE, PDF, LRO, RLO;
/// - U+2060–U+2064 word joiner, function application, invisible times,
///   invisible separator, invisible plus;
/// - U+2066–U+2069 LRI, RLI, FSI, PDI;
/// - U+FEFF zero width no-break space (BOM);
/// - U+E0000–U+E007F the whole tag block (language tag, tag characters,
///   cancel tag, and its unassigned code points).
///
/// Added because they are general category Cf and render invisibly:
/// - U+206A–U+206F deprecated format characters (inhibit/activate symmetric
///   swapping, inhibit/activate arabic form shaping, national/nominal digit
///   shapes);
/// - U+FFF9–U+FFFB interlinear annotation anchor, separator, terminator;
/// - U+13430–U+1343F egyptian hieroglyph format controls;
/// - U+1BCA0–U+1BCA3 shorthand format letter overlap, continuing overlap,
///   down step, up step;
/// - U+1D173–U+1D17A musical symbol begin/end beam, tie, slur, phrase.
///
/// Deliberately NOT escaped: the visible Cf "prepended concatenation marks"
/// (U+0600–U+0605, U+06DD, U+070F, U+0890–U+0891, U+08E2, U+110BD, U+110CD),
/// the unassigned U+2065, and invisible characters of other categories
/// (Hangul fillers U+115F, U+1160, U+3164, U+FFA0 are Lo; U+034F combining
/// grapheme joiner and the variation selectors U+FE00–U+FE0F and
/// U+E0100–U+E01EF are Mn, so the combining-mark cap bounds them instead).
const ESCAPED_INVISIBLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),
    (0x061C, 0x061C),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0000, 0xE007F),
];

/// Combining marks for the run cap: sorted, disjoint, inclusive ranges.
///
/// Every code point of general category Mn (nonspacing mark) or Me
/// (enclosing mark) in Unicode 16.0, adjacent ranges merged, plus the whole
/// of the combining blocks U+0300–U+036F, U+1AB0–U+1AFF, U+1DC0–U+1DFF,
/// U+20D0–U+20FF and U+FE20–U+FE2F (their unassigned tails included, as any
/// future character there is a combining mark). Mc (spacing marks) are not
/// included: they take up a column of their own and cannot pile up.
///
/// This covers among others Hebrew points and cantillation (U+0591–U+05C7),
/// Arabic harakat (U+0610–U+061A, U+064B–U+065F, U+0670, U+06D6–U+06ED),
/// Devanagari (U+0900–U+0902, U+093A, U+093C, U+0941–U+0948, U+094D,
/// U+0951–U+0957, U+0962–U+0963), Thai (U+0E31, U+0E34–U+0E3A,
/// U+0E47–U+0E4E), the variation selectors and the keycap U+20E3.
#[rustfmt::skip]
const COMBINING_MARKS: &[(u32, u32)] = &[
    (0x0300, 0x036F), (0x0483, 0x0489), (0x0591, 0x05BD), (0x05BF, 0x05BF), (0x05C1, 0x05C2),
    (0x05C4, 0x05C5), (0x05C7, 0x05C7), (0x0610, 0x061A), (0x064B, 0x065F), (0x0670, 0x0670),
    (0x06D6, 0x06DC), (0x06DF, 0x06E4), (0x06E7, 0x06E8), (0x06EA, 0x06ED), (0x0711, 0x0711),
    (0x0730, 0x074A), (0x07A6, 0x07B0), (0x07EB, 0x07F3), (0x07FD, 0x07FD), (0x0816, 0x0819),
    (0x081B, 0x0823), (0x0825, 0x0827), (0x0829, 0x082D), (0x0859, 0x085B), (0x0897, 0x089F),
    (0x08CA, 0x08E1), (0x08E3, 0x0902), (0x093A, 0x093A), (0x093C, 0x093C), (0x0941, 0x0948),
    (0x094D, 0x094D), (0x0951, 0x0957), (0x0962, 0x0963), (0x0981, 0x0981), (0x09BC, 0x09BC),
    (0x09C1, 0x09C4), (0x09CD, 0x09CD), (0x09E2, 0x09E3), (0x09FE, 0x09FE), (0x0A01, 0x0A02),
    (0x0A3C, 0x0A3C), (0x0A41, 0x0A42), (0x0A47, 0x0A48), (0x0A4B, 0x0A4D), (0x0A51, 0x0A51),
    (0x0A70, 0x0A71), (0x0A75, 0x0A75), (0x0A81, 0x0A82), (0x0ABC, 0x0ABC), (0x0AC1, 0x0AC5),
    (0x0AC7, 0x0AC8), (0x0ACD, 0x0ACD), (0x0AE2, 0x0AE3), (0x0AFA, 0x0AFF), (0x0B01, 0x0B01),
    (0x0B3C, 0x0B3C), (0x0B3F, 0x0B3F), (0x0B41, 0x0B44), (0x0B4D, 0x0B4D), (0x0B55, 0x0B56),
    (0x0B62, 0x0B63), (0x0B82, 0x0B82), (0x0BC0, 0x0BC0), (0x0BCD, 0x0BCD), (0x0C00, 0x0C00),
    (0x0C04, 0x0C04), (0x0C3C, 0x0C3C), (0x0C3E, 0x0C40), (0x0C46, 0x0C48), (0x0C4A, 0x0C4D),
    (0x0C55, 0x0C56), (0x0C62, 0x0C63), (0x0C81, 0x0C81), (0x0CBC, 0x0CBC), (0x0CBF, 0x0CBF),
    (0x0CC6, 0x0CC6), (0x0CCC, 0x0CCD), (0x0CE2, 0x0CE3), (0x0D00, 0x0D01), (0x0D3B, 0x0D3C),
    (0x0D41, 0x0D44), (0x0D4D, 0x0D4D), (0x0D62, 0x0D63), (0x0D81, 0x0D81), (0x0DCA, 0x0DCA),
    (0x0DD2, 0x0DD4), (0x0DD6, 0x0DD6), (0x0E31, 0x0E31), (0x0E34, 0x0E3A), (0x0E47, 0x0E4E),
    (0x0EB1, 0x0EB1), (0x0EB4, 0x0EBC), (0x0EC8, 0x0ECE), (0x0F18, 0x0F19), (0x0F35, 0x0F35),
    (0x0F37, 0x0F37), (0x0F39, 0x0F39), (0x0F71, 0x0F7E), (0x0F80, 0x0F84), (0x0F86, 0x0F87),
    (0x0F8D, 0x0F97), (0x0F99, 0x0FBC), (0x0FC6, 0x0FC6), (0x102D, 0x1030), (0x1032, 0x1037),
    (0x1039, 0x103A), (0x103D, 0x103E), (0x1058, 0x1059), (0x105E, 0x1060), (0x1071, 0x1074),
    (0x1082, 0x1082), (0x1085, 0x1086), (0x108D, 0x108D), (0x109D, 0x109D), (0x135D, 0x135F),
    (0x1712, 0x1714), (0x1732, 0x1733), (0x1752, 0x1753), (0x1772, 0x1773), (0x17B4, 0x17B5),
    (0x17B7, 0x17BD), (0x17C6, 0x17C6), (0x17C9, 0x17D3), (0x17DD, 0x17DD), (0x180B, 0x180D),
    (0x180F, 0x180F), (0x1885, 0x1886), (0x18A9, 0x18A9), (0x1920, 0x1922), (0x1927, 0x1928),
    (0x1932, 0x1932), (0x1939, 0x193B), (0x1A17, 0x1A18), (0x1A1B, 0x1A1B), (0x1A56, 0x1A56),
    (0x1A58, 0x1A5E), (0x1A60, 0x1A60), (0x1A62, 0x1A62), (0x1A65, 0x1A6C), (0x1A73, 0x1A7C),
    (0x1A7F, 0x1A7F), (0x1AB0, 0x1B03), (0x1B34, 0x1B34), (0x1B36, 0x1B3A), (0x1B3C, 0x1B3C),
    (0x1B42, 0x1B42), (0x1B6B, 0x1B73), (0x1B80, 0x1B81), (0x1BA2, 0x1BA5), (0x1BA8, 0x1BA9),
    (0x1BAB, 0x1BAD), (0x1BE6, 0x1BE6), (0x1BE8, 0x1BE9), (0x1BED, 0x1BED), (0x1BEF, 0x1BF1),
    (0x1C2C, 0x1C33), (0x1C36, 0x1C37), (0x1CD0, 0x1CD2), (0x1CD4, 0x1CE0), (0x1CE2, 0x1CE8),
    (0x1CED, 0x1CED), (0x1CF4, 0x1CF4), (0x1CF8, 0x1CF9), (0x1DC0, 0x1DFF), (0x20D0, 0x20FF),
    (0x2CEF, 0x2CF1), (0x2D7F, 0x2D7F), (0x2DE0, 0x2DFF), (0x302A, 0x302D), (0x3099, 0x309A),
    (0xA66F, 0xA672), (0xA674, 0xA67D), (0xA69E, 0xA69F), (0xA6F0, 0xA6F1), (0xA802, 0xA802),
    (0xA806, 0xA806), (0xA80B, 0xA80B), (0xA825, 0xA826), (0xA82C, 0xA82C), (0xA8C4, 0xA8C5),
    (0xA8E0, 0xA8F1), (0xA8FF, 0xA8FF), (0xA926, 0xA92D), (0xA947, 0xA951), (0xA980, 0xA982),
    (0xA9B3, 0xA9B3), (0xA9B6, 0xA9B9), (0xA9BC, 0xA9BD), (0xA9E5, 0xA9E5), (0xAA29, 0xAA2E),
    (0xAA31, 0xAA32), (0xAA35, 0xAA36), (0xAA43, 0xAA43), (0xAA4C, 0xAA4C), (0xAA7C, 0xAA7C),
    (0xAAB0, 0xAAB0), (0xAAB2, 0xAAB4), (0xAAB7, 0xAAB8), (0xAABE, 0xAABF), (0xAAC1, 0xAAC1),
    (0xAAEC, 0xAAED), (0xAAF6, 0xAAF6), (0xABE5, 0xABE5), (0xABE8, 0xABE8), (0xABED, 0xABED),
    (0xFB1E, 0xFB1E), (0xFE00, 0xFE0F), (0xFE20, 0xFE2F), (0x101FD, 0x101FD), (0x102E0, 0x102E0),
    (0x10376, 0x1037A), (0x10A01, 0x10A03), (0x10A05, 0x10A06), (0x10A0C, 0x10A0F),
    (0x10A38, 0x10A3A), (0x10A3F, 0x10A3F), (0x10AE5, 0x10AE6), (0x10D24, 0x10D27),
    (0x10D69, 0x10D6D), (0x10EAB, 0x10EAC), (0x10EFC, 0x10EFF), (0x10F46, 0x10F50),
    (0x10F82, 0x10F85), (0x11001, 0x11001), (0x11038, 0x11046), (0x11070, 0x11070),
    (0x11073, 0x11074), (0x1107F, 0x11081), (0x110B3, 0x110B6), (0x110B9, 0x110BA),
    (0x110C2, 0x110C2), (0x11100, 0x11102), (0x11127, 0x1112B), (0x1112D, 0x11134),
    (0x11173, 0x11173), (0x11180, 0x11181), (0x111B6, 0x111BE), (0x111C9, 0x111CC),
    (0x111CF, 0x111CF), (0x1122F, 0x11231), (0x11234, 0x11234), (0x11236, 0x11237),
    (0x1123E, 0x1123E), (0x11241, 0x11241), (0x112DF, 0x112DF), (0x112E3, 0x112EA),
    (0x11300, 0x11301), (0x1133B, 0x1133C), (0x11340, 0x11340), (0x11366, 0x1136C),
    (0x11370, 0x11374), (0x113BB, 0x113C0), (0x113CE, 0x113CE), (0x113D0, 0x113D0),
    (0x113D2, 0x113D2), (0x113E1, 0x113E2), (0x11438, 0x1143F), (0x11442, 0x11444),
    (0x11446, 0x11446), (0x1145E, 0x1145E), (0x114B3, 0x114B8), (0x114BA, 0x114BA),
    (0x114BF, 0x114C0), (0x114C2, 0x114C3), (0x115B2, 0x115B5), (0x115BC, 0x115BD),
    (0x115BF, 0x115C0), (0x115DC, 0x115DD), (0x11633, 0x1163A), (0x1163D, 0x1163D),
    (0x1163F, 0x11640), (0x116AB, 0x116AB), (0x116AD, 0x116AD), (0x116B0, 0x116B5),
    (0x116B7, 0x116B7), (0x1171D, 0x1171D), (0x1171F, 0x1171F), (0x11722, 0x11725),
    (0x11727, 0x1172B), (0x1182F, 0x11837), (0x11839, 0x1183A), (0x1193B, 0x1193C),
    (0x1193E, 0x1193E), (0x11943, 0x11943), (0x119D4, 0x119D7), (0x119DA, 0x119DB),
    (0x119E0, 0x119E0), (0x11A01, 0x11A0A), (0x11A33, 0x11A38), (0x11A3B, 0x11A3E),
    (0x11A47, 0x11A47), (0x11A51, 0x11A56), (0x11A59, 0x11A5B), (0x11A8A, 0x11A96),
    (0x11A98, 0x11A99), (0x11C30, 0x11C36), (0x11C38, 0x11C3D), (0x11C3F, 0x11C3F),
    (0x11C92, 0x11CA7), (0x11CAA, 0x11CB0), (0x11CB2, 0x11CB3), (0x11CB5, 0x11CB6),
    (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D), (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D95), (0x11D97, 0x11D97),
    (0x11EF3, 0x11EF4), (0x11F00, 0x11F01), (0x11F36, 0x11F3A), (0x11F40, 0x11F40),
    (0x11F42, 0x11F42), (0x11F5A, 0x11F5A), (0x13440, 0x13440), (0x13447, 0x13455),
    (0x1611E, 0x16129), (0x1612D, 0x1612F), (0x16AF0, 0x16AF4), (0x16B30, 0x16B36),
    (0x16F4F, 0x16F4F), (0x16F8F, 0x16F92), (0x16FE4, 0x16FE4), (0x1BC9D, 0x1BC9E),
    (0x1CF00, 0x1CF2D), (0x1CF30, 0x1CF46), (0x1D167, 0x1D169), (0x1D17B, 0x1D182),
    (0x1D185, 0x1D18B), (0x1D1AA, 0x1D1AD), (0x1D242, 0x1D244), (0x1DA00, 0x1DA36),
    (0x1DA3B, 0x1DA6C), (0x1DA75, 0x1DA75), (0x1DA84, 0x1DA84), (0x1DA9B, 0x1DA9F),
    (0x1DAA1, 0x1DAAF), (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E08F, 0x1E08F), (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E4EC, 0x1E4EF), (0x1E5EE, 0x1E5EF),
    (0x1E8D0, 0x1E8D6), (0x1E944, 0x1E94A), (0xE0100, 0xE01EF),
];

/// `error` and its causes (its `source()` chain), joined by `: `; a cause
/// whose text the message already ends with is not repeated. For messages
/// of errors from a library whose top level says only what failed
/// ("error performing TLS handshake"), not why.
///
/// ```
/// #[derive(Debug)]
/// struct Handshake(std::io::Error);
/// impl std::fmt::Display for Handshake {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         f.write_str("error performing TLS handshake")
///     }
/// }
/// impl std::error::Error for Handshake {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
/// let refused = Handshake(std::io::Error::other("invalid peer certificate"));
/// assert_eq!(
///     agentrt::text::with_causes(&refused),
///     "error performing TLS handshake: invalid peer certificate"
/// );
/// ```
pub fn with_causes(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// Escapes `s` for a terminal or operator-facing prose (see the module docs
/// for the exact rules). Never fails, never panics.
///
/// A string of printable ASCII only (0x20..=0x7E) is returned as a copy
/// without further work.
///
/// ```
/// use agentrt::text::sanitize;
///
/// assert_eq!(sanitize("plain text"), "plain text");
/// assert_eq!(sanitize("two\nlines"), "two lines");
/// assert_eq!(sanitize("\x1b[31mred"), "\\x1b[31mred");
/// assert_eq!(sanitize("evil\u{202e}txt.exe"), "evil\\u{202e}txt.exe");
/// assert_eq!(sanitize("שָׁלוֹם"), "שָׁלוֹם");
/// ```
pub fn sanitize(s: &str) -> String {
    if is_printable_ascii(s) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() + s.len() / 4 + 8);
    // Length of the current run of combining marks, and how many of its
    // marks were dropped so far.
    let mut run = 0usize;
    let mut dropped = 0usize;
    for c in s.chars() {
        if is_combining_mark(c) {
            if run < MAX_COMBINING_RUN {
                out.push(c);
                run += 1;
            } else {
                dropped += 1;
            }
            continue;
        }
        push_dropped_note(&mut out, dropped);
        run = 0;
        dropped = 0;
        push_escaped(&mut out, c);
    }
    push_dropped_note(&mut out, dropped);
    out
}

/// Like [`sanitize`], for bytes that may not be valid UTF-8: each invalid
/// sequence becomes U+FFFD first (as [`String::from_utf8_lossy`] does).
///
/// ```
/// use agentrt::text::sanitize_bytes;
///
/// assert_eq!(sanitize_bytes(b"ok\xffthen\tgo"), "ok\u{fffd}then\\x09go");
/// ```
pub fn sanitize_bytes(b: &[u8]) -> String {
    sanitize(&String::from_utf8_lossy(b))
}

/// Sanitizes `s` (so newlines are already spaces), then, if the result is
/// longer than `max_bytes`, cuts it to at most `max_bytes` bytes including a
/// trailing `…` (U+2026, 3 bytes), never splitting a `char`.
///
/// For `max_bytes < 3` there is no room for the ellipsis: the result is then
/// the longest prefix of at most `max_bytes` bytes. The result is never
/// longer than `max_bytes`.
///
/// ```
/// use agentrt::text::clip;
///
/// assert_eq!(clip("hello\nworld", 100), "hello world");
/// assert_eq!(clip("hello world", 8), "hello…");
/// assert_eq!(clip("hello world", 2), "he");
/// ```
pub fn clip(s: &str, max_bytes: usize) -> String {
    let clean = sanitize(s);
    if clean.len() <= max_bytes {
        return clean;
    }
    truncate(&clean, max_bytes)
}

/// Cuts `s` to at most `max_bytes` bytes including a trailing `…` (U+2026,
/// 3 bytes), never splitting a `char`; `s` is returned unchanged when it
/// fits. Unlike [`clip`] it does not sanitize: it is meant for model-facing
/// text, never for a terminal.
///
/// For `max_bytes < 3` the result is the longest prefix of at most
/// `max_bytes` bytes, without the ellipsis.
///
/// ```
/// use agentrt::text::truncate;
///
/// assert_eq!(truncate("short", 10), "short");
/// assert_eq!(truncate("日本語です", 9), "日本…");
/// assert_eq!(truncate("a\nb\nc\nd", 6), "a\nb…");
/// ```
pub fn truncate(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let Some(room) = max_bytes.checked_sub(ELLIPSIS.len()) else {
        return floor_prefix(s, max_bytes).to_owned();
    };
    let head = floor_prefix(s, room);
    let mut out = String::with_capacity(head.len() + ELLIPSIS.len());
    out.push_str(head);
    out.push_str(ELLIPSIS);
    out
}

/// If `s` is longer than `max_bytes`, returns its first bytes (at most
/// `max_bytes`, cut on a `char` boundary) followed by `… [K more bytes]`,
/// where K is the number of bytes left out; otherwise `s` unchanged. Does
/// not sanitize. The CLI caps goals and details this way at 4000 bytes.
///
/// ```
/// use agentrt::text::cap_with_count;
///
/// assert_eq!(cap_with_count("abcdef", 10), "abcdef");
/// assert_eq!(cap_with_count("abcdef", 4), "abcd… [2 more bytes]");
/// assert_eq!(cap_with_count("日本語", 4), "日… [6 more bytes]");
/// ```
pub fn cap_with_count(s: &str, max_bytes: usize) -> String {
    if s.len() <= max_bytes {
        return s.to_owned();
    }
    let head = floor_prefix(s, max_bytes);
    let more = s.len() - head.len();
    format!("{head}{ELLIPSIS} [{more} more bytes]")
}

/// True when every byte is printable ASCII (0x20..=0x7E): the fast path.
fn is_printable_ascii(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, 0x20..=0x7e))
}

/// The longest prefix of `s` of at most `max_bytes` bytes that ends on a
/// `char` boundary.
fn floor_prefix(s: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(s.len());
    // Index 0 is always a boundary, so this stops before underflowing.
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// Appends `c` to `out`, escaped if it is a newline, a control or an
/// invisible character. Combining marks are handled by the caller.
fn push_escaped(out: &mut String, c: char) {
    let cp = u32::from(c);
    match c {
        '\n' | '\r' => out.push(' '),
        '\0'..='\x1f' | '\x7f'..='\u{9f}' => {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\x{cp:02x}");
        }
        _ if in_table(ESCAPED_INVISIBLE, cp) => {
            let _ = write!(out, "\\u{{{cp:04x}}}");
        }
        _ => out.push(c),
    }
}

/// Appends the note for `dropped` combining marks, if any were dropped.
fn push_dropped_note(out: &mut String, dropped: usize) {
    if dropped > 0 {
        let _ = write!(out, "[+{dropped} combining marks dropped]");
    }
}

/// True for the combining marks of [`COMBINING_MARKS`].
fn is_combining_mark(c: char) -> bool {
    let cp = u32::from(c);
    // The first combining mark is U+0300: skip the search for Latin-1.
    cp >= 0x0300 && in_table(COMBINING_MARKS, cp)
}

/// True when `cp` lies in one of the sorted, disjoint, inclusive `ranges`.
fn in_table(ranges: &[(u32, u32)], cp: u32) -> bool {
    ranges
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                Ordering::Less
            } else if lo > cp {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The code points the specification requires to be shown as `\u{xxxx}`.
    const REQUIRED_INVISIBLE: &[u32] = &[
        0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x061C, 0x200E,
        0x200F, 0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x00AD,
        0x180E, 0x2028, 0x2029,
    ];

    /// Invisible Cf characters this module adds to the required set.
    const ADDED_INVISIBLE: &[u32] = &[
        0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F, 0xFFF9, 0xFFFA, 0xFFFB, 0x13430, 0x1343F,
        0x1BCA0, 0x1BCA3, 0x1D173, 0x1D17A,
    ];

    fn ch(cp: u32) -> char {
        char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER)
    }

    fn marks(n: usize) -> String {
        "\u{301}".repeat(n)
    }

    #[test]
    fn printable_ascii_is_returned_unchanged() {
        let all: String = (0x20u8..=0x7e).map(char::from).collect();
        assert_eq!(sanitize(&all), all);
        assert_eq!(sanitize(""), "");
        assert_eq!(sanitize(r"C:\path\x1b \u{202e}"), r"C:\path\x1b \u{202e}");
    }

    #[test]
    fn newline_and_carriage_return_become_one_space_each() {
        assert_eq!(sanitize("a\nb"), "a b");
        assert_eq!(sanitize("a\rb"), "a b");
        assert_eq!(sanitize("a\r\nb\n\n"), "a  b  ");
        assert_eq!(sanitize("é\né"), "é é");
    }

    #[test]
    fn c0_controls_including_tab_and_esc_become_hex() {
        assert_eq!(sanitize("\t"), "\\x09");
        assert_eq!(
            sanitize("\x1b[2J\x1b]0;title\x07"),
            "\\x1b[2J\\x1b]0;title\\x07"
        );
        assert_eq!(sanitize("\0"), "\\x00");
        for b in (0x00u8..0x20).filter(|b| *b != b'\n' && *b != b'\r') {
            let input = char::from(b).to_string();
            assert_eq!(sanitize(&input), format!("\\x{b:02x}"), "byte {b:#04x}");
        }
    }

    #[test]
    fn del_becomes_hex() {
        assert_eq!(sanitize("\x7f"), "\\x7f");
        assert_eq!(sanitize("a\x7fb"), "a\\x7fb");
    }

    #[test]
    fn c1_controls_become_hex_of_the_code_point() {
        assert_eq!(sanitize("\u{85}"), "\\x85");
        assert_eq!(sanitize("\u{9b}31m"), "\\x9b31m");
        for cp in 0x80u32..=0x9f {
            assert_eq!(sanitize(&ch(cp).to_string()), format!("\\x{cp:02x}"));
        }
        // U+00A0 (no-break space) is not a control and passes through.
        assert_eq!(sanitize("\u{a0}"), "\u{a0}");
    }

    #[test]
    fn each_required_invisible_or_bidi_char_becomes_u_escape() {
        for &cp in REQUIRED_INVISIBLE {
            let input = format!("a{}b", ch(cp));
            assert_eq!(sanitize(&input), format!("a\\u{{{cp:04x}}}b"), "U+{cp:04X}");
        }
        assert_eq!(sanitize("\u{202e}"), "\\u{202e}");
        assert_eq!(sanitize("\u{ad}"), "\\u{00ad}");
        assert_eq!(sanitize("\u{61c}"), "\\u{061c}");
        assert_eq!(sanitize("\u{feff}x"), "\\u{feff}x");
        assert_eq!(sanitize("\u{2028}\u{2029}"), "\\u{2028}\\u{2029}");
    }

    #[test]
    fn the_whole_tag_block_becomes_u_escape() {
        assert_eq!(sanitize("\u{e0041}"), "\\u{e0041}");
        for cp in 0xE0000u32..=0xE007F {
            assert_eq!(sanitize(&ch(cp).to_string()), format!("\\u{{{cp:x}}}"));
        }
        // A flag tag sequence keeps its base emoji, tags made visible.
        assert_eq!(
            sanitize("🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}"),
            "🏴\\u{e0067}\\u{e0062}\\u{e0073}\\u{e0063}\\u{e0074}\\u{e007f}"
        );
    }

    #[test]
    fn added_invisible_format_chars_become_u_escape() {
        for &cp in ADDED_INVISIBLE {
            assert_eq!(sanitize(&ch(cp).to_string()), format!("\\u{{{cp:04x}}}"));
        }
    }

    #[test]
    fn visible_format_chars_and_neighbours_pass_through() {
        // Prepended concatenation marks (Cf but visible), the unassigned
        // U+2065, the hyphen U+2010 and the ellipsis next to the ranges.
        for s in [
            "\u{600}١٢",
            "\u{6dd}",
            "\u{70f}",
            "\u{110bd}",
            "\u{2010}",
            "\u{2026}",
            "\u{2065}",
        ] {
            assert_eq!(sanitize(s), s);
        }
    }

    #[test]
    fn invalid_utf8_becomes_replacement_character() {
        assert_eq!(sanitize_bytes(b"ok\xff\xfeend"), "ok\u{fffd}\u{fffd}end");
        assert_eq!(sanitize_bytes(b"cut \xe2\x82"), "cut \u{fffd}");
        assert_eq!(sanitize_bytes(b"\xc0\x80"), "\u{fffd}\u{fffd}");
        assert_eq!(sanitize_bytes(b"\xed\xa0\x80"), "\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(sanitize_bytes(b"\x1b\xff\n"), "\\x1b\u{fffd} ");
        assert_eq!(sanitize_bytes("valid é".as_bytes()), "valid é");
    }

    #[test]
    fn four_combining_marks_are_kept() {
        let s = format!("a{}b", marks(4));
        assert_eq!(sanitize(&s), s);
        let mixed = "e\u{300}\u{1dc0}\u{20d0}\u{fe20}";
        assert_eq!(sanitize(mixed), mixed);
    }

    #[test]
    fn seven_combining_marks_keep_four_and_note_three() {
        let s = format!("a{}", marks(7));
        assert_eq!(
            sanitize(&s),
            format!("a{}[+3 combining marks dropped]", marks(4))
        );
        let s = format!("a{}b", marks(7));
        assert_eq!(
            sanitize(&s),
            format!("a{}[+3 combining marks dropped]b", marks(4))
        );
        let s = format!("a{}b", marks(5));
        assert_eq!(
            sanitize(&s),
            format!("a{}[+1 combining marks dropped]b", marks(4))
        );
    }

    #[test]
    fn combining_cap_applies_per_base_and_without_base() {
        let s = format!("{}x{}y{}", marks(6), marks(9), marks(2));
        let want = format!(
            "{m4}[+2 combining marks dropped]x{m4}[+5 combining marks dropped]y{m2}",
            m4 = marks(4),
            m2 = marks(2)
        );
        assert_eq!(sanitize(&s), want);
        // Zalgo text drawn from several combining blocks.
        let zalgo = "Z\u{36b}\u{346}\u{352}\u{1ab0}\u{1dc4}\u{20d2}\u{fe22}\u{489}";
        assert_eq!(
            sanitize(zalgo),
            "Z\u{36b}\u{346}\u{352}\u{1ab0}[+4 combining marks dropped]"
        );
        // A newline or an escaped char ends the run like any base.
        let s = format!("a{}\n{}", marks(4), marks(4));
        assert_eq!(sanitize(&s), format!("a{} {}", marks(4), marks(4)));
    }

    #[test]
    fn variation_selector_smuggling_is_capped() {
        let hidden: String = (0xE0100u32..0xE0110).map(ch).collect();
        let s = format!("😀{hidden}");
        let kept: String = (0xE0100u32..0xE0104).map(ch).collect();
        assert_eq!(
            sanitize(&s),
            format!("😀{kept}[+12 combining marks dropped]")
        );
    }

    #[test]
    fn zwj_emoji_sequence_shows_its_joiners() {
        assert_eq!(sanitize("👩\u{200d}💻"), "👩\\u{200d}💻");
        assert_eq!(
            sanitize("👨\u{200d}👩\u{200d}👧"),
            "👨\\u{200d}👩\\u{200d}👧"
        );
    }

    #[test]
    fn real_scripts_and_emoji_print_unchanged() {
        for s in [
            "مرحبا بالعالم",
            "بِسْمِ ٱللَّهِ ٱلرَّحْمَٰنِ ٱلرَّحِيمِ",
            "مَرْحَبًا",
            "שָׁלוֹם",
            "בְּרֵאשִׁית בָּרָא",
            "नमस्ते",
            "हिन्दी क्षत्रिय",
            "สวัสดี",
            "ภาษาไทย ที่นี่",
            "你好世界",
            "こんにちは、世界",
            "안녕하세요",
            "é",
            "e\u{301}",
            "Tiê\u{323}\u{302}ng Viê\u{323}t",
            "ñandú Ελληνικά Привет",
            "བཀྲ་ཤིས་བདེ་ལེགས།",
            "🙂",
            "👍🏽",
            "🇫🇷",
            "❤\u{fe0f}",
            "1\u{fe0f}\u{20e3}",
            "…",
        ] {
            assert_eq!(sanitize(s), s, "{s}");
        }
    }

    #[test]
    fn tables_are_sorted_disjoint_and_do_not_overlap() {
        for table in [ESCAPED_INVISIBLE, COMBINING_MARKS] {
            for &(lo, hi) in table {
                assert!(lo <= hi, "{lo:#x}..={hi:#x}");
            }
            for pair in table.windows(2) {
                assert!(pair[0].1 + 1 < pair[1].0, "{pair:x?} not sorted/merged");
            }
        }
        for &(lo, hi) in ESCAPED_INVISIBLE {
            for cp in lo..=hi {
                assert!(!in_table(COMBINING_MARKS, cp), "U+{cp:04X} in both tables");
            }
        }
        assert!(in_table(COMBINING_MARKS, 0x300));
        assert!(in_table(COMBINING_MARKS, 0x36f));
        assert!(in_table(COMBINING_MARKS, 0xe01ef));
        assert!(!in_table(COMBINING_MARKS, 0x2ff));
        assert!(!in_table(COMBINING_MARKS, 0x093e)); // Devanagari vowel sign AA is Mc.
    }

    #[test]
    fn clip_sanitizes_then_cuts_with_ellipsis() {
        assert_eq!(clip("hello\nworld", 100), "hello world");
        assert_eq!(clip("hello world", 11), "hello world");
        assert_eq!(clip("hello world", 10), "hello w…");
        assert_eq!(clip("hello world", 8), "hello…");
        assert_eq!(clip("hello world", 3), "…");
        assert_eq!(clip("\x1b[2J", 100), "\\x1b[2J");
        // The escape makes the text longer; the cut applies to the result.
        assert_eq!(clip("\u{202e}abc", 8), "\\u{20…");
        // Never splits a char: "é" is 2 bytes.
        assert_eq!(clip("héllo", 5), "h…");
        assert_eq!(clip("héllo!", 6), "hé…");
    }

    #[test]
    fn clip_below_ellipsis_size_returns_a_bare_prefix() {
        assert_eq!(clip("hello", 2), "he");
        assert_eq!(clip("hello", 1), "h");
        assert_eq!(clip("hello", 0), "");
        assert_eq!(clip("日本", 2), "");
        assert_eq!(clip("\t", 2), "\\x");
    }

    #[test]
    fn truncate_cuts_without_sanitizing() {
        assert_eq!(truncate("a\nb", 10), "a\nb");
        assert_eq!(truncate("\x1b[31m", 4), "\x1b…");
        assert_eq!(truncate("exact", 5), "exact");
        assert_eq!(truncate("日本語", 8), "日…");
        assert_eq!(truncate("日本語", 6), "日…");
        assert_eq!(truncate("日本語", 5), "…");
        assert_eq!(truncate("日本語", 2), "");
        assert_eq!(truncate("abc", 0), "");
        assert_eq!(truncate("abcd", 2), "ab");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn cap_with_count_counts_the_bytes_left_out() {
        assert_eq!(cap_with_count("abcdef", 6), "abcdef");
        assert_eq!(cap_with_count("abcdef", 4), "abcd… [2 more bytes]");
        assert_eq!(cap_with_count("abcdef", 0), "… [6 more bytes]");
        assert_eq!(cap_with_count("日本語", 4), "日… [6 more bytes]");
        let long = "x".repeat(4005);
        let capped = cap_with_count(&long, 4000);
        assert!(capped.starts_with(&"x".repeat(4000)));
        assert_eq!(capped.get(4000..), Some("… [5 more bytes]"));
        // Does not sanitize: callers that print it sanitize first.
        assert_eq!(cap_with_count("a\nb", 10), "a\nb");
    }

    #[test]
    fn sanitize_is_idempotent_on_examples() {
        for s in [
            "\x1b[31m\u{202e}\n\t",
            "a\u{301}\u{301}\u{301}\u{301}\u{301}\u{301}",
            "👩\u{200d}💻 \u{85} \u{e0041}",
        ] {
            let once = sanitize(s);
            assert_eq!(sanitize(&once), once);
        }
    }
}
