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
