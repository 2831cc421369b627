//! Prices per million tokens in integer micro-dollars, and the tables that
//! hold them.
//!
//! [`Price`] and the dollar parser are the core's (`agentrt::budget`); this
//! module adds dated tables shipped as data. An unknown model name is
//! *unpriced*, never free: [`PriceTable::price_for`] fails for it, and a
//! local model is made free explicitly with [`free`].

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::shared::truncate;

pub use agentrt::budget::Price;

/// A price below zero cannot come from a table.
fn negative(price: &Price) -> bool {
    price.input_per_mtok_micros < 0
        || price.output_per_mtok_micros < 0
        || price.cached_input_per_mtok_micros < 0
}

/// Why a price could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PriceError {
    /// The name is not in the table: it is unpriced (not free).
    #[error("no price for {name}")]
    NoPrice {
        /// The name looked up.
        name: String,
    },
    /// A dollar amount did not parse.
    #[error("{text:?} is not a dollar amount: {reason}")]
    Dollars {
        /// The text (at most 64 bytes of it).
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A price table file did not parse or holds a negative price.
    #[error("price table: {detail}")]
    Table {
        /// What is wrong with it.
        detail: String,
    },
}

/// Named prices, with the date they were read on when known.
///
/// ```
/// use agentrt_provider::price::{Price, PriceTable};
///
/// let mut t = PriceTable::new();
/// t.insert("ollama:llama", Price::FREE);
/// assert_eq!(t.price_for("ollama:llama"), Ok(Price::FREE));
/// assert!(t.price_for("llama").is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PriceTable {
    as_of: Option<jiff::civil::Date>,
    prices: BTreeMap<String, Price>,
}

/// The file form of a price table (`format` = `agentrt-provider/prices/v1`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    format: String,
    #[serde(default)]
    #[allow(dead_code)]
    provider: String,
    as_of: String,
    #[serde(default)]
    #[allow(dead_code)]
    source: String,
    #[serde(default)]
    #[allow(dead_code)]
    unit: String,
    prices: BTreeMap<String, Price>,
}

/// The `format` value of a price table file.
pub const TABLE_FORMAT: &str = "agentrt-provider/prices/v1";

impl PriceTable {
    /// An empty table.
    #[must_use]
    pub fn new() -> PriceTable {
        PriceTable::default()
    }

    /// Parses a price table file: a JSON object with `format`
    /// ([`TABLE_FORMAT`]), `as_of` (`YYYY-MM-DD`), optional `provider`,
    /// `source` and `unit` notes, and `prices`: name → [`Price`].
    ///
    /// ```
    /// use agentrt_provider::price::PriceTable;
    ///
    /// let t = PriceTable::from_json(r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29",
    ///   "prices":{"x:y":{"input_per_mtok_micros":1,"output_per_mtok_micros":2,"cached_input_per_mtok_micros":0}}}"#)?;
    /// assert_eq!(t.len(), 1);
    /// assert_eq!(t.as_of().map(|d| d.to_string()).as_deref(), Some("2026-09-29"));
    /// # Ok::<(), agentrt_provider::price::PriceError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`PriceError::Table`] for malformed JSON, an unknown field, another
    /// format, a bad date or a negative price.
    pub fn from_json(text: &str) -> Result<PriceTable, PriceError> {
        let table = |detail: String| PriceError::Table { detail };
        let file: TableFile = serde_json::from_str(text).map_err(|e| table(e.to_string()))?;
        if file.format != TABLE_FORMAT {
            return Err(table(format!(
                "format {:?} is not {TABLE_FORMAT}",
                file.format
            )));
        }
        let as_of: jiff::civil::Date = file
            .as_of
            .parse()
            .map_err(|e| table(format!("as_of {:?}: {e}", file.as_of)))?;
        if let Some((name, _)) = file.prices.iter().find(|(_, p)| negative(p)) {
            return Err(table(format!("{name} has a negative price")));
        }
        Ok(PriceTable {
            as_of: Some(as_of),
            prices: file.prices,
        })
    }

