//! Against the real `@modelcontextprotocol/server-filesystem` (npm,
//! 2026.8.31, pinned with its integrity in `tests/npm/package-lock.json`),
//! run by Node: pin, load, read a file, write a file, and a path outside
//! its root refused by the server. `cargo xtask test` installs it
//! (`npm ci --ignore-scripts`) and runs this target with the
//! `real-servers` feature, naming the server's entry point in
//! `AGENTRT_MCP_FILESYSTEM_SERVER`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentrt::{Cancel, Canonical, SideEffect, Timestamp, ToolCall, ToolError, ToolResult};
use agentrt_mcp::{Loaded, Server, load, parse_rules, pin};

fn entry_point() -> PathBuf {
    let path = std::env::var_os("AGENTRT_MCP_FILESYSTEM_SERVER").expect(
        "AGENTRT_MCP_FILESYSTEM_SERVER names the server's dist/index.js: run `cargo xtask test`",
    );
    let path = PathBuf::from(path);
    assert!(path.is_file(), "{} is not installed", path.display());
    path
}

fn server(root: &Path) -> Server {
    let entry = entry_point();
    let mut server = Server::command(
        "fs",
        &["node", &entry.to_string_lossy(), &root.to_string_lossy()],
    );
    server.connect_timeout = Some(Duration::from_secs(60));
    server
}

const RULES: &[u8] = br#"{
  "read_text_file": {"side_effect": "read_only", "timeout": "5s"},
  "read_file":      {"side_effect": "read_only", "timeout": "5s"},
  "list_directory": {"side_effect": "read_only", "timeout": "5s"},
  "directory_tree": {"side_effect": "read_only", "timeout": "5s"},
  "write_file":     {"side_effect": "local_mutation", "timeout": "10s", "allow_hint_mismatch": true}
}"#;

async fn call(loaded: &Loaded, name: &str, args: &str) -> Result<ToolResult, ToolError> {
    let tool = loaded
        .tools
        .iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("{name} is offered: {}", loaded.report.text()));
    tool.call(ToolCall {
        run_id: "r1".into(),
        step_id: "s1".into(),
        args: Canonical::parse_str(args).expect("args"),
        cancel: Cancel::never(),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_filesystem_server_is_pinned_loaded_and_called() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().canonicalize().expect("root");
    std::fs::write(root.join("notes.txt"), "line one\nline two\n").expect("file");
    let server = server(&root);

    let manifest = pin(
        &server,
        Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
    )
    .await
    .expect("pin");
    for tool in ["read_text_file", "write_file", "list_directory"] {
        assert!(manifest.tools.contains_key(tool), "{tool} is pinned");
    }
    let rules = parse_rules(RULES).expect("rules");
    let loaded = load(&server, &manifest, &rules).await.expect("load");
    let text = loaded.report.text();
    assert!(
        text.contains("fs: registered read_text_file as fs_read_text_file (read_only)"),
        "{text}"
    );
    assert!(
        text.contains(
            "fs: registered write_file as fs_write_file (local_mutation) [hint mismatch allowed:"
        ),
        "{text}"
    );
    assert!(
        text.contains("fs: unclassified move_file: no rule"),
        "{text}"
    );
    let write = loaded
        .tools
        .iter()
        .find(|t| t.spec().name == "fs_write_file")
        .expect("write");
    assert_eq!(write.spec().side_effect, SideEffect::LocalMutation);

    let read = call(
        &loaded,
        "fs_read_text_file",
        &format!(
            r#"{{"path":{:?}}}"#,
            root.join("notes.txt").to_string_lossy()
        ),
    )
    .await
    .expect("read");
    let content = String::from_utf8(read.content).expect("utf-8");
    assert!(
        content.contains("line one") && content.contains("line two"),
        "{content}"
    );

    let target = root.join("out.txt");
    call(
        &loaded,
        "fs_write_file",
        &format!(
            r#"{{"path":{:?},"content":"written through the gate\n"}}"#,
            target.to_string_lossy()
        ),
    )
    .await
    .expect("write");
    assert_eq!(
        std::fs::read_to_string(&target).expect("the file exists"),
        "written through the gate\n"
    );

    let outside = call(&loaded, "fs_read_text_file", r#"{"path":"/etc/hostname"}"#).await;
    match outside {
        Err(ToolError::Failed { message }) => {
            assert!(message.contains("error:"), "{message}");
            assert!(
                message.to_lowercase().contains("outside")
                    || message.to_lowercase().contains("denied"),
                "{message}"
            );
        }
        other => panic!("a path outside the root is a tool error: {other:?}"),
    }
    loaded.connection.close().await;
}
