//! Output forms shared by the commands: local-time stamps, aligned text
//! tables, pretty JSON, and writes whose failures become exit status 1.

use std::io::Write;
use std::sync::OnceLock;

use agentrt::Timestamp;
use agentrt::text::sanitize;
use jiff::tz::TimeZone;

use crate::error::CliError;

fn local_zone() -> &'static TimeZone {
    static ZONE: OnceLock<TimeZone> = OnceLock::new();
    ZONE.get_or_init(TimeZone::system)
}

fn local_format(t: &Timestamp, format: &str) -> String {
    let zoned = t.as_jiff().to_zoned_datetime(local_zone().clone());
    jiff::fmt::strtime::format(format, &zoned).unwrap_or_else(|_| t.to_string())
}

/// `YYYY-MM-DD HH:MM:SS ±hhmm` in local time.
pub fn stamp(t: &Timestamp) -> String {
    local_format(t, "%Y-%m-%d %H:%M:%S %z")
}

/// `YYYY-MM-DD HH:MM:SS.mmm ±hhmm` in local time (trace lines).
pub fn stamp_ms(t: &Timestamp) -> String {
    local_format(t, "%Y-%m-%d %H:%M:%S%.3f %z")
}

/// Writes `text` and a newline.
pub fn line(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .map_err(CliError::Output)
}

/// Writes `text` as it is.
pub fn raw(out: &mut dyn Write, text: &str) -> Result<(), CliError> {
    out.write_all(text.as_bytes()).map_err(CliError::Output)
}

/// `value` as pretty JSON (two-space indent, number literals and strings
/// as stored, nothing HTML-escaped), followed by a newline.
pub fn json<T: serde::Serialize>(out: &mut dyn Write, value: &T) -> Result<(), CliError> {
    let compact = serde_json::to_string(value)
        .map_err(|e| CliError::Failed(format!("encoding JSON output: {e}")))?;
    line(out, &agentrt::view::pretty_json(&compact))
}

/// A cell: sanitized, `-` when empty.
pub fn cell(text: &str) -> String {
    if text.is_empty() {
        "-".to_owned()
    } else {
        sanitize(text)
    }
}

/// A text table: columns aligned with two spaces between them, the last
/// column not padded. Cells must already be sanitized.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> Vec<String> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let render = |cells: Vec<&str>| -> String {
        let last = cells.len().saturating_sub(1);
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            s.push_str(c);
            if i < last {
                let pad = w.saturating_sub(c.chars().count()) + 2;
                s.extend(std::iter::repeat_n(' ', pad));
            }
        }
        s
    };
    let mut lines = vec![render(headers.to_vec())];
    lines.extend(
        rows.iter()
            .map(|r| render(r.iter().map(String::as_str).collect())),
    );
    lines
}

/// `$x.xxxx` from micro-dollars, rounded half away from zero.
pub fn dollars(micros: i64) -> String {
    let m = i128::from(micros);
    let ten_thousandths = if m >= 0 {
        (m + 50) / 100
    } else {
        (m - 50) / 100
    };
    let sign = if ten_thousandths < 0 { "-" } else { "" };
    let abs = ten_thousandths.abs();
    format!("{sign}${}.{:04}", abs / 10_000, abs % 10_000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_and_leaves_last_column_unpadded() {
        let lines = table(
            &["A", "BB", "C"],
            &[vec!["long".into(), "x".into(), "end".into()]],
        );
        assert_eq!(lines, ["A     BB  C", "long  x   end"]);
    }

    #[test]
    fn dollars_round_to_four_places() {
        assert_eq!(dollars(0), "$0.0000");
        assert_eq!(dollars(1_234_567), "$1.2346");
        assert_eq!(dollars(49), "$0.0000");
        assert_eq!(dollars(50), "$0.0001");
    }

    #[test]
    fn stamps_carry_date_time_and_zone() {
        let t = Timestamp::parse("2026-10-01T09:00:00.123456789Z").unwrap();
        let s = stamp(&t);
        let ms = stamp_ms(&t);
        assert_eq!(s.len(), "2026-10-01 09:00:00 +0000".len(), "{s}");
        assert_eq!(ms.len(), "2026-10-01 09:00:00.123 +0000".len(), "{ms}");
        assert!(ms.contains(".123 "), "{ms}");
    }
}