    /// Adds or replaces a price.
    pub fn insert(&mut self, name: impl Into<String>, price: Price) {
        self.prices.insert(name.into(), price);
    }

    /// The price of `name`.
    ///
    /// # Errors
    ///
    /// [`PriceError::NoPrice`] when the table does not hold it: an unknown
    /// name is unpriced, not free.
    pub fn price_for(&self, name: &str) -> Result<Price, PriceError> {
        self.prices
            .get(name)
            .copied()
            .ok_or_else(|| PriceError::NoPrice {
                name: name.to_owned(),
            })
    }

    /// The names, in byte order.
    /// The table as the core's budget price table, for
    /// `agentrt::budget::ModelConfig`.
    ///
    /// ```
    /// use agentrt_provider::price::{Price, PriceTable};
    /// let mut t = PriceTable::new();
    /// t.insert("local", Price::FREE);
    /// assert!(t.to_budget().price_for("local").unwrap().is_free());
    /// ```
    pub fn to_budget(&self) -> agentrt::budget::PriceTable {
        self.prices.iter().fold(
            agentrt::budget::PriceTable::new(),
            |table, (name, price)| table.with(name.clone(), *price),
        )
    }

    /// The priced model names, in name order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.prices.keys().map(String::as_str)
    }

    /// Every (name, price), in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Price)> {
        self.prices.iter().map(|(n, p)| (n.as_str(), *p))
    }

    /// How many prices the table holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.prices.len()
    }

    /// Whether the table is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The day the prices were read on, when known.
    #[must_use]
    pub fn as_of(&self) -> Option<jiff::civil::Date> {
        self.as_of
    }

    /// Whether the prices were read more than `max_age_days` before
    /// `today` (a table with no date is never stale: it was written by
    /// hand).
    ///
    /// ```
    /// use agentrt_provider::price::PriceTable;
    ///
    /// let t = PriceTable::from_json(r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29","prices":{}}"#)?;
    /// let day = |s: &str| s.parse::<jiff::civil::Date>().unwrap();
    /// assert!(!t.is_stale(day("2026-12-28"), 90));
    /// assert!(t.is_stale(day("2026-12-29"), 90));
    /// # Ok::<(), agentrt_provider::price::PriceError>(())
    /// ```
    #[must_use]
    pub fn is_stale(&self, today: jiff::civil::Date, max_age_days: i64) -> bool {
        let Some(as_of) = self.as_of else {
            return false;
        };
        let Ok(span) = as_of.until(today) else {
            return false;
        };
        i64::from(span.get_days()) > max_age_days
    }
}

/// The price of `name` in `table` (the free-function form of
/// [`PriceTable::price_for`]).
///
/// # Errors
///
/// [`PriceError::NoPrice`] for a name the table does not hold.
pub fn price_for(table: &PriceTable, name: &str) -> Result<Price, PriceError> {
    table.price_for(name)
}

/// A table recording each name as free (what a local model costs).
///
/// ```
/// use agentrt_provider::price::{Price, free};
///
/// let t = free(["ollama:a", "ollama:b"]);
/// assert_eq!(t.price_for("ollama:b"), Ok(Price::FREE));
/// ```
pub fn free<I, S>(names: I) -> PriceTable
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut table = PriceTable::new();
    for name in names {
        table.insert(name, Price::FREE);
    }
    table
}

/// One table from several; a later table's price wins for a name in both.
/// The result's date is the oldest of the dated inputs.
///
/// ```
/// use agentrt_provider::price::{Price, PriceTable, free, merge};
///
/// let mut paid = PriceTable::new();
/// paid.insert("m", Price { input_per_mtok_micros: 1, ..Price::FREE });
/// assert_eq!(merge([paid.clone(), free(["m"])]).price_for("m"), Ok(Price::FREE));
/// assert_eq!(merge([free(["m"]), paid]).price_for("m").map(|p| p.input_per_mtok_micros), Ok(1));
/// ```
pub fn merge<I: IntoIterator<Item = PriceTable>>(tables: I) -> PriceTable {
    let mut out = PriceTable::new();
    for table in tables {
        out.as_of = match (out.as_of, table.as_of) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        out.prices.extend(table.prices);
    }
    out
}

