//! The parsers of agentrt-mcp that read outside input, fuzzed: the
//! operator's rules file (and the durations in it), the pinned manifest, a
//! server's `tools/list` result pages (and what load's checks then offer
//! the host), and a `tools/call` result mapped to recorded content
//! (design §25, §26, §27). Each property is fed arbitrary bytes or text and
//! near-valid documents built to reach the deep paths, and checks what
//! must hold beyond "no panic": valid input read exactly, a round trip
//! where there is one, every refusal the parser's typed error.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use agentrt::json::write_string;
use agentrt::{Canonical, SideEffect, Timestamp, ToolError};
use agentrt_mcp::{
    ListedTool, Listing, MAX_TOOLS, Manifest, McpError, Rule, Rules, check_tools, map_result,
    parse_duration, parse_manifest, parse_rules,
};
use proptest::prelude::*;
use proptest::strategy::{NewTree, ValueTree};
use proptest::test_runner::{Config as ProptestConfig, RngSeed, TestRunner};
use serde_json::Value;

/// At least 10 000 cases (more when `PROPTEST_CASES` asks, as `cargo
/// xtask fuzz` does), a fixed seed unless `PROPTEST_RNG_SEED` names one,
/// and no regression files written.
fn fuzz_config() -> ProptestConfig {
    let base = ProptestConfig::default();
    let rng_seed = match base.rng_seed {
        RngSeed::Random => RngSeed::Fixed(0x0a9e_47e7),
        given => given,
    };
    ProptestConfig {
        cases: base.cases.max(10_000),
        rng_seed,
        failure_persistence: None,
        ..base
    }
}

/// One of weighted strategies, generated alone. proptest's `prop_oneof!`
/// seeds a new random generator for each arm it did not pick (to shrink
/// into later), which is most of the time of a debug build's 10 000
/// cases; this never shrinks across arms.
#[derive(Debug)]
struct Pick<T: std::fmt::Debug>(Vec<(u32, BoxedStrategy<T>)>);

impl<T: std::fmt::Debug> Strategy for Pick<T> {
    type Tree = Box<dyn ValueTree<Value = T>>;
    type Value = T;

    fn new_tree(&self, runner: &mut TestRunner) -> NewTree<Self> {
        let total: u32 = self.0.iter().map(|(w, _)| w).sum();
        let mut at = runner.rng().next_u32() % total.max(1);
        for (weight, strategy) in &self.0 {
            if at < *weight {
                return strategy.new_tree(runner);
            }
            at -= weight;
        }
        Err("no strategy to pick".into())
    }
}

/// [`Pick`] of `weight => strategy` arms.
macro_rules! pick {
    ($($weight:expr => $strategy:expr),+ $(,)?) => {
        Pick(vec![$(($weight, $strategy.boxed())),+])
    };
}

/// Strings matching `pattern`, the regex compiled once (a `&str`
/// strategy compiles it for every value).
fn re(pattern: &str) -> proptest::string::RegexGeneratorStrategy<String> {
    proptest::string::string_regex(pattern).expect("a valid regex")
}

/// `None` or a value of `strategy`, as [`Pick`] picks.
fn maybe<S>(strategy: S) -> Pick<Option<S::Value>>
where
    S: Strategy + 'static,
    S::Value: Clone + std::fmt::Debug,
{
    pick![1 => Just(None), 2 => strategy.prop_map(Some)]
}

// ---------------------------------------------------------------------
// JSON pieces

/// `s` as a JSON string literal.
fn enc(s: &str) -> String {
    let mut out = String::new();
    write_string(&mut out, s);
    out
}

