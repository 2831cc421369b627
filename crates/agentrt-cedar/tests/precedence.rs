//! For random policy sets and requests, `CedarPolicy`'s outcome equals a
//! reference evaluation of the precedence rules (abort, then deny, then
//! approval, then allow; default deny) over which policies the request
//! satisfies, computed here without Cedar. Each policy's action scope is
//! random too (any action, one of two tools, a list of both), so the
//! split of the policies by tool is checked against the whole set's
//! semantics.

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

/// A policy's action scope over the tools `t` and `u`.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Any,
    Only(&'static str),
    Both,
}

impl Scope {
    fn text(self) -> String {
        match self {
            Scope::Any => "action".to_owned(),
            Scope::Only(tool) => format!("action == Agentrt::Action::\"{tool}\""),
            Scope::Both => "action in [Agentrt::Action::\"t\", Agentrt::Action::\"u\"]".to_owned(),
        }
    }

    fn applies(self, tool: &str) -> bool {
        match self {
            Scope::Any | Scope::Both => true,
            Scope::Only(only) => only == tool,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    effect: Effect,
    note: Note,
    test: Test,
    scope: Scope,
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
            "@id(\"p{id}\")\n{note}{effect}(principal, {}, resource) {when};\n",
            self.scope.text()
        )
    }

    fn holds(&self, tool: &str, n: Option<i64>) -> bool {
        if !self.scope.applies(tool) {
            return false;
        }
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
fn reference(rules: &[Rule], tool: &str, n: Option<i64>) -> (Outcome, Vec<String>) {
    let held = |effect: fn(&Effect) -> bool, note: fn(&Note) -> bool| -> Vec<String> {
        rules
            .iter()
            .enumerate()
            .filter(|(_, r)| effect(&r.effect) && note(&r.note) && r.holds(tool, n))
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
    let scope = prop_oneof![
        Just(Scope::Any),
        Just(Scope::Only("t")),
        Just(Scope::Only("u")),
        Just(Scope::Both),
    ];
    (effect, note, test, scope).prop_map(|(effect, note, test, scope)| Rule {
        effect,
        note,
        test,
        scope,
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_outcome_follows_the_precedence_over_the_policies_satisfied(
        rules in proptest::collection::vec(rule(), 0..7),
        n in proptest::option::of(-4i64..8),
        tool in prop_oneof![Just("t"), Just("u")],
    ) {
        let specs: Vec<ToolSpec> = ["t", "u"]
            .iter()
            .map(|name| {
                ToolSpec::new(*name, *name, SideEffect::RemoteMutation)
                    .with_schema_str(r#"{"type":"object","properties":{"n":{"type":"integer"}}}"#)
                    .expect("schema")
            })
            .collect();
        let text: String = rules.iter().enumerate().map(|(i, r)| r.text(i)).collect();
        let policy = CedarPolicy::new(&text, &specs).expect("loads");
        let spec = specs.iter().find(|s| s.name == tool).expect("the tool").clone();
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
        let (outcome, ids) = reference(&rules, tool, n);
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
            prop_assert_eq!(decided.reason, format!("no cedar policy permits {tool}"));
        }
    }
}
