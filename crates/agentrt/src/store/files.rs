//! The file rules: who may own and write the database and its sidecars.
//!
//! The database file is the trust boundary (whoever can write it can
//! approve anything), so a file that group or others can write is refused,
//! and a writer tightens a file it owns that others can read.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The `-wal` and `-shm` sidecars of a database path.
pub(crate) fn sidecars(db: &Path) -> [PathBuf; 2] {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    [PathBuf::from(wal), PathBuf::from(shm)]
}

/// Creates a missing database file owner-only (0600), exclusively, so a
/// concurrent creator is not clobbered.
#[cfg(unix)]
pub(crate) fn create_private(path: &Path) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

#[cfg(not(unix))]
pub(crate) fn create_private(path: &Path) -> Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Checks the database file (already known to exist) and its sidecars.
///
/// Every rule is checked before anything is changed, so a refused file set
/// is left as it was. Then `writer` tightens the files this process owns
/// that others can read; a read-only opener never changes anything.
#[cfg(unix)]
pub(crate) fn check(db: &Path, follow_db_symlink: bool, writer: bool) -> Result<()> {
    use std::os::unix::fs::MetadataExt;

    let meta = if follow_db_symlink {
        std::fs::metadata(db)
    } else {
        std::fs::symlink_metadata(db)
    }
    .map_err(|e| Error::io(db, e))?;
    if meta.file_type().is_symlink() {
        return Err(Error::Symlink { path: db.into() });
    }
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular { path: db.into() });
    }
    let me = current_uid();
    let db_owner = meta.uid();
    refuse_writable(db, meta.mode())?;
    let mut tighten: Vec<(PathBuf, bool)> = Vec::new();
    if needs_tightening(meta.mode(), db_owner, me, writer) {
        tighten.push((db.to_owned(), false));
    }

    for sidecar in sidecars(db) {
        let side = match std::fs::symlink_metadata(&sidecar) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(sidecar, e)),
        };
        if !side.file_type().is_file() {
            return Err(Error::NotRegular { path: sidecar });
        }
        if side.uid() != db_owner {
            return Err(Error::InsecureMode {
                mode: side.mode() & 0o7777,
                reason: format!(
                    "is owned by uid {}, not by the database's owner (uid {db_owner})",
                    side.uid()
                ),
                path: sidecar,
            });
        }
        refuse_writable(&sidecar, side.mode())?;
        if needs_tightening(side.mode(), side.uid(), me, writer) {
            tighten.push((sidecar, true));
        }
    }

    for (path, is_sidecar) in tighten {
        use std::os::unix::fs::PermissionsExt;
        match std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            Ok(()) => {}
            // SQLite removes the sidecars when the last connection closes,
            // which another process may do at any moment.
            Err(e) if is_sidecar && e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
    }
    Ok(())
}

/// Refuses a file that group or others can write.
#[cfg(unix)]
fn refuse_writable(path: &Path, mode: u32) -> Result<()> {
    let bits = mode & 0o7777;
    if bits & 0o022 != 0 {
        return Err(Error::InsecureMode {
            path: path.into(),
            mode: bits,
            reason: "is writable by group or others".into(),
        });
    }
    Ok(())
}

/// A writer tightens a file it owns that group or others can read.
#[cfg(unix)]
fn needs_tightening(mode: u32, owner: u32, me: u32, writer: bool) -> bool {
    writer && owner == me && mode & 0o077 != 0
}

/// This process's effective uid (`u32::MAX` if it cannot be learnt, which
/// matches no file, so nothing is tightened).
#[cfg(unix)]
fn current_uid() -> u32 {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // On Linux the process's own /proc directory is owned by its effective
    // uid. Elsewhere, the owner of a file this process creates: created
    // exclusively (never through a planted link) under an unguessable name.
    if let Ok(m) = std::fs::metadata("/proc/self") {
        return m.uid();
    }
    let probe = std::env::temp_dir().join(format!(
        ".agentrt-uid-{}-{}",
        std::process::id(),
        crate::ids::random_id()
    ));
    let Ok(file) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
    else {
        return u32::MAX;
    };
    let uid = file.metadata().map(|m| m.uid()).unwrap_or(u32::MAX);
    drop(file);
    let _ = std::fs::remove_file(&probe);
    uid
}

#[cfg(not(unix))]
pub(crate) fn check(db: &Path, follow_db_symlink: bool, _writer: bool) -> Result<()> {
    let meta = if follow_db_symlink {
        std::fs::metadata(db)
    } else {
        std::fs::symlink_metadata(db)
    }
    .map_err(|e| Error::io(db, e))?;
    if meta.file_type().is_symlink() {
        return Err(Error::Symlink { path: db.into() });
    }
    if !meta.file_type().is_file() {
        return Err(Error::NotRegular { path: db.into() });
    }
    Ok(())
}
