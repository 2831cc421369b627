//! Money: micro-dollar amounts, model prices and the cost of a call.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::model::Usage;

/// An amount of money in millionths of a dollar.
pub type Micros = i64;

/// A model's price in micro-dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million input tokens (not cached).
    pub input_per_mtok_micros: Micros,
    /// Per million output tokens.
    pub output_per_mtok_micros: Micros,
    /// Per million cached input tokens.
    pub cached_input_per_mtok_micros: Micros,
}

impl Price {
    /// Costs nothing (a local model).
    pub const FREE: Price = Price {
        input_per_mtok_micros: 0,
        output_per_mtok_micros: 0,
        cached_input_per_mtok_micros: 0,
    };

    /// `true` for a model that costs nothing.
    pub fn is_free(&self) -> bool {
        *self == Price::FREE
    }

    /// The cost of `usage`: `(input − cached)·input + cached·cached_rate +
    /// output·output_rate`, summed in 128 bits and divided by a million
    /// once (truncating), saturating at the bounds of [`Micros`].
    ///
    /// ```
    /// use agentrt::budget::Price;
    /// use agentrt::Usage;
    /// let price = Price { input_per_mtok_micros: 3_000_000, output_per_mtok_micros: 15_000_000, cached_input_per_mtok_micros: 300_000 };
    /// let usage = Usage { input_tokens: 1000, output_tokens: 100, cached_input_tokens: 400 };
    /// // 600·3 + 400·0.3 + 100·15 = 1800 + 120 + 1500 µ$
    /// assert_eq!(price.cost(&usage), 3420);
    /// ```
    pub fn cost(&self, usage: &Usage) -> Micros {
        let cached = i128::from(usage.cached_input_tokens.min(usage.input_tokens));
        let uncached = i128::from(usage.input_tokens) - cached;
        let total = uncached
            .saturating_mul(i128::from(self.input_per_mtok_micros))
            .saturating_add(cached.saturating_mul(i128::from(self.cached_input_per_mtok_micros)))
            .saturating_add(
                i128::from(usage.output_tokens)
                    .saturating_mul(i128::from(self.output_per_mtok_micros)),
            );
        let micros = total / 1_000_000;
        micros.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as Micros
    }
}

/// A model named in a price table is priced (or declared free); any other
/// model is refused: a free model is declared, never assumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model {model:?} has no price; add it to the price table, or declare it free with PriceTable::free"
)]
pub struct NoPrice {
    /// The model.
    pub model: String,
}

impl From<NoPrice> for crate::error::Error {
    fn from(e: NoPrice) -> crate::error::Error {
        crate::error::Error::NoPrice { model: e.model }
    }
}

/// Prices by model name.
///
/// ```
/// use agentrt::budget::{Price, PriceTable};
/// let table = PriceTable::new()
///     .with("big", Price { input_per_mtok_micros: 3_000_000, output_per_mtok_micros: 15_000_000, cached_input_per_mtok_micros: 0 })
///     .merge(PriceTable::free(["local-llama"]));
/// assert!(table.price_for("local-llama").unwrap().is_free());
/// assert!(table.price_for("unknown").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// An empty table.
    pub fn new() -> PriceTable {
        PriceTable::default()
    }

    /// Adds (or replaces) a model's price.
    pub fn with(mut self, model: impl Into<String>, price: Price) -> PriceTable {
        self.prices.insert(model.into(), price);
        self
    }

    /// Models declared free (zero prices).
    pub fn free<I, S>(models: I) -> PriceTable
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PriceTable {
            prices: models
                .into_iter()
                .map(|m| (m.into(), Price::default()))
                .collect(),
        }
    }

    /// This table with `later`'s entries added; `later` wins on a name in both.
    pub fn merge(mut self, later: PriceTable) -> PriceTable {
        self.prices.extend(later.prices);
        self
    }

    /// The price of `model`.
    pub fn price_for(&self, model: &str) -> Result<Price, NoPrice> {
        self.prices.get(model).copied().ok_or_else(|| NoPrice {
            model: model.to_owned(),
        })
    }
}

/// Dollar text that is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{text:?} is not a dollar amount: {reason}")]
pub struct DollarsError {
    /// The text.
    pub text: String,
    /// Why.
    pub reason: &'static str,
}