/// `{"k":v,…}` from members already written.
fn object(members: &[(String, String)]) -> String {
    let inner: Vec<String> = members
        .iter()
        .map(|(k, v)| format!("{}:{v}", enc(k)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Number literals, among them spellings serde_json rewrites (`1e2`,
/// `1.50`) or cannot hold (`1e400`).
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "1",
    "-1",
    "1.0",
    "1.50",
    "1e2",
    "1E+2",
    "1e-7",
    "1e400",
    "-1e400",
    "1e-400",
    "9007199254740993",
    "123456789012345678901234567890",
    "0.1",
    "2.5e10",
];

/// Text with what breaks naive code: multi-byte characters, control
/// characters, quotes and backslashes, the marker's own characters.
fn text() -> impl Strategy<Value = String> {
    pick![
        3 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        3 => re("[a-zé€😀\"\\\\\n\t\u{1}\u{7f}\u{2028} \\[\\]]{0,16}"),
        1 => Just(String::new()),
        1 => (40usize..90, prop::sample::select(&['a', 'é', '€', '😀', '"', '\n', '\u{1}'][..]))
            .prop_map(|(n, c)| c.to_string().repeat(n)),
    ]
}

/// An object key.
fn key() -> impl Strategy<Value = String> {
    pick![
        4 => re("[a-zA-Z$_]{0,6}"),
        1 => prop::collection::vec(any::<char>(), 0..6).prop_map(String::from_iter),
    ]
}

/// Any JSON value as text, canonical-acceptable (no repeated key, no lone
/// surrogate, at most a few levels deep).
fn json_value() -> impl Strategy<Value = String> {
    let leaf = pick![
        1 => Just("null".to_owned()),
        1 => Just("true".to_owned()),
        1 => Just("false".to_owned()),
        1 => prop::sample::select(NUMBERS).prop_map(str::to_owned),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        1 => text().prop_map(|s| enc(&s)),
        1 => Just(r#""\u00e9\n\ud83d\ude00""#.to_owned()),
    ];
    leaf.prop_recursive(3, 12, 4, |inner| {
        pick![
            1 => prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            1 => prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| object(&m.into_iter().collect::<Vec<_>>())),
        ]
    })
}

/// `value` nested in `depth` arrays.
fn nested(depth: usize, value: &str) -> String {
    format!("{}{value}{}", "[".repeat(depth), "]".repeat(depth))
}

// ---------------------------------------------------------------------
// Durations

/// Nanoseconds per unit.
const UNITS: &[(&str, u128)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// One part of a duration: a whole number, a fraction of at most nine
/// digits (so every unit's fraction is exact to the nanosecond), a unit.
#[derive(Debug, Clone)]
struct Part {
    whole: String,
    fraction: Option<String>,
    unit: usize,
}

impl Part {
    fn text(&self) -> String {
        match &self.fraction {
            Some(f) => format!("{}.{f}{}", self.whole, UNITS[self.unit].0),
            None => format!("{}{}", self.whole, UNITS[self.unit].0),
        }
    }

    /// Its nanoseconds, exactly; `None` past `u128`.
    fn nanos(&self) -> Option<u128> {
        let scale = UNITS[self.unit].1;
        let whole: u128 = if self.whole.is_empty() {
            0
        } else {
            self.whole.parse().ok()?
        };
        let mut total = whole.checked_mul(scale)?;
        if let Some(f) = &self.fraction {
            let digits: u128 = if f.is_empty() { 0 } else { f.parse().ok()? };
            let denominator = 10u128.pow(u32::try_from(f.len()).ok()?);
            total = total.checked_add(digits * scale / denominator)?;
        }
        Some(total)
    }
}

/// A part, among them whole numbers at the edge of `u128` and `u64`
/// nanoseconds for their unit.
fn part() -> impl Strategy<Value = Part> {
    let unit = 0..UNITS.len();
    let whole = pick![
        4 => (0u64..5000).prop_map(|n| n.to_string()),
        1 => Just(String::new()),
        1 => re("[0-9]{1,45}"),
        1 => (0..UNITS.len(), 0u128..3).prop_map(|(u, k)| (u128::MAX / UNITS[u].1 - k).to_string()),
        1 => (0..UNITS.len(), 0u128..3).prop_map(|(u, k)| (u128::from(u64::MAX) / UNITS[u].1 + 1 - k).to_string()),
    ];
    let fraction = maybe(re("[0-9]{0,9}"));
    (whole, fraction, unit)
        .prop_filter("a number before the unit", |(w, f, _)| {
            !w.is_empty() || f.as_deref().is_some_and(|f| !f.is_empty())
        })
        .prop_map(|(whole, fraction, unit)| Part {
            whole,
            fraction,
            unit,
        })
}

/// What `parse_duration` must give for a sign and parts.
fn expected_duration(negative: bool, parts: &[Part]) -> Option<Duration> {
    let mut total: u128 = 0;
    for p in parts {
        total = total.checked_add(p.nanos()?)?;
    }
    if negative && total > 0 {
        return None;
    }
    u64::try_from(total).ok().map(Duration::from_nanos)
}

/// A valid positive duration: its text and value.
fn valid_duration() -> impl Strategy<Value = (String, Duration)> {
    prop::collection::vec((1u64..1000, maybe(re("[0-9]{1,9}")), 0..UNITS.len()), 1..4).prop_map(
        |parts| {
            let parts: Vec<Part> = parts
                .into_iter()
                .map(|(w, f, unit)| Part {
                    whole: w.to_string(),
                    fraction: f,
                    unit,
                })
                .collect();
            let text: String = parts.iter().map(Part::text).collect();
            let value = expected_duration(false, &parts).unwrap_or_default();
            (text, value)
        },
    )
}

/// Durations no file may hold: negative, no unit, a unit Go lacks, an
/// exponent, spaces, past `u64` nanoseconds.
const BAD_DURATIONS: &[&str] = &[
    "-1s",
    "1e999s",
    "15",
    "",
    "5 s",
    "1d",
    "s",
    "1.2.3s",
    "--1s",
    "1s-",
    ".s",
    "99999999999999999999h",
    "١s",
    "1S",
    "+",
];

// ---------------------------------------------------------------------
// Rules

/// A rule as an operator would write it.
#[derive(Debug, Clone)]
struct RuleModel {
    side_effect: SideEffect,
    timeout: Option<(String, Duration)>,
    terminal: Option<bool>,
    description: Option<String>,
    deny: Vec<String>,
    fixed: BTreeMap<String, String>,
    rename: Option<String>,
    allow_hint_mismatch: Option<bool>,
}

const CLASSES: [SideEffect; 4] = [
    SideEffect::ReadOnly,
    SideEffect::LocalMutation,
    SideEffect::RemoteMutation,
    SideEffect::Destructive,
];

fn rule_model() -> impl Strategy<Value = RuleModel> {
    (
        prop::sample::select(&CLASSES[..]),
        maybe(valid_duration()),
        maybe(any::<bool>()),
        maybe(text()),
        // Denied names start with `d`, fixed ones with `f`: never both.
        prop::collection::btree_set(re("d[a-z_é]{0,5}"), 0..3),
        prop::collection::btree_map(re("f[a-z_é]{0,5}"), json_value(), 0..3),
        maybe(text()),
        maybe(any::<bool>()),
    )
        .prop_map(
            |(side_effect, timeout, terminal, description, deny, fixed, rename, allow)| RuleModel {
                side_effect,
                timeout,
                terminal,
                description,
                deny: deny.into_iter().collect(),
                fixed,
                rename,
                allow_hint_mismatch: allow,
            },
        )
}

impl RuleModel {
    /// Its members as written.
    fn members(&self) -> Vec<(String, String)> {
        let mut m = vec![("side_effect".to_owned(), enc(self.side_effect.as_str()))];
        if let Some((t, _)) = &self.timeout {
            m.push(("timeout".into(), enc(t)));
        }
        if let Some(b) = self.terminal {
            m.push(("terminal".into(), b.to_string()));
        }
        if let Some(d) = &self.description {
            m.push(("description".into(), enc(d)));
        }
        if !self.deny.is_empty() {
            let names: Vec<String> = self.deny.iter().map(|d| enc(d)).collect();
            m.push(("deny".into(), format!("[{}]", names.join(","))));
        }
        if !self.fixed.is_empty() {
            let fixed: Vec<(String, String)> = self
                .fixed
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            m.push(("fixed".into(), object(&fixed)));
        }
        if let Some(r) = &self.rename {
            m.push(("rename".into(), enc(r)));
        }
        if let Some(b) = self.allow_hint_mismatch {
            m.push(("allow_hint_mismatch".into(), b.to_string()));
        }
        m
    }

    /// The rule it must be read as.
    fn rule(&self) -> Rule {
        Rule {
            side_effect: self.side_effect,
            timeout: self.timeout.as_ref().map(|(_, d)| *d),
            terminal: self.terminal.unwrap_or(false),
            description: self.description.clone(),
            deny: self.deny.clone(),
            fixed: self
                .fixed
                .iter()
                .map(|(k, v)| (k.clone(), Canonical::parse_str(v).expect("fixed value")))
                .collect(),
            rename: self.rename.clone(),
            allow_hint_mismatch: self.allow_hint_mismatch.unwrap_or(false),
        }
    }
}

/// One thing wrong with one rule of a file.
#[derive(Debug, Clone)]
enum RuleBreak {
    /// `field` set to `value` (a wrong type or a refused value).
    Set(&'static str, String),
    /// A field no rule has.
    Unknown(String),
    /// A field written twice.
    Twice(&'static str),
    /// A name both denied and fixed.
    DeniedAndFixed,
    /// The tool's whole rule not an object.
    NotObject(String),
}

fn rule_break() -> impl Strategy<Value = RuleBreak> {
    let wrong_type = pick![
        1 => Just(("side_effect", "1".to_owned())),
        1 => Just(("side_effect", "null".to_owned())),
        1 => prop::sample::select(&["readonly", "READ_ONLY", "", "read_only ", "abort"][..])
            .prop_map(|c| ("side_effect", enc(c))),
        1 => prop::sample::select(BAD_DURATIONS).prop_map(|d| ("timeout", enc(d))),
        1 => prop::sample::select(&["0s", "0", "-0s", "0.0000000001s"][..])
            .prop_map(|d| ("timeout", enc(d))),
        1 => Just(("timeout", "15".to_owned())),
        1 => Just(("terminal", r#""true""#.to_owned())),
        1 => Just(("terminal", "1".to_owned())),
        1 => Just(("description", "1".to_owned())),
        1 => Just(("deny", r#""d""#.to_owned())),
        1 => Just(("deny", "[1]".to_owned())),
        1 => Just(("deny", r#"[""]"#.to_owned())),
        1 => Just(("fixed", "[]".to_owned())),
        1 => Just(("fixed", r#"{"":1}"#.to_owned())),
        1 => Just(("fixed", r#"{"f":"\ud800"}"#.to_owned())),
        1 => Just(("rename", "false".to_owned())),
        1 => Just(("allow_hint_mismatch", r#""yes""#.to_owned())),
    ];
    pick![
        6 => wrong_type.prop_map(|(f, v)| RuleBreak::Set(f, v)),
        2 => prop::sample::select(&["timeot", "Side_effect", "outcome", "", "sideEffect"][..])
            .prop_map(|f| RuleBreak::Unknown(f.to_owned())),
        1 => prop::sample::select(&["side_effect", "terminal", "deny"][..]).prop_map(RuleBreak::Twice),
        1 => Just(RuleBreak::DeniedAndFixed),
        1 => prop::sample::select(&["[]", "null", "\"read_only\"", "1"][..])
            .prop_map(|v| RuleBreak::NotObject(v.to_owned())),
    ]
}

/// A rule's text with `broken` applied.
fn broken_rule_text(rule: &RuleModel, broken: &RuleBreak) -> String {
    let mut members = rule.members();
    match broken {
        RuleBreak::Set(field, value) => {
            members.retain(|(k, _)| k != field);
            members.push(((*field).to_owned(), value.clone()));
        }
        RuleBreak::Unknown(field) => members.push((field.clone(), "1".into())),
        RuleBreak::Twice(field) => {
            let value = match *field {
                "side_effect" => enc("read_only"),
                "terminal" => "true".into(),
                _ => r#"["dx"]"#.into(),
            };
            members.push(((*field).to_owned(), value.clone()));
            members.push(((*field).to_owned(), value));
        }
        RuleBreak::DeniedAndFixed => {
            members.retain(|(k, _)| k != "deny" && k != "fixed");
            members.push(("deny".into(), r#"["same"]"#.into()));
            members.push(("fixed".into(), r#"{"same":1}"#.into()));
        }
        RuleBreak::NotObject(value) => return value.clone(),
    }
    object(&members)
}

fn rules_text(rules: &BTreeMap<String, RuleModel>, broken: Option<(usize, &RuleBreak)>) -> String {
    let members: Vec<(String, String)> = rules
        .iter()
        .enumerate()
        .map(|(i, (tool, rule))| {
            let text = match broken {
                Some((at, b)) if at % rules.len() == i => broken_rule_text(rule, b),
                _ => object(&rule.members()),
            };
            (tool.clone(), text)
        })
        .collect();
    object(&members)
}

/// Bytes that are almost a rules file: JSON of any shape, a valid file cut
/// short or with trailing data.
fn rules_like_bytes() -> impl Strategy<Value = Vec<u8>> {
    pick![
        2 => prop::collection::vec(any::<u8>(), 0..200),
        2 => json_value().prop_map(String::into_bytes),
        1 => (prop::collection::btree_map(key(), rule_model(), 1..3), any::<prop::sample::Index>())
            .prop_map(|(rules, cut)| {
                let text = rules_text(&rules, None).into_bytes();
                let at = cut.index(text.len());
                text[..at].to_vec()
            }),
        1 => prop::collection::btree_map(key(), rule_model(), 0..3)
            .prop_map(|rules| format!("{} {{}}", rules_text(&rules, None)).into_bytes()),
    ]
}

// ---------------------------------------------------------------------
// Manifests

/// A server's listed tools, distinct names, with schemas and annotations
/// of any shape (or none).
fn listed_tools(max: usize) -> impl Strategy<Value = Vec<ListedTool>> {
    let schema = pick![
        4 => json_value(),
        1 => Just(String::new()),
        1 => Just(" \n ".to_owned()),
        1 => json_value().prop_map(|v| format!(" {v}\n")),
        1 => (120usize..200).prop_map(|d| format!(r#"{{"type":"object","x":{}}}"#, nested(d, "1"))),
    ];
    prop::collection::btree_map(text(), (text(), schema, maybe(json_value())), 0..max).prop_map(
        |tools| {
            tools
                .into_iter()
                .map(
                    |(name, (description, input_schema, annotations))| ListedTool {
                        name,
                        description,
                        input_schema,
                        annotations,
                    },
                )
                .collect()
        },
    )
}

/// The manifest's text, assembled here: `Manifest::to_json`'s when
/// nothing is changed.
fn manifest_text(m: &Manifest, change: Option<&ManifestChange>) -> String {
    let mut tools = Vec::new();
    for (i, (name, tool)) in m.tools.iter().enumerate() {
        let mut members: Vec<(String, String)> = Vec::new();
        if let Some(a) = &tool.annotations {
            members.push(("annotations".into(), a.as_str().to_owned()));
        }
        members.push(("description".into(), enc(&tool.description)));
        members.push(("description_hash".into(), enc(&tool.description_hash)));
        members.push(("input_schema".into(), tool.input_schema.as_str().to_owned()));
        members.push(("name".into(), enc(&tool.name)));
        members.push(("schema_hash".into(), enc(&tool.schema_hash)));
        if let Some(ManifestChange::Tool(at, field, value)) = change
            && at % m.tools.len() == i
        {
            members.retain(|(k, _)| k != field);
            if let Some(value) = value {
                members.push(((*field).to_owned(), value.clone()));
            }
        }
        tools.push((name.clone(), object(&members)));
    }
    let mut top = vec![
        ("pinned_at".to_owned(), enc(&m.pinned_at.to_string())),
        ("server".to_owned(), enc(&m.server)),
        ("tools".to_owned(), object(&tools)),
    ];
    if let Some(ManifestChange::Top(field, value)) = change {
        top.retain(|(k, _)| k != field);
        if let Some(value) = value {
            top.push(((*field).to_owned(), value.clone()));
        }
    }
    if let Some(ManifestChange::Twice(field)) = change {
        let again = top
            .iter()
            .find(|(k, _)| k == field)
            .cloned()
            .unwrap_or_default();
        top.push(again);
    }
    object(&top) + "\n"
}

/// One field of a manifest changed by hand.
#[derive(Debug, Clone)]
enum ManifestChange {
    /// A top-level field set to a value, or removed (`None`).
    Top(&'static str, Option<String>),
    /// A field of the tool at an index set, or removed.
    Tool(usize, &'static str, Option<String>),
    /// A top-level field written twice.
    Twice(&'static str),
}

/// A change that must make the manifest refused. `hash` is a valid-looking
/// hash of something else.
fn manifest_change() -> impl Strategy<Value = ManifestChange> {
    let other_hash = enc(&agentrt::json::hash_hex(b"something else"));
    pick![
        1 => prop::sample::select(vec![
            ("pinned_at", Some(enc("yesterday"))),
            ("pinned_at", Some(enc("2026-13-01T00:00:00Z"))),
            ("pinned_at", Some("1".to_owned())),
            ("pinned_at", None),
            ("server", Some("1".to_owned())),
            ("server", None),
            ("tools", Some("[]".to_owned())),
            ("tools", None),
            ("extra", Some("1".to_owned())),
        ])
        .prop_map(|(f, v)| ManifestChange::Top(f, v)),
        1 => (
            any::<usize>(),
            prop::sample::select(vec![
                ("description", Some(enc("changed by hand"))),
                ("description", Some("1".to_owned())),
                ("description", None),
                ("description_hash", None),
                ("schema_hash", Some("null".to_owned())),
                ("input_schema", Some(r#"{"changed":"by hand"}"#.to_owned())),
                ("input_schema", None),
                ("name", Some(enc("filed under another name"))),
                ("name", None),
                ("annotations", Some(r#"{"a":"\ud800"}"#.to_owned())),
                ("extra", Some("1".to_owned())),
            ])
        )
            .prop_map(|(at, (f, v))| ManifestChange::Tool(at, f, v)),
        1 => (any::<usize>(), prop::sample::select(&["schema_hash", "description_hash"][..]))
            .prop_map(move |(at, f)| ManifestChange::Tool(at, f, Some(other_hash.clone()))),
        1 => prop::sample::select(&["server", "pinned_at"][..]).prop_map(ManifestChange::Twice),
    ]
}

// ---------------------------------------------------------------------
// Listings

/// One tool as a server might list it.
#[derive(Debug, Clone)]
struct ToolModel {
    /// The `name` member's text, if any.
    name: Option<String>,
    description: Option<String>,
    schema: Option<String>,
    annotations: Option<String>,
    /// Members no tool needs.
    extra: Vec<(String, String)>,
    /// Not an object at all: this text instead.
    not_object: Option<String>,
}

impl ToolModel {
    fn text(&self) -> String {
        if let Some(t) = &self.not_object {
            return t.clone();
        }
        let mut m: BTreeMap<String, String> = self.extra.iter().cloned().collect();
        for (k, v) in [
            ("name", &self.name),
            ("description", &self.description),
            ("inputSchema", &self.schema),
            ("annotations", &self.annotations),
        ] {
            match v {
                Some(v) => {
                    m.insert(k.to_owned(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        object(&m.into_iter().collect::<Vec<_>>())
    }

    /// Its name, if the listing must take it; `Err` if it must refuse it.
    fn expected_name(&self) -> Result<String, ()> {
        if self.not_object.is_some() {
            return Err(());
        }
        let name = match self.name.as_deref() {
            None | Some("null") => return Err(()),
            Some(v) => serde_json::from_str::<String>(v).map_err(drop)?,
        };
        if name.is_empty() {
            return Err(());
        }
        match self.description.as_deref() {
            None | Some("null") => {}
            Some(v) => {
                serde_json::from_str::<String>(v).map_err(drop)?;
            }
        }
        Ok(name)
    }

    /// What the listing must record for it.
    fn expected(&self) -> Result<ListedTool, ()> {
        let name = self.expected_name()?;
        let canonical = |v: &str| Canonical::parse_str(v).map(Canonical::into_string);
        Ok(ListedTool {
            name,
            description: match self.description.as_deref() {
                None | Some("null") => String::new(),
                Some(v) => serde_json::from_str(v).map_err(drop)?,
            },
            input_schema: match &self.schema {
                None => String::new(),
                Some(v) => canonical(v).map_err(drop)?,
            },
            annotations: match self.annotations.as_deref() {
                None | Some("null") => None,
                Some(v) => Some(canonical(v).map_err(drop)?),
            },
        })
    }
}

/// Names as servers send them: plain, odd (unicode, control characters,
/// long), empty, not strings.
fn name_member() -> impl Strategy<Value = Option<String>> {
    pick![
        6 => prop::sample::select(&["read", "write", "a", "b", "c", "read-file", "é"][..])
            .prop_map(|n| Some(enc(n))),
        2 => text().prop_map(|n| Some(enc(&n))),
        1 => re("[a-z_-]{60,70}").prop_map(|n| Some(enc(&n))),
        1 => Just(Some(enc(""))),
        1 => Just(Some("null".to_owned())),
        1 => Just(Some("7".to_owned())),
        1 => Just(None),
    ]
}

/// Input schemas as servers send them: objects with `"type":"object"` and
/// keywords load looks at, anything else, numbers serde_json cannot hold,
/// nesting past serde_json's 128 levels.
fn schema_member() -> impl Strategy<Value = Option<String>> {
    let keyword = pick![
        1 => json_value().prop_map(|v| ("properties".to_owned(), format!(r#"{{"p":{v}}}"#))),
        1 => Just(("properties".to_owned(), r#"{"path":{"type":"string"},"n":{"type":"number","maximum":1e2}}"#.to_owned())),
        1 => Just(("required".to_owned(), r#"["path"]"#.to_owned())),
        1 => Just(("$ref".to_owned(), enc("#/x"))),
        1 => Just(("$ref".to_owned(), enc("https://example.com/s"))),
        1 => Just(("$schema".to_owned(), enc("https://json-schema.org/draft/2020-12/schema"))),
        1 => Just(("$id".to_owned(), enc("urn:x"))),
        1 => Just(("pattern".to_owned(), enc("(a+)+$"))),
        1 => Just(("enum".to_owned(), r#"[{"n":1e400}]"#.to_owned())),
        1 => Just(("examples".to_owned(), "[1e400]".to_owned())),
        1 => (120usize..140).prop_map(|d| ("x-deep".to_owned(), nested(d, "1"))),
        1 => (key(), json_value()),
    ];
    pick![
        6 => prop::collection::vec(keyword, 0..4).prop_map(|kw| {
            let mut m: BTreeMap<String, String> = kw.into_iter().collect();
            m.insert("type".into(), enc("object"));
            Some(object(&m.into_iter().collect::<Vec<_>>()))
        }),
        2 => json_value().prop_map(Some),
        1 => Just(None),
        1 => Just(Some("null".to_owned())),
    ]
}

fn tool_model() -> impl Strategy<Value = ToolModel> {
    let text_member = pick![
        4 => text().prop_map(|t| Some(enc(&t))),
        1 => Just(None),
        1 => Just(Some("null".to_owned())),
        1 => Just(Some("[]".to_owned())),
    ];
    let annotations = pick![
        2 => Just(None),
        1 => Just(Some("null".to_owned())),
        2 => (any::<bool>(), any::<bool>())
            .prop_map(|(r, d)| Some(format!(r#"{{"destructiveHint":{d},"readOnlyHint":{r}}}"#))),
        1 => json_value().prop_map(Some),
    ];
    let extra = pick![
        3 => Just(Vec::new()),
        1 => prop::collection::vec(
            (
                prop::sample::select(&["title", "outputSchema", "_meta", "icons", "Name"][..]),
                json_value(),
            ),
            1..3,
        ),
    ];
    let not_object = pick![
        12 => Just(None),
        1 => prop::sample::select(&["1", "null", "\"read\"", "[]"][..]).prop_map(|t| Some(t.to_owned())),
    ];
    (
        name_member(),
        text_member,
        schema_member(),
        annotations,
        extra,
        not_object,
    )
        .prop_map(
            |(name, description, schema, annotations, extra, not_object)| ToolModel {
                name,
                description,
                schema,
                annotations,
                extra: extra.into_iter().map(|(k, v)| (k.to_owned(), v)).collect(),
                not_object,
            },
        )
}

/// One page as a server might send it.
#[derive(Debug, Clone)]
struct PageModel {
    tools: Vec<ToolModel>,
    /// Plain tools `bulk-<page>-<i>` after the others.
    bulk: usize,
    /// The `nextCursor` member's text, if any.
    cursor: Option<String>,
    /// How the page's frame is broken, if it is.
    frame: Frame,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Frame {
    Plain,
    /// `Tools` instead of `tools`.
    WrongCase,
    /// `tools` twice.
    RepeatedKey,
    /// `tools` an object.
    NotAList,
    /// The page a list, not an object.
    NotAnObject,
    /// Trailing data after the page.
    Trailing,
}

fn page_model() -> impl Strategy<Value = PageModel> {
    let cursor = pick![
        3 => Just(None),
        1 => Just(Some("null".to_owned())),
        2 => prop::sample::select(&["page-2", "page-3", "", "é"][..]).prop_map(|c| Some(enc(c))),
        1 => text().prop_map(|c| Some(enc(&c))),
        1 => Just(Some("2".to_owned())),
    ];
    let bulk = pick![16 => Just(0usize), 2 => 1usize..5, 1 => 400usize..600];
    let frame = pick![
        20 => Just(Frame::Plain),
        1 => Just(Frame::WrongCase),
        1 => Just(Frame::RepeatedKey),
        1 => Just(Frame::NotAList),
        1 => Just(Frame::NotAnObject),
        1 => Just(Frame::Trailing),
    ];
    (
        prop::collection::vec(tool_model(), 0..4),
        bulk,
        cursor,
        frame,
    )
        .prop_map(|(tools, bulk, cursor, frame)| PageModel {
            tools,
            bulk,
            cursor,
            frame,
        })
}

impl PageModel {
    fn tool_texts(&self, index: usize) -> Vec<String> {
        let mut all: Vec<String> = self.tools.iter().map(ToolModel::text).collect();
        all.extend((0..self.bulk).map(|i| format!(r#"{{"name":"bulk-{index}-{i}"}}"#)));
        all
    }

    fn text(&self, index: usize) -> String {
        let list = format!("[{}]", self.tool_texts(index).join(","));
        let cursor = self
            .cursor
            .as_ref()
            .map(|c| format!(r#","nextCursor":{c}"#))
            .unwrap_or_default();
        match self.frame {
            Frame::Plain => format!(r#"{{"tools":{list}{cursor}}}"#),
            Frame::WrongCase => format!(r#"{{"Tools":{list}{cursor}}}"#),
            Frame::RepeatedKey => format!(r#"{{"tools":{list},"tools":[]{cursor}}}"#),
            Frame::NotAList => format!(r#"{{"tools":{{}}{cursor}}}"#),
            Frame::NotAnObject => list,
            Frame::Trailing => format!(r#"{{"tools":{list}{cursor}}} x"#),
        }
    }
}

/// What a listing of `pages` must give: the tools, or a refusal. Pages
/// are fed until one returns no cursor (or the last given).
fn expected_listing(pages: &[PageModel]) -> Result<Vec<ListedTool>, ()> {
    let mut tools: Vec<ListedTool> = Vec::new();
    let mut names = BTreeSet::new();
    let mut cursors = BTreeSet::new();
    for (index, page) in pages.iter().enumerate() {
        if page.frame != Frame::Plain {
            return Err(());
        }
        for tool in &page.tools {
            let listed = tool.expected()?;
            if !names.insert(listed.name.clone()) {
                return Err(());
            }
            tools.push(listed);
        }
        for i in 0..page.bulk {
            let name = format!("bulk-{index}-{i}");
            if !names.insert(name.clone()) {
                return Err(());
            }
            tools.push(ListedTool {
                name,
                description: String::new(),
                input_schema: String::new(),
                annotations: None,
            });
        }
        if tools.len() > MAX_TOOLS {
            return Err(());
        }
        let cursor = match page.cursor.as_deref() {
            None | Some("null") => None,
            Some(c) => Some(serde_json::from_str::<String>(c).map_err(drop)?),
        };
        match cursor {
            None => return Ok(tools),
            Some(c) => {
                if !cursors.insert(c) {
                    return Err(());
                }
            }
        }
    }
    Ok(tools)
}

/// Whether `name` is a model-visible name: `^[a-zA-Z0-9_-]{1,64}$`.
fn visible_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

// ---------------------------------------------------------------------
// Call results

/// One content block as a server might send it.
#[derive(Debug, Clone)]
enum Block {
    Text(String),
    Image,
    Audio,
    ResourceLink,
    Resource,
    /// A block of a type this client does not know.
    Other(String),
    /// A `text` block whose text is not a string.
    TextNotString(String),
    /// A block without a type.
    NoType,
    /// Not an object.
    NotObject(String),
}

impl Block {
    fn text(&self, extra: &str) -> String {
        let with = |members: &str| format!(r#"{{{members},"x-extra":{extra}}}"#);
        match self {
            Block::Text(t) => with(&format!(r#""type":"text","text":{}"#, enc(t))),
            Block::Image => with(r#""type":"image","data":"iVBORw0KGgo=","mimeType":"image/png""#),
            Block::Audio => with(r#""type":"audio","data":"UklGRg==","mimeType":"audio/wav""#),
            Block::ResourceLink => with(r#""type":"resource_link","uri":"file:///a","name":"a""#),
            Block::Resource => with(
                r#""type":"resource","resource":{"uri":"file:///a","text":"the resource's text"}"#,
            ),
            Block::Other(kind) => with(&format!(r#""type":{},"text":"t""#, enc(kind))),
            Block::TextNotString(v) => with(&format!(r#""type":"text","text":{v}"#)),
            Block::NoType => with(r#""text":"no type""#),
            Block::NotObject(v) => v.clone(),
        }
    }

    /// Its part of the joined text (design §27).
    fn shown(&self) -> String {
        match self {
            Block::Text(t) => t.clone(),
            Block::Image => "[image omitted]".into(),
            Block::Audio => "[audio omitted]".into(),
            Block::ResourceLink => "[resource link omitted]".into(),
            Block::Resource => "[embedded resource omitted]".into(),
            _ => "[content omitted]".into(),
        }
    }
}

fn block() -> impl Strategy<Value = Block> {
    pick![
        8 => text().prop_map(Block::Text),
        1 => Just(Block::Image),
        1 => Just(Block::Audio),
        1 => Just(Block::ResourceLink),
        1 => Just(Block::Resource),
        1 => prop::sample::select(&["video", "Text", "", "text "][..]).prop_map(|k| Block::Other(k.to_owned())),
        1 => prop::sample::select(&["1", "null", "[]", "{}"][..]).prop_map(|v| Block::TextNotString(v.to_owned())),
        1 => Just(Block::NoType),
        1 => prop::sample::select(&["1", "null", "\"text\"", "[]"][..]).prop_map(|v| Block::NotObject(v.to_owned())),
    ]
}

/// A `tools/call` result as a server might send it.
#[derive(Debug, Clone)]
struct ResultModel {
    blocks: Option<Vec<Block>>,
    /// Each block's `x-extra` member (any JSON: numbers serde_json cannot
    /// hold, nesting).
    extra: Vec<String>,
    structured: Option<String>,
    is_error: Option<&'static str>,
    meta: Option<String>,
}

fn result_model() -> impl Strategy<Value = ResultModel> {
    let extra = pick![
        6 => Just("0".to_owned()),
        2 => json_value(),
        1 => Just("1e400".to_owned()),
        1 => (120usize..250).prop_map(|d| nested(d, "1")),
    ];
    (
        maybe(prop::collection::vec(block(), 0..5)),
        prop::collection::vec(extra, 5),
        pick![
            3 => Just(None),
            1 => Just(Some("null".to_owned())),
            3 => json_value().prop_map(Some),
            1 => re("[a-zé€😀]{0,80}").prop_map(|s| Some(format!(r#"{{"text":{}}}"#, enc(&s)))),
        ],
        maybe(prop::sample::select(
            &["true", "false", "\"true\"", "1", "null"][..],
        )),
        maybe(json_value()),
    )
        .prop_map(|(blocks, extra, structured, is_error, meta)| ResultModel {
            blocks,
            extra,
            structured,
            is_error,
            meta,
        })
}

impl ResultModel {
    fn text(&self) -> String {
        let mut members: Vec<(String, String)> = Vec::new();
        if let Some(blocks) = &self.blocks {
            let texts: Vec<String> = blocks
                .iter()
                .enumerate()
                .map(|(i, b)| b.text(&self.extra[i % self.extra.len()]))
                .collect();
            members.push(("content".into(), format!("[{}]", texts.join(","))));
        }
        if let Some(s) = &self.structured {
            members.push(("structuredContent".into(), s.clone()));
        }
        if let Some(e) = self.is_error {
            members.push(("isError".into(), e.to_owned()));
        }
        if let Some(m) = &self.meta {
            members.push(("_meta".into(), m.clone()));
        }
        object(&members)
    }

    fn joined(&self) -> String {
        self.blocks
            .iter()
            .flatten()
            .map(Block::shown)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// What ends cut text.
const TRUNCATED: &str = "\n[truncated]";

/// `text` recorded as design §27 says: a JSON string of at most `cap`
/// encoded bytes (raised to fit the marker), cut on a character boundary
/// and ending with the marker when it does not fit; whether it was cut.
/// Computed character by character with the core's own string writer.
fn capped(text: &str, cap: usize) -> (String, bool) {
    let full = enc(text);
    if full.len() <= cap {
        return (full, false);
    }
    let cap = cap.max(enc(TRUNCATED).len());
    let mut kept = String::new();
    for c in text.chars() {
        let mut longer = kept.clone();
        longer.push(c);
        if enc(&(longer.clone() + TRUNCATED)).len() > cap {
            break;
        }
        kept = longer;
    }
    (enc(&(kept + TRUNCATED)), true)
}

/// The content and summary `map_result` must give `model` under `cap`,
/// or the error's message.
fn expected_result(model: &ResultModel, cap: usize) -> Result<(Vec<u8>, String), String> {
    let structured = model
        .structured
        .as_deref()
        .map(|s| Canonical::parse_str(s).expect("structured").into_string())
        .filter(|s| s != "null");
    let text = model.joined();
    let (content, cut, dropped) = match &structured {
        Some(s) if s.len() <= cap => (s.clone(), false, None),
        _ => {
            let dropped = structured.as_ref().map(String::len);
            let shown = if text.is_empty() && dropped.is_some() {
                "[structured content dropped: too large]".to_owned()
            } else {
                text.clone()
            };
            let (encoded, cut) = capped(&shown, cap);
            (encoded, cut, dropped)
        }
    };
    let mut summary = format!("fs/read: {} bytes", content.len());
    if cut || dropped.is_some() {
        summary.push_str(", truncated");
    }
    if let Some(m) = dropped {
        summary.push_str(&format!(
            ", structured content of {m} bytes dropped for the text"
        ));
    }
    if model.is_error == Some("true") {
        return Err(format!("{summary}, error: {text}"));
    }
    Ok((content.into_bytes(), summary))
}

// ---------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(fuzz_config())]

    /// Any bytes: rules, or `McpError::Rules`.
    #[test]
    fn any_bytes_are_rules_or_a_rules_error(bytes in rules_like_bytes()) {
        match parse_rules(&bytes) {
            Ok(rules) => {
                // What was read passed the core's boundary check and is an
                // object keyed by tool name.
                let canonical = Canonical::parse(&bytes);
                prop_assert!(canonical.is_ok_and(|c| c.is_object()));
                for rule in rules.values() {
                    prop_assert!(rule.timeout != Some(Duration::ZERO));
                    prop_assert!(rule.deny.iter().all(|d| !rule.fixed.contains_key(d)));
                }
            }
            Err(e) => prop_assert!(matches!(e, McpError::Rules { .. }), "{e:?}"),
        }
    }

    /// A valid rules file is read exactly; the same file with one field
    /// of one rule broken (a wrong type, a refused class or duration, an
    /// unknown or repeated field, a name both denied and fixed) is
    /// refused as `McpError::Rules`.
    #[test]
    fn a_rules_file_is_read_exactly_and_one_broken_field_refuses_it(
        rules in prop::collection::btree_map(key(), rule_model(), 1..4),
        broken in rule_break(),
        at in any::<usize>(),
    ) {
        let text = rules_text(&rules, None);
        let read = parse_rules(text.as_bytes());
        let expected: Rules = rules.iter().map(|(k, r)| (k.clone(), r.rule())).collect();
        prop_assert_eq!(read.ok(), Some(expected), "{}", text);

        let text = rules_text(&rules, Some((at, &broken)));
        match parse_rules(text.as_bytes()) {
            Err(McpError::Rules { .. }) => {}
            other => prop_assert!(false, "{text}: {other:?}"),
        }
    }

    /// Any text is a duration or `McpError::Duration`; a duration built
    /// of parts (whole numbers at the edge of `u128` and `u64`, fractions,
    /// every unit, a sign) is read exactly, or refused when negative or
    /// past `u64` nanoseconds.
    #[test]
    fn a_duration_is_read_exactly_or_refused(
        negative in maybe(any::<bool>()),
        parts in prop::collection::vec(part(), 1..4),
        noise in pick![1 => Just(String::new()), 1 => text(), 1 => prop::sample::select(BAD_DURATIONS).prop_map(str::to_owned)],
    ) {
        let sign = match negative { Some(true) => "-", Some(false) => "+", None => "" };
        let text: String = std::iter::once(sign.to_owned()).chain(parts.iter().map(Part::text)).collect();
        let expected = expected_duration(negative == Some(true), &parts);
        match parse_duration(&text) {
            Ok(d) => prop_assert_eq!(Some(d), expected, "{}", text),
            Err(McpError::Duration { text: t, .. }) => {
                prop_assert_eq!(&t, &text);
                prop_assert_eq!(expected, None, "{} refused", text);
            }
            Err(e) => prop_assert!(false, "{text}: {e:?}"),
        }
        match parse_duration(&noise) {
            Ok(_) | Err(McpError::Duration { .. }) => {}
            Err(e) => prop_assert!(false, "{noise}: {e:?}"),
        }
    }

    /// Any bytes: a manifest, or `McpError::Manifest`.
    #[test]
    fn any_bytes_are_a_manifest_or_a_manifest_error(
        bytes in pick![
            1 => prop::collection::vec(any::<u8>(), 0..200),
            1 => json_value().prop_map(String::into_bytes),
        ],
    ) {
        match parse_manifest(&bytes) {
            Ok(m) => prop_assert_eq!(parse_manifest(m.to_json().as_bytes()).ok(), Some(m)),
            Err(e) => prop_assert!(matches!(e, McpError::Manifest { .. }), "{e:?}"),
        }
    }

    /// A pin reads back as itself (its text canonical), and the same text
    /// with one field changed by hand (a hash of something else, a
    /// description or schema changed, a tool filed under another name, a
    /// wrong type, a missing, unknown or repeated field, a bad time) is
    /// refused as `McpError::Manifest`.
    #[test]
    fn a_pin_reads_back_and_one_changed_field_refuses_it(
        server in text(),
        nanos in 0i128..4_000_000_000_000_000_000,
        tools in listed_tools(4),
        change in manifest_change(),
    ) {
        let at = Timestamp::from_unix_nanos(nanos);
        let pinned = Manifest::pin(&server, at, &tools);
        prop_assert!(pinned.is_ok(), "{pinned:?}");
        let Ok(m) = pinned else { unreachable!() };
        let text = m.to_json();
        prop_assert_eq!(&manifest_text(&m, None), &text);
        let body = text.trim_end();
        let again = Canonical::parse_str(body).map(Canonical::into_string).ok();
        prop_assert_eq!(again.as_deref(), Some(body));
        let read = parse_manifest(text.as_bytes()).ok();
        prop_assert_eq!(read.as_ref(), Some(&m));

        if m.tools.is_empty() && matches!(change, ManifestChange::Tool(..)) {
            return Ok(());
        }
        let changed = manifest_text(&m, Some(&change));
        match parse_manifest(changed.as_bytes()) {
            Err(McpError::Manifest { .. }) => {}
            other => prop_assert!(false, "{changed}: {other:?}"),
        }
    }

    /// Any text fed as a `tools/list` result: a page, or
    /// `McpError::Listing`.
    #[test]
    fn any_text_is_a_page_or_a_listing_error(
        raw in pick![1 => any::<String>(), 1 => json_value(), 1 => json_value().prop_map(|v| format!(r#"{{"tools":[{v}]}}"#))],
    ) {
        let mut listing = Listing::new("fs");
        match listing.add_page(&raw) {
            Ok(_) => prop_assert!(Canonical::parse_str(&raw).is_ok_and(|c| c.is_object())),
            Err(e) => prop_assert!(matches!(e, McpError::Listing { .. }), "{e:?}"),
        }
    }

    /// Near-valid listings (odd names, schemas and annotations of any
    /// shape, extra members, cursors of any type, repeated cursors and
    /// names, hundreds of tools, broken frames) are read as the protocol's
    /// rules say; what is listed then pins, and of what load's checks
    /// offer, every schema reaches the host as written (serde_json reads
    /// it) under a model-visible name.
    #[test]
    fn a_listing_is_read_as_the_rules_say_and_what_load_offers_reaches_the_host(
        pages in prop::collection::vec(page_model(), 1..=3),
    ) {
        let pages = &pages[..];
        let expected = expected_listing(pages);
        let mut listing = Listing::new("fs");
        let mut read: Result<(), McpError> = Ok(());
        for (index, page) in pages.iter().enumerate() {
            match listing.add_page(&page.text(index)) {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    read = Err(e);
                    break;
                }
            }
        }
        let tools = match (read, expected) {
            (Ok(()), Ok(expected)) => {
                let tools = listing.finish();
                prop_assert_eq!(&tools, &expected);
                tools
            }
            (Err(McpError::Listing { .. }), Err(())) => return Ok(()),
            (read, expected) => {
                prop_assert!(false, "read {read:?}, expected {expected:?}");
                unreachable!()
            }
        };
        let at = Timestamp::from_unix_nanos(0);
        let manifest = Manifest::pin("fs", at, &tools);
        prop_assert!(manifest.is_ok(), "{manifest:?}");
        let Ok(manifest) = manifest else { unreachable!() };
        let rules: Rules = tools
            .iter()
            .map(|t| {
                let mut rule = Rule::new(SideEffect::ReadOnly).with_timeout(Duration::from_secs(5));
                rule.allow_hint_mismatch = true;
                (t.name.clone(), rule)
            })
            .collect();
        let (offered, report) = check_tools("fs", &manifest, &rules, &tools, None);
        prop_assert_eq!(report.registered.len() + report.refused.len(), tools.len());
        let mut names = BTreeSet::new();
        for tool in &offered {
            let schema = serde_json::from_str::<serde_json::Map<String, Value>>(tool.spec.input_schema.as_str());
            prop_assert!(schema.is_ok(), "{} offered with a schema serde_json cannot read", tool.upstream);
            prop_assert!(visible_name(&tool.spec.name), "{:?}", tool.spec.name);
            prop_assert!(names.insert(tool.spec.name.clone()));
        }
    }

    /// Any text fed as a `tools/call` result under any cap: recorded
    /// content is JSON within the cap (structured content at most the cap,
    /// text a string at most the cap raised to fit the marker), and the
    /// summary says its length; or a `ToolError::Failed` (the server said
    /// `isError`), or `ToolError::Unknown` (a result that cannot be read:
    /// what the server did is not known, design §38).
    #[test]
    fn any_text_is_a_result_within_the_cap_or_a_tool_error(
        raw in pick![1 => any::<String>(), 1 => json_value(), 1 => result_model().prop_map(|m| m.text())],
        cap in pick![1 => 0usize..64, 1 => 0usize..100_000],
    ) {
        match map_result("fs", "read", &raw, cap) {
            Ok(result) => {
                let content = std::str::from_utf8(&result.content);
                prop_assert!(content.is_ok());
                let Ok(content) = content else { unreachable!() };
                let parsed = Canonical::parse_str(content);
                prop_assert!(parsed.is_ok(), "{content}");
                prop_assert!(content.len() <= cap.max(enc(TRUNCATED).len()), "{} > {cap}", content.len());
                if !content.starts_with('"') {
                    prop_assert!(content.len() <= cap);
                }
                let prefix = format!("fs/read: {} bytes", content.len());
                prop_assert!(result.summary.starts_with(&prefix), "{}", result.summary);
            }
            Err(e) => prop_assert!(
                matches!(e, ToolError::Failed { .. } | ToolError::Unknown { .. }),
                "{e:?}"
            ),
        }
    }

    /// A result of content blocks of every kind (text with multi-byte and
    /// control characters, images, audio, links, resources, unknown and
    /// broken blocks, members serde_json cannot hold), structured content
    /// or none, `isError` of any type, under caps at and around the
    /// boundary: recorded exactly as design §27 says.
    #[test]
    fn a_result_is_recorded_within_the_cap_as_the_spec_says(
        model in result_model(),
        near in -6i64..=3,
        small in 0usize..40,
        which in 0u8..3,
    ) {
        let structured_len = model.structured.as_deref().map_or(0, |s| Canonical::parse_str(s).map_or(0, |c| c.as_str().len()));
        let text_len = enc(&model.joined()).len();
        let cap = match which {
            0 => small,
            1 => usize::try_from(i64::try_from(text_len).unwrap_or(0) + near).unwrap_or(0),
            _ => usize::try_from(i64::try_from(structured_len).unwrap_or(0) + near).unwrap_or(0),
        };
        let raw = model.text();
        let got = map_result("fs", "read", &raw, cap)
            .map(|r| (r.content, r.summary))
            .map_err(|e| match e {
                ToolError::Failed { message } => message,
                other => format!("not a failure: {other:?}"),
            });
        let want = expected_result(&model, cap);
        prop_assert_eq!(&got, &want, "{} under {}", raw, cap);
        if let Ok((content, _)) = &got {
            prop_assert!(std::str::from_utf8(content).is_ok());
        }
    }
}
