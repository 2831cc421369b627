//! Usage plausibility: token counts are read from the provider's raw body
//! first and separately, as the literal text the provider wrote, so a reply
//! that is served but does not decode is still charged, and a count that is
//! not a plain non-negative integer is never guessed at.

use std::collections::BTreeMap;

use agentrt::{ModelError, Usage};
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::shared::truncate;

/// How much of an unusable value an error repeats, in bytes.
const MAX_VALUE_ECHO: usize = 64;

/// Reads one usage count from its raw JSON literal: absent or `null` is 0;
/// otherwise it must be a plain non-negative integer literal that fits an
/// `i64` (no sign, fraction or exponent, not a string), else
/// [`ModelError::UnusableUsage`] naming the field and (at most 64 bytes of)
/// the value.
///
/// ```
/// use agentrt_provider::usage::usage_count;
///
/// assert_eq!(usage_count("input_tokens", None), Ok(0));
/// assert_eq!(usage_count("input_tokens", Some("null")), Ok(0));
/// assert_eq!(usage_count("input_tokens", Some("42")), Ok(42));
/// for bad in ["-1", "1.5", "1e3", "+3", "\"3\"", "18446744073709551616", "true"] {
///     assert!(usage_count("input_tokens", Some(bad)).is_err(), "{bad}");
/// }
/// ```
///
/// # Errors
///
/// [`ModelError::UnusableUsage`] for any value that is not such a count.
pub fn usage_count(field: &str, raw: Option<&str>) -> Result<i64, ModelError> {
    let Some(raw) = raw.map(str::trim) else {
        return Ok(0);
    };
    if raw == "null" {
        return Ok(0);
    }
    let plain = !raw.is_empty() && raw.bytes().all(|b| b.is_ascii_digit());
    match raw.parse::<i64>() {
        Ok(n) if plain => Ok(n),
        _ => Err(ModelError::UnusableUsage {
            message: format!(
                "{field} is {}, not a non-negative integer",
                truncate(raw, MAX_VALUE_ECHO)
            ),
        }),
    }
}

/// Checks counts as a whole and converts them: any negative count, or more
/// cached input than input, is [`ModelError::UnusableUsage`].
///
/// ```
/// use agentrt_provider::usage::check_usage;
///
/// let u = check_usage(100, 20, 50).unwrap();
/// assert_eq!((u.input_tokens, u.output_tokens, u.cached_input_tokens), (100, 20, 50));
/// assert!(check_usage(10, 0, 11).is_err());
/// assert!(check_usage(-1, 0, 0).is_err());
/// ```
///
/// # Errors
///
/// [`ModelError::UnusableUsage`] when the counts are not plausible.
pub fn check_usage(input: i64, output: i64, cached_input: i64) -> Result<Usage, ModelError> {
    let unusable = |message: String| ModelError::UnusableUsage { message };
    let as_u64 = |name: &str, n: i64| {
        u64::try_from(n).map_err(|_| unusable(format!("{name} is negative ({n})")))
    };
    let usage = Usage {
        input_tokens: as_u64("input tokens", input)?,
        output_tokens: as_u64("output tokens", output)?,
        cached_input_tokens: as_u64("cached input tokens", cached_input)?,
    };
    if usage.cached_input_tokens > usage.input_tokens {
        return Err(unusable(format!(
            "cached input tokens ({}) exceed input tokens ({})",
            usage.cached_input_tokens, usage.input_tokens
        )));
    }
    Ok(usage)
}

/// A JSON body's top-level members, each kept as its raw text; `None` when
/// the body is not a JSON object (then it reports no usage).
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) fn top_level(body: &[u8]) -> Option<BTreeMap<String, Box<RawValue>>> {
    serde_json::from_slice(body).ok()
}

/// Decodes the member `key` of a top-level object as `T`: absent or `null`
/// is `None`; a value of the wrong shape is [`ModelError::UnusableUsage`].
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) fn member<T: DeserializeOwned>(
    top: &BTreeMap<String, Box<RawValue>>,
    key: &str,
) -> Result<Option<T>, ModelError> {
    let Some(raw) = top.get(key) else {
        return Ok(None);
    };
    if raw.get().trim() == "null" {
        return Ok(None);
    }
    serde_json::from_str(raw.get())
        .map(Some)
        .map_err(|_| ModelError::UnusableUsage {
            message: format!(
                "{key} is {}, not an object of counts",
                truncate(raw.get(), MAX_VALUE_ECHO)
            ),
        })
}

/// The raw text of an optional raw value.
#[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
pub(crate) fn text(raw: &Option<Box<RawValue>>) -> Option<&str> {
    raw.as_deref().map(RawValue::get)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_must_be_plain_non_negative_integers_that_fit_i64() {
        assert_eq!(usage_count("f", Some(" 7 ")), Ok(7));
        assert_eq!(usage_count("f", Some("9223372036854775807")), Ok(i64::MAX));
        for bad in [
            "-1",
            "-0",
            "1.5",
            "1e3",
            "1E3",
            "+3",
            "\"5\"",
            "9223372036854775808",
            "18446744073709551616",
            "[]",
            "{}",
            "",
        ] {
            let e = usage_count("prompt_tokens", Some(bad));
            assert!(
                matches!(&e, Err(ModelError::UnusableUsage { message }) if message.starts_with("prompt_tokens is")),
                "{bad}: {e:?}"
            );
        }
        let long = "1".repeat(200);
        let Err(ModelError::UnusableUsage { message }) = usage_count("f", Some(&long)) else {
            panic!("a 200-digit count must be unusable");
        };
        assert!(message.len() < 120, "{message}");
    }

    #[test]
    fn members_of_the_wrong_shape_are_unusable() {
        let top = top_level(br#"{"usage":"many","other":null}"#).unwrap_or_default();
        #[derive(serde::Deserialize)]
        struct U {
            #[allow(dead_code)]
            input_tokens: Option<Box<RawValue>>,
        }
        assert!(matches!(
            member::<U>(&top, "usage"),
            Err(ModelError::UnusableUsage { .. })
        ));
        assert!(matches!(member::<U>(&top, "other"), Ok(None)));
        assert!(matches!(member::<U>(&top, "absent"), Ok(None)));
        assert!(top_level(b"[1,2]").is_none());
        assert!(top_level(b"not json").is_none());
    }
}
