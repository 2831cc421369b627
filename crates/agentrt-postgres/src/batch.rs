//! Group commit on PostgreSQL: the write groups a process submits while
//! one of its transactions is in progress wait, and the next transaction
//! runs them all, each in a savepoint of its own. One `BEGIN`, one lock
//! on the chain head and one `COMMIT` serve the whole batch, so hosts
//! queue on the head once per batch instead of once per group.
//!
//! There is no writer thread: the first submitter that finds no batch in
//! progress leads one on its own thread (a group alone goes straight to the
//! server), runs the groups queued by then, publishes every outcome, and
//! the next waiter whose group is still queued leads the next batch.

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use agentrt::store::engine::BatchedGroup;
use agentrt::{Error, Result};

/// The most groups one transaction runs. Each writes in a subtransaction
/// of its own, and PostgreSQL tracks 64 of them per transaction cheaply
/// (beyond that, every snapshot of every session pays).
pub(crate) const MAX_BATCH: usize = 32;

/// How a group ended.
pub(crate) enum Outcome {
    Done(Result<()>),
    Panicked(Box<dyn Any + Send>),
}

impl From<Error> for Outcome {
    fn from(e: Error) -> Outcome {
        Outcome::Done(Err(e))
    }
}

/// The groups waiting for a transaction and the outcomes not yet claimed.
#[derive(Default)]
struct State {
    next_ticket: u64,
    queue: VecDeque<(u64, BatchedGroup)>,
    leading: bool,
    outcomes: HashMap<u64, Outcome>,
}

/// Where a process's write groups meet to share transactions.
#[derive(Default)]
pub(crate) struct Batcher {
    state: Mutex<State>,
    settled: Condvar,
}

impl Batcher {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic (none happens while
        // it is held), so a poisoned lock is taken as it is.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `group` and returns once the transaction that ran it ended:
    /// its outcome, or its panic resumed here. `run` runs a batch (in
    /// order, one outcome per group) and must not panic.
    pub(crate) fn submit(
        &self,
        group: BatchedGroup,
        run: impl Fn(Vec<BatchedGroup>) -> Vec<Outcome>,
    ) -> Result<()> {
        let mut state = self.lock();
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.queue.push_back((ticket, group));
        loop {
            if let Some(outcome) = state.outcomes.remove(&ticket) {
                return match outcome {
                    Outcome::Done(result) => result,
                    Outcome::Panicked(panic) => resume_unwind(panic),
                };
            }
            if state.leading {
                state = self
                    .settled
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            state.leading = true;
            let take = state.queue.len().min(MAX_BATCH);
            let (tickets, groups): (Vec<u64>, Vec<BatchedGroup>) =
                state.queue.drain(..take).unzip();
            drop(state);
            let outcomes = catch_unwind(AssertUnwindSafe(|| run(groups)));
            state = self.lock();
            state.leading = false;
            match outcomes {
                Ok(outcomes) if outcomes.len() == tickets.len() => {
                    state.outcomes.extend(tickets.into_iter().zip(outcomes));
                }
                _ => {
                    for t in tickets {
                        state.outcomes.insert(
                            t,
                            Outcome::Done(Err(Error::Internal {
                                detail: "a batch of write groups ended without their outcomes"
                                    .into(),
                            })),
                        );
                    }
                }
            }
            // The waiters whose groups ran take their outcomes; one whose
            // group is still queued leads the next batch.
            self.settled.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn ok_group() -> BatchedGroup {
        Box::new(|_| Ok(()))
    }

    #[test]
    fn groups_submitted_while_a_batch_runs_share_the_next_one() {
        let batcher = Arc::new(Batcher::default());
        let batches = Arc::new(Mutex::new(Vec::new()));
        let (entered, hold) = (
            Arc::new(std::sync::Barrier::new(2)),
            Arc::new(Mutex::new(())),
        );
        let held = hold.lock().unwrap();
        let run = {
            let batches = Arc::clone(&batches);
            let entered = Arc::clone(&entered);
            let hold = Arc::clone(&hold);
            move |groups: Vec<BatchedGroup>| {
                let first = batches.lock().unwrap().is_empty();
                batches.lock().unwrap().push(groups.len());
                if first {
                    entered.wait();
                    drop(hold.lock().unwrap());
                }
                groups.into_iter().map(|_| Outcome::Done(Ok(()))).collect()
            }
        };
        let run = Arc::new(run);
        let first = {
            let (batcher, run) = (Arc::clone(&batcher), Arc::clone(&run));
            std::thread::spawn(move || batcher.submit(ok_group(), |g| run(g)))
        };
        entered.wait();
        // The first batch is running: these three queue for the next one.
        let waiting = Arc::new(AtomicUsize::new(0));
        let others: Vec<_> = (0..3)
            .map(|_| {
                let (batcher, run, waiting) =
                    (Arc::clone(&batcher), Arc::clone(&run), Arc::clone(&waiting));
                std::thread::spawn(move || {
                    waiting.fetch_add(1, Ordering::SeqCst);
                    batcher.submit(ok_group(), |g| run(g))
                })
            })
            .collect();
        while batcher.lock().queue.len() < 3 {
            std::thread::yield_now();
        }
        drop(held);
        first.join().unwrap().unwrap();
        for t in others {
            t.join().unwrap().unwrap();
        }
        assert_eq!(*batches.lock().unwrap(), [1, 3]);
    }

    #[test]
    fn each_group_hears_its_own_outcome_and_a_panic_resumes_in_its_submitter() {
        let batcher = Batcher::default();
        let run = |groups: Vec<BatchedGroup>| {
            groups
                .into_iter()
                .map(|_| Outcome::Panicked(Box::new("boom")))
                .collect()
        };
        let panicked = catch_unwind(AssertUnwindSafe(|| batcher.submit(ok_group(), run)));
        assert!(panicked.is_err());
        let failing = |groups: Vec<BatchedGroup>| {
            groups
                .into_iter()
                .map(|_| Outcome::Done(Err(Error::DatabaseLocked)))
                .collect()
        };
        assert!(matches!(
            batcher.submit(ok_group(), failing),
            Err(Error::DatabaseLocked)
        ));
        // A runner that panics itself fails its batch, and the next works.
        let broken = |_: Vec<BatchedGroup>| -> Vec<Outcome> { panic!("runner") };
        assert!(matches!(
            batcher.submit(ok_group(), broken),
            Err(Error::Internal { .. })
        ));
        let fine =
            |groups: Vec<BatchedGroup>| groups.into_iter().map(|_| Outcome::Done(Ok(()))).collect();
        batcher.submit(ok_group(), fine).unwrap();
    }
}
