//! Helpers every adapter shares that need no HTTP client: limits, the
//! transient statuses, `Retry-After`, the loopback rule, text excerpts and
//! tool-use ids. Compiled with any feature set.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentrt::ModelError;

/// The most bytes of a response body an adapter reads (16 MiB). A body of
/// exactly this size is fine; one byte more is a permanent error.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// How much of an unread body (a redirect's, say) is drained before the
/// connection is dropped.
pub const MAX_DRAIN_BYTES: usize = 64 << 10;

/// The backstop timeout of a client an adapter builds itself (15 minutes).
/// It is not the deadline: the caller's own deadline is what bounds a call;
/// this only stops a request with none from hanging forever.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// How much of an error body a status error repeats, in bytes.
pub const MAX_EXCERPT_BYTES: usize = 2048;

/// How much of a server's or model's text a served error repeats, in bytes.
pub const MAX_ECHO_BYTES: usize = 512;

/// The longest `Retry-After` honoured; a longer one counts as absent.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// Whether an HTTP status is worth retrying: 408, 409, 425, 429 and every
/// status from 500 up (Anthropic's 529 included).
///
/// ```
/// use agentrt_provider::shared::is_transient_status;
///
/// for s in [408, 409, 425, 429, 500, 503, 529] { assert!(is_transient_status(s)); }
/// for s in [400, 401, 403, 404, 413, 422] { assert!(!is_transient_status(s)); }
/// ```
#[must_use]
pub fn is_transient_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429) || status >= 500
}

/// The delay a `Retry-After` header value asks for, given the time now:
/// integer seconds or an HTTP date (IMF-fixdate, RFC 850 or asctime form).
/// `None` when the value does not parse, is negative or zero, or is more
/// than [`MAX_RETRY_AFTER`].
///
/// ```
/// use std::time::Duration;
/// use agentrt_provider::shared::retry_after;
///
/// let now: jiff::Timestamp = "2026-11-29T10:00:00Z".parse().unwrap();
/// assert_eq!(retry_after("2", now), Some(Duration::from_secs(2)));
/// assert_eq!(retry_after("Sun, 29 Nov 2026 10:00:30 GMT", now), Some(Duration::from_secs(30)));
/// for junk in ["-1", "3601", "soon", "1.5", ""] { assert_eq!(retry_after(junk, now), None); }
/// ```
#[must_use]
pub fn retry_after(value: &str, now: jiff::Timestamp) -> Option<Duration> {
    let value = value.trim();
    if value.is_empty() {
        return None;
    }
    if value.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = value.parse().ok()?;
        let delay = Duration::from_secs(seconds);
        return (!delay.is_zero() && delay <= MAX_RETRY_AFTER).then_some(delay);
    }
    let at = http_date(value)?;
    let delay = Duration::try_from(at.duration_since(now)).ok()?;
    (!delay.is_zero() && delay <= MAX_RETRY_AFTER).then_some(delay)
}

/// Parses the three HTTP-date forms of RFC 9110 §5.6.7.
fn http_date(value: &str) -> Option<jiff::Timestamp> {
    use jiff::fmt::{rfc2822, strtime};
    static RFC2822: rfc2822::DateTimeParser = rfc2822::DateTimeParser::new();
    if let Ok(ts) = RFC2822.parse_timestamp(value) {
        return Some(ts);
    }
    for format in ["%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y"] {
        if let Ok(tm) = strtime::parse(format, value)
            && let Ok(dt) = tm.to_datetime()
            && let Ok(ts) = jiff::tz::Offset::UTC.to_timestamp(dt)
        {
            return Some(ts);
        }
    }
    None
}

/// Whether `host` names this machine: exactly `localhost`, or a literal
/// loopback IP address (IPv6 may be bracketed; an IPv4-mapped IPv6
/// loopback counts; a zone does not). Spellings that resolve to loopback
/// only by convention or by a lenient parser do not count.
///
/// ```
/// use agentrt_provider::loopback;
///
/// for yes in ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]", "::ffff:127.0.0.1"] {
///     assert!(loopback(yes), "{yes}");
/// }
/// for no in ["LOCALHOST", "localhost.", "a.localhost", "127.1", "2130706433", "::1%lo", "10.0.0.1", ""] {
///     assert!(!loopback(no), "{no}");
/// }
/// ```
#[must_use]
pub fn loopback(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    match bare.parse::<IpAddr>() {
        Ok(ip) => loopback_ip(ip),
        Err(_) => false,
    }
}

/// Whether an address is loopback, an IPv4-mapped IPv6 loopback included.
#[must_use]
pub fn loopback_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || mapped_v4(v6).is_some_and(|v4| v4.is_loopback()),
    }
}

fn mapped_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    v6.to_ipv4_mapped()
}

/// `s` cut to at most `max` bytes on a character boundary, with `…`
/// appended when it was cut.
///
/// ```
/// use agentrt_provider::shared::truncate;
///
/// assert_eq!(truncate("short", 10), "short");
/// assert_eq!(truncate("héllo", 2), "h…"); // never splits `é`
/// ```
#[must_use]
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + '…'.len_utf8());
    out.push_str(s.get(..end).unwrap_or_default());
    out.push('…');
    out
}

