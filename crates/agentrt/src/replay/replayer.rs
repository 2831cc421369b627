//! [`Replayer`]: a model that serves recorded exchanges.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use super::{NotRecorded, ReplayError, file, key_document};
use crate::json::Canonical;
use crate::llm::{Model, ModelError, ModelRequest, ModelResponse};
use crate::model::BoxFuture;

/// Serves the exchanges a [`Recorder`](super::Recorder) wrote: the n-th
/// identical request (counted over this replayer's lifetime) gets the n-th
/// recorded response, byte-identical, `raw` included.
///
/// A request with no recording, or asked more often than recorded, fails
/// with [`NotRecorded`] (through [`Model::generate`] as
/// [`ModelError::Other`] with its text; [`Replayer::generate_replayed`]
/// returns it typed, and [`Replayer::misses`] keeps every one).
///
/// ```
/// use agentrt::replay::{ReplayError, Replayer};
/// use agentrt::{llm::ContentBlock, llm::Message, ModelRequest, llm::Role};
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let replayer = Replayer::new("scripted", "/nonexistent/recordings");
/// let request = ModelRequest {
///     system: String::new(),
///     messages: vec![Message { role: Role::User, content: vec![ContentBlock::text("hi")] }],
///     tools: vec![],
///     max_output_tokens: None,
/// };
/// let Err(ReplayError::NotRecorded(miss)) = replayer.generate_replayed(&request).await else {
///     panic!("an empty directory has no recordings");
/// };
/// assert_eq!((miss.asked, miss.recorded, miss.nearest), (1, 0, None));
/// assert_eq!(replayer.misses().len(), 1);
/// # });
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct Replayer {
    model_name: String,
    dir: PathBuf,
    state: Mutex<State>,
}

/// What a replayer has served.
#[derive(Debug, Default)]
struct State {
    /// Asks per key in this replayer's lifetime.
    asked: HashMap<String, usize>,
    /// Every [`NotRecorded`] returned, in order.
    misses: Vec<NotRecorded>,
}

impl Replayer {
    /// A replayer for recordings of `model_name` in `dir`. Nothing is read
    /// until a request arrives.
    pub fn new(model_name: impl Into<String>, dir: impl AsRef<Path>) -> Replayer {
        Replayer {
            model_name: model_name.into(),
            dir: dir.as_ref().to_owned(),
            state: Mutex::new(State::default()),
        }
    }

    /// The recording directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Every [`NotRecorded`] this replayer returned, in order.
    #[must_use]
    pub fn misses(&self) -> Vec<NotRecorded> {
        self.lock().misses.clone()
    }

    /// The recorded response for the next ask of `request`.
    ///
    /// # Errors
    ///
    /// [`ReplayError::NotRecorded`] when there is no recording for this ask;
    /// [`ReplayError::Io`], [`ReplayError::Corrupt`],
    /// [`ReplayError::UnknownFormat`] or [`ReplayError::Mismatch`] when the
    /// recording cannot be served; [`ReplayError::Key`] when the request
    /// cannot be keyed.
    pub async fn generate_replayed(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ReplayError> {
        self.replay(request)
    }

    /// [`Replayer::generate_replayed`], synchronously.
    ///
    /// # Errors
    ///
    /// As [`Replayer::generate_replayed`].
    pub fn replay(&self, request: &ModelRequest) -> Result<ModelResponse, ReplayError> {
        let document = key_document(&self.model_name, request)?;
        let key = document.hash();
        let asked = self.count_ask(&key);
        let path = self.dir.join(file::file_name(&key, asked));
        if path.is_file() {
            return file::read(&path, &key).map(|r| r.response);
        }
        let miss = self.not_recorded(&document, key, asked);
        self.lock().misses.push(miss.clone());
        Err(ReplayError::NotRecorded(miss))
    }

    /// Counts one more ask of `key` and returns the count.
    fn count_ask(&self, key: &str) -> usize {
        let mut state = self.lock();
        let asked = state.asked.entry(key.to_owned()).or_insert(0);
        *asked += 1;
        *asked
    }

    /// The [`NotRecorded`] of an ask with no file: the key's recorded
    /// count and, when it has none, the nearest recorded key.
    fn not_recorded(&self, document: &Canonical, key: String, asked: usize) -> NotRecorded {
        let recorded = self.recorded_count(&key);
        let nearest = if recorded == 0 {
            self.nearest(document)
        } else {
            None
        };
        NotRecorded {
            model: self.model_name.clone(),
            key,
            asked,
            recorded,
            nearest,
        }
    }

    /// How many consecutive exchanges (`<key>.json`, `<key>.2.json`, …)
    /// are recorded for `key`.
    fn recorded_count(&self, key: &str) -> usize {
        let mut n = 0;
        while self.dir.join(file::file_name(key, n + 1)).is_file() {
            n += 1;
        }
        n
    }

    /// The recorded key whose key document shares the longest common byte
    /// prefix with `document` (ties: the smaller key). Best effort: files
    /// that do not decode are skipped, and an unreadable directory has none.
    fn nearest(&self, document: &Canonical) -> Option<String> {
        let mut best: Option<(usize, String)> = None;
        for name in file::recording_names(&self.dir).unwrap_or_default() {
            let Some((key, 1)) = file::parse_file_name(&name) else {
                continue;
            };
            let path = self.dir.join(&name);
            let Ok(recording) = std::fs::read(&path)
                .map_err(|e| ReplayError::io("read", &path, &e))
                .and_then(|bytes| file::decode(&path, &bytes))
            else {
                continue;
            };
            let shared = common_prefix(document.as_bytes(), recording.key_document.as_bytes());
            // Names are sorted, so the first of equal prefixes is the smaller key.
            if best.as_ref().is_none_or(|(len, _)| shared > *len) {
                best = Some((shared, key.to_owned()));
            }
        }
        best.map(|(_, key)| key)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Model for Replayer {
    fn name(&self) -> &str {
        &self.model_name
    }

    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move { self.replay(request).map_err(ReplayError::into_model_error) })
    }
}

#[cfg(test)]
mod tests {
    use super::common_prefix;

    #[test]
    fn common_prefix_counts_equal_leading_bytes() {
        assert_eq!(common_prefix(b"abcd", b"abxd"), 2);
        assert_eq!(common_prefix(b"ab", b"abc"), 2);
        assert_eq!(common_prefix(b"", b"abc"), 0);
    }
}
