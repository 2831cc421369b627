//! What this process remembers between calls, bounded: the request keys
//! it has begun runs for, and the runs it saw settle.

use std::sync::Mutex;

/// The request keys this process has begun runs for, as 64-bit prefixes:
/// a hint that a request is new, which the run's first write group then
/// checks against the index. Bounded: when full it starts over, which
/// only sends calls the long way once more.
#[derive(Default)]
pub(super) struct SeenKeys(Mutex<std::collections::HashSet<u64>>);

/// The most keys [`SeenKeys`] remembers (about 16 MiB).
pub(super) const SEEN_KEYS_MAX: usize = 1 << 20;

impl SeenKeys {
    /// Whether `key` is new to this process (and remembers it).
    pub(super) fn first_time(&self, key: &str) -> bool {
        let Some(prefix) = key.get(..16).and_then(|p| u64::from_str_radix(p, 16).ok()) else {
            return false;
        };
        let Ok(mut seen) = self.0.lock() else {
            return false;
        };
        if seen.len() >= SEEN_KEYS_MAX {
            seen.clear();
        }
        seen.insert(prefix)
    }
}

/// The runs this process saw finish with a known outcome (or none), not
/// yet closed in the index: the next run's first write group closes their
/// rows ([`index::settle`]), and until then rule 7 knows them settled
/// without reading them. Bounded: past [`SETTLED_MAX`] a run is not
/// listed, and rule 7 reads its row like any other open one.
#[derive(Default)]
pub(super) struct SettledRuns(Mutex<Vec<String>>);

/// The most runs [`SettledRuns`] lists.
pub(super) const SETTLED_MAX: usize = 1024;

/// The most rows one run's first write group closes as settled.
pub(super) const SETTLE_MAX: usize = 256;

impl SettledRuns {
    /// Lists `run_id`.
    pub(super) fn push(&self, run_id: &str) {
        if let Ok(mut runs) = self.0.lock()
            && runs.len() < SETTLED_MAX
        {
            runs.push(run_id.to_owned());
        }
    }

    /// Lists `run_ids` again (their write group was not written).
    pub(super) fn put_back(&self, run_ids: Vec<String>) {
        for run_id in run_ids {
            self.push(&run_id);
        }
    }

    /// The runs listed.
    pub(super) fn listed(&self) -> Vec<String> {
        self.0.lock().map(|runs| runs.clone()).unwrap_or_default()
    }

    /// Takes up to `most` runs off the list.
    pub(super) fn take(&self, most: usize) -> Vec<String> {
        let Ok(mut runs) = self.0.lock() else {
            return Vec::new();
        };
        let most = most.min(runs.len());
        runs.drain(..most).collect()
    }
}