/// A body as an error repeats it: lossy UTF-8, trimmed, at most
/// [`MAX_EXCERPT_BYTES`].
#[must_use]
pub fn excerpt(body: &[u8]) -> String {
    truncate(String::from_utf8_lossy(body).trim(), MAX_EXCERPT_BYTES)
}

/// An id for the `index`-th tool call of a reply whose provider gave none:
/// `call_<unix-nanos>_<index>` (unique within a request is enough).
///
/// ```
/// let id = agentrt_provider::shared::tool_use_id(2);
/// assert!(id.starts_with("call_") && id.ends_with("_2"));
/// ```
#[must_use]
pub fn tool_use_id(index: usize) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("call_{nanos}_{index}")
}

/// The error for a provider's non-2xx, non-3xx status: a transient status
/// gives [`ModelError::Transient`] with `retry_after`, any other a permanent
/// [`ModelError::Other`]. The message is `<provider>: <status>: <excerpt>`
/// and never carries the request (so no credential).
///
/// ```
/// use std::time::Duration;
/// use agentrt::ModelError;
/// use agentrt_provider::shared::status_error;
///
/// let e = status_error("anthropic", 529, br#" {"type":"error"} "#, Some(Duration::from_secs(2)));
/// assert_eq!(e, ModelError::Transient {
///     message: r#"anthropic: 529: {"type":"error"}"#.into(),
///     retry_after: Some(Duration::from_secs(2)),
/// });
/// assert!(matches!(status_error("openai", 401, b"no", None), ModelError::Status { status: 401, .. }));
/// ```
#[must_use]
pub fn status_error(
    provider: &str,
    status: u16,
    body: &[u8],
    retry_after: Option<Duration>,
) -> ModelError {
    let message = format!("{provider}: {status}: {}", excerpt(body));
    if is_transient_status(status) {
        ModelError::Transient {
            message,
            retry_after,
        }
    } else {
        ModelError::Status { status, message }
    }
}

/// Checks a tool call's arguments as a provider returned them: blank or
/// `null` becomes `{}`; a JSON object is returned as written (trimmed);
/// anything else is `None`, which the adapter turns into a served error.
///
/// ```
/// use agentrt_provider::shared::object_args;
///
/// assert_eq!(object_args(" ").as_deref(), Some("{}"));
/// assert_eq!(object_args("null").as_deref(), Some("{}"));
/// assert_eq!(object_args(r#"{"n": 9007199254740993}"#).as_deref(), Some(r#"{"n": 9007199254740993}"#));
/// assert_eq!(object_args("[1]"), None);
/// assert_eq!(object_args(r#"{"a":"#), None);
/// ```
#[must_use]
pub fn object_args(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if raw.is_empty() || raw == "null" {
        return Some("{}".to_owned());
    }
    if !raw.starts_with('{') {
        return None;
    }
    serde_json::from_str::<serde::de::IgnoredAny>(raw).ok()?;
    Some(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-11-29T10:00:00Z".parse().unwrap_or_default()
    }

    #[test]
    fn retry_after_reads_seconds_and_every_http_date_form() {
        let n = now();
        assert_eq!(retry_after(" 2 ", n), Some(Duration::from_secs(2)));
        assert_eq!(retry_after("3600", n), Some(MAX_RETRY_AFTER));
        for (value, secs) in [
            ("Sun, 29 Nov 2026 10:00:30 GMT", 30),
            ("Sunday, 29-Nov-26 10:01:00 GMT", 60),
            ("Sun Nov 29 10:00:05 2026", 5),
        ] {
            assert_eq!(
                retry_after(value, n),
                Some(Duration::from_secs(secs)),
                "{value}"
            );
        }
    }

    #[test]
    fn retry_after_ignores_negative_zero_late_and_junk() {
        let n = now();
        for value in [
            "-1",
            "0",
            "3601",
            "+3",
            "1e3",
            "2.0",
            "soon",
            "99999999999999999999999",
            "Sun, 29 Nov 2026 09:59:00 GMT",
            "Sun, 29 Nov 2026 11:00:01 GMT",
        ] {
            assert_eq!(retry_after(value, n), None, "{value}");
        }
    }

    #[test]
    fn transient_statuses() {
        for s in [408, 409, 425, 429, 500, 502, 503, 504, 529, 599] {
            assert!(is_transient_status(s), "{s}");
        }
        for s in [200, 301, 400, 401, 403, 404, 410, 413, 422, 426, 499] {
            assert!(!is_transient_status(s), "{s}");
        }
    }

    #[test]
    fn excerpts_are_trimmed_and_capped_on_a_character_boundary() {
        let long = format!(
            "  {}é{}  ",
            "a".repeat(MAX_EXCERPT_BYTES - 1),
            "b".repeat(10)
        );
        let e = excerpt(long.as_bytes());
        assert!(e.ends_with('…'));
        assert!(e.len() <= MAX_EXCERPT_BYTES + '…'.len_utf8());
        assert!(!e.contains('é'));
        assert_eq!(excerpt(b"\xff ok "), "\u{fffd} ok");
    }

    #[test]
    fn loopback_ips() {
        assert!(loopback_ip(
            "127.0.0.1"
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        ));
        assert!(loopback_ip(
            "::ffff:127.0.0.1"
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        ));
        assert!(!loopback_ip(
            "93.184.216.34"
                .parse()
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED))
        ));
        assert!(!loopback("127.0.0.01"));
    }
}
