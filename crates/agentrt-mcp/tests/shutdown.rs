//! A stdio server's end (design §24): close stops it in stages (its
//! stdin closed, then SIGTERM to its group, then SIGKILL), with or without
//! the supervisor between; the supervisor leaves nothing behind, on close
//! or when the process that started it is SIGKILLed, even for a server
//! started through a launcher chain. The crate's fixture server records
//! how it ended; the fixture binary is also the supervisor.
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use agentrt_mcp::{SUPERVISE_ARG, Server, connect};

const FIXTURE: &str = env!("CARGO_BIN_EXE_agentrt-mcp-fixture");

/// The fixture in `shutdown` mode, recording to `record`, under the
/// supervisor when `supervised`.
fn fixture(shutdown: &str, record: &Path, supervised: bool) -> Server {
    let mut server = Server::command("fs", &[FIXTURE]);
    server.env.push("AGENTRT_MCP_FIXTURE=plain".into());
    server
        .env
        .push(format!("AGENTRT_MCP_FIXTURE_SHUTDOWN={shutdown}"));
    server
        .env
        .push(format!("AGENTRT_MCP_FIXTURE_RECORD={}", record.display()));
    server.connect_timeout = Some(Duration::from_secs(20));
    if supervised {
        server.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    }
    server
}

/// The record's lines.
fn record(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The pid the record's first line names.
fn recorded_pid(lines: &[String]) -> u32 {
    lines
        .first()
        .and_then(|l| l.strip_prefix("pid "))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid recorded: {lines:?}"))
}

/// Each process's parent and state letter, from /proc.
fn processes() -> HashMap<u32, (u32, char)> {
    let mut all = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return all;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) S ppid …": the name may hold anything, so from its
        // last ')'.
        let Some(rest) = stat.rfind(')').map(|at| &stat[at + 1..]) else {
            continue;
        };
        let mut fields = rest.split_ascii_whitespace();
        let state = fields.next().and_then(|s| s.chars().next()).unwrap_or('?');
        let Some(ppid) = fields.next().and_then(|p| p.parse().ok()) else {
            continue;
        };
        all.insert(pid, (ppid, state));
    }
    all
}

/// `root`'s descendants, living or not yet reaped.
fn descendants(root: u32) -> Vec<u32> {
    let all = processes();
    let mut found = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for (pid, (ppid, _)) in &all {
            if *ppid == parent && !found.contains(pid) {
                found.push(*pid);
                next.push(*pid);
            }
        }
    }
    found
}

