//! `cargo xtask install-test`: the operator binaries as a user installs
//! them, run from outside the checkout.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{capture, cargo_in, cargo_path};

/// [`capture`], echoed with the directory it runs in.
fn output_in(program: &Path, args: &[&str], dir: &Path) -> Result<String, String> {
    eprintln!(
        "$ (cd {}) {} {}",
        dir.display(),
        program.display(),
        args.join(" ")
    );
    capture(program, args, dir)
}

/// The operator's binaries as a user gets them: `cargo install --path` of
/// the CLI and the proxy into a temporary root (reusing this workspace's
/// debug build), then the installed binaries run from another directory
/// against a database the demo made: the paused run listed, approved,
/// resumed by the demo, its log intact; and the installed proxy, as a host
/// launches it, in front of the npm MCP filesystem server: pinned, checked,
/// one call served over stdio and recorded as a completed run.
pub fn install_test() -> Result<(), String> {
    let target = Path::new("target")
        .canonicalize()
        .map_err(|e| format!("target: {e}"))?;
    let root = target.join("install-test");
    let _ = std::fs::remove_dir_all(&root);
    let elsewhere = root.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).map_err(|e| format!("{}: {e}", elsewhere.display()))?;
    let root_arg = root.to_string_lossy().into_owned();
    for package in ["crates/agentrt-cli", "crates/agentrt-proxy"] {
        let args = [
            "install", "--path", package, "--root", &root_arg, "--debug", "--locked",
        ];
        if !cargo_in(
            Path::new("."),
            &args,
            &[("CARGO_TARGET_DIR", target.as_os_str())],
        ) {
            return Err(format!("cargo install --path {package} failed"));
        }
    }
    let agentrt = root.join("bin/agentrt");
    let proxy = root.join("bin/agentrt-proxy");
    let db = root.join("demo.db");
    let db_arg = db.to_string_lossy().into_owned();
    let cargo = cargo_path();
    // The demo, from the checkout, makes the database and pauses its run.
    let demo = output_in(
        &cargo,
        &["run", "-q", "--example", "scripted", "--", "--db", &db_arg],
        Path::new("."),
    )?;
    let approve_line = demo
        .lines()
        .find(|l| l.contains(" approve ") && l.contains("--approval"))
        .ok_or_else(|| format!("the demo printed no approve command:\n{demo}"))?;
    let words: Vec<&str> = approve_line.split_whitespace().collect();
    let after = |flag: &str| {
        words
            .iter()
            .position(|w| *w == flag)
            .and_then(|i| words.get(i + 1))
            .map(|w| w.to_string())
            .ok_or_else(|| format!("no {flag} in {approve_line:?}"))
    };
    let run = after("approve")?;
    let approval = after("--approval")?;
    // Everything else from another directory, the database named relatively.
    let db_rel = "../demo.db";
    let runs = output_in(&agentrt, &["--db", db_rel, "runs"], &elsewhere)?;
    if !runs.contains(&run) || !runs.contains("WAITING_FOR_APPROVAL") {
        return Err(format!(
            "the installed agentrt does not list the paused run:\n{runs}"
        ));
    }
    output_in(
        &agentrt,
        &[
            "--db",
            db_rel,
            "approve",
            &run,
            "--approval",
            &approval,
            "--by",
            "install-test",
        ],
        &elsewhere,
    )?;
    output_in(
        &cargo,
        &[
            "run",
            "-q",
            "--example",
            "scripted",
            "--",
            "--db",
            &db_arg,
            "--resume",
            &run,
        ],
        Path::new("."),
    )?;
    let runs = output_in(&agentrt, &["--db", db_rel, "runs"], &elsewhere)?;
    if !runs.contains("COMPLETED") {
        return Err(format!(
            "the run did not complete after its approval:\n{runs}"
        ));
    }
    let verified = output_in(&agentrt, &["--db", db_rel, "verify"], &elsewhere)?;
    if !verified.contains("intact") {
        return Err(format!("the installed agentrt verify:\n{verified}"));
    }
    proxy_session(&proxy, &agentrt, &elsewhere)
}

