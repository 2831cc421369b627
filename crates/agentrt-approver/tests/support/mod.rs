//! What the approver's tests share: a run paused on a real database for
//! an operator's approval of a remote mutation.
#![allow(dead_code)]

pub mod receiver;

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;

use agentrt_approver::signature::{Secret, signed_headers};

use agentrt::{
    Clock, Decision, DefaultPolicy, Driver, GateConfig, Limits, RunStatus, ScriptedAgent,
    SideEffect, Store, Tool, ToolResult, ToolSpec, tool_fn,
};

/// Serves `app` on a free loopback port for the rest of the test: its
/// base URL.
pub async fn serve_on_loopback(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// `push`, a remote mutation: the default policy asks before it runs.
pub fn push_tool() -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("push", "Push to the remote", SideEffect::RemoteMutation),
        |_call| async move { Ok(ToolResult::raw(r#"{"pushed":true}"#).with_summary("pushed")) },
    ))
}

/// Starts run `id` on the database at `db`, its agent pushing `args`, and
/// drives it until it waits for approval: the approval's id and hash.
/// `clock` (the gate's) when given, else the wall clock.
pub async fn pause_on_push(
    db: &Path,
    id: &str,
    args: &str,
    limits: Limits,
    clock: Option<Clock>,
) -> (String, String) {
    pause_on_push_in(&Store::open(db).unwrap(), id, args, limits, clock).await
}

/// [`pause_on_push`] on `store`.
pub async fn pause_on_push_in(
    store: &Store,
    id: &str,
    args: &str,
    limits: Limits,
    clock: Option<Clock>,
) -> (String, String) {
    let mut config = GateConfig::new(store.clone(), DefaultPolicy, vec![push_tool()]);
    if let Some(clock) = clock {
        config = config.with_clock(clock);
    }
    let agent = ScriptedAgent::new(vec![Decision::tool_call("push", args)]);
    let run = Driver::new(config, agent)
        .unwrap()
        .start(Some(id), "push", limits)
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals(id).unwrap().pop().unwrap();
    (approval.id, approval.hash)
}

/// Pushes need two approvers (design §46).
#[allow(dead_code)] // Not every test target pauses on two approvers.
pub struct TwoApprovers;

impl agentrt::Policy for TwoApprovers {
    fn evaluate(
        &self,
        request: &agentrt::ToolRequest,
        _view: &agentrt::RunView,
    ) -> Result<agentrt::PolicyDecision, agentrt::PolicyError> {
        let both = agentrt::policy::tool_and_args(request);
        Ok(agentrt::PolicyDecision::need_approval(
            "production",
            "two people",
            Some(both.clone()),
            Some(both),
        )
        .with_approvers(2))
    }
}

/// [`pause_on_push`] under a policy that asks for two approvers: the
/// approval's id and hash.
#[allow(dead_code)] // Not every test target pauses on two approvers.
pub async fn pause_for_two(db: &Path, id: &str, clock: Option<Clock>) -> (String, String) {
    let store = Store::open(db).unwrap();
    let mut config = GateConfig::new(store.clone(), TwoApprovers, vec![push_tool()]);
    if let Some(clock) = clock {
        config = config.with_clock(clock);
    }
    let agent = ScriptedAgent::new(vec![Decision::tool_call("push", r#"{"ref":"main"}"#)]);
    let run = Driver::new(config, agent)
        .unwrap()
        .start(Some(id), "push", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = store.list_approvals(id).unwrap().pop().unwrap();
    (approval.id, approval.hash)
}

/// Starts run `id` on the database at `db`, its agent calling `write`, a
/// local mutation whose outcome comes back unknown: the run waits on an
/// `interrupted_side_effect` approval.
pub async fn pause_on_unknown(db: &Path, id: &str) {
    let store = Store::open(db).unwrap();
    let write: Arc<dyn Tool> = Arc::new(tool_fn(
        ToolSpec::new("write", "Write a file", SideEffect::LocalMutation),
        |_call| async move { Err(agentrt::ToolError::unknown("the disk went away mid-write")) },
    ));
    let config = GateConfig::new(store, DefaultPolicy, vec![write]);
    let agent = ScriptedAgent::new(vec![Decision::tool_call("write", "{}")]);
    let run = Driver::new(config, agent)
        .unwrap()
        .start(Some(id), "write", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::WaitingForApproval);
}

/// Runs `id` on the database at `db` to its end: its agent gives up, and
/// the run ends FAILED.
pub async fn fail_run(db: &Path, id: &str) {
    let store = Store::open(db).unwrap();
    let config = GateConfig::new(store, DefaultPolicy, vec![push_tool()]);
    let agent = ScriptedAgent::new(vec![Decision::fail("the remote is gone")]);
    let run = Driver::new(config, agent)
        .unwrap()
        .start(Some(id), "push", Limits::default())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Failed);
}

/// The shared secret of the served webhook in these tests.
pub const SECRET: &str = "3f1c9a7be2d84610a5c7e9f02b4d6a8c1e3f5a7b9d0c2e4f6a8b0c2d4e6f8a0b";

/// Writes [`SECRET`] to `path` with permissions `mode`.
pub fn write_secret(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, format!("{SECRET}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The `agentrt-approver` binary, its stdin closed.
pub fn approver() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentrt-approver"));
    command.stdin(Stdio::null());
    command
}

/// Headers signing `method path body` with [`SECRET`] (a fresh nonce).
pub fn signed(method: &reqwest::Method, path: &str, body: &str) -> Vec<(&'static str, String)> {
    let secret = Secret::new(SECRET).unwrap();
    signed_headers(&secret, method.as_str(), path, body.as_bytes()).unwrap()
}

/// Sends `method path body` with `headers` to `base`: the status and the
/// JSON answer.
pub async fn send_signed(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: &str,
    headers: &[(&'static str, String)],
) -> (u16, serde_json::Value) {
    let mut request = http
        .request(method, format!("{base}{path}"))
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Sends `method path body`, freshly signed, to `base`.
pub async fn send(
    http: &reqwest::Client,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: &str,
) -> (u16, serde_json::Value) {
    let headers = signed(&method, path, body);
    send_signed(http, base, method, path, body, &headers).await
}

/// `agentrt-approver serve` on `db` (a file or a URL) with the secret at
/// `secret`, listening on a free loopback port: the child, its stderr past
/// the first line, and the address that line names.
pub fn serve_on(
    db: &std::ffi::OsStr,
    secret: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    let mut command = approver();
    command.args(["serve", "--db"]).arg(db);
    serve_with(command, secret)
}

/// `command` (`agentrt-approver serve` and what it was given) with the
/// secret at `secret`, listening on a free loopback port: as
/// [`serve_on`].
pub fn serve_with(
    mut command: Command,
    secret: &Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStderr>,
    String,
) {
    use std::io::BufRead;
    let mut child = command
        .args(["--listen", "127.0.0.1:0", "--secret-file"])
        .arg(secret)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    let base = first
        .trim()
        .strip_prefix("agentrt-approver: listening on ")
        .unwrap_or_else(|| panic!("{first:?}"))
        .to_owned();
    (child, stderr, base)
}

/// Stops a served child with SIGTERM; it must exit cleanly.
pub fn stop(mut child: std::process::Child) {
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}