/// A dollar amount as integer micro-dollars, rounded to the nearest micro
/// (half away from zero): `"5"`, `"4.41"`, `"$0.50"`. Refuses a sign, an
/// exponent, `NaN`/`Inf`, anything but digits and one point, and amounts of
/// 2^63 micros or more. Parsed as decimal text, never through a float.
///
/// ```
/// use agentrt_provider::price::parse_dollars;
///
/// assert_eq!(parse_dollars("5"), Ok(5_000_000));
/// assert_eq!(parse_dollars("4.41"), Ok(4_410_000));
/// assert_eq!(parse_dollars("$0.50"), Ok(500_000));
/// assert_eq!(parse_dollars("0.0000005"), Ok(1));
/// for bad in ["-1", "NaN", "Inf", "1e3", "", "$", "1.2.3", "9223372036854.775808"] {
///     assert!(parse_dollars(bad).is_err(), "{bad}");
/// }
/// ```
///
/// # Errors
///
/// [`PriceError::Dollars`] naming the problem.
pub fn parse_dollars(text: &str) -> Result<i64, PriceError> {
    agentrt::budget::parse_dollars(text).map_err(|e| PriceError::Dollars {
        text: truncate(text, 64),
        reason: e.reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_round_to_the_nearest_micro() {
        assert_eq!(parse_dollars("0.0000004"), Ok(0));
        assert_eq!(parse_dollars("0.0000005"), Ok(1));
        assert_eq!(parse_dollars("0.0000014999"), Ok(1));
        assert_eq!(parse_dollars(".5"), Ok(500_000));
        assert_eq!(parse_dollars("7."), Ok(7_000_000));
        assert_eq!(parse_dollars(" $12.000001 "), Ok(12_000_001));
        assert_eq!(parse_dollars("9223372036854.775807"), Ok(i64::MAX));
        assert!(parse_dollars("9223372036854.7758075").is_err());
        assert!(parse_dollars("99999999999999999999999999").is_err());
        for bad in ["+1", "1,5", "$-1", "inf", "nan", "0x10", "1 2"] {
            assert!(parse_dollars(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_files_are_checked() {
        let ok = r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29","prices":{}}"#;
        assert!(PriceTable::from_json(ok).is_ok());
        for bad in [
            r#"{"format":"other","as_of":"2026-09-29","prices":{}}"#,
            r#"{"format":"agentrt-provider/prices/v1","as_of":"yesterday","prices":{}}"#,
            r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29","prices":{},"extra":1}"#,
            r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29","prices":{"a":{"input_per_mtok_micros":-1,"output_per_mtok_micros":0,"cached_input_per_mtok_micros":0}}}"#,
            r#"{"format":"agentrt-provider/prices/v1","as_of":"2026-09-29","prices":{"a":{"input_per_mtok_micros":1}}}"#,
        ] {
            assert!(
                matches!(PriceTable::from_json(bad), Err(PriceError::Table { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn merge_keeps_the_oldest_date_and_the_later_price() {
        let dated = |d: &str| PriceTable {
            as_of: d.parse().ok(),
            prices: BTreeMap::new(),
        };
        let m = merge([dated("2026-09-29"), free(["x"]), dated("2025-01-01")]);
        assert_eq!(
            m.as_of().map(|d| d.to_string()).as_deref(),
            Some("2025-01-01")
        );
        assert_eq!(price_for(&m, "x"), Ok(Price::FREE));
        assert_eq!(
            price_for(&m, "y"),
            Err(PriceError::NoPrice { name: "y".into() })
        );
    }
}
