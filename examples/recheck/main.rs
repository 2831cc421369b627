//! Old runs checked again under a new policy: three runs of a scripted
//! agent that reads, writes and publishes notes are recorded under a
//! lenient policy ("rules v1: mutations allowed"); each is then re-checked
//! under a stricter one ("rules v2: nothing leaves the machine"), which
//! names exactly the old steps it would have decided otherwise. No model,
//! no network.
//!
//! ```sh
//! cargo run --example recheck                 # in memory
//! cargo run --example recheck -- --db runs.db # or on a file
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
