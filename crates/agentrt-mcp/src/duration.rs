//! Durations as operators write them in hand-edited files: Go's syntax
//! (`300ms`, `1.5h`, `2h45m`, a bare `0`), kept as strings in the files
//! and parsed here.

use std::time::Duration;

use crate::error::McpError;

/// Nanoseconds per unit, longest unit names first where one is a prefix of
/// another (`ms` before `m`, `ns` before nothing).
const UNITS: [(&str, u128); 7] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a duration: an optional sign, then one or more decimal numbers
/// (a fraction allowed), each followed by a unit `ns`, `us`/`µs`, `ms`,
/// `s`, `m` or `h`; a bare `0` is allowed. A negative duration, or one
/// beyond `u64` nanoseconds, is refused: nothing in a rules file waits a
/// negative time.
///
/// ```
/// use std::time::Duration;
/// use agentrt_mcp::parse_duration;
///
/// assert_eq!(parse_duration("5s")?, Duration::from_secs(5));
/// assert_eq!(parse_duration("1.5h")?, Duration::from_secs(5400));
/// assert_eq!(parse_duration("2h45m300ms")?, Duration::from_millis(9_900_300));
/// assert_eq!(parse_duration("0")?, Duration::ZERO);
/// assert!(parse_duration("5").is_err()); // a unit is required
/// assert!(parse_duration("-1s").is_err());
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, McpError> {
    let bad = |detail: &str| McpError::Duration {
        text: text.to_owned(),
        detail: detail.to_owned(),
    };
    let mut rest = text;
    let negative = if let Some(r) = rest.strip_prefix('-') {
        rest = r;
        true
    } else {
        if let Some(r) = rest.strip_prefix('+') {
            rest = r;
        }
        false
    };
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad("it is empty"));
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() {
            return Err(bad("a number is expected before each unit"));
        }
        if fraction.contains('.') {
            return Err(bad("a number has two decimal points"));
        }
        let Some((unit, scale)) = UNITS
            .iter()
            .filter(|(name, _)| after.starts_with(name))
            .max_by_key(|(name, _)| name.len())
        else {
            return Err(bad("each number needs a unit: ns, us, µs, ms, s, m or h"));
        };
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| bad("a number is too large"))?
        };
        let mut part = whole
            .checked_mul(*scale)
            .ok_or_else(|| bad("it is too long"))?;
        // The fraction, exact to the nanosecond (digits past it are cut).
        let mut unit_scale = *scale;
        for digit in fraction.bytes() {
            unit_scale /= 10;
            // Checked: a whole number just under u128's limit for its unit
            // leaves no room for the fraction.
            part = part
                .checked_add(u128::from(digit - b'0') * unit_scale)
                .ok_or_else(|| bad("it is too long"))?;
        }
        total = total
            .checked_add(part)
            .ok_or_else(|| bad("it is too long"))?;
        rest = &after[unit.len()..];
    }
    if negative && total > 0 {
        return Err(bad("it is negative"));
    }
    let nanos = u64::try_from(total).map_err(|_| bad("it is too long"))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_to_the_nanosecond() {
        let cases = [
            ("300ms", 300_000_000u64),
            ("1.5h", 5_400_000_000_000),
            ("2h45m", 9_900_000_000_000),
            ("+10s", 10_000_000_000),
            ("1us", 1_000),
            ("1µs", 1_000),
            ("7ns", 7),
            (".5s", 500_000_000),
            ("1.000000001s", 1_000_000_001),
            ("1.0000000019s", 1_000_000_001),
            ("-0s", 0),
            ("0", 0),
            ("1m30s", 90_000_000_000),
        ];
        for (text, nanos) in cases {
            assert_eq!(
                parse_duration(text).ok(),
                Some(Duration::from_nanos(nanos)),
                "{text}"
            );
        }
    }

    #[test]
    fn a_fraction_past_u128_is_refused_not_wrapped() {
        // The whole part times its unit fits u128 with less room than the
        // fraction adds (found by the fuzz target).
        let text = format!("{}.999us", u128::MAX / 1000);
        match parse_duration(&text) {
            Err(McpError::Duration { detail, .. }) => assert_eq!(detail, "it is too long"),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    #[test]
    fn malformed_durations_are_refused_with_the_text() {
        for text in [
            "",
            "5",
            "s",
            "1.2.3s",
            "5 s",
            "5sec",
            "-1s",
            "1d",
            "--1s",
            "1s-",
            ".s",
            "99999999999999999999h",
        ] {
            match parse_duration(text) {
                Err(McpError::Duration { text: t, .. }) => assert_eq!(t, text),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }
}
