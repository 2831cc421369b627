//! Per-approver keys ([`Keys`]) and their file.

use std::collections::BTreeMap;
use std::fmt;

use agentrt::JsonError;
use serde_json::Value;

use super::secret::{Secret, ShortSecret};

/// The longest key id, in characters.
pub const MAX_KEY_ID_CHARS: usize = 64;
/// The longest approver's name, in characters.
pub const MAX_APPROVER_CHARS: usize = 256;

/// One key: whose it is and its secret.
#[derive(Debug, Clone)]
pub struct Key {
    approver: String,
    secret: Secret,
}

impl Key {
    /// Who the key decides as.
    pub fn approver(&self) -> &str {
        &self.approver
    }

    /// Its secret.
    pub fn secret(&self) -> &Secret {
        &self.secret
    }
}

/// Who signed a request made with a key: the key id and its approver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The key id the request named.
    pub key_id: String,
    /// That key's approver: the only `by` its decisions may carry.
    pub approver: String,
}

/// Per-approver keys: each key id names one approver and that approver's
/// own secret. A request signed with a key decides as its approver and
/// no one else (the webhook refuses another `by`).
///
/// The keys file (`agentrt-approver serve --keys FILE`, a file only its
/// owner may read), JSON, unknown fields refused:
///
/// ```json
/// {"keys": {
///   "alice-laptop": {"approver": "alice", "secret": "<32 bytes or more>"},
///   "bob-ci":       {"approver": "bob",   "secret": "<another>"}
/// }}
/// ```
///
/// A key id is 1 to [`MAX_KEY_ID_CHARS`] of `A-Z a-z 0-9 . _ -`, given
/// once; an approver is 1 to [`MAX_APPROVER_CHARS`] characters, no
/// control character, no whitespace at either end; a secret is at least
/// [`MIN_SECRET_BYTES`](super::MIN_SECRET_BYTES) bytes, its UTF-8 bytes
/// used as written (as the secret file's line is: `openssl rand -hex 32`
/// makes a good one), each key's its own and none the shared secret
/// ([`Keys::check_apart_from`]). The core sets no limit on who decides;
/// [`MAX_APPROVER_CHARS`] keeps a recorded name short enough to be shown
/// whole.
///
/// Several keys may name one approver (a laptop's and a CI job's).
///
/// ```
/// use agentrt_approver::signature::Keys;
/// let file = br#"{"keys": {"alice-laptop": {"approver": "alice", "secret": "0123456789abcdef0123456789abcdef"}}}"#;
/// let keys = Keys::parse(file)?;
/// assert_eq!(keys.get("alice-laptop").map(|k| k.approver()), Some("alice"));
/// let short = br#"{"keys": {"bob-ci": {"approver": "bob", "secret": "short"}}}"#;
/// assert_eq!(
///     Keys::parse(short).unwrap_err().to_string(),
///     r#"key "bob-ci": its secret has 5 bytes; at least 32 are needed"#
/// );
/// # Ok::<(), agentrt_approver::signature::KeysError>(())
/// ```
///
/// Its `Debug` shows ids and approvers, never a secret.
#[derive(Clone, Default)]
pub struct Keys {
    by_id: BTreeMap<String, Key>,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.by_id.iter().map(|(id, key)| (id, &key.approver)))
            .finish()
    }
}

