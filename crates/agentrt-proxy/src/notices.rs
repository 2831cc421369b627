//! The operator's notices (design §31: an approval waits), written to
//! stderr by a thread of their own through a bounded queue. A host that
//! never reads the proxy's stderr fills the pipe, and a write to it blocks:
//! only that thread waits. When the queue is full a notice is dropped and
//! counted; the next notice that gets through says how many were dropped
//! before it, and so does the proxy's end ([`Notices::dropped`]).

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

/// Notices waiting for the writer thread, at most.
pub const NOTICE_QUEUE: usize = 64;

/// The queue to the notices' writer thread, and what was dropped.
pub(crate) struct Notices {
    /// `None` when the writer thread could not be started.
    queue: Option<SyncSender<String>>,
    /// Dropped since a notice last got through.
    unreported: AtomicU64,
    /// Dropped in all.
    dropped: AtomicU64,
}

impl Notices {
    /// Notices written to `out` by a thread of their own.
    pub(crate) fn new(mut out: Box<dyn Write + Send>) -> Notices {
        let (queue, notices) = sync_channel::<String>(NOTICE_QUEUE);
        let writer = std::thread::Builder::new()
            .name("agentrt-proxy-notices".into())
            .spawn(move || {
                // Ends when the proxy is dropped (its sender with it).
                for notice in notices {
                    let _ = out.write_all(notice.as_bytes());
                    let _ = out.flush();
                }
            });
        Notices {
            queue: writer.ok().map(|_| queue),
            unreported: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }
    }

    /// Queues `text` (whole lines) for the writer, never waiting: when the
    /// queue is full (or there is no writer) it is dropped and counted.
    /// The first that gets through after some were dropped says so.
    pub(crate) fn send(&self, text: String) {
        let missed = self.unreported.swap(0, Ordering::SeqCst);
        let text = if missed > 0 {
            format!(
                "agentrt-proxy: {missed} earlier approval notice(s) dropped: stderr is not read fast enough\n{text}"
            )
        } else {
            text
        };
        let sent = match &self.queue {
            Some(queue) => match queue.try_send(text) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            },
            None => false,
        };
        if !sent {
            self.unreported.fetch_add(missed + 1, Ordering::SeqCst);
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// How many notices were dropped in all.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::SeqCst)
    }
}
