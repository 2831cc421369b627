//! Maintenance tasks: `cargo xtask <task>`.
//!
//! - `ci`: what CI runs (format check, clippy with warnings as errors, the
//!   whole test suite).
//! - `mutants`: cargo-mutants over the files that hold the controls that
//!   matter most. Slow on two cores, so it is run by hand, not in CI.

use std::process::{Command, ExitCode, Stdio};

const USAGE: &str = "usage: cargo xtask <task> [args]

tasks:
  ci       format check, clippy -D warnings, cargo test --workspace
  mutants  cargo mutants -p agentrt over the control files, with only the
           core's tests, reusing target/ (--copy-target=true); any further
           arguments go to cargo mutants. With --file only the files named
           are mutated; arguments after `--` go to cargo test. Needs
           `cargo install cargo-mutants`.
           e.g. cargo xtask mutants --file crates/agentrt/src/operator.rs \\
                  -- --test approvals --test operator_rows";

/// The files `cargo xtask mutants` mutates unless `--file` is given.
const CONTROLS: [&str; 9] = [
    "crates/agentrt/src/approval.rs",
    "crates/agentrt/src/operator.rs",
    "crates/agentrt/src/chain.rs",
    "crates/agentrt/src/verify.rs",
    "crates/agentrt/src/verify/**/*.rs",
    "crates/agentrt/src/gate/execute.rs",
    "crates/agentrt/src/gate/verdicts.rs",
    "crates/agentrt/src/gate/takeover.rs",
    "crates/agentrt/src/budget/caller.rs",
];

fn cargo_command() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn cargo(args: &[&str]) -> bool {
    eprintln!("$ cargo {}", args.join(" "));
    cargo_command()
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The cargo-mutants arguments: the core package, its tests only, the
/// control files and a copy of target/ unless the caller chooses, then the
/// caller's own.
fn mutants_args(extra: &[String]) -> Vec<&str> {
    let given = |prefixes: &[&str]| {
        extra
            .iter()
            .take_while(|a| *a != "--")
            .any(|a| prefixes.iter().any(|p| a.starts_with(p)))
    };
    let mut args = vec!["mutants", "--package", "agentrt", "--test-workspace=false"];
    if !given(&["--copy-target"]) {
        args.push("--copy-target=true");
    }
    if !given(&["--file", "-f"]) {
        for file in CONTROLS {
            args.extend(["--file", file]);
        }
    }
    args.extend(extra.iter().map(String::as_str));
    args
}

fn mutants(extra: &[String]) -> ExitCode {
    let installed = cargo_command()
        .args(["mutants", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!(
            "cargo-mutants is not installed; install it with:\n  cargo install cargo-mutants"
        );
        return ExitCode::FAILURE;
    }
    if cargo(&mutants_args(extra)) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or_default();
    match task {
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
        "mutants" => mutants(&args[1..]),
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
