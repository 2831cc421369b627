//! Start times: RFC 3339 text as the result file writes it (Go's
//! `time.Time` JSON form), kept with its UTC offset so that a file that was
//! read is written back with the same bytes.

use std::cmp::Ordering;
use std::fmt;

const SECONDS_PER_DAY: i64 = 86_400;

/// An instant with the UTC offset it was written in, nanosecond precision,
/// years 0000 to 9999 in its own offset.
///
/// Written as Go writes `time.Time` in JSON: `2006-01-02T15:04:05.999999999Z07:00`
/// with trailing zeros of the fraction trimmed (and no fraction when it is
/// zero), `Z` for a zero offset.
///
/// Equality compares the instant and the offset; order instants with
/// [`Timestamp::cmp_instant`].
///
/// ```
/// use agentrt_bench::Timestamp;
/// let t = Timestamp::parse("2026-09-25T20:04:11.413822000Z").unwrap();
/// assert_eq!(t.to_rfc3339(), "2026-09-25T20:04:11.413822Z");
/// assert_eq!(t.utc_seconds(), "2026-09-25T20:04:11Z");
/// let t = Timestamp::parse("2026-09-25T22:04:11+02:00").unwrap();
/// assert_eq!(t.utc_seconds(), "2026-09-25T20:04:11Z");
/// assert_eq!(t.to_rfc3339(), "2026-09-25T22:04:11+02:00");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Timestamp {
    /// Seconds since 1970-01-01T00:00:00Z.
    unix_seconds: i64,
    /// Nanoseconds within the second, below 1e9.
    nanos: u32,
    /// Offset from UTC in seconds, east positive.
    offset_seconds: i32,
}

/// Why a text is not an RFC 3339 time this format accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimestampError {
    /// The text does not have the shape `YYYY-MM-DDTHH:MM:SS[.F]Z` or
    /// `...±HH:MM`.
    Shape,
    /// A part is out of its range (month 13, day 31 of April, hour 24...).
    OutOfRange {
        /// Which part: year, month, day, hour, minute, second, offset.
        part: &'static str,
    },
    /// Nanoseconds of 1e9 or more, or an offset beyond ±23:59.
    Invalid,
}

impl fmt::Display for TimestampError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimestampError::Shape => {
                f.write_str("not an RFC 3339 time like 2026-09-25T20:04:11.413822Z")
            }
            TimestampError::OutOfRange { part } => write!(f, "the {part} is out of range"),
            TimestampError::Invalid => f.write_str("nanoseconds or offset out of range"),
        }
    }
}

impl std::error::Error for TimestampError {}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Parses `len` ASCII digits at `at`.
fn digits(b: &[u8], at: usize, len: usize) -> Option<u32> {
    let part = b.get(at..at + len)?;
    part.iter().try_fold(0u32, |n, &c| {
        c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
    })
}

fn ranged(v: u32, lo: u32, hi: u32, part: &'static str) -> Result<u32, TimestampError> {
    if (lo..=hi).contains(&v) {
        Ok(v)
    } else {
        Err(TimestampError::OutOfRange { part })
    }
}

/// A civil date and time in some offset.
struct Civil {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
}

impl Civil {
    fn of(seconds: i64) -> Civil {
        let days = seconds.div_euclid(SECONDS_PER_DAY);
        let secs = seconds.rem_euclid(SECONDS_PER_DAY);
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (secs / 3600) as u32,
            minute: (secs % 3600 / 60) as u32,
            second: (secs % 60) as u32,
        }
    }

    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        if self.year < 0 {
            out.push('-');
        }
        let _ = write!(
            out,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            self.year.unsigned_abs(),
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second
        );
    }
}

impl Timestamp {
    /// An instant from seconds and nanoseconds since 1970-01-01T00:00:00Z
    /// and the UTC offset (seconds east) to write it in.
    ///
    /// Refuses nanoseconds of 1e9 or more and offsets beyond ±23:59.
    pub fn from_unix(
        unix_seconds: i64,
        nanos: u32,
        offset_seconds: i32,
    ) -> Result<Timestamp, TimestampError> {
        if nanos >= 1_000_000_000 || offset_seconds.unsigned_abs() >= 86_400 {
            return Err(TimestampError::Invalid);
        }
        Ok(Timestamp {
            unix_seconds,
            nanos,
            offset_seconds,
        })
    }