/// Whether `pid` runs (a zombie does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rfind(')')
                .is_some_and(|at| !s[at + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The processes of `pids` still running once `bound` has passed (or as
/// soon as none is).
fn survivors(pids: &[u32], bound: Duration) -> Vec<u32> {
    let deadline = Instant::now() + bound;
    loop {
        let living: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if living.is_empty() || Instant::now() >= deadline {
            return living;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs its processes when dropped: a failing test leaves nothing
/// running.
struct Reaper(Vec<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in self.0.iter().copied().filter(|p| alive(*p)) {
            let _ = std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status();
        }
    }
}

/// Connects to the fixture in `shutdown` mode, closes, and gives the
/// record and the server's pid.
async fn close_one(shutdown: &str, supervised: bool) -> (Vec<String>, u32) {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("record");
    let connection = connect(&fixture(shutdown, &path, supervised))
        .await
        .expect("connect");
    connection.list_tools().await.expect("list");
    let pid = recorded_pid(&record(&path));
    assert!(alive(pid), "the server runs while connected");
    connection.close().await;
    (record(&path), pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_when_its_stdin_ends_is_never_signalled() {
    for supervised in [false, true] {
        let (lines, pid) = close_one("eof", supervised).await;
        assert_eq!(
            lines[1..],
            ["eof", "exit"],
            "supervised {supervised}: its stdin closed, time to finish, no signal"
        );
        assert!(!alive(pid), "supervised {supervised}: it exited");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_outlives_its_stdin_gets_one_sigterm_after_it() {
    for supervised in [false, true] {
        let (lines, pid) = close_one("term", supervised).await;
        assert_eq!(
            lines[1..],
            ["eof", "term"],
            "supervised {supervised}: its stdin closed first, then one SIGTERM"
        );
        assert!(!alive(pid), "supervised {supervised}: it exited on SIGTERM");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_ignores_its_stdin_and_sigterm_is_killed() {
    for supervised in [false, true] {
        let (lines, pid) = close_one("none", supervised).await;
        assert_eq!(
            lines[1..],
            ["eof", "term"],
            "supervised {supervised}: both stages reached it"
        );
        assert_eq!(
            survivors(&[pid], Duration::from_secs(10)),
            [] as [u32; 0],
            "supervised {supervised}: killed"
        );
    }
}

/// The fixture two shells down (`sh -c 'sh -c "<fixture>; true"; true'`),
/// starting a `sleep` of its own, ignoring its stdin's end and SIGTERM,
/// under the supervisor.
fn launched(record: &Path, sleep_pid: &Path) -> Server {
    let mut server = Server::command(
        "fs",
        &["sh", "-c", r#"sh -c "\"$0\"; true"; true"#, FIXTURE],
    );
    server.env = vec![
        "AGENTRT_MCP_FIXTURE=grandchild".into(),
        "AGENTRT_MCP_FIXTURE_SHUTDOWN=none".into(),
        format!("AGENTRT_MCP_FIXTURE_RECORD={}", record.display()),
        format!("AGENTRT_MCP_FIXTURE_PID_FILE={}", sleep_pid.display()),
    ];
    server.connect_timeout = Some(Duration::from_secs(20));
    server.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_server_behind_a_launcher_chain_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("dir");
    let (path, sleep_pid) = (dir.path().join("record"), dir.path().join("sleep.pid"));
    let connection = connect(&launched(&path, &sleep_pid))
        .await
        .expect("connect");
    connection.list_tools().await.expect("list");
    let supervisor = connection.process_id().await.expect("a supervisor");
    let server = recorded_pid(&record(&path));
    let all = descendants(supervisor);
    let _reaper = Reaper(all.clone());
    assert!(
        all.contains(&server) && all.len() >= 4,
        "two shells, the server and its sleep under the supervisor: {all:?}"
    );
    connection.close().await;
    assert_eq!(
        survivors(&all, Duration::from_secs(10)),
        [] as [u32; 0],
        "close left nothing of {all:?}"
    );
    assert!(!alive(supervisor));
}

#[test]
fn a_server_behind_a_launcher_dies_with_the_process_that_started_it() {
    let dir = tempfile::tempdir().expect("dir");
    let parent_pid = dir.path().join("parent.pid");
    let mut parent = std::process::Command::new(FIXTURE)
        .env("AGENTRT_MCP_FIXTURE", "parent")
        .env("AGENTRT_MCP_FIXTURE_LAUNCHED", "1")
        .env("AGENTRT_MCP_FIXTURE_SHUTDOWN", "none")
        .env("AGENTRT_MCP_FIXTURE_RECORD", dir.path().join("record"))
        .env("AGENTRT_MCP_FIXTURE_PID_FILE", dir.path().join("sleep.pid"))
        .env("AGENTRT_MCP_FIXTURE_PARENT_PID_FILE", &parent_pid)
        .spawn()
        .expect("parent");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !parent_pid.exists() {
        assert!(Instant::now() < deadline, "the parent never connected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let server = recorded_pid(&record(&dir.path().join("record")));
    let all = descendants(parent.id());
    let _reaper = Reaper(all.clone());
    assert!(
        all.contains(&server) && all.len() >= 4,
        "(the supervisor,) two shells, the server and its sleep: {all:?}"
    );
    parent.kill().expect("SIGKILL the parent");
    parent.wait().expect("reap");
    assert_eq!(
        survivors(&all, Duration::from_secs(10)),
        [] as [u32; 0],
        "every descendant of the SIGKILLed parent is gone: {all:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_server_that_dies_during_a_call_is_seen_gone() {
    let dir = tempfile::tempdir().expect("dir");
    let mut server = Server::command("fs", &[FIXTURE]);
    server.env.push("AGENTRT_MCP_FIXTURE=die-on-call".into());
    // A descendant outlives the server, so the supervisor stays.
    server.env.push("AGENTRT_MCP_FIXTURE_DESCENDANT=1".into());
    server.env.push(format!(
        "AGENTRT_MCP_FIXTURE_PID_FILE={}",
        dir.path().join("sleep.pid").display()
    ));
    server.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    let manifest = agentrt_mcp::pin(
        &server,
        agentrt::Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    let rules = agentrt_mcp::parse_rules(
        br#"{"write_file": {"side_effect": "local_mutation", "timeout": "5s", "allow_hint_mismatch": true}}"#,
    )
    .expect("rules");
    let loaded = agentrt_mcp::load(&server, &manifest, &rules)
        .await
        .expect("load");
    let call = loaded.tools[0].call(agentrt::ToolCall {
        run_id: "r1".into(),
        step_id: "s1".into(),
        args: agentrt::Canonical::parse_str(r#"{"path":"b.txt"}"#).expect("args"),
        cancel: agentrt::Cancel::never(),
    });
    // The supervisor, which stays for the server's descendant, holds no
    // copy of the server's stdout: its end is seen when the server dies
    // (no timeout is set on this call).
    let result = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .expect("the call ends when the server dies");
    assert!(
        matches!(result, Err(agentrt::ToolError::Unknown { .. })),
        "{result:?}"
    );
    loaded.connection.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervised_server_that_cannot_start_is_reported_with_its_stderr() {
    let mut server = Server::command("fs", &[FIXTURE]);
    server.env.push("AGENTRT_MCP_FIXTURE=crash".into());
    server.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    let text = connect(&server).await.expect_err("crashes").to_string();
    assert!(
        text.contains("its stderr ends: \"fixture: cannot start: the config file is missing"),
        "{text}"
    );
    let mut missing = Server::command("fs", &["/nonexistent/agentrt-mcp-server"]);
    missing.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    let text = connect(&missing)
        .await
        .expect_err("no such program")
        .to_string();
    assert!(
        text.contains(r#"agentrt-mcp supervisor: cannot start "/nonexistent/agentrt-mcp-server""#),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descendant_that_left_the_servers_group_is_not_left_behind() {
    if std::process::Command::new("setsid")
        .arg("true")
        .status()
        .is_err()
    {
        panic!("this test needs util-linux's setsid");
    }
    let dir = tempfile::tempdir().expect("dir");
    let escaped = dir.path().join("escaped.pid");
    // A launcher that starts a process in a session (and group) of its
    // own, then the server; the launcher ends with the server, and the
    // escaped process's parent is gone: it comes to the subreaper.
    let mut server = Server::command(
        "fs",
        &[
            "sh",
            "-c",
            r#"setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > "$ESCAPED"; "$0"; true"#,
            FIXTURE,
        ],
    );
    server.env = vec![
        "AGENTRT_MCP_FIXTURE=plain".into(),
        format!("ESCAPED={}", escaped.display()),
    ];
    server.connect_timeout = Some(Duration::from_secs(20));
    server.supervisor = Some(vec![FIXTURE.into(), SUPERVISE_ARG.into()]);
    let connection = connect(&server).await.expect("connect");
    connection.list_tools().await.expect("list");
    let pid: u32 = std::fs::read_to_string(&escaped)
        .expect("the launcher wrote the escaped pid")
        .trim()
        .parse()
        .expect("pid");
    let _reaper = Reaper(vec![pid]);
    let group = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                let rest = s[s.rfind(')')? + 1..].to_owned();
                rest.split_ascii_whitespace().nth(2)?.parse::<u32>().ok()
            })
    };
    assert_eq!(
        group(pid),
        Some(pid),
        "it left the server's group for one of its own"
    );
    connection.close().await;
    assert_eq!(
        survivors(&[pid], Duration::from_secs(10)),
        [] as [u32; 0],
        "the escaped process {pid} is gone too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_twice_at_once_during_a_call_is_bounded_and_the_call_unknown() {
    for supervised in [false, true] {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("record");
        // The worst case: a call never answered, a server that ignores
        // its stdin's end and SIGTERM.
        let mut server = fixture("none", &path, supervised);
        server.env[0] = "AGENTRT_MCP_FIXTURE=hang-on-call".into();
        let manifest = agentrt_mcp::pin(
            &server,
            agentrt::Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
        )
        .await
        .expect("pin");
        let rules = agentrt_mcp::parse_rules(
            br#"{"write_file": {"side_effect": "local_mutation", "timeout": "5s", "allow_hint_mismatch": true}}"#,
        )
        .expect("rules");
        std::fs::remove_file(&path).expect("the pin's record");
        let loaded = agentrt_mcp::load(&server, &manifest, &rules)
            .await
            .expect("load");
        let tool = std::sync::Arc::clone(&loaded.tools[0]);
        let call = tokio::spawn(async move {
            tool.call(agentrt::ToolCall {
                run_id: "r1".into(),
                step_id: "s1".into(),
                args: agentrt::Canonical::parse_str(r#"{"path":"b.txt"}"#).expect("args"),
                cancel: agentrt::Cancel::never(),
            })
            .await
        });
        let pid = recorded_pid(&record(&path));
        // The call is in flight: the server has it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !record(&path).iter().any(|l| l == "call") {
            assert!(
                Instant::now() < deadline,
                "the call never reached the server"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // Guards only: close is bounded by its stages, well within these.
        let bound = Duration::from_secs(60);
        let connection = &loaded.connection;
        tokio::time::timeout(bound, async {
            tokio::join!(connection.close(), connection.close())
        })
        .await
        .unwrap_or_else(|_| panic!("supervised {supervised}: close is bounded"));
        connection.close().await;
        let result = tokio::time::timeout(bound, call)
            .await
            .expect("the call ends with the connection")
            .expect("joined");
        match result {
            Err(agentrt::ToolError::Unknown { message }) => assert!(
                message.contains("the connection was closed during the call"),
                "supervised {supervised}: {message}"
            ),
            other => panic!("supervised {supervised}: a call cut off is unknown: {other:?}"),
        }
        assert_eq!(
            record(&path)[1..],
            ["call", "eof", "term"],
            "supervised {supervised}"
        );
        assert_eq!(
            survivors(&[pid], Duration::from_secs(10)),
            [] as [u32; 0],
            "supervised {supervised}: killed once"
        );
    }
}
