//! Load's checks (design §26), on what was pinned, what the operator
//! ruled and what the server lists now: each pinned tool is checked on its
//! own and offered, refused with a reason, or left unclassified. Nothing
//! here talks to a server.

use std::collections::BTreeSet;
use std::time::Duration;

use agentrt::json::{object_members, write_string};
use agentrt::{Canonical, SideEffect, ToolSpec, registry::ToolSchema};
use serde_json::Value;

use crate::error::McpError;
use crate::manifest::{ListedTool, Manifest, PinnedTool, description_hash};
use crate::report::{Registered, Report};
use crate::rules::{Rule, Rules};

/// A tool load offers: the spec the model and the policy see, and what a
/// call needs to reach the server.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedTool {
    /// The server's own name of the tool (what a call sends).
    pub upstream: String,
    /// The spec: the model-visible name, the description (the rule's or
    /// the pinned one), the schema without the hidden parameters, the
    /// operator's class and timeout.
    pub spec: ToolSpec,
    /// The operator's rule (denied and fixed parameters for each call).
    pub rule: Rule,
}

/// Refuses the files before anything connects: a manifest pinned for
/// another server, or rules naming tools the manifest does not pin (listed
/// sorted: a misspelt rule would leave its tool unclassified unnoticed).
pub fn check_files(server: &str, manifest: &Manifest, rules: &Rules) -> Result<(), McpError> {
    if manifest.server != server {
        return Err(McpError::Load {
            server: server.to_owned(),
            detail: format!(
                "the manifest was pinned for server {:?}; run pin for this server",
                manifest.server
            ),
        });
    }
    let unknown: Vec<&str> = rules
        .keys()
        .filter(|tool| !manifest.tools.contains_key(*tool))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(McpError::Load {
            server: server.to_owned(),
            detail: format!(
                "rules name tools the manifest does not pin: {}",
                unknown.join(", ")
            ),
        });
    }
    Ok(())
}

