//! A tool's arguments as Cedar sees them: the part of its JSON Schema that
//! Cedar's types can hold, as a Cedar schema type, and the arguments cut
//! to that part for a request's context.
//!
//! | JSON Schema | Cedar |
//! |---|---|
//! | `"type": "string"` (or an `enum` of strings) | `String` |
//! | `"type": "integer"` | `Long` |
//! | `"type": "boolean"` | `Bool` |
//! | `"type": "array"` with convertible `items` | `Set` of them |
//! | `"type": "object"` with `properties` | `Record`; a property is required when the schema requires it |
//!
//! Anything else (numbers with fractions, unions of types, `$ref`,
//! `anyOf`) has no Cedar type and is left out: a policy that names it is
//! refused when it is validated, rather than compared with a value of
//! another type.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// The Cedar type of a JSON Schema, or of the part of it Cedar can hold.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shape {
    /// `String`.
    String,
    /// `Long` (an `i64`).
    Long,
    /// `Bool`.
    Bool,
    /// A `Set` of one shape.
    Set(Box<Shape>),
    /// A `Record`: each attribute's shape and whether it is required.
    Record(BTreeMap<String, (Shape, bool)>),
}

/// Deepest schema followed (a deeper part is left out).
const MAX_DEPTH: usize = 32;

impl Shape {
    /// The shape of a tool's argument schema: always a record (an
    /// argument schema that is not an object gives one without
    /// attributes).
    pub(crate) fn of_arguments(schema: &Value) -> Shape {
        match Shape::of(schema, 0) {
            Some(record @ Shape::Record(_)) => record,
            _ => Shape::Record(BTreeMap::new()),
        }
    }

    fn of(schema: &Value, depth: usize) -> Option<Shape> {
        if depth > MAX_DEPTH {
            return None;
        }
        let schema = schema.as_object()?;
        match schema.get("type").and_then(Value::as_str) {
            Some("string") => Some(Shape::String),
            Some("integer") => Some(Shape::Long),
            Some("boolean") => Some(Shape::Bool),
            Some("array") => {
                let items = Shape::of(schema.get("items")?, depth + 1)?;
                Some(Shape::Set(Box::new(items)))
            }
            Some("object") => Some(Shape::Record(Shape::attributes(schema, depth))),
            None => match schema.get("enum").and_then(Value::as_array) {
                Some(values) if !values.is_empty() && values.iter().all(Value::is_string) => {
                    Some(Shape::String)
                }
                _ => None,
            },
            Some(_) => None,
        }
    }

    fn attributes(schema: &Map<String, Value>, depth: usize) -> BTreeMap<String, (Shape, bool)> {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return BTreeMap::new();
        };
        properties
            .iter()
            .filter_map(|(name, property)| {
                let shape = Shape::of(property, depth + 1)?;
                Some((name.clone(), (shape, required.contains(&name.as_str()))))
            })
            .collect()
    }

    /// This shape as a type of Cedar's JSON schema format.
    pub(crate) fn cedar_type(&self) -> Value {
        match self {
            Shape::String => json!({"type": "String"}),
            Shape::Long => json!({"type": "Long"}),
            Shape::Bool => json!({"type": "Boolean"}),
            Shape::Set(items) => json!({"type": "Set", "element": items.cedar_type()}),
            Shape::Record(attributes) => {
                let attributes: Map<String, Value> = attributes
                    .iter()
                    .map(|(name, (shape, required))| {
                        (name.clone(), shape.cedar_attribute(*required))
                    })
                    .collect();
                json!({"type": "Record", "attributes": attributes})
            }
        }
    }

    /// This shape as an attribute of a Cedar record type, `required` or
    /// not.
    pub(crate) fn cedar_attribute(&self, required: bool) -> Value {
        let mut t = self.cedar_type();
        if let Some(t) = t.as_object_mut() {
            t.insert("required".into(), Value::Bool(required));
        }
        t
    }

    /// `value` cut to this shape: attributes the shape does not hold left
    /// out. `None` when `value` does not have the shape (an integer past
    /// `i64`, a set with an item of another type).
    pub(crate) fn cut(&self, value: &Value) -> Option<Value> {
        match (self, value) {
            (Shape::String, Value::String(_)) | (Shape::Bool, Value::Bool(_)) => {
                Some(value.clone())
            }
            (Shape::Long, Value::Number(n)) => n.as_i64().map(Value::from),
            (Shape::Set(items), Value::Array(values)) => values
                .iter()
                .map(|v| items.cut(v))
                .collect::<Option<Vec<_>>>()
                .map(Value::Array),
            (Shape::Record(attributes), Value::Object(members)) => {
                let mut out = Map::new();
                for (name, (shape, required)) in attributes {
                    match members.get(name).map(|v| shape.cut(v)) {
                        Some(Some(cut)) => {
                            out.insert(name.clone(), cut);
                        }
                        // A value of another type: refused, never dropped.
                        Some(None) => return None,
                        None if *required => return None,
                        None => {}
                    }
                }
                Some(Value::Object(out))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_convertible_part_of_a_schema_becomes_cedar_types() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "count": {"type": "integer"},
                "force": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"enum": ["a", "b"]},
                "ratio": {"type": "number"},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                "nested": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}
            },
            "required": ["path"]
        });
        let Shape::Record(attributes) = Shape::of_arguments(&schema) else {
            panic!("a record");
        };
        let names: Vec<&str> = attributes.keys().map(String::as_str).collect();
        assert_eq!(names, ["count", "force", "mode", "nested", "path", "tags"]);
        assert_eq!(attributes["path"], (Shape::String, true));
        assert_eq!(attributes["count"], (Shape::Long, false));
        assert_eq!(
            attributes["tags"],
            (Shape::Set(Box::new(Shape::String)), false)
        );
        assert_eq!(
            Shape::Record(attributes).cedar_type()["attributes"]["nested"],
            json!({"type": "Record", "required": false, "attributes": {"x": {"type": "Long", "required": true}}})
        );
    }

    #[test]
    fn arguments_are_cut_to_the_shape_and_a_value_of_another_type_is_refused() {
        let shape = Shape::of_arguments(&json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["path"]
        }));
        assert_eq!(
            shape.cut(&json!({"path": "a", "n": 3, "ratio": 0.5})),
            Some(json!({"path": "a", "n": 3}))
        );
        assert_eq!(shape.cut(&json!({"path": "a"})), Some(json!({"path": "a"})));
        assert_eq!(shape.cut(&json!({"n": 3})), None, "a required one missing");
        assert_eq!(shape.cut(&json!({"path": "a", "n": 1e30})), None);
        assert_eq!(shape.cut(&json!({"path": 1})), None);
    }

    #[test]
    fn a_schema_that_is_not_an_object_gives_a_record_without_attributes() {
        for schema in [json!({}), json!(true), json!({"type": "string"})] {
            assert_eq!(Shape::of_arguments(&schema), Shape::Record(BTreeMap::new()));
        }
    }
}
