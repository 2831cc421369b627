//! Numbers within a schema's bounds and multiples, written as exact
//! decimal text.

use super::*;

/// Numeric bounds of a schema.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Bounds {
    pub(super) lo: Option<f64>,
    pub(super) lo_excl: bool,
    pub(super) hi: Option<f64>,
    pub(super) hi_excl: bool,
}

impl Bounds {
    pub(super) fn of(m: &Map<String, Value>) -> Bounds {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let mut b = Bounds {
            lo: num("minimum"),
            hi: num("maximum"),
            ..Bounds::default()
        };
        match m.get("exclusiveMinimum") {
            Some(Value::Bool(true)) => b.lo_excl = true,
            Some(v) => {
                if let Some(x) = v.as_f64()
                    && b.lo.is_none_or(|lo| x >= lo)
                {
                    (b.lo, b.lo_excl) = (Some(x), true);
                }
            }
            None => {}
        }
        match m.get("exclusiveMaximum") {
            Some(Value::Bool(true)) => b.hi_excl = true,
            Some(v) => {
                if let Some(x) = v.as_f64()
                    && b.hi.is_none_or(|hi| x <= hi)
                {
                    (b.hi, b.hi_excl) = (Some(x), true);
                }
            }
            None => {}
        }
        b
    }

    /// The integers `n` with `n / 10^scale` inside the bounds, when the
    /// bounds are set; `default_span` either side otherwise.
    pub(super) fn scaled(&self, scale: u32, default_span: f64) -> (i128, i128) {
        let factor = 10f64.powi(i32::try_from(scale).unwrap_or(0));
        let lo = self.lo.map(|x| {
            let s = x * factor;
            let c = s.ceil();
            if self.lo_excl && c == s { c + 1.0 } else { c }
        });
        let hi = self.hi.map(|x| {
            let s = x * factor;
            let f = s.floor();
            if self.hi_excl && f == s { f - 1.0 } else { f }
        });
        let span = default_span * factor;
        let (lo, hi) = match (lo, hi) {
            (Some(l), Some(h)) => (l, h),
            (Some(l), None) => (l, l + span),
            (None, Some(h)) => (h - span, h),
            (None, None) => (-span, span),
        };
        (clamp_int(lo), clamp_int(hi))
    }
}

/// Keeps generated integers where `f64` is exact.
pub(super) fn clamp_int(x: f64) -> i128 {
    pub(super) const LIMIT: f64 = 1e15;
    if x.is_nan() {
        return 0;
    }
    x.clamp(-LIMIT, LIMIT) as i128
}

/// A decimal `mantissa / 10^scale`, read from a schema number.
#[derive(Debug, Clone, Copy)]
pub(super) struct Decimal {
    pub(super) mantissa: i128,
    pub(super) scale: u32,
}

impl Decimal {
    /// Reads a positive number literal such as `5`, `0.01` or `2.5e-3`.
    pub(super) fn parse(text: &str) -> Option<Decimal> {
        let (digits, exponent) = match text.find(['e', 'E']) {
            Some(at) => (text.get(..at)?, text.get(at + 1..)?.parse::<i32>().ok()?),
            None => (text, 0),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all = format!("{whole}{fraction}");
        if all.is_empty() || !all.bytes().all(|b| b.is_ascii_digit()) || all.len() > 15 {
            return None;
        }
        let mut mantissa: i128 = all.parse().ok()?;
        let mut scale = i32::try_from(fraction.len()).ok()? - exponent;
        while scale < 0 {
            mantissa = mantissa.checked_mul(10)?;
            scale += 1;
        }
        let scale = u32::try_from(scale).ok().filter(|s| *s <= 12)?;
        (mantissa > 0 && mantissa < 1_000_000_000_000_000).then_some(Decimal { mantissa, scale })
    }

    pub(super) fn of(m: &Map<String, Value>) -> Option<Decimal> {
        match m.get("multipleOf")? {
            Value::Number(n) => Decimal::parse(&n.to_string()),
            _ => None,
        }
    }
}

/// `n / 10^scale` as a JSON number literal with exactly `scale` decimals.
pub(super) fn decimal_text(n: i128, scale: u32) -> String {
    let digits = n.unsigned_abs().to_string();
    let sign = if n < 0 { "-" } else { "" };
    let scale = usize::try_from(scale).unwrap_or(0);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

pub(super) fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// Floor and ceiling of `a / b` for `b > 0`.
pub(super) fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a < 0 { q - 1 } else { q }
}

pub(super) fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a > 0 { q + 1 } else { q }
}

/// A number as a JSON literal (`None` for NaN and infinities).
pub(super) fn number_text(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return Some(format!("{}", x as i64));
    }
    Some(format!("{x}"))
}
