//! The operator's rules: how each of a server's tools may be offered
//! (design §26). A tool without a rule is never offered, and a server's
//! annotations never classify a tool: the rule's side-effect class does.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use agentrt::{Canonical, SideEffect};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::duration::parse_duration;
use crate::error::McpError;
use crate::private_file::read_private;

/// How one tool is offered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The operator's side-effect class (never the server's).
    pub side_effect: SideEffect,
    /// The call's timeout (else the server's default; neither: refused).
    pub timeout: Option<Duration>,
    /// Whether a call ends the run.
    pub terminal: bool,
    /// A description for the model in place of the server's.
    pub description: Option<String>,
    /// Parameters the model may not give (hidden from its schema).
    pub deny: Vec<String>,
    /// Parameters the operator fixes (hidden, then injected into each call).
    pub fixed: BTreeMap<String, Canonical>,
    /// The name the model sees, in place of `<server>_<tool>`.
    pub rename: Option<String>,
    /// Register the tool even when the server's hints contradict the class.
    pub allow_hint_mismatch: bool,
}

impl Rule {
    /// A rule with only a class: no timeout of its own, nothing hidden.
    pub fn new(side_effect: SideEffect) -> Rule {
        Rule {
            side_effect,
            timeout: None,
            terminal: false,
            description: None,
            deny: Vec::new(),
            fixed: BTreeMap::new(),
            rename: None,
            allow_hint_mismatch: false,
        }
    }

    /// The rule with a timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Rule {
        self.timeout = Some(timeout);
        self
    }
}

/// The rules of one server, keyed by the **server's own** tool name.
pub type Rules = BTreeMap<String, Rule>;

/// One rule as an operator writes it (a rules file's entry), before it is
/// checked: for files that embed rules with fields of their own (the
/// proxy's configuration), which read these fields and call
/// [`RuleEntry::into_rule`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleEntry<'a> {
    /// `read_only`, `local_mutation`, `remote_mutation` or `destructive`.
    pub side_effect: String,
    /// A duration in Go's syntax.
    #[serde(default)]
    pub timeout: Option<String>,
    /// Whether a call ends the run.
    #[serde(default)]
    pub terminal: bool,
    /// A description for the model.
    #[serde(default)]
    pub description: Option<String>,
    /// Parameters the model may not give.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Parameters the operator fixes, as written.
    #[serde(default, borrow)]
    pub fixed: BTreeMap<String, &'a RawValue>,
    /// The name the model sees.
    #[serde(default)]
    pub rename: Option<String>,
    /// Register the tool even when the server's hints contradict the class.
    #[serde(default)]
    pub allow_hint_mismatch: bool,
}

impl RuleEntry<'_> {
    /// The checked rule, or what is wrong with the entry (a bad class or
    /// timeout, a fixed value that is not acceptable JSON, an empty or
    /// both denied and fixed parameter).
    pub fn into_rule(self) -> Result<Rule, String> {
        rule_from(self)
    }
}

/// Parses a rules file's bytes: a JSON object keyed by the server's tool
/// names, each value `{"side_effect", "timeout", "terminal",
/// "description", "deny", "fixed", "rename", "allow_hint_mismatch"}` (all
/// but `side_effect` optional, nothing else allowed). The JSON passes the
/// core's boundary check first (no repeated key, no lone surrogate), and
/// each fixed value keeps its bytes (canonical form).
///
/// ```
/// use agentrt::SideEffect;
/// use agentrt_mcp::parse_rules;
///
/// let rules = parse_rules(br#"{
///   "read_file":  {"side_effect": "read_only", "timeout": "5s"},
///   "write_file": {"side_effect": "local_mutation", "timeout": "10s",
///                  "allow_hint_mismatch": true, "fixed": {"mode": 420}}
/// }"#)?;
/// assert_eq!(rules["read_file"].side_effect, SideEffect::ReadOnly);
/// assert_eq!(rules["write_file"].fixed["mode"].as_str(), "420");
/// assert!(parse_rules(br#"{"t": {"side_effect": "read_only", "timeot": "5s"}}"#).is_err());
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
pub fn parse_rules(bytes: &[u8]) -> Result<Rules, McpError> {
    rules_from(bytes, Path::new(""))
}

/// Reads and parses a rules file that is owned privately (see
/// [`read_private`]).
pub fn read_rules(path: &Path) -> Result<Rules, McpError> {
    rules_from(&read_private(path)?, path)
}

