//! Tool schemas as the Messages API takes them: the `input_schema` shape,
//! and the opt-in strict subset (design §23).
//!
//! The walk is structural: it follows only the keywords whose values are
//! schemas, so a property *named* like a keyword (`"pattern"`,
//! `"maximum"`) is kept, and values such as `enum`, `const` and `default`
//! are copied byte for byte (number literals included). The runtime keeps
//! validating arguments against the full schema, so nothing the subset
//! drops is lost.

use std::collections::{BTreeMap, HashMap};

use agentrt::Canonical;
use serde_json::Value;
use serde_json::value::RawValue;

/// Keywords strict tool use refuses; they are dropped.
const DROPPED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "pattern",
    "uniqueItems",
];

/// Keywords whose value maps names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
];

/// Keywords whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf", "prefixItems"];

/// Keywords whose value is one schema.
const SCHEMA_VALUED: &[&str] = &[
    "items",
    "additionalProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "additionalItems",
    "unevaluatedProperties",
    "unevaluatedItems",
];

/// Why strict mode cannot express a schema. Refused before anything is
/// sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StrictError {
    /// `oneOf` somewhere in the schema.
    #[error("oneOf at {at}")]
    OneOf {
        /// Where, as a JSON pointer from `#`.
        at: String,
    },
    /// An `additionalProperties` that is a schema rather than a boolean.
    #[error("schema-valued additionalProperties at {at}")]
    SchemaValuedAdditionalProperties {
        /// Where, as a JSON pointer from `#`.
        at: String,
    },
    /// A `$ref` to the root schema.
    #[error("a $ref to the root schema")]
    RootRef,
    /// A `$ref` that leads back to itself, directly or through others.
    #[error("a recursive $ref through {via}")]
    RecursiveRef {
        /// The reference found on the cycle.
        via: String,
    },
    /// The reduced schema could not be encoded (not expected).
    #[error("cannot encode the reduced schema: {detail}")]
    Encode {
        /// What went wrong.
        detail: String,
    },
}

type Obj = BTreeMap<String, Box<RawValue>>;

fn raw(text: &str) -> Result<Box<RawValue>, StrictError> {
    RawValue::from_string(text.to_owned()).map_err(encode)
}

fn encode(e: serde_json::Error) -> StrictError {
    StrictError::Encode {
        detail: e.to_string(),
    }
}

fn to_raw<T: serde::Serialize>(value: &T) -> Result<Box<RawValue>, StrictError> {
    serde_json::value::to_raw_value(value).map_err(encode)
}

fn as_object(value: &RawValue) -> Option<Obj> {
    if value.get().trim_start().starts_with('{') {
        serde_json::from_str(value.get()).ok()
    } else {
        None
    }
}

fn as_array(value: &RawValue) -> Option<Vec<Box<RawValue>>> {
    if value.get().trim_start().starts_with('[') {
        serde_json::from_str(value.get()).ok()
    } else {
        None
    }
}

fn canonical(value: &RawValue) -> Result<Canonical, StrictError> {
    Canonical::parse_str(value.get()).map_err(|e| StrictError::Encode {
        detail: e.to_string(),
    })
}

fn from_canonical(schema: &Canonical) -> Result<Box<RawValue>, StrictError> {
    raw(schema.as_str())
}

/// The schema as the Messages API's `input_schema` takes it:
/// `properties` (default `{}`), `required` (when a non-empty list),
/// `type: "object"`, and every other top-level keyword as is. This is what
/// the adapter sends without strict mode.
///
/// ```
/// use agentrt::Canonical;
/// use agentrt_provider::anthropic::strict::input_schema;
///
/// let s = Canonical::parse_str(r#"{"type":"object","required":[],"$defs":{"a":{"maximum":1.50}}}"#)?;
/// assert_eq!(
///     input_schema(&s)?.as_str(),
///     r#"{"$defs":{"a":{"maximum":1.50}},"properties":{},"type":"object"}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`StrictError::Encode`] only if the result cannot be encoded.
pub fn input_schema(schema: &Canonical) -> Result<Canonical, StrictError> {
    let shaped = shape(&from_canonical(schema)?, false)?;
    canonical(&shaped)
}

