//! `agentrt`: the operator command line. It reads runs from an existing
//! database and decides approvals; it never executes a step, never resumes,
//! never re-checks, never creates and never migrates a database.

mod account;
mod args;
mod commands;
mod consent;
mod database;
mod error;
mod hex;
mod keys;
mod open;
mod output;
mod signed_head;
mod usage;

use std::io::{BufWriter, Write};
use std::process::ExitCode;

use args::{Env, Parsed, UsageError};
use error::CliError;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    match args::parse(&argv, &Env::from_process()) {
        Ok(Parsed::Print(text)) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(UsageError::NoCommand) => {
            // Nothing sensible is left to do when stderr itself fails.
            let _ = std::io::stderr().write_all(usage::USAGE.as_bytes());
            ExitCode::from(2)
        }
        Err(UsageError::Problem { command, message }) => {
            CliError::Usage(message).report(&command, &mut std::io::stderr());
            ExitCode::from(2)
        }
        Ok(Parsed::Completions(shell)) => with_stdout("completions", |out| {
            out.write_all(&args::completions(shell))
                .map_err(CliError::Output)
        }),
        Ok(Parsed::Keygen(args)) => with_stdout("keygen", |out| commands::keygen::run(&args, out)),
        Ok(Parsed::Migrate(args)) => {
            with_stdout("migrate", |out| commands::migrate::run(&args, out))
        }
        Ok(Parsed::Policy(args)) => {
            let name = if args.cases.is_some() {
                "policy test"
            } else {
                "policy check"
            };
            with_stdout(name, |out| commands::policy::run(&args, out))
        }
        Ok(Parsed::Run(invocation)) => with_stdout(invocation.command.name(), |out| {
            commands::run(&invocation, out)
        }),
    }
}

/// Runs a command writing to buffered stdout; reports its error (after
/// what it printed) and gives the exit status.
fn with_stdout(command: &str, f: impl FnOnce(&mut dyn Write) -> Result<(), CliError>) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let result = f(&mut out).and_then(|()| out.flush().map_err(CliError::Output));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // What was printed before the failure goes out first.
            let _ = out.flush();
            e.report(command, &mut std::io::stderr());
            ExitCode::from(e.exit_code())
        }
    }
}
