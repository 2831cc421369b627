//! Calls in flight and stopping (design §39): on stdin
//! close or SIGINT/SIGTERM the proxy stops taking calls, ends the calls
//! held on an approval, and lets the calls executing upstream finish and
//! be recorded before it closes the upstream servers. A call dropped
//! half-way would leave its run running, to be taken over later as
//! interrupted: waiting for it is what keeps a clean stop clean.

use tokio::sync::watch;

/// The calls in flight and whether the proxy is stopping.
pub(crate) struct Flights {
    in_flight: watch::Sender<usize>,
    stopping: watch::Sender<bool>,
}

/// One call in flight; it lands when dropped.
pub(crate) struct Boarded<'a>(&'a watch::Sender<usize>);

impl Drop for Boarded<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Flights {
    pub(crate) fn new() -> Flights {
        Flights {
            in_flight: watch::Sender::new(0),
            stopping: watch::Sender::new(false),
        }
    }

    /// Counts a call in flight; `None` once the proxy is stopping.
    pub(crate) fn board(&self) -> Option<Boarded<'_>> {
        // Counted first, then checked: a stop that lands between the two
        // still waits for this call, which then turns itself away.
        self.in_flight.send_modify(|n| *n += 1);
        let boarded = Boarded(&self.in_flight);
        if *self.stopping.borrow() {
            return None;
        }
        Some(boarded)
    }

    /// Stops taking calls and ends the holds.
    pub(crate) fn stop(&self) {
        self.stopping.send_replace(true);
    }

    /// Resolves once the proxy is stopping.
    pub(crate) async fn stopping(&self) {
        let mut stopping = self.stopping.subscribe();
        // The sender lives in `self`: the wait cannot fail while borrowed.
        let _ = stopping.wait_for(|s| *s).await;
    }

    /// Resolves when no call is in flight.
    pub(crate) async fn landed(&self) {
        let mut in_flight = self.in_flight.subscribe();
        let _ = in_flight.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stop_turns_new_calls_away_and_waits_for_those_in_flight() {
        let flights = Flights::new();
        let boarded = flights.board().expect("taken before the stop");
        flights.stop();
        assert!(flights.board().is_none(), "turned away after the stop");
        flights.stopping().await;
        let waited = std::time::Duration::from_millis(20);
        assert!(
            tokio::time::timeout(waited, flights.landed())
                .await
                .is_err(),
            "a call is still in flight"
        );
        drop(boarded);
        flights.landed().await;
    }
}
