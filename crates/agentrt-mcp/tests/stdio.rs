//! Pin and load against a real MCP server over stdio: the crate's fixture
//! server (`agentrt-mcp-fixture`), started as a child process.

use std::time::Duration;

use agentrt::{SideEffect, Timestamp};
use agentrt_mcp::*;

fn fixture(mode: &str) -> Server {
    let mut server = Server::command("fs", &[env!("CARGO_BIN_EXE_agentrt-mcp-fixture")]);
    server.env.push(format!("AGENTRT_MCP_FIXTURE={mode}"));
    server.connect_timeout = Some(Duration::from_secs(10));
    server
}

fn at() -> Timestamp {
    Timestamp::parse("2026-12-01T09:00:00Z").expect("time")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pin_records_the_tools_from_the_bytes_the_server_sent() {
    let manifest = pin(&fixture("plain"), at()).await.expect("pin");
    assert_eq!(manifest.server, "fs");
    let names: Vec<&str> = manifest.tools.keys().map(String::as_str).collect();
    assert_eq!(names, ["read_file", "write_file"]);
    let read = &manifest.tools["read_file"];
    assert_eq!(
        read.input_schema.as_str(),
        r#"{"properties":{"lines":{"maximum":1e2,"type":"number"},"path":{"type":"string"}},"required":["path"],"type":"object"}"#,
        "pinned from the bytes sent: serde_json would have written 100.0"
    );
    assert_eq!(
        read.annotations.as_ref().map(|a| a.as_str()),
        Some(r#"{"readOnlyHint":true}"#)
    );
    let paged = pin(&fixture("paged"), at()).await.expect("paged pin");
    assert_eq!(paged.tools, manifest.tools, "two pages, the same tools");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_changed_since_the_pin_is_refused_per_tool() {
    let manifest = pin(&fixture("plain"), at()).await.expect("pin");
    let rules = parse_rules(
        br#"{"read_file": {"side_effect": "read_only", "timeout": "5s"},
             "write_file": {"side_effect": "local_mutation", "timeout": "10s", "allow_hint_mismatch": true}}"#,
    )
    .expect("rules");
    for (mode, refused, reason) in [
        ("changed", "read_file", "description changed since the pin"),
        ("renamed", "write_file", "no longer offers it"),
    ] {
        let connection = connect(&fixture(mode)).await.expect("connect");
        let live = connection.list_tools().await.expect("list");
        connection.close().await;
        let (offered, report) = check_tools("fs", &manifest, &rules, &live, None);
        assert_eq!(offered.len(), 1, "{mode}: {}", report.text());
        let (tool, why) = &report.refused[0];
        assert_eq!(tool, refused);
        assert!(why.contains(reason), "{mode}: {why}");
        if mode == "renamed" {
            assert_eq!(report.unpinned, ["write_any_file"]);
        }
    }
    // The unchanged server offers both, the write with its allowed mismatch.
    let connection = connect(&fixture("plain")).await.expect("connect");
    let live = connection.list_tools().await.expect("list");
    connection.close().await;
    let (offered, report) = check_tools("fs", &manifest, &rules, &live, None);
    assert_eq!(offered.len(), 2, "{}", report.text());
    assert_eq!(offered[1].spec.side_effect, SideEffect::LocalMutation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_hangs_is_timed_out_naming_the_step() {
    let mut server = fixture("hang");
    server.connect_timeout = Some(Duration::from_secs(1));
    let started = std::time::Instant::now();
    let e = connect(&server).await.expect_err("hangs");
    assert!(e.to_string().contains("connect: timed out after 1s"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_an_older_protocol_is_refused() {
    let e = connect(&fixture("old")).await.expect_err("old");
    assert!(e.to_string().contains("older than 2025-06-18"), "{e}");
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_kills_the_servers_descendants() {
    let dir = tempfile::tempdir().expect("dir");
    let pid_file = dir.path().join("grandchild.pid");
    let mut server = fixture("grandchild");
    server.env.push(format!(
        "AGENTRT_MCP_FIXTURE_PID_FILE={}",
        pid_file.display()
    ));
    let connection = connect(&server).await.expect("connect");
    connection.list_tools().await.expect("list");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("the fixture wrote its grandchild's pid")
        .trim()
        .parse()
        .expect("pid");
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    assert!(alive(pid), "the grandchild runs while connected");
    connection.close().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(pid) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(pid), "close killed the grandchild {pid}");
    connection.close().await; // twice is fine
}

#[cfg(target_os = "linux")]
#[test]
fn a_server_dies_with_the_process_that_started_it() {
    let dir = tempfile::tempdir().expect("dir");
    let pid_file = dir.path().join("server.pid");
    let mut parent = std::process::Command::new(env!("CARGO_BIN_EXE_agentrt-mcp-fixture"))
        .env("AGENTRT_MCP_FIXTURE", "parent")
        .env("AGENTRT_MCP_FIXTURE_PID_FILE", &pid_file)
        .spawn()
        .expect("parent");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let pid: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the parent never connected"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    };
    assert!(alive(pid));
    parent.kill().expect("SIGKILL the parent");
    parent.wait().expect("reap");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !alive(pid),
        "the server {pid} outlived the process that started it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_to_start_is_reported_with_the_end_of_its_stderr() {
    let e = connect(&fixture("crash")).await.expect_err("crashes");
    let text = e.to_string();
    assert!(text.contains("connect: "), "{text}");
    assert!(
        text.contains(
            "its stderr ends: \"fixture: cannot start: the config file is missing\\x1b[31m\""
        ),
        "the tail is quoted and sanitized: {text}"
    );
}
