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

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let store = match examples::store_from_args(demo::USAGE) {
        Ok(store) => store,
        Err(code) => return code,
    };
    examples::exit_code(demo::run(&store, &mut std::io::stdout()).await)
}
