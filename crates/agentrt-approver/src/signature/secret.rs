//! A signing secret: the shared secret, or one approver's key's.

use std::fmt;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// What a secret's fingerprint is the MAC of: two secrets that key
/// HMAC-SHA256 alike have the same fingerprint, and no other two do.
const FINGERPRINT_TEXT: &[u8] = b"agentrt-approver: is this the same secret?";

/// A secret, kept as the keyed HMAC. Its `Debug` shows no byte of it.
#[derive(Clone)]
pub struct Secret {
    keyed: Hmac<Sha256>,
    len: usize,
    /// The MAC of [`FINGERPRINT_TEXT`]: compares two secrets without
    /// keeping either's bytes.
    fingerprint: [u8; 32],
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes)", self.len)
    }
}

/// A secret shorter than [`MIN_SECRET_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the secret has {0} bytes; at least 32 are needed")]
pub struct ShortSecret(pub usize);

impl Secret {
    /// `bytes` as the secret, if long enough.
    pub fn new(bytes: impl AsRef<[u8]>) -> Result<Secret, ShortSecret> {
        let bytes = bytes.as_ref();
        if bytes.len() < MIN_SECRET_BYTES {
            return Err(ShortSecret(bytes.len()));
        }
        let keyed = <Hmac<Sha256> as KeyInit>::new_from_slice(bytes)
            .map_err(|_| ShortSecret(bytes.len()))?;
        let mut mac = keyed.clone();
        mac.update(FINGERPRINT_TEXT);
        Ok(Secret {
            keyed,
            len: bytes.len(),
            fingerprint: mac.finalize().into_bytes().into(),
        })
    }

    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        self.keyed.clone()
    }

    /// Whether `other` signs exactly as this secret does (the same bytes,
    /// as HMAC reads a key).
    pub(crate) fn same_as(&self, other: &Secret) -> bool {
        constant_time_eq(&self.fingerprint, &other.fingerprint)
    }
}

/// Whether `a` and `b` are equal, in time that depends on their lengths
/// only.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_shorter_than_32_bytes_is_refused_and_never_shown() {
        assert_eq!(Secret::new([0u8; 31]).unwrap_err(), ShortSecret(31));
        let debug = format!("{:?}", Secret::new([0u8; 32]).unwrap());
        assert_eq!(debug, "Secret(32 bytes)");
    }

    #[test]
    fn two_secrets_are_the_same_only_when_their_bytes_are() {
        let a = Secret::new([1u8; 32]).unwrap();
        assert!(a.same_as(&Secret::new([1u8; 32]).unwrap()));
        assert!(!a.same_as(&Secret::new([2u8; 32]).unwrap()));
        assert!(!a.same_as(&Secret::new([1u8; 33]).unwrap()));
    }
}
