//! Why a replay, a recording or a key failed.

use std::fmt;
use std::path::PathBuf;

use super::{FORMAT, short};
use crate::json::JsonError;
use crate::llm::ModelError;

/// A [`Replayer`](super::Replayer) was asked for a request it has no
/// recording for, or asked more times than it was recorded.
///
/// `asked` counts this ask (the first ask is 1); `recorded` is how many
/// files the key has; `nearest` is the nearest recorded key when the key has
/// no recording at all (see the [module docs](super)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct NotRecorded {
    /// The model name the key was computed with.
    pub model: String,
    /// The full replay key of the request.
    pub key: String,
    /// How many times this replayer has now been asked for the key.
    pub asked: usize,
    /// How many exchanges are recorded for the key.
    pub recorded: usize,
    /// The nearest recorded key, when the key has no recording.
    pub nearest: Option<String>,
}

impl fmt::Display for NotRecorded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "replay: request not recorded: model {:?} key {} asked {} time(s), recorded {} time(s)",
            self.model,
            short(&self.key),
            self.asked,
            self.recorded
        )?;
        match &self.nearest {
            Some(nearest) => write!(f, "; nearest recorded key {}", short(nearest)),
            None if self.recorded == 0 => f.write_str("; nothing recorded"),
            None => Ok(()),
        }
    }
}

/// Why a replay or a recording failed.
///
/// [`Replayer`](super::Replayer) and [`Recorder`](super::Recorder) return
/// it from their typed calls (`generate_replayed`, `generate_recorded`);
/// their [`Model::generate`](crate::Model::generate) maps
/// [`ReplayError::Model`] back to the model's own error and everything else
/// onto [`ModelError::Other`] with this error's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// No recording for this request (or not this many).
    #[error(transparent)]
    NotRecorded(#[from] NotRecorded),
    /// The request cannot be encoded as canonical JSON.
    #[error("replay: the request has no key: {0}")]
    Key(JsonError),
    /// An exchange cannot be encoded as a recording.
    #[error("replay: cannot encode the exchange: {detail}")]
    Encode {
        /// What went wrong.
        detail: String,
    },
    /// A file system operation failed.
    #[error("replay: cannot {op} {}: {message}", path.display())]
    Io {
        /// What was being done (`create`, `read`, `write`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The I/O error's kind.
        kind: std::io::ErrorKind,
        /// The I/O error's text.
        message: String,
    },
    /// A file is not a recording.
    #[error("replay: {} is not a recording: {detail}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// A file is a recording of another format.
    #[error("replay: {} has format {format:?}; this build reads {FORMAT:?}", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Its `format` member.
        format: String,
    },
    /// A file's `model` and `request` do not give the key in its name.
    #[error("replay: {} does not record the request its name says (key {})", path.display(), short(key))]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The key its name says.
        key: String,
    },
    /// The wrapped model failed (recording only); passed on unchanged.
    #[error(transparent)]
    Model(ModelError),
}

impl ReplayError {
    /// An [`ReplayError::Io`] for `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        ReplayError::Io {
            op,
            path: path.into(),
            kind: e.kind(),
            message: e.to_string(),
        }
    }

    /// The error a [`Model`](crate::Model) returns for this one: the
    /// wrapped model's own error unchanged, anything else as
    /// [`ModelError::Other`] (never retried, charged nothing).
    #[must_use]
    pub fn into_model_error(self) -> ModelError {
        match self {
            ReplayError::Model(e) => e,
            other => ModelError::Other {
                message: other.to_string(),
            },
        }
    }
}
