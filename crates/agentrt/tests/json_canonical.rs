//! Property tests of canonical JSON (`agentrt::json`).
//!
//! Arbitrary JSON trees are rendered in random spellings (whitespace, member
//! order, escaping) and must canonicalise to the same bytes, which must equal
//! an independent reference rendering of the tree.

use std::collections::BTreeMap;

use agentrt::json::{Canonical, JsonError, check_boundary};
use proptest::prelude::*;

/// A JSON value as generated; numbers are literal spellings.
#[derive(Debug, Clone)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

// ---- generation -----------------------------------------------------------

fn json_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => prop::sample::select(vec![
            'a', 'b', 'B', 'z', ' ', 'é', '"', '\\', '/', '\u{0}', '\u{1}', '\u{1f}', '\n', '\t', '\u{8}',
            '\u{c}', '\r', '\u{7f}', '\u{80}', '\u{2028}', '\u{2029}', '€', '\u{ffff}', '\u{e000}', '😀',
            '\u{10000}', '\u{10ffff}', '<', '&', '\'',
        ]),
        1 => any::<char>(),
    ]
}

fn json_string(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(json_char(), 0..max).prop_map(|cs| cs.into_iter().collect())
}

fn digits(min: usize, max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(0u8..10, min..max)
        .prop_map(|ds| ds.iter().map(|d| char::from(b'0' + d)).collect())
}

/// Number literals in varied spellings, within `f64` range so that
/// `serde_json` can read them too.
fn json_number() -> impl Strategy<Value = String> {
    let int = prop_oneof![
        1 => Just("0".to_owned()),
        3 => (1u8..10, digits(0, 20)).prop_map(|(d, rest)| format!("{d}{rest}")),
    ];
    let exp = (
        prop::sample::select(vec!["e", "E"]),
        prop::sample::select(vec!["", "+", "-"]),
        0usize..3,
        0u32..=250,
    )
        .prop_map(|(e, sign, zeros, v)| format!("{e}{sign}{}{v}", "0".repeat(zeros)));
    (
        any::<bool>(),
        int,
        prop::option::of(digits(1, 10)),
        prop::option::of(exp),
    )
        .prop_map(|(neg, int, frac, exp)| {
            let mut s = String::new();
            if neg {
                s.push('-');
            }
            s.push_str(&int);
            if let Some(f) = frac {
                s.push('.');
                s.push_str(&f);
            }
            s.push_str(&exp.unwrap_or_default());
            s
        })
}

fn json_tree() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        json_number().prop_map(J::Num),
        json_string(12).prop_map(J::Str),
    ];
    // Depth at most 6 levels of containers.
    leaf.prop_recursive(6, 128, 8, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(J::Arr),
            // A map makes keys unique; the renderer shuffles the order.
            prop::collection::btree_map(json_string(4), inner, 0..6)
                .prop_map(|m: BTreeMap<String, J>| J::Obj(m.into_iter().collect())),
        ]
    })
}

// ---- rendering ------------------------------------------------------------

/// splitmix64: a tiny deterministic generator for spelling choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn ws(rng: &mut Rng, out: &mut String) {
    const WS: [&str; 6] = ["", "", " ", "\t", "\r\n", " \n  "];
    out.push_str(WS[rng.below(WS.len())]);
}

fn u_escape(rng: &mut Rng, unit: u32, out: &mut String) {
    if rng.below(2) == 0 {
        out.push_str(&format!("\\u{unit:04x}"));
    } else {
        out.push_str(&format!("\\u{unit:04X}"));
    }
}

/// A string literal with a random escaping choice per character.
fn spell_string(rng: &mut Rng, s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        let short = match c {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '/' => Some("\\/"),
            '\u{8}' => Some("\\b"),
            '\u{c}' => Some("\\f"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            _ => None,
        };
        let raw_ok = !matches!(c, '"' | '\\') && u32::from(c) >= 0x20;
        match rng.below(3) {
            0 if raw_ok => out.push(c),
            1 if short.is_some() => out.push_str(short.unwrap_or_default()),
            _ => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    u_escape(rng, u32::from(*unit), out);
                }
            }
        }
    }
    out.push('"');
}

