//! The README's first command: the demo stops at its approval, prints the
//! command that approves it, and on resume runs the approved call once.

#[path = "../scripted/demo.rs"]
#[allow(dead_code)]
mod demo;

#[path = "support/agentrt_cli.rs"]
mod agentrt_cli;

use agentrt_cli::cli;
use std::sync::Arc;

use agentrt::{
    DecideOptions, EventType, Operator, RunStatus, Store, model::ObservationKind, model::StepStatus,
};

#[tokio::test]
async fn the_demo_pauses_prints_the_approve_command_and_resumes_to_completion() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let options = demo::Options {
        db: db.clone(),
        resume: None,
    };
    let mut out = Vec::new();
    let first = demo::run(&options, &mut out, Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(first.run.status, RunStatus::WaitingForApproval);
    let approval = first.approval.clone().unwrap();
    let text = String::from_utf8(out).unwrap();
    let absolute = std::path::absolute(&db).unwrap().display().to_string();
    let command = format!(
        "cargo run -p agentrt-cli -- --db {absolute:?} approve {} --approval {approval} --by {:?}\n",
        first.run.id,
        demo::operator_name()
    );
    assert!(text.contains(&command), "{text}");
    assert!(text.contains(&format!(
        "cargo run --example scripted -- --db {absolute:?} --resume {}",
        first.run.id
    )));

    // The operator approves (what the printed command does), then the demo resumes.
    let store = Store::open_existing(&db, false).unwrap();
    Operator::new(store.clone())
        .approve(
            &first.run.id,
            &approval,
            &DecideOptions {
                by: "test",
                note: "",
                shown_hash: None,
            },
        )
        .unwrap();
    let options = demo::Options {
        db: db.clone(),
        resume: Some(first.run.id.clone()),
    };
    let mut out = Vec::new();
    let second = demo::run(&options, &mut out, Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(second.run.status, RunStatus::Completed);
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("step.tool_finished"),
        "the trace is printed: {text}"
    );

    // Denied, invalid, approved and executed steps are all on record.
    let steps = store.list_steps(&first.run.id).unwrap();
    let kinds: Vec<_> = steps
        .iter()
        .map(|s| s.observation.as_ref().map(|o| o.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            Some(ObservationKind::ToolResult),
            Some(ObservationKind::InvalidDecision),
            Some(ObservationKind::PolicyDenied),
            Some(ObservationKind::ToolResult),
            None
        ]
    );
    assert!(
        steps
            .iter()
            .all(|s| s.status == StepStatus::Done || s.status == StepStatus::Failed)
    );
    let events = store.list_events(&first.run.id).unwrap();
    let started: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == EventType::StepToolStarted)
        .collect();
    assert_eq!(started.len(), 2);
    assert!(started[1].payload.contains(&approval));
}

/// Runs the demo on `db` until it pauses on its pull request: the run and
/// the approval it waits for.
async fn paused_demo(db: &std::path::Path) -> (String, String) {
    let options = demo::Options {
        db: db.to_owned(),
        resume: None,
    };
    let quiet = Arc::new(|_: &agentrt::Event| {});
    let first = demo::run(&options, &mut Vec::new(), quiet).await.unwrap();
    (first.run.id, first.approval.unwrap())
}

/// Resumes the demo's run `run` on `db`: the run's status after.
async fn resumed_demo(db: &std::path::Path, run: &str) -> RunStatus {
    let options = demo::Options {
        db: db.to_owned(),
        resume: Some(run.to_owned()),
    };
    let quiet = Arc::new(|_: &agentrt::Event| {});
    let resumed = demo::run(&options, &mut Vec::new(), quiet).await.unwrap();
    resumed.run.status
}

/// What the pull request's step observed.
fn pr_open_observation(store: &Store, run: &str) -> agentrt::model::Observation {
    let steps = store.list_steps(run).unwrap();
    let step = steps
        .into_iter()
        .find(|s| s.decision.as_ref().is_some_and(|d| d.tool == "pr_open"))
        .unwrap();
    step.observation.unwrap()
}

