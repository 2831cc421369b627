//! An approval decided over the signed webhook: a scripted run pauses for
//! a remote mutation, a signed request (the approver crate's client
//! helper) approves it over HTTP on 127.0.0.1, and the run resumes under
//! the approval with the hash that was shown. No model, no network beyond
//! loopback.
//!
//! ```sh
//! cargo run --example approver                  # a temporary database
//! cargo run --example approver -- --db runs.db  # or this file
//! ```

// The binary uses part of what the test uses.
#[allow(dead_code)]
mod demo;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let db = match examples::or_usage(examples::db_arg(std::env::args().skip(1)), demo::USAGE) {
        Ok(db) => db,
        Err(code) => return code,
    };
    let scratch = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("error: no temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    let db = db.unwrap_or_else(|| scratch.path().join("approver-demo.db"));
    examples::exit_code(demo::run(&db, &mut std::io::stdout()).await)
}
