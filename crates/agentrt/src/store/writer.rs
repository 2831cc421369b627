//! The writer thread: write groups submitted from async code are run off
//! the executor, on one thread that owns the write connection, and the
//! groups that arrive while a commit is in progress are committed together
//! in the next transaction (group commit: one fsync for many groups).
//!
//! Each group runs in a savepoint of the batch's transaction, so it stays
//! atomic on its own: a group that fails or panics rolls back alone and the
//! others commit. Groups run in arrival order, each sealing its events onto
//! the chain as the previous one left it, so the log keeps one total order.
//! A group's caller hears of it (and hands its events to observers) only
//! after the batch committed.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};

use rusqlite::Connection;
use tokio::sync::{mpsc, oneshot};

use super::WriteTx;
use super::batch::Batch;
use super::extension::Registry;
use super::sqlite::SqliteRows;
use super::watch::Head;
use crate::clock::lock;
use crate::error::{Error, Result};
use crate::model::Event;

/// Jobs waiting for the writer. A full queue makes submitters wait (async),
/// never grow memory without bound.
const QUEUE_CAPACITY: usize = 1024;

/// The most groups one transaction commits: a bound on how long one
/// transaction holds the write lock.
const MAX_BATCH: usize = 256;

/// How long a lone async write waits for its commit by yielding before it
/// parks (a commit at full durability takes a few hundred microseconds).
const LONE_WAIT: std::time::Duration = std::time::Duration::from_millis(2);

/// How long the writer looks for more work before it parks: long enough
/// to catch the next write of a call whose tool answers within a
/// millisecond (a step's two commits sit on either side of the tool).
const SPIN: std::time::Duration = std::time::Duration::from_micros(1000);

/// The counters a store reports: transactions committed (fsyncs at full
/// durability) and write groups committed.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub transactions: AtomicU64,
    pub groups: AtomicU64,
}

/// One write group handed to the writer.
trait Group: Send {
    /// Runs the group's writes, inside its savepoint.
    fn run(&mut self, tx: &mut WriteTx<'_>) -> Result<()>;
    /// Reports the outcome once the batch committed (or failed).
    fn settle(self: Box<Self>, outcome: Result<Vec<Event>>);
}

enum Job {
    Group(Box<dyn Group>),
    /// Work on the write connection between batches: it sees every group
    /// committed before it and none after.
    Between(Box<dyn FnOnce(&Connection) + Send>),
}

/// What the submitter gets back.
enum Reply<T> {
    Done(Result<(T, Vec<Event>)>),
    Panicked(Box<dyn Any + Send>),
}

/// Runs after the commit, on the writer thread, before the reply is sent.
type AfterCommit<T> = Box<dyn FnOnce(&T) + Send>;

struct TypedGroup<T, F> {
    f: Option<F>,
    value: Option<T>,
    panic: Option<Box<dyn Any + Send>>,
    after: Option<AfterCommit<T>>,
    reply: oneshot::Sender<Reply<T>>,
}

impl<T, F> Group for TypedGroup<T, F>
where
    T: Send + 'static,
    F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
{
    fn run(&mut self, tx: &mut WriteTx<'_>) -> Result<()> {
        let Some(f) = self.f.take() else {
            return Err(Error::Internal {
                detail: "a write group ran twice".into(),
            });
        };
        match catch_unwind(AssertUnwindSafe(|| f(tx))) {
            Ok(Ok(value)) => {
                self.value = Some(value);
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(panic) => {
                self.panic = Some(panic);
                Err(Error::Internal {
                    detail: "a write group panicked".into(),
                })
            }
        }
    }

    fn settle(self: Box<Self>, outcome: Result<Vec<Event>>) {
        let this = *self;
        let reply = match (this.panic, outcome, this.value) {
            (Some(panic), _, _) => Reply::Panicked(panic),
            (None, Ok(events), Some(value)) => {
                if let Some(after) = this.after {
                    after(&value);
                }
                Reply::Done(Ok((value, events)))
            }
            (None, Ok(_), None) => Reply::Done(Err(Error::Internal {
                detail: "a write group committed without its value".into(),
            })),
            (None, Err(e), _) => Reply::Done(Err(e)),
        };
        // The submitter may have stopped waiting: the group stands anyway.
        let _ = this.reply.send(reply);
    }
}

/// The write connection and what a batch reports to.
struct Shared {
    conn: Arc<Mutex<Connection>>,
    counters: Arc<Counters>,
    head: Arc<Head>,
    extensions: Arc<Registry>,
}

/// The handle on the writer thread; dropping it lets the thread finish the
/// queue and end.
pub(super) struct Writer {
    queue: Option<mpsc::Sender<Job>>,
    /// Async writes submitted and not yet answered.
    in_flight: AtomicUsize,
    thread: Option<JoinHandle<()>>,
    thread_id: Option<ThreadId>,
}

impl Writer {
    pub fn start(
        conn: Arc<Mutex<Connection>>,
        counters: Arc<Counters>,
        head: Arc<Head>,
        extensions: Arc<Registry>,
    ) -> Result<Writer> {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let shared = Shared {
            conn,
            counters,
            head,
            extensions,
        };
        let thread = std::thread::Builder::new()
            .name("agentrt-writer".into())
            .spawn(move || serve(&shared, rx))
            .map_err(|e| Error::Internal {
                detail: format!("cannot start the writer thread: {e}"),
            })?;
        Ok(Writer {
            queue: Some(tx),
            in_flight: AtomicUsize::new(0),
            thread_id: Some(thread.thread().id()),
            thread: Some(thread),
        })
    }

    /// Runs `f` as one write group of the next batch; `after` runs on the
    /// writer thread once it committed, before the caller hears of it.
    pub async fn write<T, F>(&self, f: F, after: Option<AfterCommit<T>>) -> Result<(T, Vec<Event>)>
    where
        T: Send + 'static,
        F: FnOnce(&mut WriteTx<'_>) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let group = TypedGroup {
            f: Some(f),
            value: None,
            panic: None,
            after,
            reply,
        };
        match self.submit(Job::Group(Box::new(group)), answer).await? {
            Reply::Done(r) => r,
            Reply::Panicked(panic) => resume_unwind(panic),
        }
    }

    /// Runs `f` on the write connection between batches.
    pub async fn between<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = move |conn: &Connection| {
            let r = catch_unwind(AssertUnwindSafe(|| f(conn)));
            let _ = reply.send(r);
        };
        match self.submit(Job::Between(Box::new(job)), answer).await? {
            Ok(r) => r,
            Err(panic) => resume_unwind(panic),
        }
    }

