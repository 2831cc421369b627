//! Run labels: a few `key=value` pairs a run is begun with (an MCP
//! session, a host, a ticket), recorded in `run.created`, kept in the
//! `run_labels` table (covered by the chain) and filterable in
//! [`Store::list_runs_labelled`](crate::Store::list_runs_labelled).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize, Serializer};

/// A label text that breaks a rule: what is wrong, said for a person.
/// It converts into [`crate::Error::InvalidInput`] (`what: "label"`), so
/// `?` works in functions that return the crate's errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("label: {detail}")]
pub struct LabelError {
    /// The rule broken.
    pub detail: String,
}

type Result<T> = std::result::Result<T, LabelError>;
use crate::json::{Canonical, write_string};

/// The most labels a run may carry.
pub const MAX_LABELS: usize = 16;
/// The longest label key, in characters.
pub const MAX_LABEL_KEY_CHARS: usize = 63;
/// The longest label value, in characters.
pub const MAX_LABEL_VALUE_CHARS: usize = 256;

fn invalid(detail: String) -> LabelError {
    LabelError { detail }
}

/// Checks a key: 1 to [`MAX_LABEL_KEY_CHARS`] characters, the first one of
/// `a-z 0-9`, the others of `a-z 0-9 . _ / -`.
fn check_key(key: &str) -> Result<()> {
    let mut chars = key.chars();
    let Some(first) = chars.next() else {
        return Err(invalid(
            "the key is empty; write key=value with a key of 1 to 63 characters".into(),
        ));
    };
    let count = key.chars().count();
    if count > MAX_LABEL_KEY_CHARS {
        return Err(invalid(format!(
            "the key {key:?} is {count} characters long; at most {MAX_LABEL_KEY_CHARS}"
        )));
    }
    if !matches!(first, 'a'..='z' | '0'..='9') {
        return Err(invalid(format!(
            "the key {key:?} starts with {first:?}; a key starts with a-z or 0-9"
        )));
    }
    if let Some(bad) = chars.find(|c| !matches!(c, 'a'..='z' | '0'..='9' | '.' | '_' | '/' | '-')) {
        return Err(invalid(format!(
            "the key {key:?} holds {bad:?}; a key holds only a-z, 0-9 and . _ / -"
        )));
    }
    Ok(())
}

/// Checks a value: at most [`MAX_LABEL_VALUE_CHARS`] characters, none of
/// them a control character.
fn check_value(key: &str, value: &str) -> Result<()> {
    let count = value.chars().count();
    if count > MAX_LABEL_VALUE_CHARS {
        return Err(invalid(format!(
            "the value of {key:?} is {count} characters long; at most {MAX_LABEL_VALUE_CHARS}"
        )));
    }
    if let Some(bad) = value.chars().find(|c| c.is_control()) {
        return Err(invalid(format!(
            "the value of {key:?} holds the control character U+{:04X}",
            u32::from(bad)
        )));
    }
    Ok(())
}

/// One label, `key=value`, checked when it is made.
///
/// ```
/// use agentrt::Label;
///
/// let label: Label = "ticket=OPS-12=a".parse()?;
/// assert_eq!((label.key(), label.value()), ("ticket", "OPS-12=a"));
/// assert_eq!(label.to_string(), "ticket=OPS-12=a");
/// assert!("Ticket=1".parse::<Label>().is_err());
/// assert!("ticket".parse::<Label>().is_err());
/// # Ok::<(), agentrt::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    key: String,
    value: String,
}

impl Label {
    /// A label, if `key` and `value` follow the rules of [`Labels`].
    ///
    /// # Errors
    ///
    /// [`LabelError`] naming the rule broken.
    pub fn new(key: impl Into<String>, value: impl Into<String>) -> Result<Label> {
        let (key, value) = (key.into(), value.into());
        check_key(&key)?;
        check_value(&key, &value)?;
        Ok(Label { key, value })
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value.
    pub fn value(&self) -> &str {
        &self.value
    }
}

impl FromStr for Label {
    type Err = LabelError;

