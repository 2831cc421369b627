//! [`Recorder`]: a model wrapper that writes each successful exchange.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::{ReplayError, file, key};
use crate::llm::{Model, ModelError, ModelRequest, ModelResponse};
use crate::model::BoxFuture;

/// Passes each request to `inner` and records each successful exchange in a
/// directory, in the format of the [module docs](super).
///
/// Failed calls are returned unchanged and not recorded. The file system
/// work (a few small synced writes per exchange) is done on the calling
/// task.
///
/// ```
/// use agentrt::replay::{Recorder, Scripted};
/// use std::sync::Arc;
/// let dir = std::env::temp_dir().join(format!("agentrt-recorder-doc-{}", std::process::id()));
/// let recorder = Recorder::new(Arc::new(Scripted::new([])), &dir)?;
/// assert_eq!(recorder.dir(), dir.as_path());
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), agentrt::replay::ReplayError>(())
/// ```
pub struct Recorder {
    inner: Arc<dyn Model>,
    dir: PathBuf,
    /// Exchanges recorded per key in this recorder's lifetime.
    recorded: Mutex<HashMap<String, usize>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("model", &self.inner.name())
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder writing into `dir`, which is created owner-only (`0700`)
    /// if it does not exist.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Io`] when the directory cannot be created.
    pub fn new(inner: Arc<dyn Model>, dir: impl AsRef<Path>) -> Result<Recorder, ReplayError> {
        let dir = dir.as_ref().to_owned();
        file::create_private_dir(&dir)?;
        Ok(Recorder {
            inner,
            dir,
            recorded: Mutex::new(HashMap::new()),
        })
    }

    /// The recording directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Sends `request` to the wrapped model and records the exchange if it
    /// succeeded.
    ///
    /// # Errors
    ///
    /// [`ReplayError::Model`] with the wrapped model's error (nothing is
    /// recorded), or the error that kept the exchange from being recorded
    /// (the response is then lost to the caller: a recording that silently
    /// misses an exchange would fail only later, at replay).
    pub async fn generate_recorded(
        &self,
        request: &ModelRequest,
    ) -> Result<ModelResponse, ReplayError> {
        let key = key(self.inner.name(), request)?;
        let response = self
            .inner
            .generate(request)
            .await
            .map_err(ReplayError::Model)?;
        let name = self.claim(&key)?;
        let bytes = file::encode(self.inner.name(), request, &response)?;
        file::write_atomic(&self.dir, &name, &bytes)?;
        Ok(response)
    }

    /// Takes the next ordinal of `key` and returns its file name; the first
    /// one also deletes the key's older later-exchange files, under the
    /// lock, so no later exchange of this lifetime can be deleted.
    fn claim(&self, key: &str) -> Result<String, ReplayError> {
        let mut recorded = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        let n = recorded.get(key).copied().unwrap_or(0) + 1;
        if n == 1 {
            file::remove_later_exchanges(&self.dir, key)?;
        }
        recorded.insert(key.to_owned(), n);
        Ok(file::file_name(key, n))
    }
}

impl Model for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            self.generate_recorded(request)
                .await
                .map_err(ReplayError::into_model_error)
        })
    }
}