    /// An instant in UTC from seconds and nanoseconds since the Unix epoch.
    pub fn from_unix_utc(unix_seconds: i64, nanos: u32) -> Result<Timestamp, TimestampError> {
        Timestamp::from_unix(unix_seconds, nanos, 0)
    }

    /// The current time, in UTC.
    pub fn now() -> Timestamp {
        let (unix_seconds, nanos) =
            match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
                Ok(d) => (
                    i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                    d.subsec_nanos(),
                ),
                Err(e) => {
                    let d = e.duration();
                    let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
                    if d.subsec_nanos() == 0 {
                        (-secs, 0)
                    } else {
                        (-secs - 1, 1_000_000_000 - d.subsec_nanos())
                    }
                }
            };
        Timestamp {
            unix_seconds,
            nanos,
            offset_seconds: 0,
        }
    }

    /// Parses RFC 3339 text strictly, as Go's `time.Time` JSON decoding
    /// does: four-digit year, `T`, two-digit fields, an optional `.`
    /// fraction (digits past the ninth are dropped), and `Z` or `±HH:MM`.
    pub fn parse(text: &str) -> Result<Timestamp, TimestampError> {
        let b = text.as_bytes();
        let shape = b.len() >= 20
            && b[4] == b'-'
            && b[7] == b'-'
            && b[10] == b'T'
            && b[13] == b':'
            && b[16] == b':';
        if !shape {
            return Err(TimestampError::Shape);
        }
        let field = |at, len| digits(b, at, len).ok_or(TimestampError::Shape);
        let year = i64::from(field(0, 4)?);
        let month = ranged(field(5, 2)?, 1, 12, "month")?;
        let day = ranged(field(8, 2)?, 1, days_in_month(year, month), "day")?;
        let hour = ranged(field(11, 2)?, 0, 23, "hour")?;
        let minute = ranged(field(14, 2)?, 0, 59, "minute")?;
        let second = ranged(field(17, 2)?, 0, 59, "second")?;
        let mut rest = &b[19..];
        let mut nanos = 0u32;
        if rest.len() >= 2 && rest[0] == b'.' && rest[1].is_ascii_digit() {
            let n = 1 + rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
            let mut scale = 100_000_000u32;
            for &c in &rest[1..n.min(10)] {
                nanos += u32::from(c - b'0') * scale;
                scale /= 10;
            }
            rest = &rest[n..];
        }
        let offset_seconds = match rest {
            [b'Z'] => 0,
            [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
                let hh = ranged(
                    digits(rest, 1, 2).ok_or(TimestampError::Shape)?,
                    0,
                    23,
                    "offset",
                )?;
                let mm = ranged(
                    digits(rest, 4, 2).ok_or(TimestampError::Shape)?,
                    0,
                    59,
                    "offset",
                )?;
                let off = (hh * 60 + mm) as i32 * 60;
                if *sign == b'-' { -off } else { off }
            }
            _ => return Err(TimestampError::Shape),
        };
        let local = days_from_civil(year, month, day) * SECONDS_PER_DAY
            + i64::from(hour * 3600 + minute * 60 + second);
        Ok(Timestamp {
            unix_seconds: local - i64::from(offset_seconds),
            nanos,
            offset_seconds,
        })
    }

    /// Seconds since 1970-01-01T00:00:00Z.
    pub fn unix_seconds(&self) -> i64 {
        self.unix_seconds
    }

    /// Nanoseconds within the second.
    pub fn nanos(&self) -> u32 {
        self.nanos
    }

    /// The UTC offset the time is written in, in seconds east of UTC.
    pub fn offset_seconds(&self) -> i32 {
        self.offset_seconds
    }

    /// Whether this is Go's zero time, 0001-01-01T00:00:00Z (in any
    /// offset): "no start time".
    pub fn is_zero(&self) -> bool {
        self.unix_seconds == days_from_civil(1, 1, 1) * SECONDS_PER_DAY && self.nanos == 0
    }

    /// Orders two timestamps by the instant they name, whatever their
    /// offsets.
    pub fn cmp_instant(&self, other: &Timestamp) -> Ordering {
        (self.unix_seconds, self.nanos).cmp(&(other.unix_seconds, other.nanos))
    }

    /// The result file's text: RFC 3339 in the timestamp's own offset,
    /// fraction trimmed of trailing zeros, `Z` for a zero offset.
    pub fn to_rfc3339(&self) -> String {
        let mut out = String::with_capacity(35);
        Civil::of(
            self.unix_seconds
                .saturating_add(i64::from(self.offset_seconds)),
        )
        .write(&mut out);
        if self.nanos != 0 {
            let frac = format!("{:09}", self.nanos);
            out.push('.');
            out.push_str(frac.trim_end_matches('0'));
        }
        if self.offset_seconds == 0 {
            out.push('Z');
        } else {
            let off = self.offset_seconds.unsigned_abs() / 60;
            out.push(if self.offset_seconds < 0 { '-' } else { '+' });
            out.push_str(&format!("{:02}:{:02}", off / 60, off % 60));
        }
        out
    }

    /// The instant in UTC to the second (truncated), as reports print it:
    /// `2026-09-25T20:04:11Z`.
    pub fn utc_seconds(&self) -> String {
        let mut out = String::with_capacity(20);
        Civil::of(self.unix_seconds).write(&mut out);
        out.push('Z');
        out
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl std::str::FromStr for Timestamp {
    type Err = TimestampError;
    fn from_str(s: &str) -> Result<Timestamp, TimestampError> {
        Timestamp::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_round_trip_over_a_wide_range() {
        for days in (-800_000..3_000_000).step_by(997) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn parses_and_writes_the_fixture_times() {
        for text in [
            "2026-09-23T00:00:00Z",
            "2026-09-25T20:04:11.413822Z",
            "2026-09-25T20:04:11.000000001Z",
            "2024-02-29T23:59:59.5-07:30",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59.999999999+23:59",
        ] {
            let t = Timestamp::parse(text).unwrap();
            assert_eq!(t.to_rfc3339(), text);
        }
        let t = Timestamp::parse("2026-09-25T20:04:11.413822Z").unwrap();
        assert_eq!(t.unix_seconds(), 1_790_366_651);
        assert_eq!(t.nanos(), 413_822_000);
    }

    #[test]
    fn normalizes_like_go() {
        let t = Timestamp::parse("2026-09-23T00:00:00.000+00:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-09-23T00:00:00Z");
        let t = Timestamp::parse("2026-09-23T00:00:00.1234567891234Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-09-23T00:00:00.123456789Z");
        let t = Timestamp::parse("2026-09-23T01:30:00+02:00").unwrap();
        assert_eq!(t.utc_seconds(), "2026-09-22T23:30:00Z");
    }

    #[test]
    fn refuses_what_go_refuses() {
        for text in [
            "",
            "2026-09-23",
            "2026-09-23 00:00:00Z",
            "2026-09-23T00:00:00",
            "2026-09-23T00:00:00z",
            "2026-13-01T00:00:00Z",
            "2026-02-29T00:00:00Z",
            "2026-09-23T24:00:00Z",
            "2026-09-23T00:60:00Z",
            "2026-09-23T00:00:60Z",
            "2026-09-23T00:00:00.Z",
            "2026-09-23T00:00:00+2:00",
            "2026-09-23T00:00:00+24:00",
            "+2026-09-23T00:00:00Z",
            "２026-09-23T00:00:00Z",
        ] {
            assert!(Timestamp::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn zero_is_go_zero_time_in_any_offset() {
        assert!(Timestamp::parse("0001-01-01T00:00:00Z").unwrap().is_zero());
        assert!(
            Timestamp::parse("0001-01-01T01:00:00+01:00")
                .unwrap()
                .is_zero()
        );
        assert!(
            !Timestamp::parse("0001-01-01T00:00:00.1Z")
                .unwrap()
                .is_zero()
        );
        assert!(!Timestamp::from_unix_utc(0, 0).unwrap().is_zero());
    }

    #[test]
    fn instants_compare_across_offsets() {
        let a = Timestamp::parse("2026-09-23T02:00:00+02:00").unwrap();
        let b = Timestamp::parse("2026-09-23T00:00:00Z").unwrap();
        assert_eq!(a.cmp_instant(&b), Ordering::Equal);
        assert_ne!(a, b);
        let c = Timestamp::parse("2026-09-23T00:00:00.000000001Z").unwrap();
        assert_eq!(b.cmp_instant(&c), Ordering::Less);
    }

    #[test]
    fn now_is_after_the_fixtures() {
        let fixture = Timestamp::parse("2020-01-01T00:00:00Z").unwrap();
        assert_eq!(Timestamp::now().cmp_instant(&fixture), Ordering::Greater);
    }
}
