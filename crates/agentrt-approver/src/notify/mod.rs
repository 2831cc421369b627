//! `agentrt-approver notify`: telling operators from the log itself.
//!
//! A [`Notifier`] follows a database's events from a cursor file and, for
//! each `approval.requested` (an `interrupted_side_effect` approval is
//! told as an unknown outcome), and each run that ends FAILED when asked,
//! delivers a [`Notice`] to every destination of its [`NotifyConfig`]:
//!
//! - a **signed webhook**: a JSON POST signed with the inbound webhook's
//!   scheme ([`crate::signature::sign`] over `POST` and the URL's path) with
//!   the channel's own secret, and an `Idempotency-Key` header;
//! - a **chat webhook** (Slack's and Teams' incoming webhooks):
//!   `{"text": …}`, the log's text in a code block;
//! - **e-mail** over SMTP (TLS, STARTTLS, or plain to a relay on this
//!   machine), a message per recipient.
//!
//! With `page` set, each delivery carries its own one-time login link to
//! the run's approval page (a recipient's link signs in as their address).
//!
//! The cursor moves past an event only once every destination took its
//! notice: a destination that is down is retried with a back-off capped at
//! 30 s, and holds the notices after it (nothing is skipped or lost). A
//! restart, even after SIGKILL, sends again at most the notice that was
//! being delivered, under the same idempotency key. An approval decided
//! before its notice was made is not told. With `remind_after_seconds`, an
//! approval still pending that long after its request is told once more
//! (kind `reminder`); a restart rebuilds what waits from the database, and
//! may remind again (same key).

mod config;
mod deliver;
mod notice;
mod reminders;

use std::path::PathBuf;
use std::time::Duration;

use agentrt::follow::{Cursor, FileCursor};
use agentrt::{Cancel, Clock, Event, EventType, Store, system_clock};

pub use config::{
    Channel, ChatChannel, ConfigError, EmailChannel, NotifyConfig, PageLinks, Security,
    WebhookChannel,
};
pub use deliver::IDEMPOTENCY_HEADER;
pub use notice::{Link, Notice, NoticeKind, RunEnd};

use crate::signature::Secret;
use deliver::{Channels, Destination};
use notice::{Tell, notice_for};
use reminders::Reminders;

/// Events read at a time.
const PAGE: u64 = 500;
/// How long one wait for a commit lasts before looking again.
const WAIT: Duration = Duration::from_secs(60);
/// The first pause after a failed attempt.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// With `once`, the attempts at one destination before giving up (under
/// 2 s of pauses): a run from cron ends with an error instead of waiting
/// for a receiver forever.
const ONCE_ATTEMPTS: u32 = 4;

