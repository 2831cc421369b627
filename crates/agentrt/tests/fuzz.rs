//! Property tests over the core's parsers of outside input (`cargo xtask
//! fuzz` runs this target with many more cases): the follower's cursor
//! file, which a user can edit.

use agentrt::follow::{CURSOR_TEXT_MAX, Cursor, CursorTextError, FileCursor, parse_cursor_text};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, RngSeed};

/// At least 10 000 cases (more when `PROPTEST_CASES` asks, as `cargo
/// xtask fuzz` does), a fixed seed unless `PROPTEST_RNG_SEED` names one,
/// and no regression files written.
fn fuzz_config() -> ProptestConfig {
    let base = ProptestConfig::default();
    let rng_seed = match base.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x0a9e_47e7),
        given => given,
    };
    ProptestConfig {
        cases: base.cases.max(10_000),
        rng_seed,
        failure_persistence: None,
        ..base
    }
}

/// What a cursor file's bytes mean, written apart from the parser: the
/// text as a string of ASCII digits and an optional newline, its value
/// in 128 bits.
fn expected(bytes: &[u8]) -> Result<i64, CursorTextError> {
    if bytes.len() > CURSOR_TEXT_MAX {
        return Err(CursorTextError::TooLong);
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text,
        Err(_) => return Err(CursorTextError::NotASeq),
    };
    let digits = text.strip_suffix('\n').unwrap_or(text);
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return Err(CursorTextError::NotASeq);
    }
    let value: u128 = digits.parse().map_err(|_| CursorTextError::TooLarge)?;
    i64::try_from(value).map_err(|_| CursorTextError::TooLarge)
}

/// One change to a valid cursor text.
#[derive(Debug, Clone)]
enum Mutation {
    Insert(usize, u8),
    Replace(usize, u8),
    Delete(usize),
    Prefix(&'static str),
    Suffix(&'static str),
    LeadingZeros(usize),
    MoreDigits(String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Replace(i, b)),
        any::<usize>().prop_map(Mutation::Delete),
        prop::sample::select(vec!["+", "-", " ", "\t", "0x", "\u{feff}", "\u{661}", "\n"])
            .prop_map(Mutation::Prefix),
        prop::sample::select(vec![
            "\n", "\r\n", "\n\n", " ", "\0", "e3", ".0", "\u{664}", "\u{ff11}", "\n1"
        ])
        .prop_map(Mutation::Suffix),
        (0usize..25).prop_map(Mutation::LeadingZeros),
        "[0-9]{1,25}".prop_map(Mutation::MoreDigits),
    ]
}

fn mutate(seq: i64, newline: bool, m: &Mutation) -> Vec<u8> {
    let mut text = seq.to_string().into_bytes();
    if newline {
        text.push(b'\n');
    }
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match m {
        Mutation::Insert(i, b) => {
            let i = at(*i, text.len() + 1);
            text.insert(i, *b);
        }
        Mutation::Replace(i, b) => {
            let i = at(*i, text.len());
            text[i] = *b;
        }
        Mutation::Delete(i) => {
            let i = at(*i, text.len());
            text.remove(i);
        }
        Mutation::Prefix(p) => text.splice(0..0, p.bytes()).for_each(drop),
        Mutation::Suffix(s) => text.extend_from_slice(s.as_bytes()),
        Mutation::LeadingZeros(n) => text
            .splice(0..0, std::iter::repeat_n(b'0', *n))
            .for_each(drop),
        Mutation::MoreDigits(d) => {
            let end = text.len() - usize::from(newline);
            text.splice(end..end, d.bytes()).for_each(drop);
        }
    }
    text
}

/// Any seq the follower may save, small ones more often.
fn seq() -> impl Strategy<Value = i64> {
    prop_oneof![0i64..1_000, 0i64..=i64::MAX, Just(i64::MAX), Just(0)]
}

/// Cursor file contents: arbitrary bytes, or a valid text with one change.
fn cursor_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..48),
        (seq(), any::<bool>(), mutation()).prop_map(|(s, nl, m)| mutate(s, nl, &m)),
        (seq(), any::<bool>())
            .prop_map(|(s, nl)| format!("{s}{}", if nl { "\n" } else { "" }).into_bytes()),
    ]
}

proptest! {
    #![proptest_config(fuzz_config())]

    /// Any bytes: a seq exactly when they are decimal digits (and one
    /// newline) within i64, otherwise the typed refusal that says why.
    #[test]
    fn a_cursor_text_is_a_seq_or_a_typed_refusal(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(parse_cursor_text(&bytes), expected(&bytes));
    }

    /// A valid text with one byte inserted, replaced or removed, a sign,
    /// spaces, `\r\n`, leading zeros, non-ASCII digits or digits past
    /// i64: the same answer as the model.
    #[test]
    fn a_cursor_text_changed_once_is_judged_like_the_model(
        seq in seq(),
        newline in any::<bool>(),
        m in mutation(),
    ) {
        let bytes = mutate(seq, newline, &m);
        prop_assert_eq!(parse_cursor_text(&bytes), expected(&bytes));
    }

    /// What the cursor writes (`{seq}\n`) reads back as the same seq,
    /// with or without the newline.
    #[test]
    fn every_seq_written_reads_back(seq in 0i64..=i64::MAX) {
        prop_assert_eq!(parse_cursor_text(format!("{seq}\n").as_bytes()), Ok(seq));
        prop_assert_eq!(parse_cursor_text(seq.to_string().as_bytes()), Ok(seq));
    }

    /// A real file: `FileCursor::load` gives the seq its bytes parse to,
    /// and refuses (as a cursor-file error) what they do not.
    #[test]
    fn a_cursor_file_loads_what_its_bytes_parse_to(bytes in cursor_bytes()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cursor");
        std::fs::write(&path, &bytes).unwrap();
        let loaded = FileCursor::new(&path).load();
        match parse_cursor_text(&bytes) {
            Ok(seq) => prop_assert_eq!(loaded.ok(), Some(seq)),
            Err(_) => {
                let e = loaded.expect_err("refused like its text");
                prop_assert!(e.to_string().contains("cursor file"), "{}", e);
            }
        }
    }
}

/// A few real round trips through `save` (each one syncs a file and its
/// directory: too slow for 10 000 cases): the edges of the seq range.
#[test]
fn a_saved_cursor_loads_back_at_the_edges() {
    let dir = tempfile::tempdir().unwrap();
    let mut cursor = FileCursor::new(dir.path().join("cursor"));
    for seq in [0, 1, 9, 10, 99, 1 << 40, i64::MAX - 1, i64::MAX] {
        cursor.save(seq).unwrap();
        assert_eq!(cursor.load().unwrap(), seq);
    }
}