/// One random spelling of `j`.
fn spell(rng: &mut Rng, j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => spell_string(rng, s, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                ws(rng, out);
                if i > 0 {
                    out.push(',');
                    ws(rng, out);
                }
                spell(rng, item, out);
            }
            ws(rng, out);
            out.push(']');
        }
        J::Obj(members) => {
            let mut order: Vec<usize> = (0..members.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i + 1));
            }
            out.push('{');
            for (n, &i) in order.iter().enumerate() {
                ws(rng, out);
                if n > 0 {
                    out.push(',');
                    ws(rng, out);
                }
                let (k, v) = &members[i];
                spell_string(rng, k, out);
                ws(rng, out);
                out.push(':');
                ws(rng, out);
                spell(rng, v, out);
            }
            ws(rng, out);
            out.push('}');
        }
    }
}

fn spelling(j: &J, seed: u64) -> String {
    let mut rng = Rng(seed);
    let mut out = String::new();
    ws(&mut rng, &mut out);
    spell(&mut rng, j, &mut out);
    ws(&mut rng, &mut out);
    out
}

/// The expected canonical text, written independently of the library.
fn reference(j: &J, out: &mut String) {
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(s) => reference_string(s, out),
        J::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                reference(item, out);
            }
            out.push(']');
        }
        J::Obj(members) => {
            let mut sorted: Vec<&(String, J)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                reference_string(k, out);
                out.push(':');
                reference(v, out);
            }
            out.push('}');
        }
    }
}

fn reference_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Adds a member repeating an existing key to the `pick`-th non-empty object
/// (pre-order), or wraps the tree in an object with a repeated key if there
/// is none. Returns the repeated key.
fn add_duplicate(j: &mut J, pick: usize, value: J) -> String {
    fn count(j: &J) -> usize {
        match j {
            J::Arr(items) => items.iter().map(count).sum(),
            J::Obj(members) => {
                usize::from(!members.is_empty())
                    + members.iter().map(|(_, v)| count(v)).sum::<usize>()
            }
            _ => 0,
        }
    }
    fn visit(j: &mut J, target: &mut usize, pick: usize, value: &mut Option<J>) -> Option<String> {
        match j {
            J::Arr(items) => items.iter_mut().find_map(|i| visit(i, target, pick, value)),
            J::Obj(members) => {
                if !members.is_empty() {
                    if *target == 0 {
                        let key = members[pick % members.len()].0.clone();
                        members.push((key.clone(), value.take().unwrap_or(J::Null)));
                        return Some(key);
                    }
                    *target -= 1;
                }
                members
                    .iter_mut()
                    .find_map(|(_, v)| visit(v, target, pick, value))
            }
            _ => None,
        }
    }
    let objects = count(j);
    if objects == 0 {
        let inner = std::mem::replace(j, J::Null);
        *j = J::Obj(vec![("k".to_owned(), inner), ("k".to_owned(), value)]);
        return "k".to_owned();
    }
    let mut target = pick % objects;
    visit(j, &mut target, pick, &mut Some(value)).unwrap_or_default()
}

fn canonical(input: &[u8]) -> Result<Canonical, JsonError> {
    let parsed = Canonical::parse(input);
    // The standalone check must agree with parsing, error for error.
    assert_eq!(
        check_boundary(input),
        parsed.as_ref().map(drop).map_err(Clone::clone)
    );
    parsed
}

