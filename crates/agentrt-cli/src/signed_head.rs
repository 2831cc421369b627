//! Signed chain heads: the head of the event chain (seq, link, time),
//! signed with an Ed25519 key the operator keeps outside the database.
//!
//! The document (`agentrt-signed-head/v1`) is a JSON object:
//!
//! ```json
//! {
//!   "at": "2026-10-01T09:00:00.000000000Z",
//!   "database": "agentrt-demo.db",
//!   "format": "agentrt-signed-head/v1",
//!   "hash": "<the link of event seq, 64 hex digits>",
//!   "public_key": "<the signer's Ed25519 public key, 64 hex digits>",
//!   "seq": 42,
//!   "signature": "<Ed25519 signature, 128 hex digits>"
//! }
//! ```
//!
//! The signature is Ed25519 (RFC 8032, pure) over the canonical JSON
//! (keys sorted by bytes, no whitespace) of every member but
//! `signature`: `{"at":…,"database":…,"format":…,"hash":…,"public_key":…,"seq":…}`.
//! `database` is the path the head was signed from, for the reader; it is
//! not checked (a copy of the database verifies against the same head) and
//! is left out when unknown. No other member is accepted.
//!
//! What a signed head proves: that whoever holds the private key saw the
//! chain end at `seq` with link `hash` at time `at`. A later `verify` that
//! reaches that seq with that link shows the log up to it is unchanged
//! since. It proves nothing about events after it, nor that the signer was
//! honest, and it protects nothing if the key is kept where the database's
//! writers can read it.

use std::path::Path;

use agentrt::Canonical;
use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::error::CliError;
use crate::hex;
use crate::keys;

/// The format name of a signed head.
pub const FORMAT: &str = "agentrt-signed-head/v1";

/// The signed members of a signed head.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    /// When it was signed (stored time text, decision 6).
    pub at: String,
    /// The database path it was signed from (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// [`FORMAT`].
    pub format: String,
    /// The link of event `seq`.
    pub hash: String,
    /// The signer's public key, hex.
    pub public_key: String,
    /// The head's seq.
    pub seq: i64,
}

/// A signed head document: the claim and its signature.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedHead {
    /// When it was signed.
    pub at: String,
    /// The database path it was signed from (informative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<String>,
    /// [`FORMAT`].
    pub format: String,
    /// The link of event `seq`.
    pub hash: String,
    /// The signer's public key, hex.
    pub public_key: String,
    /// The head's seq.
    pub seq: i64,
    /// The Ed25519 signature over [`Claim::message`], hex.
    pub signature: String,
}

impl Claim {
    /// The signed bytes: the claim in canonical JSON.
    pub fn message(&self) -> Result<Vec<u8>, CliError> {
        Canonical::from_serialize(self)
            .map(|c| c.into_string().into_bytes())
            .map_err(|e| CliError::Failed(format!("encoding the signed head: {e}")))
    }

    /// Signs the claim; the claim must name `key`'s public key.
    pub fn sign(self, key: &SigningKey) -> Result<SignedHead, CliError> {
        let signature = key.sign(&self.message()?);
        Ok(SignedHead {
            at: self.at,
            database: self.database,
            format: self.format,
            hash: self.hash,
            public_key: self.public_key,
            seq: self.seq,
            signature: hex::encode(&signature.to_bytes()),
        })
    }
}

impl SignedHead {
    /// A new signed head for `(seq, hash)` at time `at`.
    pub fn new(
        key: &SigningKey,
        seq: i64,
        hash: &str,
        at: &str,
        database: Option<String>,
    ) -> Result<SignedHead, CliError> {
        Claim {
            at: at.to_owned(),
            database,
            format: FORMAT.to_owned(),
            hash: hash.to_owned(),
            public_key: hex::encode(key.verifying_key().as_bytes()),
            seq,
        }
        .sign(key)
    }

    /// The signed members.
    pub fn claim(&self) -> Claim {
        Claim {
            at: self.at.clone(),
            database: self.database.clone(),
            format: self.format.clone(),
            hash: self.hash.clone(),
            public_key: self.public_key.clone(),
            seq: self.seq,
        }
    }

    /// The document as written to a file: pretty JSON and a newline.
    pub fn to_text(&self) -> Result<String, CliError> {
        let compact = serde_json::to_string(self)
            .map_err(|e| CliError::Failed(format!("encoding the signed head: {e}")))?;
        Ok(format!("{}\n", agentrt::view::pretty_json(&compact)))
    }

    /// Parses a signed head document.
    pub fn parse(path: &Path, text: &str) -> Result<SignedHead, CliError> {
        let head: SignedHead = serde_json::from_str(text)
            .map_err(|e| CliError::Failed(format!("{} is not a signed head: {e}", shown(path))))?;
        if head.format != FORMAT {
            return Err(CliError::Failed(format!(
                "{} has format {:?}; this agentrt reads {FORMAT:?}",
                shown(path),
                head.format
            )));
        }
        if head.seq < 1 || head.hash.is_empty() {
            return Err(CliError::Failed(format!(
                "{} names no head (seq {}, hash {:?})",
                shown(path),
                head.seq,
                head.hash
            )));
        }
        Ok(head)
    }

