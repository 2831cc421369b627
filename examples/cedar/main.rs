//! A team's policy as data: three runs of scripted agents decided by a
//! Cedar policy (`policy.cedar`: drafts are written freely, other writes
//! and pushes to main ask, mail leaves only for example.com, the 21st
//! write is denied, only the release group deploys), with a stricter
//! policy tried beside it (`shadow.cedar`) whose disagreements are
//! recorded and verified. No model, no network.
//!
//! ```sh
//! cargo run --example cedar                 # in memory
//! cargo run --example cedar -- --db runs.db # or on a file
//! agentrt policy test examples/cedar/policy.cedar \
//!     --tools examples/cedar/tools.json --cases examples/cedar/cases.json
//! ```

// The binary uses part of what the test uses.
#[allow(dead_code)]
mod demo;

use std::process::ExitCode;

use agentrt::Store;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let db = match examples::or_usage(examples::db_arg(std::env::args().skip(1)), demo::USAGE) {
        Ok(db) => db,
        Err(code) => return code,
    };
    let store = match db {
        Some(path) => examples::open_store(&path),
        None => Store::open(":memory:"),
    };
    let result = match store {
        Ok(store) => demo::run(&store, &mut std::io::stdout()).await,
        Err(e) => Err(e.into()),
    };
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", agentrt::text::sanitize(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}
