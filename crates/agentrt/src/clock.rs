//! Time as the runtime records it: UTC instants stored as fixed-width
//! RFC 3339 text, an injectable clock for state changes, and the wall clock
//! that leases use.

use std::fmt;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A UTC instant with nanosecond precision.
///
/// Stored and exchanged as RFC 3339 text with a fixed nine-digit fraction
/// (`2026-10-01T09:00:00.000000000Z`), so text order is time order.
///
/// ```
/// use agentrt::Timestamp;
/// let t = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
/// assert_eq!(t.to_string(), "2026-10-01T09:00:00.000000000Z");
/// assert_eq!(t.add(std::time::Duration::from_millis(1500)).to_string(),
///            "2026-10-01T09:00:01.500000000Z");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(jiff::Timestamp);

/// A timestamp text that is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not an RFC 3339 timestamp: {detail}")]
pub struct TimestampError {
    /// The text that was refused.
    pub text: String,
    /// What the parser said.
    pub detail: String,
}

impl Timestamp {
    /// The system clock now.
    pub fn now() -> Timestamp {
        Timestamp(jiff::Timestamp::now())
    }

    /// The instant `nanos` nanoseconds after the Unix epoch (clamped to the
    /// representable range).
    pub fn from_unix_nanos(nanos: i128) -> Timestamp {
        let clamped = nanos.clamp(
            jiff::Timestamp::MIN.as_nanosecond(),
            jiff::Timestamp::MAX.as_nanosecond(),
        );
        Timestamp(jiff::Timestamp::from_nanosecond(clamped).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
    }

    /// Nanoseconds since the Unix epoch.
    pub fn as_unix_nanos(&self) -> i128 {
        self.0.as_nanosecond()
    }

    /// Parses RFC 3339 text (any fraction width, `Z` or an offset).
    pub fn parse(text: &str) -> Result<Timestamp, TimestampError> {
        text.parse::<jiff::Timestamp>()
            .map(Timestamp)
            .map_err(|e| TimestampError {
                text: text.to_owned(),
                detail: e.to_string(),
            })
    }

    /// The instant as a `jiff` timestamp, for formatting in a time zone.
    pub fn as_jiff(&self) -> jiff::Timestamp {
        self.0
    }

    /// This instant plus `d`, saturating at the end of representable time.
    pub fn add(&self, d: Duration) -> Timestamp {
        let nanos = i128::try_from(d.as_nanos()).unwrap_or(i128::MAX);
        Timestamp::from_unix_nanos(self.as_unix_nanos().saturating_add(nanos))
    }

    /// Whole milliseconds from `earlier` to `self`; 0 if `earlier` is later.
    pub fn millis_since(&self, earlier: &Timestamp) -> u64 {
        let diff = self.as_unix_nanos() - earlier.as_unix_nanos();
        if diff <= 0 {
            0
        } else {
            u64::try_from(diff / 1_000_000).unwrap_or(u64::MAX)
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}", self.0)
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Timestamp({self})")
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Timestamp::parse(s)
    }
}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Timestamp::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// The clock the runtime reads once per recorded state change (`Now`).
///
/// A function so tests can inject a fixed or stepping clock; see
/// [`ManualClock`].
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// The system clock as a [`Clock`].
pub fn system_clock() -> Clock {
    Arc::new(Timestamp::now)
}

/// A clock for tests: it returns a set instant, optionally advancing by a
/// fixed step after each reading, and counts its readings.
///
/// ```
/// use agentrt::{clock::ManualClock, Timestamp};
/// use std::time::Duration;
/// let clock = ManualClock::new(Timestamp::parse("2026-10-01T09:00:00Z").unwrap())
///     .stepping(Duration::from_secs(1));
/// let now = clock.clock();
/// assert_eq!(now().to_string(), "2026-10-01T09:00:00.000000000Z");
/// assert_eq!(now().to_string(), "2026-10-01T09:00:01.000000000Z");
/// assert_eq!(clock.readings(), 2);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    state: Arc<ManualState>,
}

struct ManualState {
    now: Mutex<Timestamp>,
    step: Mutex<Duration>,
    readings: AtomicU64,
}

impl ManualClock {
    /// A clock standing at `start`.
    pub fn new(start: Timestamp) -> ManualClock {
        ManualClock {
            state: Arc::new(ManualState {
                now: Mutex::new(start),
                step: Mutex::new(Duration::ZERO),
                readings: AtomicU64::new(0),
            }),
        }
    }

    /// Advance by `step` after every reading.
    pub fn stepping(self, step: Duration) -> ManualClock {
        *lock(&self.state.step) = step;
        self
    }

    /// Sets the current instant.
    pub fn set(&self, t: Timestamp) {
        *lock(&self.state.now) = t;
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let mut now = lock(&self.state.now);
        *now = now.add(d);
    }

    /// The instant the next reading returns, without counting a reading.
    pub fn peek(&self) -> Timestamp {
        *lock(&self.state.now)
    }

    /// How many times the clock was read.
    pub fn readings(&self) -> u64 {
        self.state.readings.load(Ordering::SeqCst)
    }

    /// This clock as a [`Clock`] to hand to the runtime.
    pub fn clock(&self) -> Clock {
        let state = Arc::clone(&self.state);
        Arc::new(move || {
            state.readings.fetch_add(1, Ordering::SeqCst);
            let step = *lock(&state.step);
            let mut now = lock(&state.now);
            let t = *now;
            *now = now.add(step);
            t
        })
    }
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it:
/// every value guarded here stays consistent across a panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_text_has_nine_fraction_digits_and_sorts_as_time() {
        let a = Timestamp::parse("2026-10-01T09:00:00.5Z").unwrap();
        let b = Timestamp::parse("2026-10-01T09:00:00.05Z").unwrap();
        assert_eq!(a.to_string(), "2026-10-01T09:00:00.500000000Z");
        assert_eq!(b.to_string(), "2026-10-01T09:00:00.050000000Z");
        assert!(b.to_string() < a.to_string());
        assert!(b < a);
    }

    #[test]
    fn offsets_are_normalised_to_utc() {
        let t = Timestamp::parse("2026-10-01T11:00:00+02:00").unwrap();
        assert_eq!(t.to_string(), "2026-10-01T09:00:00.000000000Z");
    }

    #[test]
    fn garbage_is_refused_with_the_text() {
        let e = Timestamp::parse("yesterday").unwrap_err();
        assert_eq!(e.text, "yesterday");
    }

    #[test]
    fn millis_since_saturates_at_zero() {
        let a = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
        let b = a.add(Duration::from_millis(2500));
        assert_eq!(b.millis_since(&a), 2500);
        assert_eq!(a.millis_since(&b), 0);
    }
}
