//! [`Canonical`]: a JSON value held in its canonical text form.

use std::fmt;
use std::str::FromStr;

use serde_json::value::RawValue;

use super::parse::{Node, Tree};
use super::write::write_node;
use super::{JsonError, hash_hex};

/// A JSON value in the canonical form.
///
/// The text has object keys sorted by UTF-8 bytes, no insignificant
/// whitespace, number literals exactly as written in the input, and strings
/// escaped one fixed way (see [`write_string`](super::write_string)).
/// Two inputs that denote the same JSON document with the same number
/// spellings give byte-identical canonical text, hence the same
/// [`hash`](Canonical::hash).
///
/// Invariant: the text is canonical; a `Canonical` can only be built by
/// parsing. Equality, ordering and hashing compare the canonical text.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Canonical(String);

impl Canonical {
    /// Checks `input` against the boundary rules
    /// ([`check_boundary`](super::check_boundary)) and returns its canonical
    /// form. Blank input (empty, or only JSON whitespace) gives `null`.
    ///
    /// # Errors
    ///
    /// Any [`JsonError`] of the boundary check.
    ///
    /// ```
    /// use agentrt::json::Canonical;
    ///
    /// let c = Canonical::parse(br#"{ "b": 1, "a": 10.0 }"#)?;
    /// assert_eq!(c.as_str(), r#"{"a":10.0,"b":1}"#);
    /// assert!(Canonical::parse(br#"{"a":1,"a":2}"#).is_err());
    /// assert!(Canonical::parse(b"  ")?.is_null());
    /// # Ok::<(), agentrt::json::JsonError>(())
    /// ```
    pub fn parse(input: &[u8]) -> Result<Canonical, JsonError> {
        let tree = Tree::parse(input)?;
        // Canonical text is never longer than valid input (whitespace goes,
        // escapes only shrink), except blank input which becomes `null`.
        let mut out = String::with_capacity(input.len().max(4));
        write_node(&tree, tree.root(), &mut out);
        Ok(Canonical(out))
    }

    /// [`Canonical::parse`] for text.
    ///
    /// # Errors
    ///
    /// Any [`JsonError`] of the boundary check.
    pub fn parse_str(input: &str) -> Result<Canonical, JsonError> {
        Canonical::parse(input.as_bytes())
    }

    /// Serialises `value` with `serde_json` and canonicalises the result.
    ///
    /// # Errors
    ///
    /// Fails with [`JsonError::Unencodable`] when `serde_json` cannot
    /// serialise the value (e.g. a map with non-string keys), or with a
    /// boundary error when the JSON breaks a limit (e.g. nests too deep, or a
    /// map serialises two keys to the same string).
    pub fn from_serialize<T: serde::Serialize + ?Sized>(value: &T) -> Result<Canonical, JsonError> {
        let bytes = serde_json::to_vec(value).map_err(|e| JsonError::Unencodable {
            detail: e.to_string(),
        })?;
        Canonical::parse(&bytes)
    }

    /// Wraps text the caller built from canonical pieces in canonical
    /// order (sorted keys, canonical members), skipping the parse. The
    /// result may nest deeper than [`MAX_DEPTH`](super::MAX_DEPTH); it is
    /// only hashed or stored, never re-checked.
    pub(crate) fn assume_canonical(text: String) -> Canonical {
        Canonical(text)
    }

    /// The JSON `null`.
    #[must_use]
    pub fn null() -> Canonical {
        Canonical("null".to_owned())
    }

    /// The empty object `{}`.
    #[must_use]
    pub fn empty_object() -> Canonical {
        Canonical("{}".to_owned())
    }

    /// The canonical text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The canonical text as bytes (what [`hash`](Canonical::hash) covers).
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The canonical text, by value.
    #[must_use]
    pub fn into_string(self) -> String {
        self.0
    }

    /// BLAKE3-256 of the canonical bytes, as 64 lowercase hex characters.
    #[must_use]
    pub fn hash(&self) -> String {
        hash_hex(self.as_bytes())
    }

    /// Whether this is the JSON `null`.
    #[must_use]
    pub fn is_null(&self) -> bool {
        self.0 == "null"
    }

    /// Whether this is a JSON object.
    #[must_use]
    pub fn is_object(&self) -> bool {
        self.0.starts_with('{')
    }

