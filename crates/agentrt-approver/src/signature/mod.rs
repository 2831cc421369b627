//! The webhook's request signature (design §35): HMAC-SHA256 over the
//! timestamp, the nonce, the method, the path and the raw body, carried in
//! three headers on every request, checked against a window of accepted
//! times and a bounded set of signatures already used.
//!
//! A request is signed with the shared secret, or with one approver's
//! key ([`Keys`]): then it also carries `X-Approval-Key-Id`, its
//! signature is that key's secret's over the same text preceded by the
//! line `key=<key id>` ([`sign_with_key`]), and the webhook takes its
//! decisions as that key's approver's only.
//!
//! - `secret`: a secret, and its strength rule;
//! - `sign`: the headers' names, the signed text, a client's headers;
//! - `keys`: the per-approver keys and their file;
//! - `verify`: the check of a received request.

mod keys;
mod secret;
mod sign;
mod verify;

pub use keys::{Key, Keys, KeysError, MAX_APPROVER_CHARS, MAX_KEY_ID_CHARS, Signer};
pub use secret::{MIN_SECRET_BYTES, Secret, ShortSecret};
pub use sign::{
    KEY_ID_HEADER, MAX_NONCE_CHARS, NONCE_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, headers_at,
    keyed_headers, keyed_headers_at, sign, sign_with_key, signed_headers,
};
pub use verify::{Accepted, Refusal, SignedHeaders, Verifier};

pub(crate) use secret::constant_time_eq;
pub(crate) use sign::hex;

/// What the signing and checking tests sign: one time, path, body and
/// secret (key bytes 0..32, as the Python cross-checks use).
#[cfg(test)]
mod fixture {
    use super::Secret;

    pub(super) const NOW: i64 = 1_790_000_000;
    pub(super) const PATH: &str = "/runs/r1/approvals/a1/approve";
    pub(super) const BODY: &[u8] = br#"{"run_id":"r1"}"#;

    pub(super) fn secret() -> Secret {
        Secret::new((0u8..32).collect::<Vec<u8>>()).unwrap()
    }
}
