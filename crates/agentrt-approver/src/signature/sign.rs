//! Making a signature: the headers' names, the signed text, and the
//! headers a client sends.

use hmac::Mac;

use super::secret::Secret;

/// The request's time, Unix seconds in decimal.
pub const TIMESTAMP_HEADER: &str = "x-approval-timestamp";
/// A value the sender never uses twice, at most [`MAX_NONCE_CHARS`].
pub const NONCE_HEADER: &str = "x-approval-nonce";
/// `v1=` and the lowercase hex HMAC-SHA256 of the signed text.
pub const SIGNATURE_HEADER: &str = "x-approval-signature";
/// The key a request is signed with, when it names one (see
/// [`Keys`](super::Keys)); its id is part of the signed text.
pub const KEY_ID_HEADER: &str = "x-approval-key-id";
/// The longest nonce accepted, in characters.
pub const MAX_NONCE_CHARS: usize = 64;

/// The `X-Approval-Signature` value of a request signed with the shared
/// secret: `v1=` and the lowercase hex HMAC-SHA256 of
/// `<timestamp>\n<nonce>\n<METHOD>\n<path>\n<body>`.
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
    signature(secret, None, timestamp, nonce, method, path, body)
}

/// The `X-Approval-Signature` value of a request signed with the key
/// `key_id` (`secret` being that key's): as [`sign`], the signed text
/// preceded by the line `key=<key id>`, so that the key id cannot be
/// changed, added or removed without breaking the signature (a text
/// signed without a key begins with a digit, never with `key=`).
///
/// ```
/// use agentrt_approver::signature::{Secret, sign, sign_with_key};
/// let secret = Secret::new([7u8; 32]).unwrap();
/// let keyed = sign_with_key(&secret, "alice-laptop", 1_790_000_000, "n-1", "POST", "/runs/r1/cancel", b"{}");
/// assert_ne!(keyed, sign(&secret, 1_790_000_000, "n-1", "POST", "/runs/r1/cancel", b"{}"));
/// ```
pub fn sign_with_key(
    secret: &Secret,
    key_id: &str,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> String {
    signature(secret, Some(key_id), timestamp, nonce, method, path, body)
}

/// [`sign`] or [`sign_with_key`].
pub(crate) fn signature(
    secret: &Secret,
    key_id: Option<&str>,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> String {
    let mut mac = secret.mac();
    if let Some(key_id) = key_id {
        mac.update(format!("key={key_id}\n").as_bytes());
    }
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
    let (now, nonce) = now_and_nonce()?;
    Ok(headers_at(secret, now, &nonce, method, path, body))
}

/// [`signed_headers`] for a request signed with the key `key_id`
/// (`secret` being that key's): the same headers and
/// `X-Approval-Key-Id`, the signature [`sign_with_key`]'s.
///
/// ```
/// use agentrt_approver::signature::{Secret, keyed_headers};
/// let secret = Secret::new(vec![1u8; 32]).unwrap();
/// let headers = keyed_headers(&secret, "alice-laptop", "GET", "/runs/r1/approvals", b"").unwrap();
/// assert_eq!(headers[3], ("x-approval-key-id", "alice-laptop".to_owned()));
/// ```
pub fn keyed_headers(
    secret: &Secret,
    key_id: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Result<Vec<(&'static str, String)>, getrandom::Error> {
    let (now, nonce) = now_and_nonce()?;
    Ok(keyed_headers_at(
        secret, key_id, now, &nonce, method, path, body,
    ))
}

/// The wall clock's Unix seconds and a fresh 16-byte random nonce in hex.
fn now_and_nonce() -> Result<(i64, String), getrandom::Error> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok((now, hex(&bytes)))
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
    client_headers(secret, None, timestamp, nonce, method, path, body)
}

/// [`keyed_headers`] with a given time and nonce.
pub fn keyed_headers_at(
    secret: &Secret,
    key_id: &str,
    timestamp: i64,
    nonce: &str,
    method: &str,
    path: &str,
    body: &[u8],
) -> Vec<(&'static str, String)> {
    client_headers(secret, Some(key_id), timestamp, nonce, method, path, body)
}

fn client_headers(
    secret: &Secret,
    key_id: Option<&str>,
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
            signature(secret, key_id, timestamp, nonce, method, path, body),
        ),
    ];
    if let Some(key_id) = key_id {
        headers.push((KEY_ID_HEADER, key_id.to_owned()));
    }
    if !body.is_empty() {
        headers.push(("content-type", "application/json".to_owned()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::fixture::{BODY, NOW, PATH, secret};

    /// The same HMAC as Python's `hmac.new(key, msg, hashlib.sha256)` over
    /// `<ts>\n<nonce>\n<METHOD>\n<path>\n<body>`, key bytes 0..32.
    #[test]
    fn the_signature_is_hmac_sha256_of_the_five_parts_as_any_language_computes_it() {
        assert_eq!(
            sign(&secret(), NOW, "nonce-1", "POST", PATH, BODY),
            "v1=84d5458d3dedc41cd3d94be9c5ba3f8c9b83f1de7c6ab1ee52d08a030a37b488"
        );
    }

    /// Python: `hmac.new(bytes(range(32)), b"key=alice-laptop\n" + msg,
    /// hashlib.sha256)`, `msg` as above.
    #[test]
    fn a_keyed_signature_is_the_same_hmac_over_the_key_line_and_the_five_parts() {
        assert_eq!(
            sign_with_key(
                &secret(),
                "alice-laptop",
                NOW,
                "nonce-1",
                "POST",
                PATH,
                BODY
            ),
            "v1=295ab648f5becb89024cfbdd5f937445a233397bb1d5eea903702eb96bd04121"
        );
    }

    #[test]
    fn client_headers_carry_the_key_id_only_when_keyed() {
        let plain = headers_at(&secret(), NOW, "n", "POST", PATH, BODY);
        assert!(plain.iter().all(|(name, _)| *name != KEY_ID_HEADER));
        let keyed = keyed_headers_at(&secret(), "k1", NOW, "n", "POST", PATH, BODY);
        assert_eq!(keyed[3], (KEY_ID_HEADER, "k1".to_owned()));
        assert_eq!(
            keyed[2].1,
            sign_with_key(&secret(), "k1", NOW, "n", "POST", PATH, BODY)
        );
        assert_ne!(keyed[2].1, plain[2].1);
    }
}
