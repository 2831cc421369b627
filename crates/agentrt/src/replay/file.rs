//! The recording file format, file names, and private atomic writes.

use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::{FORMAT, ReplayError, canonical_key_document};
use crate::json::Canonical;
use crate::llm::{ModelRequest, ModelResponse};

/// A recording as written.
#[derive(Serialize)]
struct RecordingOut<'a> {
    format: &'static str,
    model: &'a str,
    request: &'a ModelRequest,
    response: &'a ModelResponse,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw_bytes: Option<&'a str>,
}

/// A recording as read (current or legacy).
#[derive(Deserialize)]
struct RecordingIn {
    #[serde(default)]
    format: Option<String>,
    model: String,
    request: Canonical,
    response: ModelResponse,
    #[serde(default)]
    raw_bytes: Option<String>,
}

/// A recording read back: its key document and the response, `raw`
/// restored.
pub(super) struct Recording {
    /// The canonical `{"model","request"}` the file records.
    pub key_document: Canonical,
    /// The response with `raw` restored.
    pub response: ModelResponse,
}

/// The file name of the `n`-th exchange (from 1) of `key`.
pub(super) fn file_name(key: &str, n: usize) -> String {
    if n <= 1 {
        format!("{key}.json")
    } else {
        format!("{key}.{n}.json")
    }
}

/// The key and ordinal of a recording file name; `None` for other names.
pub(super) fn parse_file_name(name: &str) -> Option<(&str, usize)> {
    let stem = name.strip_suffix(".json")?;
    let (key, n) = match stem.split_once('.') {
        None => (stem, 1),
        Some((key, n)) => (key, parse_ordinal(n)?),
    };
    is_key(key).then_some((key, n))
}

/// An ordinal of a `<key>.<n>.json` name: decimal, no leading zero, ≥ 2.
fn parse_ordinal(text: &str) -> Option<usize> {
    if text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|n| *n >= 2)
}

/// 64 lowercase hex characters.
fn is_key(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The pretty JSON of one exchange.
pub(super) fn encode(
    model: &str,
    request: &ModelRequest,
    response: &ModelResponse,
) -> Result<Vec<u8>, ReplayError> {
    let without_raw = ModelResponse {
        raw: None,
        ..response.clone()
    };
    let out = RecordingOut {
        format: FORMAT,
        model,
        request,
        response: &without_raw,
        raw_bytes: response.raw.as_deref(),
    };
    let mut bytes = serde_json::to_vec_pretty(&out).map_err(|e| ReplayError::Encode {
        detail: e.to_string(),
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Reads the recording at `path`, checking its format and that it records
/// `key`.
pub(super) fn read(path: &Path, key: &str) -> Result<Recording, ReplayError> {
    let bytes = fs::read(path).map_err(|e| ReplayError::io("read", path, &e))?;
    let recording = decode(path, &bytes)?;
    if recording.key_document.hash() != key {
        return Err(ReplayError::Mismatch {
            path: path.to_owned(),
            key: key.to_owned(),
        });
    }
    Ok(recording)
}

/// Decodes a recording file's bytes.
pub(super) fn decode(path: &Path, bytes: &[u8]) -> Result<Recording, ReplayError> {
    let file: RecordingIn = serde_json::from_slice(bytes).map_err(|e| ReplayError::Corrupt {
        path: path.to_owned(),
        detail: e.to_string(),
    })?;
    if let Some(format) = file.format.filter(|f| f != FORMAT) {
        return Err(ReplayError::UnknownFormat {
            path: path.to_owned(),
            format,
        });
    }
    let key_document = canonical_key_document(&file.model, &file.request)?;
    let mut response = file.response;
    if file.raw_bytes.is_some() {
        response.raw = file.raw_bytes;
    }
    Ok(Recording {
        key_document,
        response,
    })
}

/// Creates `dir` (and missing parents) owner-only when it does not exist.
pub(super) fn create_private_dir(dir: &Path) -> Result<(), ReplayError> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| ReplayError::io("create", dir, &e))?;
    set_mode(dir, 0o700)
}

/// Sets the permission bits of `path` (Unix only; a no-op elsewhere).
fn set_mode(path: &Path, mode: u32) -> Result<(), ReplayError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs::set_permissions(path, fs::Permissions::from_mode(mode))
            .map_err(|e| ReplayError::io("set permissions of", path, &e))?;
    }
    #[cfg(not(unix))]
    let _ = (path, mode);
    Ok(())
}

/// Distinguishes the temporary files of one process.
static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Writes `bytes` to `dir/name` atomically: a new owner-only temporary file
/// in `dir`, synced, then renamed over `name`; the directory is synced after
/// the rename where the platform allows it.
pub(super) fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ReplayError> {
    let seq = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let target = dir.join(name);
    let result = write_new(&temp, bytes).and_then(|()| {
        fs::rename(&temp, &target).map_err(|e| ReplayError::io("rename into", &target, &e))
    });
    if result.is_err() {
        // Best effort: the temporary file is ours and useless now.
        let _ = fs::remove_file(&temp);
    }
    result?;
    sync_dir(dir);
    Ok(())
}

/// Creates `path` (it must not exist) owner-only, writes and syncs it.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), ReplayError> {
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options
        .open(path)
        .map_err(|e| ReplayError::io("create", path, &e))?;
    set_mode(path, 0o600)?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| ReplayError::io("write", path, &e))
}

/// Syncs a directory so a rename in it is durable (best effort; Unix only).
fn sync_dir(dir: &Path) {
    #[cfg(unix)]
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
    #[cfg(not(unix))]
    let _ = dir;
}

/// Deletes the `<key>.<n>.json` files (n ≥ 2) of `key` in `dir`.
pub(super) fn remove_later_exchanges(dir: &Path, key: &str) -> Result<(), ReplayError> {
    for name in recording_names(dir)? {
        if matches!(parse_file_name(&name), Some((k, n)) if k == key && n >= 2) {
            let path = dir.join(&name);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(ReplayError::io("remove", path, &e)),
            }
        }
    }
    Ok(())
}

/// The names of the recording files in `dir`, sorted; none when `dir` does
/// not exist.
pub(super) fn recording_names(dir: &Path) -> Result<Vec<String>, ReplayError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ReplayError::io("list", dir, &e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ReplayError::io("list", dir, &e))?;
        if let Ok(name) = entry.file_name().into_string()
            && parse_file_name(&name).is_some()
        {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_round_trip_and_others_are_ignored() {
        let key = "ab".repeat(32);
        assert_eq!(file_name(&key, 1), format!("{key}.json"));
        assert_eq!(file_name(&key, 3), format!("{key}.3.json"));
        assert_eq!(
            parse_file_name(&file_name(&key, 1)),
            Some((key.as_str(), 1))
        );
        assert_eq!(
            parse_file_name(&file_name(&key, 12)),
            Some((key.as_str(), 12))
        );
        for bad in [
            format!("{key}.1.json"),
            format!("{key}.02.json"),
            format!("{key}.x.json"),
            format!("{key}.json.tmp"),
            format!(".{key}.json.1.0.tmp"),
            "AB".repeat(32) + ".json",
            "ab.json".to_owned(),
        ] {
            assert_eq!(parse_file_name(&bad), None, "{bad}");
        }
    }
}
