//! Unit tests of the canonical JSON module.

use super::*;

fn canon(input: &str) -> String {
    match Canonical::parse_str(input) {
        Ok(c) => c.into_string(),
        Err(e) => panic!("{input:?} was refused: {e}"),
    }
}

fn refused(input: &[u8]) -> JsonError {
    match Canonical::parse(input) {
        Ok(c) => panic!("{:?} was accepted as {c:?}", String::from_utf8_lossy(input)),
        Err(e) => {
            assert_eq!(
                check_boundary(input),
                Err(e.clone()),
                "check and parse disagree"
            );
            e
        }
    }
}

fn syntax_at(input: &[u8]) -> usize {
    match refused(input) {
        JsonError::Syntax { offset, .. } => offset,
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

fn nested(open: &str, close: &str, depth: usize) -> String {
    format!("{}{}", open.repeat(depth), close.repeat(depth))
}

// ---- escaping -------------------------------------------------------------

#[test]
fn short_escapes() {
    assert_eq!(canon(r#""\"""#), r#""\"""#);
    assert_eq!(canon(r#""\\""#), r#""\\""#);
    assert_eq!(canon(r#""\b\f\n\r\t""#), r#""\b\f\n\r\t""#);
    // The \u spellings of the same characters come out short.
    assert_eq!(
        canon(r#""\u0022\u005c\u0008\u000c\u000a\u000d\u0009""#),
        r#""\"\\\b\f\n\r\t""#
    );
}

#[test]
fn other_control_characters_use_lowercase_u_escapes() {
    assert_eq!(canon(r#""\u0000""#), r#""\u0000""#);
    assert_eq!(
        canon(r#""\u001F\u001f\u000B\u0001""#),
        r#""\u001f\u001f\u000b\u0001""#
    );
    let mut all = String::new();
    for b in 0u8..0x20 {
        all.push_str(&format!("\\u{b:04X}"));
    }
    let out = canon(&format!("\"{all}\""));
    assert_eq!(
        out,
        concat!(
            r#""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r"#,
            r#"\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018"#,
            r#"\u0019\u001a\u001b\u001c\u001d\u001e\u001f""#
        )
    );
}

#[test]
fn everything_else_is_written_raw() {
    assert_eq!(
        canon("\"\u{7f}/<>&\u{2028}\u{2029}é€😀\""),
        "\"\u{7f}/<>&\u{2028}\u{2029}é€😀\""
    );
    assert_eq!(
        canon(r#""\u007f\/\u003c\u003e\u0026\u2028\u2029\u00e9\u20AC""#),
        "\"\u{7f}/<>&\u{2028}\u{2029}é€\""
    );
}

#[test]
fn escapes_are_decoded() {
    assert_eq!(canon(r#""\u0041""#), r#""A""#);
    assert_eq!(canon(r#""\/""#), r#""/""#);
    assert_eq!(canon(r#""\ud83d\ude00""#), "\"😀\"");
    assert_eq!(canon(r#""\uD83D\uDE00x""#), "\"😀x\"");
    assert_eq!(canon(r#""\udbff\udfff""#), "\"\u{10ffff}\"");
    assert_eq!(canon(r#""a\u0062c""#), r#""abc""#);
    assert_eq!(canon(r#"{"\u0061":1}"#), r#"{"a":1}"#);
}

#[test]
fn write_string_is_the_canonical_escaping() {
    let mut out = String::from("x");
    write_string(&mut out, "q\"b\\\u{8}\u{c}\n\r\t\u{0}\u{1f}\u{7f}/é😀");
    assert_eq!(
        out,
        "x\"q\\\"b\\\\\\b\\f\\n\\r\\t\\u0000\\u001f\u{7f}/é😀\""
    );
    let mut empty = String::new();
    write_string(&mut empty, "");
    assert_eq!(empty, r#""""#);
}

// ---- key order ------------------------------------------------------------

#[test]
fn keys_sort_by_utf8_bytes() {
    assert_eq!(canon(r#"{"é":3,"a":2,"B":1}"#), r#"{"B":1,"a":2,"é":3}"#);
    assert_eq!(
        canon(r#"{"b":1,"a":2,"":3,"ab":4}"#),
        r#"{"":3,"a":2,"ab":4,"b":1}"#
    );
    // U+FFFF (EF BF BF) sorts before U+10000 (F0 90 80 80) by bytes, though
    // UTF-16 order would put the surrogate pair (D800 …) first.
    assert_eq!(
        canon(r#"{"\ud800\udc00":1,"\uffff":2,"\ue000":3}"#),
        "{\"\u{e000}\":3,\"\u{ffff}\":2,\"\u{10000}\":1}"
    );
    // Sorting uses decoded keys, not their spelling.
    assert_eq!(canon(r#"{"b":1,"\u0061":2}"#), r#"{"a":2,"b":1}"#);
    // Control characters and escapes sort by their decoded byte.
    assert_eq!(
        canon(r#"{"\n":1," ":2,"\u0000":3}"#),
        r#"{"\u0000":3,"\n":1," ":2}"#
    );
}

#[test]
fn nested_objects_are_sorted_at_every_level() {
    assert_eq!(
        canon(r#"{"z":{"y":[{"b":1,"a":2}],"x":null},"a":[{"d":{"c":1,"b":2}}]}"#),
        r#"{"a":[{"d":{"b":2,"c":1}}],"z":{"x":null,"y":[{"a":2,"b":1}]}}"#
    );
}

// ---- numbers --------------------------------------------------------------

#[test]
fn numbers_stay_as_written() {
    for n in [
        "10",
        "10.0",
        "1e1",
        "-0",
        "1E+2",
        "0",
        "-0.0",
        "1e-2",
        "1E2",
        "0.000",
        "123456789012345678901234567890",
        "1.5e+300",
        "-9007199254740993",
        "1e-10000",
        "1e10000",
        "2.50",
    ] {
        assert_eq!(canon(n), n);
        assert_eq!(canon(&format!(" [ {n} ] ")), format!("[{n}]"));
    }
    assert_eq!(
        canon(r#"{"a":10,"b":10.0,"c":1e1}"#),
        r#"{"a":10,"b":10.0,"c":1e1}"#
    );
    assert_ne!(
        Canonical::parse_str("10").ok(),
        Canonical::parse_str("10.0").ok()
    );
}

// ---- structure ------------------------------------------------------------

#[test]
fn whitespace_is_dropped_and_structure_kept() {
    assert_eq!(
        canon(" \t\r\n{ \"a\" : [ 1 , true , false , null , \"s\" , { } , [ ] ] } \n"),
        r#"{"a":[1,true,false,null,"s",{},[]]}"#
    );
    assert_eq!(
        canon("[[[]],[{}],{\"a\":[[1],[2,[3]]]}]"),
        "[[[]],[{}],{\"a\":[[1],[2,[3]]]}]"
    );
    assert_eq!(canon("true"), "true");
    assert_eq!(canon("\"\""), "\"\"");
}

#[test]
fn blank_input_is_null() {
    for blank in ["", " ", "\t\r\n ", "\n\n"] {
        assert_eq!(canon(blank), "null");
        assert_eq!(check_boundary(blank.as_bytes()), Ok(()));
    }
    assert!(Canonical::parse(b"").is_ok_and(|c| c.is_null()));
    // Form feed and non-breaking space are not JSON whitespace.
    assert!(Canonical::parse(b"\x0c").is_err());
    assert!(Canonical::parse("\u{a0}".as_bytes()).is_err());
    assert!(Canonical::parse(b"1\x0c").is_err());
}

#[test]
fn canonical_output_is_a_fixed_point() {
    for input in [
        r#"{"b":[1,{"d":"\u00e9","c":1e1}],"a":"\/"}"#,
        "[]",
        "-0",
        "\"\\u0000\"",
    ] {
        let once = canon(input);
        assert_eq!(canon(&once), once);
    }
}

// ---- hashes ---------------------------------------------------------------

const EMPTY_OBJECT_HASH: &str = "6e46dd10defc9b56c29a6ec56b508c21f54c08192194e4df25bf36f0c9c3c279";
const NULL_HASH: &str = "03f88b99c3d8073bba8948d6e762aac443b265f606cc05abd4d172f03a4def6a";

#[test]
fn golden_hashes() {
    assert_eq!(Canonical::empty_object().hash(), EMPTY_OBJECT_HASH);
    assert_eq!(Canonical::null().hash(), NULL_HASH);
    assert_eq!(hash_hex(b"{}"), EMPTY_OBJECT_HASH);
    assert_eq!(hash_hex(b"null"), NULL_HASH);
    assert_eq!(
        Canonical::parse(b" { } ").map(|c| c.hash()),
        Ok(EMPTY_OBJECT_HASH.to_owned())
    );
    assert_eq!(
        Canonical::parse(b"").map(|c| c.hash()),
        Ok(NULL_HASH.to_owned())
    );
    // The published BLAKE3 test vector for empty input.
    assert_eq!(
        hash_hex(b""),
        "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    );
}

#[test]
fn hash_is_of_the_canonical_bytes() {
    let c = Canonical::parse_str(r#"{ "b" : 1 , "a" : 2 }"#).unwrap();
    assert_eq!(c.hash(), hash_hex(br#"{"a":2,"b":1}"#));
    assert_eq!(c.hash(), blake3::hash(c.as_bytes()).to_hex().as_str());
}

// ---- refusals: depth ------------------------------------------------------

#[test]
fn depth_256_accepted_257_refused() {
    for (open, close) in [("[", "]"), ("{\"k\":", "}")] {
        // The innermost container is empty: `[]` or `{}`.
        let levels = |depth: usize| {
            let inner = if open == "[" { "[]" } else { "{}" };
            format!(
                "{}{inner}{}",
                open.repeat(depth - 1),
                close.repeat(depth - 1)
            )
        };
        let ok = levels(MAX_DEPTH);
        assert_eq!(check_boundary(ok.as_bytes()), Ok(()));
        assert_eq!(canon(&ok), ok);
        let deep = levels(MAX_DEPTH + 1);
        assert_eq!(refused(deep.as_bytes()), JsonError::TooDeep { max: 256 });
    }
    // Mixed, with an empty container at the bottom.
    let mixed: String = "[{\"a\":".repeat(128) + "[]" + &"}]".repeat(128);
    assert_eq!(refused(mixed.as_bytes()), JsonError::TooDeep { max: 256 });
    let mixed_ok: String = "[{\"a\":".repeat(128) + "1" + &"}]".repeat(128);
    assert_eq!(canon(&mixed_ok), mixed_ok);
    // Unclosed brackets are refused for depth once past the limit.
    assert_eq!(refused(&[b'['; 100_000]), JsonError::TooDeep { max: 256 });
    // Brackets inside strings do not count.
    let in_string = format!("[\"{}\"]", "[".repeat(1000));
    assert_eq!(check_boundary(in_string.as_bytes()), Ok(()));
}

// ---- refusals: duplicate keys ---------------------------------------------

#[test]
fn duplicate_keys_refused() {
    let dup = |s: &str| refused(s.as_bytes());
    assert_eq!(
        dup(r#"{"a":1,"a":2}"#),
        JsonError::DuplicateKey { key: "a".into() }
    );
    assert_eq!(
        dup(r#"{"a":1,"a":1}"#),
        JsonError::DuplicateKey { key: "a".into() }
    );
    assert_eq!(
        dup(r#"{"a":1,"\u0061":2}"#),
        JsonError::DuplicateKey { key: "a".into() }
    );
    assert_eq!(
        dup(r#"{"\/":1,"/":2}"#),
        JsonError::DuplicateKey { key: "/".into() }
    );
    assert_eq!(
        dup(r#"{"😀":1,"\ud83d\ude00":2}"#),
        JsonError::DuplicateKey { key: "😀".into() }
    );
    assert_eq!(
        dup(r#"{"x":[{"b":1,"c":2,"b":3}]}"#),
        JsonError::DuplicateKey { key: "b".into() }
    );
    assert_eq!(
        dup(r#"[{},{"":1,"":2}]"#),
        JsonError::DuplicateKey { key: String::new() }
    );
    // The same key in different objects is fine.
    assert_eq!(
        canon(r#"{"a":{"a":1},"b":{"a":2}}"#),
        r#"{"a":{"a":1},"b":{"a":2}}"#
    );
    // Keys that differ only by case or normalisation are distinct.
    assert!(Canonical::parse_str("{\"é\":1,\"e\u{301}\":2,\"A\":3,\"a\":4}").is_ok());
}

// ---- refusals: UTF-8 ------------------------------------------------------

#[test]
fn invalid_utf8_refused() {
    let cases: [(&[u8], usize); 9] = [
        (b"\"\xff\"", 1),
        (b"\xff", 0),
        (b"[1,\xff]", 3),
        (b"\"ab\xc3\"", 3),       // truncated 2-byte sequence
        (b"\"\xe2\x82\"", 1),     // truncated 3-byte sequence
        (b"\"\xc0\xaf\"", 1),     // overlong '/'
        (b"\"\xed\xa0\x80\"", 1), // UTF-8-encoded surrogate
        (b"{\"k\xf5\":1}", 3),    // beyond U+10FFFF
        (b"1 \xc3", 2),           // truncated at end, after the value
    ];
    for (input, offset) in cases {
        assert_eq!(
            refused(input),
            JsonError::InvalidUtf8 { offset },
            "{input:?}"
        );
    }
    assert_eq!(refused(b"\"abc\xff"), JsonError::InvalidUtf8 { offset: 4 });
    // Invalid UTF-8 is reported before any other problem.
    assert_eq!(
        refused(b"[1,,\"\xff\"]"),
        JsonError::InvalidUtf8 { offset: 5 }
    );
    assert_eq!(
        refused(b"{\"a\":1,\"a\":\xc3}"),
        JsonError::InvalidUtf8 { offset: 11 }
    );
    // Valid multi-byte UTF-8 outside strings is a syntax error, not a UTF-8 one.
    assert!(matches!(
        refused("é".as_bytes()),
        JsonError::Syntax { offset: 0, .. }
    ));
}

// ---- refusals: surrogates -------------------------------------------------

#[test]
fn lone_surrogates_refused() {
    let cases: [(&str, usize); 7] = [
        (r#""\ud800""#, 1),
        (r#""\udc00""#, 1),
        (r#""\udc00\ud800""#, 1),
        (r#""ab\ud83dx""#, 3),
        (r#""\ud83d\u0041""#, 1),
        (r#""\ud83d\ud83d""#, 1),
        (r#"{"\udfff":1}"#, 2),
    ];
    for (input, offset) in cases {
        assert_eq!(
            refused(input.as_bytes()),
            JsonError::LoneSurrogate { offset },
            "{input}"
        );
    }
}

// ---- refusals: numbers ----------------------------------------------------

#[test]
fn number_length_limit() {
    let ok = "9".repeat(MAX_NUMBER_CHARS);
    assert_eq!(canon(&ok), ok);
    let long = "9".repeat(MAX_NUMBER_CHARS + 1);
    assert_eq!(
        refused(long.as_bytes()),
        JsonError::NumberTooLong {
            offset: 0,
            length: 10_001
        }
    );
    // Every character counts: sign, fraction and exponent.
    let ok = format!("-0.{}", "5".repeat(MAX_NUMBER_CHARS - 3));
    assert_eq!(canon(&ok), ok);
    let long = format!("[-0.{}]", "5".repeat(MAX_NUMBER_CHARS - 2));
    assert_eq!(
        refused(long.as_bytes()),
        JsonError::NumberTooLong {
            offset: 1,
            length: 10_001
        }
    );
    // Leading zeros in the exponent do not raise its value but do count
    // towards the length.
    let padded = format!("1e{}5", "0".repeat(MAX_NUMBER_CHARS - 3));
    assert_eq!(canon(&padded), padded);
    let padded = format!("1e{}5", "0".repeat(MAX_NUMBER_CHARS - 2));
    assert!(matches!(
        refused(padded.as_bytes()),
        JsonError::NumberTooLong { length: 10_001, .. }
    ));
}

#[test]
fn exponent_limit() {
    for ok in [
        "1e10000",
        "1e-10000",
        "1E+10000",
        "-2.5e010000",
        "1e0",
        "1e00000000010000",
    ] {
        assert_eq!(canon(ok), ok);
    }
    for (bad, offset) in [
        ("1e10001", 0),
        ("1e-10001", 0),
        ("[0, 1E+10001]", 4),
        ("1e99999999999999999999999999", 0),
        ("1e00000000010001", 0),
    ] {
        assert_eq!(
            refused(bad.as_bytes()),
            JsonError::ExponentTooLarge { offset },
            "{bad}"
        );
    }
}

// ---- refusals: trailing data ----------------------------------------------

#[test]
fn trailing_data_refused() {
    for (input, offset) in [
        ("1 2", 2),
        ("{} {}", 3),
        ("[]]", 2),
        ("null x", 5),
        ("\"a\"\"b\"", 3),
        ("truex", 4),
        ("1 \u{e9}", 2),
        ("{}\u{0}", 2),
        ("0x10", 1),
        ("[1]//c", 3),
    ] {
        assert_eq!(
            refused(input.as_bytes()),
            JsonError::TrailingData { offset },
            "{input:?}"
        );
    }
}

// ---- refusals: grammar ----------------------------------------------------

#[test]
fn grammar_errors_refused() {
    let bad: &[&str] = &[
        "01",
        "-01",
        "+1",
        ".5",
        "1.",
        "1.e5",
        "1e",
        "1e+",
        "-",
        "--1",
        "NaN",
        "Infinity",
        "-Infinity",
        "[1,]",
        "[,1]",
        "[1 2]",
        "{\"a\":1,}",
        "{,}",
        "{\"a\"}",
        "{\"a\" 1}",
        "{\"a\":}",
        "{a:1}",
        "{1:1}",
        "'a'",
        "['a']",
        "[1//c]",
        "/*c*/1",
        "[",
        "]",
        "{",
        "}",
        "[1",
        "{\"a\":1",
        "\"abc",
        "\"\\",
        "\"\\x\"",
        "\"\\u12\"",
        "\"\\u12g4\"",
        "\"\\U0041\"",
        "\"\\'\"",
        "\"a\nb\"",
        "\"\t\"",
        "\"\u{1f}\"",
        "tru",
        "nul",
        "True",
        "NULL",
        "[1;2]",
        ":",
        ",",
        "\u{feff}1",
        "\"\\ud800\\u12\"",
    ];
    for input in bad {
        assert!(
            matches!(refused(input.as_bytes()), JsonError::Syntax { .. }),
            "{input:?} should be a syntax error"
        );
    }
}

#[test]
fn syntax_errors_have_useful_offsets_and_details() {
    assert_eq!(syntax_at(b"01"), 1);
    assert_eq!(syntax_at(b"[1,]"), 3);
    assert_eq!(syntax_at(b"\"ab\ncd\""), 3);
    assert_eq!(
        refused(b"\"ab\ncd\""),
        JsonError::Syntax {
            offset: 3,
            detail: "control character in string"
        }
    );
    assert_eq!(
        refused(b"  \"abc"),
        JsonError::Syntax {
            offset: 2,
            detail: "unterminated string"
        }
    );
    assert_eq!(
        refused(b"\"\\q\""),
        JsonError::Syntax {
            offset: 1,
            detail: "invalid escape"
        }
    );
    assert_eq!(
        refused(b"[+1]"),
        JsonError::Syntax {
            offset: 1,
            detail: "expected a value"
        }
    );
}

// ---- Canonical API --------------------------------------------------------

#[test]
fn constructors_and_accessors() {
    assert_eq!(Canonical::null().as_str(), "null");
    assert!(Canonical::null().is_null());
    assert!(!Canonical::null().is_object());
    assert_eq!(Canonical::empty_object().as_bytes(), b"{}");
    assert!(Canonical::empty_object().is_object());
    let c: Canonical = " [1] ".parse().unwrap();
    assert_eq!(c.to_string(), "[1]");
    assert_eq!(format!("{c:?}"), "Canonical([1])");
    assert!(!c.is_object() && !c.is_null());
    assert_eq!(c.clone().into_string(), "[1]");
    assert!(Canonical::parse_str(r#""{}""#).is_ok_and(|c| !c.is_object()));
}

#[test]
fn get_and_object_members() {
    let c = Canonical::parse_str(r#"{"b":{"y":[1, 2],"x":"\u0041"},"a":1e1,"é":null}"#).unwrap();
    assert_eq!(c.get("a").unwrap().as_str(), "1e1");
    assert_eq!(c.get("b").unwrap().as_str(), r#"{"x":"A","y":[1,2]}"#);
    assert!(c.get("é").unwrap().is_null());
    assert_eq!(c.get("c"), None);
    assert_eq!(c.get("x"), None);
    assert_eq!(Canonical::parse_str("[1]").unwrap().get("0"), None);

    let members = object_members(&c).unwrap();
    let keys: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["a", "b", "é"]);
    assert_eq!(members[1].1, c.get("b").unwrap());
    assert_eq!(object_members(&Canonical::empty_object()), Some(vec![]));
    assert_eq!(object_members(&Canonical::parse_str("[]").unwrap()), None);
    assert_eq!(
        object_members(&Canonical::parse_str("\"{\"").unwrap()),
        None
    );
}

#[test]
fn to_value_matches_serde_json() {
    let text =
        r#"{"b":[1,2.5,-0,1e1,"x\n"],"a":{"c":null,"d":true},"n":123456789012345678901234567890}"#;
    let c = Canonical::parse_str(text).unwrap();
    let expected: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(c.to_value(), expected);
    assert_eq!(Canonical::null().to_value(), serde_json::Value::Null);
}

#[test]
fn to_value_handles_what_serde_json_refuses() {
    // Deeper than serde_json's recursion limit of 128.
    let deep = nested("[", "]", MAX_DEPTH);
    let mut v = Canonical::parse_str(&deep).unwrap().to_value();
    let mut depth = 0;
    while let serde_json::Value::Array(mut items) = v {
        depth += 1;
        v = items.pop().unwrap_or(serde_json::Value::Null);
    }
    assert_eq!(depth, MAX_DEPTH);
    // Beyond f64: null, as serde_json::Value::from(f64::INFINITY).
    let big = Canonical::parse_str("[1e400,-1e400,1e-400]").unwrap();
    assert_eq!(big.to_value(), serde_json::json!([null, null, 0.0]));
}

#[test]
fn serde_embeds_raw_json() {
    #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    struct Wrapper {
        args: Canonical,
    }
    let w = Wrapper {
        args: Canonical::parse_str(r#"{"b":1,"a":[true]}"#).unwrap(),
    };
    let text = serde_json::to_string(&w).unwrap();
    assert_eq!(text, r#"{"args":{"a":[true],"b":1}}"#);
    let back: Wrapper = serde_json::from_str(r#"{"args": { "b" : 1 , "a" : [ true ] } }"#).unwrap();
    assert_eq!(back, w);
    let scalar: Canonical = serde_json::from_str(" 1.50 ").unwrap();
    assert_eq!(scalar.as_str(), "1.50");
    // Boundary rules apply when deserialising.
    let err = serde_json::from_str::<Wrapper>(r#"{"args":{"a":1,"a":2}}"#).unwrap_err();
    assert!(err.to_string().contains("repeats the key"), "{err}");
    // Deep values survive a serde_json round trip.
    let deep = Canonical::parse_str(&nested("[", "]", MAX_DEPTH)).unwrap();
    let text = serde_json::to_string(&deep).unwrap();
    assert_eq!(text, deep.as_str());
    let back: Canonical = serde_json::from_str(&text).unwrap();
    assert_eq!(back, deep);
}

#[test]
fn from_serialize() {
    let mut map = std::collections::HashMap::new();
    map.insert("zeta", vec![1.5, 2.0]);
    map.insert("alpha", vec![]);
    let c = Canonical::from_serialize(&map).unwrap();
    assert_eq!(c.as_str(), r#"{"alpha":[],"zeta":[1.5,2.0]}"#);
    assert_eq!(
        Canonical::from_serialize("a/é\u{1}").unwrap().as_str(),
        "\"a/é\\u0001\""
    );
    assert_eq!(Canonical::from_serialize(&()).unwrap(), Canonical::null());

    let mut bad = std::collections::BTreeMap::new();
    bad.insert(vec![1u8], 1);
    assert!(matches!(
        Canonical::from_serialize(&bad),
        Err(JsonError::Unencodable { .. })
    ));
}

#[test]
fn random_bytes_never_panic() {
    // A deterministic xorshift sweep over short inputs drawn from JSON-ish bytes.
    let alphabet = b"{}[]\":,\\/ \t\n0123456789-+.eEtrufalsn\x00\x1f\x7f\xc3\xa9\xff\xed\xa0u";
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let len = (state % 24) as usize;
        let mut input = Vec::with_capacity(len);
        let mut s = state;
        for _ in 0..len {
            s = s.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            input.push(alphabet[(s >> 33) as usize % alphabet.len()]);
        }
        let parsed = Canonical::parse(&input);
        assert_eq!(
            check_boundary(&input),
            parsed.as_ref().map(drop).map_err(Clone::clone)
        );
        if let Ok(c) = parsed {
            assert_eq!(Canonical::parse(c.as_bytes()), Ok(c.clone()));
        }
    }
}
