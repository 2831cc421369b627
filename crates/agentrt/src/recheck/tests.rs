//! Unit tests of the re-check's pure parts: identity, the report's counts,
//! and the text writer (golden).

use super::*;
use crate::model::RunStatus;

fn evaluation(step: u64, seq: i64, tool: &str, result: RecheckResult) -> Evaluation {
    Evaluation {
        step_index: Some(step),
        step_id: format!("s{step}"),
        seq,
        tool: tool.into(),
        on_resume: false,
        result,
        recorded: Some(PolicyDecision::allow()),
        rechecked: None,
        recorded_hash: None,
        rechecked_hash: None,
        detail: String::new(),
        spec_source: Some(SpecSource::Current),
        policy_id: "p1".into(),
    }
}

fn report(evaluations: Vec<Evaluation>) -> RecheckReport {
    RecheckReport {
        run_id: "run\x1b[31m".into(),
        run_status: RunStatus::Completed,
        policy_id: "p2".into(),
        identity: Identity::Changed,
        spec_source: SpecSource::Current,
        notes: vec!["a note\nover two lines".into()],
        evaluations,
    }
}

/// Differences come first; each evaluation is one line whatever the record
/// or the policy put in it; every such value is sanitized and cut.
#[test]
fn write_recheck_golden() {
    let mut skipped = evaluation(1, 9, "pay\u{202e}", RecheckResult::NotAPolicyEvaluation);
    skipped.detail = "not a policy evaluation: a reconciliation's pause".into();
    skipped.recorded = None;
    let mut resumed = evaluation(2, 14, "send", RecheckResult::Different);
    resumed.on_resume = true;
    resumed.rechecked = Some(PolicyDecision::deny(format!(
        "line one\nline two {}",
        "x".repeat(300)
    )));
    let mut failed = evaluation(3, 20, "send", RecheckResult::Different);
    failed.detail = "policy failed: down".into();
    failed.policy_id = "p0".into();
    let mut unknown = evaluation(4, 25, "", RecheckResult::NotRecheckable);
    unknown.step_index = None;
    unknown.detail = "not re-checkable: its step is not recorded".into();
    let rep = report(vec![
        evaluation(0, 5, "read", RecheckResult::Same),
        skipped,
        resumed,
        failed,
        unknown,
    ]);
    let mut out = Vec::new();
    write_recheck(&rep, &mut out).unwrap();
    let reason = format!("line one line two {}", "x".repeat(300));
    let cut = crate::text::clip(&reason, 240);
    assert_eq!(cut.len(), 240);
    let want = format!(
        "run run\\x1b[31m COMPLETED: 2 of 3 re-checked evaluations differ; policy changed: recorded \"p0\", \"p1\", given \"p2\"; current specs\n\
         DIFFERENT step 2 seq 14 send (on resume): allow -> deny: {cut}\n\
         DIFFERENT step 3 seq 20 send: allow -> none: policy failed: down\n\
         same      step 0 seq 5 read: allow\n\
         skipped   step 1 seq 9 pay\\u{{202e}}: not a policy evaluation: a reconciliation's pause\n\
         skipped   step ? seq 25 -: not re-checkable: its step is not recorded\n\
         note: a note over two lines\n"
    );
    assert_eq!(String::from_utf8(out).unwrap(), want);
    assert_eq!(rep.to_string(), want);
}

#[test]
fn counts_and_differing_steps() {
    let mut twice = evaluation(2, 14, "send", RecheckResult::Different);
    twice.on_resume = true;
    let rep = report(vec![
        evaluation(0, 5, "read", RecheckResult::Same),
        evaluation(1, 9, "pay", RecheckResult::NotRecheckable),
        evaluation(2, 11, "send", RecheckResult::Different),
        twice,
        evaluation(3, 20, "x", RecheckResult::NotAPolicyEvaluation),
    ]);
    assert_eq!(
        (
            rep.same(),
            rep.differences(),
            rep.rechecked(),
            rep.not_recheckable(),
            rep.complete()
        ),
        (false, 2, 3, 1, false)
    );
    assert_eq!(rep.differing_steps(), [2]);
    let json = serde_json::to_value(&rep).unwrap();
    assert_eq!(json["differences"], 2);
    assert_eq!(json["evaluations"][1]["result"], "not_recheckable");
    assert_eq!(json["evaluations"][4]["result"], "not_a_policy_evaluation");
    assert_eq!(json["evaluations"][0]["spec_source"], "current");
    let empty = report(Vec::new());
    assert!(empty.same() && empty.complete() && empty.rechecked() == 0);
}

#[test]
fn identity_needs_ids_on_both_sides_of_every_rechecked_evaluation() {
    let with = |id: &str, result| Evaluation {
        policy_id: id.into(),
        ..evaluation(0, 1, "t", result)
    };
    use RecheckResult::{NotAPolicyEvaluation, NotRecheckable, Same};
    assert_eq!(identity("p", &[]), Identity::Unknown);
    assert_eq!(
        identity("p", &[with("p", NotRecheckable)]),
        Identity::Unknown
    );
    assert_eq!(identity("", &[with("p", Same)]), Identity::Unknown);
    assert_eq!(
        identity("p", &[with("p", Same), with("", Same)]),
        Identity::Unknown
    );
    assert_eq!(
        identity("p", &[with("p", Same), with("", NotAPolicyEvaluation)]),
        Identity::Unchanged
    );
    assert_eq!(
        identity("p", &[with("p", Same), with("q", Same)]),
        Identity::Changed
    );
}