/// The schema reduced for strict tool use, in `input_schema` shape with
/// top-level `additionalProperties: false`; refuses a schema strict mode
/// cannot express (`oneOf` anywhere, a schema-valued
/// `additionalProperties`, a recursive or root `$ref`).
///
/// ```
/// use agentrt::Canonical;
/// use agentrt_provider::anthropic::strict::{StrictError, strict_input_schema};
///
/// let s = Canonical::parse_str(r#"{"type":"object","properties":{"pattern":{"type":"string","pattern":"^a","maxLength":9}},
///     "required":["pattern"]}"#)?;
/// assert_eq!(
///     strict_input_schema(&s)?.as_str(),
///     r#"{"additionalProperties":false,"properties":{"pattern":{"type":"string"}},"required":["pattern"],"type":"object"}"#
/// );
/// let recursive = Canonical::parse_str(r##"{"type":"object","properties":{"next":{"$ref":"#"}}}"##)?;
/// assert_eq!(strict_input_schema(&recursive), Err(StrictError::RootRef));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// A [`StrictError`] naming what strict mode cannot express.
pub fn strict_input_schema(schema: &Canonical) -> Result<Canonical, StrictError> {
    let root = from_canonical(schema)?;
    expressible(&root, "#")?;
    recursive_ref(&schema.to_value())?;
    let reduced = subset(&root)?;
    canonical(&shape(&reduced, true)?)
}

/// The strict-subset walk alone (no refusals, no top-level shaping), for a
/// consumer that shows an operator the schema that was sent: unsupported
/// keywords dropped, `minItems` above 1 dropped, `additionalProperties:
/// false` on every object schema.
///
/// ```
/// use agentrt::Canonical;
/// use agentrt_provider::anthropic::strict::strict_subset;
///
/// let s = Canonical::parse_str(r#"{"type":"array","minItems":2,"items":{"type":["object","null"]}}"#)?;
/// assert_eq!(
///     strict_subset(&s)?.as_str(),
///     r#"{"items":{"additionalProperties":false,"type":["object","null"]},"type":"array"}"#
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// [`StrictError::Encode`] only if the result cannot be encoded.
pub fn strict_subset(schema: &Canonical) -> Result<Canonical, StrictError> {
    canonical(&subset(&from_canonical(schema)?)?)
}

fn shape(schema: &RawValue, strict: bool) -> Result<Box<RawValue>, StrictError> {
    let given = as_object(schema).unwrap_or_default();
    let mut out = Obj::new();
    out.insert(
        "properties".to_owned(),
        match given.get("properties") {
            Some(p) => p.clone(),
            None => raw("{}")?,
        },
    );
    if let Some(required) = given.get("required")
        && as_array(required).is_some_and(|r| !r.is_empty())
    {
        out.insert("required".to_owned(), required.clone());
    }
    out.insert("type".to_owned(), raw("\"object\"")?);
    for (key, value) in given {
        if !matches!(key.as_str(), "type" | "properties" | "required") {
            out.insert(key, value);
        }
    }
    if strict {
        out.insert("additionalProperties".to_owned(), raw("false")?);
    }
    to_raw(&out)
}

