//! The values generated (before they are written as JSON), the kinds a
//! schema allows, and the schema keywords merged for `allOf`.

use super::*;

/// A generated JSON value whose number literals are kept as written.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Gen {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Gen>),
    Obj(Vec<(String, Gen)>),
}

impl Gen {
    pub(super) fn from_value(v: &Value) -> Gen {
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

    pub(super) fn write(&self, out: &mut String) {
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

    pub(super) fn text(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    pub(super) fn kind(&self) -> Kind {
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
    pub(super) fn at_mut(&mut self, path: &[Seg]) -> Option<&mut Gen> {
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
pub(super) enum Kind {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub(super) const ALL: [Kind; 7] = [
        Kind::Null,
        Kind::Boolean,
        Kind::Integer,
        Kind::Number,
        Kind::String,
        Kind::Array,
        Kind::Object,
    ];

    pub(super) fn parse(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    pub(super) fn name(self) -> &'static str {
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

    pub(super) fn is_scalar(self) -> bool {
        !matches!(self, Kind::Array | Kind::Object)
    }

    /// Whether a value of kind `self` is of the schema type `allowed`.
    pub(super) fn fits(self, allowed: Kind) -> bool {
        self == allowed || (self == Kind::Integer && allowed == Kind::Number)
    }
}

/// The types a schema allows: from `type`, or guessed from its keywords.
pub(super) fn allowed_kinds(m: &Map<String, Value>) -> Vec<Kind> {
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

pub(super) fn inferred_kinds(m: &Map<String, Value>) -> Vec<Kind> {
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

pub(super) fn usize_kw(m: &Map<String, Value>, key: &str) -> Option<usize> {
    m.get(key)
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

pub(super) fn strings(v: Option<&Value>) -> Vec<String> {
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
pub(super) fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
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

pub(super) fn merge_properties(have: &mut Value, value: Value) {
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

pub(super) fn tighten(have: &mut Value, value: Value, pick: fn(f64, f64) -> f64) {
    if let (Some(a), Some(b)) = (have.as_f64(), value.as_f64())
        && pick(a, b) == b
    {
        *have = value;
    }
}

pub(super) fn intersect(have: &mut Value, value: &Value, key: &str) {
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
