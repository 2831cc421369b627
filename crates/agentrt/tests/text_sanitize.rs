//! Property tests for `agentrt::text`: what `sanitize` lets through to a
//! terminal, and the size guarantees of `clip`, `truncate` and
//! `cap_with_count`.

use agentrt::text::{cap_with_count, clip, sanitize, sanitize_bytes, truncate};
use proptest::prelude::*;

/// Bidi controls and invisible characters that must never reach a terminal
/// (the list of the specification; the tag block is checked as a range).
const LISTED_INVISIBLE: &[u32] = &[
    0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x061C, 0x200E, 0x200F,
    0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF, 0x00AD, 0x180E, 0x2028,
    0x2029,
];

/// Combining-mark ranges the generator draws from (all Mn, so the cap
/// applies to every one of them).
const MARK_RANGES: &[(u32, u32)] = &[
    (0x0300, 0x036F),
    (0x0483, 0x0489),
    (0x0591, 0x05BD),
    (0x064B, 0x065F),
    (0x0E34, 0x0E3A),
    (0x1AB0, 0x1ABD),
    (0x1DC0, 0x1DFF),
    (0x20D0, 0x20F0),
    (0xFE00, 0xFE0F),
    (0xFE20, 0xFE2F),
    (0xE0100, 0xE01EF),
];

const NOTE_PREFIX: &str = "[+";
const NOTE_SUFFIX: &str = " combining marks dropped]";

fn to_char(cp: u32) -> char {
    char::from_u32(cp).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// True for what must never appear in sanitized output.
fn is_forbidden(c: char) -> bool {
    let cp = u32::from(c);
    cp < 0x20
        || cp == 0x7F
        || (0x80..=0x9F).contains(&cp)
        || LISTED_INVISIBLE.contains(&cp)
        || (0xE0000..=0xE007F).contains(&cp)
}

fn is_generated_mark(c: char) -> bool {
    let cp = u32::from(c);
    MARK_RANGES.iter().any(|&(lo, hi)| (lo..=hi).contains(&cp))
}

fn mark() -> impl Strategy<Value = char> {
    prop::sample::select(MARK_RANGES)
        .prop_flat_map(|(lo, hi)| lo..=hi)
        .prop_map(to_char)
}

/// Letters of several scripts and emoji: never escaped, never marks.
fn safe_base() -> impl Strategy<Value = char> {
    prop_oneof![
        0x20u32..=0x7E,
        (0x00C0u32..=0x00FF).prop_filter("not x/÷", |cp| *cp != 0xD7 && *cp != 0xF7),
        0x05D0u32..=0x05EA,
        0x0621u32..=0x063A,
        0x0915u32..=0x0939,
        0x0E01u32..=0x0E30,
        0x4E00u32..=0x9FFF,
        0x1F600u32..=0x1F64F,
    ]
    .prop_map(to_char)
}

/// Any char, biased towards the ones `sanitize` has to deal with.
fn hazardous_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => any::<char>(),
        3 => safe_base(),
        3 => (0u32..0xA0).prop_map(to_char),
        3 => prop::sample::select(LISTED_INVISIBLE).prop_map(to_char),
        1 => (0x2000u32..=0x206F).prop_map(to_char),
        1 => (0xE0000u32..=0xE007F).prop_map(to_char),
        1 => Just('\\'),
        4 => mark(),
    ]
}

fn hazardous_text() -> impl Strategy<Value = String> {
    prop::collection::vec(hazardous_char(), 0..64).prop_map(|v| v.into_iter().collect())
}

/// Text of letters and combining marks only (no escapes involved).
fn base_and_marks_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop_oneof![2 => safe_base(), 3 => mark()], 0..64)
        .prop_map(|v| v.into_iter().collect())
}

/// Real-looking text: letters with at most four marks each.
fn safe_text() -> impl Strategy<Value = String> {
    prop::collection::vec((safe_base(), prop::collection::vec(mark(), 0..=4)), 0..32).prop_map(
        |clusters| {
            let mut s = String::new();
            for (base, marks) in clusters {
                s.push(base);
                s.extend(marks);
            }
            s
        },
    )
}

/// Bytes mixing arbitrary bytes, UTF-8 of hazardous chars, and UTF-8
/// sequences with their last byte cut off.
fn hazardous_bytes() -> impl Strategy<Value = Vec<u8>> {
    let chunk = prop_oneof![
        any::<u8>().prop_map(|b| vec![b]),
        hazardous_char().prop_map(|c| c.to_string().into_bytes()),
        hazardous_char().prop_map(|c| {
            let mut v = c.to_string().into_bytes();
            if v.len() > 1 {
                v.pop();
            }
            v
        }),
    ];
    prop::collection::vec(chunk, 0..48).prop_map(|chunks| chunks.concat())
}

fn assert_clean(out: &str) -> Result<(), TestCaseError> {
    for c in out.chars() {
        prop_assert!(!is_forbidden(c), "U+{:04X} in {:?}", u32::from(c), out);
    }
    Ok(())
}

/// Checks that `head` is the longest prefix of `full` that fits in `limit`
/// bytes without splitting a char.
fn assert_longest_prefix(full: &str, head: &str, limit: usize) -> Result<(), TestCaseError> {
    prop_assert!(
        full.starts_with(head),
        "{head:?} is not a prefix of {full:?}"
    );
    prop_assert!(head.len() <= limit);
    if let Some(next) = full.get(head.len()..).and_then(|rest| rest.chars().next()) {
        prop_assert!(
            head.len() + next.len_utf8() > limit,
            "could keep {next:?} too"
        );
    }
    Ok(())
}

