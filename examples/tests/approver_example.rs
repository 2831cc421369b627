//! The approver example: a paused run approved over the signed webhook
//! resumes under the approval with the hash the webhook showed.

#[path = "../approver/demo.rs"]
#[allow(dead_code)]
mod demo;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_webhook_request_approves_and_the_run_resumes_with_the_same_hash() {
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    let report = demo::run(&dir.path().join("demo.db"), &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(report.status, agentrt::RunStatus::Completed, "{text}");
    assert_eq!(report.deploys, 1, "the tool ran once: {text}");
    assert_eq!(report.shown_hash.len(), 64);
    assert_eq!(report.approved_hash, report.shown_hash, "{text}");
    assert_eq!(report.granted_hash, report.shown_hash, "{text}");
    for line in [
        "run deploy-1: WAITING_FOR_APPROVAL",
        "-> 200: approval ",
        "-> 202: \"approved\"",
        "run deploy-1: COMPLETED after resuming",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}