/// Why notifying stopped or did not start.
#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// The configuration cannot be used.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The channels cannot be set up (a page without its secret, a TLS
    /// setup).
    #[error("notify: {0}")]
    Setup(String),
    /// The database cannot be opened.
    #[error(transparent)]
    Approver(#[from] crate::ApproverError),
    /// The database or the cursor failed.
    #[error(transparent)]
    Store(#[from] agentrt::Error),
    /// With `once`: a destination did not take a notice after several
    /// attempts. The cursor stays before that notice's event.
    #[error("{destination} did not take {key} after {attempts} attempts: {last}")]
    Undelivered {
        /// The destination, as failure lines name it.
        destination: String,
        /// The notice's idempotency key.
        key: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last attempt's error.
        last: String,
    },
}

/// How a delivery ended short of success.
enum Undelivered {
    /// `stop` fired.
    Stopped,
    /// The attempts ran out (`once`).
    GaveUp(NotifyError),
}

/// Follows a database and tells its destinations.
pub struct Notifier {
    channels: Channels,
    clock: Clock,
    log: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("config", self.channels.config())
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier for `config`; `page_secret` (the secret `serve` uses)
    /// signs the page links and is needed when the config sets `page`.
    pub fn new(config: NotifyConfig, page_secret: Option<Secret>) -> Result<Notifier, NotifyError> {
        Ok(Notifier {
            channels: Channels::new(config, page_secret).map_err(NotifyError::Setup)?,
            clock: system_clock(),
            log: Box::new(|line| eprintln!("agentrt-approver: notify: {line}")),
        })
    }

    /// Judges reminders with `clock` instead of the wall clock. For tests.
    #[doc(hidden)]
    pub fn with_clock(mut self, clock: Clock) -> Notifier {
        self.clock = clock;
        self
    }

    /// Tells failed deliveries and skipped approvals to `log` instead of
    /// stderr.
    pub fn with_log(mut self, log: impl Fn(&str) + Send + Sync + 'static) -> Notifier {
        self.log = Box::new(log);
        self
    }

    /// Follows the database at `db` (a SQLite file, opened read-only, or a
    /// `postgres://` URL) from the position in `cursor` until `stop`, or
    /// with `once` until caught up (reminders are not waited for then, and
    /// a destination that does not take a notice after a few attempts ends
    /// it with [`NotifyError::Undelivered`]).
    pub async fn run(
        &self,
        db: PathBuf,
        cursor: PathBuf,
        once: bool,
        stop: &Cancel,
    ) -> Result<(), NotifyError> {
        let cursor = FileCursor::new(cursor);
        let (store, start) = blocking({
            let cursor = cursor.clone();
            move || {
                let store = crate::store_backed::open_read_only(&db)?;
                let mut cursor = cursor;
                let start = cursor.load()?;
                Ok::<_, NotifyError>((store, start))
            }
        })
        .await?;
        let mut reminders = Reminders::default();
        if let Some(after) = self.channels.config().remind_after {
            let now = (self.clock)();
            reminders = store
                .off_executor(move |s| Reminders::rebuild(s, after, now))
                .await?;
        }
        self.follow(&store, cursor, start, &mut reminders, once, stop)
            .await
    }

    async fn follow(
        &self,
        store: &Store,
        cursor: FileCursor,
        start: i64,
        reminders: &mut Reminders,
        once: bool,
        stop: &Cancel,
    ) -> Result<(), NotifyError> {
        let tell = Tell {
            run_failed: self.channels.config().run_failed,
        };
        let remind_after = self.channels.config().remind_after;
        let (mut after, mut saved) = (start, start);
        loop {
            if stop.is_cancelled() {
                break;
            }
            if !self.remind(store, reminders, stop).await? {
                break;
            }
            let page = store
                .off_executor(move |s| s.events_after_capped(None, after, PAGE))
                .await?;
            let mut stopped = false;
            for event in &page {
                reminders.forget(event);
                if !notice::may_tell(event, tell) {
                    after = event.seq;
                    continue;
                }
                let now = (self.clock)();
                let made = event.clone();
                let notice = store
                    .off_executor(move |s| notice_for(s, &made, tell, now))
                    .await?;
                if let Some(notice) = notice {
                    match self.deliver(&notice, stop, once).await {
                        Ok(()) => {}
                        Err(Undelivered::Stopped) => {
                            stopped = true;
                            break;
                        }
                        Err(Undelivered::GaveUp(e)) => {
                            if after != saved {
                                save(&cursor, after).await?;
                            }
                            return Err(e);
                        }
                    }
                    save(&cursor, event.seq).await?;
                    saved = event.seq;
                    if let Some(wait) = remind_after {
                        reminders.add(notice, wait);
                    }
                } else if skipped(event) {
                    (self.log)(&format!(
                        "run {}: an approval of seq {} was decided before its notice was made; not told",
                        agentrt::text::clip(&event.run_id, 80),
                        event.seq
                    ));
                }
                after = event.seq;
            }
            if after != saved {
                save(&cursor, after).await?;
                saved = after;
            }
            if stopped {
                break;
            }
            if page.len() as u64 == PAGE {
                continue;
            }
            if once {
                break;
            }
            let until_reminder = reminders.next_due().map(|due| {
                Duration::from_millis(due.millis_since(&(self.clock)()).saturating_add(1))
            });
            tokio::select! {
                waited = store.wait_for_event(after, WAIT) => { waited?; }
                () = sleep_or_never(until_reminder) => {}
                () = stop.cancelled() => break,
            }
        }
        Ok(())
    }

    /// Sends the reminders that are due: `false` when stopped meanwhile.
    async fn remind(
        &self,
        store: &Store,
        reminders: &mut Reminders,
        stop: &Cancel,
    ) -> Result<bool, NotifyError> {
        let now = (self.clock)();
        for waiting in reminders.take_due(now) {
            let Some(id) = waiting.approval.as_ref().map(|p| p.approval.id.clone()) else {
                continue;
            };
            let run = waiting.run_id.clone();
            let approval = store
                .off_executor(move |s| match s.get_approval_capped(&run, &id) {
                    Ok(a) => Ok(Some(a)),
                    Err(agentrt::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(e),
                })
                .await?;
            let Some(approval) = approval.filter(|a| a.status == agentrt::ApprovalStatus::Pending)
            else {
                continue;
            };
            let reminder = notice::reminder(&waiting, &approval, now);
            match self.deliver(&reminder, stop, false).await {
                Ok(()) => {}
                Err(Undelivered::Stopped) => return Ok(false),
                Err(Undelivered::GaveUp(e)) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Delivers `notice` to every destination, each tried until it takes
    /// it (with `once`, [`ONCE_ATTEMPTS`] times at most).
    async fn deliver(&self, notice: &Notice, stop: &Cancel, once: bool) -> Result<(), Undelivered> {
        for destination in self.channels.destinations() {
            self.deliver_to(destination, notice, stop, once).await?;
        }
        Ok(())
    }

    async fn deliver_to(
        &self,
        d: Destination,
        notice: &Notice,
        stop: &Cancel,
        once: bool,
    ) -> Result<(), Undelivered> {
        let mut pause = FIRST_BACKOFF;
        let mut attempts = 0;
        loop {
            if stop.is_cancelled() {
                return Err(Undelivered::Stopped);
            }
            attempts += 1;
            match self.channels.send(d, notice).await {
                Ok(()) => return Ok(()),
                Err(e) if once && attempts >= ONCE_ATTEMPTS => {
                    return Err(Undelivered::GaveUp(NotifyError::Undelivered {
                        destination: self.channels.name(d),
                        key: notice.idempotency_key.clone(),
                        attempts,
                        last: agentrt::text::clip(&e, 300),
                    }));
                }
                Err(e) => (self.log)(&format!(
                    "{}: {} not delivered ({}); again in {} ms",
                    self.channels.name(d),
                    notice.idempotency_key,
                    agentrt::text::clip(&e, 300),
                    pause.as_millis()
                )),
            }
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = stop.cancelled() => return Err(Undelivered::Stopped),
            }
            pause = (pause * 2).min(MAX_BACKOFF);
        }
    }
}

/// An approval request that made no notice: decided before it was told.
fn skipped(event: &Event) -> bool {
    event.event_type == EventType::ApprovalRequested
}

async fn sleep_or_never(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// Saves the position on the blocking pool (a synced file).
async fn save(cursor: &FileCursor, seq: i64) -> Result<(), NotifyError> {
    let cursor = cursor.clone();
    blocking(move || {
        let mut cursor = cursor;
        cursor.save(seq).map_err(NotifyError::Store)
    })
    .await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, NotifyError> + Send + 'static,
) -> Result<T, NotifyError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| NotifyError::Setup(format!("a blocking task failed: {e}")))?
}
