//! `crash-consumer`: an agentrt consumer that a test can kill with SIGKILL
//! at a named crash point, then resume in a new process.
//!
//! The run is a plan agent that calls one tool, `effect`, twice with
//! distinct arguments and completes. Each real execution of the tool
//! appends `<step_id> <args>` to an external file (append, write, fsync),
//! so a test can count side effects whatever happened to the process.
//! The policy allows every side-effect class: the only approvals are the
//! runtime's `interrupted_side_effect` pauses.
//!
//! ```sh
//! crash-consumer --db r.db --effects fx --class local_mutation --run r \
//!     --crash-at tool.effect --marker parked --lease-ttl-ms 500 start &
//! # wait for `parked`, kill -9 the process, wait out the lease, then:
//! crash-consumer --db r.db --effects fx --class local_mutation --run r resume
//! crash-consumer --db r.db --run r approve-pending
//! crash-consumer --db r.db --effects fx --class local_mutation --run r resume
//! ```
//!
//! See `args::USAGE` for the options and exit codes.

mod args;
mod consumer;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentrt::{
    DecideOptions, Driver, Error, GateConfig, Limits, Operator, Outcome, SideEffect,
    SideEffectPolicy, Store,
};
use serde_json::json;

use args::{Args, Command, Parsed};

/// How long `--go` waits for its file before giving up.
const GO_LIMIT: Duration = Duration::from_secs(60);

/// Why the consumer stopped without finishing its command.
#[derive(Debug)]
enum Failure {
    /// The runtime refused or failed.
    Runtime(Error),
    /// The tool's spec could not be built.
    Spec(agentrt::JsonError),
    /// A file of the consumer's own (`--ready`, `--go`).
    File { path: PathBuf, detail: String },
    /// The command line lacks what the command needs.
    Usage(String),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Runtime(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Runtime(e) => write!(f, "{e}"),
            Failure::Spec(e) => write!(f, "the tool spec: {e}"),
            Failure::File { path, detail } => write!(f, "{}: {detail}", path.display()),
            Failure::Usage(problem) => write!(f, "{problem}"),
        }
    }
}

impl Failure {
    /// The exit code and the JSON line printed on stdout.
    fn report(&self) -> (u8, serde_json::Value) {
        match self {
            Failure::Runtime(Error::RunLeased {
                owner, expires_at, ..
            }) => (
                3,
                json!({"leased": true, "owner": owner, "expires_at": expires_at}),
            ),
            Failure::Runtime(Error::RunState { status, detail, .. }) => {
                (4, json!({"run_state": status.as_str(), "detail": detail}))
            }
            Failure::Runtime(e) if e.is_run_state() => {
                (4, json!({"run_state": "", "detail": e.to_string()}))
            }
            Failure::Runtime(e) => {
                let kind = match e {
                    Error::LeaseLost { .. } => "lease_lost",
                    Error::DatabaseLocked => "database_locked",
                    _ => "runtime",
                };
                (1, json!({"error": kind, "detail": e.to_string()}))
            }
            Failure::Spec(_) => (1, json!({"error": "spec", "detail": self.to_string()})),
            Failure::File { .. } => (1, json!({"error": "file", "detail": self.to_string()})),
            Failure::Usage(_) => (2, json!({"error": "usage", "detail": self.to_string()})),
        }
    }
}

/// Allows every class: approvals come only from interruptions.
fn allow_all() -> SideEffectPolicy {
    SideEffect::ALL
        .iter()
        .fold(SideEffectPolicy::new(), |policy, class| {
            policy.with(*class, Outcome::Allow)
        })
        .with_id("crash-consumer/allow-all")
}

/// Creates `ready` (if given), then waits until `go` exists.
async fn wait_for_go(go: &Path, ready: Option<&Path>) -> Result<(), Failure> {
    if let Some(ready) = ready {
        std::fs::File::create(ready).map_err(|e| Failure::File {
            path: ready.to_owned(),
            detail: e.to_string(),
        })?;
    }
    let deadline = tokio::time::Instant::now() + GO_LIMIT;
    while !go.exists() {
        if tokio::time::Instant::now() >= deadline {
            return Err(Failure::File {
                path: go.to_owned(),
                detail: format!("did not appear within {} s", GO_LIMIT.as_secs()),
            });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// `start` or `resume`: drives the run until it pauses or ends.
async fn drive(
    args: &Args,
    effects: &Path,
    class: SideEffect,
) -> Result<serde_json::Value, Failure> {
    let store = match args.command {
        Command::Start => Store::open(&args.db)?,
        _ => Store::open_existing(&args.db, false)?,
    };
    let executed = Arc::new(AtomicUsize::new(0));
    let tool = consumer::effect_tool(class, effects.to_owned(), Arc::clone(&executed))
        .map_err(Failure::Spec)?;
    let mut config = GateConfig::new(store, allow_all(), vec![tool])
        .with_lease_owner(format!("crash-consumer-{}", std::process::id()));
    if let Some(ttl) = args.lease_ttl {
        config = config.with_lease_ttl(ttl);
    }
    if let Some(crash) = &args.crash {
        config = config.with_crash_hook(consumer::crash_hook(
            crash.point,
            crash.nth,
            crash.marker.clone(),
        ));
    }
    let mut driver = Driver::new(config, consumer::Plan)?;
    if let Some(go) = &args.go {
        wait_for_go(go, args.ready.as_deref()).await?;
    }
    let run = match args.command {
        Command::Start => {
            driver
                .start(
                    Some(&args.run),
                    "call the effect tool twice",
                    Limits::default(),
                )
                .await?
        }
        _ => driver.resume(&args.run).await?,
    };
    Ok(json!({
        "status": run.status.as_str(),
        "reason": run.reason.map(|r| r.as_str()).unwrap_or(""),
        "executed": executed.load(Ordering::SeqCst),
        "owner": driver.gate().owner(),
    }))
}

/// `approve-pending`: approves the run's one pending approval, if any.
fn approve_pending(args: &Args) -> Result<serde_json::Value, Failure> {
    let store = Store::open_existing(&args.db, false)?;
    let approval = match agentrt::view::pending_approval(&store, &args.run, None) {
        Ok(approval) => approval,
        Err(Error::NoPendingApproval { .. }) => {
            let run = store.get_run(&args.run)?;
            return Ok(json!({"approved": null, "status": run.status.as_str()}));
        }
        Err(e) => return Err(e.into()),
    };
    let approved = Operator::new(store).approve(
        &args.run,
        &approval.id,
        &DecideOptions {
            by: "crash-consumer",
            note: "approved by the kill-and-resume test",
            shown_hash: Some(&approval.hash),
        },
    )?;
    Ok(json!({
        "approved": approved.id,
        "kind": approved.kind,
        "step_id": approved.step_id,
    }))
}

async fn run(args: &Args) -> Result<serde_json::Value, Failure> {
    match (args.command, &args.effects, args.class) {
        (Command::ApprovePending, _, _) => approve_pending(args),
        (_, Some(effects), Some(class)) => drive(args, effects, class).await,
        // The parser requires both for start and resume.
        _ => Err(Failure::Usage(
            "--effects and --class are needed to start or resume".into(),
        )),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match args::parse(std::env::args_os().skip(1)) {
        Ok(Parsed::Run(args)) => args,
        Ok(Parsed::Help) => {
            println!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(problem) => {
            eprintln!("crash-consumer: {problem}\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(&args).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(failure) => {
            let (code, line) = failure.report();
            println!("{line}");
            eprintln!("crash-consumer: {failure}");
            ExitCode::from(code)
        }
    }
}
