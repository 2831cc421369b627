//! The reach check (design §29): a stdio server started with an
//! argument that names one of the proxy's own files — the configuration,
//! the database, a manifest — or a directory above one, could rewrite
//! what decides its own calls. Best effort: it reads spellings, so it is a
//! guard against a mistake, not a boundary (the servers run as the same
//! user).

use std::path::{Component, Path, PathBuf};

use agentrt_mcp::Endpoint;

use crate::config::{Config, ServerConfig};
use crate::error::ProxyError;

/// What a server's arguments must not reach.
#[derive(Debug, Default)]
pub struct Protected {
    /// Existing files and every directory above them, by identity, with
    /// the path that named them.
    existing: Vec<(FileId, PathBuf)>,
    /// Protected files not created yet, by resolved path.
    missing: Vec<PathBuf>,
}

/// A file's identity: device and inode on Unix, the resolved path
/// elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileId(#[cfg(unix)] (u64, u64), #[cfg(not(unix))] PathBuf);

fn file_id(path: &Path) -> Option<FileId> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(path).ok()?;
        Some(FileId((meta.dev(), meta.ino())))
    }
    #[cfg(not(unix))]
    {
        std::fs::canonicalize(path).ok().map(FileId)
    }
}

/// `path` made absolute against `cwd`, with `.` and `..` folded away
/// lexically (as written, before symlinks are resolved).
fn absolute(cwd: &Path, path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_owned()
    } else {
        cwd.join(path)
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// `path` with symlinks resolved; for a missing file, its directory
/// resolved and its name kept.
fn resolved(path: &Path) -> Option<PathBuf> {
    if let Ok(p) = std::fs::canonicalize(path) {
        return Some(p);
    }
    let name = path.file_name()?;
    std::fs::canonicalize(path.parent()?)
        .ok()
        .map(|dir| dir.join(name))
}

impl Protected {
    /// The configuration file, the database and each manifest of `config`,
    /// and every directory above each, as written and resolved.
    pub fn of(config: &Config, cwd: &Path) -> Protected {
        // A database on a server is no file a server's arguments reach.
        let files = [Some(config.path.as_path()), config.database.file()]
            .into_iter()
            .flatten()
            .chain(config.servers.iter().map(|s| s.manifest.as_path()));
        Protected::files(files, cwd)
    }

    /// `files` and every directory above each, as written and resolved.
    pub fn files<'a>(files: impl IntoIterator<Item = &'a Path>, cwd: &Path) -> Protected {
        let mut protected = Protected::default();
        for file in files {
            let written = absolute(cwd, file);
            let spellings = [Some(written.clone()), resolved(&written)];
            for spelling in spellings.into_iter().flatten() {
                if file_id(&spelling).is_none() && !protected.missing.contains(&spelling) {
                    protected.missing.push(spelling.clone());
                }
                for at in spelling.ancestors() {
                    if let Some(id) = file_id(at)
                        && !protected.existing.iter().any(|(known, _)| *known == id)
                    {
                        protected.existing.push((id, at.to_owned()));
                    }
                }
            }
        }
        protected
    }

    /// The protected file or directory `candidate` reaches, if any.
    fn hit(&self, candidate: &Path) -> Option<&Path> {
        if let Some(id) = file_id(candidate) {
            return self
                .existing
                .iter()
                .find(|(known, _)| *known == id)
                .map(|(_, path)| path.as_path());
        }
        let spellings = [Some(candidate.to_owned()), resolved(candidate)];
        spellings
            .into_iter()
            .flatten()
            .find_map(|s| self.missing.iter().find(|m| **m == s))
            .map(PathBuf::as_path)
    }
}

