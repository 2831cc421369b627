//! A session's hold on its run: renewed by a heartbeat task every third of
//! the lease's time-to-live, lost (for good) when the row no longer names
//! this owner.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::task::JoinHandle;

use super::GateInner;
use crate::clock::{Clock, Timestamp, lock, system_clock};

struct State {
    lost: AtomicBool,
    /// Set when the session stops its heartbeat: a renewal already on its
    /// way to the database then writes nothing.
    stopped: AtomicBool,
    expires: Mutex<Timestamp>,
    /// The clock the lease is measured by.
    clock: Clock,
}

/// The heartbeat of one session's lease. Dropping it stops the heartbeat.
pub(crate) struct Lease {
    state: Arc<State>,
    task: Option<JoinHandle<()>>,
}

impl Lease {
    /// A lease this session does not hold (paused or finished runs).
    pub fn none() -> Lease {
        Lease {
            state: Arc::new(State {
                lost: AtomicBool::new(false),
                stopped: AtomicBool::new(true),
                expires: Mutex::new(Timestamp::from_unix_nanos(0)),
                clock: system_clock(),
            }),
            task: None,
        }
    }

    /// Starts the heartbeat for a lease just written (expiring about
    /// now + TTL). Must run inside a tokio runtime.
    pub fn hold(gate: &Arc<GateInner>, run_id: &str) -> Lease {
        let state = Arc::new(State {
            lost: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            expires: Mutex::new(gate.lease_expiry()),
            clock: Arc::clone(&gate.lease_clock),
        });
        let beat = Arc::clone(&state);
        let store = gate.store.clone();
        let owner = gate.owner.clone();
        let run_id = run_id.to_owned();
        let ttl = gate.lease_ttl;
        let period = (ttl / 3).max(std::time::Duration::from_millis(10));
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                let expires = (beat.clock)().add(ttl);
                let (store, run_id, owner) = (store.clone(), run_id.clone(), owner.clone());
                let stopping = Arc::clone(&beat);
                let renewal = tokio::task::spawn_blocking(move || {
                    if stopping.stopped.load(Ordering::SeqCst) {
                        return Ok(None);
                    }
                    store.renew_lease(&run_id, &owner, expires, ttl).map(Some)
                });
                match tokio::time::timeout(period, renewal).await {
                    Ok(Ok(Ok(None))) => return,
                    Ok(Ok(Ok(Some(true)))) => *lock(&beat.expires) = expires,
                    Ok(Ok(Ok(Some(false)))) => {
                        beat.lost.store(true, Ordering::SeqCst);
                        return;
                    }
                    // A busy database, a slow disk, a panic in the write:
                    // try again at the next tick.
                    _ => continue,
                }
            }
        });
        Lease {
            state,
            task: Some(task),
        }
    }

    /// Records a renewal written by the session itself (to `expires`).
    pub fn renewed(&self, expires: Timestamp) {
        *lock(&self.state.expires) = expires;
    }

    /// Held: not lost, and not past its last written expiry.
    pub fn ok(&self) -> bool {
        self.handle().ok()
    }

    /// A handle that reads this lease's state (for the step's model caller).
    pub fn handle(&self) -> LeaseHandle {
        LeaseHandle(Arc::clone(&self.state))
    }

    /// Stops the heartbeat.
    pub fn stop(&mut self) {
        self.state.stopped.store(true, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    /// `true` while the heartbeat runs.
    pub fn beating(&self) -> bool {
        self.task.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Reads a session's lease state from elsewhere (the model caller).
#[derive(Clone)]
pub(crate) struct LeaseHandle(Arc<State>);

impl LeaseHandle {
    /// Held: not lost, and not past its last written expiry by the lease
    /// clock.
    pub fn ok(&self) -> bool {
        !self.0.lost.load(Ordering::SeqCst) && (self.0.clock)() < *lock(&self.0.expires)
    }
}

/// A stored lease that someone holds at `now`: an owner, and an expiry
/// (stored text, which sorts as time) still ahead of it.
pub(crate) fn held(owner: &str, expires_at: &str, now: Timestamp) -> bool {
    !owner.is_empty() && expires_at > now.to_string().as_str()
}
