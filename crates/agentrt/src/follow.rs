//! Following a store's events as they commit (design §36): every
//! event of every run (or of one run), in seq order, handed to a sink,
//! with the position kept in a cursor.
//!
//! A [`Follower`] reads a page of events after its cursor (bounded page
//! reads, off the async executor), hands each to the sink, and saves the
//! cursor after each page that delivered something and before it returns.
//! Caught up, it sleeps on the store's change signal
//! ([`Store::wait_for_event`]) until another commit, from this process or
//! another; it never polls on a timer of its own. Across clean stops every
//! event is delivered exactly once; after a hard kill, at most the page
//! in progress is delivered again (sinks that must not act twice key on
//! `seq`).
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use agentrt::follow::{Follower, MemoryCursor};
//! use agentrt::{Cancel, Store};
//!
//! let store = Store::open(":memory:").unwrap();
//! let mut follower = Follower::new(store, MemoryCursor::default());
//! let mut seen = Vec::new();
//! follower
//!     .follow(|e| { seen.push(e.seq); Ok::<(), std::io::Error>(()) }, &Cancel::never(), true)
//!     .await
//!     .unwrap();
//! assert!(seen.is_empty());
//! # });
//! ```

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::cancel::Cancel;
use crate::error::{Error, Result};
use crate::model::Event;
use crate::store::Store;

/// Events read at a time unless told otherwise.
pub const DEFAULT_PAGE: u64 = 500;
/// The largest page.
pub const MAX_PAGE: u64 = 10_000;
/// How long one wait for a commit lasts before the follower looks again
/// (a safety net for a missed signal; commits wake it at once).
const WAIT: Duration = Duration::from_secs(60);

/// Where a follower keeps its position: the seq of the last event
/// delivered.
pub trait Cursor: Send + 'static {
    /// The saved position (0: nothing delivered yet).
    fn load(&mut self) -> Result<i64>;
    /// Saves `seq` as the position.
    fn save(&mut self, seq: i64) -> Result<()>;
}

/// A position kept in memory only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryCursor {
    /// The position.
    pub seq: i64,
}

impl Cursor for MemoryCursor {
    fn load(&mut self) -> Result<i64> {
        Ok(self.seq)
    }

    fn save(&mut self, seq: i64) -> Result<()> {
        self.seq = seq;
        Ok(())
    }
}

/// The longest text a cursor file holds: the largest seq (19 digits) and
/// a newline.
pub const CURSOR_TEXT_MAX: usize = 20;

/// Why a cursor file's text is not a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CursorTextError {
    /// Empty, or something other than decimal digits and one newline.
    #[error("it does not hold a seq (decimal digits and a newline)")]
    NotASeq,
    /// Longer than [`CURSOR_TEXT_MAX`] bytes.
    #[error("it is longer than a seq (at most {CURSOR_TEXT_MAX} bytes)")]
    TooLong,
    /// Digits beyond the largest seq (`i64::MAX`).
    #[error("the seq is too large")]
    TooLarge,
}

/// The position a cursor file's bytes hold: decimal digits (ASCII only),
/// optionally followed by one `\n`, at most [`CURSOR_TEXT_MAX`] bytes,
/// at most `i64::MAX`. What [`FileCursor`] reads (and what it writes,
/// `{seq}\n`, parses back to the same seq).
pub fn parse_cursor_text(text: &[u8]) -> std::result::Result<i64, CursorTextError> {
    if text.len() > CURSOR_TEXT_MAX {
        return Err(CursorTextError::TooLong);
    }
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(CursorTextError::NotASeq);
    }
    digits.iter().try_fold(0i64, |n, d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(i64::from(d - b'0')))
            .ok_or(CursorTextError::TooLarge)
    })
}

/// A position kept in a file: the seq in decimal and a newline, replaced
/// atomically (written to a new file beside it, flushed to disk, made
/// owner-only, renamed over it). A missing file is position 0; anything
/// else that is not a seq is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileCursor {
    path: PathBuf,
}

impl FileCursor {
    /// A cursor in the file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> FileCursor {
        FileCursor { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn invalid(&self, detail: impl Into<String>) -> Error {
        Error::InvalidInput {
            what: "cursor file",
            detail: format!("{}: {}", self.path.display(), detail.into()),
        }
    }
}

impl Cursor for FileCursor {
    fn load(&mut self) -> Result<i64> {
        let file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(self.invalid(e.to_string())),
        };
        // A user can edit the file (or swap in something endless): read no
        // more than a seq can take, and one byte more to tell it is longer.
        let mut text = Vec::with_capacity(CURSOR_TEXT_MAX + 1);
        file.take(CURSOR_TEXT_MAX as u64 + 1)
            .read_to_end(&mut text)
            .map_err(|e| self.invalid(e.to_string()))?;
        parse_cursor_text(&text).map_err(|e| {
            let shown = String::from_utf8_lossy(&text[..text.len().min(CURSOR_TEXT_MAX)]);
            self.invalid(format!("{e}: {:?}", crate::text::clip(&shown, 40)))
        })
    }