/// Why keys were refused. Each text names the key (and never shows a
/// secret).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeysError {
    /// Not JSON (the core's boundary check: syntax, encoding, depth).
    #[error("not JSON: {0}")]
    Json(JsonError),
    /// A member given twice in one object: a key id, or a field of a key.
    #[error("{} is given twice in one object; give each key id, and each field of a key, once", shown(.name))]
    Repeated {
        /// The repeated member.
        name: String,
    },
    /// JSON that is not of the file's shape (an unknown field included).
    #[error(
        "{detail}; expected {{\"keys\": {{\"<key id>\": {{\"approver\": \"…\", \"secret\": \"…\"}}}}}}"
    )]
    Shape {
        /// What is wrong, and where.
        detail: String,
    },
    /// The file names no key.
    #[error("no key is given; name at least one under \"keys\"")]
    Empty,
    /// A key id that is empty, too long, or holds another character.
    #[error("key {}: a key id is 1 to 64 of A-Z a-z 0-9 . _ -", shown(.key))]
    KeyId {
        /// The key id.
        key: String,
    },
    /// A key id given twice.
    #[error("key {}: given twice", shown(.key))]
    Twice {
        /// The key id.
        key: String,
    },
    /// An approver's name that is empty, too long, holds a control
    /// character or a space at either end.
    #[error("key {}: its approver {detail}", shown(.key))]
    Approver {
        /// The key id.
        key: String,
        /// What is wrong with the name.
        detail: String,
    },
    /// A secret shorter than [`MIN_SECRET_BYTES`](super::MIN_SECRET_BYTES).
    #[error("key {}: its secret has {bytes} bytes; at least 32 are needed", shown(.key))]
    ShortSecret {
        /// The key id.
        key: String,
        /// How many bytes it has.
        bytes: usize,
    },
    /// Two keys with one secret: either holder could sign as the other.
    #[error("key {}: its secret is also key {}'s; give each key its own", shown(.key), shown(.other))]
    SameSecret {
        /// The key id.
        key: String,
        /// The other key's id.
        other: String,
    },
    /// A key whose secret is the shared secret: its holder could sign
    /// requests without a key, with any `by`.
    #[error("key {}: its secret is the shared secret (--secret-file); give each key its own", shown(.key))]
    SharedSecret {
        /// The key id.
        key: String,
    },
}

/// `text` quoted and escaped, cut to 64 characters.
fn shown(text: &str) -> String {
    let count = text.chars().count();
    if count <= MAX_KEY_ID_CHARS {
        return format!("{text:?}");
    }
    let head: String = text.chars().take(MAX_KEY_ID_CHARS).collect();
    format!("{head:?}… ({count} characters)")
}

impl Keys {
    /// The keys a keys file holds (see the module's documentation).
    pub fn parse(bytes: &[u8]) -> Result<Keys, KeysError> {
        // The core's check first: serde_json keeps the last of a
        // repeated member, and its messages may quote a value.
        agentrt::json::check_boundary(bytes).map_err(|e| match e {
            JsonError::DuplicateKey { key } => KeysError::Repeated { name: key },
            other => KeysError::Json(other),
        })?;
        let shape = |detail: String| KeysError::Shape { detail };
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| shape(format!("unreadable: {e}")))?;
        let Value::Object(top) = value else {
            return Err(shape("not an object".into()));
        };
        if let Some(other) = top.keys().find(|k| *k != "keys") {
            return Err(shape(format!("unknown field {}", shown(other))));
        }
        let Some(entries) = top.get("keys") else {
            return Err(shape("no \"keys\"".into()));
        };
        let Value::Object(entries) = entries else {
            return Err(shape("\"keys\" is not an object".into()));
        };
        if entries.is_empty() {
            return Err(KeysError::Empty);
        }
        let mut keys = Keys::default();
        for (id, entry) in entries {
            check_key_id(id)?;
            let at = |detail: &str| shape(format!("key {}: {detail}", shown(id)));
            let Value::Object(fields) = entry else {
                return Err(at("not an object"));
            };
            if let Some(other) = fields.keys().find(|k| *k != "approver" && *k != "secret") {
                return Err(at(&format!("unknown field {}", shown(other))));
            }
            let text = |name: &str| match fields.get(name) {
                Some(Value::String(text)) => Ok(text.as_str()),
                Some(_) => Err(at(&format!("\"{name}\" is not a string"))),
                None => Err(at(&format!("no \"{name}\""))),
            };
            let approver = text("approver")?;
            let secret = Secret::new(text("secret")?).map_err(|ShortSecret(bytes)| {
                KeysError::ShortSecret {
                    key: id.clone(),
                    bytes,
                }
            })?;
            keys.add(id, approver, secret)?;
        }
        Ok(keys)
    }

    /// Adds the key `key_id` of `approver`, held to the file's rules: a
    /// valid key id not given before, a valid approver, a secret no other
    /// key has.
    pub fn add(&mut self, key_id: &str, approver: &str, secret: Secret) -> Result<(), KeysError> {
        check_key_id(key_id)?;
        check_approver(key_id, approver)?;
        if self.by_id.contains_key(key_id) {
            return Err(KeysError::Twice {
                key: key_id.to_owned(),
            });
        }
        if let Some((other, _)) = self.by_id.iter().find(|(_, k)| k.secret.same_as(&secret)) {
            return Err(KeysError::SameSecret {
                key: key_id.to_owned(),
                other: other.clone(),
            });
        }
        self.by_id.insert(
            key_id.to_owned(),
            Key {
                approver: approver.to_owned(),
                secret,
            },
        );
        Ok(())
    }

    /// The key `key_id`, if there is one.
    pub fn get(&self, key_id: &str) -> Option<&Key> {
        self.by_id.get(key_id)
    }

    /// How many keys there are.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Refuses a key whose secret is `shared` (the shared secret): its
    /// holder could otherwise sign requests without a key, as anyone.
    pub fn check_apart_from(&self, shared: &Secret) -> Result<(), KeysError> {
        match self.by_id.iter().find(|(_, k)| k.secret.same_as(shared)) {
            Some((id, _)) => Err(KeysError::SharedSecret { key: id.clone() }),
            None => Ok(()),
        }
    }
}

