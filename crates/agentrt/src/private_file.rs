//! Reading a file that decides what the software may do (a rules file, a
//! manifest, a key, a shared secret) only when it is private to the
//! current user: a regular file, owned by the effective user, that group
//! and others may not write, and, for a secret, may not read either. The
//! checks are made on the opened handle, not the path, so the file cannot
//! be swapped between the check and the read; the read is capped.
//!
//! On platforms without Unix ownership and modes, only the regular-file
//! check and the cap apply.
//!
//! ```
//! # #[cfg(unix)] {
//! use std::os::unix::fs::PermissionsExt;
//! use agentrt::private_file::{Others, read};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("token");
//! std::fs::write(&path, "t0ken").unwrap();
//! std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
//! assert_eq!(read(&path, Others::MayRead, 1024).unwrap(), b"t0ken");
//! let refused = read(&path, Others::NoAccess, 1024).unwrap_err();
//! assert!(refused.to_string().contains("chmod go-rwx"), "{refused}");
//! # }
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

/// What group and others may do with a file [`read`] accepts (they may
/// never write it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Others {
    /// They may read it: a file that decides, not a secret (rules, a
    /// manifest, a public key).
    MayRead,
    /// They may neither read nor write it: a secret (a token, a private
    /// key, a signing secret).
    NoAccess,
}

/// Why a private file was not read: [`PrivateFileError::path`] and a
/// [`Problem`]. Its text names the path and the problem, and for a mode
/// the `chmod` that fixes it; never the file's content.
#[derive(Debug, thiserror::Error)]
#[error("{}: {}", path.display(), self.detail())]
pub struct PrivateFileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: Problem,
}

impl PrivateFileError {
    /// The problem as a person reads it, without the path in front: for a
    /// mode, what group or others may do and the `chmod` of this file that
    /// fixes it.
    pub fn detail(&self) -> String {
        match &self.problem {
            Problem::Io(e) => e.to_string(),
            Problem::NotRegular => "it is not a regular file".into(),
            Problem::NotOwned { owner, me } => {
                format!("it is owned by uid {owner}, not by the current user (uid {me})")
            }
            Problem::Shared { mode, others } => {
                let (what, fix) = if mode & 0o022 != 0 {
                    ("it is writable by group or others", "go-w")
                } else if mode & 0o044 != 0 {
                    ("it is readable by group or others", "go-rwx")
                } else {
                    ("group or others have rights to it", "go-rwx")
                };
                // A secret is fixed whole, not only its write bits.
                let fix = if *others == Others::NoAccess {
                    "go-rwx"
                } else {
                    fix
                };
                format!(
                    "{what} (mode {mode:04o}); fix it with: chmod {fix} {}",
                    self.path.display()
                )
            }
            Problem::TooBig { cap } => format!("it holds more than {cap} bytes"),
        }
    }
}

/// What is wrong with a file [`read`] refused ([`PrivateFileError::detail`]
/// words it).
#[derive(Debug)]
pub enum Problem {
    /// It could not be opened, inspected or read.
    Io(std::io::Error),
    /// It is not a regular file (a directory, a device, a FIFO).
    NotRegular,
    /// Another user owns it.
    NotOwned {
        /// Its owner's uid.
        owner: u32,
        /// The current effective uid.
        me: u32,
    },
    /// Group or others may do more than `others` allows.
    Shared {
        /// Its permission bits.
        mode: u32,
        /// What they may do.
        others: Others,
    },
    /// It holds more than the cap.
    TooBig {
        /// The most bytes read.
        cap: u64,
    },
}

/// The bytes of `path` (at most `cap`), if it is private to the current
/// user as `others` says.
///
/// # Errors
///
/// [`PrivateFileError`] naming the path and the [`Problem`].
pub fn read(path: &Path, others: Others, cap: u64) -> Result<Vec<u8>, PrivateFileError> {
    let refused = |problem: Problem| PrivateFileError {
        path: path.to_owned(),
        problem,
    };
    let file = std::fs::File::open(path).map_err(|e| refused(Problem::Io(e)))?;
    let meta = file.metadata().map_err(|e| refused(Problem::Io(e)))?;
    if !meta.is_file() {
        return Err(refused(Problem::NotRegular));
    }
    check_owner(&meta, others).map_err(refused)?;
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| refused(Problem::Io(e)))?;
    if bytes.len() as u64 > cap {
        return Err(refused(Problem::TooBig { cap }));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn check_owner(meta: &std::fs::Metadata, others: Others) -> Result<(), Problem> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        return Err(Problem::NotOwned {
            owner: meta.uid(),
            me,
        });
    }
    let mode = meta.mode() & 0o7777;
    let forbidden = match others {
        Others::MayRead => 0o022,
        Others::NoAccess => 0o077,
    };
    if mode & forbidden != 0 {
        return Err(Problem::Shared { mode, others });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_owner(_: &std::fs::Metadata, _: Others) -> Result<(), Problem> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(dir: &Path, mode: u32, bytes: &[u8]) -> PathBuf {
        let path = dir.join(format!("f{mode:o}-{}", bytes.len()));
        std::fs::write(&path, bytes).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    #[test]
    fn a_private_file_is_read_and_a_shared_one_refused_by_what_others_may_do() {
        let dir = tempfile::tempdir().unwrap();
        let owner_only = file(dir.path(), 0o600, b"k");
        let readable = file(dir.path(), 0o644, b"k");
        let writable = file(dir.path(), 0o664, b"k");
        let executable = file(dir.path(), 0o610, b"k");
        assert_eq!(read(&owner_only, Others::NoAccess, 8).unwrap(), b"k");
        assert_eq!(read(&readable, Others::MayRead, 8).unwrap(), b"k");
        assert_eq!(read(&executable, Others::MayRead, 8).unwrap(), b"k");

        let text = |p: &Path, others| read(p, others, 8).unwrap_err().to_string();
        let shared = text(&writable, Others::MayRead);
        assert!(
            shared.contains("writable by group or others (mode 0664)"),
            "{shared}"
        );
        assert!(
            shared.ends_with(&format!("chmod go-w {}", writable.display())),
            "{shared}"
        );
        let secret = text(&readable, Others::NoAccess);
        assert!(
            secret.contains("readable by group or others (mode 0644)"),
            "{secret}"
        );
        assert!(secret.contains("chmod go-rwx"), "{secret}");
        let rights = text(&executable, Others::NoAccess);
        assert!(
            rights.contains("group or others have rights to it"),
            "{rights}"
        );
    }

    #[test]
    fn a_file_over_the_cap_a_directory_and_a_missing_file_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let exact = file(dir.path(), 0o600, b"12345678");
        assert_eq!(read(&exact, Others::NoAccess, 8).unwrap().len(), 8);
        let big = file(dir.path(), 0o600, b"123456789");
        let e = read(&big, Others::NoAccess, 8).unwrap_err();
        assert!(matches!(e.problem, Problem::TooBig { cap: 8 }), "{e}");
        assert_eq!(e.path, big);
        let e = read(dir.path(), Others::MayRead, 8).unwrap_err();
        assert!(matches!(e.problem, Problem::NotRegular), "{e}");
        let missing = dir.path().join("missing");
        let e = read(&missing, Others::MayRead, 8).unwrap_err();
        assert!(matches!(&e.problem, Problem::Io(io) if io.kind() == std::io::ErrorKind::NotFound));
        assert!(
            e.to_string().starts_with(&missing.display().to_string()),
            "{e}"
        );
    }
}
