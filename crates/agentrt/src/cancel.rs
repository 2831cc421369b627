//! Cooperative cancellation: an explicit signal passed with a call.
//!
//! Several outcomes are recorded after the caller cancels (a tool that
//! finished, a model call that was sent), so cancellation cannot be only
//! the dropping of a future: the runtime watches this signal, records what
//! it must, then returns [`crate::Error::Cancelled`].

use std::sync::Arc;
use tokio::sync::watch;

/// The caller's side: cancels every [`Cancel`] made from it.
///
/// ```
/// let (handle, signal) = agentrt::cancel_pair();
/// assert!(!signal.is_cancelled());
/// handle.cancel();
/// assert!(signal.is_cancelled());
/// ```
#[derive(Clone, Debug)]
pub struct CancelHandle {
    sender: Arc<watch::Sender<bool>>,
}

/// The runtime's side: tells whether, and waits until, the caller cancelled.
#[derive(Clone, Debug)]
pub struct Cancel {
    receiver: watch::Receiver<bool>,
}

/// A connected handle and signal.
pub fn cancel_pair() -> (CancelHandle, Cancel) {
    let (sender, receiver) = watch::channel(false);
    (
        CancelHandle {
            sender: Arc::new(sender),
        },
        Cancel { receiver },
    )
}

impl CancelHandle {
    /// Cancels. Idempotent.
    pub fn cancel(&self) {
        self.sender.send_replace(true);
    }

    /// A new signal connected to this handle.
    pub fn signal(&self) -> Cancel {
        Cancel {
            receiver: self.sender.subscribe(),
        }
    }
}

impl Cancel {
    /// A signal that never fires.
    pub fn never() -> Cancel {
        let (sender, receiver) = watch::channel(false);
        // Keeping the sender alive forever would leak; a dropped sender
        // with `false` inside simply never fires (see `cancelled`).
        drop(sender);
        Cancel { receiver }
    }

    /// `true` once the caller cancelled.
    pub fn is_cancelled(&self) -> bool {
        *self.receiver.borrow()
    }

    /// Completes when the caller cancels; never completes otherwise.
    pub async fn cancelled(&self) {
        let mut rx = self.receiver.clone();
        loop {
            if *rx.borrow_and_update() {
                return;
            }
            if rx.changed().await.is_err() {
                // The handle is gone without cancelling: wait forever.
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Default for Cancel {
    fn default() -> Cancel {
        Cancel::never()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancelled_completes_after_cancel() {
        let (h, c) = cancel_pair();
        let waiter = tokio::spawn(async move { c.cancelled().await });
        h.cancel();
        waiter.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn never_does_not_fire() {
        let c = Cancel::never();
        let r = tokio::time::timeout(std::time::Duration::from_secs(5), c.cancelled()).await;
        assert!(r.is_err());
        assert!(!c.is_cancelled());
    }
}
