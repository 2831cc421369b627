//! Text rules of the reports, kept byte-compatible with the original (Go's
//! `fmt`, `strconv` and `time.Duration` forms), each in one function.

use std::cmp::Ordering;

const NS_PER_MS: i64 = 1_000_000;
const NS_PER_S: i64 = 1_000_000_000;

/// A number as the reports print a mean: the integer form when the value is
/// integral, otherwise one decimal, correctly rounded from the exact binary
/// value with ties to even (Go's `%.1f`).
///
/// ```
/// use agentrt_bench::format::num;
/// assert_eq!(num(12.0), "12");
/// assert_eq!(num(6684.5), "6684.5");
/// assert_eq!(num(0.25), "0.2");
/// assert_eq!(num(13210.5), "13210.5");
/// ```
pub fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 9.2e18 {
        format!("{}", v as i64)
    } else {
        fixed(v, 1)
    }
}

/// `v` with `decimals` digits after the point, correctly rounded with ties
/// to even on the exact binary value (Go's `%.Nf`).
///
/// ```
/// use agentrt_bench::format::fixed;
/// assert_eq!(fixed(0.125, 2), "0.12");
/// assert_eq!(fixed(3.4911, 4), "3.4911");
/// ```
pub fn fixed(v: f64, decimals: usize) -> String {
    format!("{v:.decimals$}")
}

/// Money in millionths of a currency unit, as `%.4f` of units.
///
/// ```
/// use agentrt_bench::format::money;
/// assert_eq!(money(3_491_100.0), "3.4911");
/// assert_eq!(money(0.0), "0.0000");
/// ```
pub fn money(micros: f64) -> String {
    fixed(micros / 1e6, 4)
}

/// A wall time as the reports print it: the nanoseconds truncated to an
/// integer; under one second rounded to the millisecond, otherwise to the
/// second (halves away from zero); printed in Go's duration syntax.
///
/// ```
/// use agentrt_bench::format::duration;
/// assert_eq!(duration(6_000_000.0), "6ms");
/// assert_eq!(duration(28_424_487_541.5), "28s");
/// assert_eq!(duration(79_000_000_000.0), "1m19s");
/// assert_eq!(duration(0.0), "0s");
/// ```
pub fn duration(ns: f64) -> String {
    // Go converts float64 to int64 by truncation; out of range saturates here.
    let d = if ns.is_nan() { 0 } else { ns as i64 };
    let unit = if d.unsigned_abs() < NS_PER_S as u64 {
        NS_PER_MS
    } else {
        NS_PER_S
    };
    go_duration(round(d, unit))
}

/// Go's `time.Duration.Round(m)` for `m > 0`: halves away from zero,
/// saturating at the `i64` bounds.
fn round(d: i64, m: i64) -> i64 {
    let r = d % m;
    if d < 0 {
        let r = -r;
        if r + r < m {
            return d + r;
        }
        return d.checked_sub(m - r).unwrap_or(i64::MIN);
    }
    if r + r < m {
        return d - r;
    }
    d.checked_add(m - r).unwrap_or(i64::MAX)
}

/// The fraction of `v / 10^prec` as `.ddd` without trailing zeros (nothing
/// when it is zero), and the integer part.
fn frac(v: u64, prec: u32) -> (String, u64) {
    let scale = 10u64.pow(prec);
    let (int, fraction) = (v / scale, v % scale);
    if fraction == 0 {
        return (String::new(), int);
    }
    let digits = format!("{fraction:0width$}", width = prec as usize);
    (format!(".{}", digits.trim_end_matches('0')), int)
}

/// Go's `time.Duration.String()`: `0s`, `1.5µs`, `6ms`, `28s`, `1m19s`,
/// `2h0m5.1s`.
///
/// ```
/// use agentrt_bench::format::go_duration;
/// assert_eq!(go_duration(0), "0s");
/// assert_eq!(go_duration(1_500), "1.5µs");
/// assert_eq!(go_duration(60_000_000_000), "1m0s");
/// assert_eq!(go_duration(7_205_100_000_000), "2h0m5.1s");
/// assert_eq!(go_duration(-2_500_000), "-2.5ms");
/// ```
pub fn go_duration(d: i64) -> String {
    let neg = d < 0;
    let u = d.unsigned_abs();
    let sign = if neg { "-" } else { "" };
    if u < NS_PER_S as u64 {
        let (unit, prec) = match u {
            0 => return "0s".to_string(),
            1..1_000 => ("ns", 0),
            1_000..1_000_000 => ("µs", 3),
            _ => ("ms", 6),
        };
        let (f, int) = frac(u, prec);
        return format!("{sign}{int}{f}{unit}");
    }
    let (f, secs) = frac(u, 9);
    let (s, mins) = (secs % 60, secs / 60);
    if mins == 0 {
        return format!("{sign}{s}{f}s");
    }
    let (m, hours) = (mins % 60, mins / 60);
    if hours == 0 {
        return format!("{sign}{m}m{s}{f}s");
    }
    format!("{sign}{hours}h{m}m{s}{f}s")
}

