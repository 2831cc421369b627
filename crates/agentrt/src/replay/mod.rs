//! Scripted, recording and replaying models (design §15; control 73).
//!
//! - [`Scripted`] answers from a fixed list of responses and errors and keeps
//!   the requests it received.
//! - [`Recorder`] wraps a real model and writes each successful exchange to
//!   a directory, one file per exchange.
//! - [`Replayer`] serves those files back, byte-identical, and fails loudly
//!   ([`NotRecorded`]) on any request it has no recording for.
//!
//! # Replay key
//!
//! [`key`] is BLAKE3-256 (lowercase hex) of the canonical JSON of
//! `{"model": <model name>, "request": <the ModelRequest>}`, where the
//! request is serialised with its serde field names and optional fields
//! omitted. Tool inputs and schemas are [`Canonical`] values embedded as
//! written, and the canonical form keeps number literals exactly, so
//! `12345678901234567890` and `12345678901234567891` give different keys.
//! Keys made by the Go original (SHA-256 over its own encoding) do not
//! carry over.
//!
//! # Recording files (stable format `agentrt-replay/v1`)
//!
//! A recording directory holds one file per successful exchange. The n-th
//! identical request a [`Recorder`] sees is written to `<key>.json` (n = 1)
//! or `<key>.<n>.json` (n ≥ 2); the first exchange of a key in a recorder's
//! lifetime deletes that key's `<key>.<n>.json` files first, so a
//! re-recording never mixes old and new turns. Each file is pretty JSON
//! (two-space indent, no HTML escaping) with these members, in this order:
//!
//! | member | content |
//! |---|---|
//! | `format` | `"agentrt-replay/v1"` ([`FORMAT`]) |
//! | `model` | the model name the key was computed with |
//! | `request` | the [`ModelRequest`] |
//! | `response` | the [`ModelResponse`](crate::ModelResponse) without `raw` |
//! | `raw_bytes` | the provider's raw reply as a JSON string, byte-exact (absent when the reply had none) |
//!
//! Readers also accept files without `format` (older recordings), and take
//! the raw reply from `response.raw` when `raw_bytes` is absent. A file with
//! another `format` is refused ([`ReplayError::UnknownFormat`]), as is a file
//! whose `model` and `request` do not give the key in its name
//! ([`ReplayError::Mismatch`]).
//!
//! The directory is created `0700` and every file `0600` (Unix). Each file
//! is written to its own temporary file in the same directory (named
//! `.<file>.<pid>.<n>.tmp`), synced, then renamed into place, so a reader
//! never sees a partial recording.
//!
//! # Nearest key
//!
//! When the [`Replayer`] has no recording for a request, [`NotRecorded`]
//! names the *nearest* recorded key: among the directory's recordings, the
//! one whose canonical key document (`{"model","request"}`, the bytes the
//! key hashes) shares the longest common byte prefix with the asked one;
//! ties go to the smaller key. Canonical JSON sorts `max_output_tokens`
//! and `messages` before `system` and `tools`, so this is the recording
//! that shares the longest conversation history: usually the turn where a
//! replay diverged.
//!
//! ```
//! use agentrt::replay::{self, Recorder, Replayer, Scripted};
//! use agentrt::{llm::ContentBlock, llm::Message, Model, ModelRequest, ModelResponse, llm::Role, Usage};
//! use std::sync::Arc;
//!
//! # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
//! let dir = std::env::temp_dir().join(format!("agentrt-replay-doc-{}", std::process::id()));
//! let request = ModelRequest {
//!     system: String::new(),
//!     messages: vec![Message { role: Role::User, content: vec![ContentBlock::text("hi")] }],
//!     tools: vec![],
//!     max_output_tokens: None,
//! };
//! let reply = ModelResponse {
//!     text: "hello".into(),
//!     tool_uses: vec![],
//!     stop_reason: None,
//!     usage: Usage::default(),
//!     raw: Some(r#"{"id":"msg_1", "note":"<raw> & é"}"#.into()),
//! };
//! let recorder = Recorder::new(Arc::new(Scripted::new([reply.clone()])), &dir)?;
//! assert_eq!(recorder.generate(&request).await?, reply);
//!
//! let replayer = Replayer::new("scripted", &dir);
//! assert_eq!(replayer.generate(&request).await?, reply);
//! let again = replayer.generate_replayed(&request).await.unwrap_err();
//! assert!(matches!(again, replay::ReplayError::NotRecorded(n) if n.asked == 2 && n.recorded == 1));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod error;
mod file;
mod recorder;
mod replayer;
mod scripted;

pub use error::{NotRecorded, ReplayError};
pub use recorder::Recorder;
pub use replayer::Replayer;
pub use scripted::{SCRIPTED_MODEL_NAME, Scripted};

use serde::Serialize;

use crate::json::Canonical;
use crate::llm::ModelRequest;

/// The format id written in every recording file.
pub const FORMAT: &str = "agentrt-replay/v1";

/// How many hex characters of a key error messages show.
pub const KEY_PREFIX_CHARS: usize = 12;

/// What a replay key hashes: the model name and the request.
#[derive(Serialize)]
struct KeyDocument<'a, R: Serialize + ?Sized> {
    model: &'a str,
    request: &'a R,
}

/// The canonical key document of `model` and `request` (the bytes [`key`]
/// hashes).
///
/// # Errors
///
/// [`ReplayError::Key`] when the request cannot be encoded (e.g. it nests
/// deeper than the canonical form allows).
pub fn key_document(model: &str, request: &ModelRequest) -> Result<Canonical, ReplayError> {
    canonical_key_document(model, request)
}

/// The replay key of `request` sent to `model`: BLAKE3 hex of
/// [`key_document`].
///
/// # Errors
///
/// [`ReplayError::Key`] when the request cannot be encoded.
///
/// ```
/// use agentrt::{llm::ContentBlock, llm::Message, ModelRequest, llm::Role, replay};
/// let request = ModelRequest {
///     system: String::new(),
///     messages: vec![Message { role: Role::User, content: vec![ContentBlock::text("hi")] }],
///     tools: vec![],
///     max_output_tokens: None,
/// };
/// let doc = replay::key_document("scripted", &request)?;
/// assert_eq!(
///     doc.as_str(),
///     r#"{"model":"scripted","request":{"messages":[{"content":[{"text":"hi","type":"text"}],"role":"user"}]}}"#
/// );
/// assert_eq!(replay::key("scripted", &request)?, doc.hash());
/// # Ok::<(), replay::ReplayError>(())
/// ```
pub fn key(model: &str, request: &ModelRequest) -> Result<String, ReplayError> {
    key_document(model, request).map(|doc| doc.hash())
}

/// The canonical key document of any serialisable request (a
/// [`ModelRequest`], or the canonical request read from a file).
fn canonical_key_document<R: Serialize + ?Sized>(
    model: &str,
    request: &R,
) -> Result<Canonical, ReplayError> {
    Canonical::from_serialize(&KeyDocument { model, request }).map_err(ReplayError::Key)
}

/// The first [`KEY_PREFIX_CHARS`] characters of `key`.
fn short(key: &str) -> &str {
    key.get(..KEY_PREFIX_CHARS).unwrap_or(key)
}
