//! The change signal's task: a connection of its own that `LISTEN`s on the
//! commit channel and announces every notice's head seq, for as long as
//! anyone waits. A connection the server ends (a restart, an operator) is
//! replaced while anyone still waits, and the head read anew once the new
//! `LISTEN` is in effect: a commit made while no connection listened is
//! announced too, so a waiter wakes instead of running into its timeout.

use std::task::Poll;
use std::time::Duration;

use agentrt::store::engine::ChangeSignal;
use tokio::sync::oneshot;
use tokio_postgres::{AsyncMessage, Client, Connection};

use crate::endpoint::{Endpoint, Opened};
use crate::group::LISTEN;

/// How often the task checks whether anyone still waits.
const WATCH_TICK: Duration = Duration::from_millis(500);

/// The first pause before connecting again; it doubles up to
/// [`RECONNECT_MAX`] while the server stays away.
const RECONNECT_FIRST: Duration = Duration::from_millis(100);
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The chain head's seq, read once `LISTEN` is in effect.
const HEAD_SEQ: &str = "SELECT head_seq FROM agentrt_chain WHERE id = 1";

/// Whether the first `LISTEN` took effect (or why not).
pub(crate) type Ready = oneshot::Sender<std::result::Result<(), tokio_postgres::Error>>;

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
        let ended = match endpoint.open().await {
            Ok(Opened::Plain(client, connection)) => {
                listen_on(client, *connection, &signal, &mut ready).await
            }
            Ok(Opened::Tls(client, connection)) => {
                listen_on(client, *connection, &signal, &mut ready).await
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
/// every notice, until nobody waits or the connection breaks. Tells
/// `ready`, if still untold, whether `LISTEN` took effect.
async fn listen_on<S, T>(
    client: Client,
    mut connection: Connection<S, T>,
    signal: &ChangeSignal,
    ready: &mut Option<Ready>,
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
    loop {
        let heard = std::future::poll_fn(|cx| {
            if let Some(subscription) = subscribing.as_mut()
                && let Poll::Ready(outcome) = subscription.as_mut().poll(cx)
            {
                subscribing = None;
                return Poll::Ready(Heard::Subscribed(outcome));
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
                if !signal.announce(head) {
                    return Ended::Unwanted;
                }
            }
            Heard::Subscribed(Err(e)) => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Err(e));
                }
                return Ended::NeverListened;
            }
            Heard::Notice(seq) => {
                if !signal.announce(seq) {
                    return Ended::Unwanted;
                }
            }
            Heard::Other => {}
            Heard::Closed if subscribing.is_some() => return Ended::NeverListened,
            Heard::Closed => return Ended::Broken,
            Heard::Unwanted => return Ended::Unwanted,
        }
    }
}

/// What the listening task heard.
enum Heard {
    /// `LISTEN` took effect (with the head's seq), or failed.
    Subscribed(std::result::Result<i64, tokio_postgres::Error>),
    /// A notice of a commit, with the head seq it left.
    Notice(i64),
    /// Another message from the server.
    Other,
    /// The connection broke or the server closed it.
    Closed,
    /// Nobody waits any more.
    Unwanted,
}
