//! The approver demo: a scripted run pauses for an operator's approval; a
//! signed webhook request, made with the approver crate's client helper,
//! approves it over HTTP on 127.0.0.1; the run resumes, bound to the same
//! hash, and the tool runs once.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentrt::{
    Decision, DefaultPolicy, Driver, EventType, GateConfig, Limits, RunStatus, ScriptedAgent,
    SideEffect, Store, Tool, ToolResult, ToolSpec, ids::random_id, tool_fn,
};
use agentrt_approver::StoreApprover;
use agentrt_approver::signature::{Secret, signed_headers};
use agentrt_approver::webhook::{WebhookConfig, router};

pub const USAGE: &str = "usage: cargo run --example approver [-- --db PATH]

  --db PATH  the SQLite file to use (default: a scratch file), or a postgres:// URL";

const RUN: &str = "deploy-1";

/// What the demo saw.
#[derive(Debug)]
pub struct Report {
    /// The approval's hash as the webhook showed it.
    pub shown_hash: String,
    /// The hash the webhook's answer names.
    pub approved_hash: String,
    /// The hash in the grant the resumed run used.
    pub granted_hash: String,
    /// How the run ended.
    pub status: RunStatus,
    /// How many times the tool ran.
    pub deploys: usize,
}

fn deploy_tool(count: Arc<AtomicUsize>) -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new(
            "deploy",
            "Deploy a build to production",
            SideEffect::RemoteMutation,
        ),
        move |call| {
            count.fetch_add(1, Ordering::SeqCst);
            async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("deployed")) }
        },
    ))
}

/// A driver whose agent makes `decisions` (a resumed run's agent starts
/// where the paused one stopped).
fn driver(
    store: &Store,
    count: &Arc<AtomicUsize>,
    decisions: Vec<Decision>,
) -> Result<Driver<ScriptedAgent>, agentrt::Error> {
    let agent = ScriptedAgent::new(decisions);
    let tools = vec![deploy_tool(Arc::clone(count))];
    Driver::new(GateConfig::new(store.clone(), DefaultPolicy, tools), agent)
}

/// A signed request to the webhook at `base`.
async fn send(
    http: &reqwest::Client,
    secret: &Secret,
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: &str,
) -> Result<(u16, serde_json::Value), Box<dyn std::error::Error>> {
    let mut request = http
        .request(method.clone(), format!("{base}{path}"))
        .body(body.to_owned());
    for (name, value) in signed_headers(secret, method.as_str(), path, body.as_bytes())? {
        request = request.header(name, value);
    }
    let response = request.send().await?;
    let status = response.status().as_u16();
    Ok((status, response.json().await?))
}

/// Runs the demo on the database at `db`, narrating to `out`.
pub async fn run(db: &Path, out: &mut dyn Write) -> Result<Report, Box<dyn std::error::Error>> {
    let deploys = Arc::new(AtomicUsize::new(0));
    let store = examples::open_store(db)?;
    let deploy = Decision::tool_call(
        "deploy",
        r#"{"build":"2026.12.02-1","target":"production"}"#,
    );
    let paused = driver(&store, &deploys, vec![deploy])?
        .start(Some(RUN), "ship the release", Limits::default())
        .await?;
    writeln!(
        out,
        "run {RUN}: {} (the policy asks before a remote mutation)",
        paused.status
    )?;

    // The webhook over the same database, on a free loopback port. The
    // shared secret would be in an owner-only file; here it is made fresh.
    let secret = Secret::new(format!("{}{}", random_id(), random_id()))?;
    let approver = StoreApprover::open(db, None)?;
    let config = WebhookConfig::new(Arc::new(approver), secret.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let server = tokio::spawn(async move { axum::serve(listener, router(config)).await });
    writeln!(out, "webhook listening on {base}")?;

    let http = reqwest::Client::builder().no_proxy().build()?;
    let path = format!("/runs/{RUN}/approvals");
    let (status, listed) = send(&http, &secret, &base, reqwest::Method::GET, &path, "").await?;
    let shown = &listed["pending"][0];
    let approval_id = shown["id"]
        .as_str()
        .ok_or("no pending approval")?
        .to_owned();
    let shown_hash = shown["hash"].as_str().ok_or("no hash")?.to_owned();
    writeln!(
        out,
        "GET {path} -> {status}: approval {approval_id}, hash {shown_hash}"
    )?;

    let body = serde_json::json!({
        "run_id": RUN,
        "approval_id": approval_id,
        "hash": shown_hash,
        "by": "release-manager",
        "note": "build verified in staging",
    })
    .to_string();
    let path = format!("/runs/{RUN}/approvals/{approval_id}/approve");
    let (status, decided) =
        send(&http, &secret, &base, reqwest::Method::POST, &path, &body).await?;
    let approved_hash = decided["hash"].as_str().unwrap_or_default().to_owned();
    writeln!(out, "POST {path} -> {status}: {}", decided["status"])?;
    server.abort();

    let done = vec![Decision::complete(r#"{"deployed":true}"#)];
    let resumed = driver(&store, &deploys, done)?.resume(RUN).await?;
    // The tool's start names the approval it ran under; its stored hash
    // is the one that was shown and decided.
    let granted_id = store
        .list_events(RUN)?
        .into_iter()
        .filter(|e| e.event_type == EventType::StepToolStarted)
        .find_map(|e| {
            serde_json::from_str::<serde_json::Value>(&e.payload)
                .ok()
                .and_then(|p| p["approval_id"].as_str().map(str::to_owned))
        })
        .ok_or("the tool started without an approval")?;
    let granted_hash = store.get_approval(RUN, &granted_id)?.hash;
    writeln!(
        out,
        "run {RUN}: {} after resuming; the tool ran under approval {granted_id}, hash {granted_hash}",
        resumed.status
    )?;
    Ok(Report {
        shown_hash,
        approved_hash,
        granted_hash,
        status: resumed.status,
        deploys: deploys.load(Ordering::SeqCst),
    })
}
