//! `agentrt-proxy serve` as a host launches it: the binary, spoken to over
//! stdio by an rmcp client, with the MCP fixture server (HTTP, in this
//! process) upstream. Each call is a run of its own, recorded with the
//! event sequences of design §28; an approval is collected by the same
//! call again, or while the call is held.

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentrt::operator::{DecideOptions, Operator};
use agentrt::{EventType, Store};
use agentrt_mcp_fixture::{Mode, Seen, serve};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService, ServiceExt};
use rmcp::transport::TokioChildProcess;

struct Proxy {
    dir: tempfile::TempDir,
    seen: Arc<Seen>,
    client: RunningService<RoleClient, ()>,
}

/// Pins the fixture and starts the proxy binary with `rules` for its
/// `read_file` and `extra` configuration fields.
async fn start(rules: &str, extra: &str) -> Proxy {
    start_with(Mode::Json, rules, extra).await
}

/// [`start`] with the fixture in `mode`.
async fn start_with(mode: Mode, rules: &str, extra: &str) -> Proxy {
    let (url, seen) = serve(mode).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = support::configure(
        dir.path(),
        &url,
        &format!(r#""session": "laptop" {extra}"#),
        rules,
    )
    .await;
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"));
    command.args(["serve", "--config", &config.to_string_lossy()]);
    let transport = TokioChildProcess::new(command).expect("spawn");
    let client = ().serve(transport).await.expect("handshake");
    Proxy { dir, seen, client }
}

impl Proxy {
    fn db(&self) -> PathBuf {
        self.dir.path().join("proxy.db")
    }

    async fn call(&self, args: serde_json::Value) -> CallToolResult {
        let serde_json::Value::Object(args) = args else {
            panic!("arguments are an object");
        };
        self.client
            .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args))
            .await
            .expect("a tool result")
    }

    fn upstream_calls(&self) -> usize {
        self.seen.call_sessions.lock().expect("lock").len()
    }

    fn store(&self) -> Store {
        Store::open_existing(self.db(), false).expect("the proxy's database")
    }

    /// The event types of each run, oldest run first.
    fn runs(&self) -> Vec<(String, Vec<EventType>)> {
        let store = self.store();
        let mut runs = store.list_runs(100, 0).expect("runs").items;
        runs.sort_by_key(|r| r.created_at);
        runs.into_iter()
            .map(|r| {
                let events = store.list_events(&r.id).expect("events");
                (r.id, events.into_iter().map(|e| e.event_type).collect())
            })
            .collect()
    }
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("")
}

/// The approval id an answer names.
fn approval_id(answer: &str) -> String {
    let start = answer.find("(approval ").expect("an approval id") + "(approval ".len();
    let end = answer[start..].find(')').expect("closed") + start;
    answer[start..end].to_owned()
}

use EventType::*;

const ALLOWED: &[EventType] = &[
    RunCreated,
    RunStarted,
    StepStarted,
    StepDecided,
    StepPolicy,
    StepToolStarted,
    StepToolFinished,
    RunFinished,
];

const COLLECTED: &[EventType] = &[
    RunCreated,
    RunStarted,
    StepStarted,
    StepDecided,
    StepPolicy,
    ApprovalRequested,
    ApprovalDecided,
    RunResumed,
    StepPolicy,
    StepToolStarted,
    StepToolFinished,
    RunFinished,
];

