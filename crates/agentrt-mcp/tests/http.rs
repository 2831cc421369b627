//! Pin, load and call over streamable HTTP against the fixture server in
//! `agentrt-mcp-fixture` (127.0.0.1): answers as JSON or as an event stream, and the
//! misbehaviours the client must meet (a redirect, a hang, an old
//! protocol, an expired session, an answer past the cap, an answer lost).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agentrt::{Cancel, Canonical, Timestamp, ToolCall, ToolError, ToolResult};
use agentrt_mcp::*;
use agentrt_mcp_fixture::{Mode, Seen, serve};

fn server(url: &str) -> Server {
    let mut server = Server::url("fs", url);
    server.connect_timeout = Some(Duration::from_secs(10));
    server
}

fn at() -> Timestamp {
    Timestamp::parse("2026-12-01T09:00:00Z").expect("time")
}

const RULES: &[u8] = br#"{"read_file": {"side_effect": "read_only", "timeout": "5s"}}"#;

/// Pins and loads the fixture in `mode` and calls `read_file` once.
async fn call_once(mode: Mode) -> (Result<ToolResult, ToolError>, Arc<Seen>) {
    let (url, seen) = serve(mode).await;
    let server = server(&url);
    let manifest = pin(&server, at()).await.expect("pin");
    let loaded = load(&server, &manifest, &parse_rules(RULES).expect("rules"))
        .await
        .expect("load");
    let result = loaded.tools[0]
        .call(ToolCall {
            run_id: "r1".into(),
            step_id: "s1".into(),
            args: Canonical::parse_str(r#"{"path":"notes.txt","lines":100}"#).expect("args"),
            cancel: Cancel::never(),
        })
        .await;
    loaded.connection.close().await;
    (result, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_http_is_pinned_from_the_bytes_sent_and_called_in_its_session() {
    for mode in [Mode::Json, Mode::Sse] {
        let (url, _) = serve(mode).await;
        let manifest = pin(&server(&url), at()).await.expect("pin");
        assert_eq!(
            manifest.tools["read_file"].input_schema.as_str(),
            r#"{"properties":{"lines":{"maximum":1e2,"type":"number"},"path":{"type":"string"}},"required":["path"],"type":"object"}"#,
            "{mode:?}: pinned from the bytes sent: serde_json would have written 100.0"
        );

        let (result, seen) = call_once(mode).await;
        let result = result.expect("called");
        assert_eq!(
            String::from_utf8_lossy(&result.content),
            r#""{\"lines\":100,\"path\":\"notes.txt\"}""#,
            "{mode:?}: the result as the server sent it"
        );
        assert_eq!(
            *seen.call_sessions.lock().expect("lock"),
            [Some("session-1".to_owned())],
            "{mode:?}: the call is made in the session"
        );
        assert!(
            seen.deletes
                .lock()
                .expect("lock")
                .contains(&Some("session-1".to_owned())),
            "{mode:?}: close deletes the session"
        );
        assert_eq!(
            seen.gets.load(Ordering::SeqCst),
            0,
            "{mode:?}: the server-push stream is never opened"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_refused_not_followed() {
    let (url, seen) = serve(Mode::Redirect).await;
    let e = connect(&server(&url)).await.expect_err("redirected");
    let text = e.to_string();
    assert!(text.contains("HTTP 307: redirects are refused"), "{text}");
    assert_eq!(seen.elsewhere.load(Ordering::SeqCst), 0, "not followed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_over_http_is_timed_out_naming_the_step() {
    let (url, _) = serve(Mode::Hang).await;
    let mut server = server(&url);
    server.connect_timeout = Some(Duration::from_secs(1));
    let e = connect(&server).await.expect_err("hangs");
    assert!(e.to_string().contains("connect: timed out after 1s"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_over_http_on_an_older_protocol_is_refused() {
    let (url, _) = serve(Mode::Old).await;
    let e = connect(&server(&url)).await.expect_err("old");
    assert!(
        e.to_string().contains("2025-03-26, older than 2025-06-18"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_not_opened_again_behind_the_caller() {
    let (result, seen) = call_once(Mode::Expire).await;
    match result {
        Err(ToolError::Unknown { message }) => {
            assert!(message.contains("Session expired"), "{message}");
        }
        other => panic!("an expired session is not a result: {other:?}"),
    }
    assert_eq!(
        seen.initializes.load(Ordering::SeqCst),
        2,
        "one handshake for the pin, one for the load: none to recover the session"
    );
    assert_eq!(
        seen.call_sessions.lock().expect("lock").len(),
        1,
        "not retried"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_past_the_cap_fails_and_is_never_truncated() {
    let (result, _) = call_once(Mode::Huge).await;
    match result {
        Err(ToolError::Unknown { message }) => {
            assert!(
                message.contains("exceeded the maximum size of 16777216 bytes"),
                "{message}"
            );
        }
        other => panic!("an answer past the cap is not a result: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_answer_is_lost_over_http_is_an_unknown_outcome() {
    let (result, seen) = call_once(Mode::Lost).await;
    assert!(
        matches!(result, Err(ToolError::Unknown { .. })),
        "sent and unanswered: {result:?}"
    );
    assert_eq!(
        seen.call_sessions.lock().expect("lock").len(),
        1,
        "not resent"
    );
    assert_eq!(seen.gets.load(Ordering::SeqCst), 0, "not resumed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_rpc_error_over_http_is_an_unknown_outcome_whatever_the_status() {
    for http_status in [200, 400, 500] {
        let (result, seen) = call_once(Mode::CallError {
            code: -32000,
            http_status,
        })
        .await;
        match result {
            Err(ToolError::Unknown { message }) => assert!(
                message.contains("the server answered with error -32000, not a result"),
                "{http_status}: {message}"
            ),
            other => panic!("{http_status}: an error answer is not known: {other:?}"),
        }
        assert_eq!(seen.call_sessions.lock().expect("lock").len(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_params_over_http_is_a_known_failure_whatever_the_status() {
    for http_status in [200, 400] {
        let (result, _) = call_once(Mode::CallError {
            code: -32602,
            http_status,
        })
        .await;
        match result {
            Err(ToolError::Failed { message }) => assert!(
                message.ends_with("invalid arguments (-32602): the transfer failed halfway"),
                "{http_status}: {message}"
            ),
            other => panic!("{http_status}: invalid params are refused before running: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_http_that_does_not_parse_is_an_unknown_outcome() {
    let (result, _) = call_once(Mode::Garbled).await;
    assert!(
        matches!(result, Err(ToolError::Unknown { .. })),
        "answered with nothing readable: {result:?}"
    );
}
