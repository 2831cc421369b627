//! Tool registration: specs checked once, schemas compiled once.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::json::Canonical;
use crate::model::{Tool, ToolSpec};

/// A compiled argument schema. Nothing outside the schema document is ever
/// loaded: a `$ref`, `$schema` or `$id` that resolves elsewhere is refused
/// at compile time.
pub struct ToolSchema {
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for ToolSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ToolSchema")
    }
}

/// Refuses every retrieval: schemas are untrusted input.
struct NoRetrieval;

impl jsonschema::Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> std::result::Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(
            format!("{uri} is outside the schema document; external references are never loaded")
                .into(),
        )
    }
}

fn catch<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        format!(
            "the schema validator panicked: {}",
            crate::policy::panic_text(panic.as_ref())
        )
    })
}

impl ToolSchema {
    /// Compiles a schema (an object or a boolean).
    pub fn compile(schema: &Canonical) -> std::result::Result<ToolSchema, String> {
        let value = schema.to_value();
        if !(value.is_object() || value.is_boolean()) {
            return Err("the input schema must be a JSON object or boolean".into());
        }
        let built = catch(|| {
            jsonschema::options()
                .with_retriever(NoRetrieval)
                .with_pattern_options(jsonschema::PatternOptions::regex())
                .build(&value)
        })?;
        built
            .map(|validator| ToolSchema { validator })
            .map_err(|e| format!("the input schema does not compile: {e}"))
    }

    /// Checks arguments; the error names the first failing location.
    pub fn check(&self, args: &Canonical) -> std::result::Result<(), String> {
        let value = args.to_value();
        let first = catch(|| {
            self.validator.iter_errors(&value).next().map(|e| {
                let at = e.instance_path().to_string();
                if at.is_empty() {
                    format!("arguments do not match the schema: {e}")
                } else {
                    format!("arguments do not match the schema at {at}: {e}")
                }
            })
        })?;
        match first {
            None => Ok(()),
            Some(problem) => Err(problem),
        }
    }
}

/// Checks `args` (JSON bytes) against `spec` exactly as the runtime does
/// before a policy sees them.
///
/// ```
/// use agentrt::{SideEffect, ToolSpec, registry::check_args};
/// let spec = ToolSpec::new("t", "", SideEffect::ReadOnly)
///     .with_schema_str(r#"{"type":"object","required":["path"]}"#).unwrap();
/// assert!(check_args(&spec, br#"{"path":"a"}"#).is_ok());
/// assert!(check_args(&spec, br#"{}"#).is_err());
/// assert!(check_args(&spec, b"null").is_err(), "null is not an object");
/// ```
pub fn check_args(spec: &ToolSpec, args: &[u8]) -> std::result::Result<(), String> {
    // As the loop reads them: blank arguments mean `{}`; anything else,
    // `null` included, is checked as written.
    let args = if crate::model::is_blank(args) {
        Canonical::empty_object()
    } else {
        Canonical::parse(args).map_err(|e| format!("arguments are not acceptable JSON: {e}"))?
    };
    ToolSchema::compile(&spec.input_schema)?.check(&args)
}

/// A registered tool: the tool, its spec read once, the spec's canonical
/// form and hash, and the compiled schema.
pub(crate) struct Registered {
    pub tool: Arc<dyn Tool>,
    pub spec: ToolSpec,
    pub spec_json: Canonical,
    pub spec_hash: String,
    pub schema: ToolSchema,
}

/// The registered tools, by name.
#[derive(Default)]
pub(crate) struct Registry {
    tools: BTreeMap<String, Registered>,
    specs: Arc<Vec<ToolSpec>>,
}

fn refuse(tool: &str, reason: impl Into<String>) -> Error {
    Error::InvalidTool {
        tool: tool.to_owned(),
        reason: reason.into(),
    }
}

impl Registry {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Result<Registry> {
        let mut registry = BTreeMap::new();
        for tool in tools {
            let spec = tool.spec();
            let name = spec.name.clone();
            if name.trim().is_empty() {
                return Err(refuse(&name, "the name is empty"));
            }
            if registry.contains_key(&name) {
                return Err(refuse(&name, "another tool has the same name"));
            }
            if spec.timeout_ms == 0 {
                return Err(refuse(&name, "the timeout must be positive"));
            }
            if spec.input_schema.is_null() {
                return Err(refuse(&name, "the input schema is blank"));
            }
            let schema = ToolSchema::compile(&spec.input_schema).map_err(|e| refuse(&name, e))?;
            let spec_json = spec
                .to_canonical()
                .map_err(|e| refuse(&name, format!("the spec cannot be encoded: {e}")))?;
            let spec_hash = spec_json.hash();
            registry.insert(
                name,
                Registered {
                    tool,
                    spec,
                    spec_json,
                    spec_hash,
                    schema,
                },
            );
        }
        let specs = Arc::new(registry.values().map(|r| r.spec.clone()).collect());
        Ok(Registry {
            tools: registry,
            specs,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Registered> {
        self.tools.get(name)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Registered> {
        self.tools.values()
    }

    /// Specs in name order, shared.
    pub fn specs(&self) -> Arc<Vec<ToolSpec>> {
        Arc::clone(&self.specs)
    }
}
