//! The agentrt demo: a scripted agent against three in-memory tools.
//!
//! ```sh
//! cargo run --example scripted                      # stops at an approval
//! cargo run -p agentrt-cli -- --db agentrt-demo.db approve RUN --approval ID
//! cargo run --example scripted -- --resume RUN      # runs the approved call
//! ```
//!
//! The agent reads a file (allowed), sends a malformed request (the runtime
//! rejects it before any policy sees it), tries to delete a file (the
//! policy denies it), then opens a pull request, a remote mutation that
//! pauses the run until an operator approves that exact request.

// The binary uses part of what the test uses.
#[allow(dead_code)]
mod demo;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentrt::trace::TextTrace;

fn parse_args() -> Result<Option<demo::Options>, String> {
    let mut db = PathBuf::from("agentrt-demo.db");
    let mut resume = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--db" => db = args.next().ok_or("--db needs a path")?.into(),
            "--resume" => resume = Some(args.next().ok_or("--resume needs a run id")?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(demo::Options { db, resume }))
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let options = match examples::or_usage(parse_args(), demo::USAGE) {
        Ok(options) => options,
        Err(code) => return code,
    };
    eprintln!("events, as they commit:");
    match demo::run(
        &options,
        &mut std::io::stdout(),
        Arc::new(TextTrace::new(std::io::stderr())),
    )
    .await
    {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
