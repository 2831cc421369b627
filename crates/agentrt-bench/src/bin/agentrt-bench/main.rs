//! `agentrt-bench`: print a result file's Markdown report, or the Markdown
//! comparison of several result files.
//!
//! Exit status: 0 done; 1 refused (a malformed or unreadable file, mixed
//! commits or taxonomies, nothing to compare); 2 usage error.

mod args;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use agentrt_bench::{CompareError, CompareOptions, FileError, ResultFile, compare, latest};

use args::{Command, HELP, Parsed, USAGE};

/// A refusal, printed as `agentrt-bench: <message>` with exit status 1.
struct Refusal(String);

fn read(path: &Path) -> Result<ResultFile, Refusal> {
    ResultFile::read_path(path).map_err(|e| match e {
        FileError::Io { .. } => Refusal(e.to_string()),
        e => Refusal(format!("{}: {e}", path.display())),
    })
}

fn run(command: Command) -> Result<String, Refusal> {
    match command {
        Command::Summarize { file } => Ok(read(&file)?.markdown()),
        Command::Compare {
            order,
            link_prefix,
            allow_mixed_commits,
            files,
        } => {
            let files = files
                .iter()
                .map(|p| read(p))
                .collect::<Result<Vec<_>, _>>()?;
            let opts = CompareOptions {
                order,
                allow_mixed_commits,
                link_prefix,
            };
            compare(&latest(&files), &opts).map_err(|e| match e {
                CompareError::MixedCommits { .. } => {
                    Refusal(format!("{e} (--allow-mixed-commits compares them anyway)"))
                }
                e => Refusal(e.to_string()),
            })
        }
    }
}

fn main() -> ExitCode {
    let cli = match args::parse(std::env::args_os()) {
        Parsed::Run(cli) => cli,
        Parsed::Help => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Parsed::Usage(problem) => {
            eprint!("agentrt-bench: {problem}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(cli.command) {
        Ok(text) => match std::io::stdout().lock().write_all(text.as_bytes()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("agentrt-bench: writing the output: {e}");
                ExitCode::from(1)
            }
        },
        Err(Refusal(message)) => {
            eprintln!("agentrt-bench: {message}");
            ExitCode::from(1)
        }
    }
}