    /// Parses `key=value`, split at the first `=` (the value may hold more).
    fn from_str(text: &str) -> Result<Label> {
        let Some((key, value)) = text.split_once('=') else {
            return Err(invalid(format!("{text:?} has no '='; write key=value")));
        };
        Label::new(key, value)
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={}", self.key, self.value)
    }
}

/// The labels of a run: at most [`MAX_LABELS`] `key=value` pairs, ordered
/// by key, each key given once. A key is 1 to [`MAX_LABEL_KEY_CHARS`]
/// characters of `a-z 0-9 . _ / -` starting with `a-z` or `0-9`; a value
/// is 0 to [`MAX_LABEL_VALUE_CHARS`] characters without control
/// characters. Every way of making one checks these rules, so a `Labels`
/// in hand always follows them.
///
/// In JSON (the `labels` of `run.created`, the `run_labels` row) the
/// labels are one canonical object of strings.
///
/// ```
/// use agentrt::Labels;
///
/// let labels = Labels::parse(["host=build-7", "mcp.session=4f2a"])?;
/// assert_eq!(labels.get("host"), Some("build-7"));
/// assert_eq!(labels.to_canonical().as_str(), r#"{"host":"build-7","mcp.session":"4f2a"}"#);
/// assert!(Labels::parse(["host=a", "host=b"]).is_err());
/// assert!(Labels::new().is_empty());
/// # Ok::<(), agentrt::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "BTreeMap<String, String>")]
pub struct Labels(BTreeMap<String, String>);

impl Labels {
    /// No labels.
    pub fn new() -> Labels {
        Labels::default()
    }

    /// Labels from `key=value` texts (see [`Label`]'s `FromStr`).
    ///
    /// # Errors
    ///
    /// [`LabelError`] for the first text that is
    /// not a label, a key given twice, or more than [`MAX_LABELS`].
    pub fn parse<I>(texts: I) -> Result<Labels>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut labels = Labels::new();
        for text in texts {
            labels.insert(text.as_ref().parse()?)?;
        }
        Ok(labels)
    }

    /// Adds a label.
    ///
    /// # Errors
    ///
    /// [`LabelError`] when its key is already
    /// there or the labels are full ([`MAX_LABELS`]).
    pub fn insert(&mut self, label: Label) -> Result<()> {
        if self.0.contains_key(&label.key) {
            return Err(invalid(format!("the key {:?} is given twice", label.key)));
        }
        if self.0.len() >= MAX_LABELS {
            return Err(invalid(format!(
                "more than {MAX_LABELS} labels; a run carries at most {MAX_LABELS}"
            )));
        }
        self.0.insert(label.key, label.value);
        Ok(())
    }

