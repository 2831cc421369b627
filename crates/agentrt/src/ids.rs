//! Identifiers: 128-bit lowercase hex, increasing within a process by
//! default (random otherwise), injectable for deterministic tests.

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

/// An identifier that sorts after every one this process made before it:
/// 32 lowercase hex characters, the first 16 a count of microseconds since
/// the Unix epoch (raised by one when the clock has not moved on, so it
/// always increases within the process), the other 16 random (from
/// [`random_id`]).
///
/// The store keys runs, steps, approvals and model calls by their id. A
/// random key lands anywhere in its b-tree, and a page in the middle that
/// fills is split with its neighbours, several pages written for one row;
/// an increasing key lands at the right edge, one page
/// (docs/performance.md, issue 15). Use [`random_id`] where the id must
/// be unpredictable as a whole.
///
/// ```
/// let a = agentrt::ids::ordered_id();
/// let b = agentrt::ids::ordered_id();
/// assert_eq!(a.len(), 32);
/// assert!(a < b);
/// ```
pub fn ordered_id() -> String {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    let mut last = LAST.load(Ordering::Relaxed);
    let time = loop {
        let next = now.max(last.saturating_add(1));
        match LAST.compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    let mut id = format!("{time:016x}");
    id.push_str(&random_id()[..16]);
    id
}

/// The default [`IdSource`] of a gate: [`ordered_id`].
pub fn ordered_ids() -> IdSource {
    Arc::new(ordered_id)
}

/// An [`IdSource`] of [`random_id`]s.
pub fn random_ids() -> IdSource {
    Arc::new(random_id)
}

/// Deterministic ids for tests: `<prefix>1`, `<prefix>2`, …
///
/// ```
/// let ids = agentrt::ids::sequential_ids("id-");
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

    #[test]
    fn ordered_ids_are_32_hex_and_increase() {
        let ids: Vec<String> = (0..1000).map(|_| ordered_id()).collect();
        for id in &ids {
            assert_eq!(id.len(), 32);
            assert!(
                id.bytes()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
            );
        }
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "each sorts after the one before"
        );
        // The second half is random: not the same for two ids made together.
        assert_ne!(ids[0][16..], ids[1][16..]);
    }
}
