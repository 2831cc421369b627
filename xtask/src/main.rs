//! Maintenance tasks: `cargo xtask <task>`.
//!
//! - `ci`: what CI runs (format check, clippy with warnings as errors, the
//!   whole test suite).

use std::process::{Command, ExitCode};

const USAGE: &str = "usage: cargo xtask <task>\n\ntasks:\n  ci    format check, clippy -D warnings, cargo test --workspace";

fn cargo(args: &[&str]) -> bool {
    eprintln!("$ cargo {}", args.join(" "));
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn main() -> ExitCode {
    let task = std::env::args().nth(1).unwrap_or_default();
    match task.as_str() {
        "ci" => {
            let steps: [&[&str]; 3] = [
                &["fmt", "--all", "--", "--check"],
                &[
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ],
                &["test", "--workspace"],
            ];
            if steps.iter().all(|s| cargo(s)) {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        other => {
            eprintln!("unknown task {other:?}\n{USAGE}");
            ExitCode::from(2)
        }
    }
}
