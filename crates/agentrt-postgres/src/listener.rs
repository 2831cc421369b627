//! The change signal's task: a connection of its own that `LISTEN`s on the
//! commit channel and announces every notice's head seq, for as long as
//! anyone waits. A connection the server ends (a restart, an operator) is
//! replaced while anyone still waits, and the head read anew once the new
//! `LISTEN` is in effect: a commit made while no connection listened is
//! announced too, so a waiter wakes instead of running into its timeout.
//! A listening connection sends nothing of its own, so one whose path died
//! silently (a partition, a server host gone) would never be noticed: with
//! a silence limit, the task asks the server for an answer every half of
//! it, and replaces a connection that gives none within the limit.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use agentrt::Result;
use agentrt::store::engine::ChangeSignal;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_postgres::{AsyncMessage, Client, Connection};

use crate::endpoint::{Endpoint, Opened, silent};
use crate::error::pg_error;
use crate::group::LISTEN;

/// How often the task checks whether anyone still waits.
const WATCH_TICK: Duration = Duration::from_millis(500);

/// The first pause before connecting again; it doubles up to
/// [`RECONNECT_MAX`] while the server stays away.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The chain head's seq, read once `LISTEN` is in effect.
const HEAD_SEQ: &str = "SELECT head_seq FROM agentrt_chain WHERE id = 1";

/// The question a listening connection is asked to show it still answers.
const PING: &str = "SELECT 1";

/// Whether the first `LISTEN` took effect (or why not).
pub(crate) type Ready = oneshot::Sender<Result<()>>;

/// How one connection's listening ended.
enum Ended {
    /// Nobody waits any more, or the store is gone.
    Unwanted,
    /// The connection broke or could not be made, after `LISTEN` took
    /// effect on it.
    Broken,
    /// The connection broke, or `LISTEN` failed, before it took effect.
    NeverListened,
}

/// Listens on `endpoint` for `signal` until nobody waits; says on `ready`
/// when the first `LISTEN` took effect, or why it did not (then it stops).
pub(crate) async fn listen(endpoint: Endpoint, signal: ChangeSignal, ready: Ready) {
    let mut ready = Some(ready);
    let mut pause = RECONNECT_FIRST;
    loop {
        let first = ready.is_some();
        let limit = endpoint.silence_limit();
        let ended = match endpoint.open().await {
            Ok(Opened::Plain(client, connection)) => {
                listen_on(client, *connection, &signal, &mut ready, limit).await
            }
            Ok(Opened::Tls(client, connection)) => {
                listen_on(client, *connection, &signal, &mut ready, limit).await
            }
            Err(e) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                }
                Ended::NeverListened
            }
        };
        // A first connection that never listened stops here: the
        // subscriber was told (or sees this task end), and the next waiter
        // starts another.
        let never_listened = first && matches!(ended, Ended::NeverListened);
        if never_listened || matches!(ended, Ended::Unwanted) || !signal.wanted() {
            return;
        }
        if matches!(ended, Ended::Broken) {
            // It listened: the server went away since, so start over.
            pause = RECONNECT_FIRST;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RECONNECT_MAX);
        if !signal.wanted() {
            return;
        }
    }
}

