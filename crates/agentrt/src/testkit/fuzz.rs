//! Argument fuzzing from a tool's JSON Schema.
//!
//! [`Fuzz`] generates argument values for a tool from its `input_schema`:
//! values the runtime accepts ([`Fuzz::valid`]) and values it refuses
//! ([`Fuzz::invalid`]: boundary cases first, then single-change near misses
//! of valid values). Generation is deterministic for a seed and never trusts
//! itself: every candidate is checked with the runtime's own schema check and
//! only values with the intended verdict are returned.
//!
//! Keywords the generator understands: `type` (also a list of types),
//! `properties`, `required`, `additionalProperties` (boolean or schema),
//! `minProperties`/`maxProperties`, `enum`, `const`, `minimum`/`maximum`,
//! `exclusiveMinimum`/`exclusiveMaximum` (number or draft-4 boolean),
//! `multipleOf`, `minLength`/`maxLength`, `pattern` (a simple regular
//! expression subset: literals, `.`, classes, `\d \w \s`, groups,
//! alternation, quantifiers, anchors), `format` (plausible `date-time`,
//! `date`, `time`, `email`, `uri`, `uuid`, `ipv4`, `ipv6`, `hostname`,
//! `duration`), `items`/`prefixItems`, `minItems`/`maxItems`,
//! `uniqueItems`, `contains`, `anyOf`/`oneOf` (one branch picked),
//! `allOf` (merged) and `$ref` to a place in the same document (such as
//! `#/$defs/name`). Anything else is left to the check that filters every
//! candidate.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::json::{Canonical, MAX_DEPTH, MAX_EXPONENT, MAX_NUMBER_CHARS, write_string};
use crate::model::ToolSpec;
use crate::registry::{ToolSchema, check_args};

/// Deterministic argument generation from a JSON Schema.
///
/// ```
/// use agentrt::testkit::fuzz::Fuzz;
/// use agentrt::{SideEffect, ToolSpec, registry::check_args};
///
/// let spec = ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly).with_schema_str(
///     r#"{"type":"object","properties":{"path":{"type":"string","minLength":1}},"required":["path"]}"#,
/// )?;
/// let fuzz = Fuzz { count: 8, ..Fuzz::default() };
/// let values = fuzz.valid(&spec)?;
/// assert_eq!(values.len(), 8);
/// assert!(values.iter().all(|v| check_args(&spec, v.as_bytes()).is_ok()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fuzz {
    /// Seed of the generator: the same seed gives the same values.
    pub seed: u64,
    /// How many valid values [`Fuzz::valid`] returns.
    pub count: usize,
    /// Most items in a generated array (more only when `minItems` asks).
    pub max_items: usize,
    /// Most characters in a generated string (more only when `minLength`
    /// asks).
    pub max_length: usize,
    /// Deepest nesting of optional parts; deeper, only what the schema
    /// requires is generated.
    pub max_depth: usize,
}

impl Default for Fuzz {
    /// Seed 1, 32 values, at most 4 items, 32 characters, depth 4.
    ///
    /// ```
    /// let f = agentrt::testkit::fuzz::Fuzz::default();
    /// assert_eq!((f.seed, f.count, f.max_items, f.max_length, f.max_depth), (1, 32, 4, 32, 4));
    /// ```
    fn default() -> Fuzz {
        Fuzz {
            seed: 1,
            count: 32,
            max_items: 4,
            max_length: 32,
            max_depth: 4,
        }
    }
}

/// A value the runtime refuses, with a short label saying what was changed.
///
/// ```
/// use agentrt::testkit::fuzz::Invalid;
/// let bad = Invalid { label: "not JSON".into(), bytes: b"{not json".to_vec() };
/// assert_eq!(bad.to_string(), "not JSON: {not json");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// What makes the value invalid, e.g. `required property "path" removed`.
    pub label: String,
    /// The argument bytes, as an agent would send them.
    pub bytes: Vec<u8>,
}

impl fmt::Display for Invalid {
    /// The label and the bytes (made safe to print, cut at 120 bytes).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.label, shown(&self.bytes))
    }
}

/// Why no values could be generated for a tool.
///
/// ```
/// use agentrt::testkit::fuzz::{Fuzz, FuzzError};
/// use agentrt::{SideEffect, ToolSpec};
/// let never = ToolSpec::new("never", "", SideEffect::ReadOnly).with_schema_str("false")?;
/// let err = Fuzz::default().valid(&never).unwrap_err();
/// assert!(matches!(err, FuzzError::NoValidValue { .. }));
/// assert!(err.to_string().contains("\"never\""));
/// # Ok::<(), agentrt::JsonError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FuzzError {
    /// The tool's schema does not compile (the runtime would refuse to
    /// register the tool).
    #[error("tool {tool:?}: {reason}")]
    Schema {
        /// The tool's name.
        tool: String,
        /// Why the schema was refused.
        reason: String,
    },
    /// No generated candidate passed the schema: it admits no value, or none
    /// the generator can find.
    #[error(
        "tool {tool:?}: no value passing the schema was found in {attempts} attempts (last refusal: {last})"
    )]
    NoValidValue {
        /// The tool's name.
        tool: String,
        /// How many candidates were tried.
        attempts: usize,
        /// Why the last candidate was refused.
        last: String,
    },
}

/// A disagreement [`Fuzz::check`] found between the generator and
/// [`check_args`]: a bug in the generator or in the schema.
///
/// ```
/// use agentrt::testkit::fuzz::FuzzProblem;
/// let p = FuzzProblem::InvalidAccepted { tool: "t".into(), label: "not JSON".into(), bytes: b"{}".to_vec() };
/// assert_eq!(p.to_string(), "tool \"t\": invalid value accepted (not JSON): {}");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FuzzProblem {
    /// A value from [`Fuzz::valid`] that `check_args` refuses.
    ValidRefused {
        /// The tool's name.
        tool: String,
        /// The value.
        args: Canonical,
        /// Why `check_args` refused it.
        why: String,
    },
    /// A value from [`Fuzz::invalid`] that `check_args` accepts.
    InvalidAccepted {
        /// The tool's name.
        tool: String,
        /// What the generator meant to break.
        label: String,
        /// The value.
        bytes: Vec<u8>,
    },
    /// The generator could not produce values for the tool.
    Generator(FuzzError),
}

impl fmt::Display for FuzzProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FuzzProblem::ValidRefused { tool, args, why } => write!(
                f,
                "tool {tool:?}: valid value refused: {}: {why}",
                shown(args.as_bytes())
            ),
            FuzzProblem::InvalidAccepted { tool, label, bytes } => write!(
                f,
                "tool {tool:?}: invalid value accepted ({label}): {}",
                shown(bytes)
            ),
            FuzzProblem::Generator(e) => write!(f, "{e}"),
        }
    }
}

/// Bytes made safe to print on one line, cut at 120 bytes.
fn shown(bytes: &[u8]) -> String {
    crate::text::truncate(&crate::text::sanitize_bytes(bytes), 120)
}

