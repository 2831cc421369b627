//! The `agentrt-proxy` binary runs each stdio server under its own
//! supervisor (`agentrt_mcp::supervise`): a server started through a
//! launcher chain, so that the real server is a grandchild of the
//! launcher, is gone with every descendant when the proxy is SIGKILLed,
//! and when the proxy closes it.
//!
//! No test harness: this binary is also the upstream server the proxy
//! starts (with `AGENTRT_PROXY_TEST_SERVER` set), a small MCP server over
//! stdio that records its pid, starts a `sleep` of its own and lives on
//! after its stdin ends, as a server a launcher left behind would. Its
//! `main` runs the tests one by one (a name given on the command line
//! picks those containing it).

fn main() {
    #[cfg(target_os = "linux")]
    on_linux::main();
}

/// Everything here reads /proc.
#[cfg(target_os = "linux")]
mod on_linux {
    use std::collections::HashMap;
    use std::io::{BufRead, Write};
    use std::path::{Path, PathBuf};
    use std::time::{Duration, Instant};

    use rmcp::model::CallToolRequestParams;
    use rmcp::service::ServiceExt;
    use serde_json::{Value, json};

    /// Set in the server's environment: this binary is the upstream server.
    const SERVER_MODE: &str = "AGENTRT_PROXY_TEST_SERVER";

    /// Where the server writes its pid, then its sleep's.
    const RECORD: &str = "AGENTRT_PROXY_TEST_RECORD";