    /// Queues `job` and waits for its answer.
    ///
    /// A lone write (no other async write of this store in flight) waits
    /// by yielding to the runtime rather than parking it, for up to
    /// [`LONE_WAIT`], then on a blocking thread: waking a parked runtime
    /// thread costs about as much as a whole commit at normal durability,
    /// and a runtime with a task ready or a blocking task running is never
    /// idle, so a paused test clock does not jump forward while the commit
    /// is in progress. Other tasks keep running in between. Several writes
    /// in flight park at once: they wake together when their batch
    /// commits.
    ///
    /// (A lone write committing itself inside `block_in_place` on a
    /// multi-thread runtime was measured and dropped: handing the worker's
    /// core to another thread costs more than the hand-off it saves.)
    async fn submit<R: Send + 'static>(
        &self,
        job: Job,
        mut answer: oneshot::Receiver<R>,
    ) -> Result<R> {
        let Some(queue) = &self.queue else {
            return Err(stopped());
        };
        let in_flight = InFlight::enter(&self.in_flight);
        queue.send(job).await.map_err(|_| stopped())?;
        if in_flight.alone {
            let until = std::time::Instant::now() + LONE_WAIT;
            loop {
                match answer.try_recv() {
                    Ok(r) => return Ok(r),
                    Err(oneshot::error::TryRecvError::Closed) => return Err(stopped()),
                    Err(oneshot::error::TryRecvError::Empty) => {}
                }
                if std::time::Instant::now() >= until {
                    break;
                }
                tokio::task::yield_now().await;
            }
            // A slow commit: wait on a blocking thread, which also keeps a
            // paused test clock from jumping while the commit goes on.
            return super::blocking(move || answer.blocking_recv().map_err(|_| stopped())).await;
        }
        answer.await.map_err(|_| stopped())
    }
}

/// Counts the async writes in flight, so a lone one can wait cheaply.
struct InFlight<'a> {
    count: &'a AtomicUsize,
    alone: bool,
}

impl<'a> InFlight<'a> {
    fn enter(count: &'a AtomicUsize) -> InFlight<'a> {
        let before = count.fetch_add(1, Ordering::SeqCst);
        InFlight {
            count,
            alone: before == 0,
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it has drained it. A job
        // holding the last handle on the store drops it on the writer
        // thread itself, which must not wait for itself.
        self.queue = None;
        if let Some(thread) = self.thread.take()
            && Some(std::thread::current().id()) != self.thread_id
        {
            let _ = thread.join();
        }
    }
}

fn stopped() -> Error {
    Error::Internal {
        detail: "the store's writer thread has stopped".into(),
    }
}

/// The writer thread: take what is queued, commit it as one batch, repeat.
fn serve(shared: &Shared, mut queue: mpsc::Receiver<Job>) {
    let Shared {
        conn,
        counters,
        head,
        extensions,
    } = shared;
    loop {
        let first = match spin_recv(&mut queue) {
            Some(job) => job,
            None => match queue.blocking_recv() {
                Some(job) => job,
                None => return,
            },
        };
        // Waiting for the connection (a blocking `Store::write` may hold
        // it) lets more groups arrive: they join this batch.
        let conn = lock(conn);
        let mut groups: Vec<Box<dyn Group>> = Vec::new();
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Group(g) => groups.push(g),
                Job::Between(f) => {
                    // Everything queued before it commits first.
                    commit_batch(
                        &conn,
                        std::mem::take(&mut groups),
                        counters,
                        head,
                        extensions,
                    );
                    f(&conn);
                }
            }
            if groups.len() < MAX_BATCH {
                next = queue.try_recv().ok();
            }
        }
        commit_batch(&conn, groups, counters, head, extensions);
    }
}

