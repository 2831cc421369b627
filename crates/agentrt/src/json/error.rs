//! Why JSON bytes were refused.

use std::fmt;

use super::{MAX_EXPONENT, MAX_NUMBER_CHARS};

/// How many bytes of a repeated key [`JsonError::DuplicateKey`] shows in its
/// `Display` text.
const KEY_DISPLAY_BYTES: usize = 200;

/// Why bytes were refused by [`check_boundary`](super::check_boundary) or
/// [`Canonical`](super::Canonical).
///
/// Offsets are 0-based byte offsets into the input. When the input has several
/// problems: invalid UTF-8 is reported before anything else; a repeated key is
/// found when its object's closing brace is reached (and if an object repeats
/// several keys, the smallest one by bytes is named); otherwise the first
/// problem in reading order is reported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// Arrays and objects nest deeper than `max` levels.
    #[error(
        "JSON nests deeper than {max} levels; flatten the value to at most {max} nested arrays and objects"
    )]
    TooDeep {
        /// The nesting limit ([`MAX_DEPTH`](super::MAX_DEPTH)).
        max: usize,
    },
    /// An object has the same key twice (compared after decoding escapes).
    #[error(
        "JSON object repeats the key {}; give each member of an object a distinct key",
        DisplayKey(key)
    )]
    DuplicateKey {
        /// The repeated key, decoded. `Display` shows at most its first 200 bytes.
        key: String,
    },
    /// The input is not valid UTF-8.
    #[error("input is not valid UTF-8 at byte {offset}; send JSON text encoded as UTF-8")]
    InvalidUtf8 {
        /// Offset of the first byte that is not part of a valid UTF-8 sequence.
        offset: usize,
    },
    /// A `\uXXXX` escape names a UTF-16 surrogate that is not part of a
    /// high-then-low pair.
    #[error(
        "JSON string has an unpaired surrogate escape at byte {offset}; escape a character outside the BMP as a high+low \\uXXXX pair, or write it raw"
    )]
    LoneSurrogate {
        /// Offset of the backslash of the offending escape.
        offset: usize,
    },
    /// A number literal is longer than [`MAX_NUMBER_CHARS`] characters.
    #[error(
        "JSON number at byte {offset} is {length} characters long, over the limit of {MAX_NUMBER_CHARS}; send such numbers as strings"
    )]
    NumberTooLong {
        /// Offset of the number literal.
        offset: usize,
        /// Its length in characters (= bytes; number literals are ASCII).
        length: usize,
    },
    /// A number's exponent is beyond ±[`MAX_EXPONENT`].
    #[error(
        "JSON number at byte {offset} has an exponent beyond ±{MAX_EXPONENT}; send it as a string or rescale it"
    )]
    ExponentTooLarge {
        /// Offset of the number literal.
        offset: usize,
    },
    /// The bytes are not JSON (RFC 8259 grammar).
    #[error("invalid JSON at byte {offset}: {detail}; fix the input to be RFC 8259 JSON")]
    Syntax {
        /// Where the problem was found.
        offset: usize,
        /// What was wrong, e.g. "expected a value", "unterminated string".
        detail: &'static str,
    },
    /// Something other than whitespace follows the (single) JSON value.
    #[error("unexpected data after the JSON value at byte {offset}; send exactly one JSON value")]
    TrailingData {
        /// Offset of the first byte after the value that is not whitespace.
        offset: usize,
    },
    /// A Rust value could not be serialised to JSON
    /// ([`Canonical::from_serialize`](super::Canonical::from_serialize)).
    #[error(
        "value cannot be encoded as JSON: {detail}; make it serialisable (e.g. map keys must be strings)"
    )]
    Unencodable {
        /// The serialiser's error text.
        detail: String,
    },
}

/// Shows a key quoted and escaped (`{:?}`), cut to at most
/// [`KEY_DISPLAY_BYTES`] bytes on a character boundary.
struct DisplayKey<'a>(&'a str);

impl fmt::Display for DisplayKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.0;
        if key.len() <= KEY_DISPLAY_BYTES {
            return write!(f, "{key:?}");
        }
        let mut end = KEY_DISPLAY_BYTES;
        while !key.is_char_boundary(end) {
            end -= 1;
        }
        write!(f, "{:?}… ({} bytes)", &key[..end], key.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_deep_display() {
        let e = JsonError::TooDeep { max: 256 };
        assert!(
            e.to_string()
                .starts_with("JSON nests deeper than 256 levels")
        );
    }

    #[test]
    fn duplicate_key_display_is_capped_on_a_char_boundary() {
        // 199 ASCII bytes then a 2-byte char straddling byte 200.
        let key = format!("{}é{}", "a".repeat(199), "z".repeat(500));
        let text = JsonError::DuplicateKey { key: key.clone() }.to_string();
        assert!(text.contains(&format!("\"{}\"…", "a".repeat(199))));
        assert!(!text.contains('z'));
        assert!(text.contains(&format!("({} bytes)", key.len())));

        let short = JsonError::DuplicateKey { key: "a\nb".into() }.to_string();
        assert!(short.contains(r#""a\nb""#), "{short}");
    }

    #[test]
    fn every_variant_displays_a_remedy() {
        let all = [
            JsonError::TooDeep { max: 256 },
            JsonError::DuplicateKey { key: "k".into() },
            JsonError::InvalidUtf8 { offset: 1 },
            JsonError::LoneSurrogate { offset: 2 },
            JsonError::NumberTooLong {
                offset: 3,
                length: 10_001,
            },
            JsonError::ExponentTooLarge { offset: 4 },
            JsonError::Syntax {
                offset: 5,
                detail: "expected a value",
            },
            JsonError::TrailingData { offset: 6 },
            JsonError::Unencodable {
                detail: "boom".into(),
            },
        ];
        for e in all {
            let text = e.to_string();
            assert!(text.contains("; "), "no remedy in {text:?}");
        }
    }
}
