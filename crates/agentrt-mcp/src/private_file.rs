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
        if mode & 0o022 != 0 {
            return Err(not_private(format!(
                "it is writable by group or others (mode {mode:04o}); fix it with: chmod go-w {}",
                path.display()
            )));
        }
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| file_error(e.to_string()))?;
    Ok(bytes)
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
