//! A token bucket: `rate` tokens a second, at most `burst` held, one taken
//! per request. The webhook has two, one for verified requests to a route
//! and one for everything else.

use agentrt::Timestamp;

#[derive(Debug)]
pub(crate) struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    /// When the tokens were last counted, Unix nanoseconds.
    counted_at: Option<i128>,
}

impl Bucket {
    pub(crate) fn new(rate: u32, burst: u32) -> Bucket {
        Bucket {
            rate: f64::from(rate),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            counted_at: None,
        }
    }

    /// Takes a token at `now` if there is one.
    pub(crate) fn take(&mut self, now: Timestamp) -> bool {
        let now = now.as_unix_nanos();
        if let Some(then) = self.counted_at {
            // A clock that steps back refills nothing.
            let elapsed = (now - then).max(0) as f64 / 1e9;
            self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        }
        self.counted_at = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_burst_passes_then_the_rate_refills_it() {
        let start = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
        let mut bucket = Bucket::new(2, 3);
        assert!((0..3).all(|_| bucket.take(start)));
        assert!(!bucket.take(start));
        let half = start.add(Duration::from_millis(500));
        assert!(bucket.take(half), "one token back after half a second");
        assert!(!bucket.take(half));
        let later = start.add(Duration::from_secs(60));
        assert!(
            (0..3).all(|_| bucket.take(later)),
            "never more than the burst"
        );
        assert!(!bucket.take(later));
    }
}