fn rules_from(bytes: &[u8], path: &Path) -> Result<Rules, McpError> {
    let bad = |detail: String| McpError::Rules {
        path: path.to_owned(),
        detail,
    };
    let canonical = Canonical::parse(bytes).map_err(|e| bad(e.to_string()))?;
    if !canonical.is_object() {
        return Err(bad(
            "the file must hold one JSON object keyed by tool name".into()
        ));
    }
    let entries: BTreeMap<String, RuleEntry<'_>> =
        serde_json::from_str(canonical.as_str()).map_err(|e| bad(e.to_string()))?;
    let mut rules = Rules::new();
    for (tool, entry) in entries {
        let rule = rule_from(entry).map_err(|detail| bad(format!("tool {tool:?}: {detail}")))?;
        rules.insert(tool, rule);
    }
    Ok(rules)
}

fn rule_from(entry: RuleEntry<'_>) -> Result<Rule, String> {
    let side_effect = SideEffect::parse(&entry.side_effect).ok_or_else(|| {
        format!(
            "side_effect {:?} is not one of read_only, local_mutation, remote_mutation, destructive",
            entry.side_effect
        )
    })?;
    let timeout = entry
        .timeout
        .as_deref()
        .map(parse_duration)
        .transpose()
        .map_err(|e| format!("timeout: {e}"))?;
    if timeout == Some(Duration::ZERO) {
        return Err("timeout: a call needs a positive timeout".into());
    }
    let mut fixed = BTreeMap::new();
    for (param, raw) in entry.fixed {
        let value = Canonical::parse_str(raw.get()).map_err(|e| format!("fixed {param:?}: {e}"))?;
        fixed.insert(param, value);
    }
    for name in entry.deny.iter().chain(fixed.keys()) {
        if name.is_empty() {
            return Err("an empty parameter name is denied or fixed".into());
        }
    }
    if let Some(both) = entry.deny.iter().find(|d| fixed.contains_key(*d)) {
        return Err(format!("parameter {both:?} is both denied and fixed"));
    }
    Ok(Rule {
        side_effect,
        timeout,
        terminal: entry.terminal,
        description: entry.description,
        deny: entry.deny,
        fixed,
        rename: entry.rename,
        allow_hint_mismatch: entry.allow_hint_mismatch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_of_a_rule_is_read() {
        let rules = parse_rules(
            br#"{"w": {"side_effect": "destructive", "timeout": "1.5s", "terminal": true,
                 "description": "Writes.", "deny": ["force"], "fixed": {"root": "/srv", "n": 1.0},
                 "rename": "write", "allow_hint_mismatch": true}}"#,
        )
        .unwrap();
        let w = &rules["w"];
        assert_eq!(w.side_effect, SideEffect::Destructive);
        assert_eq!(w.timeout, Some(Duration::from_millis(1500)));
        assert!(w.terminal && w.allow_hint_mismatch);
        assert_eq!(w.description.as_deref(), Some("Writes."));
        assert_eq!(w.deny, ["force"]);
        assert_eq!(w.fixed["root"].as_str(), r#""/srv""#);
        assert_eq!(
            w.fixed["n"].as_str(),
            "1.0",
            "a fixed value keeps its literal"
        );
        assert_eq!(w.rename.as_deref(), Some("write"));
        let plain = &parse_rules(br#"{"r": {"side_effect": "read_only"}}"#).unwrap()["r"];
        assert_eq!(plain, &Rule::new(SideEffect::ReadOnly));
    }

    #[test]
    fn a_broken_rules_file_is_refused_naming_the_problem() {
        let cases: [(&[u8], &str); 9] = [
            (br#"[]"#, "one JSON object"),
            (br#"{"t": {"timeout": "5s"}}"#, "side_effect"),
            (br#"{"t": {"side_effect": "readonly"}}"#, "is not one of"),
            (
                br#"{"t": {"side_effect": "read_only", "timeout": "5"}}"#,
                "timeout",
            ),
            (
                br#"{"t": {"side_effect": "read_only", "timeout": "0s"}}"#,
                "positive",
            ),
            (
                br#"{"t": {"side_effect": "read_only", "extra": 1}}"#,
                "unknown field",
            ),
            (
                br#"{"t": {"side_effect": "read_only"}, "t": {"side_effect": "read_only"}}"#,
                "repeats the key",
            ),
            (
                br#"{"t": {"side_effect": "read_only", "deny": ["a"], "fixed": {"a": 1}}}"#,
                "both denied and fixed",
            ),
            (
                br#"{"t": {"side_effect": "read_only", "deny": [""]}}"#,
                "empty parameter",
            ),
        ];
        for (bytes, want) in cases {
            let e = parse_rules(bytes).unwrap_err();
            assert!(matches!(e, McpError::Rules { .. }), "{e}");
            assert!(
                e.to_string().to_lowercase().contains(&want.to_lowercase()),
                "{}: {e}",
                String::from_utf8_lossy(bytes)
            );
        }
    }
}