/// The paths an argument may name: itself; what follows its first `=`;
/// what follows its first `:`; a short flag's value (`-xVALUE`); the path
/// of a `file://` URL among those; `~` expanded.
pub fn candidates(argument: &str, home: Option<&Path>) -> Vec<PathBuf> {
    let mut texts: Vec<&str> = vec![argument];
    if let Some((_, after)) = argument.split_once('=') {
        texts.push(after);
    }
    if let Some((_, after)) = argument.split_once(':') {
        texts.push(after);
    }
    if argument.starts_with('-') && !argument.starts_with("--") {
        texts.push(argument.get(2..).unwrap_or(""));
    }
    let urls: Vec<&str> = texts
        .iter()
        .filter_map(|t| t.strip_prefix("file://"))
        .map(|rest| {
            // `file://host/path` names `/path`; `file:///path` names `/path`.
            rest.find('/').map_or("", |i| &rest[i..])
        })
        .collect();
    texts.extend(urls);
    let mut out: Vec<PathBuf> = Vec::new();
    for text in texts {
        if text.is_empty() {
            continue;
        }
        let path = match (text.strip_prefix('~'), home) {
            (Some(""), Some(home)) => home.to_owned(),
            (Some(rest), Some(home)) if rest.starts_with('/') => {
                home.join(rest.trim_start_matches('/'))
            }
            _ => PathBuf::from(text),
        };
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// Refuses a stdio server (unless it skips the check) whose arguments
/// after the program reach a protected file.
pub fn check_server(
    server: &ServerConfig,
    protected: &Protected,
    cwd: &Path,
    home: Option<&Path>,
) -> Result<(), ProxyError> {
    let Endpoint::Command(argv) = &server.server.endpoint else {
        return Ok(());
    };
    if server.skip_path_check {
        return Ok(());
    }
    for argument in argv.iter().skip(1) {
        for candidate in candidates(argument, home) {
            if let Some(file) = protected.hit(&absolute(cwd, &candidate)) {
                return Err(ProxyError::Reach {
                    server: server.server.name.clone(),
                    argument: argument.clone(),
                    file: file.to_owned(),
                });
            }
        }
    }
    Ok(())
}

/// [`check_server`] for every server of `config`, from this process's
/// working directory and home.
pub fn check_reach(config: &Config) -> Result<(), ProxyError> {
    let cwd = std::env::current_dir().map_err(|e| ProxyError::Config {
        path: config.path.clone(),
        detail: format!("the working directory: {e}"),
    })?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let protected = Protected::of(config, &cwd);
    for server in &config.servers {
        check_server(server, &protected, &cwd, home.as_deref())?;
    }
    Ok(())
}

/// Refuses a configuration whose stdio servers reach one of `files`
/// (files of the proxy's own beyond the configuration's, such as the HTTP
/// door's token), by the same rule as [`check_reach`].
pub fn check_extra_files(config: &Config, files: &[PathBuf]) -> Result<(), ProxyError> {
    let cwd = std::env::current_dir().map_err(|e| ProxyError::Config {
        path: config.path.clone(),
        detail: format!("the working directory: {e}"),
    })?;
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let protected = Protected::files(files.iter().map(PathBuf::as_path), &cwd);
    for server in &config.servers {
        check_server(server, &protected, &cwd, home.as_deref())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn an_argument_yields_itself_and_its_values() {
        let home = Some(Path::new("/home/u"));
        assert_eq!(candidates("/srv/data", home), paths(&["/srv/data"]));
        assert_eq!(
            candidates("--root=/srv", home),
            paths(&["--root=/srv", "/srv"])
        );
        assert_eq!(candidates("-d/srv", home), paths(&["-d/srv", "/srv"]));
        assert_eq!(
            candidates("db:~/x.db", home),
            paths(&["db:~/x.db", "/home/u/x.db"])
        );
        assert_eq!(
            candidates("--url=file:///var/db", home),
            // The URL's path, /var/db, is the same path as ///var/db.
            paths(&["--url=file:///var/db", "file:///var/db", "/var/db"])
        );
        assert_eq!(
            candidates("url=file://host/srv", home),
            paths(&[
                "url=file://host/srv",
                "file://host/srv",
                "//host/srv",
                "/srv"
            ])
        );
        assert_eq!(candidates("~", home), paths(&["/home/u"]));
        assert_eq!(candidates("~", None), paths(&["~"]));
        assert_eq!(candidates("-y", home), paths(&["-y"]));
    }

    #[test]
    fn paths_fold_dots_as_written() {
        assert_eq!(
            absolute(Path::new("/w/d"), Path::new("../x/./y")),
            Path::new("/w/x/y")
        );
        assert_eq!(
            absolute(Path::new("/w"), Path::new("/a/b")),
            Path::new("/a/b")
        );
    }
}
