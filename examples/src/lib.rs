//! Runnable consumers of agentrt; see the `[[example]]` targets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agentrt::Store;

/// The store an example's `--db` names: a `postgres://` or
/// `postgresql://` URL opens that PostgreSQL database (its schema created
/// if missing), anything else the SQLite file at that path.
///
/// ```
/// let store = examples::open_store(std::path::Path::new(":memory:"))?;
/// assert_eq!(store.list_runs(0, 0)?.total, 0);
/// # Ok::<(), agentrt::Error>(())
/// ```
pub fn open_store(db: &Path) -> agentrt::Result<Store> {
    match db.to_str() {
        Some(url) if agentrt_postgres::is_postgres_url(url) => agentrt_postgres::open(url),
        _ => Store::open(db),
    }
}

/// `--db` as an example may print it in a command to copy: a file's
/// absolute path; a URL as given when it holds no password, else without
/// its password (and its options: the operator adds them back).
pub fn shown_db(db: &Path) -> String {
    match db.to_str() {
        Some(url) if agentrt_postgres::is_postgres_url(url) => {
            if holds_password(url) {
                agentrt_postgres::redacted(url)
            } else {
                url.to_owned()
            }
        }
        _ => std::path::absolute(db)
            .unwrap_or_else(|_| db.to_path_buf())
            .display()
            .to_string(),
    }
}

/// Whether a `postgres://` URL carries a password (in its user part or as
/// a `password` option).
fn holds_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, query) = match rest.split_once('?') {
        Some((before, query)) => (before, query),
        None => (rest, ""),
    };
    let user = authority.split('/').next().unwrap_or("");
    let in_user = user
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.contains(':'));
    in_user || query.split('&').any(|pair| pair.starts_with("password="))
}

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

/// The store of an example that takes only `--db PATH`: the database it
/// names, or one in memory; `Err` with the exit code when it should not
/// run (help asked, a bad argument, a database that cannot be opened).
pub fn store_from_args(usage: &str) -> Result<Store, ExitCode> {
    let db = or_usage(db_arg(std::env::args().skip(1)), usage)?;
    let store = match db {
        Some(path) => open_store(&path),
        None => Store::open(":memory:"),
    };
    store.map_err(|e| failure(&e))
}

/// An example's exit code: success, or its error on stderr and failure.
pub fn exit_code<T, E: std::fmt::Display>(result: Result<T, E>) -> ExitCode {
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => failure(&e),
    }
}

fn failure(e: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("error: {}", agentrt::text::sanitize(&e.to_string()));
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postgres_url_is_opened_as_a_server_and_anything_else_as_a_file() {
        // Nothing listens on port 1: the URL is tried as a server (a
        // connection error), never as a file named `postgres:`.
        let url = Path::new("postgres://nobody:s3cret@127.0.0.1:1/agentrt?connect_timeout=2");
        let refused = open_store(url).map(|_| ()).unwrap_err().to_string();
        assert!(!refused.contains("No such file"), "{refused}");
        assert!(!refused.contains("s3cret"), "{refused}");
        assert_eq!(shown_db(url), "postgres://nobody@127.0.0.1:1/agentrt");
        // Without a password, as given (its TLS options kept, to copy).
        let plain = "postgres://ops@db:5432/agentrt?sslmode=verify-full&sslrootcert=/ca.pem";
        assert_eq!(shown_db(Path::new(plain)), plain);
        let in_query = "postgres://ops@db/agentrt?password=s3cret";
        assert!(!shown_db(Path::new(in_query)).contains("s3cret"));

        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("postgres.db");
        assert_eq!(open_store(&file).unwrap().list_runs(0, 0).unwrap().total, 0);
        assert!(file.exists());
        assert_eq!(shown_db(&file), file.display().to_string());
    }
}