/// Runs `agentrt --db DB args…` with `stdin`: exit code, stdout, stderr.
fn agentrt(db: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(cli())
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("AGENTRT_DB")
        .env("USER", "operator")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Edit, then approve, from the command line: an edit the tool's schema
/// refuses decides nothing; the edited pull request is the one opened, the
/// model's observation says so, the chain is intact and a re-check judges
/// the edited request.
#[tokio::test]
async fn the_demo_s_pull_request_edited_with_the_cli_is_the_one_opened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let (run, approval) = paused_demo(&db).await;

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"title":7,"branch":"docs/readme-typo"}"#).unwrap();
    let bad = bad.to_str().unwrap();
    let (code, _, stderr) = agentrt(
        &db,
        &["approve", &run, "--approval", &approval, "--edit", bad],
        "",
    );
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("pr_open refuses them"), "{stderr}");
    assert!(stderr.contains("nothing was decided"), "{stderr}");
    let store = Store::open_existing(&db, false).unwrap();
    assert_eq!(
        store.get_approval(&run, &approval).unwrap().status,
        agentrt::ApprovalStatus::Pending
    );

    let edited = r#"{"title":"Fix the typo in README.md","branch":"docs/readme-typo"}"#;
    let (code, stdout, stderr) = agentrt(
        &db,
        &["approve", &run, "--approval", &approval, "--edit", "-"],
        edited,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(r#"{"branch":"docs/readme-typo","title":"Fix the typo in README.md"}"#),
        "the edit is shown before it is approved: {stdout}"
    );
    assert!(
        stdout.contains(&format!("(an edit of approval {approval}, now edited)")),
        "{stdout}"
    );

    assert_eq!(resumed_demo(&db, &run).await, RunStatus::Completed);
    let events = store.list_events(&run).unwrap();
    let opened: Vec<serde_json::Value> = events
        .iter()
        .filter(|e| e.event_type == EventType::StepToolFinished)
        .map(|e| serde_json::from_str(&e.payload).unwrap())
        .filter(|p: &serde_json::Value| p["tool"] == "pr_open")
        .collect();
    assert_eq!(opened.len(), 1, "the pull request is opened once");
    let observation = pr_open_observation(&store, &run);
    let content = observation.content.unwrap().to_value();
    assert_eq!(content["branch"], "docs/readme-typo");
    let edit = observation.operator_edit.unwrap();
    assert_eq!(edit.by, "operator");
    assert_eq!(edit.args.to_value()["branch"], "docs/readme-typo");

    let (code, stdout, stderr) = agentrt(&db, &["verify"], "");
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("\nintact: "), "{stdout}");
    let report =
        agentrt::recheck::recheck(&store, &run, &agentrt::DefaultPolicy, &Default::default())
            .unwrap();
    assert!(report.differing_steps().is_empty(), "{report:?}");
}

/// Edit, then approve, over the signed webhook (the approver's server over
/// the demo's database): a body whose `args` the tool's schema refuses is
/// 422 and decides nothing; the edit is approved, and the resumed demo
/// opens the edited pull request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_s_pull_request_edited_over_the_webhook_is_the_one_opened() {
    use agentrt_approver::signature::{Secret, signed_headers};
    use agentrt_approver::webhook::{WebhookConfig, router};

    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let (run, approval) = paused_demo(&db).await;
    let store = Store::open_existing(&db, false).unwrap();
    let hash = store.get_approval(&run, &approval).unwrap().hash;

    let secret = Secret::new([7u8; 32]).unwrap();
    let approver = agentrt_approver::StoreApprover::open(&db, None).unwrap();
    let config = WebhookConfig::new(Arc::new(approver), secret.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(config)).await });
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let path = format!("/runs/{run}/approvals/{approval}/approve");
    let approve = |args: serde_json::Value| {
        let body = serde_json::json!({
            "run_id": run, "approval_id": approval, "hash": hash,
            "by": "ops@example.test", "note": "our branch names", "args": args,
        })
        .to_string();
        let mut request = http.post(format!("{base}{path}")).body(body.clone());
        for (name, value) in signed_headers(&secret, "POST", &path, body.as_bytes()).unwrap() {
            request = request.header(name, value);
        }
        request.send()
    };

    let refused = approve(serde_json::json!({"title": "Fix"})).await.unwrap();
    assert_eq!(refused.status(), 422);
    let answer: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(answer["code"], "edit_refused");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("pr_open refuses them"),
        "{answer}"
    );
    assert_eq!(
        store.get_approval(&run, &approval).unwrap().status,
        agentrt::ApprovalStatus::Pending
    );

    let edited = approve(
        serde_json::json!({"title": "Fix the typo in README.md", "branch": "docs/readme-typo"}),
    )
    .await
    .unwrap();
    assert_eq!(edited.status(), 202);
    let answer: serde_json::Value = edited.json().await.unwrap();
    assert_eq!(answer["edited"], approval.as_str());

    assert_eq!(resumed_demo(&db, &run).await, RunStatus::Completed);
    let observation = pr_open_observation(&store, &run);
    assert_eq!(
        observation.content.unwrap().to_value()["branch"],
        "docs/readme-typo"
    );
    assert_eq!(observation.operator_edit.unwrap().by, "ops@example.test");
    assert!(
        agentrt::verify::verify(&store, &Default::default())
            .unwrap()
            .intact()
    );
}
