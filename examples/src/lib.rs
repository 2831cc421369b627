//! Runnable consumers of agentrt; see the `[[example]]` targets.

use std::path::PathBuf;
use std::process::ExitCode;

/// The arguments of an example that takes only `--db PATH` (and `-h` /
/// `--help`): `Ok(None)` for help, `Ok(Some(db))` otherwise.
pub fn db_arg(args: impl IntoIterator<Item = String>) -> Result<Option<Option<PathBuf>>, String> {
    let mut db = None;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(None),
            "--db" => db = Some(args.next().ok_or("--db needs a path")?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Some(db))
}

/// What an example does with its parsed arguments: help printed to stdout
/// (exit 0), a problem and the usage to stderr (exit 2), or the value.
pub fn or_usage<T>(parsed: Result<Option<T>, String>, usage: &str) -> Result<T, ExitCode> {
    match parsed {
        Ok(Some(value)) => Ok(value),
        Ok(None) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(problem) => {
            eprintln!("{problem}\n{usage}");
            Err(ExitCode::from(2))
        }
    }
}
