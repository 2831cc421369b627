//! Reading a file that decides what tools may do (a manifest, a rules
//! file) only when it is private to the current user (periphery §0, "owned
//! privately"): a regular file, owned by the current user, with no group or
//! other write bit. The checks are made on the opened handle, not the path,
//! so the file cannot be swapped between the check and the read.

use std::io::Read;
use std::path::Path;

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
    read_owned(path, Access::NoSharedWrite)
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
    read_owned(path, Access::OwnerOnly)
}

/// Who besides the owner may have a file a reader accepts.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// Group and others may read it, not write it.
    NoSharedWrite,
    /// Group and others may neither read nor write it.
    OwnerOnly,
}

fn read_owned(path: &Path, access: Access) -> Result<Vec<u8>, McpError> {
    let file_error = |detail: String| McpError::File {
        path: path.to_owned(),
        detail,
    };
    let mut file = std::fs::File::open(path).map_err(|e| file_error(e.to_string()))?;
    let meta = file.metadata().map_err(|e| file_error(e.to_string()))?;
    let not_private = |detail: String| McpError::NotPrivate {
        path: path.to_owned(),
        detail,
    };
    if !meta.is_file() {
        return Err(not_private("it is not a regular file".into()));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let uid = current_uid();
        if meta.uid() != uid {
            return Err(not_private(format!(
                "it is owned by uid {}, not by the current user (uid {uid})",
                meta.uid()
            )));
        }
        let mode = meta.mode() & 0o7777;
        let (forbidden, who, fix) = match access {
            Access::NoSharedWrite => (0o022, "writable", "go-w"),
            Access::OwnerOnly => (0o077, "readable or writable", "go-rwx"),
        };
        if mode & forbidden != 0 {
            return Err(not_private(format!(
                "it is {who} by group or others (mode {mode:04o}); fix it with: chmod {fix} {}",
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = access;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| file_error(e.to_string()))?;
    Ok(bytes)
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

/// The effective uid of this process.
#[cfg(unix)]
fn current_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
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
