//! `events --follow [run]`: every event as JSON Lines as it commits, until
//! SIGINT or SIGTERM, the position kept in memory or in a cursor file.

use std::io::Write;

use agentrt::follow::{Cursor, FileCursor, FollowError, Follower, MemoryCursor};
use agentrt::{Store, cancel_pair, view};

use crate::args::FollowStart;
use crate::error::CliError;
use crate::output::line;

pub fn run(
    store: Store,
    run_id: Option<&str>,
    start: &FollowStart,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match start {
        FollowStart::After(seq) => {
            let seq = i64::try_from(*seq).unwrap_or(i64::MAX);
            follow(Follower::new(store, MemoryCursor { seq }), run_id, out)
        }
        FollowStart::Cursor(path) => {
            follow(Follower::new(store, FileCursor::new(path)), run_id, out)
        }
    }
}

fn follow<C: Cursor>(
    follower: Follower<C>,
    run_id: Option<&str>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut follower = match run_id {
        Some(id) => follower.run(id),
        None => follower,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the runtime: {e}")))?;
    runtime.block_on(async {
        let (handle, stop) = cancel_pair();
        // A signal stops the follower after the event in hand; the cursor
        // is saved before it returns.
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (mut term, mut int) = (
                signal(SignalKind::terminate())
                    .map_err(|e| CliError::Failed(format!("cannot watch signals: {e}")))?,
                signal(SignalKind::interrupt())
                    .map_err(|e| CliError::Failed(format!("cannot watch signals: {e}")))?,
            );
            tokio::spawn(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                handle.cancel();
            });
        }
        #[cfg(not(unix))]
        let _keep = handle;
        let sink = |event: &agentrt::Event| -> Result<(), CliError> {
            line(out, &view::event_record(event))?;
            // Seen as it commits, not when a buffer fills.
            out.flush().map_err(CliError::Output)
        };
        match follower.follow(sink, &stop, false).await {
            Ok(()) => Ok(()),
            Err(FollowError::Sink { source, .. }) => Err(source),
            Err(FollowError::Store(e)) => Err(e.into()),
        }
    })
}