    fn save(&mut self, seq: i64) -> Result<()> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
            _ => PathBuf::from("."),
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let written = (|| -> std::io::Result<()> {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                options.mode(0o600);
            }
            let mut file = options.open(&temp)?;
            file.write_all(format!("{seq}\n").as_bytes())?;
            file.sync_all()?;
            std::fs::rename(&temp, &self.path)?;
            // The rename itself reaches the disk with the directory.
            std::fs::File::open(&dir).and_then(|d| d.sync_all())
        })();
        written.map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            self.invalid(format!("cannot save the position: {e}"))
        })
    }
}

/// Why following stopped.
#[derive(Debug, thiserror::Error)]
pub enum FollowError<E> {
    /// The sink refused an event: it is not counted as delivered.
    #[error("the sink failed at seq {seq}: {source}")]
    Sink {
        /// The event it refused.
        seq: i64,
        /// Its error.
        source: E,
    },
    /// The store or the cursor failed.
    #[error(transparent)]
    Store(#[from] Error),
}

/// Follows a store's events into a sink, keeping its position in a
/// [`Cursor`].
pub struct Follower<C: Cursor> {
    store: Store,
    /// Shared with the blocking thread that loads and saves it (a file
    /// cursor writes and syncs a file: never on the async executor).
    cursor: Arc<Mutex<C>>,
    run_id: Option<String>,
    page: u64,
}

impl<C: Cursor> Follower<C> {
    /// A follower of every run's events on `store` (open it read-only:
    /// following writes nothing to the database).
    pub fn new(store: Store, cursor: C) -> Follower<C> {
        Follower {
            store,
            cursor: Arc::new(Mutex::new(cursor)),
            run_id: None,
            page: DEFAULT_PAGE,
        }
    }

    /// Follows one run's events only.
    pub fn run(mut self, run_id: impl Into<String>) -> Follower<C> {
        self.run_id = Some(run_id.into());
        self
    }

    /// Reads `page` events at a time (0: the default; at most
    /// [`MAX_PAGE`]).
    pub fn page_size(mut self, page: u64) -> Follower<C> {
        self.page = match page {
            0 => DEFAULT_PAGE,
            n => n.min(MAX_PAGE),
        };
        self
    }

    /// The cursor.
    pub fn cursor(&self) -> MutexGuard<'_, C> {
        crate::clock::lock(&self.cursor)
    }

    /// Runs `f` on the cursor on a blocking thread.
    async fn on_cursor<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut C) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let cursor = Arc::clone(&self.cursor);
        self.store
            .off_executor(move |_| f(&mut crate::clock::lock(&cursor)))
            .await
    }

    /// Delivers every event after the cursor to `sink`, in seq order, and
    /// then each new one as it commits, until `stop` fires (or, with
    /// `once`, until caught up). The cursor is saved after each page that
    /// delivered something and before returning, also on an error: it
    /// names the last event the sink accepted.
    pub async fn follow<E>(
        &mut self,
        mut sink: impl FnMut(&Event) -> std::result::Result<(), E>,
        stop: &Cancel,
        once: bool,
    ) -> std::result::Result<(), FollowError<E>> {
        let start = self.on_cursor(|c| c.load()).await?;
        if start < 0 {
            return Err(Error::InvalidInput {
                what: "cursor",
                detail: format!("a negative position ({start})"),
            }
            .into());
        }
        let mut delivered = start;
        let mut saved = start;
        loop {
            if stop.is_cancelled() {
                break Ok(());
            }
            let run = self.run_id.clone();
            let (after, page) = (delivered, self.page);
            let events = match self
                .store
                .off_executor(move |store| store.events_after_capped(run.as_deref(), after, page))
                .await
            {
                Ok(events) => events,
                Err(e) => break Err(FollowError::Store(e)),
            };
            let full = events.len() as u64 >= self.page;
            let mut refused = None;
            for event in &events {
                if stop.is_cancelled() {
                    break;
                }
                if let Err(source) = sink(event) {
                    refused = Some(FollowError::Sink {
                        seq: event.seq,
                        source,
                    });
                    break;
                }
                delivered = event.seq;
            }
            if delivered != saved {
                if let Err(e) = self.on_cursor(move |c| c.save(delivered)).await {
                    break Err(FollowError::Store(e));
                }
                saved = delivered;
            }
            if let Some(refused) = refused {
                break Err(refused);
            }
            if full {
                continue;
            }
            if once {
                break Ok(());
            }
            tokio::select! {
                waited = self.store.wait_for_event(delivered, WAIT) => {
                    if let Err(e) = waited {
                        break Err(FollowError::Store(e));
                    }
                }
                () = stop.cancelled() => break Ok(()),
            }
        }
    }

    /// The saved position and the stored link of that event (for the
    /// operator to keep and check later with `verify --head`); `None`
    /// before anything was delivered. Not found when the event is gone.
    pub fn head(&mut self) -> Result<Option<crate::verify::ChainHead>> {
        let seq = self.cursor().load()?;
        if seq == 0 {
            return Ok(None);
        }
        let hash = crate::verify::event_hash(&self.store, seq)?.ok_or_else(|| Error::NotFound {
            what: "event",
            id: seq.to_string(),
        })?;
        Ok(Some(crate::verify::ChainHead { seq, hash }))
    }
}