    /// Checks that the document was signed by `trusted`.
    pub fn check(&self, path: &Path, trusted: &VerifyingKey) -> Result<(), CliError> {
        let fail = |why: &str| CliError::Failed(format!("{}: {why}", shown(path)));
        let named = hex::decode::<32>(&self.public_key)
            .ok_or_else(|| fail("its public_key is not 64 hex digits"))?;
        if &named != trusted.as_bytes() {
            return Err(fail(
                "it was signed with another key than the one given with --pubkey",
            ));
        }
        let signature = hex::decode::<64>(&self.signature)
            .map(|b| Signature::from_bytes(&b))
            .ok_or_else(|| fail("its signature is not 128 hex digits"))?;
        trusted
            .verify_strict(&self.claim().message()?, &signature)
            .map_err(|_| {
                fail("its signature does not verify: the signed head was altered or forged")
            })
    }
}

/// Reads and checks the signed head at `path` against the public key at
/// `pubkey` (which must be owned privately).
pub fn read_checked(path: &Path, pubkey: &Path) -> Result<SignedHead, CliError> {
    let trusted = keys::read_public(pubkey)?;
    let text = read_document(path)?;
    let head = SignedHead::parse(path, &text)?;
    head.check(path, &trusted)?;
    Ok(head)
}

fn read_document(path: &Path) -> Result<String, CliError> {
    use std::io::Read;
    let io = |e: std::io::Error| CliError::Failed(format!("{}: {e}", shown(path)));
    let file = std::fs::File::open(path).map_err(io)?;
    if !file.metadata().map_err(io)?.is_file() {
        return Err(CliError::Failed(format!(
            "{} is not a regular file",
            shown(path)
        )));
    }
    let mut text = String::new();
    file.take(64 * 1024).read_to_string(&mut text).map_err(io)?;
    Ok(text)
}

fn shown(path: &Path) -> String {
    agentrt::text::sanitize(&path.to_string_lossy())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> SignedHead {
        let key = SigningKey::from_bytes(&[7u8; 32]);
        SignedHead::new(
            &key,
            42,
            &"ab".repeat(32),
            "2026-10-01T09:00:00.000000000Z",
            Some("agentrt-demo.db".into()),
        )
        .unwrap()
    }

    /// The signed bytes and the signature are pinned.
    #[test]
    fn the_signed_layout_is_pinned() {
        let head = fixed();
        let message = String::from_utf8(head.claim().message().unwrap()).unwrap();
        assert_eq!(
            message,
            format!(
                r#"{{"at":"2026-10-01T09:00:00.000000000Z","database":"agentrt-demo.db","format":"agentrt-signed-head/v1","hash":"{}","public_key":"{}","seq":42}}"#,
                "ab".repeat(32),
                head.public_key
            )
        );
        assert_eq!(
            head.signature,
            "65d91753a233ed47dd5cb0452b1f2daf76eb31c0dab94645518f054ced9dca4bca5858f0fe1f6ebb0959b225754eafa0fc8cfa2b6db331e7b33514fa2a5b330a"
        );
        let key = SigningKey::from_bytes(&[7u8; 32]).verifying_key();
        head.check(Path::new("h"), &key).unwrap();
        let text = head.to_text().unwrap();
        assert_eq!(SignedHead::parse(Path::new("h"), &text).unwrap(), head);
    }

    #[test]
    fn any_change_or_another_key_is_refused() {
        let head = fixed();
        let key = SigningKey::from_bytes(&[7u8; 32]).verifying_key();
        let changed = [
            SignedHead {
                seq: 43,
                ..head.clone()
            },
            SignedHead {
                hash: "cd".repeat(32),
                ..head.clone()
            },
            SignedHead {
                at: "2026-10-02T09:00:00.000000000Z".into(),
                ..head.clone()
            },
            SignedHead {
                database: None,
                ..head.clone()
            },
        ];
        for h in changed {
            let Err(CliError::Failed(m)) = h.check(Path::new("h"), &key) else {
                panic!("{h:?} passed")
            };
            assert!(m.contains("does not verify"), "{m}");
        }
        let other = SigningKey::from_bytes(&[8u8; 32]).verifying_key();
        let Err(CliError::Failed(m)) = head.check(Path::new("h"), &other) else {
            panic!()
        };
        assert!(m.contains("another key"), "{m}");
        // A member the signature does not cover is refused.
        let text = head.to_text().unwrap().replacen('{', r#"{"note":"x","#, 1);
        assert!(SignedHead::parse(Path::new("h"), &text).is_err());
    }
}
