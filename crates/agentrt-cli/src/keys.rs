//! Ed25519 key files for signed chain heads.
//!
//! A key file is one line: `agentrt-ed25519-private-key:<64 hex digits>`
//! (the 32-byte secret seed) or `agentrt-ed25519-public-key:<64 hex
//! digits>`. `keygen` writes the private key owner-only (0600) and the
//! public key 0644, and never overwrites a file.
//!
//! Key files are read only when owned privately (design §20): a regular
//! file, owned by the current user, not writable by group or others; a
//! private key must not be readable by them either. The checks are made
//! on the opened file, not on the path.

use std::io::Write;
use std::path::{Path, PathBuf};

use agentrt::private_file::Others;
use ed25519_dalek::{SigningKey, VerifyingKey};

use crate::error::CliError;
use crate::hex;

const PRIVATE_TAG: &str = "agentrt-ed25519-private-key:";
const PUBLIC_TAG: &str = "agentrt-ed25519-public-key:";

/// Longest key file read.
const MAX_KEY_FILE: u64 = 4096;

/// The two files `keygen --out PREFIX` writes.
pub fn pair_paths(prefix: &Path) -> (PathBuf, PathBuf) {
    let with = |ext: &str| {
        let mut name = prefix.as_os_str().to_owned();
        name.push(ext);
        PathBuf::from(name)
    };
    (with(".key"), with(".pub"))
}

/// The text of a private key file.
pub fn private_text(key: &SigningKey) -> String {
    format!("{PRIVATE_TAG}{}\n", hex::encode(&key.to_bytes()))
}

/// The text of a public key file.
pub fn public_text(key: &VerifyingKey) -> String {
    format!("{PUBLIC_TAG}{}\n", hex::encode(key.as_bytes()))
}

/// A new key from the operating system's random number generator.
pub fn generate() -> Result<SigningKey, CliError> {
    let mut seed = [0u8; 32];
    getrandom::fill(&mut seed)
        .map_err(|e| CliError::Failed(format!("the system random number generator failed: {e}")))?;
    let key = SigningKey::from_bytes(&seed);
    seed.fill(0);
    Ok(key)
}

/// Writes a new key pair at `PREFIX.key` (0600) and `PREFIX.pub` (0644);
/// refuses if either exists, and leaves nothing behind on failure.
pub fn write_pair(prefix: &Path, key: &SigningKey) -> Result<(PathBuf, PathBuf), CliError> {
    let (private, public) = pair_paths(prefix);
    for path in [&private, &public] {
        if path.symlink_metadata().is_ok() {
            return Err(CliError::Failed(format!(
                "{} exists; agentrt keygen never overwrites a key file: choose another --out",
                shown(path)
            )));
        }
    }
    create_new(&private, 0o600, &private_text(key))?;
    if let Err(e) = create_new(&public, 0o644, &public_text(&key.verifying_key())) {
        let _ = std::fs::remove_file(&private);
        return Err(e);
    }
    Ok((private, public))
}

fn create_new(path: &Path, mode: u32, text: &str) -> Result<(), CliError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut file = options
        .open(path)
        .map_err(|e| CliError::Failed(format!("{}: {e}", shown(path))))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::Failed(format!("{}: {e}", shown(path))))
}

/// Reads the private key at `path` (owned privately, not readable by
/// group or others).
pub fn read_private(path: &Path) -> Result<SigningKey, CliError> {
    let text = match read_owned(path, Others::NoAccess) {
        Ok(text) => text,
        // A public key named as the private one says so first (it may be
        // readable by anyone), whatever its mode.
        Err(refused) => {
            return Err(match read_owned(path, Others::MayRead) {
                Ok(text) if text.trim().starts_with(PUBLIC_TAG) => {
                    parse(path, &text, PRIVATE_TAG, PUBLIC_TAG, "private")
                        .err()
                        .unwrap_or(refused)
                }
                _ => refused,
            });
        }
    };
    let seed = parse(path, &text, PRIVATE_TAG, PUBLIC_TAG, "private")?;
    Ok(SigningKey::from_bytes(&seed))
}

/// Reads the public key at `path` (owned privately).
pub fn read_public(path: &Path) -> Result<VerifyingKey, CliError> {
    let text = read_owned(path, Others::MayRead)?;
    let bytes = parse(path, &text, PUBLIC_TAG, PRIVATE_TAG, "public")?;
    VerifyingKey::from_bytes(&bytes)
        .map_err(|e| CliError::Failed(format!("{} is not a usable public key: {e}", shown(path))))
}

fn parse(
    path: &Path,
    text: &str,
    tag: &str,
    other_tag: &str,
    kind: &str,
) -> Result<[u8; 32], CliError> {
    let line = text.trim();
    if line.starts_with(other_tag) {
        let other = if kind == "public" {
            "private"
        } else {
            "public"
        };
        return Err(CliError::Failed(format!(
            "{} holds a {other} key, not a {kind} key",
            shown(path)
        )));
    }
    line.strip_prefix(tag)
        .and_then(hex::decode::<32>)
        .ok_or_else(|| {
            CliError::Failed(format!(
                "{} is not an agentrt {kind} key file (one line: {tag}<64 hex digits>)",
                shown(path)
            ))
        })
}

/// Reads a small key file that must be owned privately (and, for a
/// private key, not readable by group or others either).
fn read_owned(path: &Path, others: Others) -> Result<String, CliError> {
    let bytes = agentrt::private_file::read(path, others, MAX_KEY_FILE)
        .map_err(|e| CliError::Failed(format!("{}: {}", shown(path), e.detail())))?;
    String::from_utf8(bytes)
        .map_err(|_| CliError::Failed(format!("{} is not UTF-8 text", shown(path))))
}

fn shown(path: &Path) -> String {
    agentrt::text::sanitize(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_files_round_trip_and_are_not_confused() {
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[7u8; 32]);
        let (private, public) = write_pair(&dir.path().join("op"), &key).unwrap();
        assert_eq!(read_private(&private).unwrap().to_bytes(), key.to_bytes());
        assert_eq!(read_public(&public).unwrap(), key.verifying_key());
        assert_eq!(
            std::fs::read_to_string(&public).unwrap(),
            "agentrt-ed25519-public-key:ea4a6c63e29c520abef5507b132ec5f9954776aebebe7b92421eea691446d22c\n"
        );
        let Err(CliError::Failed(m)) = read_public(&private) else {
            panic!()
        };
        assert!(m.contains("holds a private key"), "{m}");
        let Err(CliError::Failed(m)) = write_pair(&dir.path().join("op"), &key) else {
            panic!()
        };
        assert!(m.contains("never overwrites"), "{m}");
    }

    #[cfg(unix)]
    #[test]
    fn key_files_must_be_owned_privately() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let key = SigningKey::from_bytes(&[9u8; 32]);
        let (private, public) = write_pair(&dir.path().join("k"), &key).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&private), 0o600);
        assert_eq!(mode(&public), 0o644);
        let chmod = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        chmod(&private, 0o640);
        let Err(CliError::Failed(m)) = read_private(&private) else {
            panic!()
        };
        assert!(m.contains("readable by group or others"), "{m}");
        chmod(&public, 0o664);
        let Err(CliError::Failed(m)) = read_public(&public) else {
            panic!()
        };
        assert!(m.contains("chmod go-w"), "{m}");
        let Err(CliError::Failed(m)) = read_public(dir.path()) else {
            panic!()
        };
        assert!(m.contains("not a regular file"), "{m}");
    }
}
