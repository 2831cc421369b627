//! Property tests of the testkit's argument fuzzing and policy tables
//! (`agentrt::testkit::{fuzz, policy_check}`), and a cross-check of
//! `check_policy` against what the real loop does with the same requests.
#![cfg(feature = "testkit")]

use std::collections::BTreeSet;
use std::sync::Arc;

use agentrt::json::Canonical;
use agentrt::testkit::fuzz::Fuzz;
use agentrt::testkit::policy_check::{Got, PolicyCase, StandIn, Want, check_policy, never};
use agentrt::*;
use agentrt::{model::ObservationKind, registry::check_args};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---- schemas ----------------------------------------------------------------

fn string_schema() -> impl Strategy<Value = Value> {
    let lengths = (prop::option::of(0u64..4), prop::option::of(0u64..12));
    let pattern = prop::sample::select(vec![
        r"^[a-z]{2,6}$",
        r"^\d{3}-\d{4}$",
        r"^(feat|fix)(\([a-z]+\))?: .+$",
        r"^[A-Z][\w.-]*$",
    ]);
    let format = prop::sample::select(vec!["date-time", "email", "uri", "uuid"]);
    prop_oneof![
        lengths.prop_map(|(min, width)| {
            let mut s = json!({"type": "string"});
            if let Some(min) = min {
                s["minLength"] = json!(min);
            }
            if let Some(width) = width {
                s["maxLength"] = json!(min.unwrap_or(0) + width);
            }
            s
        }),
        pattern.prop_map(|p| json!({"type": "string", "pattern": p})),
        format.prop_map(|f| json!({"type": "string", "format": f})),
    ]
}

fn integer_schema() -> impl Strategy<Value = Value> {
    (
        prop::option::of(-50i64..50),
        prop::option::of(0i64..100),
        prop::sample::select(vec![None, Some(2i64), Some(3), Some(5)]),
        any::<bool>(),
    )
        .prop_map(|(min, width, multiple, exclusive)| {
            let mut s = json!({"type": "integer"});
            // Wide enough for a multiple, and for exclusive bounds.
            let width = width.map(|w| w + multiple.unwrap_or(1) + 2);
            match (min, width, exclusive) {
                (Some(lo), Some(w), true) => {
                    s["exclusiveMinimum"] = json!(lo);
                    s["exclusiveMaximum"] = json!(lo + w);
                }
                (Some(lo), Some(w), false) => {
                    s["minimum"] = json!(lo);
                    s["maximum"] = json!(lo + w);
                }
                (Some(lo), None, _) => s["minimum"] = json!(lo),
                (None, Some(w), _) => s["maximum"] = json!(w),
                (None, None, _) => {}
            }
            if let Some(m) = multiple {
                s["multipleOf"] = json!(m);
            }
            s
        })
}

fn number_schema() -> impl Strategy<Value = Value> {
    (prop::option::of(-40i32..40), prop::option::of(1i32..40)).prop_map(|(min, width)| {
        let mut s = json!({"type": "number"});
        if let Some(lo) = min {
            s["minimum"] = json!(f64::from(lo) / 4.0);
        }
        if let Some(w) = width {
            s["maximum"] = json!(f64::from(min.unwrap_or(0) + w) / 4.0);
        }
        s
    })
}

fn enum_schema() -> impl Strategy<Value = Value> {
    let option = prop_oneof![
        prop::sample::select(vec!["fast", "safe", "dry-run", "ü"]).prop_map(Value::from),
        (-3i64..3).prop_map(Value::from),
    ];
    prop::collection::vec(option, 1..4).prop_map(|options| {
        let mut distinct: Vec<Value> = Vec::new();
        for o in options {
            if !distinct.contains(&o) {
                distinct.push(o);
            }
        }
        json!({ "enum": distinct })
    })
}

fn leaf_schema() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => string_schema(),
        2 => integer_schema(),
        2 => number_schema(),
        1 => Just(json!({"type": "boolean"})),
        2 => enum_schema(),
        1 => Just(json!({"type": ["string", "null"], "maxLength": 8})),
    ]
}