const READ: &str = r#"{"side_effect": "read_only", "timeout": "5s"}"#;
const CHANGE: &str = r#"{"side_effect": "remote_mutation", "timeout": "5s"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_call_is_one_run_that_returns_the_result() {
    let proxy = start(READ, "").await;
    let tools = proxy.client.list_all_tools().await.expect("tools");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["fs_read_file", "gate_status"]);
    let info = proxy.client.peer_info().expect("server info");
    let identity = info.server_info.as_ref().expect("an identity");
    assert_eq!(identity.name, "gated-tools");

    let result = proxy.call(serde_json::json!({"path": "a.txt"})).await;
    assert_eq!(result.is_error, Some(false));
    assert_eq!(text(&result), r#"{"path":"a.txt"}"#);
    assert_eq!(proxy.upstream_calls(), 1);
    let runs = proxy.runs();
    assert_eq!(runs.len(), 1);
    assert!(runs[0].0.starts_with("laptop."), "{}", runs[0].0);
    assert_eq!(runs[0].1, ALLOWED);
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_needs_approval_waits_and_the_same_call_collects_it_once() {
    let proxy = start(CHANGE, r#", "hold": "0s""#).await;
    let args = serde_json::json!({"path": "pay.txt"});
    let pending = proxy.call(args.clone()).await;
    let answer = text(&pending);
    assert_eq!(pending.is_error, Some(false));
    assert!(answer.starts_with("PENDING_APPROVAL: "), "{answer}");
    assert!(
        !answer.contains("laptop.") && !answer.contains("proxy.db"),
        "{answer}"
    );
    assert_eq!(proxy.upstream_calls(), 0, "nothing ran");

    // Asked again before a decision: still waiting, on the same approval.
    let again = text(&proxy.call(args.clone()).await);
    assert_eq!(approval_id(&again), approval_id(&answer));
    assert_eq!(proxy.upstream_calls(), 0);

    let runs = proxy.runs();
    assert_eq!(runs.len(), 1, "one run for the request");
    Operator::new(proxy.store())
        .approve(
            &runs[0].0,
            &approval_id(&answer),
            &DecideOptions {
                by: "operator",
                note: "",
                shown_hash: None,
            },
        )
        .expect("approved");

    let collected = proxy.call(args).await;
    assert_eq!(text(&collected), r#"{"path":"pay.txt"}"#);
    assert_eq!(proxy.upstream_calls(), 1, "executed once");
    let runs = proxy.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].1, COLLECTED);
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_call_gets_the_real_result_when_approved_in_time_and_plain_words_when_rejected() {
    let proxy = Arc::new(start(CHANGE, r#", "hold": "20s""#).await);
    for (verb, args) in [("approve", "a.txt"), ("reject", "b.txt")] {
        let held = {
            let proxy = Arc::clone(&proxy);
            tokio::spawn(async move { proxy.call(serde_json::json!({"path": args})).await })
        };
        // The operator, from the store, once the approval exists.
        let (run, approval) = loop {
            let store = proxy.store();
            let found = store
                .list_runs(100, 0)
                .expect("runs")
                .items
                .into_iter()
                .find_map(|r| {
                    let approvals = store.list_approvals(&r.id).ok()?;
                    let pending = approvals
                        .into_iter()
                        .find(|a| a.status == agentrt::ApprovalStatus::Pending)?;
                    Some((r.id, pending.id))
                });
            if let Some(found) = found {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let operator = Operator::new(proxy.store());
        let options = DecideOptions {
            by: "operator",
            note: "not this one",
            shown_hash: None,
        };
        if verb == "approve" {
            operator
                .approve(&run, &approval, &options)
                .expect("approve");
        } else {
            operator.reject(&run, &approval, &options).expect("reject");
        }
        let result = held.await.expect("the held call");
        let answer = text(&result);
        if verb == "approve" {
            assert_eq!(
                answer, r#"{"path":"a.txt"}"#,
                "the real result, in the same call"
            );
        } else {
            assert_eq!(result.is_error, Some(true));
            assert!(
                answer.starts_with(r#"REJECTED: An operator rejected this request with the note "not this one". Nothing was executed."#),
                "{answer}"
            );
        }
    }
    assert_eq!(proxy.upstream_calls(), 1, "only the approved call ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denied_and_invalid_calls_end_their_runs_with_the_operators_fail() {
    let proxy = start(CHANGE, r#", "policy": {"remote_mutation": "deny"}"#).await;
    let denied = proxy.call(serde_json::json!({"path": "x"})).await;
    assert_eq!(denied.is_error, Some(true));
    assert_eq!(
        text(&denied),
        "DENIED: The policy refused this request: side effect remote_mutation is deny by policy. Nothing was executed."
    );
    let invalid = proxy.call(serde_json::json!({"path": 5})).await;
    assert_eq!(invalid.is_error, Some(true));
    let answer = text(&invalid);
    assert!(
        answer.starts_with("INVALID: The arguments do not fit"),
        "{answer}"
    );
    assert!(!answer.contains("://tools/"), "{answer}");
    assert_eq!(proxy.upstream_calls(), 0);
    let runs = proxy.runs();
    let denied_run = [
        RunCreated,
        RunStarted,
        StepStarted,
        StepDecided,
        StepPolicy,
        StepFailed,
        StepStarted,
        StepDecided,
        RunFinished,
    ];
    let invalid_run = [
        RunCreated,
        RunStarted,
        StepStarted,
        StepDecided,
        StepFailed,
        StepStarted,
        StepDecided,
        RunFinished,
    ];
    assert_eq!(runs[0].1, denied_run);
    assert_eq!(runs[1].1, invalid_run);
    let store = proxy.store();
    for (run, _) in &runs {
        let run = store.get_run(run).expect("run");
        assert_eq!(run.status, agentrt::RunStatus::Failed, "{run:?}");
    }
    assert!(proxy.seen.initializes.load(Ordering::SeqCst) >= 1);
}

/// Writes one JSON-RPC line to the proxy and reads lines until the answer
/// to `id`.
async fn exchange(
    stdin: &mut tokio::process::ChildStdin,
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    message: &str,
    id: Option<u64>,
) -> Option<serde_json::Value> {
    use tokio::io::AsyncWriteExt;
    stdin
        .write_all(format!("{message}\n").as_bytes())
        .await
        .expect("write");
    let id = id?;
    loop {
        let line = lines.next_line().await.expect("read").expect("a line");
        let value: serde_json::Value = serde_json::from_str(&line).expect("JSON");
        if value["id"] == id {
            return Some(value);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosts_argument_bytes_are_judged_and_recorded_as_it_wrote_them() {
    use tokio::io::AsyncBufReadExt;

    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let config = support::configure(dir.path(), &url, r#""session": "raw""#, READ).await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(&config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    exchange(
        &mut stdin,
        &mut lines,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#,
        Some(1),
    )
    .await;
    exchange(
        &mut stdin,
        &mut lines,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        None,
    )
    .await;
    // `1.50` as written: the approved bytes cannot reach the server as
    // they are (its library would send 1.5), so the call is refused.
    let spelled = exchange(
        &mut stdin,
        &mut lines,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fs_read_file","arguments":{"path":"a.txt","lines":1.50}}}"#,
        Some(2),
    )
    .await
    .expect("an answer");
    assert_eq!(spelled["result"]["isError"], true, "{spelled}");
    assert!(
        spelled
            .to_string()
            .contains("would not reach the server as approved"),
        "{spelled}"
    );
    // A repeated key is not acceptable JSON: invalid, not the last value.
    let repeated = exchange(
        &mut stdin,
        &mut lines,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_read_file","arguments":{"path":"a.txt","path":"b.txt"}}}"#,
        Some(3),
    )
    .await
    .expect("an answer");
    let text = repeated["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("INVALID: "), "{repeated}");
    assert_eq!(
        seen.call_sessions.lock().expect("lock").len(),
        0,
        "nothing sent"
    );
    drop(stdin);
    let _ = child.wait().await;

    let store = Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let mut runs = store.list_runs(10, 0).expect("runs").items;
    runs.sort_by_key(|r| r.created_at);
    let steps = store.list_steps(&runs[0].id).expect("steps");
    let recorded = steps[0]
        .decision
        .as_ref()
        .and_then(|d| d.args.as_ref())
        .expect("recorded arguments");
    assert_eq!(recorded.as_str(), r#"{"lines":1.50,"path":"a.txt"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_request_is_refused_within_the_window_without_a_new_run() {
    let proxy = start(CHANGE, r#", "hold": "0s""#).await;
    let args = serde_json::json!({"path": "wire.txt"});
    let pending = text(&proxy.call(args.clone()).await);
    let runs = proxy.runs();
    Operator::new(proxy.store())
        .reject(
            &runs[0].0,
            &approval_id(&pending),
            &DecideOptions {
                by: "operator",
                note: "wrong account",
                shown_hash: None,
            },
        )
        .expect("rejected");
    for _ in 0..2 {
        let refused = proxy.call(args.clone()).await;
        assert_eq!(refused.is_error, Some(true));
        let answer = text(&refused);
        assert!(
            answer.starts_with(r#"REJECTED: An operator rejected this request with the note "wrong account". Nothing was executed. Identical requests are refused until "#),
            "{answer}"
        );
    }
    assert_eq!(proxy.runs().len(), 1, "refused without a new run");
    // Other arguments are another request.
    let other = text(&proxy.call(serde_json::json!({"path": "other.txt"})).await);
    assert!(other.starts_with("PENDING_APPROVAL: "), "{other}");
    assert_eq!(proxy.upstream_calls(), 0);
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_ran_is_a_duplicate_within_the_window_and_a_read_never_is() {
    let allowed = r#", "policy": {"remote_mutation": "allow"}"#;
    let proxy = start(CHANGE, allowed).await;
    let args = serde_json::json!({"path": "pay.txt"});
    let first = proxy.call(args.clone()).await;
    assert_eq!(text(&first), r#"{"path":"pay.txt"}"#);
    let again = proxy.call(args.clone()).await;
    assert_eq!(again.is_error, Some(true));
    let answer = text(&again);
    assert!(
        answer.starts_with("DUPLICATE: An identical request already ran at ")
            && answer.contains(
                " and succeeded. It was not run again. Identical requests are refused until "
            ),
        "{answer}"
    );
    // Key order and whitespace make no new request.
    let reordered = text(&proxy.call(serde_json::json!({ "path" : "pay.txt" })).await);
    assert!(reordered.starts_with("DUPLICATE: "), "{reordered}");
    assert_eq!(proxy.upstream_calls(), 1, "the change ran once");
    assert_eq!(proxy.runs().len(), 1);
    proxy.client.cancel().await.expect("close");

    // A tool with its own zero window runs again; a read always does.
    let no_window = r#"{"side_effect": "remote_mutation", "timeout": "5s", "repeat_window": "0s"}"#;
    let proxy = start(no_window, allowed).await;
    proxy.call(args.clone()).await;
    proxy.call(args.clone()).await;
    assert_eq!(proxy.upstream_calls(), 2);
    proxy.client.cancel().await.expect("close");
    let proxy = start(READ, "").await;
    proxy.call(args.clone()).await;
    proxy.call(args).await;
    assert_eq!(proxy.upstream_calls(), 2, "reads are never duplicates");
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_would_ask_is_blocked_while_max_pending_approvals_wait() {
    let proxy = start(CHANGE, r#", "hold": "0s", "max_pending": 2"#).await;
    for path in ["a", "b"] {
        let answer = text(&proxy.call(serde_json::json!({"path": path})).await);
        assert!(answer.starts_with("PENDING_APPROVAL: "), "{answer}");
    }
    let blocked = proxy.call(serde_json::json!({"path": "c"})).await;
    assert_eq!(blocked.is_error, Some(true));
    assert!(
        text(&blocked).starts_with(
            "BLOCKED: 2 requests of this session already wait for an operator's approval"
        ),
        "{}",
        text(&blocked)
    );
    assert_eq!(proxy.runs().len(), 2, "nothing asked");
    // Asking again about a waiting request is not a new ask.
    let again = text(&proxy.call(serde_json::json!({"path": "a"})).await);
    assert!(again.starts_with("PENDING_APPROVAL: "), "{again}");
    // Once one is decided, the next may ask.
    let runs = proxy.runs();
    let approvals = proxy.store().list_approvals(&runs[0].0).expect("approvals");
    Operator::new(proxy.store())
        .approve(
            &runs[0].0,
            &approvals[0].id,
            &DecideOptions {
                by: "operator",
                note: "",
                shown_hash: None,
            },
        )
        .expect("approved");
    let asked = text(&proxy.call(serde_json::json!({"path": "c"})).await);
    assert!(asked.starts_with("PENDING_APPROVAL: "), "{asked}");
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_tool_says_what_waits_and_what_became_of_an_approval() {
    let proxy = start(CHANGE, r#", "hold": "0s""#).await;
    let status = |args: serde_json::Value| {
        let serde_json::Value::Object(args) = args else {
            panic!("an object");
        };
        let client = &proxy.client;
        async move {
            let result = client
                .call_tool(CallToolRequestParams::new("gate_status").with_arguments(args))
                .await
                .expect("a status");
            (result.is_error, text(&result))
        }
    };
    let (_, none) = status(serde_json::json!({})).await;
    assert_eq!(
        none,
        "GATE_STATUS: no request in this session is waiting for an operator's approval."
    );
    let a = approval_id(&text(&proxy.call(serde_json::json!({"path": "a"})).await));
    let b = approval_id(&text(&proxy.call(serde_json::json!({"path": "b"})).await));
    let (is_error, two) = status(serde_json::json!({})).await;
    assert_eq!(is_error, Some(false));
    assert!(
        two.starts_with(
            "GATE_STATUS: 2 requests of this session wait for an operator's approval:\n- approval "
        ),
        "{two}"
    );
    assert!(
        two.contains(&a) && two.contains(&b) && two.contains(r#"fs_read_file {"path":"a"}"#),
        "{two}"
    );
    let (_, pending) = status(serde_json::json!({"approval_id": a})).await;
    assert_eq!(
        pending,
        format!("GATE_STATUS: approval {a} waits for an operator's decision.")
    );

    let runs = proxy.runs();
    let options = DecideOptions {
        by: "operator",
        note: "no",
        shown_hash: None,
    };
    let operator = Operator::new(proxy.store());
    operator.approve(&runs[0].0, &a, &options).expect("approve");
    operator.reject(&runs[1].0, &b, &options).expect("reject");
    let (_, approved) = status(serde_json::json!({"approval_id": a})).await;
    assert!(
        approved.contains("approved and awaits collection"),
        "{approved}"
    );
    proxy.call(serde_json::json!({"path": "a"})).await;
    let (_, ran) = status(serde_json::json!({"approval_id": a})).await;
    assert!(ran.contains("ran and succeeded"), "{ran}");
    let (_, rejected) = status(serde_json::json!({"approval_id": b})).await;
    assert!(
        rejected.contains(r#"was rejected by an operator with the note "no""#),
        "{rejected}"
    );
    let (_, unknown) = status(serde_json::json!({"approval_id": "zzz"})).await;
    assert_eq!(
        unknown,
        "GATE_STATUS: no approval zzz is known in this session from the last hour."
    );
    let (is_error, invalid) = status(serde_json::json!({"run": "x"})).await;
    assert_eq!(is_error, Some(true));
    assert!(invalid.starts_with("INVALID: "), "{invalid}");
    assert_eq!(proxy.runs().len(), 2, "the status tool is never a run");
    assert_eq!(proxy.upstream_calls(), 1);
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_is_asked_about_again_until_an_operator_lets_it_run() {
    // The call's answer is lost on the way back: its outcome is unknown.
    let rule = r#"{"side_effect": "remote_mutation", "timeout": "5s", "repeat_window": "0s"}"#;
    let proxy = start_with(
        Mode::Lost,
        rule,
        r#", "hold": "0s", "policy": {"remote_mutation": "allow"}"#,
    )
    .await;
    let args = serde_json::json!({"path": "transfer.txt"});
    let first = text(&proxy.call(args.clone()).await);
    assert!(first.starts_with("UNKNOWN_OUTCOME: "), "{first}");
    assert_eq!(proxy.upstream_calls(), 1);

    // Another request to the same tool is blocked while the question waits.
    let other = proxy.call(serde_json::json!({"path": "other.txt"})).await;
    assert_eq!(other.is_error, Some(true));
    assert!(
        text(&other).starts_with("BLOCKED: Another request to this tool"),
        "{}",
        text(&other)
    );
    assert_eq!(proxy.upstream_calls(), 1);

    // The operator rejects the question: that does not resolve it.
    let runs = proxy.runs();
    let question = proxy.store().list_approvals(&runs[0].0).expect("approvals");
    assert_eq!(question[0].kind, "interrupted_side_effect");
    let options = DecideOptions {
        by: "operator",
        note: "",
        shown_hash: None,
    };
    Operator::new(proxy.store())
        .reject(&runs[0].0, &question[0].id, &options)
        .expect("reject");
    let asked = text(&proxy.call(args.clone()).await);
    assert!(asked.starts_with("INTERRUPTED: "), "asked again: {asked}");
    assert_eq!(
        proxy.upstream_calls(),
        1,
        "not run again without an operator"
    );
    let runs = proxy.runs();
    assert_eq!(runs.len(), 2, "a fresh run asks");
    let again = proxy.store().list_approvals(&runs[1].0).expect("approvals");
    assert_eq!(again[0].kind, "interrupted_side_effect");
    let capability = again[0].capability.as_str();
    assert!(
        capability.contains(&format!(
            r#""interrupted":{{"ended":"no_answer","run_id":"{}""#,
            runs[0].0
        )),
        "names the earlier attempt: {capability}"
    );

    // Approved, the same call runs it (once more).
    Operator::new(proxy.store())
        .approve(&runs[1].0, &again[0].id, &options)
        .expect("approve");
    proxy.call(args).await;
    assert_eq!(proxy.upstream_calls(), 2);
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_nobody_is_asked_about_is_asked_again_before_its_tool_is_blocked() {
    let rule = r#"{"side_effect": "remote_mutation", "timeout": "5s"}"#;
    let proxy = start_with(
        Mode::Lost,
        rule,
        r#", "hold": "0s", "policy": {"remote_mutation": "allow"}"#,
    )
    .await;
    let first = text(
        &proxy
            .call(serde_json::json!({"path": "transfer.txt"}))
            .await,
    );
    assert!(first.starts_with("UNKNOWN_OUTCOME: "), "{first}");
    // The operator rejects the question: nothing waits about the unknown
    // outcome now, and it is not resolved.
    let runs = proxy.runs();
    let question = proxy.store().list_approvals(&runs[0].0).expect("approvals");
    // The answer names the question the run paused on.
    assert!(first.contains(&question[0].id), "{first}");
    let options = DecideOptions {
        by: "operator",
        note: "",
        shown_hash: None,
    };
    Operator::new(proxy.store())
        .reject(&runs[0].0, &question[0].id, &options)
        .expect("reject");

    // Another request to the tool: the question is asked again in a fresh
    // run of the first request, and this call is blocked, naming it.
    let other = proxy.call(serde_json::json!({"path": "other.txt"})).await;
    let blocked = text(&other);
    assert!(
        blocked.starts_with("BLOCKED: Another request to this tool"),
        "{blocked}"
    );
    assert_eq!(proxy.upstream_calls(), 1, "nothing ran: {blocked}");
    let runs = proxy.runs();
    assert_eq!(runs.len(), 2, "a fresh run asks; none for the blocked call");
    let asked = proxy.store().list_approvals(&runs[1].0).expect("approvals");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].kind, "interrupted_side_effect");
    assert_eq!(asked[0].status, agentrt::ApprovalStatus::Pending);
    assert!(
        blocked.contains(&format!("(approval {})", asked[0].id)),
        "{blocked}"
    );
    let capability = asked[0].capability.as_str();
    assert!(
        capability.contains(r#""args":{"path":"transfer.txt"}"#)
            && capability.contains(&format!(
                r#""interrupted":{{"ended":"no_answer","run_id":"{}""#,
                runs[0].0
            )),
        "the first request, naming its attempt: {capability}"
    );
    // Asked once: the next call is blocked on the same question.
    let again = text(&proxy.call(serde_json::json!({"path": "third.txt"})).await);
    assert!(
        again.contains(&format!("(approval {})", asked[0].id)),
        "{again}"
    );
    assert_eq!(proxy.runs().len(), 2);

    // Approved, the first request's own call runs it; then the tool is
    // free again.
    Operator::new(proxy.store())
        .approve(&runs[1].0, &asked[0].id, &options)
        .expect("approve");
    proxy
        .call(serde_json::json!({"path": "transfer.txt"}))
        .await;
    assert_eq!(proxy.upstream_calls(), 2);
    proxy.client.cancel().await.expect("close");
}

/// Runs `agentrt-proxy recheck --config <dir>/proxy.json` and `extra`.
async fn recheck(dir: &std::path::Path, extra: &[&str]) -> (u8, String, String) {
    let config = dir.join("proxy.json").to_string_lossy().into_owned();
    let mut args: Vec<String> = vec!["recheck".into(), "--config".into(), config];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recheck_replays_the_sessions_calls_under_the_policy_now_and_writes_nothing() {
    let proxy = start(CHANGE, r#", "policy": {"remote_mutation": "allow"}"#).await;
    proxy.call(serde_json::json!({"path": "a"})).await;
    let db_path = proxy.db();
    let Proxy {
        dir: tempdir,
        client,
        ..
    } = proxy;
    client.cancel().await.expect("close");
    let dir = tempdir.path().to_owned();
    let db = std::fs::read(&db_path).expect("db");

    let (code, out, err) = recheck(&dir, &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("1 run(s) re-checked under agentrt-proxy/blake3:")
            && out.contains(
                ": 1 decision(s) re-checked, 0 not re-checkable and skipped; 0 run(s) differ\n"
            ),
        "{out}"
    );
    assert!(out.contains("not covered: the duplicate rule"), "{out}");

    // The operator tightens the policy: the call would now be denied.
    let config = dir.join("proxy.json");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace(
            r#""remote_mutation": "allow""#,
            r#""remote_mutation": "deny""#,
        ),
    )
    .expect("config");
    let (code, out, _) = recheck(&dir, &[]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 run(s) differ"), "{out}");
    let (code, out, _) = recheck(&dir, &["--json"]).await;
    assert_eq!(code, 1);
    let reports: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(reports.as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(reports[0]["same"], false, "{out}");

    let (code, _, err) = recheck(&dir, &["--run", "laptop.nope"]).await;
    assert_eq!(code, 1);
    assert!(
        err.contains(r#"no run of run "laptop.nope" was found"#),
        "{err}"
    );
    assert_eq!(std::fs::read(&db_path).expect("db"), db, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_answered_with_a_json_rpc_error_is_not_run_again_even_past_the_repeat_window() {
    // No repeat window: a known failure could run again at once.
    let rule = r#"{"side_effect": "remote_mutation", "timeout": "5s", "repeat_window": "0s"}"#;
    let proxy = start_with(
        Mode::CallError {
            code: -32000,
            http_status: 200,
        },
        rule,
        r#", "hold": "0s", "policy": {"remote_mutation": "allow"}"#,
    )
    .await;
    let args = serde_json::json!({"path": "transfer.txt"});
    let first = text(&proxy.call(args.clone()).await);
    let again = text(&proxy.call(args).await);
    assert_eq!(
        proxy.upstream_calls(),
        1,
        "the same request is not executed again: {first} / {again}"
    );
    assert!(first.starts_with("UNKNOWN_OUTCOME: "), "{first}");
    assert!(
        again.starts_with("INTERRUPTED: ") && again.contains("It will not run again unless"),
        "the same question, not a new attempt: {again}"
    );
    let other = text(&proxy.call(serde_json::json!({"path": "other.txt"})).await);
    assert!(
        other.starts_with("BLOCKED: Another request to this tool"),
        "{other}"
    );
    assert_eq!(
        proxy.upstream_calls(),
        1,
        "never executed a second time without an operator"
    );
    proxy.client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_refused_as_invalid_params_is_a_known_failure_that_may_run_again() {
    let rule = r#"{"side_effect": "remote_mutation", "timeout": "5s", "repeat_window": "0s"}"#;
    let proxy = start_with(
        Mode::CallError {
            code: -32602,
            http_status: 200,
        },
        rule,
        r#", "hold": "0s", "policy": {"remote_mutation": "allow"}"#,
    )
    .await;
    let args = serde_json::json!({"path": "transfer.txt"});
    let first = proxy.call(args.clone()).await;
    assert_eq!(first.is_error, Some(true));
    assert!(
        text(&first).contains("invalid arguments (-32602)"),
        "{}",
        text(&first)
    );
    let again = proxy.call(args).await;
    assert!(
        text(&again).contains("invalid arguments (-32602)"),
        "{}",
        text(&again)
    );
    assert_eq!(proxy.upstream_calls(), 2, "a refusal blocks nothing");
    proxy.client.cancel().await.expect("close");
}