fn write_file(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The installed proxy as the README shows it: a configuration with the
/// npm filesystem server over a notes directory, `pin`, `check`, then
/// `serve` over stdio as a host speaks it (initialize, one `tools/call`),
/// stdin closed, and the installed `agentrt` finding the call's run
/// completed in the proxy's database, its log intact.
fn proxy_session(proxy: &Path, agentrt: &Path, elsewhere: &Path) -> Result<(), String> {
    let entry = crate::filesystem_server()?;
    let notes = elsewhere.join("notes");
    std::fs::create_dir_all(&notes).map_err(|e| format!("{}: {e}", notes.display()))?;
    let greeting = "written before the proxy started";
    write_file(&notes.join("hello.txt"), greeting)?;
    let config = json!({
        "database": "proxy.db",
        "session": "install-test",
        "policy": {"local_mutation": "require_approval"},
        "servers": [{
            "name": "fs",
            "command": ["node", entry, notes],
            "manifest": "fs.manifest.json",
            "connect_timeout": "30s",
            "rules": {
                "read_text_file": {"side_effect": "read_only", "timeout": "10s"},
                "write_file": {"side_effect": "local_mutation", "timeout": "10s", "allow_hint_mismatch": true}
            }
        }]
    });
    let config_path = elsewhere.join("proxy.json");
    write_file(&config_path, &config.to_string())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", config_path.display()))?;
    }
    output_in(proxy, &["pin", "--config", "proxy.json"], elsewhere)?;
    let checked = output_in(proxy, &["check", "--config", "proxy.json"], elsewhere)?;
    if !checked.contains("read_text_file") {
        return Err(format!(
            "the installed proxy's check does not offer read_text_file:\n{checked}"
        ));
    }
    let answer = serve_one_call(proxy, elsewhere, &notes.join("hello.txt"))?;
    if !answer.contains(greeting) {
        return Err(format!(
            "the proxied read did not return the file's text: {answer}"
        ));
    }
    let runs = output_in(agentrt, &["--db", "proxy.db", "runs"], elsewhere)?;
    if !runs.contains("COMPLETED") {
        return Err(format!("the proxied call is not a completed run:\n{runs}"));
    }
    let verified = output_in(agentrt, &["--db", "proxy.db", "verify"], elsewhere)?;
    if !verified.contains("intact") {
        return Err(format!("the proxy's database does not verify:\n{verified}"));
    }
    Ok(())
}

/// `agentrt-proxy serve` over stdio: the handshake, one `fs_read_text_file`
/// call, stdin closed; the call's result as JSON text. A proxy that does
/// not answer within a minute is killed.
fn serve_one_call(proxy: &Path, dir: &Path, file: &Path) -> Result<String, String> {
    eprintln!(
        "$ (cd {}) {} serve --config proxy.json  (over stdio)",
        dir.display(),
        proxy.display()
    );
    let mut child = Command::new(proxy)
        .args(["serve", "--config", "proxy.json"])
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("{}: {e}", proxy.display()))?;
    let pid = child.id();
    let (done, watchdog) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        if watchdog.recv_timeout(Duration::from_secs(60)).is_err() {
            eprintln!("the installed proxy did not answer within 60 s; killing it");
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
    });
    let outcome = (|| {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let mut send = |message: Value| {
            writeln!(stdin, "{message}")
                .and_then(|()| stdin.flush())
                .map_err(|e| format!("to the proxy: {e}"))
        };
        let mut answer_to = |id: u64| -> Result<Value, String> {
            for line in lines.by_ref() {
                let line = line.map_err(|e| format!("from the proxy: {e}"))?;
                let message: Value =
                    serde_json::from_str(&line).map_err(|e| format!("{e}: {line}"))?;
                if message["id"] == json!(id) {
                    return Ok(message);
                }
            }
            Err(format!(
                "the proxy closed its output before answering request {id}"
            ))
        };
        send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "agentrt-install-test", "version": "0"}}}),
        )?;
        let initialized = answer_to(1)?;
        if initialized.get("result").is_none() {
            return Err(format!("initialize was refused: {initialized}"));
        }
        send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        send(
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "fs_read_text_file", "arguments": {"path": file}}}),
        )?;
        let called = answer_to(2)?;
        drop(stdin);
        let result = called
            .get("result")
            .ok_or_else(|| format!("the call failed: {called}"))?;
        if result["isError"] == json!(true) {
            return Err(format!("the call returned an error: {result}"));
        }
        Ok(result.to_string())
    })();
    // stdin closed (or the watchdog fired): the proxy finishes and exits.
    let status = child
        .wait()
        .map_err(|e| format!("waiting for the proxy: {e}"));
    let _ = done.send(());
    let _ = killer.join();
    let answer = outcome?;
    match status? {
        s if s.success() => Ok(answer),
        s => Err(format!("the proxy exited with {s} after stdin closed")),
    }
}
