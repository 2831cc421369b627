//! Reading a file that decides what tools may do (a manifest, a rules
//! file) only when it is private to the current user (design §20, "owned
//! privately"): a regular file, owned by the current user, with no group or
//! other write bit. The checks are made on the opened handle, not the path,
//! so the file cannot be swapped between the check and the read.

use std::path::Path;

use agentrt::private_file::{Others, Problem};

use crate::error::McpError;

/// The bytes of `path`, if it is owned privately.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("rules.json");
/// std::fs::write(&path, "{}").unwrap();
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
/// assert_eq!(agentrt_mcp::read_private(&path).unwrap(), b"{}");
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o664)).unwrap();
/// let refused = agentrt_mcp::read_private(&path).unwrap_err().to_string();
/// assert!(refused.contains("chmod go-w"), "{refused}");
/// # }
/// ```
pub fn read_private(path: &Path) -> Result<Vec<u8>, McpError> {
    read_owned(path, Others::MayRead)
}

/// The bytes of `path`, if it is a secret: as [`read_private`], and
/// neither group nor others may read it either (a bearer token, a key).
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt;
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("token");
/// std::fs::write(&path, "t0ken").unwrap();
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
/// assert_eq!(agentrt_mcp::read_secret(&path).unwrap(), b"t0ken");
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
/// let refused = agentrt_mcp::read_secret(&path).unwrap_err().to_string();
/// assert!(refused.contains("chmod go-rwx"), "{refused}");
/// # }
/// ```
pub fn read_secret(path: &Path) -> Result<Vec<u8>, McpError> {
    read_owned(path, Others::NoAccess)
}

/// The most bytes a rules file, a manifest or a token may hold.
const MAX_PRIVATE_FILE: u64 = 16 << 20;

/// The core's private read, its refusals as this crate's errors: a file
/// that could not be read (or is too big) is [`McpError::File`], one that
/// is not private [`McpError::NotPrivate`].
fn read_owned(path: &Path, others: Others) -> Result<Vec<u8>, McpError> {
    agentrt::private_file::read(path, others, MAX_PRIVATE_FILE).map_err(|e| {
        let detail = e.detail();
        match e.problem {
            Problem::Io(_) | Problem::TooBig { .. } => McpError::File {
                path: e.path,
                detail,
            },
            Problem::NotRegular | Problem::NotOwned { .. } | Problem::Shared { .. } => {
                McpError::NotPrivate {
                    path: e.path,
                    detail,
                }
            }
        }
    })
}

/// Writes `bytes` to `path` as a file private to its owner (0600 on
/// Unix): written to a new file beside it, flushed to disk, then renamed
/// over `path`, so a reader sees the old file or the whole new one.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("fs.manifest.json");
/// agentrt_mcp::write_private(&path, b"{}\n")?;
/// assert_eq!(agentrt_mcp::read_private(&path)?, b"{}\n");
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<(), McpError> {
    use std::io::Write;

    let file_error = |detail: String| McpError::File {
        path: path.to_owned(),
        detail,
    };
    let name = path
        .file_name()
        .ok_or_else(|| file_error("names no file".into()))?;
    let mut temporary = name.to_owned();
    temporary.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let renamed = written.and_then(|()| std::fs::rename(&temporary, path));
    if let Err(e) = renamed {
        let _ = std::fs::remove_file(&temporary);
        return Err(file_error(e.to_string()));
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(mode: u32) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(&path, "{}").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        (dir, path)
    }

    #[test]
    fn a_private_file_is_read_and_a_shared_one_refused() {
        let (_d, path) = file(0o644);
        assert_eq!(read_private(&path).unwrap(), b"{}");
        for mode in [0o664, 0o646, 0o666] {
            let (_d, path) = file(mode);
            let e = read_private(&path).unwrap_err();
            assert!(matches!(e, McpError::NotPrivate { .. }), "{mode:o}: {e}");
            assert!(e.to_string().contains(&format!("{mode:04o}")), "{e}");
        }
    }

    #[test]
    fn a_secret_is_read_only_when_group_and_others_have_no_access() {
        let (_d, path) = file(0o600);
        assert_eq!(read_secret(&path).unwrap(), b"{}");
        for mode in [0o640, 0o604, 0o620, 0o610, 0o644] {
            let (_d, path) = file(mode);
            let e = read_secret(&path).unwrap_err();
            assert!(matches!(e, McpError::NotPrivate { .. }), "{mode:o}: {e}");
            assert!(e.to_string().contains("chmod go-rwx"), "{e}");
        }
    }

    #[test]
    fn a_written_file_is_private_and_replaces_the_old_one_whole() {
        let (dir, path) = file(0o644);
        write_private(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left");
        assert!(write_private(&dir.path().join("none/x"), b"x").is_err());
    }

    #[test]
    fn a_directory_or_a_missing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_private(dir.path()),
            Err(McpError::NotPrivate { .. })
        ));
        assert!(matches!(
            read_private(&dir.path().join("none")),
            Err(McpError::File { .. })
        ));
    }
}
