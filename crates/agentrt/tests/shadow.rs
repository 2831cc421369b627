//! A shadow policy (design §42): asked beside the policy on every request,
//! its disagreements written as `policy.shadow` right after `step.policy`
//! in the decision's own write group (so the chain covers them); nothing it
//! says changes an outcome.

mod common;

use std::sync::Arc;

use agentrt::*;
use common::*;

/// Denies `read`, allows anything else; panics on `boom`.
struct Stricter;

impl Policy for Stricter {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> Result<PolicyDecision, PolicyError> {
        match request.spec.name.as_str() {
            "read" => Ok(PolicyDecision::deny("reads are off in the new policy")),
            "boom" => panic!("the shadow is broken"),
            _ => Ok(PolicyDecision::allow()),
        }
    }
    fn policy_id(&self) -> Option<String> {
        Some("stricter/2".into())
    }
}

fn shadow_events(store: &Store) -> Vec<(String, String)> {
    let events = store.list_events("r").unwrap();
    events
        .windows(2)
        .filter(|w| w[1].event_type == EventType::PolicyShadow)
        .map(|w| {
            // Each follows its decision's `step.policy`, same step.
            assert_eq!(w[0].event_type, EventType::StepPolicy, "{w:?}");
            assert_eq!(w[0].step_id, w[1].step_id);
            assert_eq!(w[0].at, w[1].at);
            (w[1].step_id.clone(), w[1].payload.clone())
        })
        .collect()
}

#[tokio::test]
async fn a_shadow_policys_disagreements_are_recorded_and_change_nothing() {
    let store = Store::open(":memory:").unwrap();
    let read = Arc::new(Counting::new("read", SideEffect::ReadOnly));
    let rm = Arc::new(Counting::new("rm", SideEffect::Destructive));
    let boom = Arc::new(Counting::new("boom", SideEffect::LocalMutation));
    let clock = stepping_clock();
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![Arc::clone(&read), Arc::clone(&rm), Arc::clone(&boom)]),
            &clock,
            &Recorder::default(),
        )
        .with_shadow(Stricter),
        ScriptedAgent::new(vec![
            // Allowed; the shadow would deny: recorded.
            Decision::tool_call("read", "{}"),
            // Denied; the shadow would allow: recorded.
            Decision::tool_call("rm", "{}"),
            // Allowed; the shadow panics: recorded as its error.
            Decision::tool_call("boom", "{}"),
            Decision::complete("\"done\""),
        ]),
    )
    .unwrap();
    let run = driver
        .start(Some("r"), "g", Limits::default())
        .await
        .unwrap();

    // The policy's outcomes held.
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!((read.count(), rm.count(), boom.count()), (1, 0, 1));

    let shadows = shadow_events(&store);
    let payloads: Vec<&str> = shadows.iter().map(|(_, p)| p.as_str()).collect();
    assert_eq!(
        payloads,
        [
            r#"{"enforced":"allow","reason":"reads are off in the new policy","shadow":"deny","shadow_policy_id":"stricter/2"}"#,
            r#"{"enforced":"deny","reason":"","shadow":"allow","shadow_policy_id":"stricter/2"}"#,
            r#"{"enforced":"allow","reason":"the policy panicked: the shadow is broken","shadow":"error","shadow_policy_id":"stricter/2"}"#,
        ]
    );
    let report = verify::verify(&store, &verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

#[tokio::test]
async fn a_shadow_that_agrees_writes_nothing_and_no_shadow_writes_what_it_always_did() {
    let run_with = |shadow: Option<Stricter>| async move {
        let store = Store::open(":memory:").unwrap();
        let clock = stepping_clock();
        let mut config = config(
            &store,
            DefaultPolicy,
            shared(vec![Arc::new(Counting::new(
                "write",
                SideEffect::LocalMutation,
            ))]),
            &clock,
            &Recorder::default(),
        );
        if let Some(shadow) = shadow {
            config = config.with_shadow(shadow);
        }
        let mut driver = Driver::new(
            config,
            ScriptedAgent::new(vec![
                Decision::tool_call("write", "{}"),
                Decision::complete("\"done\""),
            ]),
        )
        .unwrap();
        driver
            .start(Some("r"), "g", Limits::default())
            .await
            .unwrap();
        store
            .list_events("r")
            .unwrap()
            .into_iter()
            .map(|e| (e.event_type.to_string(), e.payload))
            .collect::<Vec<_>>()
    };
    // The shadow allows `write` as the policy does: the same events, byte
    // for byte, as without one.
    assert_eq!(run_with(Some(Stricter)).await, run_with(None).await);
}
