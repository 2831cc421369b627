//! The webhook's request signature (design §35): HMAC-SHA256 over the
//! timestamp, the nonce, the method, the path and the raw body, carried in
//! three headers on every request, checked against a window of accepted
//! times and a bounded set of signatures already used.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The request's time, Unix seconds in decimal.
pub const TIMESTAMP_HEADER: &str = "x-approval-timestamp";
/// A value the sender never uses twice, at most [`MAX_NONCE_CHARS`].
pub const NONCE_HEADER: &str = "x-approval-nonce";
/// `v1=` and the lowercase hex HMAC-SHA256 of the signed text.
pub const SIGNATURE_HEADER: &str = "x-approval-signature";
/// The longest nonce accepted, in characters.
pub const MAX_NONCE_CHARS: usize = 64;
/// The shortest secret accepted, in bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// The shared secret, kept as the keyed HMAC. Its `Debug` shows no byte
/// of it.
#[derive(Clone)]
pub struct Secret {
    keyed: Hmac<Sha256>,
    len: usize,
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
        Ok(Secret {
            keyed,
            len: bytes.len(),
        })
    }

    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        self.keyed.clone()
    }
}

/// The `X-Approval-Signature` value of a request: `v1=` and the lowercase
/// hex HMAC-SHA256 of `<timestamp>\n<nonce>\n<METHOD>\n<path>\n<body>`.
///
/// ```
/// use agentrt_approver::signature::{Secret, sign};
/// let secret = Secret::new([7u8; 32]).unwrap();
/// let signature = sign(&secret, 1_790_000_000, "n-1", "POST", "/runs/r1/cancel", b"{}");
/// assert!(signature.starts_with("v1="));
/// assert_eq!(signature.len(), 3 + 64);
/// ```
pub fn sign(
    secret: &Secret,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> String {
    let mut mac = secret.mac();
    mac.update(format!("{timestamp}\n{nonce}\n{method}\n{path}\n").as_bytes());
    mac.update(body);
    format!("v1={}", hex(&mac.finalize().into_bytes()))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The three headers of a signed request, as received (absent: `None`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `X-Approval-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-Approval-Nonce`.
    pub nonce: Option<&'a str>,
    /// `X-Approval-Signature`.
    pub signature: Option<&'a str>,
}

/// Why a request's signature was refused; its `Display` is the reason
/// the webhook answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The timestamp is missing, not decimal seconds, or too far from now.
    #[error("timestamp outside the accepted window")]
    Timestamp,
    /// The nonce is missing, empty or too long.
    #[error("nonce missing or longer than 64 characters")]
    Nonce,
    /// The signature is missing or not the request's.
    #[error("signature does not match the request")]
    Signature,
    /// The same signature was accepted before, within its window.
    #[error("signature already used")]
    Replayed,
    /// The set of signatures in the window is full.
    #[error("too many signatures in the window")]
    Full,
}

/// Checks signatures: the secret, the accepted clock skew, and the
/// signatures accepted within the window, bounded.
#[derive(Debug)]
pub struct Verifier {
    secret: Secret,
    skew: i64,
    capacity: usize,
    seen: HashSet<String>,
    /// `(until, signature)`: when each seen signature leaves the set.
    expiry: BTreeSet<(i64, String)>,
}

impl Verifier {
    /// A verifier accepting timestamps within `skew` of now and at most
    /// `burst + rate × (2 × skew in seconds) + 1` signatures at once (what
    /// the rate limit lets through in a window's lifetime).
    pub fn new(secret: Secret, skew: Duration, rate: u32, burst: u32) -> Verifier {
        let skew = i64::try_from(skew.as_secs()).unwrap_or(i64::MAX);
        let window = u64::try_from(skew.saturating_mul(2)).unwrap_or(u64::MAX);
        let capacity = u64::from(burst)
            .saturating_add(u64::from(rate).saturating_mul(window))
            .saturating_add(1);
        Verifier {
            secret,
            skew,
            capacity: usize::try_from(capacity).unwrap_or(usize::MAX),
            seen: HashSet::new(),
            expiry: BTreeSet::new(),
        }
    }

    /// How many signatures it holds at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Whether `headers` could carry a valid signature at `now` (Unix
    /// seconds): all three present, the timestamp decimal and within the
    /// window, the nonce of an accepted length, the signature `v1=` and 64
    /// lowercase hex digits. Cheap: no body, no MAC; the webhook uses it
    /// to choose a request's rate bucket before reading it.
    pub fn plausible(&self, now: i64, headers: &SignedHeaders<'_>) -> bool {
        let timestamp = headers
            .timestamp
            .and_then(parse_seconds)
            .is_some_and(|t| now.abs_diff(t) <= self.skew.unsigned_abs());
        let nonce = headers
            .nonce
            .is_some_and(|n| !n.is_empty() && n.chars().count() <= MAX_NONCE_CHARS);
        let signature = headers
            .signature
            .and_then(|s| s.strip_prefix("v1="))
            .is_some_and(|h| {
                h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
            });
        timestamp && nonce && signature
    }

    /// Checks a request at `now` (Unix seconds) and, when it holds,
    /// remembers its signature until its timestamp plus the skew:
    /// [`Verifier::check`], then [`Verifier::remember`].
    pub fn verify(
        &mut self,
        now: i64,
        headers: &SignedHeaders<'_>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<(), Refusal> {
        let accepted = self.check(now, headers, method, path, body)?;
        self.remember(accepted);
        Ok(())
    }

    /// Checks a request at `now` (Unix seconds) without remembering it. In
    /// order: the timestamp, the nonce, the signature (compared in
    /// constant time over the whole header value), a signature already
    /// used, a full set. Expired signatures are forgotten first.
    pub fn check(
        &mut self,
        now: i64,
        headers: &SignedHeaders<'_>,
        method: &str,
        path: &str,
        body: &[u8],
    ) -> Result<Accepted, Refusal> {
        self.purge(now);
        let timestamp = headers
            .timestamp
            .and_then(parse_seconds)
            .filter(|t| now.abs_diff(*t) <= self.skew.unsigned_abs())
            .ok_or(Refusal::Timestamp)?;
        let nonce = headers
            .nonce
            .filter(|n| !n.is_empty() && n.chars().count() <= MAX_NONCE_CHARS)
            .ok_or(Refusal::Nonce)?;
        let given = headers.signature.ok_or(Refusal::Signature)?;
        let expected = sign(&self.secret, timestamp, nonce, method, path, body);
        if !constant_time_eq(expected.as_bytes(), given.as_bytes()) {
            return Err(Refusal::Signature);
        }
        if self.seen.contains(given) {
            return Err(Refusal::Replayed);
        }
        if self.seen.len() >= self.capacity {
            return Err(Refusal::Full);
        }
        Ok(Accepted {
            signature: given.to_owned(),
            until: timestamp.saturating_add(self.skew),
        })
    }

    /// Remembers a signature [`Verifier::check`] accepted (call both under
    /// one borrow: nothing else may be checked in between), so that it is
    /// refused as used until its window ends.
    pub fn remember(&mut self, accepted: Accepted) {
        if self.seen.insert(accepted.signature.clone()) {
            self.expiry.insert((accepted.until, accepted.signature));
        }
    }

    /// Forgets the signatures whose window ended before `now`.
    fn purge(&mut self, now: i64) {
        while let Some((until, _)) = self.expiry.first() {
            if *until >= now {
                break;
            }
            if let Some((_, signature)) = self.expiry.pop_first() {
                self.seen.remove(&signature);
            }
        }
    }
}

/// A signature [`Verifier::check`] accepted, not yet remembered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    signature: String,
    /// When its window ends, Unix seconds.
    until: i64,
}