/// Checks a cut made by `truncate` (or `clip`, after sanitizing): at most
/// `n` bytes, a prefix of `full` plus `…` when there is room for it.
fn assert_cut(full: &str, out: &str, n: usize) -> Result<(), TestCaseError> {
    prop_assert!(out.len() <= n, "{} > {n}", out.len());
    if full.len() <= n {
        prop_assert_eq!(out, full);
    } else if n < 3 {
        assert_longest_prefix(full, out, n)?;
    } else {
        let head = out.strip_suffix('…');
        prop_assert!(head.is_some(), "{out:?} lacks the ellipsis");
        assert_longest_prefix(full, head.unwrap_or_default(), n - 3)?;
    }
    Ok(())
}

/// Total of the N in every `[+N combining marks dropped]` note of `out`.
fn dropped_in_notes(out: &str) -> usize {
    out.split(NOTE_PREFIX)
        .skip(1)
        .filter_map(|part| part.split_once(NOTE_SUFFIX))
        .filter_map(|(n, _)| n.parse::<usize>().ok())
        .sum()
}

proptest! {
    /// Sanitized output holds no C0 control, DEL, C1 control, listed bidi or
    /// invisible char, tag char, and hence no '\n' or '\r'.
    #[test]
    fn output_has_no_controls_or_invisibles(s in hazardous_text()) {
        assert_clean(&sanitize(&s))?;
    }

    /// A field stays on one line: '\n' and '\r' each turn into a space.
    #[test]
    fn output_stays_on_one_line(s in hazardous_text()) {
        let out = sanitize(&s);
        prop_assert!(!out.contains('\n') && !out.contains('\r'));
        let breaks_and_spaces = s.chars().filter(|c| matches!(c, '\n' | '\r' | ' ')).count();
        prop_assert!(out.chars().filter(|c| *c == ' ').count() >= breaks_and_spaces);
    }

    /// Escapes are printable ASCII and a backslash passes through, so a
    /// second pass changes nothing.
    #[test]
    fn sanitize_is_idempotent(s in hazardous_text()) {
        let once = sanitize(&s);
        prop_assert_eq!(sanitize(&once), once);
    }

    /// Printable ASCII is returned unchanged (the fast path).
    #[test]
    fn printable_ascii_is_unchanged(s in "[ -~]{0,100}") {
        prop_assert_eq!(sanitize(&s), s);
    }

    /// Letters of real scripts with at most four marks each are unchanged.
    #[test]
    fn text_with_at_most_four_marks_per_base_is_unchanged(s in safe_text()) {
        prop_assert_eq!(sanitize(&s), s);
    }

    /// No run of more than four combining marks survives, and every mark is
    /// either kept or counted in a note.
    #[test]
    fn combining_runs_are_capped_and_counted(s in base_and_marks_text()) {
        let out = sanitize(&s);
        let mut run = 0usize;
        for c in out.chars() {
            run = if is_generated_mark(c) { run + 1 } else { 0 };
            prop_assert!(run <= 4, "more than 4 marks in a row in {out:?}");
        }
        let marks_in = s.chars().filter(|c| is_generated_mark(*c)).count();
        let marks_out = out.chars().filter(|c| is_generated_mark(*c)).count();
        prop_assert_eq!(marks_in, marks_out + dropped_in_notes(&out));
    }

    /// Arbitrary bytes never panic, come out clean, and are sanitized as
    /// their lossy UTF-8 decoding.
    #[test]
    fn sanitize_bytes_handles_any_bytes(b in hazardous_bytes()) {
        let out = sanitize_bytes(&b);
        assert_clean(&out)?;
        prop_assert_eq!(&out, &sanitize(&String::from_utf8_lossy(&b)));
        if let Ok(s) = std::str::from_utf8(&b) {
            prop_assert_eq!(&out, &sanitize(s));
        }
    }

    /// Purely random bytes (no bias) never panic either.
    #[test]
    fn sanitize_bytes_never_panics(b in prop::collection::vec(any::<u8>(), 0..256)) {
        assert_clean(&sanitize_bytes(&b))?;
    }

    /// `clip` is at most n bytes, a cut of the sanitized text, and clean.
    #[test]
    fn clip_fits_and_is_a_prefix_of_the_sanitized_text(s in hazardous_text(), n in 0usize..96) {
        let out = clip(&s, n);
        assert_cut(&sanitize(&s), &out, n)?;
        assert_clean(&out)?;
        prop_assert_eq!(&out, &truncate(&sanitize(&s), n));
    }

    /// `truncate` is at most n bytes and a cut of the input itself.
    #[test]
    fn truncate_fits_and_is_a_prefix(s in hazardous_text(), n in 0usize..96) {
        assert_cut(&s, &truncate(&s, n), n)?;
    }

    /// `cap_with_count` keeps the longest prefix of at most n bytes and
    /// counts the bytes it left out.
    #[test]
    fn cap_with_count_keeps_a_prefix_and_counts_the_rest(s in hazardous_text(), n in 0usize..96) {
        let out = cap_with_count(&s, n);
        if s.len() <= n {
            prop_assert_eq!(out, s);
        } else {
            let (head, tail) = out.rsplit_once("… [").unwrap_or_default();
            assert_longest_prefix(&s, head, n)?;
            prop_assert_eq!(tail, format!("{} more bytes]", s.len() - head.len()));
        }
    }
}
