//! A loaded server's tools behind the gate: a scripted run calls them over
//! stdio (the crate's fixture server), through the core's Driver.

use std::time::Duration;

use agentrt::*;
use agentrt::{model::ObservationKind, model::StepStatus};
use agentrt_mcp::{Server, load, parse_rules, pin};

fn fixture() -> Server {
    let mut server = Server::command("fs", &[env!("CARGO_BIN_EXE_agentrt-mcp-fixture")]);
    server.env.push("AGENTRT_MCP_FIXTURE=plain".into());
    server.connect_timeout = Some(Duration::from_secs(10));
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loaded_tool_runs_through_the_gate_with_the_operators_fixed_values() {
    let server = fixture();
    let manifest = pin(
        &server,
        Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    let rules = parse_rules(
        br#"{"read_file": {"side_effect": "read_only", "timeout": "5s"},
             "write_file": {"side_effect": "local_mutation", "timeout": "5s",
                            "allow_hint_mismatch": true, "fixed": {"content": "fixed by the operator"}}}"#,
    )
    .expect("rules");
    let loaded = load(&server, &manifest, &rules).await.expect("load");
    assert_eq!(loaded.tools.len(), 2, "{}", loaded.report.text());
    let write_schema = loaded.tools[1].spec().input_schema;
    assert!(
        !write_schema.as_str().contains("content"),
        "a fixed parameter is hidden from the model: {write_schema}"
    );

    let store = Store::open(":memory:").expect("store");
    let config = GateConfig::new(store.clone(), DefaultPolicy, loaded.tools.clone());
    let agent = ScriptedAgent::new([
        Decision::tool_call("fs_read_file", r#"{"path":"a.txt"}"#),
        Decision::tool_call(
            "fs_write_file",
            r#"{"path":"b.txt","content":"from the model"}"#,
        ),
        Decision::tool_call("fs_write_file", r#"{"path":"b.txt"}"#),
        Decision::complete("true"),
    ]);
    let mut driver = Driver::new(config, agent).expect("driver");
    let run = driver
        .start(Some("r1"), "read and write", Limits::default())
        .await
        .expect("run");
    let steps = store.list_steps("r1").expect("steps");
    assert_eq!(run.status, RunStatus::Completed, "{run:?}\n{steps:#?}");
    let observation = |i: usize| {
        steps[i]
            .observation
            .as_ref()
            .map(|o| {
                format!(
                    "{} {}",
                    o.summary,
                    o.content.as_ref().map_or("", |c| c.as_str())
                )
            })
            .unwrap_or_default()
    };
    assert!(
        observation(0).contains(r#"{\"path\":\"a.txt\"}"#),
        "the server saw the arguments as approved: {}",
        observation(0)
    );
    assert!(
        observation(1).contains("is fixed by the operator"),
        "a fixed parameter the model gave is a tool error: {}",
        observation(1)
    );
    assert!(
        observation(2).contains("fixed by the operator") && observation(2).contains("b.txt"),
        "the fixed value was injected: {}",
        observation(2)
    );
    loaded.connection.close().await;
}

/// Loads the fixture in `mode` and calls its write tool once, directly.
async fn call_write(mode: &str) -> Result<ToolResult, ToolError> {
    let mut server = fixture();
    server.env = vec![format!("AGENTRT_MCP_FIXTURE={mode}")];
    let manifest = pin(
        &server,
        Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    let rules = parse_rules(
        br#"{"write_file": {"side_effect": "local_mutation", "timeout": "5s", "allow_hint_mismatch": true}}"#,
    )
    .expect("rules");
    let loaded = load(&server, &manifest, &rules).await.expect("load");
    let result = loaded.tools[0]
        .call(ToolCall {
            run_id: "r1".into(),
            step_id: "s1".into(),
            args: Canonical::parse_str(r#"{"path":"b.txt"}"#).expect("args"),
            cancel: Cancel::never(),
        })
        .await;
    loaded.connection.close().await;
    result
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_lost_during_a_call_is_an_unknown_outcome() {
    match call_write("die-on-call").await {
        Err(ToolError::Unknown { message }) => {
            assert!(
                message.starts_with(r#"mcp: server "fs": tool "write_file": "#),
                "{message}"
            );
        }
        other => panic!("a lost connection after sending is unknown: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_error_answer_is_an_unknown_outcome_and_invalid_params_a_known_failure() {
    match call_write("error-on-call").await {
        Err(ToolError::Unknown { message }) => {
            assert_eq!(
                message,
                r#"mcp: server "fs": tool "write_file": the server answered with error -32000, not a result: the transfer failed halfway; what it did is not known"#
            );
        }
        other => panic!("an error answer says nothing of what ran: {other:?}"),
    }
    match call_write("invalid-params-on-call").await {
        Err(ToolError::Failed { message }) => {
            assert_eq!(
                message,
                r#"mcp: server "fs": tool "write_file": invalid arguments (-32602): no such path"#
            );
        }
        other => panic!("invalid params are refused before the tool runs: {other:?}"),
    }
}

/// Runs one call of the fixture's write tool (a local mutation) in `mode`
/// through the gate; the run as it stands after, and its store.
async fn run_write_through_the_gate(mode: &str) -> (Run, Store) {
    let mut server = fixture();
    server.env = vec![format!("AGENTRT_MCP_FIXTURE={mode}")];
    let manifest = pin(
        &server,
        Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    let rules = parse_rules(
        br#"{"write_file": {"side_effect": "local_mutation", "timeout": "5s", "allow_hint_mismatch": true}}"#,
    )
    .expect("rules");
    let loaded = load(&server, &manifest, &rules).await.expect("load");
    let store = Store::open(":memory:").expect("store");
    let config = GateConfig::new(store.clone(), DefaultPolicy, loaded.tools.clone());
    let agent = ScriptedAgent::new([
        Decision::tool_call("fs_write_file", r#"{"path":"b.txt"}"#),
        Decision::complete("true"),
    ]);
    let mut driver = Driver::new(config, agent).expect("driver");
    let run = driver
        .start(Some("r1"), "write", Limits::default())
        .await
        .expect("run");
    loaded.connection.close().await;
    (run, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_answered_with_a_json_rpc_error_pauses_for_an_operator() {
    let (run, store) = run_write_through_the_gate("error-on-call").await;
    assert_eq!(run.status, RunStatus::WaitingForApproval, "{run:?}");
    let approvals = store.list_approvals("r1").expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "interrupted_side_effect");
    let steps = store.list_steps("r1").expect("steps");
    assert_eq!(steps.len(), 1, "not run again, nothing after it");
    assert_eq!(steps[0].status, StepStatus::AwaitingApproval);
    let question = steps[0].policy.as_ref().expect("asked");
    assert!(
        question
            .reason
            .contains("the server answered with error -32000, not a result"),
        "{question:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_answered_invalid_params_is_a_tool_error_the_run_goes_on_from() {
    let (run, store) = run_write_through_the_gate("invalid-params-on-call").await;
    assert_eq!(run.status, RunStatus::Completed, "{run:?}");
    assert!(store.list_approvals("r1").expect("approvals").is_empty());
    let steps = store.list_steps("r1").expect("steps");
    let observation = steps[0].observation.as_ref().expect("observed");
    assert_eq!(observation.kind, ObservationKind::ToolError);
    assert!(
        observation.summary.contains("invalid arguments (-32602)"),
        "{observation:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_asking_for_a_sample_or_for_user_input_is_refused_both() {
    let result = call_write("asks").await.expect("the call completes");
    let text = String::from_utf8(result.content).expect("utf-8");
    assert_eq!(
        text, r#""sampling/createMessage: error -32601; elicitation/create: error -32601""#,
        "neither request is answered with content, nor declined: both are refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_that_offers_no_tool_fails_with_the_report() {
    let server = fixture();
    let manifest = pin(
        &server,
        Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    match load(&server, &manifest, &agentrt_mcp::Rules::new()).await {
        Err(agentrt_mcp::McpError::NoToolOffered { report, .. }) => {
            assert_eq!(report.unclassified, ["read_file", "write_file"]);
        }
        other => panic!("nothing is classified, nothing offered: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_answered_with_a_request_for_input_or_made_a_task_is_unknown() {
    match call_write("input-required").await {
        Err(ToolError::Unknown { message }) => {
            assert!(
                message.contains("asked for more input, which this client never gives"),
                "{message}"
            );
        }
        other => panic!("what ran before the server asked is not known: {other:?}"),
    }
    match call_write("task").await {
        Err(ToolError::Unknown { message }) => {
            assert!(message.contains("made the call a task"), "{message}");
        }
        other => panic!("a task's outcome is not known: {other:?}"),
    }
}
