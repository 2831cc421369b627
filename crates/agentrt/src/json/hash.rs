//! Content hashes of canonical JSON.

/// BLAKE3-256 of `bytes`, as 64 lowercase hex characters.
///
/// ```
/// let h = agentrt::json::hash_hex(b"{}");
/// assert_eq!(h.len(), 64);
/// assert!(h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')));
/// ```
#[must_use]
pub fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}
