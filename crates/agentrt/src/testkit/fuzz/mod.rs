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

mod generator;
mod misses;
mod numbers;
mod pattern;
mod rng;
#[cfg(test)]
mod tests;
mod values;

use std::collections::BTreeSet;
use std::fmt;

use serde_json::{Map, Value};

use crate::json::{Canonical, MAX_DEPTH, MAX_EXPONENT, MAX_NUMBER_CHARS, write_string};
use crate::model::ToolSpec;
use crate::registry::{ToolSchema, check_args};

use generator::*;
use misses::*;
use numbers::*;
use rng::*;
use values::*;

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