/// Decimal Unix seconds: ASCII digits only, no sign, no spaces.
fn parse_seconds(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
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

/// The headers a client sends with a request: the three signature
/// headers, from the wall clock and a fresh 16-byte random nonce, and
/// `Content-Type: application/json` when there is a body.
///
/// ```
/// use agentrt_approver::signature::{Secret, signed_headers};
/// let secret = Secret::new(vec![1u8; 32]).unwrap();
/// let headers = signed_headers(&secret, "GET", "/runs/r1/approvals", b"").unwrap();
/// assert_eq!(headers.len(), 3);
/// assert_eq!(headers[1].0, "x-approval-nonce");
/// assert_eq!(headers[1].1.len(), 32);
/// ```
pub fn signed_headers(
    secret: &Secret,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, getrandom::Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    let nonce = hex(&bytes);
    Ok(headers_at(secret, now, &nonce, method, path, body))
}

/// [`signed_headers`] with a given time and nonce.
pub fn headers_at(
    secret: &Secret,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        (TIMESTAMP_HEADER, timestamp.to_string()),
        (NONCE_HEADER, nonce.to_owned()),
        (
            SIGNATURE_HEADER,
            sign(secret, timestamp, nonce, method, path, body),
        ),
    ];
    if !body.is_empty() {
        headers.push(("content-type", "application/json".to_owned()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_790_000_000;
    const PATH: &str = "/runs/r1/approvals/a1/approve";
    const BODY: &[u8] = br#"{"run_id":"r1"}"#;

    fn secret() -> Secret {
        Secret::new((0u8..32).collect::<Vec<u8>>()).unwrap()
    }

    /// Five minutes of skew, 10 a second, bursts of 20: the defaults.
    fn verifier() -> Verifier {
        Verifier::new(secret(), Duration::from_secs(300), 10, 20)
    }

    fn headers<'a>(timestamp: &'a str, nonce: &'a str, signature: &'a str) -> SignedHeaders<'a> {
        SignedHeaders {
            timestamp: Some(timestamp),
            nonce: Some(nonce),
            signature: Some(signature),
        }
    }

    /// A request signed at `timestamp` with `nonce`, checked at `now`.
    fn check(v: &mut Verifier, now: i64, timestamp: i64, nonce: &str) -> Result<(), Refusal> {
        let signature = sign(&secret(), timestamp, nonce, "POST", PATH, BODY);
        let timestamp = timestamp.to_string();
        v.verify(
            now,
            &headers(&timestamp, nonce, &signature),
            "POST",
            PATH,
            BODY,
        )
    }

    /// The same HMAC as Python's `hmac.new(key, msg, hashlib.sha256)` over
    /// `<ts>\n<nonce>\n<METHOD>\n<path>\n<body>`, key bytes 0..32.
    #[test]
    fn the_signature_is_hmac_sha256_of_the_five_parts_as_any_language_computes_it() {
        assert_eq!(
            sign(&secret(), NOW, "nonce-1", "POST", PATH, BODY),
            "v1=84d5458d3dedc41cd3d94be9c5ba3f8c9b83f1de7c6ab1ee52d08a030a37b488"
        );
    }

    #[test]
    fn a_secret_shorter_than_32_bytes_is_refused_and_never_shown() {
        assert_eq!(Secret::new([0u8; 31]).unwrap_err(), ShortSecret(31));
        let debug = format!("{:?}", secret());
        assert_eq!(debug, "Secret(32 bytes)");
    }

    #[test]
    fn a_signed_request_passes_once_and_its_replay_is_refused() {
        let mut v = verifier();
        assert_eq!(check(&mut v, NOW, NOW, "n-1"), Ok(()));
        assert_eq!(check(&mut v, NOW + 10, NOW, "n-1"), Err(Refusal::Replayed));
        assert_eq!(
            check(&mut v, NOW, NOW, "n-2"),
            Ok(()),
            "another nonce is another request"
        );
    }

    #[test]
    fn timestamps_outside_the_window_or_not_decimal_seconds_are_refused() {
        let mut v = verifier();
        assert_eq!(check(&mut v, NOW, NOW - 300, "edge-past"), Ok(()));
        assert_eq!(check(&mut v, NOW, NOW + 300, "edge-future"), Ok(()));
        assert_eq!(
            check(&mut v, NOW, NOW - 301, "stale"),
            Err(Refusal::Timestamp)
        );
        assert_eq!(
            check(&mut v, NOW, NOW + 301, "skewed"),
            Err(Refusal::Timestamp)
        );
        let signature = sign(&secret(), NOW, "n", "POST", PATH, BODY);
        for bad in [
            "",
            " 1790000000",
            "+1790000000",
            "-1",
            "1.79e9",
            "99999999999999999999",
        ] {
            let refused = v.verify(NOW, &headers(bad, "n", &signature), "POST", PATH, BODY);
            assert_eq!(refused, Err(Refusal::Timestamp), "{bad:?}");
        }
        let missing = SignedHeaders {
            timestamp: None,
            ..headers("", "n", &signature)
        };
        assert_eq!(
            v.verify(NOW, &missing, "POST", PATH, BODY),
            Err(Refusal::Timestamp)
        );
    }

    #[test]
    fn a_nonce_must_be_present_and_at_most_64_characters() {
        let mut v = verifier();
        assert_eq!(check(&mut v, NOW, NOW, ""), Err(Refusal::Nonce));
        assert_eq!(
            check(&mut v, NOW, NOW, &"n".repeat(65)),
            Err(Refusal::Nonce)
        );
        assert_eq!(
            check(&mut v, NOW, NOW, &"é".repeat(64)),
            Ok(()),
            "characters, not bytes"
        );
        let signature = sign(&secret(), NOW, "n", "POST", PATH, BODY);
        let now = NOW.to_string();
        let missing = SignedHeaders {
            nonce: None,
            ..headers(&now, "n", &signature)
        };
        assert_eq!(
            v.verify(NOW, &missing, "POST", PATH, BODY),
            Err(Refusal::Nonce)
        );
    }

    #[test]
    fn a_signature_over_anything_else_or_spelled_otherwise_is_refused() {
        let mut v = verifier();
        let now = NOW.to_string();
        let good = sign(&secret(), NOW, "n", "POST", PATH, BODY);
        let other = Secret::new([9u8; 32]).unwrap();
        let forged = [
            sign(&other, NOW, "n", "POST", PATH, BODY),
            sign(&secret(), NOW, "n", "GET", PATH, BODY),
            sign(
                &secret(),
                NOW,
                "n",
                "POST",
                "/runs/r2/approvals/a1/approve",
                BODY,
            ),
            sign(&secret(), NOW, "n", "POST", PATH, b"{}"),
            sign(&secret(), NOW, "m", "POST", PATH, BODY),
            sign(&secret(), NOW + 1, "n", "POST", PATH, BODY),
            good.to_uppercase().replacen("V1=", "v1=", 1),
            good.trim_start_matches("v1=").to_owned(),
            format!("v2={}", good.trim_start_matches("v1=")),
            format!("{good} "),
            String::new(),
        ];
        for signature in &forged {
            let refused = v.verify(NOW, &headers(&now, "n", signature), "POST", PATH, BODY);
            assert_eq!(refused, Err(Refusal::Signature), "{signature:?}");
        }
        let missing = SignedHeaders {
            signature: None,
            ..headers(&now, "n", &good)
        };
        assert_eq!(
            v.verify(NOW, &missing, "POST", PATH, BODY),
            Err(Refusal::Signature)
        );
        assert_eq!(
            v.verify(NOW, &headers(&now, "n", &good), "POST", PATH, BODY),
            Ok(())
        );
    }

    #[test]
    fn the_set_of_signatures_is_bounded_and_forgets_those_whose_window_ended() {
        // One second of skew, one a second, bursts of one: 1 + 1 × 2 + 1.
        let mut v = Verifier::new(secret(), Duration::from_secs(1), 1, 1);
        assert_eq!(v.capacity(), 4);
        assert_eq!(
            Verifier::new(secret(), Duration::from_secs(300), 10, 20).capacity(),
            6021
        );
        for n in 0..4 {
            assert_eq!(check(&mut v, NOW, NOW, &format!("n-{n}")), Ok(()));
        }
        assert_eq!(check(&mut v, NOW, NOW, "n-4"), Err(Refusal::Full));
        // Refused requests are not remembered; at NOW + 1 the window of
        // the first four (until NOW + 1) has not ended.
        assert_eq!(check(&mut v, NOW + 1, NOW + 1, "n-4"), Err(Refusal::Full));
        // At NOW + 2 it has: they are forgotten, a new one fits.
        assert_eq!(check(&mut v, NOW + 2, NOW + 2, "n-4"), Ok(()));
        assert_eq!(v.seen.len(), 1);
    }

    #[test]
    fn only_headers_that_could_hold_a_signature_are_plausible() {
        let v = verifier();
        let now = NOW.to_string();
        let good = sign(&secret(), NOW, "n", "POST", PATH, BODY);
        assert!(v.plausible(NOW, &headers(&now, "n", &good)));
        let forged = format!("v1={}", "0".repeat(64));
        assert!(
            v.plausible(NOW, &headers(&now, "n", &forged)),
            "the form only: no MAC"
        );
        let stale = (NOW - 301).to_string();
        let long = "n".repeat(65);
        for (timestamp, nonce, signature) in [
            (stale.as_str(), "n", good.as_str()),
            ("x", "n", good.as_str()),
            (now.as_str(), "", good.as_str()),
            (now.as_str(), long.as_str(), good.as_str()),
            (now.as_str(), "n", &good[..66]),
            (now.as_str(), "n", &good[3..]),
        ] {
            let shown = (timestamp, nonce, signature);
            assert!(
                !v.plausible(NOW, &headers(timestamp, nonce, signature)),
                "{shown:?}"
            );
        }
        let upper = good.to_uppercase().replacen("V1=", "v1=", 1);
        assert!(!v.plausible(NOW, &headers(&now, "n", &upper)));
        assert!(!v.plausible(NOW, &SignedHeaders::default()));
    }

    #[test]
    fn client_headers_carry_a_fresh_nonce_and_sign_what_is_sent() {
        let a = signed_headers(&secret(), "POST", PATH, BODY).unwrap();
        let b = signed_headers(&secret(), "POST", PATH, BODY).unwrap();
        assert_ne!(a[1].1, b[1].1, "a fresh nonce each time");
        assert!(a[1].1.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a[3], ("content-type", "application/json".to_owned()));
        let timestamp: i64 = a[0].1.parse().unwrap();
        let mut v = verifier();
        let received = headers(&a[0].1, &a[1].1, &a[2].1);
        assert_eq!(v.verify(timestamp, &received, "POST", PATH, BODY), Ok(()));
        assert_eq!(
            headers_at(&secret(), NOW, "n", "GET", "/runs/r1/approvals", b"").len(),
            3,
            "no content type without a body"
        );
    }
}