/// Natural order of scenario ids: runs of ASCII digits compare as numbers
/// (leading zeros stripped; the shorter digit string is smaller, equal
/// lengths compare lexically), other bytes by value, and a prefix sorts
/// first. `S1 < S2 < S4 < S4M < S9 < S10 < S10H < s1 < s2 < s10 < s13`.
///
/// ```
/// use agentrt_bench::format::natural_cmp;
/// use std::cmp::Ordering;
/// assert_eq!(natural_cmp("S2", "S10"), Ordering::Less);
/// assert_eq!(natural_cmp("S4M", "S4"), Ordering::Greater);
/// assert_eq!(natural_cmp("S01", "S1"), Ordering::Equal);
/// ```
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    while let (Some(&ca), Some(&cb)) = (a.first(), b.first()) {
        let da = a.iter().take_while(|c| c.is_ascii_digit()).count();
        let db = b.iter().take_while(|c| c.is_ascii_digit()).count();
        if da > 0 && db > 0 {
            let strip = |s: &[u8]| -> usize { s.iter().take_while(|&&c| c == b'0').count() };
            let na = &a[strip(&a[..da])..da];
            let nb = &b[strip(&b[..db])..db];
            let by_number = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if by_number != Ordering::Equal {
                return by_number;
            }
            a = &a[da..];
            b = &b[db..];
            continue;
        }
        if ca != cb {
            return ca.cmp(&cb);
        }
        a = &a[1..];
        b = &b[1..];
    }
    a.len().cmp(&b.len())
}

/// `—` (U+2014) for empty text, else the text.
pub(crate) fn or_dash(s: &str) -> &str {
    if s.is_empty() { "—" } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_rounds_the_exact_binary_value_ties_to_even() {
        assert_eq!(fixed(6684.5, 1), "6684.5");
        assert_eq!(fixed(0.25, 1), "0.2");
        assert_eq!(fixed(0.35, 1), "0.3"); // 0.34999999999999997...
        assert_eq!(fixed(0.125, 2), "0.12");
        assert_eq!(fixed(0.375, 2), "0.38");
        assert_eq!(fixed(2.5, 0), "2");
        assert_eq!(fixed(1.00025, 4), "1.0003"); // 1.000250000000000083...
        assert_eq!(fixed(0.00015, 4), "0.0001"); // 0.000149999999999999986...
        assert_eq!(fixed(12.45, 1), "12.4"); // 12.449999999999999289...
        assert_eq!(fixed(0.00005, 4), "0.0001"); // 0.0000500000000000000023...
    }

    #[test]
    fn num_prints_integers_plainly() {
        assert_eq!(num(0.0), "0");
        assert_eq!(num(-3.0), "-3");
        assert_eq!(num(8.5), "8.5");
        assert_eq!(num(19681.5), "19681.5");
        assert_eq!(num(1.0 / 3.0), "0.3");
    }

    #[test]
    fn money_is_four_decimals_of_units() {
        assert_eq!(money(315_800.0), "0.3158");
        assert_eq!(money(50.0), "0.0001"); // 0.00005 is just above the tie
        assert_eq!(money(150.0), "0.0001"); // 0.00015 is just below it
        assert_eq!(money(i64::MAX as f64), "9223372036854.7754");
    }

    #[test]
    fn duration_rounds_to_ms_below_a_second_and_to_s_above() {
        for (ns, want) in [
            (0.0, "0s"),
            (400_000.0, "0s"),
            (500_000.0, "1ms"),
            (1_499_999.9, "1ms"),
            (6_000_000.0, "6ms"),
            (999_499_999.0, "999ms"),
            (999_500_000.0, "1s"),
            (1_000_000_000.0, "1s"),
            (1_499_999_999.0, "1s"),
            (1_500_000_000.0, "2s"),
            (59_500_000_000.0, "1m0s"),
            (288_000_000_000.0, "4m48s"),
            (3_600_000_000_000.0, "1h0m0s"),
            (1e30, "2562047h47m16.854775807s"),
        ] {
            assert_eq!(duration(ns), want, "{ns}");
        }
    }

    #[test]
    fn go_duration_forms() {
        assert_eq!(go_duration(1), "1ns");
        assert_eq!(go_duration(999), "999ns");
        assert_eq!(go_duration(1_000), "1µs");
        assert_eq!(go_duration(1_000_001), "1.000001ms");
        assert_eq!(go_duration(1_000_000_001), "1.000000001s");
        assert_eq!(go_duration(61_000_000_000), "1m1s");
        assert_eq!(go_duration(i64::MAX), "2562047h47m16.854775807s");
        assert_eq!(go_duration(i64::MIN), "-2562047h47m16.854775808s");
    }

    #[test]
    fn natural_order() {
        let ordered = [
            "S1", "S2", "S4", "S4M", "S9", "S10", "S10H", "s1", "s2", "s10", "s13",
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(natural_cmp(a, b), i.cmp(&j), "{a} vs {b}");
            }
        }
        assert_eq!(natural_cmp("", "a"), Ordering::Less);
        assert_eq!(natural_cmp("a10b2", "a10b10"), Ordering::Less);
        assert_eq!(
            natural_cmp("99999999999999999999999", "100000000000000000000000"),
            Ordering::Less
        );
    }
}
