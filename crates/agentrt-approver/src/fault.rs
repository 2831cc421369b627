//! Internal failures (the answers with status 500): the caller is told
//! only "internal error"; the cause goes to the operator, one line on
//! standard error (`agentrt-approver: internal error: <where>: <cause>`).
//!
//! The line is written by a thread of its own through a bounded queue, so
//! a standard error nobody reads never holds a request: when the queue is
//! full the line is dropped and counted, and the next line written says how
//! many were. The cause is the approver's or the store's own error, made
//! one line by `agentrt::text::sanitize` and bounded; it never holds the
//! webhook's secret or a request's body (the store never shows a database
//! password either).

use std::fmt::Display;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};

/// Lines waiting to be written.
const QUEUE: usize = 256;

/// The most bytes of a cause in one line.
const MAX_CAUSE: usize = 1000;

struct FaultLog {
    lines: SyncSender<String>,
    dropped: AtomicU64,
}

fn log() -> Option<&'static FaultLog> {
    static LOG: OnceLock<Option<FaultLog>> = OnceLock::new();
    LOG.get_or_init(|| {
        let (lines, queue) = sync_channel::<String>(QUEUE);
        std::thread::Builder::new()
            .name("agentrt-approver-faults".into())
            .spawn(move || {
                use std::io::Write;
                for line in queue {
                    let _ = writeln!(std::io::stderr().lock(), "{line}");
                }
            })
            .ok()?;
        Some(FaultLog {
            lines,
            dropped: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// The line [`report`] writes.
fn line(place: &str, cause: &str, dropped: u64) -> String {
    let mut cause = agentrt::text::sanitize(cause);
    if cause.len() > MAX_CAUSE {
        let mut end = MAX_CAUSE;
        while !cause.is_char_boundary(end) {
            end -= 1;
        }
        cause.truncate(end);
        cause.push_str(" […]");
    }
    let mut line = format!("agentrt-approver: internal error: {place}: {cause}");
    if dropped > 0 {
        line.push_str(&format!(
            " ({dropped} earlier line(s) dropped: standard error was not read)"
        ));
    }
    line
}

/// Tells the operator why a request at `place` failed inside.
pub(crate) fn report(place: &str, cause: &dyn Display) {
    let Some(log) = log() else {
        return;
    };
    let dropped = log.dropped.swap(0, Ordering::Relaxed);
    match log.lines.try_send(line(place, &cause.to_string(), dropped)) {
        Ok(()) => {}
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
            log.dropped.fetch_add(dropped + 1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_one_bounded_line_that_counts_what_was_dropped() {
        let text = line("GET /runs/r1/approvals", "no such table:\napprovals", 0);
        assert_eq!(
            text,
            "agentrt-approver: internal error: GET /runs/r1/approvals: no such table: approvals"
        );
        let long = line("p", &"é".repeat(2000), 3);
        assert!(long.contains(" […]"), "{long}");
        assert!(long.len() < MAX_CAUSE + 200, "{}", long.len());
        assert!(long.ends_with("(3 earlier line(s) dropped: standard error was not read)"));
    }
}
