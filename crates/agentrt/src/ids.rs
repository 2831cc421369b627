//! Identifiers: random 128-bit lowercase hex by default, injectable for
//! deterministic tests.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A source of fresh identifiers (run, step, approval and model-call ids).
pub type IdSource = Arc<dyn Fn() -> String + Send + Sync>;

/// 128 random bits as 32 lowercase hex characters.
///
/// The bits come from BLAKE3 over process-seeded randomness (the standard
/// library's per-process hash keys), the time, the process id and a counter,
/// so ids never repeat within a process and are unpredictable across them.
pub fn random_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = blake3::Hasher::new();
    let seed = RandomState::new().build_hasher().finish();
    hasher.update(&seed.to_le_bytes());
    let mut h2 = RandomState::new().build_hasher();
    h2.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.update(&h2.finish().to_le_bytes());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    hasher.update(&nanos.to_le_bytes());
    hasher.update(&std::process::id().to_le_bytes());
    hasher.update(&COUNTER.fetch_add(1, Ordering::Relaxed).to_le_bytes());
    let hex = hasher.finalize().to_hex();
    hex[..32].to_owned()
}

/// The default [`IdSource`]: [`random_id`].
pub fn random_ids() -> IdSource {
    Arc::new(random_id)
}

/// Deterministic ids for tests: `<prefix>1`, `<prefix>2`, …
///
/// ```
/// let ids = agentrt::sequential_ids("id-");
/// assert_eq!(ids(), "id-1");
/// assert_eq!(ids(), "id-2");
/// ```
pub fn sequential_ids(prefix: &str) -> IdSource {
    let prefix = prefix.to_owned();
    let next = AtomicU64::new(1);
    Arc::new(move || format!("{prefix}{}", next.fetch_add(1, Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ids_are_32_hex_and_distinct() {
        let a = random_id();
        let b = random_id();
        assert_eq!(a.len(), 32);
        assert!(
            a.bytes()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(a, b);
    }
}