/// Listens on one connection: `LISTEN`, then the head (announced), then
/// every notice, until nobody waits or the connection breaks or, with a
/// silence `limit`, leaves the subscription or a ping unanswered for that
/// long. Tells `ready`, if still untold, whether `LISTEN` took effect.
async fn listen_on<S, T>(
    client: Client,
    mut connection: Connection<S, T>,
    signal: &ChangeSignal,
    ready: &mut Option<Ready>,
    limit: Option<Duration>,
) -> Ended
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let listening = async {
        client.batch_execute(LISTEN).await?;
        client.query_one(HEAD_SEQ, &[]).await?.try_get::<_, i64>(0)
    };
    let mut subscribing = Some(Box::pin(listening));
    let mut tick = tokio::time::interval(WATCH_TICK);
    // The request awaiting its answer (the subscription first, then each
    // ping) must have it by this deadline; the next ping is due at
    // `ping_due`. Far off without a limit.
    let far = Duration::from_secs(86_400 * 365);
    let patience = limit.unwrap_or(far);
    let mut deadline = Box::pin(tokio::time::sleep(patience));
    let mut ping_due = Box::pin(tokio::time::sleep(far));
    // The ping awaiting its answer: whether it came.
    let mut ping: Option<Pin<Box<dyn Future<Output = bool> + Send + '_>>> = None;
    loop {
        let heard = std::future::poll_fn(|cx| {
            if let Some(subscription) = subscribing.as_mut()
                && let Poll::Ready(outcome) = subscription.as_mut().poll(cx)
            {
                subscribing = None;
                return Poll::Ready(Heard::Subscribed(outcome));
            }
            if let Some(answer) = ping.as_mut()
                && let Poll::Ready(outcome) = answer.as_mut().poll(cx)
            {
                ping = None;
                return Poll::Ready(Heard::Answered(outcome));
            }
            let awaiting = subscribing.is_some() || ping.is_some();
            if awaiting && deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Heard::Silent);
            }
            if !awaiting && ping_due.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Heard::PingDue);
            }
            // Not before the first `LISTEN` took effect: the subscriber
            // holds the store's watcher lock until then, which `wanted`
            // takes.
            if ready.is_none() && tick.poll_tick(cx).is_ready() && !signal.wanted() {
                return Poll::Ready(Heard::Unwanted);
            }
            connection.poll_message(cx).map(|message| match message {
                Some(Ok(AsyncMessage::Notification(notice))) => {
                    Heard::Notice(notice.payload().parse::<i64>().unwrap_or(0))
                }
                Some(Ok(_)) => Heard::Other,
                Some(Err(_)) | None => Heard::Closed,
            })
        })
        .await;
        match heard {
            Heard::Subscribed(Ok(head)) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
                if let Some(limit) = limit {
                    ping_due.as_mut().reset(Instant::now() + limit / 2);
                }
                if !signal.announce(head) {
                    return Ended::Unwanted;
                }
            }
            Heard::Subscribed(Err(e)) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(pg_error(&e)));
                }
                return Ended::NeverListened;
            }
            Heard::PingDue => {
                let asking = client.batch_execute(PING);
                ping = Some(Box::pin(async move { asking.await.is_ok() }));
                deadline.as_mut().reset(Instant::now() + patience);
            }
            Heard::Answered(true) => {
                if let Some(limit) = limit {
                    ping_due.as_mut().reset(Instant::now() + limit / 2);
                }
            }
            Heard::Notice(seq) => {
                if !signal.announce(seq) {
                    return Ended::Unwanted;
                }
            }
            Heard::Other => {}
            Heard::Silent if subscribing.is_some() => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(silent(patience, "subscribing to commits")));
                }
                return Ended::NeverListened;
            }
            Heard::Closed if subscribing.is_some() => return Ended::NeverListened,
            Heard::Closed | Heard::Silent | Heard::Answered(false) => return Ended::Broken,
            Heard::Unwanted => return Ended::Unwanted,
        }
    }
}

/// What the listening task heard.
enum Heard {
    /// `LISTEN` took effect (with the head's seq), or failed.
    Subscribed(std::result::Result<i64, tokio_postgres::Error>),
    /// The connection has been quiet for half the silence limit: time to
    /// ask it something.
    PingDue,
    /// The ping's answer came (`true`), or the connection failed it.
    Answered(bool),
    /// The subscription or a ping went unanswered for the silence limit.
    Silent,
    /// A notice of a commit, with the head seq it left.
    Notice(i64),
    /// Another message from the server.
    Other,
    /// The connection broke or the server closed it.
    Closed,
    /// Nobody waits any more.
    Unwanted,
}