/// Checks every pinned tool against its rule and the live listing, in name
/// order, and returns the tools offered with the report. A tool that fails
/// a check is refused alone; live tools absent from the manifest are
/// reported `unpinned` and never offered. `default_timeout` is the
/// server's, for rules without one.
///
/// ```
/// use std::time::Duration;
/// use agentrt::SideEffect;
/// use agentrt_mcp::{ListedTool, Manifest, Rule, Rules, check_tools};
///
/// let at = agentrt::Timestamp::parse("2026-12-01T09:00:00Z").unwrap();
/// let read = ListedTool {
///     name: "read_file".into(),
///     description: "Reads a file.".into(),
///     input_schema: r#"{"type":"object","properties":{"path":{"type":"string"}}}"#.into(),
///     annotations: Some(r#"{"readOnlyHint":true}"#.into()),
/// };
/// let manifest = Manifest::pin("fs", at, &[read.clone()])?;
/// let mut rules = Rules::new();
/// rules.insert("read_file".into(), Rule::new(SideEffect::ReadOnly).with_timeout(Duration::from_secs(5)));
/// let (offered, report) = check_tools("fs", &manifest, &rules, &[read], None);
/// assert_eq!(offered[0].spec.name, "fs_read_file");
/// assert_eq!(report.text(), "fs: registered read_file as fs_read_file (read_only)\n");
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
pub fn check_tools(
    server: &str,
    manifest: &Manifest,
    rules: &Rules,
    live: &[ListedTool],
    default_timeout: Option<Duration>,
) -> (Vec<OfferedTool>, Report) {
    let mut report = Report {
        server: server.to_owned(),
        ..Report::default()
    };
    let pinned: BTreeSet<&str> = manifest.tools.keys().map(String::as_str).collect();
    report.unpinned = live
        .iter()
        .map(|t| t.name.clone())
        .filter(|name| !pinned.contains(name.as_str()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut offered: Vec<OfferedTool> = Vec::new();
    for (name, pin) in &manifest.tools {
        let Some(rule) = rules.get(name) else {
            report.unclassified.push(name.clone());
            continue;
        };
        let taken: Vec<&str> = offered.iter().map(|t| t.spec.name.as_str()).collect();
        match check_one(server, pin, rule, live, default_timeout, &taken) {
            Ok((tool, hint_mismatch)) => {
                report.registered.push(Registered {
                    tool: name.clone(),
                    name: tool.spec.name.clone(),
                    side_effect: rule.side_effect,
                    hint_mismatch,
                });
                offered.push(tool);
            }
            Err(reason) => report.refused.push((name.clone(), reason)),
        }
    }
    (offered, report)
}

/// The specs a load of `manifest` would offer if the server listed
/// exactly what was pinned: what a policy is validated against before any
/// server is reached (a Cedar policy at `check`, a re-check without
/// `--current-tools`). Tools the rules leave out or refuse are not in it.
///
/// ```
/// use std::time::Duration;
/// use agentrt::{SideEffect, Timestamp};
/// use agentrt_mcp::{ListedTool, Manifest, PinnedTool, Rule, Rules, pinned_specs};
/// let read = ListedTool {
///     name: "read_file".into(),
///     description: "Reads a file.".into(),
///     input_schema: r#"{"type":"object","properties":{"path":{"type":"string"}}}"#.into(),
///     annotations: None,
/// };
/// let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
/// let manifest = Manifest::pin("fs", at, &[read])?;
/// let mut rules = Rules::new();
/// rules.insert("read_file".into(), Rule::new(SideEffect::ReadOnly).with_timeout(Duration::from_secs(5)));
/// let specs = pinned_specs("fs", &manifest, &rules, None);
/// assert_eq!(specs[0].name, "fs_read_file");
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
pub fn pinned_specs(
    server: &str,
    manifest: &Manifest,
    rules: &Rules,
    default_timeout: Option<Duration>,
) -> Vec<ToolSpec> {
    let listed: Vec<ListedTool> = manifest
        .tools
        .values()
        .map(|pin| ListedTool {
            name: pin.name.clone(),
            description: pin.description.clone(),
            input_schema: pin.input_schema.as_str().to_owned(),
            annotations: pin.annotations.as_ref().map(|a| a.as_str().to_owned()),
        })
        .collect();
    let (offered, _) = check_tools(server, manifest, rules, &listed, default_timeout);
    offered.into_iter().map(|o| o.spec).collect()
}

/// Checks one pinned tool (design §26); the reason when refused.
fn check_one(
    server: &str,
    pin: &PinnedTool,
    rule: &Rule,
    live: &[ListedTool],
    default_timeout: Option<Duration>,
    taken: &[&str],
) -> Result<(OfferedTool, Option<String>), String> {
    let Some(now) = live.iter().find(|t| t.name == pin.name) else {
        return Err("the server no longer offers it".into());
    };
    let live_schema = if now.input_schema.trim().is_empty() {
        Canonical::null()
    } else {
        Canonical::parse_str(&now.input_schema)
            .map_err(|e| format!("its input schema is not acceptable JSON now: {e}"))?
    };
    if live_schema.hash() != pin.schema_hash {
        return Err("its input schema changed since the pin".into());
    }
    if description_hash(&now.description) != pin.description_hash {
        return Err(
            "its description changed since the pin, and a description is model input".into(),
        );
    }
    let live_annotations = now
        .annotations
        .as_deref()
        .map(Canonical::parse_str)
        .transpose()
        .map_err(|e| format!("its annotations are not acceptable JSON now: {e}"))?;
    let mismatch = hint_contradiction(rule.side_effect, pin.annotations.as_ref()).or_else(|| {
        hint_contradiction(rule.side_effect, live_annotations.as_ref())
            .map(|text| format!("the server now says: {text}"))
    });
    if let Some(text) = &mismatch
        && !rule.allow_hint_mismatch
    {
        return Err(text.clone());
    }
    let timeout = rule
        .timeout
        .or(default_timeout)
        .ok_or("it has no timeout: give its rule one, or the server a default timeout")?;
    let name = rule
        .rename
        .clone()
        .unwrap_or_else(|| format!("{server}_{}", pin.name));
    if !visible_name(&name) {
        return Err(format!(
            "the name {name:?} is not 1 to 64 letters, digits, '_' or '-'"
        ));
    }
    if taken.contains(&name.as_str()) {
        return Err(format!("the name {name:?} is taken by another tool"));
    }
    let schema = &pin.input_schema;
    offerable(schema)?;
    let value = schema.to_value();
    if value.get("type") != Some(&Value::String("object".into())) {
        return Err("its input schema is not a JSON object with \"type\":\"object\"".into());
    }
    self_contained(&value)?;
    let hidden: Vec<&str> = rule
        .deny
        .iter()
        .chain(rule.fixed.keys())
        .map(String::as_str)
        .collect();
    hideable(&value, &hidden)?;
    let restricted = restrict(schema, &hidden)?;
    let description = rule
        .description
        .clone()
        .unwrap_or_else(|| pin.description.clone());
    let mut spec = ToolSpec::new(&name, &description, rule.side_effect)
        .with_schema(restricted)
        .with_timeout(timeout);
    spec.terminal = rule.terminal;
    ToolSchema::compile(&spec.input_schema).map_err(|e| format!("the runtime refuses it: {e}"))?;
    spec.to_canonical()
        .map_err(|e| format!("the runtime refuses it: {e}"))?;
    Ok((
        OfferedTool {
            upstream: pin.name.clone(),
            spec,
            rule: rule.clone(),
        },
        mismatch,
    ))
}

/// Refuses a schema `serde_json` cannot read: the host is offered the
/// schema through the protocol library, as a `serde_json` map, and the
/// core's canonical form holds what such a map cannot (a number beyond
/// `f64`, such as `1e400`, which the core's `to_value` reads as `null`;
/// nesting deeper than `serde_json`'s 128 levels). Offered anyway, the
/// tool would reach the host with another schema than the one pinned and
/// checked, or none.
fn offerable(schema: &Canonical) -> Result<(), String> {
    serde_json::from_str::<Value>(schema.as_str())
        .map(drop)
        .map_err(|e| {
            format!(
                "its input schema cannot be offered as the server wrote it: serde_json cannot read it ({e})"
            )
        })
}

/// How the server's hints contradict the operator's class, if they do.
/// Absent annotations never contradict, and a hint can only refuse: a
/// `readOnlyHint` never makes a tool read-only.
fn hint_contradiction(class: SideEffect, annotations: Option<&Canonical>) -> Option<String> {
    let annotations = annotations?.to_value();
    let hint = |key: &str| annotations.get(key).and_then(Value::as_bool);
    let read_only = hint("readOnlyHint") == Some(true);
    if class == SideEffect::ReadOnly && !read_only {
        return Some("classified read_only, but the server does not claim readOnlyHint".into());
    }
    if class != SideEffect::Destructive && !read_only && hint("destructiveHint") == Some(true) {
        return Some(format!(
            "classified {}, but the server claims destructiveHint",
            class.as_str()
        ));
    }
    None
}

/// `^[a-zA-Z0-9_-]{1,64}$`.
fn visible_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Whether `uri` names a well-known JSON Schema metaschema: http or https
/// `json-schema.org/` and a draft, an optional trailing `#`.
fn metaschema(uri: &str) -> bool {
    let uri = uri.strip_suffix('#').unwrap_or(uri);
    let Some(path) = uri
        .strip_prefix("https://json-schema.org/")
        .or_else(|| uri.strip_prefix("http://json-schema.org/"))
    else {
        return false;
    };
    matches!(
        path,
        "draft-04/schema"
            | "draft-06/schema"
            | "draft-07/schema"
            | "draft/2019-09/schema"
            | "draft/2020-12/schema"
            | "schema"
    )
}

/// Refuses a schema that points outside itself: anywhere in the document
/// (inside `default` and `examples` too), a `$ref`, `$dynamicRef` or
/// `$recursiveRef` not starting with `#`, an `$id` that is neither a
/// fragment nor a metaschema, a `$schema` that is not a metaschema, and
/// under draft-04 an `id` holding `:` or starting `//`. Nothing is fetched.
fn self_contained(schema: &Value) -> Result<(), String> {
    let draft4 = schema
        .get("$schema")
        .and_then(Value::as_str)
        .is_some_and(|s| s.contains("draft-04"));
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(members) => {
                for (key, value) in members {
                    if let Value::String(text) = value {
                        let outside = match key.as_str() {
                            "$ref" | "$dynamicRef" | "$recursiveRef" => !text.starts_with('#'),
                            "$id" => !text.starts_with('#') && !metaschema(text),
                            "$schema" => !metaschema(text),
                            "id" if draft4 => text.contains(':') || text.starts_with("//"),
                            _ => false,
                        };
                        if outside {
                            return Err(format!(
                                "its input schema is not self-contained: {key} {text:?} points outside it, and nothing is fetched"
                            ));
                        }
                    }
                    stack.push(value);
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    Ok(())
}

/// The keywords under which a hidden parameter could still be constrained
/// or reintroduced.
const COMBINING: [&str; 12] = [
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "$defs",
    "definitions",
];

/// Whether `name` appears anywhere in `value`, as an object key or a
/// string.
fn mentions(value: &Value, name: &str) -> bool {
    match value {
        Value::String(s) => s == name,
        Value::Array(items) => items.iter().any(|v| mentions(v, name)),
        Value::Object(members) => members.iter().any(|(k, v)| k == name || mentions(v, name)),
        _ => false,
    }
}

/// Refuses to hide (deny or fix) a parameter that is not a top-level
/// property, or that the schema could still reach: any `patternProperties`,
/// or a mention under a combining keyword.
fn hideable(schema: &Value, hidden: &[&str]) -> Result<(), String> {
    if hidden.is_empty() {
        return Ok(());
    }
    if schema.get("patternProperties").is_some() {
        return Err(
            "its input schema has patternProperties, so a hidden parameter could come back".into(),
        );
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in hidden {
        if !properties.is_some_and(|p| p.contains_key(*name)) {
            return Err(format!(
                "parameter {name:?} is denied or fixed, but it is not a top-level property"
            ));
        }
        for keyword in COMBINING {
            if schema.get(keyword).is_some_and(|v| mentions(v, name)) {
                return Err(format!(
                    "parameter {name:?} is denied or fixed, but {keyword} mentions it"
                ));
            }
        }
    }
    Ok(())
}

/// The schema without the hidden parameters in `properties` and
/// `required` (`required` dropped when it empties), canonical, every other
/// byte as pinned.
fn restrict(schema: &Canonical, hidden: &[&str]) -> Result<Canonical, String> {
    if hidden.is_empty() {
        return Ok(schema.clone());
    }
    let members = object_members(schema).ok_or("its input schema is not an object")?;
    let mut out = String::from("{");
    let mut first = true;
    for (key, value) in members {
        let value = match key.as_str() {
            "properties" => {
                let kept = object_members(&value)
                    .ok_or("its properties are not an object")?
                    .into_iter()
                    .filter(|(k, _)| !hidden.contains(&k.as_str()));
                let mut text = String::from("{");
                for (i, (k, v)) in kept.enumerate() {
                    if i > 0 {
                        text.push(',');
                    }
                    write_string(&mut text, &k);
                    text.push(':');
                    text.push_str(v.as_str());
                }
                text.push('}');
                text
            }
            "required" => {
                let names: Vec<String> = serde_json::from_str(value.as_str())
                    .map_err(|_| "its required list is not a list of names")?;
                let kept: Vec<&String> = names
                    .iter()
                    .filter(|n| !hidden.contains(&n.as_str()))
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                let mut text = String::from("[");
                for (i, n) in kept.iter().enumerate() {
                    if i > 0 {
                        text.push(',');
                    }
                    write_string(&mut text, n);
                }
                text.push(']');
                text
            }
            _ => value.into_string(),
        };
        if !first {
            out.push(',');
        }
        first = false;
        write_string(&mut out, &key);
        out.push(':');
        out.push_str(&value);
    }
    out.push('}');
    Canonical::parse_str(&out).map_err(|e| format!("the restricted schema is not JSON: {e}"))
}