// ---- properties -----------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn spellings_agree_and_match_the_reference(j in json_tree(), s1 in any::<u64>(), s2 in any::<u64>()) {
        let a = spelling(&j, s1);
        let b = spelling(&j, s2);
        let ca = canonical(a.as_bytes());
        let cb = canonical(b.as_bytes());
        prop_assert!(ca.is_ok(), "{a:?} refused: {ca:?}");
        let (ca, cb) = (ca.unwrap(), cb.unwrap());
        prop_assert_eq!(ca.as_bytes(), cb.as_bytes());
        prop_assert_eq!(ca.hash(), cb.hash());
        let mut expected = String::new();
        reference(&j, &mut expected);
        prop_assert_eq!(ca.as_str(), expected.as_str());
    }

    #[test]
    fn canonicalisation_is_idempotent(j in json_tree(), seed in any::<u64>()) {
        let c = canonical(spelling(&j, seed).as_bytes()).unwrap();
        let again = canonical(c.as_bytes()).unwrap();
        prop_assert_eq!(&again, &c);
        let via_str: Canonical = c.as_str().parse().unwrap();
        prop_assert_eq!(via_str, c);
    }

    #[test]
    fn canonical_text_means_what_the_input_meant(j in json_tree(), seed in any::<u64>()) {
        let input = spelling(&j, seed);
        let c = canonical(input.as_bytes()).unwrap();
        let from_input: serde_json::Value = serde_json::from_str(&input).unwrap();
        let from_canonical: serde_json::Value = serde_json::from_str(c.as_str()).unwrap();
        prop_assert_eq!(&from_canonical, &from_input);
        prop_assert_eq!(&c.to_value(), &from_input);
        // The value round-trips through serde back to the same canonical text.
        prop_assert_eq!(Canonical::from_serialize(&from_input).ok().map(|v| v.to_value()), Some(from_input));
        // Members of an object are its canonical sub-values.
        if let Some(members) = agentrt::json::object_members(&c) {
            for (k, v) in &members {
                prop_assert_eq!(c.get(k), Some(v.clone()));
                prop_assert_eq!(canonical(v.as_bytes()), Ok(v.clone()));
            }
        }
    }

    #[test]
    fn a_repeated_key_anywhere_is_refused(
        j in json_tree(),
        extra in json_tree(),
        pick in any::<usize>(),
        seed in any::<u64>(),
    ) {
        let mut j = j;
        let key = add_duplicate(&mut j, pick, extra);
        let input = spelling(&j, seed);
        prop_assert_eq!(canonical(input.as_bytes()), Err(JsonError::DuplicateKey { key }));
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(c) = canonical(&bytes) {
            prop_assert_eq!(canonical(c.as_bytes()), Ok(c.clone()));
        }
    }

    #[test]
    fn mutated_json_agrees_with_serde_json(
        j in json_tree(),
        seed in any::<u64>(),
        op in 0u8..3,
        at in any::<usize>(),
        byte in prop_oneof![
            any::<u8>(),
            prop::sample::select(b"{}[]\":,\\/ 0123456789-+.eEtrufalsnu\x00\x1f\x7f\xc3\xed\xff".to_vec()),
        ],
    ) {
        let mut bytes = spelling(&j, seed).into_bytes();
        let at = at % (bytes.len() + 1);
        match op {
            0 if at < bytes.len() => bytes[at] = byte,
            1 if at < bytes.len() => { bytes.remove(at); }
            _ => bytes.insert(at, byte),
        }
        let ours = canonical(&bytes);
        let blank = bytes.iter().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        let theirs = serde_json::from_slice::<serde_json::Value>(&bytes);
        match (&ours, &theirs) {
            (Ok(c), Ok(v)) => {
                prop_assert_eq!(&c.to_value(), v);
                prop_assert_eq!(canonical(c.as_bytes()), Ok(c.clone()));
            }
            (Ok(c), Err(e)) => prop_assert!(
                (blank && c.is_null()) || e.to_string().contains("number out of range"),
                "we accepted {:?} as {c}, serde_json refused: {e}", String::from_utf8_lossy(&bytes)
            ),
            (Err(ours), Ok(_)) => prop_assert!(
                matches!(ours, JsonError::DuplicateKey { .. } | JsonError::ExponentTooLarge { .. }),
                "we refused {:?} ({ours}), serde_json accepted it", String::from_utf8_lossy(&bytes)
            ),
            (Err(_), Err(_)) => {}
        }
    }
}
