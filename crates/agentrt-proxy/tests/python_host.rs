//! A real MCP host, the official Python SDK (`mcp` 2.3.0, pinned with
//! hashes in `tests/host/requirements.txt`), driven by `tests/host/host.py`
//! against real servers: the npm filesystem server over stdio and the
//! fixture server (`agentrt-mcp-fixture`) over streamable HTTP, as JSON and
//! as an event stream; then `agentrt-proxy serve` itself, with the npm
//! server upstream, and `agentrt approve`/`reject` from another process
//! while the host's call is held.
//!
//! `cargo xtask test` installs the SDK into `target/real-hosts/venv` and
//! runs this target with the `real-hosts` feature, naming that venv's
//! python in `AGENTRT_PYTHON_HOST` and the npm server's entry point in
//! `AGENTRT_MCP_FILESYSTEM_SERVER`.

use std::ffi::OsString;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use agentrt_mcp_fixture::{Mode, serve};
use serde_json::{Value, json};

/// What the Python client negotiates with a server that does not answer
/// `server/discover` (it probes at 2026-07-28, then falls back to the
/// `initialize` handshake, where it offers its newest handshake version).
const HANDSHAKE_VERSION: &str = "2025-11-25";

/// How long one run of the host may take before it is killed.
const DEADLINE: Duration = Duration::from_secs(120);

fn python() -> PathBuf {
    let Some(path) = std::env::var_os("AGENTRT_PYTHON_HOST") else {
        panic!(
            "AGENTRT_PYTHON_HOST is not set: it names a python with \
             tests/host/requirements.txt installed; run `cargo xtask test`, \
             which makes target/real-hosts/venv"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "AGENTRT_PYTHON_HOST: {} is not a file",
        path.display()
    );
    path
}

fn filesystem_server() -> PathBuf {
    let Some(path) = std::env::var_os("AGENTRT_MCP_FILESYSTEM_SERVER") else {
        panic!(
            "AGENTRT_MCP_FILESYSTEM_SERVER is not set: it names the npm \
             filesystem server's dist/index.js; run `cargo xtask test`"
        );
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "{} is not installed", path.display());
    path
}

/// What one run of the host printed: the negotiated protocol version and
/// one JSON value per step.
struct Run {
    protocol: String,
    steps: Vec<Value>,
}

/// Runs host.py with `target` (`--stdio -- CMD...` or `--http URL`) and
/// `script` on its standard input; panics, with its standard error, unless
/// it exits 0 within the deadline and prints the protocol line and one
/// line per step.
fn host(target: &[OsString], script: &Value) -> Run {
    let host_py = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host/host.py");
    let mut child = Command::new(python())
        .arg(&host_py)
        .args(target)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start host.py");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.to_string().as_bytes())
        .expect("write the script");
    // Read both pipes on their own threads so that neither can fill up.
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        stdout.read_to_string(&mut s).map(|_| s)
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        stderr.read_to_string(&mut s).map(|_| s)
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for host.py") {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            panic!("host.py ran over {DEADLINE:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out.join().expect("stdout thread").expect("read stdout");
    let err = err.join().expect("stderr thread").expect("read stderr");
    assert!(
        status.success(),
        "host.py failed ({status}):\nstderr:\n{err}\nstdout:\n{out}"
    );
    let mut lines = out.lines().map(|line| {
        serde_json::from_str::<Value>(line)
            .unwrap_or_else(|e| panic!("host.py printed a line that is not JSON ({e}): {line}"))
    });
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("host.py printed nothing; stderr:\n{err}"));
    let protocol = first["protocol"]
        .as_str()
        .unwrap_or_else(|| panic!("the first line names the protocol: {first}"))
        .to_owned();
    let steps: Vec<Value> = lines.collect();
    let expected = script.as_array().map_or(0, Vec::len);
    assert_eq!(
        steps.len(),
        expected,
        "one line per step; stdout:\n{out}\nstderr:\n{err}"
    );
    Run { protocol, steps }
}

fn stdio(command: &[&Path]) -> Vec<OsString> {
    let mut target: Vec<OsString> = vec!["--stdio".into(), "--".into()];
    target.extend(command.iter().map(|p| p.as_os_str().to_owned()));
    target
}

fn http(url: &str) -> Vec<OsString> {
    vec!["--http".into(), url.into()]
}

/// The tool names of a list step.
fn names(list: &Value) -> Vec<&str> {
    list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a list answers tools: {list}"))
        .iter()
        .map(|t| t["name"].as_str().expect("a tool has a name"))
        .collect()
}

/// A call's answer, with the fields every answer has.
fn answer<'a>(line: &'a Value, name: &str) -> &'a Value {
    assert_eq!(line["call"], name, "{line}");
    assert!(line.get("error").is_none(), "no JSON-RPC error: {line}");
    assert!(line["isError"].is_boolean(), "{line}");
    line
}