fn subset(value: &RawValue) -> Result<Box<RawValue>, StrictError> {
    let Some(given) = as_object(value) else {
        return Ok(value.to_owned());
    };
    let mut out = Obj::new();
    for (key, value) in given {
        let k = key.as_str();
        if DROPPED.contains(&k) {
            continue;
        }
        let kept = if k == "minItems" {
            if serde_json::from_str::<f64>(value.get()).is_ok_and(|n| n > 1.0) {
                continue;
            }
            value
        } else if SCHEMA_MAPS.contains(&k) {
            match as_object(&value) {
                Some(map) => {
                    let mut reduced = Obj::new();
                    for (name, schema) in map {
                        reduced.insert(name, subset(&schema)?);
                    }
                    to_raw(&reduced)?
                }
                None => value,
            }
        } else if SCHEMA_LISTS.contains(&k) {
            match as_array(&value) {
                Some(list) => {
                    let reduced = list
                        .iter()
                        .map(|s| subset(s))
                        .collect::<Result<Vec<_>, _>>()?;
                    to_raw(&reduced)?
                }
                None => subset(&value)?,
            }
        } else if SCHEMA_VALUED.contains(&k) {
            subset(&value)?
        } else {
            value
        };
        out.insert(key, kept);
    }
    if out.get("type").is_some_and(|t| admits_object(t)) {
        out.insert("additionalProperties".to_owned(), raw("false")?);
    }
    to_raw(&out)
}

/// Whether a `type` keyword admits an object, alone or in a list.
fn admits_object(t: &RawValue) -> bool {
    match serde_json::from_str::<Value>(t.get()) {
        Ok(Value::String(s)) => s == "object",
        Ok(Value::Array(items)) => items.iter().any(|i| i.as_str() == Some("object")),
        _ => false,
    }
}

fn expressible(value: &RawValue, at: &str) -> Result<(), StrictError> {
    let Some(given) = as_object(value) else {
        return Ok(());
    };
    for (key, value) in &given {
        let k = key.as_str();
        if k == "oneOf" {
            return Err(StrictError::OneOf { at: at.to_owned() });
        }
        if k == "additionalProperties" {
            if !matches!(value.get().trim(), "true" | "false") {
                return Err(StrictError::SchemaValuedAdditionalProperties { at: at.to_owned() });
            }
        } else if SCHEMA_MAPS.contains(&k) {
            for (name, schema) in as_object(value).unwrap_or_default() {
                expressible(&schema, &format!("{at}/{k}/{}", escape(&name)))?;
            }
        } else if SCHEMA_LISTS.contains(&k) {
            for (i, schema) in as_array(value).unwrap_or_default().iter().enumerate() {
                expressible(schema, &format!("{at}/{k}/{i}"))?;
            }
        } else if SCHEMA_VALUED.contains(&k) {
            expressible(value, &format!("{at}/{k}"))?;
        }
    }
    Ok(())
}

/// A JSON-pointer token for `name`.
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// Every `$ref` string anywhere in `value`.
fn refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => refs(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| refs(v, out)),
        _ => {}
    }
}