fn array_schema() -> impl Strategy<Value = Value> {
    let items = prop_oneof![
        Just(json!({"type": "string"})),
        Just(json!({"type": "integer"})),
        string_schema(),
    ];
    (items, 0u64..3, prop::option::of(0u64..4), any::<bool>()).prop_map(
        |(items, min, width, unique)| {
            let mut s = json!({"type": "array", "items": items, "minItems": min});
            if let Some(w) = width {
                s["maxItems"] = json!(min + w);
            }
            // Unique items need room: only over unconstrained items.
            if unique && s["items"].as_object().is_some_and(|i| i.len() == 1) {
                s["uniqueItems"] = json!(true);
            }
            s
        },
    )
}

fn property_name() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "a",
        "b",
        "path",
        "mode",
        "n",
        "with space",
        "ü",
        "x-y",
    ])
    .prop_map(str::to_owned)
}

/// An object schema: random properties, a random required subset, and
/// additionalProperties absent, true, false or a schema.
fn object_schema(value: BoxedStrategy<Value>) -> impl Strategy<Value = Value> {
    let extra = prop::sample::select(vec![
        None,
        Some(json!(true)),
        Some(json!(false)),
        Some(json!({"type": "integer"})),
    ]);
    (
        prop::collection::btree_map(property_name(), value, 0..6),
        prop::collection::vec(any::<bool>(), 6),
        extra,
    )
        .prop_map(|(props, mask, extra)| {
            let required: Vec<&String> = props
                .keys()
                .zip(&mask)
                .filter(|(_, r)| **r)
                .map(|(k, _)| k)
                .collect();
            let mut s = json!({"type": "object", "properties": props, "required": required});
            if let Some(extra) = extra {
                s["additionalProperties"] = extra;
            }
            s
        })
}

fn tool_schema() -> impl Strategy<Value = Value> {
    let value = prop_oneof![
        6 => leaf_schema(),
        2 => array_schema(),
        1 => object_schema(leaf_schema().boxed()),
    ];
    object_schema(value.boxed())
}

fn spec_of(schema: &Value) -> ToolSpec {
    let schema = Canonical::from_serialize(schema).expect("schema encodes");
    ToolSpec::new("t", "", SideEffect::ReadOnly).with_schema(schema)
}

// ---- fuzz properties ----------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Every valid value passes `check_args`, every invalid one is refused,
    /// and the near misses include each required property removed and (when
    /// closed) an extra property.
    #[test]
    fn valid_values_pass_and_invalid_values_are_refused(schema in tool_schema(), seed in any::<u64>()) {
        let spec = spec_of(&schema);
        let fuzz = Fuzz { seed, count: 12, ..Fuzz::default() };
        let valid = fuzz.valid(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(valid.len(), 12);
        for v in &valid {
            prop_assert_eq!(check_args(&spec, v.as_bytes()), Ok(()), "{}", v);
        }
        let invalid = fuzz.invalid(&spec).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for i in &invalid {
            prop_assert!(check_args(&spec, &i.bytes).is_err(), "accepted: {}", i);
        }
        let labels: BTreeSet<&str> = invalid.iter().map(|i| i.label.as_str()).collect();
        prop_assert_eq!(labels.len(), invalid.len(), "labels are unique");
        for name in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
            let want = format!("required property {name:?} removed");
            prop_assert!(labels.contains(want.as_str()), "no {:?} in {:#?}", want, labels);
        }
        if schema["additionalProperties"] == json!(false) {
            prop_assert!(labels.iter().any(|l| l.starts_with("extra property")), "{:#?}", labels);
        }
        prop_assert_eq!(fuzz.check(&[spec]), Ok(()));
    }

    /// The same seed gives the same values, valid and invalid.
    #[test]
    fn the_same_seed_gives_the_same_values(schema in tool_schema(), seed in any::<u64>()) {
        let spec = spec_of(&schema);
        let fuzz = Fuzz { seed, count: 8, ..Fuzz::default() };
        prop_assert_eq!(fuzz.valid(&spec), fuzz.clone().valid(&spec));
        prop_assert_eq!(fuzz.invalid(&spec), fuzz.clone().invalid(&spec));
    }
}

#[test]
fn different_seeds_give_different_values() {
    let spec = spec_of(&json!({
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["q", "n"],
    }));
    let runs: Vec<Vec<Canonical>> = (0..16)
        .map(|seed| {
            Fuzz {
                seed,
                ..Fuzz::default()
            }
            .valid(&spec)
            .expect("values")
        })
        .collect();
    let distinct: BTreeSet<&Vec<Canonical>> = runs.iter().collect();
    assert_eq!(distinct.len(), runs.len());
}