#[test]
fn the_python_host_drives_the_filesystem_server_over_stdio() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().canonicalize().expect("root");
    let outside = tempfile::tempdir().expect("outside");
    let secret = outside
        .path()
        .canonicalize()
        .expect("outside")
        .join("secret.txt");
    std::fs::write(&secret, "not for the host").expect("secret");
    std::fs::write(root.join("hello.txt"), "hello from the root\n").expect("hello");
    let written = root.join("new.txt");

    let script = json!([
        {"list": true},
        {"call": "read_text_file", "args": {"path": root.join("hello.txt")}},
        {"call": "write_file", "args": {"path": written, "content": "written by python"}},
        {"call": "read_text_file", "args": {"path": secret}},
    ]);
    let node = PathBuf::from("node");
    let run = host(&stdio(&[&node, &filesystem_server(), &root]), &script);

    // The npm server (its SDK: @modelcontextprotocol/sdk 1.32) answers no
    // server/discover, so the handshake decides.
    assert_eq!(run.protocol, HANDSHAKE_VERSION);
    let tools = names(&run.steps[0]);
    assert!(tools.contains(&"read_text_file"), "{tools:?}");
    assert!(tools.contains(&"write_file"), "{tools:?}");
    let mut sorted = tools.clone();
    sorted.sort_unstable();
    assert_eq!(tools, sorted, "listed by name");
    let schema = run.steps[0]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "read_text_file"))
        .map(|t| &t["inputSchema"]);
    assert_eq!(
        schema.map(|s| &s["required"]),
        Some(&json!(["path"])),
        "the input schema is printed: {schema:?}"
    );

    let read = answer(&run.steps[1], "read_text_file");
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(read["text"], json!(["hello from the root\n"]), "{read}");

    let write = answer(&run.steps[2], "write_file");
    assert_eq!(write["isError"], false, "{write}");
    assert_eq!(
        std::fs::read_to_string(&written).expect("the file was written"),
        "written by python"
    );

    let refused = answer(&run.steps[3], "read_text_file");
    assert_eq!(
        refused["isError"], true,
        "a path outside the root: {refused}"
    );
    let text = refused["text"].to_string();
    assert!(!text.contains("not for the host"), "{refused}");
    assert!(text.contains("outside allowed directories"), "{refused}");
}

