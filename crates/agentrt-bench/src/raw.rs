//! Raw JSON values: the values of a file's `options` and a trial's `extra`,
//! carried byte for byte (compacted) rather than interpreted.

use std::fmt;

use crate::gojson;

/// A JSON value kept as text: compacted (no whitespace outside strings),
/// with its number literals, key order and string escapes exactly as
/// written. When a file is written, `<`, `>`, `&`, U+2028 and U+2029 in its
/// strings are escaped as Go escapes them.
///
/// ```
/// use agentrt_bench::RawJson;
/// let v = RawJson::parse("{ \"b\": 1.50, \"a\": [ ] }").unwrap();
/// assert_eq!(v.as_str(), r#"{"b":1.50,"a":[]}"#);
/// assert_eq!(RawJson::parse("42").unwrap().as_integer(), Some(42));
/// assert_eq!(RawJson::parse("4.2").unwrap().as_integer(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RawJson(String);

impl RawJson {
    /// Checks that `text` is one JSON value and keeps it, compacted.
    pub fn parse(text: &str) -> Result<RawJson, serde_json::Error> {
        serde_json::from_str::<serde::de::IgnoredAny>(text)?;
        Ok(RawJson(gojson::compact(text, false)))
    }

    /// The compact text of a `serde_json` value (keys in the value's own
    /// order).
    pub fn from_value(value: &serde_json::Value) -> RawJson {
        RawJson(value.to_string())
    }

    /// A JSON integer.
    pub fn integer(n: i64) -> RawJson {
        RawJson(n.to_string())
    }

    /// A JSON string.
    pub fn string(s: &str) -> RawJson {
        RawJson(serde_json::Value::from(s).to_string())
    }

    /// The compact text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value when it is an integer literal that fits in an `i64` (the
    /// values summed into a summary's `totals`); `None` for strings,
    /// fractions, exponents, out-of-range integers and everything else.
    pub fn as_integer(&self) -> Option<i64> {
        let t = self.0.as_str();
        let digits = t.strip_prefix('-').unwrap_or(t);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        t.parse().ok()
    }

    /// Parses the value with `serde_json`.
    pub fn to_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.0)
    }
}

impl fmt::Display for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<i64> for RawJson {
    fn from(n: i64) -> RawJson {
        RawJson::integer(n)
    }
}

impl From<&str> for RawJson {
    fn from(s: &str) -> RawJson {
        RawJson::string(s)
    }
}

impl From<&serde_json::Value> for RawJson {
    fn from(v: &serde_json::Value) -> RawJson {
        RawJson::from_value(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_literals_only() {
        for (text, want) in [
            ("0", Some(0)),
            ("-7", Some(-7)),
            ("9223372036854775807", Some(i64::MAX)),
            ("-9223372036854775808", Some(i64::MIN)),
            ("9223372036854775808", None),
            ("1.0", None),
            ("1e3", None),
            ("\"5\"", None),
            ("null", None),
            ("[1]", None),
        ] {
            assert_eq!(RawJson::parse(text).unwrap().as_integer(), want, "{text}");
        }
        assert_eq!(RawJson::parse(" 12 ").unwrap().as_integer(), Some(12));
    }

    #[test]
    fn refuses_what_is_not_one_json_value() {
        for text in ["", "1 2", "{", "nul", "'a'"] {
            assert!(RawJson::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn constructors() {
        assert_eq!(RawJson::string("a<b").as_str(), "\"a<b\"");
        assert_eq!(RawJson::from(3).as_str(), "3");
        let v = serde_json::json!({"k": [1, "x"]});
        assert_eq!(RawJson::from(&v).as_str(), r#"{"k":[1,"x"]}"#);
        assert_eq!(RawJson::from(&v).to_value().unwrap(), v);
    }
}
