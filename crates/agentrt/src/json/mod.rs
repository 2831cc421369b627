//! Canonical JSON: one byte-exact spelling per JSON document.
//!
//! [`Canonical::parse`] reads one JSON value and writes it back with object
//! keys sorted by UTF-8 bytes, no insignificant whitespace, number literals
//! exactly as written (`10`, `10.0`, `1e1`, `-0` and `1E+2` all stay
//! distinct), and strings escaped one fixed way (see [`write_string`]).
//! Escapes in the input are decoded first, so `"\u0041"` and `"A"` are the
//! same string. Blank input (empty or only JSON whitespace) is `null`.
//!
//! Before canonicalising, the input must pass the boundary check
//! ([`check_boundary`]): valid UTF-8, RFC 8259 grammar, exactly one value,
//! nesting at most [`MAX_DEPTH`], no repeated key in any object, no unpaired
//! surrogate escape, and number literals of at most [`MAX_NUMBER_CHARS`]
//! characters with an exponent of at most ±[`MAX_EXPONENT`].
//!
//! [`Canonical::hash`] is BLAKE3-256 over the canonical bytes.

mod canonical;
mod error;
mod hash;
pub(crate) mod layout;
mod parse;
mod scan;
mod write;

#[cfg(test)]
mod tests;

pub use canonical::{Canonical, object_members};
pub use error::JsonError;
pub use hash::hash_hex;
pub use write::write_string;

/// Deepest nesting of arrays and objects accepted (`[[…]]` 256 deep is fine,
/// 257 is refused).
pub const MAX_DEPTH: usize = 256;

/// Longest number literal accepted, in characters.
pub const MAX_NUMBER_CHARS: usize = 10_000;

/// Largest exponent magnitude accepted (`1e10000` and `1e-10000` are fine,
/// `1e10001` is refused). Leading zeros in the exponent do not count.
pub const MAX_EXPONENT: u64 = 10_000;

/// Checks that `input` may cross the boundary: one JSON value (RFC 8259) in
/// valid UTF-8, within the limits described in the [module docs](self).
/// Blank input (empty or only JSON whitespace) is accepted: it means `null`.
///
/// After UTF-8 validation, the check is a single pass over the bytes and does
/// not recurse.
///
/// # Errors
///
/// The [`JsonError`] describing the problem (see there for which is reported
/// when there are several).
///
/// ```
/// use agentrt::json::{JsonError, check_boundary};
///
/// assert_eq!(check_boundary(br#"{"a": [1, 2.50, "x"]}"#), Ok(()));
/// assert_eq!(check_boundary(b""), Ok(()));
/// assert_eq!(
///     check_boundary(br#"{"a":1,"\u0061":2}"#),
///     Err(JsonError::DuplicateKey { key: "a".into() })
/// );
/// assert_eq!(check_boundary(b"[1] x"), Err(JsonError::TrailingData { offset: 4 }));
/// assert!(check_boundary(&[b'['; 257]).is_err());
/// ```
pub fn check_boundary(input: &[u8]) -> Result<(), JsonError> {
    parse::Tree::parse(input).map(drop)
}