/// A list, one call and 16 calls at once against the fixture in `mode`.
fn over_http(mode: Mode) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (url, seen) = runtime.block_on(serve(mode));
    let parallel: Vec<Value> = (0..16)
        .map(|i| json!({"call": "read_file", "args": {"path": format!("f{i}.txt")}}))
        .collect();
    let script = json!([
        {"list": true},
        {"call": "read_file", "args": {"path": "a.txt", "lines": 3}, "progress": true},
        {"parallel": parallel},
    ]);
    let run = host(&http(&url), &script);

    // The fixture answers server/discover with "no such method" and echoes
    // the version the client offers in initialize.
    assert_eq!(run.protocol, HANDSHAKE_VERSION, "{mode:?}");
    assert_eq!(seen.initializes.load(Ordering::SeqCst), 1, "{mode:?}");

    assert_eq!(names(&run.steps[0]), ["read_file"], "{mode:?}");
    let schema = &run.steps[0]["tools"][0]["inputSchema"];
    assert_eq!(schema["required"], json!(["path"]), "{schema}");
    assert_eq!(schema["properties"]["lines"]["maximum"], 100.0, "{schema}");

    let call = answer(&run.steps[1], "read_file");
    assert_eq!(call["isError"], false, "{call}");
    let text = call["text"][0].as_str().expect("text");
    let echoed: Value = serde_json::from_str(text).expect("the fixture echoes the arguments");
    assert_eq!(echoed, json!({"path": "a.txt", "lines": 3}), "{call}");
    assert_eq!(call["structured"], Value::Null, "{call}");
    assert_eq!(
        call["progress"],
        json!([]),
        "the fixture sends no progress: {call}"
    );

    let answers = run.steps[2]["parallel"]
        .as_array()
        .unwrap_or_else(|| panic!("a parallel step answers a list: {}", run.steps[2]));
    assert_eq!(answers.len(), 16, "{mode:?}");
    for (i, a) in answers.iter().enumerate() {
        let a = answer(a, "read_file");
        assert_eq!(a["isError"], false, "{a}");
        let echoed: Value =
            serde_json::from_str(a["text"][0].as_str().expect("text")).expect("arguments");
        assert_eq!(
            echoed,
            json!({"path": format!("f{i}.txt")}),
            "in order: {a}"
        );
    }

    // Every call carried the session the fixture gave.
    let sessions = seen.call_sessions.lock().expect("sessions").clone();
    assert_eq!(sessions.len(), 17, "{mode:?}");
    assert!(
        sessions.iter().all(|s| s.as_deref() == Some("session-1")),
        "{sessions:?}"
    );
    // And the host ended it on the way out.
    let deletes = seen.deletes.lock().expect("deletes").clone();
    assert_eq!(deletes, [Some("session-1".to_owned())], "{mode:?}");
}

#[test]
fn the_python_host_drives_the_fixture_over_http_as_json() {
    over_http(Mode::Json);
}

#[test]
fn the_python_host_drives_the_fixture_over_http_as_event_streams() {
    over_http(Mode::Sse);
}

/// A call the server refuses at the transport (its session is gone, 404)
/// is printed as an error line, not a result, and the host goes on.
#[test]
fn a_refused_call_is_an_error_line() {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (url, _seen) = runtime.block_on(serve(Mode::Expire));
    let script = json!([{"call": "read_file", "args": {"path": "a.txt"}}, {"list": true}]);
    let run = host(&http(&url), &script);
    let refused = &run.steps[0];
    assert_eq!(refused["call"], "read_file", "{refused}");
    assert!(refused.get("isError").is_none(), "not a result: {refused}");
    assert!(refused["error"].is_string(), "{refused}");
    // The SDK turns the 404 into an Invalid Request error of its own.
    assert_eq!(refused["code"], -32600, "{refused}");
    assert_eq!(names(&run.steps[1]), ["read_file"]);
}

/// The `agentrt` binary: `AGENTRT_CLI`, else the one cargo built beside
/// this test (`cargo xtask test` builds it first).
fn agentrt_cli() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENTRT_CLI") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("this test's path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let path = profile.join(format!("agentrt{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.is_file(),
        "{} is missing: cargo build -p agentrt-cli (or set AGENTRT_CLI)",
        path.display()
    );
    path
}