    /// The value as a [`serde_json::Value`].
    ///
    /// Built from this crate's own parse rather than `serde_json::from_str`,
    /// because `serde_json` refuses nesting deeper than 128 levels while
    /// canonical JSON allows [`MAX_DEPTH`](super::MAX_DEPTH). Each number is
    /// read by `serde_json` (so it equals what `serde_json` reads from the
    /// same literal); a number beyond the `f64` range (e.g. `1e400`), which
    /// `serde_json::Value` cannot hold, becomes `Value::Null`, as
    /// `Value::from(f64::INFINITY)` does.
    #[must_use]
    pub fn to_value(&self) -> serde_json::Value {
        match Tree::parse_str(self.as_str()) {
            Ok(tree) => tree_to_value(&tree),
            // Unreachable: canonical text always parses. Fall back to null
            // rather than panic.
            Err(_) => serde_json::Value::Null,
        }
    }

    /// The member `key` of this object, canonical; `None` if this is not an
    /// object or has no such member.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<Canonical> {
        if !self.is_object() {
            return None;
        }
        let tree = Tree::parse_str(self.as_str()).ok()?;
        let Some(Node::Object { start, end }) = tree.nodes.get(tree.root()) else {
            return None;
        };
        let members = tree.members.get(*start..*end)?;
        let at = members
            .binary_search_by(|(k, _)| k.as_bytes().cmp(key.as_bytes()))
            .ok()?;
        let value = members.get(at)?.1;
        Some(subtree(&tree, value))
    }
}

/// The members of the object `c`, in canonical form and sorted by key bytes;
/// `None` if `c` is not an object.
///
/// ```
/// use agentrt::json::{Canonical, object_members};
///
/// let c = Canonical::parse_str(r#"{"b":[1, 2],"a":{"y":1,"x":2}}"#)?;
/// let members = object_members(&c).unwrap_or_default();
/// assert_eq!(members[0].0, "a");
/// assert_eq!(members[0].1.as_str(), r#"{"x":2,"y":1}"#);
/// assert_eq!(members[1].1.as_str(), "[1,2]");
/// assert!(object_members(&Canonical::null()).is_none());
/// # Ok::<(), agentrt::json::JsonError>(())
/// ```
#[must_use]
pub fn object_members(c: &Canonical) -> Option<Vec<(String, Canonical)>> {
    if !c.is_object() {
        return None;
    }
    let tree = Tree::parse_str(c.as_str()).ok()?;
    let Some(Node::Object { start, end }) = tree.nodes.get(tree.root()) else {
        return None;
    };
    let members = tree.members.get(*start..*end)?;
    Some(
        members
            .iter()
            .map(|(k, v)| (k.clone().into_owned(), subtree(&tree, *v)))
            .collect(),
    )
}

/// The canonical text of node `node`.
fn subtree(tree: &Tree<'_>, node: usize) -> Canonical {
    let mut out = String::new();
    write_node(tree, node, &mut out);
    Canonical(out)
}

/// Converts a whole tree bottom-up, without recursion (nodes are in
/// post-order, so children are converted before their container).
fn tree_to_value(tree: &Tree<'_>) -> serde_json::Value {
    use serde_json::Value;
    let mut values: Vec<Value> = Vec::with_capacity(tree.nodes.len());
    for node in &tree.nodes {
        let value = match node {
            Node::Null => Value::Null,
            Node::True => Value::Bool(true),
            Node::False => Value::Bool(false),
            // Fails only for magnitudes beyond f64; see `to_value`.
            Node::Number(n) => n.parse().map_or(Value::Null, Value::Number),
            Node::Str(s) => Value::String(s.to_string()),
            Node::Array { start, end } => Value::Array(
                tree.items
                    .get(*start..*end)
                    .unwrap_or_default()
                    .iter()
                    .map(|&i| values.get_mut(i).map(std::mem::take).unwrap_or_default())
                    .collect(),
            ),
            Node::Object { start, end } => Value::Object(
                tree.members
                    .get(*start..*end)
                    .unwrap_or_default()
                    .iter()
                    .map(|(k, i)| {
                        let v = values.get_mut(*i).map(std::mem::take).unwrap_or_default();
                        (k.to_string(), v)
                    })
                    .collect(),
            ),
        };
        values.push(value);
    }
    values.pop().unwrap_or_default()
}

impl fmt::Display for Canonical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Canonical {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Canonical({})", self.0)
    }
}

impl FromStr for Canonical {
    type Err = JsonError;

    /// Same as [`Canonical::parse_str`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Canonical::parse_str(s)
    }
}

impl serde::Serialize for Canonical {
    /// Embeds the value as raw JSON (not as a string).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let raw = RawValue::from_string(self.0.clone()).map_err(serde::ser::Error::custom)?;
        raw.serialize(serializer)
    }
}

impl<'de> serde::Deserialize<'de> for Canonical {
    /// Accepts any JSON value and canonicalises it (refusing it if it breaks
    /// a boundary rule, e.g. repeats a key).
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Canonical::parse_str(raw.get()).map_err(serde::de::Error::custom)
    }
}