/// 1 to [`MAX_KEY_ID_CHARS`] of `A-Z a-z 0-9 . _ -`.
fn check_key_id(key_id: &str) -> Result<(), KeysError> {
    let valid = (1..=MAX_KEY_ID_CHARS).contains(&key_id.len())
        && key_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(KeysError::KeyId {
            key: key_id.to_owned(),
        })
    }
}

/// 1 to [`MAX_APPROVER_CHARS`] characters, no control character, no
/// whitespace at either end.
fn check_approver(key_id: &str, approver: &str) -> Result<(), KeysError> {
    let refused = |detail: String| KeysError::Approver {
        key: key_id.to_owned(),
        detail,
    };
    let count = approver.chars().count();
    if count == 0 {
        return Err(refused("is empty".into()));
    }
    if count > MAX_APPROVER_CHARS {
        return Err(refused(format!(
            "is {count} characters long; at most {MAX_APPROVER_CHARS}"
        )));
    }
    if let Some(bad) = approver.chars().find(|c| c.is_control()) {
        return Err(refused(format!(
            "holds the control character U+{:04X}",
            u32::from(bad)
        )));
    }
    if approver.trim() != approver {
        return Err(refused(format!(
            "{approver:?} begins or ends with whitespace"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "0123456789abcdef0123456789abcdef";
    const B: &str = "fedcba9876543210fedcba9876543210";

    fn file(keys: Value) -> Vec<u8> {
        serde_json::json!({ "keys": keys }).to_string().into_bytes()
    }

    fn refused(bytes: &[u8]) -> String {
        let e = Keys::parse(bytes).unwrap_err().to_string();
        assert!(!e.contains(A) && !e.contains(B), "never a secret: {e}");
        e
    }

    #[test]
    fn a_keys_file_names_each_keys_approver() {
        let keys = Keys::parse(&file(serde_json::json!({
            "alice-laptop": {"approver": "alice", "secret": A},
            "bob.ci_2": {"approver": "Bob Bobson", "secret": B},
        })))
        .unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys.get("alice-laptop").unwrap().approver(), "alice");
        assert_eq!(keys.get("bob.ci_2").unwrap().approver(), "Bob Bobson");
        assert!(keys.get("alice").is_none());
        let debug = format!("{keys:?}");
        assert_eq!(
            debug,
            r#"{"alice-laptop": "alice", "bob.ci_2": "Bob Bobson"}"#
        );
    }

    #[test]
    fn a_file_not_of_the_shape_is_refused_with_where() {
        for (bytes, says) in [
            (&b"{"[..], "not JSON"),
            (b"[]", "not an object"),
            (b"{}", "no \"keys\""),
            (br#"{"keys": []}"#, "\"keys\" is not an object"),
            (br#"{"keys": {}}"#, "no key is given"),
            (br#"{"keys": {}, "extra": 1}"#, "unknown field \"extra\""),
        ] {
            let e = refused(bytes);
            assert!(e.contains(says), "{e}");
        }
        let cases = [
            (serde_json::json!({"k1": A}), "key \"k1\": not an object"),
            (
                serde_json::json!({"k1": {"approver": "a", "secret": A, "role": "x"}}),
                "key \"k1\": unknown field \"role\"",
            ),
            (
                serde_json::json!({"k1": {"secret": A}}),
                "key \"k1\": no \"approver\"",
            ),
            (
                serde_json::json!({"k1": {"approver": "a"}}),
                "key \"k1\": no \"secret\"",
            ),
            (
                serde_json::json!({"k1": {"approver": 7, "secret": A}}),
                "key \"k1\": \"approver\" is not a string",
            ),
            (
                serde_json::json!({"k1": {"approver": "a", "secret": 12}}),
                "key \"k1\": \"secret\" is not a string",
            ),
        ];
        for (keys, says) in cases {
            let e = refused(&file(keys));
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_key_id_given_twice_is_refused_not_the_last_one_kept() {
        let text = format!(
            r#"{{"keys": {{"k1": {{"approver": "alice", "secret": "{A}"}}, "k1": {{"approver": "bob", "secret": "{B}"}}}}}}"#
        );
        let e = refused(text.as_bytes());
        assert!(e.starts_with("\"k1\" is given twice"), "{e}");
        let mut keys = Keys::default();
        keys.add("k1", "alice", Secret::new(A).unwrap()).unwrap();
        assert_eq!(
            keys.add("k1", "bob", Secret::new(B).unwrap()),
            Err(KeysError::Twice { key: "k1".into() })
        );
    }

    #[test]
    fn key_ids_are_1_to_64_of_letters_digits_dot_underscore_dash() {
        for good in ["a", "A.b_c-9", &"k".repeat(64)] {
            assert!(check_key_id(good).is_ok(), "{good}");
        }
        for bad in ["", "a b", "a/b", "é", "a\nb", &"k".repeat(65)] {
            let e = Keys::parse(&file(
                serde_json::json!({ bad: {"approver": "a", "secret": A} }),
            ))
            .unwrap_err();
            assert_eq!(e, KeysError::KeyId { key: bad.into() }, "{bad:?}");
        }
        let long = KeysError::KeyId {
            key: "k".repeat(1000),
        }
        .to_string();
        assert!(long.contains("… (1000 characters)"), "{long}");
    }

    #[test]
    fn an_approver_is_a_short_clean_name() {
        let name = "é".repeat(MAX_APPROVER_CHARS);
        assert!(check_approver("k", &name).is_ok());
        for (bad, says) in [
            (String::new(), "its approver is empty"),
            ("é".repeat(257), "257 characters long; at most 256"),
            ("ali\u{0}ce".into(), "control character U+0000"),
            ("alice\n".into(), "control character U+000A"),
            (" alice".into(), "begins or ends with whitespace"),
        ] {
            let e = refused(&file(
                serde_json::json!({"k1": {"approver": bad, "secret": A}}),
            ));
            assert!(e.starts_with("key \"k1\": its approver"), "{e}");
            assert!(e.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_secret_is_32_bytes_or_more_and_each_keys_own() {
        let e = refused(&file(
            serde_json::json!({"k1": {"approver": "a", "secret": &A[..31]}}),
        ));
        assert_eq!(
            e,
            "key \"k1\": its secret has 31 bytes; at least 32 are needed"
        );
        let e = refused(&file(serde_json::json!({
            "k1": {"approver": "alice", "secret": A},
            "k2": {"approver": "bob", "secret": A},
        })));
        assert_eq!(
            e,
            "key \"k2\": its secret is also key \"k1\"'s; give each key its own"
        );
        let keys = Keys::parse(&file(
            serde_json::json!({"k1": {"approver": "a", "secret": A}}),
        ))
        .unwrap();
        assert!(keys.check_apart_from(&Secret::new(B).unwrap()).is_ok());
        assert_eq!(
            keys.check_apart_from(&Secret::new(A).unwrap()),
            Err(KeysError::SharedSecret { key: "k1".into() })
        );
    }
}