    /// [`Labels::insert`] by key and value, for building labels in code.
    ///
    /// ```
    /// let labels = agentrt::Labels::new().with("host", "build-7")?.with("ticket", "OPS-12")?;
    /// assert_eq!(labels.len(), 2);
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Label::new`] and [`Labels::insert`].
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Result<Labels> {
        self.insert(Label::new(key, value)?)?;
        Ok(self)
    }

    /// The value of `key`, if the labels have it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The labels as `(key, value)`, in key order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&str, &str)> + '_ {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// How many labels there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `true` when there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels as one canonical JSON object of strings, keys in byte
    /// order (what `run_labels.labels_json` and `run.created` hold).
    pub fn to_canonical(&self) -> Canonical {
        let mut out = String::from("{");
        for (i, (key, value)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(&mut out, key);
            out.push(':');
            write_string(&mut out, value);
        }
        out.push('}');
        // Keys are unique and sorted by bytes (a `BTreeMap` of `String`),
        // and every string is written by the canonical writer.
        Canonical::assume_canonical(out)
    }

    /// Labels from their JSON object, checked by the boundary rules (no
    /// repeated key) and by the label rules.
    ///
    /// # Errors
    ///
    /// [`LabelError`] naming the problem.
    pub fn from_json(text: &str) -> Result<Labels> {
        let canonical = Canonical::parse_str(text)
            .map_err(|e| invalid(format!("the labels are not acceptable JSON: {e}")))?;
        let map: BTreeMap<String, String> = serde_json::from_str(canonical.as_str())
            .map_err(|e| invalid(format!("the labels are not an object of strings: {e}")))?;
        Labels::try_from(map)
    }
}

impl TryFrom<BTreeMap<String, String>> for Labels {
    type Error = LabelError;

    fn try_from(map: BTreeMap<String, String>) -> Result<Labels> {
        if map.len() > MAX_LABELS {
            return Err(invalid(format!(
                "{} labels; a run carries at most {MAX_LABELS}",
                map.len()
            )));
        }
        for (key, value) in &map {
            check_key(key)?;
            check_value(key, value)?;
        }
        Ok(Labels(map))
    }
}

impl Serialize for Labels {
    /// The object of strings, keys in order.
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl From<Labels> for BTreeMap<String, String> {
    fn from(labels: Labels) -> BTreeMap<String, String> {
        labels.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(r: Result<impl fmt::Debug>) -> String {
        match r {
            Err(LabelError { detail }) => detail,
            other => panic!("expected a label error, got {other:?}"),
        }
    }

    #[test]
    fn keys_follow_the_character_and_length_rules() {
        for ok in [
            "a",
            "0",
            "host",
            "mcp.session",
            "k8s/ns",
            "a_b-c",
            &"k".repeat(63),
        ] {
            Label::new(ok, "v").unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        let cases = [
            ("", "the key is empty"),
            (&"k".repeat(64), "64 characters long; at most 63"),
            ("Host", "starts with 'H'"),
            (".host", "starts with '.'"),
            ("-x", "starts with '-'"),
            ("host name", "holds ' '"),
            ("hóst", "holds 'ó'"),
            ("a=b", "holds '='"),
            ("aB", "holds 'B'"),
        ];
        for (key, want) in cases {
            let got = detail(Label::new(key, "v"));
            assert!(got.contains(want), "{key:?}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn values_may_be_empty_or_long_but_hold_no_control_character() {
        for ok in [
            "",
            "OPS-12",
            "a b = c",
            "é€😀",
            &"x".repeat(256),
            &"é".repeat(256),
        ] {
            Label::new("k", ok).unwrap_or_else(|e| panic!("{ok:?}: {e}"));
        }
        let cases = [
            (&"x".repeat(257) as &str, "257 characters long; at most 256"),
            ("a\nb", "U+000A"),
            ("\u{1b}[2J", "U+001B"),
            ("del\u{7f}", "U+007F"),
            ("c1\u{85}", "U+0085"),
        ];
        for (value, want) in cases {
            let got = detail(Label::new("k", value));
            assert!(got.contains(want), "{value:?}: {got:?} lacks {want:?}");
        }
    }

    #[test]
    fn parse_splits_at_the_first_equals_and_refuses_repeats_and_excess() {
        let labels = Labels::parse(["b=2", "a==x", "c="]).unwrap();
        assert_eq!(
            labels.iter().collect::<Vec<_>>(),
            [("a", "=x"), ("b", "2"), ("c", "")]
        );
        assert!(detail(Labels::parse(["novalue"])).contains("has no '='"));
        assert!(detail(Labels::parse(["=v"])).contains("the key is empty"));
        assert!(detail(Labels::parse(["a=1", "a=1"])).contains("\"a\" is given twice"));
        let sixteen: Vec<String> = (0..16).map(|i| format!("k{i}=v")).collect();
        assert_eq!(Labels::parse(&sixteen).unwrap().len(), 16);
        let mut seventeen = sixteen.clone();
        seventeen.push("k16=v".into());
        assert!(detail(Labels::parse(&seventeen)).contains("at most 16"));
    }

    #[test]
    fn json_is_the_canonical_object_and_reads_back_checked() {
        let labels = Labels::new()
            .with("quote", "say \"hi\" \\ there / é")
            .unwrap()
            .with("a", "")
            .unwrap();
        let canonical = labels.to_canonical();
        let map: BTreeMap<String, String> = labels.clone().into();
        assert_eq!(canonical, Canonical::from_serialize(&map).unwrap());
        assert_eq!(
            canonical.as_str(),
            r#"{"a":"","quote":"say \"hi\" \\ there / é"}"#
        );
        assert_eq!(Labels::from_json(canonical.as_str()).unwrap(), labels);
        assert_eq!(Labels::new().to_canonical().as_str(), "{}");
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            canonical.as_str(),
            "serde writes the same object"
        );
        for bad in [
            r#"{"a":"1","a":"2"}"#,
            r#"{"A":"1"}"#,
            r#"{"a":1}"#,
            r#"["a"]"#,
            "",
            "{",
            r#"{"a":"\u0007"}"#,
        ] {
            detail(Labels::from_json(bad));
        }
        assert!(serde_json::from_str::<Labels>(r#"{"Bad":"1"}"#).is_err());
    }
}