/// Parses `5`, `4.41` or `$0.50` into micro-dollars, rounding half up past
/// the sixth decimal. Refuses negative amounts, NaN and infinity, anything
/// else that is not a plain decimal, and amounts of 2^63 micros or more.
///
/// ```
/// use agentrt::budget::parse_dollars;
/// assert_eq!(parse_dollars("$0.50").unwrap(), 500_000);
/// assert_eq!(parse_dollars("4.41").unwrap(), 4_410_000);
/// assert_eq!(parse_dollars("0.0000005").unwrap(), 1);
/// assert!(parse_dollars("-1").is_err());
/// ```
pub fn parse_dollars(text: &str) -> Result<Micros, DollarsError> {
    let refuse = |reason| DollarsError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let body = trimmed.strip_prefix('$').unwrap_or(trimmed);
    if body.starts_with('-') {
        return Err(refuse("negative amounts are refused"));
    }
    let (whole, fraction) = match body.split_once('.') {
        Some((w, f)) => (w, f),
        None => (body, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && fraction.is_empty() || !digits(whole) || !digits(fraction) {
        return Err(refuse(
            "expected digits, an optional point and an optional leading $",
        ));
    }
    let mut micros: i128 = 0;
    for b in whole.bytes() {
        micros = micros * 10 + i128::from(b - b'0');
        if micros * 1_000_000 > i128::from(i64::MAX) {
            return Err(refuse("the amount is too large"));
        }
    }
    micros *= 1_000_000;
    let mut scale = 100_000i128;
    let mut rest = fraction.bytes();
    for b in rest.by_ref().take(6) {
        micros += i128::from(b - b'0') * scale;
        scale /= 10;
    }
    if let Some(seventh) = rest.next()
        && seventh >= b'5'
    {
        micros += 1;
    }
    if micros > i128::from(i64::MAX) {
        return Err(refuse("the amount is too large"));
    }
    Ok(micros as Micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_parse_in_every_form_and_refuse_the_rest() {
        let ok = [
            ("5", 5_000_000),
            ("4.41", 4_410_000),
            ("$0.50", 500_000),
            (" 0.0000015 ", 2),
            ("0.0000014", 1),
            ("12.", 12_000_000),
            (".5", 500_000),
        ];
        for (text, want) in ok {
            assert_eq!(parse_dollars(text).unwrap(), want, "{text}");
        }
        for bad in [
            "-1",
            "NaN",
            "inf",
            "",
            "$",
            "1e3",
            "1,5",
            "abc",
            "9223372036854.775808",
            "99999999999999999999",
        ] {
            assert!(parse_dollars(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_dollars("9223372036854.775807").unwrap(), i64::MAX);
    }

    #[test]
    fn free_is_not_unpriced_and_later_merges_win() {
        let paid = Price {
            input_per_mtok_micros: 1,
            output_per_mtok_micros: 2,
            cached_input_per_mtok_micros: 0,
        };
        let table = PriceTable::new()
            .with("m", paid)
            .merge(PriceTable::free(["m", "n"]));
        assert!(
            table.price_for("m").unwrap().is_free(),
            "the later table wins"
        );
        assert!(table.price_for("n").unwrap().is_free());
        assert_eq!(table.price_for("o").unwrap_err().model, "o");
    }

    #[test]
    fn cost_sums_in_128_bits_and_saturates() {
        let huge = Price {
            input_per_mtok_micros: i64::MAX,
            output_per_mtok_micros: i64::MAX,
            cached_input_per_mtok_micros: i64::MAX,
        };
        let usage = Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX,
            cached_input_tokens: 0,
        };
        assert_eq!(huge.cost(&usage), i64::MAX);
        // One division: three terms of 0.4 µ$ add up to 1 µ$, per-term truncation would give 0.
        let tiny = Price {
            input_per_mtok_micros: 400_000,
            output_per_mtok_micros: 400_000,
            cached_input_per_mtok_micros: 400_000,
        };
        let usage = Usage {
            input_tokens: 2,
            output_tokens: 1,
            cached_input_tokens: 1,
        };
        assert_eq!(tiny.cost(&usage), 1);
    }
}