    pub fn main() {
        if std::env::var_os(SERVER_MODE).is_some() {
            serve_stdio();
            return;
        }
        let tests: [(&str, fn()); 2] = [
            (
                "a_server_behind_a_launcher_dies_with_the_sigkilled_proxy",
                a_server_behind_a_launcher_dies_with_the_sigkilled_proxy,
            ),
            (
                "a_proxy_that_stops_leaves_nothing_of_a_launched_server",
                a_proxy_that_stops_leaves_nothing_of_a_launched_server,
            ),
        ];
        let filters: Vec<String> = std::env::args()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .collect();
        if std::env::args().any(|a| a == "--list") {
            for (name, _) in tests {
                println!("{name}: test");
            }
            return;
        }
        for (name, test) in tests {
            if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
                continue;
            }
            println!("test {name} ...");
            test();
            println!("test {name} ... ok");
        }
    }

    /// The upstream server: one read-only tool, `read_file`, answered with
    /// its arguments.
    fn serve_stdio() {
        let record = std::env::var(RECORD).unwrap_or_else(|_| "/dev/null".into());
        let sleep = std::process::Command::new("sleep")
            .arg("300")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let sleep = sleep.map(|c| c.id()).unwrap_or(0);
        let _ = std::fs::write(&record, format!("{} {sleep}\n", std::process::id()));
        let mut out = std::io::stdout();
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let Ok(msg) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let Some(id) = msg.get("id").cloned() else {
                continue;
            };
            let result = match msg.get("method").and_then(Value::as_str).unwrap_or("") {
                "initialize" => json!({
                    "protocolVersion": msg.pointer("/params/protocolVersion").cloned()
                        .unwrap_or(json!("2025-06-18")),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "launched", "version": "0"}}),
                "tools/list" => {
                    json!({"tools": [{"name": "read_file", "description": "Reads a file.",
                    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
                    "annotations": {"readOnlyHint": true}}]})
                }
                "tools/call" => json!({"content": [{"type": "text",
                    "text": msg.pointer("/params/arguments").cloned().unwrap_or(json!({})).to_string()}]}),
                _ => json!({}),
            };
            let _ = writeln!(
                out,
                "{}",
                json!({"jsonrpc": "2.0", "id": id, "result": result})
            );
            let _ = out.flush();
        }
        // A server that does not end with its input.
        std::thread::sleep(Duration::from_secs(300));
    }

    /// A configuration in `dir` whose server `fs` is this binary two shells
    /// down (`sh -c 'sh -c "<server>; true"; true'`), pinned by the proxy
    /// binary; the configuration's path.
    fn configure(dir: &Path) -> PathBuf {
        let me = std::env::current_exe().expect("this binary");
        let config = dir.join("proxy.json");
        let server = json!({
            "name": "fs",
            "command": ["sh", "-c", r#"sh -c "\"$0\"; true"; true"#, me],
            "env": [format!("{SERVER_MODE}=1"), format!("{RECORD}={}", dir.join("record").display())],
            "manifest": "fs.manifest.json",
            "connect_timeout": "20s",
            "rules": {"read_file": {"side_effect": "read_only", "timeout": "5s"}},
        });
        let text = json!({"database": "proxy.db", "session": "laptop", "servers": [server]});
        std::fs::write(&config, text.to_string()).expect("config");
        let pinned = std::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
            .args(["pin", "--config"])
            .arg(&config)
            .output()
            .expect("pin");
        assert!(
            pinned.status.success(),
            "pin: {}",
            String::from_utf8_lossy(&pinned.stderr)
        );
        config
    }

    /// The pids the server recorded: its own and its sleep's.
    fn recorded(dir: &Path) -> Vec<u32> {
        std::fs::read_to_string(dir.join("record"))
            .unwrap_or_default()
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Each process's parent, from /proc.
    fn parents() -> HashMap<u32, u32> {
        let mut all = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) S ppid …", from the name's last ')'.
            let ppid = stat
                .rfind(')')
                .and_then(|at| stat[at + 1..].split_ascii_whitespace().nth(1))
                .and_then(|p| p.parse().ok());
            if let Some(ppid) = ppid {
                all.insert(pid, ppid);
            }
        }
        all
    }

    /// `root`'s descendants.
    fn descendants(root: u32) -> Vec<u32> {
        let all = parents();
        let mut found = Vec::new();
        let mut next = vec![root];
        while let Some(parent) = next.pop() {
            for (pid, ppid) in &all {
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

    /// The processes of `pids` still running after at most `bound`.
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

    /// SIGKILLs what is left of its processes when dropped: a failing test
    /// leaves nothing running.
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

    /// The proxy binary serving `config` over stdio, a tool listed and
    /// called through it, and the proxy's descendants then (the server and
    /// its sleep among them), killed when dropped.
    async fn serve_and_call(
        config: &Path,
        dir: &Path,
    ) -> (
        tokio::process::Child,
        rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
        Reaper,
    ) {
        let mut proxy = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
            .args(["serve", "--config"])
            .arg(config)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the proxy");
        let (Some(stdout), Some(stdin)) = (proxy.stdout.take(), proxy.stdin.take()) else {
            panic!("the proxy's pipes");
        };
        let client = ().serve((stdout, stdin)).await.expect("handshake");
        let tools = client.list_all_tools().await.expect("tools");
        assert!(tools.iter().any(|t| t.name == "fs_read_file"), "{tools:?}");
        let Value::Object(args) = json!({"path": "a.txt"}) else {
            unreachable!()
        };
        let result = client
            .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args))
            .await
            .expect("a result");
        assert_eq!(result.is_error, Some(false), "{result:?}");
        let all = descendants(proxy.id().expect("running"));
        let reaper = Reaper(all.clone());
        let started = recorded(dir);
        assert_eq!(started.len(), 2, "the server and its sleep: {started:?}");
        assert!(
            started.iter().all(|p| all.contains(p)) && all.len() >= 4,
            "(the supervisor,) two shells, the server and its sleep under the proxy: {all:?}"
        );
        (proxy, client, reaper)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    }

    fn a_server_behind_a_launcher_dies_with_the_sigkilled_proxy() {
        runtime().block_on(async {
            let dir = tempfile::tempdir().expect("dir");
            let config = configure(dir.path());
            let (mut proxy, client, reaper) = serve_and_call(&config, dir.path()).await;
            let all = reaper.0.clone();
            proxy.start_kill().expect("SIGKILL the proxy");
            let _ = proxy.wait().await;
            drop(client);
            assert_eq!(
                survivors(&all, Duration::from_secs(10)),
                [] as [u32; 0],
                "every descendant of the SIGKILLed proxy is gone: {all:?}"
            );
        });
    }

    fn a_proxy_that_stops_leaves_nothing_of_a_launched_server() {
        runtime().block_on(async {
            let dir = tempfile::tempdir().expect("dir");
            let config = configure(dir.path());
            let (mut proxy, client, reaper) = serve_and_call(&config, dir.path()).await;
            let all = reaper.0.clone();
            // The host goes: the proxy closes its upstream and exits.
            client.cancel().await.expect("close");
            let status = tokio::time::timeout(Duration::from_secs(30), proxy.wait())
                .await
                .expect("the proxy exits")
                .expect("status");
            assert!(status.success(), "{status}");
            assert_eq!(
                survivors(&all, Duration::from_secs(10)),
                [] as [u32; 0],
                "the stopped proxy left nothing behind: {all:?}"
            );
        });
    }
}
