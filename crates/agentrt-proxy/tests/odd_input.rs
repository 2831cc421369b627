//! What the proxy makes of odd input from outside the configuration: an
//! environment that is not UTF-8 (the real binary, a stdio server that
//! copies the environment it was started with), and a server whose tool
//! schema `serde_json` cannot read. Linux only: the shell server reads
//! `/proc`.
#![cfg(target_os = "linux")]

mod support;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use agentrt_proxy::cli;

/// A tool the proxy offers: read-only, and the server says so.
const OK_TOOL: &str =
    r#"{"name":"ok","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}"#;

/// One `tools/list` answer holding `tools`.
fn page(tools: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":@ID@,"result":{{"tools":[{tools}]}}}}"#)
}

/// Writes `proxy.json` in `dir`: the shell server at `script` as `fs`,
/// inheriting `ODD`, with a read-only rule for each of `tools`.
fn configure(dir: &Path, script: &Path, tools: &[&str]) {
    let rules: Vec<String> = tools
        .iter()
        .map(|t| format!(r#""{t}": {{"side_effect": "read_only", "timeout": "5s"}}"#))
        .collect();
    std::fs::write(
        dir.join("proxy.json"),
        format!(
            r#"{{"database": "proxy.db", "session": "odd",
                 "servers": [{{"name": "fs", "command": ["/bin/sh", "{}"],
                   "inherit_env": ["ODD"], "manifest": "fs.manifest.json",
                   "connect_timeout": "10s", "rules": {{{}}}}}]}}"#,
            script.display(),
            rules.join(", ")
        ),
    )
    .expect("config");
}

/// The variables in a NUL-separated environment block, sorted.
fn variables(block: &[u8]) -> Vec<Vec<u8>> {
    let mut vars: Vec<Vec<u8>> = block
        .split(|b| *b == 0)
        .filter(|v| !v.is_empty())
        .map(<[u8]>::to_vec)
        .collect();
    vars.sort();
    vars
}

/// Runs the real binary's `command` on `dir`'s configuration with only
/// the environment `env`; its exit code, stdout and stderr.
fn run_binary(dir: &Path, command: &str, env: &[(&[u8], &[u8])]) -> (Option<i32>, String, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"));
    child
        .args([command, "--config"])
        .arg(dir.join("proxy.json"))
        .current_dir(dir)
        .env_clear();
    for (name, value) in env {
        child.env(OsStr::from_bytes(name), OsStr::from_bytes(value));
    }
    let out = child.output().expect("run agentrt-proxy");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn pin_and_check_run_with_a_non_utf8_environment_and_pass_it_through_by_name() {
    let dir = tempfile::tempdir().expect("dir");
    let script = support::shell_server(dir.path(), &[&page(OK_TOOL)]);
    configure(dir.path(), &script, &["ok"]);
    let home = dir.path().as_os_str().as_bytes().to_vec();
    // PATH finds the shell's tools and names a directory that is not
    // UTF-8; ODD is inherited by name; the others are never named (one
    // cannot be: its name is not UTF-8).
    let path: &[u8] = b"/usr/bin:/bin:/nonexistent/\xff\xfe";
    let odd: &[u8] = b"caf\xe9 \x80";
    let env: [(&[u8], &[u8]); 5] = [
        (b"PATH", path),
        (b"HOME", &home),
        (b"ODD", odd),
        (b"STRAY", b"\xff"),
        (b"NAME_\xff", b"x"),
    ];
    let expected = variables(
        &[
            [b"PATH=".as_slice(), path].concat(),
            [b"HOME=".as_slice(), &home].concat(),
            [b"ODD=".as_slice(), odd].concat(),
        ]
        .join(&0u8),
    );
    let environ = dir.path().join("environ");

    let (code, out, err) = run_binary(dir.path(), "pin", &env);
    assert_eq!(code, Some(0), "pin: {out}{err}");
    assert_eq!(
        variables(&std::fs::read(&environ).expect("the server's environment")),
        expected,
        "the server got exactly PATH, HOME and ODD, byte for byte"
    );

    std::fs::remove_file(&environ).expect("remove");
    let (code, out, err) = run_binary(dir.path(), "check", &env);
    assert_eq!(code, Some(0), "check: {out}{err}");
    assert!(
        out.contains("fs: registered ok as fs_ok (read_only)\n"),
        "{out}"
    );
    assert_eq!(
        variables(&std::fs::read(&environ).expect("the server's environment")),
        expected
    );
}

async fn run(dir: &Path, command: &str) -> (u8, String, String) {
    let args = [
        command.to_owned(),
        "--config".to_owned(),
        dir.join("proxy.json").to_string_lossy().into_owned(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli::run(&args, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

/// What reaches the pin with a schema `serde_json` cannot read: rmcp
/// reads each line with `serde_json`, which refuses a number beyond
/// `f64` and nesting past 128, so a page holding one never completes a
/// listing. But a server that answers one `tools/list` twice has rmcp
/// take the first answer while the bytes pinned are the last, so such a
/// schema is pinned as the core's canonical form allows it (numbers as
/// written, 256 levels).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_whose_schema_serde_json_cannot_read_is_refused_by_check_and_never_offered() {
    let dir = tempfile::tempdir().expect("dir");
    let plain = |name: &str| {
        format!(
            r#"{{"name":"{name}","inputSchema":{{"type":"object"}},"annotations":{{"readOnlyHint":true}}}}"#
        )
    };
    let big = r#"{"name":"big","inputSchema":{"type":"object","examples":[{"n":1e400}]},"annotations":{"readOnlyHint":true}}"#;
    let deep = format!(
        r#"{{"name":"deep","inputSchema":{{"type":"object","x-deep":{}1{}}},"annotations":{{"readOnlyHint":true}}}}"#,
        "[".repeat(130),
        "]".repeat(130)
    );
    let first = page(&[OK_TOOL.to_owned(), plain("big"), plain("deep")].join(","));
    let second = page(&[OK_TOOL, big, &deep].join(","));
    let script = support::shell_server(dir.path(), &[&first, &second]);
    configure(dir.path(), &script, &["ok", "big", "deep"]);

    let (code, out, err) = run(dir.path(), "pin").await;
    assert_eq!(code, 0, "pin: {out}{err}");
    let manifest = std::fs::read_to_string(dir.path().join("fs.manifest.json")).expect("manifest");
    assert!(
        manifest.contains("1e400"),
        "the second answer was pinned: {manifest}"
    );

    let (code, out, err) = run(dir.path(), "check").await;
    assert_eq!(code, 0, "check: {out}{err}");
    assert!(
        out.contains(
            "fs: refused big: its input schema cannot be offered as the server wrote it: \
             serde_json cannot read it (number out of range at line 1 column 23)\n"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "fs: refused deep: its input schema cannot be offered as the server wrote it: \
             serde_json cannot read it (recursion limit exceeded"
        ),
        "{out}"
    );
    assert!(
        out.contains("fs: registered ok as fs_ok (read_only)\n"),
        "{out}"
    );

    // What serve offers: load, as serve does it.
    let config = agentrt_proxy::read_config(&dir.path().join("proxy.json")).expect("config");
    let loaded = agentrt_proxy::load_all(&config).await.expect("load");
    let offered: Vec<&String> = loaded.tools.keys().collect();
    loaded.close().await;
    assert_eq!(offered, ["fs_ok"]);
}