/// Looks for the next job for a short while before the thread parks:
/// waking a parked thread costs tens of microseconds on a loaded machine
/// (40-50 µs on a virtual one), about a commit's own cost at normal
/// durability. Each turn yields the core, so the wait takes only time no
/// other thread wants.
fn spin_recv(queue: &mut mpsc::Receiver<Job>) -> Option<Job> {
    let until = std::time::Instant::now() + SPIN;
    loop {
        match queue.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Commits `groups` in one IMMEDIATE transaction, each in its savepoint,
/// then settles each with its events or its own error, still holding the
/// connection: a group's after-commit work is done before any later work
/// on the connection sees the commit.
fn commit_batch(
    conn: &Connection,
    groups: Vec<Box<dyn Group>>,
    counters: &Counters,
    head: &Head,
    extensions: &Registry,
) {
    if groups.is_empty() {
        return;
    }
    let (outcomes, committed) = {
        let tx = match Batch::begin(conn) {
            Ok(tx) => tx,
            Err(e) => {
                for g in groups {
                    g.settle(Err(e.for_each_group()));
                }
                return;
            }
        };
        let mut outcomes = Vec::with_capacity(groups.len());
        let mut broken: Option<Error> = None;
        // A group alone needs no savepoint: the transaction is its own.
        let alone = groups.len() == 1;
        for mut g in groups {
            if alone {
                let outcome = {
                    let mut rows = SqliteRows::new(tx.conn);
                    let mut wtx = WriteTx::new(&mut rows, extensions);
                    g.run(&mut wtx).and_then(|()| wtx.finish())
                };
                if let Err(e) = &outcome {
                    broken = Some(e.for_each_group());
                }
                outcomes.push((g, outcome));
                continue;
            }
            let outcome = match &broken {
                Some(e) => Err(e.for_each_group()),
                None => match run_group(&tx, g.as_mut(), extensions) {
                    Ok(r) => r,
                    Err(e) => {
                        // The savepoint could not be released or rolled back:
                        // the transaction's state is unknown, so nothing in it
                        // commits.
                        let r = Err(e.for_each_group());
                        broken = Some(e);
                        r
                    }
                },
            };
            outcomes.push((g, outcome));
        }
        let committed = match broken {
            Some(e) => Err(e),
            // Nothing to keep: no commit (and no fsync) for a batch whose
            // every group rolled back.
            None if outcomes.iter().all(|(_, r)| r.is_err()) => tx.rollback().map(|()| false),
            None => tx.commit().map(|()| true),
        };
        (outcomes, committed)
    };
    match committed {
        Ok(written) => {
            let done = outcomes.iter().filter(|(_, r)| r.is_ok()).count() as u64;
            if written {
                counters.transactions.fetch_add(1, Ordering::Relaxed);
            }
            counters.groups.fetch_add(done, Ordering::Relaxed);
            for (_, r) in &outcomes {
                if let Ok(events) = r {
                    head.committed(events);
                }
            }
            for (g, r) in outcomes {
                g.settle(r);
            }
        }
        Err(e) => {
            for (g, r) in outcomes {
                g.settle(r.and_then(|_| Err(e.for_each_group())));
            }
        }
    }
}

/// Runs one group in a savepoint. The outer error means the savepoint
/// itself failed; the inner result is the group's own.
fn run_group(
    tx: &Batch<'_>,
    group: &mut dyn Group,
    extensions: &Registry,
) -> Result<Result<Vec<Event>>> {
    tx.run("SAVEPOINT agentrt_group")?;
    let outcome = {
        let mut rows = SqliteRows::new(tx.conn);
        let mut wtx = WriteTx::new(&mut rows, extensions);
        group.run(&mut wtx).and_then(|()| wtx.finish())
    };
    match outcome {
        Ok(events) => {
            tx.run("RELEASE agentrt_group")?;
            Ok(Ok(events))
        }
        Err(e) => {
            tx.run("ROLLBACK TO agentrt_group")?;
            tx.run("RELEASE agentrt_group")?;
            Ok(Err(e))
        }
    }
}