impl Fuzz {
    /// `count` argument values that pass the tool's schema as the runtime
    /// checks them (deterministic for a seed). Values repeat only when the
    /// schema seems to admit fewer distinct values than asked for. A literal
    /// `null` is returned only if both [`check_args`] (which reads it as `{}`)
    /// and the loop (which checks it as `null`) accept it.
    ///
    /// # Errors
    ///
    /// [`FuzzError::Schema`] if the schema does not compile,
    /// [`FuzzError::NoValidValue`] if no candidate passed it (e.g. the
    /// schema `false`); both name the tool.
    ///
    /// ```
    /// use agentrt::testkit::fuzz::Fuzz;
    /// use agentrt::{SideEffect, ToolSpec};
    /// let spec = ToolSpec::new("t", "", SideEffect::ReadOnly)
    ///     .with_schema_str(r#"{"type":"object","properties":{"n":{"type":"integer","minimum":1,"maximum":9}},"required":["n"]}"#)?;
    /// let fuzz = Fuzz::default();
    /// let values = fuzz.valid(&spec)?;
    /// assert_eq!(values, fuzz.valid(&spec)?); // deterministic
    /// assert!(values.iter().all(|v| v.get("n").is_some()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn valid(&self, spec: &ToolSpec) -> Result<Vec<Canonical>, FuzzError> {
        let target = Target::new(spec)?;
        let found = self.valid_trees(&target)?;
        Ok(found.into_iter().map(|(_, c)| c).collect())
    }

    /// Values the runtime refuses. First the boundary cases, as raw bytes
    /// (JSON nested 257 deep, a duplicate key, a lone surrogate escape,
    /// invalid UTF-8, a 10 001-character number literal, an exponent beyond
    /// 10 000, trailing data, not JSON); then single-change near misses of
    /// valid values that fail the schema (a required property removed, a
    /// value of the wrong type, a string too long or too short or not
    /// matching its pattern, a value outside an enum, a number out of range
    /// or not a multiple, an extra property under
    /// `additionalProperties: false`, too many or too few items, a
    /// duplicate item, …). Each near miss is checked to be refused; labels
    /// are unique.
    ///
    /// # Errors
    ///
    /// [`FuzzError::Schema`] if the schema does not compile. A schema that
    /// admits no value gives the boundary cases only.
    ///
    /// ```
    /// use agentrt::testkit::fuzz::Fuzz;
    /// use agentrt::{SideEffect, ToolSpec, registry::check_args};
    /// let spec = ToolSpec::new("t", "", SideEffect::ReadOnly).with_schema_str(
    ///     r#"{"type":"object","properties":{"mode":{"enum":["fast","safe"]}},"required":["mode"],"additionalProperties":false}"#,
    /// )?;
    /// let invalid = Fuzz::default().invalid(&spec)?;
    /// assert_eq!(invalid[0].label, "JSON nested 257 deep");
    /// assert!(invalid.iter().any(|i| i.label == r#"required property "mode" removed"#));
    /// assert!(invalid.iter().all(|i| check_args(&spec, &i.bytes).is_err()));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn invalid(&self, spec: &ToolSpec) -> Result<Vec<Invalid>, FuzzError> {
        let target = Target::new(spec)?;
        let valid = match self.valid_trees(&target) {
            Ok(found) => found,
            Err(FuzzError::NoValidValue { .. }) => Vec::new(),
            Err(e) => return Err(e),
        };
        let mut out = boundary_cases();
        let mut finder = Misses {
            generator: Generator::new(self, &target.root, self.rng_for(&target.tool, 1)),
            found: Vec::new(),
        };
        let mut labels = BTreeSet::new();
        for (tree, _) in valid.iter().take(MISS_SOURCES) {
            finder.found.clear();
            finder.walk(tree, &target.root, tree, &mut Vec::new());
            for (label, value) in std::mem::take(&mut finder.found) {
                if labels.contains(&label) {
                    continue;
                }
                let Ok(canonical) = Canonical::parse_str(&value.text()) else {
                    continue;
                };
                if target.refuses(canonical.as_bytes()) {
                    labels.insert(label.clone());
                    out.push(Invalid {
                        label,
                        bytes: canonical.into_string().into_bytes(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// Checks, for every tool, that each [`valid`](Fuzz::valid) value passes
    /// [`check_args`] and each [`invalid`](Fuzz::invalid) value is refused by
    /// it.
    ///
    /// # Errors
    ///
    /// Every disagreement found, and every tool the generator failed on.
    ///
    /// ```
    /// use agentrt::testkit::fuzz::Fuzz;
    /// use agentrt::{SideEffect, ToolSpec};
    /// let tools = [
    ///     ToolSpec::new("a", "", SideEffect::ReadOnly)
    ///         .with_schema_str(r#"{"type":"object","properties":{"q":{"type":"string","pattern":"^[a-z]{2,5}$"}}}"#)?,
    ///     ToolSpec::new("b", "", SideEffect::Destructive),
    /// ];
    /// assert_eq!(Fuzz::default().check(&tools), Ok(()));
    /// # Ok::<(), agentrt::JsonError>(())
    /// ```
    pub fn check(&self, tools: &[ToolSpec]) -> Result<(), Vec<FuzzProblem>> {
        let mut problems = Vec::new();
        for spec in tools {
            self.check_one(spec, &mut problems);
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    fn check_one(&self, spec: &ToolSpec, problems: &mut Vec<FuzzProblem>) {
        let tool = || spec.name.clone();
        match self.valid(spec) {
            Ok(values) => {
                for args in values {
                    if let Err(why) = check_args(spec, args.as_bytes()) {
                        let tool = tool();
                        problems.push(FuzzProblem::ValidRefused { tool, args, why });
                    }
                }
            }
            Err(e @ FuzzError::Schema { .. }) => {
                // `invalid` would fail the same way.
                problems.push(FuzzProblem::Generator(e));
                return;
            }
            Err(e) => problems.push(FuzzProblem::Generator(e)),
        }
        match self.invalid(spec) {
            Ok(values) => {
                for Invalid { label, bytes } in values {
                    if check_args(spec, &bytes).is_ok() {
                        let tool = tool();
                        problems.push(FuzzProblem::InvalidAccepted { tool, label, bytes });
                    }
                }
            }
            Err(e) => problems.push(FuzzProblem::Generator(e)),
        }
    }

    /// The generator's random stream for a tool: the seed mixed with the
    /// tool's name (so equal schemas of different tools differ) and a stream
    /// number.
    fn rng_for(&self, tool: &str, stream: u64) -> Rng {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in tool.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(self.seed ^ h ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    /// Valid values with the trees they were written from.
    fn valid_trees(&self, target: &Target) -> Result<Vec<(Gen, Canonical)>, FuzzError> {
        let mut generator = Generator::new(self, &target.root, self.rng_for(&target.tool, 0));
        let budget = self.count.saturating_mul(16).saturating_add(64);
        let mut out: Vec<(Gen, Canonical)> = Vec::new();
        let mut seen = BTreeSet::new();
        let mut repeats = 0;
        let mut attempts = 0;
        let mut last = String::from("the schema admits no value the generator can build");
        while out.len() < self.count && attempts < budget {
            attempts += 1;
            let Some(tree) = generator.value(&target.root, 0) else {
                continue;
            };
            let canonical = match Canonical::parse_str(&tree.text()) {
                Ok(c) => c,
                Err(e) => {
                    last = e.to_string();
                    continue;
                }
            };
            if let Err(why) = target.accepts(canonical.as_bytes()) {
                last = why;
                continue;
            }
            if seen.insert(canonical.as_str().to_owned()) {
                repeats = 0;
                out.push((tree, canonical));
            } else {
                // A small value space: after a run of repeats, accept them.
                repeats += 1;
                if repeats >= 8 {
                    out.push((tree, canonical));
                }
            }
        }
        if out.is_empty() && self.count > 0 {
            return Err(FuzzError::NoValidValue {
                tool: target.tool.clone(),
                attempts,
                last,
            });
        }
        let distinct = out.len();
        for i in 0..self.count.saturating_sub(distinct) {
            if let Some(again) = out.get(i % distinct.max(1)).cloned() {
                out.push(again);
            }
        }
        Ok(out)
    }
}

/// How many valid values near misses are derived from.
const MISS_SOURCES: usize = 8;

/// Deepest nesting ever generated: beyond `max_depth` only required parts
/// are, and never beyond this (which keeps the recursion well inside a
/// thread's stack; JSON itself stops at 256).
const DEPTH_CAP: usize = 128;

/// The boundary cases every entry point refuses, as raw bytes.
fn boundary_cases() -> Vec<Invalid> {
    let case = |label: &str, bytes: Vec<u8>| Invalid {
        label: label.to_owned(),
        bytes,
    };
    let deep = MAX_DEPTH + 1;
    let nested = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
    let long_number = format!("{{\"a\":1{}}}", "0".repeat(MAX_NUMBER_CHARS));
    let big_exponent = format!("{{\"a\":1e{}}}", MAX_EXPONENT + 1);
    vec![
        case("JSON nested 257 deep", nested.into_bytes()),
        case("a duplicate key", br#"{"a":1,"a":1}"#.to_vec()),
        case("a lone surrogate escape", br#"{"a":"\ud800"}"#.to_vec()),
        case("invalid UTF-8", b"{\"a\":\"\xff\"}".to_vec()),
        case(
            "a 10 001-character number literal",
            long_number.into_bytes(),
        ),
        case("an exponent beyond 10 000", big_exponent.into_bytes()),
        case("trailing data", b"{} {}".to_vec()),
        case("not JSON", b"{not json".to_vec()),
    ]
}

/// A tool's compiled schema, checked both ways the runtime reads arguments.
struct Target {
    tool: String,
    root: Value,
    schema: ToolSchema,
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

impl Target {
    fn new(spec: &ToolSpec) -> Result<Target, FuzzError> {
        let schema =
            ToolSchema::compile(&spec.input_schema).map_err(|reason| FuzzError::Schema {
                tool: spec.name.clone(),
                reason,
            })?;
        Ok(Target {
            tool: spec.name.clone(),
            root: spec.input_schema.to_value(),
            schema,
        })
    }

    /// The verdicts of [`check_args`] (which reads `null` as `{}`) and of the
    /// loop (which reads blank arguments as `{}` but checks an explicit
    /// `null` as `null`).
    fn verdicts(&self, bytes: &[u8]) -> [Result<(), String>; 2] {
        let parsed = match Canonical::parse(bytes) {
            Ok(c) => c,
            Err(e) => {
                let why = format!("arguments are not acceptable JSON: {e}");
                return [Err(why.clone()), Err(why)];
            }
        };
        if !parsed.is_null() {
            let verdict = self.schema.check(&parsed);
            return [verdict.clone(), verdict];
        }
        let as_empty = self.schema.check(&Canonical::empty_object());
        let as_loop = if is_blank(bytes) {
            as_empty.clone()
        } else {
            self.schema.check(&parsed)
        };
        [as_empty, as_loop]
    }

    /// Both readings accept the value.
    fn accepts(&self, bytes: &[u8]) -> Result<(), String> {
        let [a, b] = self.verdicts(bytes);
        a.and(b)
    }

    /// Both readings refuse the value.
    fn refuses(&self, bytes: &[u8]) -> bool {
        self.verdicts(bytes).iter().all(Result::is_err)
    }
}

/// A small deterministic PRNG (splitmix64).
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    /// Uniform in `lo..=hi` (`lo` when the range is empty).
    fn between(&mut self, lo: i128, hi: i128) -> i128 {
        if hi <= lo {
            return lo;
        }
        let span = (hi - lo).unsigned_abs().saturating_add(1);
        let offset = u128::from(self.next()) % span;
        lo.saturating_add(i128::try_from(offset).unwrap_or(0))
    }

    /// Uniform in `lo..=hi` for sizes.
    fn size(&mut self, lo: usize, hi: usize) -> usize {
        let (l, h) = (lo as i128, hi.min(lo.saturating_add(1 << 20)) as i128);
        usize::try_from(self.between(l, h)).unwrap_or(lo)
    }

    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let n = items.len() as u64;
        if n == 0 {
            return None;
        }
        items.get(usize::try_from(self.below(n)).unwrap_or(0))
    }
}

/// A generated JSON value whose number literals are kept as written.
#[derive(Debug, Clone, PartialEq)]
enum Gen {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Gen>),
    Obj(Vec<(String, Gen)>),
}

impl Gen {
    fn from_value(v: &Value) -> Gen {
        match v {
            Value::Null => Gen::Null,
            Value::Bool(b) => Gen::Bool(*b),
            Value::Number(n) => Gen::Num(n.to_string()),
            Value::String(s) => Gen::Str(s.clone()),
            Value::Array(items) => Gen::Arr(items.iter().map(Gen::from_value).collect()),
            Value::Object(m) => Gen::Obj(
                m.iter()
                    .map(|(k, v)| (k.clone(), Gen::from_value(v)))
                    .collect(),
            ),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Gen::Null => out.push_str("null"),
            Gen::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Gen::Num(n) => out.push_str(n),
            Gen::Str(s) => write_string(out, s),
            Gen::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Gen::Obj(members) => {
                out.push('{');
                for (i, (k, v)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_string(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn kind(&self) -> Kind {
        match self {
            Gen::Null => Kind::Null,
            Gen::Bool(_) => Kind::Boolean,
            Gen::Num(n) if n.bytes().all(|b| b.is_ascii_digit() || b == b'-') => Kind::Integer,
            Gen::Num(_) => Kind::Number,
            Gen::Str(_) => Kind::String,
            Gen::Arr(_) => Kind::Array,
            Gen::Obj(_) => Kind::Object,
        }
    }

    /// The node at `path`, for editing.
    fn at_mut(&mut self, path: &[Seg]) -> Option<&mut Gen> {
        let Some((first, rest)) = path.split_first() else {
            return Some(self);
        };
        let child = match (self, first) {
            (Gen::Obj(members), Seg::Key(key)) => {
                members.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v)
            }
            (Gen::Arr(items), Seg::Index(i)) => items.get_mut(*i),
            _ => None,
        }?;
        child.at_mut(rest)
    }
}

/// The JSON types of a schema's `type` keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    const ALL: [Kind; 7] = [
        Kind::Null,
        Kind::Boolean,
        Kind::Integer,
        Kind::Number,
        Kind::String,
        Kind::Array,
        Kind::Object,
    ];

    fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Boolean => "boolean",
            Kind::Integer => "integer",
            Kind::Number => "number",
            Kind::String => "string",
            Kind::Array => "array",
            Kind::Object => "object",
        }
    }

    fn is_scalar(self) -> bool {
        !matches!(self, Kind::Array | Kind::Object)
    }

    /// Whether a value of kind `self` is of the schema type `allowed`.
    fn fits(self, allowed: Kind) -> bool {
        self == allowed || (self == Kind::Integer && allowed == Kind::Number)
    }
}

/// The types a schema allows: from `type`, or guessed from its keywords.
fn allowed_kinds(m: &Map<String, Value>) -> Vec<Kind> {
    match m.get("type") {
        Some(Value::String(t)) => Kind::parse(t).into_iter().collect(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter_map(Kind::parse)
            .collect(),
        _ => inferred_kinds(m),
    }
}

fn inferred_kinds(m: &Map<String, Value>) -> Vec<Kind> {
    let has = |keys: &[&str]| keys.iter().any(|k| m.contains_key(*k));
    let mut kinds = Vec::new();
    if has(&[
        "properties",
        "required",
        "additionalProperties",
        "minProperties",
        "maxProperties",
    ]) {
        kinds.push(Kind::Object);
    }
    if has(&[
        "items",
        "prefixItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "contains",
    ]) {
        kinds.push(Kind::Array);
    }
    if has(&["minLength", "maxLength", "pattern", "format"]) {
        kinds.push(Kind::String);
    }
    if has(&[
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
    ]) {
        kinds.push(Kind::Number);
    }
    if kinds.is_empty() {
        kinds.extend(Kind::ALL);
    }
    kinds
}

fn usize_kw(m: &Map<String, Value>, key: &str) -> Option<usize> {
    m.get(key)
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Merges schema keywords of `from` into `into` (for `allOf`, `$ref`
/// siblings and a picked `anyOf` branch): properties and required lists are
/// combined, bounds tightened, types and enums intersected; any other
/// keyword already present is kept.
fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (key, value) in from {
        let Some(have) = into.get_mut(&key) else {
            into.insert(key, value);
            continue;
        };
        match key.as_str() {
            "properties" => merge_properties(have, value),
            "required" => {
                if let (Value::Array(a), Value::Array(b)) = (have, value) {
                    for name in b {
                        if !a.contains(&name) {
                            a.push(name);
                        }
                    }
                }
            }
            "minimum" | "minLength" | "minItems" | "minProperties" | "exclusiveMinimum" => {
                tighten(have, value, f64::max);
            }
            "maximum" | "maxLength" | "maxItems" | "maxProperties" | "exclusiveMaximum" => {
                tighten(have, value, f64::min);
            }
            "type" | "enum" => intersect(have, &value, &key),
            _ => {}
        }
    }
}

fn merge_properties(have: &mut Value, value: Value) {
    let (Value::Object(a), Value::Object(b)) = (have, value) else {
        return;
    };
    for (name, schema) in b {
        match a.remove(&name) {
            Some(old) => a.insert(name, serde_json::json!({ "allOf": [old, schema] })),
            None => a.insert(name, schema),
        };
    }
}

fn tighten(have: &mut Value, value: Value, pick: fn(f64, f64) -> f64) {
    if let (Some(a), Some(b)) = (have.as_f64(), value.as_f64())
        && pick(a, b) == b
    {
        *have = value;
    }
}

fn intersect(have: &mut Value, value: &Value, key: &str) {
    let as_list = |v: &Value| match v {
        Value::Array(a) => a.clone(),
        other => vec![other.clone()],
    };
    let theirs = as_list(value);
    let has = |name: &str| theirs.contains(&Value::from(name));
    let mut both: Vec<Value> = Vec::new();
    for v in as_list(have) {
        let kept = if theirs.contains(&v) {
            Some(v)
        } else if key != "type" {
            None
        } else {
            // An integer is a number.
            match v.as_str() {
                Some("integer") if has("number") => Some(v),
                Some("number") if has("integer") => Some(Value::from("integer")),
                _ => None,
            }
        };
        if let Some(v) = kept.filter(|v| !both.contains(v)) {
            both.push(v);
        }
    }
    *have = Value::Array(both);
}

/// Numeric bounds of a schema.
#[derive(Debug, Clone, Copy, Default)]
struct Bounds {
    lo: Option<f64>,
    lo_excl: bool,
    hi: Option<f64>,
    hi_excl: bool,
}

impl Bounds {
    fn of(m: &Map<String, Value>) -> Bounds {
        let num = |k: &str| m.get(k).and_then(Value::as_f64);
        let mut b = Bounds {
            lo: num("minimum"),
            hi: num("maximum"),
            ..Bounds::default()
        };
        match m.get("exclusiveMinimum") {
            Some(Value::Bool(true)) => b.lo_excl = true,
            Some(v) => {
                if let Some(x) = v.as_f64()
                    && b.lo.is_none_or(|lo| x >= lo)
                {
                    (b.lo, b.lo_excl) = (Some(x), true);
                }
            }
            None => {}
        }
        match m.get("exclusiveMaximum") {
            Some(Value::Bool(true)) => b.hi_excl = true,
            Some(v) => {
                if let Some(x) = v.as_f64()
                    && b.hi.is_none_or(|hi| x <= hi)
                {
                    (b.hi, b.hi_excl) = (Some(x), true);
                }
            }
            None => {}
        }
        b
    }

    /// The integers `n` with `n / 10^scale` inside the bounds, when the
    /// bounds are set; `default_span` either side otherwise.
    fn scaled(&self, scale: u32, default_span: f64) -> (i128, i128) {
        let factor = 10f64.powi(i32::try_from(scale).unwrap_or(0));
        let lo = self.lo.map(|x| {
            let s = x * factor;
            let c = s.ceil();
            if self.lo_excl && c == s { c + 1.0 } else { c }
        });
        let hi = self.hi.map(|x| {
            let s = x * factor;
            let f = s.floor();
            if self.hi_excl && f == s { f - 1.0 } else { f }
        });
        let span = default_span * factor;
        let (lo, hi) = match (lo, hi) {
            (Some(l), Some(h)) => (l, h),
            (Some(l), None) => (l, l + span),
            (None, Some(h)) => (h - span, h),
            (None, None) => (-span, span),
        };
        (clamp_int(lo), clamp_int(hi))
    }
}

/// Keeps generated integers where `f64` is exact.
fn clamp_int(x: f64) -> i128 {
    const LIMIT: f64 = 1e15;
    if x.is_nan() {
        return 0;
    }
    x.clamp(-LIMIT, LIMIT) as i128
}

/// A decimal `mantissa / 10^scale`, read from a schema number.
#[derive(Debug, Clone, Copy)]
struct Decimal {
    mantissa: i128,
    scale: u32,
}

impl Decimal {
    /// Reads a positive number literal such as `5`, `0.01` or `2.5e-3`.
    fn parse(text: &str) -> Option<Decimal> {
        let (digits, exponent) = match text.find(['e', 'E']) {
            Some(at) => (text.get(..at)?, text.get(at + 1..)?.parse::<i32>().ok()?),
            None => (text, 0),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all = format!("{whole}{fraction}");
        if all.is_empty() || !all.bytes().all(|b| b.is_ascii_digit()) || all.len() > 15 {
            return None;
        }
        let mut mantissa: i128 = all.parse().ok()?;
        let mut scale = i32::try_from(fraction.len()).ok()? - exponent;
        while scale < 0 {
            mantissa = mantissa.checked_mul(10)?;
            scale += 1;
        }
        let scale = u32::try_from(scale).ok().filter(|s| *s <= 12)?;
        (mantissa > 0 && mantissa < 1_000_000_000_000_000).then_some(Decimal { mantissa, scale })
    }

    fn of(m: &Map<String, Value>) -> Option<Decimal> {
        match m.get("multipleOf")? {
            Value::Number(n) => Decimal::parse(&n.to_string()),
            _ => None,
        }
    }
}

/// `n / 10^scale` as a JSON number literal with exactly `scale` decimals.
fn decimal_text(n: i128, scale: u32) -> String {
    let digits = n.unsigned_abs().to_string();
    let sign = if n < 0 { "-" } else { "" };
    let scale = usize::try_from(scale).unwrap_or(0);
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (whole, fraction) = padded.split_at(padded.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

fn gcd(a: i128, b: i128) -> i128 {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// Floor and ceiling of `a / b` for `b > 0`.
fn div_floor(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a < 0 { q - 1 } else { q }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b != 0 && a > 0 { q + 1 } else { q }
}

/// A number as a JSON literal (`None` for NaN and infinities).
fn number_text(x: f64) -> Option<String> {
    if !x.is_finite() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return Some(format!("{}", x as i64));
    }
    Some(format!("{x}"))
}

const DIGITS: &[u8] = b"0123456789";
const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
const PUNCT: &[char] = &[' ', '-', '_', '.', ',', ':', '/', '@', '#', '%', '+', '='];
const TRICKY: &[char] = &[
    '"', '\\', '<', '>', '&', '\'', '\n', '\t', '\u{1}', '\u{7f}',
];
const WIDE: &[char] = &[
    'é', 'ß', 'ж', '日', '本', '\u{2028}', '\u{200b}', '😀', '🚀', '\u{e9}',
];
const WORDS: &[&str] = &[
    "alpha", "build", "cache", "delta", "docs", "main", "notes", "report", "src", "temp",
];

/// Generates values from schemas.
struct Generator<'a> {
    fuzz: &'a Fuzz,
    root: &'a Value,
    rng: Rng,
}

impl<'a> Generator<'a> {
    fn new(fuzz: &'a Fuzz, root: &'a Value, rng: Rng) -> Generator<'a> {
        Generator { fuzz, root, rng }
    }

    /// The schema's keywords with `$ref` and `allOf` merged in; `None` for
    /// the schema `false` (or a reference that cannot be followed).
    fn flatten(&self, schema: &Value, hops: usize) -> Option<Map<String, Value>> {
        if hops > 32 {
            return None;
        }
        let mut m = match schema {
            Value::Bool(false) => return None,
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        if let Some(Value::String(reference)) = m.remove("$ref") {
            let target = self.resolve(&reference)?;
            let mut base = self.flatten(target, hops + 1)?;
            merge(&mut base, m);
            m = base;
        }
        if let Some(Value::Array(parts)) = m.remove("allOf") {
            for part in &parts {
                let part = self.flatten(part, hops + 1)?;
                merge(&mut m, part);
            }
        }
        Some(m)
    }

    /// A reference inside the document (`#`, `#/$defs/x`, …).
    fn resolve(&self, reference: &str) -> Option<&'a Value> {
        let pointer = reference.strip_prefix('#')?;
        if pointer.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(pointer)
    }

    /// Picks one branch of each `anyOf`/`oneOf` and merges it in.
    fn choose_branches(&mut self, m: &mut Map<String, Value>) -> Option<()> {
        for _ in 0..8 {
            let Some(key) = ["anyOf", "oneOf"].into_iter().find(|k| m.contains_key(*k)) else {
                return Some(());
            };
            let Some(Value::Array(branches)) = m.remove(key) else {
                continue;
            };
            let branch = self.rng.pick(&branches)?;
            let picked = self.flatten(branch, 0)?;
            merge(m, picked);
        }
        Some(())
    }

    /// A value for `schema` at nesting `depth`; `None` when the generator
    /// cannot build one.
    fn value(&mut self, schema: &Value, depth: usize) -> Option<Gen> {
        if depth > DEPTH_CAP {
            return None;
        }
        let mut m = self.flatten(schema, 0)?;
        self.choose_branches(&mut m)?;
        if let Some(c) = m.get("const") {
            return Some(Gen::from_value(c));
        }
        if let Some(Value::Array(options)) = m.get("enum") {
            return self.rng.pick(options).map(Gen::from_value);
        }
        let mut kinds = allowed_kinds(&m);
        if depth >= self.fuzz.max_depth && kinds.iter().any(|k| k.is_scalar()) {
            kinds.retain(|k| k.is_scalar());
        }
        match *self.rng.pick(&kinds)? {
            Kind::Null => Some(Gen::Null),
            Kind::Boolean => Some(Gen::Bool(self.rng.chance(1, 2))),
            Kind::Integer => Some(self.integer(&m)),
            Kind::Number => Some(self.number(&m)),
            Kind::String => Some(self.string(&m)),
            Kind::Array => self.array(&m, depth),
            Kind::Object => self.object(&m, depth),
        }
    }

    /// A value of any type.
    fn any(&mut self, depth: usize) -> Option<Gen> {
        self.value(&Value::Bool(true), depth)
    }

    /// A value for an extra property: from the `additionalProperties`
    /// schema, or of any type.
    fn extra_value(&mut self, schema: Option<&Value>, depth: usize) -> Option<Gen> {
        match schema {
            Some(s) => self.value(s, depth + 1),
            None => self.any(depth + 1),
        }
    }

    fn extra_key(&mut self, taken: impl Fn(&str) -> bool) -> String {
        const STEMS: &[&str] = &["extra", "x", "note", "_meta", "ключ", "a b", ""];
        for n in 0u32.. {
            let stem = self.rng.pick(STEMS).copied().unwrap_or("extra");
            let key = if n == 0 {
                stem.to_owned()
            } else {
                format!("{stem}{n}")
            };
            if !taken(&key) {
                return key;
            }
        }
        String::new()
    }

    fn object(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Gen> {
        let props = m.get("properties").and_then(Value::as_object);
        let required = strings(m.get("required"));
        let extra_schema = m.get("additionalProperties");
        let shallow = depth >= self.fuzz.max_depth;
        let mut members: Vec<(String, Gen)> = Vec::new();
        for (key, sub) in props.into_iter().flatten() {
            let needed = required.contains(key);
            if !needed && (shallow || self.rng.chance(1, 2)) {
                continue;
            }
            match self.value(sub, depth + 1) {
                Some(v) => members.push((key.clone(), v)),
                None if needed => return None,
                None => {}
            }
        }
        for key in &required {
            let declared = props.is_some_and(|p| p.contains_key(key));
            if !declared && !members.iter().any(|(k, _)| k == key) {
                let v = self.extra_value(extra_schema, depth)?;
                members.push((key.clone(), v));
            }
        }
        self.object_extras(m, props, &mut members, depth)?;
        if let Some(max) = usize_kw(m, "maxProperties") {
            while members.len() > max {
                let Some(at) = members.iter().rposition(|(k, _)| !required.contains(k)) else {
                    break;
                };
                members.remove(at);
            }
        }
        Some(Gen::Obj(members))
    }

    /// Adds undeclared properties: sometimes one when allowed, and as many
    /// as `minProperties` asks. Names come from `patternProperties` when it
    /// has patterns (always, when other names are closed off).
    fn object_extras(
        &mut self,
        m: &Map<String, Value>,
        props: Option<&Map<String, Value>>,
        members: &mut Vec<(String, Gen)>,
        depth: usize,
    ) -> Option<()> {
        let extra_schema = m.get("additionalProperties");
        let closed = matches!(extra_schema, Some(Value::Bool(false)));
        let patterns: Vec<(&String, &Value)> = m
            .get("patternProperties")
            .and_then(Value::as_object)
            .map(|p| p.iter().collect())
            .unwrap_or_default();
        let open = !closed || !patterns.is_empty();
        let mut wanted = usize::from(open && depth < self.fuzz.max_depth && self.rng.chance(1, 4));
        let min = usize_kw(m, "minProperties").unwrap_or(0);
        wanted = wanted.max(min.saturating_sub(members.len())).min(64);
        for _ in 0..wanted {
            let taken = |k: &str| {
                props.is_some_and(|p| p.contains_key(k)) || members.iter().any(|(m, _)| m == k)
            };
            let patterned = if !patterns.is_empty() && (closed || self.rng.chance(1, 2)) {
                self.patterned_key(&patterns, taken)
            } else {
                None
            };
            let (key, schema) = match patterned {
                Some((key, schema)) => (key, Some(schema)),
                None => (self.extra_key(taken), extra_schema),
            };
            let value = self.extra_value(schema, depth)?;
            members.push((key, value));
        }
        Some(())
    }

    /// A free name matching one of the `patternProperties` patterns, with
    /// that pattern's schema.
    fn patterned_key<'s>(
        &mut self,
        patterns: &[(&String, &'s Value)],
        taken: impl Fn(&str) -> bool,
    ) -> Option<(String, &'s Value)> {
        let (pattern, schema) = *self.rng.pick(patterns)?;
        let parsed = pattern::parse(pattern)?;
        (0..8)
            .filter_map(|_| pattern::generate(&parsed, &mut self.rng))
            .find(|key| !taken(key))
            .map(|key| (key, schema))
    }

    fn array(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Gen> {
        let (prefix, rest) = item_schemas(m);
        let min = usize_kw(m, "minItems").unwrap_or(0);
        let max = usize_kw(m, "maxItems").unwrap_or(usize::MAX);
        let mut hi = if depth >= self.fuzz.max_depth {
            min
        } else {
            min.max(self.fuzz.max_items)
        };
        hi = hi.min(max);
        if matches!(rest, Some(Value::Bool(false))) {
            hi = hi.min(prefix.len());
        }
        let len = self.rng.size(min, hi.max(min));
        let unique = m.get("uniqueItems") == Some(&Value::Bool(true));
        let mut items: Vec<Gen> = Vec::with_capacity(len);
        let mut seen = BTreeSet::new();
        for i in 0..len {
            let schema = prefix.get(i).copied().or(rest);
            let Some(item) = self.unique_item(schema, depth, unique, &mut seen) else {
                if items.len() >= min {
                    break;
                }
                return None;
            };
            items.push(item);
        }
        if let Some(contains) = m.get("contains")
            && let Some(item) = self.value(contains, depth + 1)
        {
            let at = self.rng.size(0, items.len());
            if items.len() < hi.max(1) {
                items.insert(at, item);
            } else if let Some(slot) = items.get_mut(at) {
                *slot = item;
            }
        }
        Some(Gen::Arr(items))
    }

    /// An item, differing from those in `seen` when `unique` (a few tries).
    fn unique_item(
        &mut self,
        schema: Option<&Value>,
        depth: usize,
        unique: bool,
        seen: &mut BTreeSet<String>,
    ) -> Option<Gen> {
        for _ in 0..8 {
            let item = match schema {
                Some(s) => self.value(s, depth + 1),
                None => self.any(depth + 1),
            }?;
            if !unique || seen.insert(item.text()) {
                return Some(item);
            }
        }
        None
    }

    fn string(&mut self, m: &Map<String, Value>) -> Gen {
        let min = usize_kw(m, "minLength").unwrap_or(0);
        let max = usize_kw(m, "maxLength");
        let fits = |s: &str| {
            let n = s.chars().count();
            n >= min && max.is_none_or(|mx| n <= mx)
        };
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            if let Some(re) = pattern::parse(p) {
                for _ in 0..16 {
                    if let Some(s) = pattern::generate(&re, &mut self.rng)
                        && fits(&s)
                    {
                        return Gen::Str(s);
                    }
                }
            }
            // A pattern beyond the subset, or lengths it misses: random
            // strings, left to the check.
        } else if let Some(format) = m.get("format").and_then(Value::as_str)
            && let Some(s) = self.formatted(format)
            && fits(&s)
        {
            return Gen::Str(s);
        }
        Gen::Str(self.random_string(min, max))
    }

    fn random_string(&mut self, min: usize, max: Option<usize>) -> String {
        let hi = max.unwrap_or(usize::MAX).min(min.max(self.fuzz.max_length));
        let len = self.rng.size(min, hi.max(min));
        (0..len).map(|_| self.random_char()).collect()
    }

    fn random_char(&mut self) -> char {
        let roll = self.rng.below(100);
        let from = |rng: &mut Rng, set: &[char]| rng.pick(set).copied().unwrap_or('a');
        match roll {
            0..70 => self.ascii(ALNUM),
            70..80 => from(&mut self.rng, PUNCT),
            80..88 => from(&mut self.rng, TRICKY),
            _ => from(&mut self.rng, WIDE),
        }
    }

    fn ascii(&mut self, set: &[u8]) -> char {
        self.rng.pick(set).map_or('a', |b| char::from(*b))
    }

    fn digits(&mut self, n: usize) -> String {
        (0..n).map(|_| self.ascii(DIGITS)).collect()
    }

    fn word(&mut self) -> &'static str {
        self.rng.pick(WORDS).copied().unwrap_or("main")
    }

    fn num(&mut self, lo: i128, hi: i128) -> i128 {
        self.rng.between(lo, hi)
    }

    /// A plausible value of a `format`, if it is one the generator knows.
    fn formatted(&mut self, format: &str) -> Option<String> {
        let s = match format {
            "date-time" => format!("{}T{}", self.date(), self.time()),
            "date" => self.date(),
            "time" => self.time(),
            "email" | "idn-email" => {
                format!("{}{}@example.{}", self.word(), self.num(1, 99), self.tld())
            }
            "uri" | "iri" | "uri-reference" | "iri-reference" | "url" => format!(
                "https://example.{}/{}/{}?page={}",
                self.tld(),
                self.word(),
                self.word(),
                self.num(1, 9)
            ),
            "uuid" => {
                let hex = |g: &mut Self, n: usize| -> String {
                    (0..n).map(|_| g.ascii(b"0123456789abcdef")).collect()
                };
                let parts = [
                    hex(self, 8),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 4),
                    hex(self, 12),
                ];
                parts.join("-")
            }
            "ipv4" => format!(
                "{}.{}.{}.{}",
                self.num(1, 223),
                self.num(0, 255),
                self.num(0, 255),
                self.num(1, 254)
            ),
            "ipv6" => format!("2001:db8::{:x}", self.num(1, 0xffff)),
            "hostname" | "idn-hostname" => {
                format!("{}{}.example.com", self.word(), self.num(1, 99))
            }
            "duration" => format!("P{}DT{}H", self.num(0, 30), self.num(0, 23)),
            _ => return None,
        };
        Some(s)
    }

    fn tld(&mut self) -> &'static str {
        self.rng
            .pick(&["com", "org", "net"])
            .copied()
            .unwrap_or("com")
    }

    fn date(&mut self) -> String {
        format!(
            "{:04}-{:02}-{:02}",
            self.num(1990, 2040),
            self.num(1, 12),
            self.num(1, 28)
        )
    }

    fn time(&mut self) -> String {
        let fraction = if self.rng.chance(1, 3) {
            format!(".{}", self.digits(3))
        } else {
            String::new()
        };
        let zone = if self.rng.chance(1, 2) {
            "Z".to_owned()
        } else {
            format!("+{:02}:00", self.num(0, 12))
        };
        format!(
            "{:02}:{:02}:{:02}{fraction}{zone}",
            self.num(0, 23),
            self.num(0, 59),
            self.num(0, 59)
        )
    }

    /// Half-width of the range drawn from when a bound is missing.
    fn span(&mut self) -> f64 {
        match self.rng.below(10) {
            0..7 => 100.0,
            7..9 => 1e6,
            _ => 1e12,
        }
    }

    fn integer(&mut self, m: &Map<String, Value>) -> Gen {
        let bounds = Bounds::of(m);
        let span = self.span();
        if let Some(step) = Decimal::of(m) {
            // The least integer multiple of `mantissa / 10^scale`.
            let unit = step.mantissa / gcd(step.mantissa, 10i128.pow(step.scale));
            return Gen::Num(self.multiple(&bounds, unit, 0, span));
        }
        let (lo, hi) = bounds.scaled(0, span);
        Gen::Num(self.num(lo, hi).to_string())
    }

    fn number(&mut self, m: &Map<String, Value>) -> Gen {
        let bounds = Bounds::of(m);
        let span = self.span();
        if let Some(step) = Decimal::of(m) {
            return Gen::Num(self.multiple(&bounds, step.mantissa, step.scale, span));
        }
        let unbounded = bounds.lo.is_none() && bounds.hi.is_none();
        match self.rng.below(8) {
            0..4 => self.integer(m),
            4 if unbounded => {
                let e = if self.rng.chance(1, 2) { "e" } else { "E" };
                let (m, x) = (self.num(-99, 99), self.num(-5, 5));
                Gen::Num(format!("{m}{e}{x}"))
            }
            _ => {
                let scale = u32::try_from(self.num(1, 3)).unwrap_or(1);
                let (lo, hi) = bounds.scaled(scale, span);
                Gen::Num(decimal_text(self.num(lo, hi), scale))
            }
        }
    }

    /// `k * mantissa / 10^scale` inside the bounds.
    fn multiple(&mut self, bounds: &Bounds, mantissa: i128, scale: u32, span: f64) -> String {
        // Without bounds, draw about `span` steps either side of zero.
        let step = mantissa as f64 / 10f64.powi(i32::try_from(scale).unwrap_or(0));
        let (lo, hi) = bounds.scaled(scale, span * step);
        let (k_lo, k_hi) = (div_ceil(lo, mantissa), div_floor(hi, mantissa));
        let k = self.num(k_lo, k_hi);
        decimal_text(k.saturating_mul(mantissa), scale)
    }
}

/// The item schemas of an array schema: the positional ones, then the
/// schema of the rest (`None`: any value).
fn item_schemas(m: &Map<String, Value>) -> (Vec<&Value>, Option<&Value>) {
    match (m.get("prefixItems"), m.get("items")) {
        (Some(Value::Array(prefix)), rest) => (prefix.iter().collect(), rest),
        (_, Some(Value::Array(prefix))) => (prefix.iter().collect(), m.get("additionalItems")),
        (_, rest) => (Vec::new(), rest),
    }
}

/// One step of a path into a value.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A JSON Pointer (RFC 6901) for a path.
fn pointer(path: &[Seg]) -> String {
    let mut out = String::new();
    for seg in path {
        out.push('/');
        match seg {
            Seg::Key(k) => out.push_str(&k.replace('~', "~0").replace('/', "~1")),
            Seg::Index(i) => out.push_str(&i.to_string()),
        }
    }
    out
}

/// Most near-miss candidates collected from one valid value.
const MAX_MISSES: usize = 512;

/// Collects single-change near misses of a valid value.
struct Misses<'a> {
    generator: Generator<'a>,
    found: Vec<(String, Gen)>,
}

impl Misses<'_> {
    /// Adds `root` with the node at `path` changed by `change`.
    fn push(&mut self, root: &Gen, path: &[Seg], what: String, change: impl FnOnce(&mut Gen)) {
        if self.found.len() >= MAX_MISSES {
            return;
        }
        let mut edited = root.clone();
        if let Some(node) = edited.at_mut(path) {
            change(node);
            let label = if path.is_empty() {
                what
            } else {
                format!("{what} at {}", pointer(path))
            };
            self.found.push((label, edited));
        }
    }

    /// Near misses of `node` (at `path` in `root`) against `schema`, then of
    /// its members or items.
    fn walk(&mut self, root: &Gen, schema: &Value, node: &Gen, path: &mut Vec<Seg>) {
        if path.len() > 64 || self.found.len() >= MAX_MISSES {
            return;
        }
        let Some(m) = self.generator.flatten(schema, 0) else {
            return;
        };
        self.type_misses(root, &m, node, path);
        self.enum_misses(root, &m, path);
        match node {
            Gen::Str(s) => self.string_misses(root, &m, s, path),
            Gen::Num(n) => self.number_misses(root, &m, n, path),
            Gen::Obj(members) => self.object_misses(root, &m, members, path),
            Gen::Arr(items) => self.array_misses(root, &m, items, path),
            Gen::Null | Gen::Bool(_) => {}
        }
    }

    fn type_misses(&mut self, root: &Gen, m: &Map<String, Value>, node: &Gen, path: &[Seg]) {
        if !m.contains_key("type") {
            return;
        }
        let allowed = allowed_kinds(m);
        let candidates = [
            Gen::Str("x".into()),
            Gen::Num("7".into()),
            Gen::Obj(Vec::new()),
            Gen::Arr(Vec::new()),
            Gen::Bool(true),
            Gen::Null,
        ];
        let wrong = candidates
            .into_iter()
            .find(|c| !allowed.iter().any(|a| c.kind().fits(*a)));
        if let Some(wrong) = wrong {
            let names: Vec<&str> = allowed.iter().map(|k| k.name()).collect();
            let what = format!("{} instead of {}", wrong.kind().name(), names.join(" or "));
            self.push(root, path, what, |n| *n = wrong);
        }
        let integral_only = allowed.contains(&Kind::Integer) && !allowed.contains(&Kind::Number);
        if integral_only && matches!(node, Gen::Num(_)) {
            let what = "a fraction where an integer is wanted".to_owned();
            self.push(root, path, what, |n| *n = Gen::Num("1.5".into()));
        }
    }

    fn enum_misses(&mut self, root: &Gen, m: &Map<String, Value>, path: &[Seg]) {
        let outsider = |listed: &[Value]| {
            [
                Value::from("zz-not-listed"),
                Value::from(987_654_321),
                Value::Null,
            ]
            .into_iter()
            .find(|c| !listed.contains(c))
        };
        if let Some(Value::Array(listed)) = m.get("enum")
            && let Some(v) = outsider(listed)
        {
            let what = "a value outside the enum".to_owned();
            self.push(root, path, what, |n| *n = Gen::from_value(&v));
        }
        if let Some(c) = m.get("const")
            && let Some(v) = outsider(std::slice::from_ref(c))
        {
            let what = "a value other than the const".to_owned();
            self.push(root, path, what, |n| *n = Gen::from_value(&v));
        }
    }

    fn string_misses(&mut self, root: &Gen, m: &Map<String, Value>, s: &str, path: &[Seg]) {
        let len = s.chars().count();
        if let Some(min) = usize_kw(m, "minLength").filter(|n| *n > 0 && *n <= len) {
            let short: String = s.chars().take(min - 1).collect();
            let what = format!("a string of {} characters (minLength {min})", min - 1);
            self.push(root, path, what, |n| *n = Gen::Str(short));
        }
        if let Some(max) = usize_kw(m, "maxLength").filter(|n| *n >= len && *n < 100_000) {
            let long: String = s
                .chars()
                .chain(std::iter::repeat('x'))
                .take(max + 1)
                .collect();
            let what = format!("a string of {} characters (maxLength {max})", max + 1);
            self.push(root, path, what, |n| *n = Gen::Str(long));
        }
        if m.get("pattern").is_some_and(Value::is_string) {
            for other in ["", "!", " ~ ", "\u{1}"] {
                let what = "a string not matching the pattern".to_owned();
                self.push(root, path, what, |n| *n = Gen::Str(other.into()));
            }
        }
    }

    fn number_misses(&mut self, root: &Gen, m: &Map<String, Value>, n: &str, path: &[Seg]) {
        let b = Bounds::of(m);
        if let Some(lo) = b.lo
            && let Some(text) = number_text(if b.lo_excl { lo } else { lo - 1.0 })
        {
            let what = format!("{text}, below the minimum {lo}");
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
        if let Some(hi) = b.hi
            && let Some(text) = number_text(if b.hi_excl { hi } else { hi + 1.0 })
        {
            let what = format!("{text}, above the maximum {hi}");
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
        if let Some(step) = Decimal::of(m).filter(|d| d.scale == 0 && d.mantissa > 1)
            && let Ok(v) = n.parse::<i128>()
        {
            let text = (v + 1).to_string();
            let what = format!("{text}, not a multiple of {}", step.mantissa);
            self.push(root, path, what, |node| *node = Gen::Num(text));
        }
    }

    fn object_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        members: &[(String, Gen)],
        path: &mut Vec<Seg>,
    ) {
        let props = m.get("properties").and_then(Value::as_object);
        let extra_schema = m.get("additionalProperties");
        for key in strings(m.get("required")) {
            if members.iter().any(|(k, _)| *k == key) {
                let what = format!("required property {key:?} removed");
                self.push(root, path, what, |n| {
                    if let Gen::Obj(ms) = n {
                        ms.retain(|(k, _)| *k != key);
                    }
                });
            }
        }
        self.extra_property_misses(root, m, members, path);
        for (key, value) in members {
            let declared = props.and_then(|p| p.get(key));
            let sub = match (declared, extra_schema) {
                (Some(s), _) => s,
                (None, Some(s)) if s.is_object() && !m.contains_key("patternProperties") => s,
                _ => continue,
            };
            path.push(Seg::Key(key.clone()));
            self.walk(root, sub, value, path);
            path.pop();
        }
    }

    /// An extra property where none (or only of another type) may be, and
    /// one property too many under `maxProperties`.
    fn extra_property_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        members: &[(String, Gen)],
        path: &[Seg],
    ) {
        let props = m.get("properties").and_then(Value::as_object);
        let taken = |k: &str| {
            props.is_some_and(|p| p.contains_key(k)) || members.iter().any(|(m, _)| m == k)
        };
        let key = self.generator.extra_key(taken);
        let add = |key: String, value: Gen| {
            move |n: &mut Gen| {
                if let Gen::Obj(ms) = n {
                    ms.push((key, value));
                }
            }
        };
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {
                let what = format!("extra property {key:?} (additionalProperties is false)");
                self.push(root, path, what, add(key.clone(), Gen::Str("x".into())));
            }
            Some(Value::Object(extra)) if extra.contains_key("type") => {
                let allowed = allowed_kinds(extra);
                let wrong = [Gen::Str("x".into()), Gen::Num("7".into()), Gen::Null]
                    .into_iter()
                    .find(|c| !allowed.iter().any(|a| c.kind().fits(*a)));
                if let Some(wrong) = wrong {
                    let what =
                        format!("extra property {key:?} of a type additionalProperties refuses");
                    self.push(root, path, what, add(key.clone(), wrong));
                }
            }
            _ => {}
        }
        let closed = matches!(m.get("additionalProperties"), Some(Value::Bool(false)));
        if let Some(max) = usize_kw(m, "maxProperties").filter(|x| *x == members.len() && !closed) {
            let depth = self.generator.fuzz.max_depth;
            let value = self
                .generator
                .extra_value(m.get("additionalProperties"), depth)
                .unwrap_or(Gen::Null);
            let what = format!("{} properties (maxProperties {max})", max + 1);
            self.push(root, path, what, add(key, value));
        }
    }

    fn array_misses(
        &mut self,
        root: &Gen,
        m: &Map<String, Value>,
        items: &[Gen],
        path: &mut Vec<Seg>,
    ) {
        let (prefix, rest) = item_schemas(m);
        if let Some(min) = usize_kw(m, "minItems").filter(|n| *n > 0 && *n <= items.len()) {
            let what = format!("{} items (minItems {min})", min - 1);
            self.push(root, path, what, |n| {
                if let Gen::Arr(xs) = n {
                    xs.truncate(min - 1);
                }
            });
        }
        if let Some(max) = usize_kw(m, "maxItems").filter(|n| *n >= items.len() && *n < 10_000) {
            let mut longer = items.to_vec();
            while longer.len() <= max {
                let schema = prefix.get(longer.len()).copied().or(rest);
                let depth = self.generator.fuzz.max_depth;
                let fresh = match schema {
                    Some(s) => self.generator.value(s, depth),
                    None => self.generator.any(depth),
                };
                let Some(item) = fresh.or_else(|| longer.last().cloned()) else {
                    break;
                };
                longer.push(item);
            }
            let what = format!("{} items (maxItems {max})", max + 1);
            self.push(root, path, what, |n| *n = Gen::Arr(longer));
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true))
            && let Some(first) = items.first().cloned()
        {
            let room = usize_kw(m, "maxItems").is_none_or(|max| items.len() < max);
            let what = "a repeated item (uniqueItems)".to_owned();
            self.push(root, path, what, |n| {
                if let Gen::Arr(xs) = n {
                    if room {
                        xs.push(first);
                    } else if let Some(last) = xs.last_mut() {
                        *last = first;
                    }
                }
            });
        }
        for (i, item) in items.iter().enumerate() {
            let Some(schema) = prefix.get(i).copied().or(rest) else {
                continue;
            };
            path.push(Seg::Index(i));
            self.walk(root, schema, item, path);
            path.pop();
        }
    }
}

/// Strings from simple regular expressions: literals, `.`, classes (with
/// ranges and negation), `\d \w \s` and their negations, escapes, groups
/// (plain, non-capturing, named), alternation, `* + ? {n} {n,} {n,m}` (lazy
/// or not), anchors `^ $ \b \A \z`. Anything else (look-around,
/// back-references, Unicode classes, flags) is not generated from.
mod pattern {
    use super::Rng;

    /// A parsed pattern.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(super) enum Node {
        /// Matches the empty string (anchors).
        Empty,
        Lit(char),
        /// One character of these ranges (or, negated, outside them).
        Set {
            ranges: Vec<(char, char)>,
            negated: bool,
        },
        /// Any character but a newline.
        Any,
        /// One of several sequences.
        Alt(Vec<Vec<Node>>),
        Repeat {
            node: Box<Node>,
            min: u32,
            max: Option<u32>,
        },
    }

    const DIGIT: &[(char, char)] = &[('0', '9')];
    const WORD: &[(char, char)] = &[('a', 'z'), ('A', 'Z'), ('0', '9'), ('_', '_')];
    const SPACE: &[(char, char)] = &[(' ', ' '), ('\t', '\r')];
    /// Longest counted repetition generated from.
    const MAX_COUNT: u32 = 10_000;

    /// What an escape stands for.
    enum Esc {
        Char(char),
        Set(&'static [(char, char)], bool),
        Empty,
    }

    /// Parses `p`; `None` if it uses anything outside the subset.
    pub(super) fn parse(p: &str) -> Option<Node> {
        let mut parser = Parser {
            chars: p.chars().collect(),
            pos: 0,
            depth: 0,
        };
        let node = parser.alternation()?;
        (parser.pos == parser.chars.len()).then_some(node)
    }

    /// A string matching `node` (`None` if a negated class has no printable
    /// ASCII member).
    pub(super) fn generate(node: &Node, rng: &mut Rng) -> Option<String> {
        let mut out = String::new();
        emit(node, rng, &mut out)?;
        Some(out)
    }

    struct Parser {
        chars: Vec<char>,
        pos: usize,
        depth: usize,
    }

    impl Parser {
        fn peek(&self) -> Option<char> {
            self.chars.get(self.pos).copied()
        }

        fn bump(&mut self) -> Option<char> {
            let c = self.peek()?;
            self.pos += 1;
            Some(c)
        }

        fn eat(&mut self, c: char) -> bool {
            if self.peek() == Some(c) {
                self.pos += 1;
                true
            } else {
                false
            }
        }

        fn alternation(&mut self) -> Option<Node> {
            self.depth += 1;
            if self.depth > 32 {
                return None;
            }
            let mut branches = vec![self.sequence()?];
            while self.eat('|') {
                branches.push(self.sequence()?);
            }
            self.depth -= 1;
            Some(Node::Alt(branches))
        }

        fn sequence(&mut self) -> Option<Vec<Node>> {
            let mut seq = Vec::new();
            while let Some(c) = self.peek() {
                if c == '|' || c == ')' {
                    break;
                }
                let atom = self.atom()?;
                seq.push(self.quantified(atom)?);
            }
            Some(seq)
        }

        fn atom(&mut self) -> Option<Node> {
            match self.bump()? {
                '(' => self.group(),
                '[' => self.class(),
                '.' => Some(Node::Any),
                '^' | '$' => Some(Node::Empty),
                '\\' => Some(match self.escape(false)? {
                    Esc::Char(c) => Node::Lit(c),
                    Esc::Set(ranges, negated) => Node::Set {
                        ranges: ranges.to_vec(),
                        negated,
                    },
                    Esc::Empty => Node::Empty,
                }),
                '*' | '+' | '?' | '{' | ')' => None,
                c => Some(Node::Lit(c)),
            }
        }

        fn group(&mut self) -> Option<Node> {
            if self.eat('?') {
                match self.bump()? {
                    ':' => {}
                    'P' if self.eat('<') => self.skip_name()?,
                    '<' if !matches!(self.peek(), Some('=' | '!')) => self.skip_name()?,
                    _ => return None,
                }
            }
            let inner = self.alternation()?;
            self.eat(')').then_some(inner)
        }

        fn skip_name(&mut self) -> Option<()> {
            while self.bump()? != '>' {}
            Some(())
        }

        fn escape(&mut self, in_class: bool) -> Option<Esc> {
            let c = self.bump()?;
            Some(match c {
                'd' => Esc::Set(DIGIT, false),
                'D' => Esc::Set(DIGIT, true),
                'w' => Esc::Set(WORD, false),
                'W' => Esc::Set(WORD, true),
                's' => Esc::Set(SPACE, false),
                'S' => Esc::Set(SPACE, true),
                'n' => Esc::Char('\n'),
                't' => Esc::Char('\t'),
                'r' => Esc::Char('\r'),
                'f' => Esc::Char('\u{c}'),
                'v' => Esc::Char('\u{b}'),
                'x' => Esc::Char(self.hex(2)?),
                'u' => Esc::Char(self.hex(4)?),
                'b' | 'B' | 'A' | 'z' if !in_class => Esc::Empty,
                c if c.is_ascii_alphanumeric() => return None,
                c => Esc::Char(c),
            })
        }

        /// `HH…` (`n` digits) or `{H…}`.
        fn hex(&mut self, n: usize) -> Option<char> {
            let mut text = String::new();
            if self.eat('{') {
                loop {
                    match self.bump()? {
                        '}' => break,
                        c => text.push(c),
                    }
                }
            } else {
                for _ in 0..n {
                    text.push(self.bump()?);
                }
            }
            char::from_u32(u32::from_str_radix(&text, 16).ok()?)
        }

        fn class(&mut self) -> Option<Node> {
            let negated = self.eat('^');
            let mut ranges = Vec::new();
            let mut first = true;
            loop {
                let c = self.bump()?;
                if c == ']' && !first {
                    break;
                }
                first = false;
                if c == '[' {
                    return None;
                }
                let lo = match self.class_char(c)? {
                    Esc::Char(ch) => ch,
                    Esc::Set(set, false) => {
                        ranges.extend_from_slice(set);
                        continue;
                    }
                    _ => return None,
                };
                let is_range = self.peek() == Some('-')
                    && self.chars.get(self.pos + 1).is_some_and(|n| *n != ']');
                if is_range {
                    self.pos += 1;
                    let c = self.bump()?;
                    let Esc::Char(hi) = self.class_char(c)? else {
                        return None;
                    };
                    if hi < lo {
                        return None;
                    }
                    ranges.push((lo, hi));
                } else {
                    ranges.push((lo, lo));
                }
            }
            Some(Node::Set { ranges, negated })
        }

        fn class_char(&mut self, c: char) -> Option<Esc> {
            if c == '\\' {
                self.escape(true)
            } else {
                Some(Esc::Char(c))
            }
        }

        fn quantified(&mut self, atom: Node) -> Option<Node> {
            let (min, max) = match self.peek() {
                Some('*') => (0, None),
                Some('+') => (1, None),
                Some('?') => (0, Some(1)),
                Some('{') => return self.counted(atom),
                _ => return Some(atom),
            };
            self.pos += 1;
            self.eat('?');
            Some(repeat(atom, min, max))
        }

        /// `{n}`, `{n,}` or `{n,m}` after an atom.
        fn counted(&mut self, atom: Node) -> Option<Node> {
            self.pos += 1;
            let mut text = String::new();
            loop {
                match self.bump()? {
                    '}' => break,
                    c => text.push(c),
                }
            }
            let number = |s: &str| s.trim().parse::<u32>().ok().filter(|n| *n <= MAX_COUNT);
            let (min, max) = match text.split_once(',') {
                None => {
                    let n = number(&text)?;
                    (n, Some(n))
                }
                Some((lo, "")) => (number(lo)?, None),
                Some((lo, hi)) => (number(lo)?, Some(number(hi)?)),
            };
            if max.is_some_and(|m| m < min) {
                return None;
            }
            self.eat('?');
            Some(repeat(atom, min, max))
        }
    }

    fn repeat(node: Node, min: u32, max: Option<u32>) -> Node {
        Node::Repeat {
            node: Box::new(node),
            min,
            max,
        }
    }

    fn emit(node: &Node, rng: &mut Rng, out: &mut String) -> Option<()> {
        match node {
            Node::Empty => {}
            Node::Lit(c) => out.push(*c),
            Node::Any => out.push(printable(rng)),
            Node::Set { ranges, negated } => out.push(pick_char(ranges, *negated, rng)?),
            Node::Alt(branches) => {
                for n in rng.pick(branches)? {
                    emit(n, rng, out)?;
                }
            }
            Node::Repeat { node, min, max } => {
                let extra = max.map_or(4, |m| m.saturating_sub(*min).min(8));
                let times = u64::from(*min) + rng.below(u64::from(extra) + 1);
                for _ in 0..times {
                    emit(node, rng, out)?;
                }
            }
        }
        Some(())
    }

    fn printable(rng: &mut Rng) -> char {
        char::from_u32(0x20 + u32::try_from(rng.below(95)).unwrap_or(0)).unwrap_or('a')
    }

    fn pick_char(ranges: &[(char, char)], negated: bool, rng: &mut Rng) -> Option<char> {
        let inside = |c: char| ranges.iter().any(|(lo, hi)| *lo <= c && c <= *hi);
        if negated {
            return (0..64).map(|_| printable(rng)).find(|c| !inside(*c));
        }
        let sizes: Vec<u64> = ranges
            .iter()
            .map(|(lo, hi)| u64::from(*hi as u32 - *lo as u32) + 1)
            .collect();
        for _ in 0..8 {
            let mut at = rng.below(sizes.iter().sum());
            for ((lo, _), size) in ranges.iter().zip(&sizes) {
                if at < *size {
                    let code = (*lo as u32).saturating_add(u32::try_from(at).unwrap_or(0));
                    match char::from_u32(code) {
                        Some(c) => return Some(c),
                        None => break, // a surrogate: draw again
                    }
                }
                at -= size;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SideEffect;

    fn spec(schema: &str) -> ToolSpec {
        ToolSpec::new("t", "", SideEffect::ReadOnly)
            .with_schema_str(schema)
            .expect("schema is JSON")
    }

    fn assert_sound(schema: &str) -> (Vec<Canonical>, Vec<Invalid>) {
        let s = spec(schema);
        let fuzz = Fuzz::default();
        let valid = fuzz.valid(&s).expect("valid values");
        assert_eq!(valid.len(), fuzz.count);
        for v in &valid {
            assert_eq!(check_args(&s, v.as_bytes()), Ok(()), "{schema}: {v}");
        }
        let invalid = fuzz.invalid(&s).expect("invalid values");
        for i in &invalid {
            assert!(check_args(&s, &i.bytes).is_err(), "{schema}: {i}");
        }
        assert_eq!(fuzz.check(std::slice::from_ref(&s)), Ok(()));
        (valid, invalid)
    }

    fn labels(invalid: &[Invalid]) -> Vec<&str> {
        invalid.iter().map(|i| i.label.as_str()).collect()
    }

    #[test]
    fn boundary_cases_come_first_and_are_refused_by_the_boundary_check() {
        let invalid = Fuzz::default()
            .invalid(&spec(r#"{"type":"object"}"#))
            .expect("compiles");
        let cases = boundary_cases();
        assert_eq!(invalid.get(..cases.len()), Some(cases.as_slice()));
        for case in &cases {
            assert!(crate::json::check_boundary(&case.bytes).is_err(), "{case}");
        }
        let number = cases.get(4).expect("eight cases");
        assert_eq!(number.bytes.len(), "{\"a\":}".len() + 10_001);
    }

    #[test]
    fn common_keywords_give_sound_values() {
        let schemas = [
            r#"{"type":"object","properties":{"path":{"type":"string","minLength":1,"maxLength":12},"n":{"type":"integer","minimum":-3,"exclusiveMaximum":7}},"required":["path"],"additionalProperties":false}"#,
            r#"{"type":"object","properties":{"mode":{"enum":["fast","safe",3]},"v":{"const":"x"},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":3,"uniqueItems":true}},"required":["mode","tags"]}"#,
            r#"{"type":"object","properties":{"x":{"type":["number","null"],"minimum":0.5,"maximum":2.25},"k":{"type":"integer","multipleOf":5,"minimum":1},"p":{"type":"number","multipleOf":0.25}},"required":["x","k","p"]}"#,
            r#"{"type":"object","additionalProperties":{"type":"integer"},"minProperties":2,"maxProperties":3}"#,
            r#"{"type":"object","properties":{"when":{"type":"string","format":"date-time"},"to":{"type":"string","format":"email"},"url":{"type":"string","format":"uri"}},"required":["when","to","url"]}"#,
            r#"{"type":"object","properties":{"n":{"type":"number","exclusiveMinimum":0}},"required":["n"]}"#,
            "true",
            "{}",
        ];
        for schema in schemas {
            assert_sound(schema);
        }
    }

    #[test]
    fn near_misses_name_each_single_change() {
        let (_, invalid) = assert_sound(
            r#"{"type":"object","properties":{"path":{"type":"string","minLength":2,"maxLength":5},"n":{"type":"integer","minimum":1,"maximum":9,"multipleOf":3},"mode":{"enum":["a","b"]},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2,"uniqueItems":true}},"required":["path","n","mode","tags"],"additionalProperties":false}"#,
        );
        let got = labels(&invalid);
        for want in [
            r#"required property "path" removed"#,
            r#"required property "tags" removed"#,
            "integer instead of string at /path",
            "string instead of integer at /n",
            "a fraction where an integer is wanted at /n",
            "a string of 1 characters (minLength 2) at /path",
            "a string of 6 characters (maxLength 5) at /path",
            "0, below the minimum 1 at /n",
            "10, above the maximum 9 at /n",
            "a value outside the enum at /mode",
            "0 items (minItems 1) at /tags",
            "3 items (maxItems 2) at /tags",
            "string instead of array at /tags",
        ] {
            assert!(got.contains(&want), "missing {want:?} in {got:#?}");
        }
        assert!(
            got.iter().any(|l| l.starts_with("extra property")),
            "{got:#?}"
        );
        assert!(
            got.iter().any(|l| l.contains("not a multiple of 3")),
            "{got:#?}"
        );
        let unique: BTreeSet<&str> = got.iter().copied().collect();
        assert_eq!(unique.len(), got.len(), "labels are unique");
    }

    #[test]
    fn refs_all_of_and_any_of_are_followed() {
        let (valid, invalid) = assert_sound(
            r##"{"$defs":{"id":{"type":"string","pattern":"^[a-f0-9]{8}$"},"pos":{"type":"integer","minimum":1}},"type":"object","properties":{"id":{"$ref":"#/$defs/id"},"page":{"allOf":[{"$ref":"#/$defs/pos"},{"maximum":50}]},"who":{"anyOf":[{"type":"string","maxLength":3},{"type":"integer"}]},"one":{"oneOf":[{"type":"boolean"},{"type":"null"}]}},"required":["id","page","who","one"]}"##,
        );
        for v in &valid {
            let id = v.get("id").expect("id");
            assert_eq!(id.as_str().len(), 10, "{id}");
        }
        assert!(labels(&invalid).contains(&"a string not matching the pattern at /id"));
    }

    #[test]
    fn patterns_in_the_subset_are_generated_and_others_fall_back() {
        for p in [
            r"^[A-Z][a-z]{2,6}$",
            r"^\d{3}-\d{4}$",
            r"^(feat|fix|docs)(\([a-z]+\))?: .{1,20}$",
            r"^[^\s/]+/[\w.-]+$",
            r"^v\d+\.\d+\.\d+(-rc\.\d+)?$",
            r"^(?:[a-z0-9-]+\.)+[a-z]{2,}$",
            r"^\u0041\x42[\u{430}-\u{44f}]?$",
            r"ab",
        ] {
            let re = pattern::parse(p).unwrap_or_else(|| panic!("{p} is in the subset"));
            let mut rng = Rng(7);
            assert!(pattern::generate(&re, &mut rng).is_some(), "{p}");
            let schema = format!(
                r#"{{"type":"object","properties":{{"s":{{"type":"string","pattern":{}}}}},"required":["s"]}}"#,
                serde_json::Value::from(p)
            );
            assert_sound(&schema);
        }
        for p in [r"^(?=a)a$", r"(a)\1", r"\p{L}+", r"(?i)abc"] {
            assert!(pattern::parse(p).is_none(), "{p} is outside the subset");
        }
        // Outside the subset, but random strings find a match.
        assert_sound(
            r#"{"type":"object","properties":{"s":{"type":"string","pattern":"(?i)A"}},"required":["s"]}"#,
        );
    }

    #[test]
    fn an_unsatisfiable_schema_is_an_error_naming_the_tool() {
        let fuzz = Fuzz::default();
        for schema in [
            "false",
            r#"{"type":"object","properties":{"s":{"type":"string","pattern":"^a$","maxLength":0}},"required":["s"]}"#,
            r#"{"type":"integer","minimum":5,"maximum":4}"#,
        ] {
            let err = fuzz.valid(&spec(schema)).expect_err(schema);
            assert!(matches!(err, FuzzError::NoValidValue { ref tool, .. } if tool == "t"));
            let problems = fuzz.check(&[spec(schema)]).expect_err(schema);
            assert_eq!(problems, vec![FuzzProblem::Generator(err)]);
        }
        // Required recursion never ends: the depth cap stops it, even when
        // `max_depth` is huge.
        let endless =
            spec(r##"{"type":"object","properties":{"n":{"$ref":"#"}},"required":["n"]}"##);
        let deep = Fuzz {
            max_depth: 100_000,
            count: 2,
            ..Fuzz::default()
        };
        assert!(matches!(
            deep.valid(&endless),
            Err(FuzzError::NoValidValue { .. })
        ));
        let invalid = fuzz.invalid(&spec("false")).expect("compiles");
        assert_eq!(invalid, boundary_cases());
        let bad = spec(r#"{"type":"object","properties":{"s":{"pattern":"("}}}"#);
        assert!(matches!(fuzz.valid(&bad), Err(FuzzError::Schema { .. })));
    }

    #[test]
    fn pattern_properties_name_extra_members() {
        let (valid, invalid) = assert_sound(
            r#"{"type":"object","patternProperties":{"^x-[a-z]{1,4}$":{"type":"integer"}},"additionalProperties":false,"minProperties":1}"#,
        );
        assert!(
            valid.iter().all(|v| v.as_str().starts_with(r#"{"x-"#)),
            "{valid:?}"
        );
        assert!(
            labels(&invalid)
                .iter()
                .any(|l| l.starts_with("extra property"))
        );
    }

    #[test]
    fn same_seed_same_values_other_seed_other_values() {
        let s = spec(
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["a","b"]}"#,
        );
        let one = Fuzz::default();
        assert_eq!(one.valid(&s), one.valid(&s));
        assert_eq!(one.invalid(&s), one.invalid(&s));
        let two = Fuzz {
            seed: 2,
            ..Fuzz::default()
        };
        assert_ne!(one.valid(&s), two.valid(&s));
    }

    #[test]
    fn small_value_spaces_repeat_values_rather_than_fail() {
        let (valid, _) = assert_sound(r#"{"type":"object","additionalProperties":false}"#);
        assert!(valid.iter().all(|v| v.as_str() == "{}"));
        let (valid, _) = assert_sound(r#"{"enum":[{"a":1},{"b":2}]}"#);
        let distinct: BTreeSet<&str> = valid.iter().map(Canonical::as_str).collect();
        assert_eq!(distinct.len(), 2);
    }

    #[test]
    fn limits_bound_strings_arrays_and_depth() {
        let fuzz = Fuzz {
            max_items: 2,
            max_length: 3,
            max_depth: 2,
            ..Fuzz::default()
        };
        let s = spec("true");
        for v in fuzz.valid(&s).expect("values") {
            let depth = v
                .as_str()
                .bytes()
                .filter(|b| *b == b'[' || *b == b'{')
                .count();
            assert!(depth <= 8, "{v}");
        }
        let strings = spec(r#"{"type":"array","items":{"type":"string"}}"#);
        for v in fuzz.valid(&strings).expect("values") {
            let items = v.to_value();
            let items = items.as_array().expect("array");
            assert!(items.len() <= 2, "{v}");
            assert!(
                items
                    .iter()
                    .all(|s| s.as_str().is_some_and(|s| s.chars().count() <= 3))
            );
        }
    }

    #[test]
    fn required_parts_nest_beyond_max_depth() {
        let deep = (0..100).fold(String::from(r#"{"type":"integer"}"#), |inner, _| {
            format!(r#"{{"type":"object","properties":{{"a":{inner}}},"required":["a"]}}"#)
        });
        let (valid, _) = assert_sound(&deep);
        assert!(
            valid
                .iter()
                .all(|v| v.as_str().matches(r#""a":"#).count() == 100)
        );
    }

    #[test]
    fn a_null_value_must_pass_both_readings() {
        // check_args reads `null` as `{}`; the loop checks it as `null`.
        let (valid, _) = assert_sound(r#"{"type":["object","null"],"maxProperties":0}"#);
        assert!(valid.iter().any(Canonical::is_null));
        let only_null = spec(r#"{"type":"null"}"#);
        assert!(Fuzz::default().valid(&only_null).is_err());
    }

    #[test]
    fn decimals_and_multiples_are_written_exactly() {
        assert_eq!(decimal_text(-5, 2), "-0.05");
        assert_eq!(decimal_text(1200, 2), "12.00");
        assert_eq!(decimal_text(7, 0), "7");
        let d = Decimal::parse("2.5e-3").expect("decimal");
        assert_eq!((d.mantissa, d.scale), (25, 4));
        let d = Decimal::parse("1e2").expect("decimal");
        assert_eq!((d.mantissa, d.scale), (100, 0));
        assert!(Decimal::parse("-1").is_none());
        assert_eq!((div_floor(-7, 2), div_ceil(-7, 2)), (-4, -3));
        assert_eq!((div_floor(7, 2), div_ceil(7, 2)), (3, 4));
        assert_eq!((gcd(15, 10), gcd(25, 100), gcd(7, 1)), (5, 25, 1));
        let (valid, _) =
            assert_sound(r#"{"type":"integer","multipleOf":1.5,"minimum":-30,"maximum":30}"#);
        assert!(valid.iter().any(|v| v.as_str() != "0"));
        assert!(
            valid
                .iter()
                .all(|v| v.as_str().parse::<i64>().is_ok_and(|n| n % 3 == 0))
        );
    }
}