// ---- policy tables ------------------------------------------------------------

/// One tool per side-effect class, each taking `{"n": integer}` only.
fn class_tools() -> Vec<ToolSpec> {
    let schema =
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}"#;
    SideEffect::ALL
        .iter()
        .map(|class| {
            ToolSpec::new(class.as_str(), "", *class)
                .with_schema_str(schema)
                .expect("schema")
        })
        .collect()
}

fn default_outcome(class: SideEffect) -> Outcome {
    match class {
        SideEffect::ReadOnly | SideEffect::LocalMutation => Outcome::Allow,
        SideEffect::RemoteMutation => Outcome::RequireApproval,
        SideEffect::Destructive => Outcome::Deny,
    }
}

const WANTS: [Want; 5] = [
    Want::Outcome(Outcome::Allow),
    Want::Outcome(Outcome::RequireApproval),
    Want::Outcome(Outcome::Deny),
    Want::Outcome(Outcome::Abort),
    Want::Refused,
];

/// A case: (tool index, 4 = unknown; args kind; inject a wrong want?; which).
type CaseSeed = (usize, usize, i64, bool, usize);

fn case_of(i: usize, (tool, kind, n, flip, other): CaseSeed) -> (PolicyCase, Want, bool) {
    let tools = class_tools();
    let args = match kind {
        0 => format!(r#"{{"n":{n}}}"#),
        1 => "{\"n\":".to_owned(),
        2 => format!(r#"{{"n":"{n}"}}"#),
        _ => String::new(), // blank: `{}`
    };
    let named = tools.get(tool);
    let right = match named {
        Some(spec) if kind == 0 || kind == 3 => Want::Outcome(default_outcome(spec.side_effect)),
        _ => Want::Refused,
    };
    let name = named.map_or("no_such_tool", |s| s.name.as_str());
    let others: Vec<Want> = WANTS.into_iter().filter(|w| *w != right).collect();
    let want = if flip {
        others[other % others.len()]
    } else {
        right
    };
    (
        PolicyCase::new(format!("case {i}"), name, args, want),
        right,
        flip,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The table holds exactly the cases given a wrong want, in order, each
    /// with what the case really got.
    #[test]
    fn check_policy_finds_exactly_the_injected_disagreements(
        seeds in prop::collection::vec((0usize..5, 0usize..4, -5i64..5, prop::bool::weighted(0.3), 0usize..4), 0..24)
    ) {
        let built: Vec<(PolicyCase, Want, bool)> =
            seeds.into_iter().enumerate().map(|(i, s)| case_of(i, s)).collect();
        let cases: Vec<PolicyCase> = built.iter().map(|(c, _, _)| c.clone()).collect();
        let injected: Vec<&(PolicyCase, Want, bool)> = built.iter().filter(|(_, _, f)| *f).collect();
        match check_policy(&DefaultPolicy, &class_tools(), &cases) {
            Ok(()) => prop_assert!(injected.is_empty()),
            Err(table) => {
                prop_assert_eq!(table.rows.len(), injected.len(), "{}", table);
                for (row, (case, right, _)) in table.rows.iter().zip(injected) {
                    prop_assert_eq!(&row.case, &case.name);
                    prop_assert_eq!(row.want, case.want);
                    prop_assert!(row.got.agrees(*right), "{} got {}", case.name, row.got);
                }
            }
        }
    }
}

/// Realistic tools with schemas of several shapes.
fn realistic_tools() -> Vec<ToolSpec> {
    let spec = |name: &str, class: SideEffect, schema: &str| {
        ToolSpec::new(name, "", class)
            .with_schema_str(schema)
            .expect("schema")
    };
    vec![
        spec(
            "fs_read",
            SideEffect::ReadOnly,
            r#"{"type":"object","properties":{"path":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":1000}},"required":["path"],"additionalProperties":false}"#,
        ),
        spec(
            "fs_write",
            SideEffect::LocalMutation,
            r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string","maxLength":64},"mode":{"enum":["create","overwrite","append"]}},"required":["path","content"]}"#,
        ),
        spec(
            "git_push",
            SideEffect::RemoteMutation,
            r##"{"$defs":{"ref":{"type":"string","pattern":"^[a-z][a-z0-9/-]{0,20}$"}},"type":"object","properties":{"branch":{"$ref":"#/$defs/ref"},"force":{"type":"boolean"},"when":{"type":"string","format":"date-time"}},"required":["branch"],"additionalProperties":false}"##,
        ),
        spec(
            "rm",
            SideEffect::Destructive,
            r#"{"type":"object","properties":{"paths":{"type":"array","items":{"type":"string","minLength":1},"minItems":1,"maxItems":3,"uniqueItems":true},"recursive":{"type":"boolean"}},"required":["paths"],"additionalProperties":false}"#,
        ),
    ]
}

#[test]
fn refused_cases_for_malformed_args_and_unknown_tools_agree() {
    let tools = realistic_tools();
    let fuzz = Fuzz::default();
    let mut cases = Vec::new();
    for spec in &tools {
        for bad in fuzz.invalid(spec).expect("compiles") {
            let name = format!("{} / {}", spec.name, bad.label);
            cases.push(PolicyCase::new(name, &spec.name, bad.bytes, Want::Refused));
        }
        for good in fuzz.valid(spec).expect("values") {
            let want = default_outcome(spec.side_effect);
            cases.push(PolicyCase::new(
                format!("{} / valid", spec.name),
                &spec.name,
                good.as_bytes(),
                want,
            ));
        }
    }
    for unknown in ["fs_delete", "FS_READ", " fs_read", ""] {
        cases.push(PolicyCase::new(
            format!("unknown {unknown:?}"),
            unknown,
            "{}",
            Want::Refused,
        ));
    }
    assert!(cases.len() > 100, "{} cases", cases.len());
    assert_eq!(check_policy(&DefaultPolicy, &tools, &cases), Ok(()));
}

/// A policy that answers from a function of the request.
struct FnPolicy<F>(F);

impl<F> Policy for FnPolicy<F>
where
    F: Fn(&ToolRequest, &RunView) -> Result<PolicyDecision, PolicyError> + Send + Sync,
{
    fn evaluate(&self, r: &ToolRequest, view: &RunView) -> Result<PolicyDecision, PolicyError> {
        assert!(view.steps.is_empty(), "a fresh run has no steps");
        (self.0)(r, view)
    }
}

#[test]
fn default_policy_never_allows_destructive_tools() {
    let tools = realistic_tools();
    let fuzz = Fuzz::default();
    assert!(
        never(
            &DefaultPolicy,
            &tools,
            SideEffect::Destructive,
            Outcome::Allow,
            &fuzz
        )
        .is_ok()
    );
    assert!(
        never(
            &DefaultPolicy,
            &tools,
            SideEffect::RemoteMutation,
            Outcome::Allow,
            &fuzz
        )
        .is_ok()
    );
    assert!(
        never(
            &DefaultPolicy,
            &tools,
            SideEffect::ReadOnly,
            Outcome::Deny,
            &fuzz
        )
        .is_ok()
    );
}

#[test]
fn a_policy_allowing_one_destructive_value_is_caught_with_that_value() {
    let rm = ToolSpec::new("rm", "", SideEffect::Destructive)
        .with_schema_str(
            r#"{"type":"object","properties":{"path":{"enum":["/","/tmp/scratch","/home"]},"recursive":{"type":"boolean"}},"required":["path","recursive"],"additionalProperties":false}"#,
        )
        .expect("schema");
    let lax = FnPolicy(|r: &ToolRequest, view: &RunView| {
        if r.args.as_str() == r#"{"path":"/tmp/scratch","recursive":false}"# {
            return Ok(PolicyDecision::allow_because("scratch space"));
        }
        DefaultPolicy.evaluate(r, view)
    });
    let mut tools = realistic_tools();
    tools.retain(|t| t.name != "rm");
    tools.push(rm);
    let found = never(
        &lax,
        &tools,
        SideEffect::Destructive,
        Outcome::Allow,
        &Fuzz::default(),
    )
    .expect_err("the scratch value is allowed");
    assert_eq!(found.hits.len(), 1, "{found}");
    let hit = &found.hits[0];
    assert_eq!(
        (hit.tool.as_str(), hit.reason.as_str()),
        ("rm", "scratch space")
    );
    assert_eq!(
        hit.args.as_str(),
        r#"{"path":"/tmp/scratch","recursive":false}"#
    );
    let text = found.to_string();
    assert!(
        text.starts_with("the policy answered allow for destructive tools:\n"),
        "{text}"
    );
    assert!(
        text.contains(r#"rm    {"path":"/tmp/scratch","recursive":false}  scratch space"#),
        "{text}"
    );
}

// ---- the loop agrees --------------------------------------------------------

/// Answers by the arguments' hash, so requests get every outcome.
#[derive(Clone, Copy)]
struct ByHash;

impl Policy for ByHash {
    fn evaluate(&self, r: &ToolRequest, _: &RunView) -> Result<PolicyDecision, PolicyError> {
        let digit = r.args.hash().bytes().next().unwrap_or(b'0');
        Ok(match digit % 4 {
            0 => PolicyDecision::allow(),
            1 => PolicyDecision::deny("hash says no"),
            2 => PolicyDecision::abort("hash says stop"),
            _ => PolicyDecision::need_approval("hash", "hash says ask", None, None),
        })
    }
}

/// What the real Driver does with one tool call: the want it shows.
async fn loop_verdict(tools: &[ToolSpec], tool: &str, args: &[u8]) -> Want {
    let stand_ins: Vec<StandIn> = tools.iter().cloned().map(StandIn::from_spec).collect();
    let shared: Vec<Arc<dyn Tool>> = stand_ins
        .iter()
        .map(|s| Arc::new(s.clone()) as Arc<dyn Tool>)
        .collect();
    let store = Store::open(":memory:").expect("store");
    let agent = ScriptedAgent::new([Decision::tool_call(tool, args), Decision::fail("done")]);
    let config = GateConfig::new(store.clone(), ByHash, shared);
    let mut driver = Driver::new(config, agent).expect("driver");
    let run = driver
        .start(None, "one call", Limits::default())
        .await
        .expect("run");
    let calls: usize = stand_ins.iter().map(StandIn::calls).sum();
    let steps = store.list_steps(&run.id).expect("steps");
    let kind = steps[0].observation.as_ref().map(|o| o.kind);
    let want = match (run.status, run.reason, kind) {
        (RunStatus::WaitingForApproval, _, _) => Want::Outcome(Outcome::RequireApproval),
        (_, Some(TerminalReason::PolicyAbort), _) => Want::Outcome(Outcome::Abort),
        (_, _, Some(ObservationKind::PolicyDenied)) => Want::Outcome(Outcome::Deny),
        (_, _, Some(ObservationKind::InvalidDecision)) => Want::Refused,
        (_, _, Some(ObservationKind::ToolResult)) => Want::Outcome(Outcome::Allow),
        other => panic!("unexpected loop result {other:?}"),
    };
    assert_eq!(calls, usize::from(want == Want::Outcome(Outcome::Allow)));
    want
}

#[tokio::test]
async fn check_policy_agrees_with_the_driver() {
    let tools = realistic_tools();
    let fuzz = Fuzz {
        count: 5,
        ..Fuzz::default()
    };
    let mut requests: Vec<(String, String, Vec<u8>)> = Vec::new();
    for spec in &tools {
        for v in fuzz.valid(spec).expect("values") {
            requests.push((
                format!("{} valid", spec.name),
                spec.name.clone(),
                v.into_string().into_bytes(),
            ));
        }
        for bad in fuzz
            .invalid(spec)
            .expect("compiles")
            .into_iter()
            .step_by(3)
            .take(6)
        {
            requests.push((
                format!("{} {}", spec.name, bad.label),
                spec.name.clone(),
                bad.bytes,
            ));
        }
        for odd in ["", "  ", "null", "[]"] {
            requests.push((
                format!("{} {odd:?}", spec.name),
                spec.name.clone(),
                odd.into(),
            ));
        }
    }
    requests.push(("unknown".into(), "fs_delete".into(), b"{}".to_vec()));
    let mut cases = Vec::new();
    let mut seen = BTreeSet::new();
    for (name, tool, args) in requests {
        let want = loop_verdict(&tools, &tool, &args).await;
        seen.insert(want.to_string());
        cases.push(PolicyCase::new(name, tool, args, want));
    }
    assert_eq!(seen.len(), 5, "every outcome and a refusal occur: {seen:?}");
    assert_eq!(check_policy(&ByHash, &tools, &cases), Ok(()));
    let got_refused = check_policy(
        &ByHash,
        &tools,
        &[PolicyCase::new("n", "rm", "null", Outcome::Allow)],
    );
    assert!(matches!(
        &got_refused.expect_err("null is refused").rows[0].got,
        Got::Refused(_)
    ));
}
