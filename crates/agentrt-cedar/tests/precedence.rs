//! For random policy sets and requests, `CedarPolicy`'s outcome equals a
//! reference evaluation of the precedence rules (abort, then deny, then
//! approval, then allow; default deny) over which policies the request
//! satisfies, computed here without Cedar.

use agentrt::json::Canonical;
use agentrt::{Outcome, Policy, SideEffect, ToolRequest, ToolSpec};
use agentrt_cedar::CedarPolicy;
use common::view;
use proptest::prelude::*;

mod common;

#[derive(Debug, Clone, Copy)]
enum Effect {
    Permit,
    Forbid,
}

#[derive(Debug, Clone, Copy)]
enum Note {
    None,
    Approval,
    Abort,
}

#[derive(Debug, Clone, Copy)]
enum Test {
    Less(i64),
    AtLeast(i64),
    Equal(i64),
    Always,
}

#[derive(Debug, Clone)]
struct Rule {
    effect: Effect,
    note: Note,
    test: Test,
}

impl Rule {
    fn text(&self, id: usize) -> String {
        let note = match self.note {
            Note::None => String::new(),
            Note::Approval => format!("@approval(\"ask {id}\")\n"),
            Note::Abort => format!("@abort(\"stop {id}\")\n"),
        };
        let effect = match self.effect {
            Effect::Permit => "permit",
            Effect::Forbid => "forbid",
        };
        let when = match self.test {
            Test::Less(v) => format!("when {{ context.args has n && context.args.n < {v} }}"),
            Test::AtLeast(v) => format!("when {{ context.args has n && context.args.n >= {v} }}"),
            Test::Equal(v) => format!("when {{ context.args has n && context.args.n == {v} }}"),
            Test::Always => String::new(),
        };
        format!(
            "@id(\"p{id}\")\n{note}{effect}(principal, action == Agentrt::Action::\"t\", resource) {when};\n"
        )
    }

    fn holds(&self, n: Option<i64>) -> bool {
        match (self.test, n) {
            (Test::Always, _) => true,
            (_, None) => false,
            (Test::Less(v), Some(n)) => n < v,
            (Test::AtLeast(v), Some(n)) => n >= v,
            (Test::Equal(v), Some(n)) => n == v,
        }
    }
}

/// The reference: the outcome and the ids that decided it.
fn reference(rules: &[Rule], n: Option<i64>) -> (Outcome, Vec<String>) {
    let held = |effect: fn(&Effect) -> bool, note: fn(&Note) -> bool| -> Vec<String> {
        rules
            .iter()
            .enumerate()
            .filter(|(_, r)| effect(&r.effect) && note(&r.note) && r.holds(n))
            .map(|(i, _)| format!("p{i}"))
            .collect()
    };
    let forbid = |e: &Effect| matches!(e, Effect::Forbid);
    let permit = |e: &Effect| matches!(e, Effect::Permit);
    let any = |_: &Note| true;
    let aborting = held(forbid, |n| matches!(n, Note::Abort));
    if !aborting.is_empty() {
        return (Outcome::Abort, aborting);
    }
    let forbidding = held(forbid, any);
    if !forbidding.is_empty() {
        return (Outcome::Deny, forbidding);
    }
    let asking = held(permit, |n| matches!(n, Note::Approval));
    if !asking.is_empty() {
        return (Outcome::RequireApproval, asking);
    }
    let permitting = held(permit, any);
    if permitting.is_empty() {
        (Outcome::Deny, Vec::new())
    } else {
        (Outcome::Allow, permitting)
    }
}

fn rule() -> impl Strategy<Value = Rule> {
    let effect = prop_oneof![Just(Effect::Permit), Just(Effect::Forbid)];
    let note = prop_oneof![Just(Note::None), Just(Note::Approval), Just(Note::Abort)];
    let test = prop_oneof![
        (-3i64..6).prop_map(Test::Less),
        (-3i64..6).prop_map(Test::AtLeast),
        (-3i64..6).prop_map(Test::Equal),
        Just(Test::Always),
    ];
    (effect, note, test).prop_map(|(effect, note, test)| Rule { effect, note, test })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_outcome_follows_the_precedence_over_the_policies_satisfied(
        rules in proptest::collection::vec(rule(), 0..7),
        n in proptest::option::of(-4i64..8),
    ) {
        let spec = ToolSpec::new("t", "t", SideEffect::RemoteMutation)
            .with_schema_str(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#)
            .expect("schema");
        let text: String = rules.iter().enumerate().map(|(i, r)| r.text(i)).collect();
        let policy = CedarPolicy::new(&text, std::slice::from_ref(&spec)).expect("loads");
        let args = match n {
            Some(n) => format!(r#"{{"n":{n}}}"#),
            None => "{}".to_owned(),
        };
        let request = ToolRequest {
            run_id: "r".into(),
            step_id: "s".into(),
            spec,
            args: Canonical::parse_str(&args).expect("args"),
        };
        let decided = policy.evaluate(&request, &view(&[])).expect("decided");
        let (outcome, ids) = reference(&rules, n);
        prop_assert_eq!(decided.outcome, outcome, "{}", text);
        // The reason names exactly the policies that decided.
        let mut named: Vec<String> = decided
            .reason
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| w.len() > 1 && w.starts_with('p') && w[1..].bytes().all(|b| b.is_ascii_digit()))
            .map(str::to_owned)
            .collect();
        named.sort();
        named.dedup();
        let mut want = ids.clone();
        want.sort();
        prop_assert_eq!(named, want, "{}: {}", decided.reason, text);
        if ids.is_empty() {
            prop_assert_eq!(decided.reason, "no cedar policy permits t");
        }
    }
}
