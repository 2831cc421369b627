use super::*;
use crate::model::SideEffect;

fn spec(schema: &str) -> ToolSpec {
    ToolSpec::new("t", "", SideEffect::ReadOnly)
        .with_schema_str(schema)
        .expect("schema is JSON")
}

fn assert_sound(schema: &str) -> (Vec<Canonical>, Vec<Invalid>) {
    let s = spec(schema);
    let fuzz = Fuzz::default();
    let valid = fuzz.valid(&s).expect("valid values");
    assert_eq!(valid.len(), fuzz.count);
    for v in &valid {
        assert_eq!(check_args(&s, v.as_bytes()), Ok(()), "{schema}: {v}");
    }
    let invalid = fuzz.invalid(&s).expect("invalid values");
    for i in &invalid {
        assert!(check_args(&s, &i.bytes).is_err(), "{schema}: {i}");
    }
    assert_eq!(fuzz.check(std::slice::from_ref(&s)), Ok(()));
    (valid, invalid)
}

fn labels(invalid: &[Invalid]) -> Vec<&str> {
    invalid.iter().map(|i| i.label.as_str()).collect()
}

#[test]
fn boundary_cases_come_first_and_are_refused_by_the_boundary_check() {
    let invalid = Fuzz::default()
        .invalid(&spec(r#"{"type":"object"}"#))
        .expect("compiles");
    let cases = boundary_cases();
    assert_eq!(invalid.get(..cases.len()), Some(cases.as_slice()));
    for case in &cases {
        assert!(crate::json::check_boundary(&case.bytes).is_err(), "{case}");
    }
    let number = cases.get(4).expect("eight cases");
    assert_eq!(number.bytes.len(), "{\"a\":}".len() + 10_001);
}

#[test]
fn common_keywords_give_sound_values() {
    let schemas = [
        r#"{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":12},"n":{"type":"integer","minimum":-3,"exclusiveMaximum":7}},"required":["path"],"additionalProperties":false}"#,
        r#"{"type":"object","properties":{"mode":{"enum":["fast","safe",3]},"v":{"const":"x"},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3,"uniqueItems":true}},"required":["mode","tags"]}"#,
        r#"{"type":"object","properties":{"x":{"type":["number","null"],"minimum":0.5,"maximum":2.25},"k":{"type":"integer","multipleOf":5,"minimum":1},"p":{"type":"number","multipleOf":0.25}},"required":["x","k","p"]}"#,
        r#"{"type":"object","additionalProperties":{"type":"integer"},"minProperties":2,"maxProperties":3}"#,
        r#"{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"to":{"type":"string","format":"email"},"url":{"type":"string","format":"uri"}},"required":["when","to","url"]}"#,
        r#"{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0}},"required":["n"]}"#,
        "true",
        "{}",
    ];
    for schema in schemas {
        assert_sound(schema);
    }
}

#[test]
fn near_misses_name_each_single_change() {
    let (_, invalid) = assert_sound(
        r#"{"type":"object","properties":{"path":{"type":"string","minLength":2,"maxLength":5},"n":{"type":"integer","minimum":1,"maximum":9,"multipleOf":3},"mode":{"enum":["a","b"]},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2,"uniqueItems":true}},"required":["path","n","mode","tags"],"additionalProperties":false}"#,
    );
    let got = labels(&invalid);
    for want in [
        r#"required property "path" removed"#,
        r#"required property "tags" removed"#,
        "integer instead of string at /path",
        "string instead of integer at /n",
        "a fraction where an integer is wanted at /n",
        "a string of 1 characters (minLength 2) at /path",
        "a string of 6 characters (maxLength 5) at /path",
        "0, below the minimum 1 at /n",
        "10, above the maximum 9 at /n",
        "a value outside the enum at /mode",
        "0 items (minItems 1) at /tags",
        "3 items (maxItems 2) at /tags",
        "string instead of array at /tags",
    ] {
        assert!(got.contains(&want), "missing {want:?} in {got:#?}");
    }
    assert!(
        got.iter().any(|l| l.starts_with("extra property")),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|l| l.contains("not a multiple of 3")),
        "{got:#?}"
    );
    let unique: BTreeSet<&str> = got.iter().copied().collect();
    assert_eq!(unique.len(), got.len(), "labels are unique");
}

#[test]
fn refs_all_of_and_any_of_are_followed() {
    let (valid, invalid) = assert_sound(
        r##"{"$defs":{"id":{"type":"string","pattern":"^[a-f0-9]{8}$"},"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"id":{"$ref":"#/$defs/id"},"page":{"allOf":[{"$ref":"#/$defs/pos"},{"maximum":50}]},"who":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer"}]},"one":{"oneOf":[{"type":"boolean"},{"type":"null"}]}},"required":["id","page","who","one"]}"##,
    );
    for v in &valid {
        let id = v.get("id").expect("id");
        assert_eq!(id.as_str().len(), 10, "{id}");
    }
    assert!(labels(&invalid).contains(&"a string not matching the pattern at /id"));
}

#[test]
fn patterns_are_generated_by_proptest_and_look_around_falls_back() {
    for p in [
        r"^[A-Z][a-z]{2,6}$",
        r"^\d{3}-\d{4}$",
        r"^(feat|fix|docs)(\([a-z]+\))?: .{1,20}$",
        r"^[^\s/]+/[\w.-]+$",
        r"^v\d+\.\d+\.\d+(-rc\.\d+)?$",
        r"^(?:[a-z0-9-]+\.)+[a-z]{2,}$",
        r"^\u0041\x42[\u{430}-\u{44f}]?$",
        r"ab",
        // Beyond the old hand-written subset: anchors inside, word
        // boundaries, Unicode classes, flags.
        r"^yes$|^no$",
        r"\bid-\d+\b",
        r"^\p{L}{1,8}$",
        r"^(?i)abc$",
    ] {
        let re = pattern::parse(p).unwrap_or_else(|| panic!("{p} is generated from"));
        let drawn = pattern::generate(&re, &mut Rng(7));
        assert!(drawn.is_some(), "{p}");
        assert_eq!(
            drawn,
            pattern::generate(&re, &mut Rng(7)),
            "{p}: one seed, one string"
        );
        let schema = format!(
            r#"{{"type":"object","properties":{{"s":{{"type":"string","pattern":{}}}}},"required":["s"]}}"#,
            serde_json::Value::from(p)
        );
        assert_sound(&schema);
    }
    // Look-around and back-references: neither regex-syntax nor the
    // runtime's check reads them.
    for p in [r"^(?=a)a$", r"(a)\1"] {
        assert!(pattern::parse(p).is_none(), "{p} is not generated from");
    }
    // Nested past the generator's limit (not the runtime's): not
    // generated from, but random strings find a match.
    let deep = format!("{}a{}", "(".repeat(70), ")".repeat(70));
    assert!(pattern::parse(&deep).is_none());
    assert_sound(&format!(
        r#"{{"type":"object","properties":{{"s":{{"type":"string","pattern":"{deep}"}}}},"required":["s"]}}"#
    ));
}

#[test]
fn an_unsatisfiable_schema_is_an_error_naming_the_tool() {
    let fuzz = Fuzz::default();
    for schema in [
        "false",
        r#"{"type":"object","properties":{"s":{"type":"string","pattern":"^a$","maxLength":0}},"required":["s"]}"#,
        r#"{"type":"integer","minimum":5,"maximum":4}"#,
    ] {
        let err = fuzz.valid(&spec(schema)).expect_err(schema);
        assert!(matches!(err, FuzzError::NoValidValue { ref tool, .. } if tool == "t"));
        let problems = fuzz.check(&[spec(schema)]).expect_err(schema);
        assert_eq!(problems, vec![FuzzProblem::Generator(err)]);
    }
    // Required recursion never ends: the depth cap stops it, even when
    // `max_depth` is huge.
    let endless = spec(r##"{"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]}"##);
    let deep = Fuzz {
        max_depth: 100_000,
        count: 2,
        ..Fuzz::default()
    };
    assert!(matches!(
        deep.valid(&endless),
        Err(FuzzError::NoValidValue { .. })
    ));
    let invalid = fuzz.invalid(&spec("false")).expect("compiles");
    assert_eq!(invalid, boundary_cases());
    let bad = spec(r#"{"type":"object","properties":{"s":{"pattern":"("}}}"#);
    assert!(matches!(fuzz.valid(&bad), Err(FuzzError::Schema { .. })));
}

#[test]
fn pattern_properties_name_extra_members() {
    let (valid, invalid) = assert_sound(
        r#"{"type":"object","patternProperties":{"^x-[a-z]{1,4}$":{"type":"integer"}},"additionalProperties":false,"minProperties":1}"#,
    );
    assert!(
        valid.iter().all(|v| v.as_str().starts_with(r#"{"x-"#)),
        "{valid:?}"
    );
    assert!(
        labels(&invalid)
            .iter()
            .any(|l| l.starts_with("extra property"))
    );
}

#[test]
fn same_seed_same_values_other_seed_other_values() {
    let s = spec(
        r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}"#,
    );
    let one = Fuzz::default();
    assert_eq!(one.valid(&s), one.valid(&s));
    assert_eq!(one.invalid(&s), one.invalid(&s));
    let two = Fuzz {
        seed: 2,
        ..Fuzz::default()
    };
    assert_ne!(one.valid(&s), two.valid(&s));
}

#[test]
fn small_value_spaces_repeat_values_rather_than_fail() {
    let (valid, _) = assert_sound(r#"{"type":"object","additionalProperties":false}"#);
    assert!(valid.iter().all(|v| v.as_str() == "{}"));
    let (valid, _) = assert_sound(r#"{"enum":[{"a":1},{"b":2}]}"#);
    let distinct: BTreeSet<&str> = valid.iter().map(Canonical::as_str).collect();
    assert_eq!(distinct.len(), 2);
}

#[test]
fn limits_bound_strings_arrays_and_depth() {
    let fuzz = Fuzz {
        max_items: 2,
        max_length: 3,
        max_depth: 2,
        ..Fuzz::default()
    };
    let s = spec("true");
    for v in fuzz.valid(&s).expect("values") {
        let depth = v
            .as_str()
            .bytes()
            .filter(|b| *b == b'[' || *b == b'{')
            .count();
        assert!(depth <= 8, "{v}");
    }
    let strings = spec(r#"{"type":"array","items":{"type":"string"}}"#);
    for v in fuzz.valid(&strings).expect("values") {
        let items = v.to_value();
        let items = items.as_array().expect("array");
        assert!(items.len() <= 2, "{v}");
        assert!(
            items
                .iter()
                .all(|s| s.as_str().is_some_and(|s| s.chars().count() <= 3))
        );
    }
}

#[test]
fn required_parts_nest_beyond_max_depth() {
    let deep = (0..100).fold(String::from(r#"{"type":"integer"}"#), |inner, _| {
        format!(r#"{{"type":"object","properties":{{"a":{inner}}},"required":["a"]}}"#)
    });
    let (valid, _) = assert_sound(&deep);
    assert!(
        valid
            .iter()
            .all(|v| v.as_str().matches(r#""a":"#).count() == 100)
    );
}

#[test]
fn a_null_value_must_pass_both_readings() {
    // check_args reads `null` as `{}`; the loop checks it as `null`.
    let (valid, _) = assert_sound(r#"{"type":["object","null"],"maxProperties":0}"#);
    assert!(valid.iter().any(Canonical::is_null));
    let only_null = spec(r#"{"type":"null"}"#);
    assert!(Fuzz::default().valid(&only_null).is_err());
}

#[test]
fn decimals_and_multiples_are_written_exactly() {
    assert_eq!(decimal_text(-5, 2), "-0.05");
    assert_eq!(decimal_text(1200, 2), "12.00");
    assert_eq!(decimal_text(7, 0), "7");
    let d = Decimal::parse("2.5e-3").expect("decimal");
    assert_eq!((d.mantissa, d.scale), (25, 4));
    let d = Decimal::parse("1e2").expect("decimal");
    assert_eq!((d.mantissa, d.scale), (100, 0));
    assert!(Decimal::parse("-1").is_none());
    assert_eq!((div_floor(-7, 2), div_ceil(-7, 2)), (-4, -3));
    assert_eq!((div_floor(7, 2), div_ceil(7, 2)), (3, 4));
    assert_eq!((gcd(15, 10), gcd(25, 100), gcd(7, 1)), (5, 25, 1));
    let (valid, _) =
        assert_sound(r#"{"type":"integer","multipleOf":1.5,"minimum":-30,"maximum":30}"#);
    assert!(valid.iter().any(|v| v.as_str() != "0"));
    assert!(
        valid
            .iter()
            .all(|v| v.as_str().parse::<i64>().is_ok_and(|n| n % 3 == 0))
    );
}