/// The run and approval id of the one pending approval in `db`, once it
/// exists.
fn pending_approval(db: &Path) -> (String, String) {
    let started = Instant::now();
    loop {
        if let Ok(store) = agentrt::Store::open_existing(db, true) {
            let runs = store.list_runs(100, 0).map(|p| p.items).unwrap_or_default();
            for run in runs {
                let approvals = store.list_approvals(&run.id).unwrap_or_default();
                if let Some(a) = approvals
                    .iter()
                    .find(|a| a.status == agentrt::ApprovalStatus::Pending)
                {
                    return (run.id.clone(), a.id.clone());
                }
            }
        }
        assert!(started.elapsed() < DEADLINE, "no approval appeared");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The proxy binary, its configuration `config` pinned.
fn pinned_proxy(config: &Path) -> PathBuf {
    let proxy = PathBuf::from(env!("CARGO_BIN_EXE_agentrt-proxy"));
    let pinned = Command::new(&proxy)
        .args(["pin", "--config"])
        .arg(config)
        .output()
        .expect("pin");
    assert!(
        pinned.status.success(),
        "pin: {}",
        String::from_utf8_lossy(&pinned.stderr)
    );
    proxy
}

/// host.py's target: `proxy serve --config config` over stdio.
fn stdio_proxy(proxy: &Path, config: &Path) -> Vec<OsString> {
    vec![
        "--stdio".into(),
        "--".into(),
        proxy.into(),
        "serve".into(),
        "--config".into(),
        config.into(),
    ]
}

/// Decides the one pending approval in `db` with `agentrt VERB` (by
/// `operator`, with `note`), once it exists; its run.
fn decide_pending(db: &Path, verb: &str, note: &str) -> String {
    let (run, approval) = pending_approval(db);
    let out = Command::new(agentrt_cli())
        .arg("--db")
        .arg(db)
        .args([
            verb,
            &run,
            "--approval",
            &approval,
            "--by",
            "operator",
            "--note",
            note,
        ])
        .output()
        .expect("agentrt");
    assert!(
        out.status.success(),
        "agentrt {verb}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    run
}

/// How the host reaches the proxy.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Over {
    /// It starts `agentrt-proxy serve` and speaks over its stdio.
    Stdio,
    /// It connects to `agentrt-proxy serve --http 127.0.0.1:0`.
    Http,
}

/// Starts `serve --http 127.0.0.1:0` on `config`; the process (killed on
/// drop) and its URL, read from its stderr.
struct HttpProxy(std::process::Child);

impl Drop for HttpProxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The token file `serve --http` makes beside `config` when none is given.
fn token_file_of(config: &Path) -> PathBuf {
    let mut name = config.as_os_str().to_owned();
    name.push(".token");
    PathBuf::from(name)
}

fn serve_http(proxy: &Path, config: &Path) -> (HttpProxy, String) {
    use std::io::BufRead as _;
    let mut child = Command::new(proxy)
        .args(["serve", "--config"])
        .arg(config)
        .args(["--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let stderr = child.stderr.take().expect("stderr");
    let child = HttpProxy(child);
    let mut lines = std::io::BufReader::new(stderr).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the proxy says where it serves")
            .expect("stderr");
        if let Some(at) = line.find(" on http://") {
            break line[at + 4..].to_owned();
        }
    };
    // Keep draining stderr so the proxy never blocks on it.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

#[test]
fn the_python_host_reads_through_the_proxy_and_a_held_write_waits_for_the_operator() {
    through_the_proxy(Over::Stdio);
}

#[test]
fn the_python_host_does_the_same_through_the_proxy_over_http() {
    through_the_proxy(Over::Http);
}

fn through_the_proxy(over: Over) {
    let sandbox = tempfile::tempdir().expect("sandbox");
    let root = sandbox.path().canonicalize().expect("root");
    std::fs::write(root.join("hello.txt"), "hello through the proxy\n").expect("hello");
    let home = tempfile::tempdir().expect("operator's directory");
    let config = home.path().join("proxy.json");
    let db = home.path().join("proxy.db");
    let server = json!({
        "name": "fs",
        "command": ["node", filesystem_server(), root],
        "manifest": "fs.manifest.json",
        "connect_timeout": "60s",
        "rules": {
            "read_text_file": {"side_effect": "read_only", "timeout": "10s"},
            "write_file": {"side_effect": "local_mutation", "timeout": "10s", "allow_hint_mismatch": true}
        }
    });
    std::fs::write(
        &config,
        json!({"database": "proxy.db", "session": "host", "hold": "60s",
               "policy": {"local_mutation": "require_approval"}, "servers": [server]})
        .to_string(),
    )
    .expect("config");
    let proxy = pinned_proxy(&config);
    let http = (over == Over::Http).then(|| serve_http(&proxy, &config));
    let serve = |script: Value| {
        let target: Vec<OsString> = match &http {
            None => stdio_proxy(&proxy, &config),
            Some((_, url)) => vec![
                "--http".into(),
                url.into(),
                "--token-file".into(),
                token_file_of(&config).into(),
            ],
        };
        std::thread::spawn(move || host(&target, &script))
    };
    let decide = |verb: &str, note: &str| decide_pending(&db, verb, note);

    let new = root.join("new.txt");
    let held = serve(json!([
        {"list": true},
        {"call": "fs_read_text_file", "args": {"path": root.join("hello.txt")}},
        {"call": "fs_write_file", "args": {"path": new, "content": "approved words"}},
    ]));
    let approved_run = decide("approve", "");
    let run = held.join().expect("the host");
    assert_eq!(
        run.protocol, HANDSHAKE_VERSION,
        "the proxy offers handshake versions only"
    );
    let tools = names(&run.steps[0]);
    assert_eq!(
        tools,
        ["fs_read_text_file", "fs_write_file", "gate_status"],
        "the classified tools and the status tool"
    );
    let read = answer(&run.steps[1], "fs_read_text_file");
    // The server's structured content, recorded, comes back as text and
    // as structured content.
    assert_eq!(
        read["structured"],
        json!({"content": "hello through the proxy\n"}),
        "{read}"
    );
    let write = answer(&run.steps[2], "fs_write_file");
    assert_eq!(
        write["isError"], false,
        "the real result, in the held call: {write}"
    );
    assert_eq!(
        std::fs::read_to_string(&new).expect("written once approved"),
        "approved words"
    );

    let refused = root.join("refused.txt");
    let held = serve(json!([
        {"call": "fs_write_file", "args": {"path": refused, "content": "never"}},
    ]));
    decide("reject", "not today");
    let run = held.join().expect("the host");
    let write = answer(&run.steps[0], "fs_write_file");
    assert_eq!(write["isError"], true, "{write}");
    let text = write["text"].to_string();
    assert!(
        text.contains(
            "REJECTED: An operator rejected this request with the note \\\"not today\\\""
        ),
        "{write}"
    );
    assert!(!refused.exists(), "a rejected write never runs");

    let store = agentrt::Store::open_existing(&db, true).expect("the proxy's database");
    let events: Vec<String> = store
        .list_events(&approved_run)
        .expect("events")
        .iter()
        .map(|e| e.event_type.as_str().to_owned())
        .collect();
    assert_eq!(
        events,
        [
            "run.created",
            "run.started",
            "step.started",
            "step.decided",
            "step.policy",
            "approval.requested",
            "approval.decided",
            "run.resumed",
            "step.policy",
            "step.tool_started",
            "step.tool_finished",
            "run.finished"
        ]
    );
}

/// Issue 35's real parts: the proxy with a Cedar policy in front of the
/// npm filesystem server, driven by the Python host. A write under
/// `drafts/` runs, a write elsewhere waits for `agentrt approve`, a move is
/// denied, the 21st write within the hour is denied (a window counted
/// across the proxy's one-call runs), and a stricter shadow policy's
/// disagreements are recorded in the chain, which `agentrt verify` finds
/// intact.
#[test]
fn the_python_host_through_a_cedar_policy_with_a_shadow_and_a_window() {
    let sandbox = tempfile::tempdir().expect("sandbox");
    let root = sandbox.path().canonicalize().expect("root");
    std::fs::create_dir(root.join("drafts")).expect("drafts");
    std::fs::write(root.join("drafts/a.txt"), "a draft\n").expect("a draft");
    let home = tempfile::tempdir().expect("operator's directory");
    let config = home.path().join("proxy.json");
    let db = home.path().join("proxy.db");
    let drafts = format!("{}/drafts/*", root.display());
    std::fs::write(
        home.path().join("policy.cedar"),
        format!(
            r#"@id("drafts")
permit(principal, action == Agentrt::Action::"fs_write_file", resource == Agentrt::Resource::"fs")
when {{ context.args.path like "{drafts}" }};

@id("other-writes")
@approval("a write outside drafts")
permit(principal == Agentrt::Caller::"cedar-host", action == Agentrt::Action::"fs_write_file", resource)
unless {{ context.args.path like "{drafts}" }};

@id("twenty-an-hour")
forbid(principal, action == Agentrt::Action::"fs_write_file", resource)
when {{ context.recent.hour >= 20 }};

@id("no-moves")
forbid(principal, action == Agentrt::Action::"fs_move_file", resource);
"#
        ),
    )
    .expect("policy");
    // The shadow would ask for every write.
    std::fs::write(
        home.path().join("shadow.cedar"),
        r#"@id("writes-ask")
@approval("every write, while we try it")
permit(principal, action == Agentrt::Action::"fs_write_file", resource);
"#,
    )
    .expect("shadow");
    let server = json!({
        "name": "fs",
        "command": ["node", filesystem_server(), root],
        "manifest": "fs.manifest.json",
        "connect_timeout": "60s",
        "rules": {
            "write_file": {"side_effect": "local_mutation", "timeout": "10s", "allow_hint_mismatch": true},
            "move_file": {"side_effect": "destructive", "timeout": "10s", "allow_hint_mismatch": true}
        }
    });
    std::fs::write(
        &config,
        json!({"database": "proxy.db", "session": "cedar-host", "hold": "60s",
               "policy": {"cedar": "policy.cedar", "shadow": "shadow.cedar",
                          "windows": {"hour": "1h"}},
               "servers": [server]})
        .to_string(),
    )
    .expect("config");
    let proxy = pinned_proxy(&config);
    let checked = Command::new(&proxy)
        .args(["check", "--config"])
        .arg(&config)
        .output()
        .expect("check");
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success()
            && said.contains("policy: cedar ")
            && said.contains("shadow policy: cedar "),
        "check: {said}{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let target = stdio_proxy(&proxy, &config);
    let write = |path: &Path, content: &str| json!({"call": "fs_write_file", "args": {"path": path, "content": content}});

    let notes = root.join("notes.txt");
    let moved = root.join("moved.txt");
    let mut script = vec![
        write(&root.join("drafts/b.txt"), "b"),
        write(&notes, "approved words"),
        json!({"call": "fs_move_file", "args": {"source": root.join("drafts/a.txt"), "destination": moved}}),
    ];
    // 18 more drafts make 20 writes; the 21st is over the hour's cap.
    for n in 0..18 {
        script.push(write(&root.join(format!("drafts/{n}.txt")), "more"));
    }
    script.push(write(&root.join("drafts/21st.txt"), "one too many"));
    let held = {
        let target = target.clone();
        let script = Value::Array(script);
        std::thread::spawn(move || host(&target, &script))
    };
    decide_pending(&db, "approve", "");
    let run = held.join().expect("the host");
    let text = |i: usize| run.steps[i]["text"].to_string();
    assert_eq!(
        run.steps[0]["isError"], false,
        "a draft runs: {}",
        run.steps[0]
    );
    assert_eq!(
        std::fs::read_to_string(root.join("drafts/b.txt")).expect("b"),
        "b"
    );
    assert_eq!(run.steps[1]["isError"], false, "approved: {}", run.steps[1]);
    assert_eq!(
        std::fs::read_to_string(&notes).expect("notes"),
        "approved words"
    );
    assert_eq!(run.steps[2]["isError"], true, "{}", run.steps[2]);
    assert!(
        text(2).contains("DENIED") && text(2).contains("no-moves"),
        "{}",
        text(2)
    );
    assert!(
        !moved.exists() && root.join("drafts/a.txt").exists(),
        "a denied move never runs"
    );
    for i in 3..21 {
        assert_eq!(
            run.steps[i]["isError"], false,
            "write {i}: {}",
            run.steps[i]
        );
    }
    assert_eq!(run.steps[21]["isError"], true, "{}", run.steps[21]);
    assert!(text(21).contains("twenty-an-hour"), "{}", text(21));
    assert!(
        !root.join("drafts/21st.txt").exists(),
        "the 21st write never runs"
    );

    // Every write disagreed with the shadow (which asks for all) but the
    // approved one: 19 drafts and the 21st.
    let store = agentrt::Store::open_existing(&db, true).expect("the proxy's database");
    let runs = store.list_runs(0, 0).expect("runs").items;
    let shadows: usize = runs
        .iter()
        .map(|r| {
            store
                .list_events(&r.id)
                .expect("events")
                .iter()
                .filter(|e| e.event_type == agentrt::EventType::PolicyShadow)
                .count()
        })
        .sum();
    assert_eq!(shadows, 20);
    let verified = Command::new(agentrt_cli())
        .arg("--db")
        .arg(&db)
        .arg("verify")
        .output()
        .expect("agentrt verify");
    let said = String::from_utf8_lossy(&verified.stdout);
    assert!(
        verified.status.success() && said.contains("intact"),
        "verify: {said}{}",
        String::from_utf8_lossy(&verified.stderr)
    );
}
