//! Checking a signature: the window of accepted times, the secret the
//! request's key id names (or the shared secret), and the bounded set of
//! signatures already used.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use super::keys::{Keys, Signer};
use super::secret::{Secret, constant_time_eq};
use super::sign::{MAX_NONCE_CHARS, signature};

/// The signature headers of a request, as received (absent: `None`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SignedHeaders<'a> {
    /// `X-Approval-Timestamp`.
    pub timestamp: Option<&'a str>,
    /// `X-Approval-Nonce`.
    pub nonce: Option<&'a str>,
    /// `X-Approval-Signature`.
    pub signature: Option<&'a str>,
    /// `X-Approval-Key-Id`, when the request names a key; without it the
    /// request is checked with the shared secret.
    pub key_id: Option<&'a str>,
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
    /// The key id names no key.
    #[error("unknown key id")]
    UnknownKey,
    /// No key id, and there is no shared secret to check the request with.
    #[error("a key id is required")]
    KeyRequired,
}

/// Checks signatures: the shared secret (if any), the per-approver keys,
/// the accepted clock skew, and the signatures accepted within the
/// window, bounded (one set for every key: a signature is refused as used
/// whichever key made it).
#[derive(Debug)]
pub struct Verifier {
    shared: Option<Secret>,
    keys: Keys,
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
        Verifier::with_keys(Some(secret), Keys::default(), skew, rate, burst)
    }

    /// As [`Verifier::new`], also checking requests that name a key (with
    /// that key's secret); without `shared`, a request must name a key.
    pub fn with_keys(
        shared: Option<Secret>,
        keys: Keys,
        skew: Duration,
        rate: u32,
        burst: u32,
    ) -> Verifier {
        let skew = i64::try_from(skew.as_secs()).unwrap_or(i64::MAX);
        let window = u64::try_from(skew.saturating_mul(2)).unwrap_or(u64::MAX);
        let capacity = u64::from(burst)
            .saturating_add(u64::from(rate).saturating_mul(window))
            .saturating_add(1);
        Verifier {
            shared,
            keys,
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
    /// lowercase hex digits, and a key id that names a key (without one,
    /// a shared secret to check it with). Cheap: no body, no MAC; the
    /// webhook uses it to choose a request's rate bucket before reading
    /// it.
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
        let checkable = match headers.key_id {
            Some(id) => self.keys.get(id).is_some(),
            None => self.shared.is_some(),
        };
        timestamp && nonce && signature && checkable
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
    /// order: the timestamp, the nonce, the key id (one that names no key,
    /// or none without a shared secret), the signature with that key's
    /// secret over the text with its key id, or the shared secret's
    /// (compared in constant time over the whole header value), a
    /// signature already used, a full set. Expired signatures are
    /// forgotten first.
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
        let (secret, signer) = self.secret_for(headers.key_id)?;
        let given = headers.signature.ok_or(Refusal::Signature)?;
        let expected = signature(secret, headers.key_id, timestamp, nonce, method, path, body);
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
            signer,
        })
    }

    /// The secret that checks a request naming `key_id` (none: the shared
    /// secret), and who signs with it.
    fn secret_for(&self, key_id: Option<&str>) -> Result<(&Secret, Option<Signer>), Refusal> {
        match key_id {
            Some(id) => {
                let key = self.keys.get(id).ok_or(Refusal::UnknownKey)?;
                let signer = Signer {
                    key_id: id.to_owned(),
                    approver: key.approver().to_owned(),
                };
                Ok((key.secret(), Some(signer)))
            }
            None => Ok((self.shared.as_ref().ok_or(Refusal::KeyRequired)?, None)),
        }
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
    signer: Option<Signer>,
}

impl Accepted {
    /// Who signed, when the request named a key; `None` for the shared
    /// secret.
    pub fn signer(&self) -> Option<&Signer> {
        self.signer.as_ref()
    }
}