/// The local target of a reference (`#/...`), percent-decoded.
fn target<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    root.pointer(&percent_decode(pointer)?)
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Refuses a `$ref` to the root, or one that leads back to itself through
/// the local targets it points at.
fn recursive_ref(root: &Value) -> Result<(), StrictError> {
    #[derive(Clone, Copy, PartialEq)]
    enum State {
        Visiting,
        Done,
    }
    fn visit(
        root: &Value,
        reference: &str,
        state: &mut HashMap<String, State>,
    ) -> Result<(), StrictError> {
        if reference == "#" || reference == "#/" {
            return Err(StrictError::RootRef);
        }
        match state.get(reference) {
            Some(State::Visiting) => {
                return Err(StrictError::RecursiveRef {
                    via: reference.to_owned(),
                });
            }
            Some(State::Done) => return Ok(()),
            None => {}
        }
        state.insert(reference.to_owned(), State::Visiting);
        let mut next = Vec::new();
        if let Some(t) = target(root, reference) {
            refs(t, &mut next);
        }
        for n in next {
            visit(root, &n, state)?;
        }
        state.insert(reference.to_owned(), State::Done);
        Ok(())
    }
    let mut all = Vec::new();
    refs(root, &mut all);
    let mut state = HashMap::new();
    for reference in all {
        visit(root, &reference, &mut state)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(text: &str) -> Canonical {
        Canonical::parse_str(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_walk_is_structural_and_copies_values_verbatim() {
        let s = c(r#"{"type":"object","properties":{
            "minimum":{"type":"integer","minimum":1},
            "items":{"type":"array","minItems":1,"maxItems":3,"items":{"type":"number","multipleOf":0.5}},
            "tags":{"type":"array","minItems":2,"uniqueItems":true},
            "big":{"enum":[9007199254740993, 1.0],"default":{"maximum":5,"type":"object"}},
            "mixed":{"anyOf":[{"type":"string","pattern":"x"},{"type":"object"}]},
            "cond":{"if":{"minLength":2},"then":{"maxLength":3},"else":{"const":"pattern"}}}}"#);
        let got: Value = serde_json::from_str(
            strict_subset(&s)
                .map(Canonical::into_string)
                .unwrap_or_default()
                .as_str(),
        )
        .unwrap_or_default();
        let want: Value = serde_json::from_str(
            r#"{"additionalProperties":false,"type":"object","properties":{
            "minimum":{"type":"integer"},
            "items":{"type":"array","minItems":1,"items":{"type":"number"}},
            "tags":{"type":"array"},
            "big":{"enum":[9007199254740993, 1.0],"default":{"maximum":5,"type":"object"}},
            "mixed":{"anyOf":[{"type":"string"},{"type":"object","additionalProperties":false}]},
            "cond":{"if":{},"then":{},"else":{"const":"pattern"}}}}"#,
        )
        .unwrap_or_default();
        assert_eq!(got, want);
        // Literals survive byte for byte.
        let text = strict_subset(&s)
            .map(Canonical::into_string)
            .unwrap_or_default();
        assert!(
            text.contains("9007199254740993") && text.contains("1.0"),
            "{text}"
        );
    }

    #[test]
    fn refusals() {
        let refused = |text: &str| strict_input_schema(&c(text)).err();
        assert_eq!(
            refused(r#"{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}}}"#),
            Some(StrictError::OneOf {
                at: "#/properties/a".into()
            })
        );
        assert_eq!(
            refused(r#"{"type":"object","additionalProperties":{"type":"string"}}"#),
            Some(StrictError::SchemaValuedAdditionalProperties { at: "#".into() })
        );
        assert_eq!(
            refused(
                r##"{"type":"object","properties":{"n":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"next":{"$ref":"#/$defs/node"}}}}}"##
            ),
            Some(StrictError::RecursiveRef {
                via: "#/$defs/node".into()
            })
        );
        // Through another definition (the cycle is reported where it is
        // first closed).
        assert!(matches!(
            refused(
                r##"{"type":"object","properties":{"a":{"$ref":"#/definitions/a"}},"definitions":{"a":{"$ref":"#/definitions/b"},"b":{"items":{"$ref":"#/definitions/a"}}}}"##
            ),
            Some(StrictError::RecursiveRef { .. })
        ));
        assert_eq!(
            refused(r##"{"type":"object","properties":{"a":{"$ref":"#"}}}"##),
            Some(StrictError::RootRef)
        );
        // A property named oneOf is a name, not a keyword; refs that do not
        // recurse are fine; boolean additionalProperties is fine.
        assert_eq!(
            refused(
                r##"{"type":"object","additionalProperties":true,"properties":{"oneOf":{"$ref":"#/$defs/x"},"y":{"$ref":"#/$defs/x"}},"$defs":{"x":{"type":"string"}}}"##
            ),
            None
        );
    }

    #[test]
    fn shaping_defaults_properties_and_drops_empty_required() {
        let got = input_schema(&c(r#"{"required":["a"],"description":"d"}"#))
            .map(Canonical::into_string)
            .unwrap_or_default();
        assert_eq!(
            got,
            r#"{"description":"d","properties":{},"required":["a"],"type":"object"}"#
        );
        let got = input_schema(&c("true"))
            .map(Canonical::into_string)
            .unwrap_or_default();
        assert_eq!(got, r#"{"properties":{},"type":"object"}"#);
    }
}