/// Decimal Unix seconds: ASCII digits only, no sign, no spaces.
fn parse_seconds(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::super::sign::{headers_at, sign, sign_with_key, signed_headers};
    use super::*;

    use super::super::fixture::{BODY, NOW, PATH, secret};

    /// Five minutes of skew, 10 a second, bursts of 20: the defaults.
    fn verifier() -> Verifier {
        Verifier::new(secret(), Duration::from_secs(300), 10, 20)
    }

    fn headers<'a>(timestamp: &'a str, nonce: &'a str, signature: &'a str) -> SignedHeaders<'a> {
        SignedHeaders {
            timestamp: Some(timestamp),
            nonce: Some(nonce),
            signature: Some(signature),
            key_id: None,
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

    const ALICE: &str = "alice-secret-0123456789abcdef0123";
    const BOB: &str = "bob-secret-0123456789abcdef0123456";

    fn keys() -> Keys {
        let mut keys = Keys::default();
        keys.add("alice-laptop", "alice", Secret::new(ALICE).unwrap())
            .unwrap();
        keys.add("bob-ci", "bob", Secret::new(BOB).unwrap())
            .unwrap();
        keys
    }

    fn keyed_verifier(shared: Option<Secret>) -> Verifier {
        Verifier::with_keys(shared, keys(), Duration::from_secs(300), 10, 20)
    }

    /// `signature` presented with `key_id`, checked at `NOW`.
    fn present(
        v: &mut Verifier,
        key_id: Option<&str>,
        nonce: &str,
        signature: &str,
    ) -> Result<Accepted, Refusal> {
        let now = NOW.to_string();
        let received = SignedHeaders {
            key_id,
            ..headers(&now, nonce, signature)
        };
        let accepted = v.check(NOW, &received, "POST", PATH, BODY)?;
        v.remember(accepted.clone());
        Ok(accepted)
    }

    #[test]
    fn a_keyed_request_is_checked_with_its_keys_secret_and_says_who_signed() {
        let mut v = keyed_verifier(Some(secret()));
        let alice = Secret::new(ALICE).unwrap();
        let signed = sign_with_key(&alice, "alice-laptop", NOW, "n", "POST", PATH, BODY);
        let accepted = present(&mut v, Some("alice-laptop"), "n", &signed).unwrap();
        assert_eq!(
            accepted.signer(),
            Some(&Signer {
                key_id: "alice-laptop".into(),
                approver: "alice".into()
            })
        );
        assert_eq!(
            present(&mut v, Some("alice-laptop"), "n", &signed),
            Err(Refusal::Replayed)
        );
        let shared = sign(&secret(), NOW, "m", "POST", PATH, BODY);
        let accepted = present(&mut v, None, "m", &shared).unwrap();
        assert_eq!(accepted.signer(), None, "the shared secret names no one");
    }

    #[test]
    fn another_keys_signature_an_unknown_key_or_no_key_without_a_shared_secret_is_refused() {
        let mut v = keyed_verifier(None);
        let alice = Secret::new(ALICE).unwrap();
        let by_alice = sign_with_key(&alice, "alice-laptop", NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v, Some("bob-ci"), "n", &by_alice),
            Err(Refusal::Signature),
            "alice's signature under bob's key id"
        );
        let as_bob = sign_with_key(&alice, "bob-ci", NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v, Some("bob-ci"), "n", &as_bob),
            Err(Refusal::Signature),
            "bob's key id signed with alice's secret"
        );
        for unknown in ["carol", "", "alice"] {
            assert_eq!(
                present(&mut v, Some(unknown), "n", &by_alice),
                Err(Refusal::UnknownKey),
                "{unknown:?}"
            );
        }
        let unkeyed = sign(&alice, NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v, None, "n", &unkeyed),
            Err(Refusal::KeyRequired)
        );
        let now = NOW.to_string();
        let plausible = |v: &Verifier, key_id| {
            v.plausible(
                NOW,
                &SignedHeaders {
                    key_id,
                    ..headers(&now, "n", &by_alice)
                },
            )
        };
        assert!(plausible(&v, Some("alice-laptop")));
        assert!(plausible(&v, Some("bob-ci")), "the form only: no MAC");
        assert!(!plausible(&v, Some("carol")));
        assert!(!plausible(&v, None), "no shared secret");
        assert!(plausible(&keyed_verifier(Some(secret())), None));
    }

    /// Even where two secrets are one (a verifier built by hand; the keys
    /// file and `serve` refuse it), the key id is part of what is signed:
    /// it cannot be added to, removed from or swapped on a request.
    #[test]
    fn the_key_id_is_signed_so_it_cannot_be_added_removed_or_swapped() {
        let mut keys = Keys::default();
        keys.add("k1", "alice", secret()).unwrap();
        keys.add("k2", "bob", Secret::new(BOB).unwrap()).unwrap();
        let mut v = Verifier::with_keys(Some(secret()), keys, Duration::from_secs(300), 10, 20);
        let unkeyed = sign(&secret(), NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v, Some("k1"), "n", &unkeyed),
            Err(Refusal::Signature),
            "a key id added"
        );
        let keyed = sign_with_key(&secret(), "k1", NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v, None, "n", &keyed),
            Err(Refusal::Signature),
            "a key id removed"
        );
        let mut both = Keys::default();
        both.add("k1", "alice", secret()).unwrap();
        let mut v2 = Verifier::with_keys(None, both, Duration::from_secs(300), 10, 20);
        let other = sign_with_key(&secret(), "k0", NOW, "n", "POST", PATH, BODY);
        assert_eq!(
            present(&mut v2, Some("k1"), "n", &other),
            Err(Refusal::Signature),
            "a key id swapped"
        );
        assert!(present(&mut v, Some("k1"), "n", &keyed).is_ok());
    }
}
