//! The pin: a manifest of a server's whole tool set, recorded once and
//! compared with what the server lists at every load (design §25).
//! Hashes are BLAKE3 (decision 3); schemas are kept in the core's
//! canonical form, number literals as the server wrote them (decision 4).

use std::collections::BTreeMap;
use std::path::Path;

use agentrt::json::{hash_hex, write_string};
use agentrt::{Canonical, Timestamp};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::McpError;
use crate::private_file::read_private;

/// A tool as a server listed it, from the bytes the server sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTool {
    /// The server's name for it.
    pub name: String,
    /// Its description (`""` when the server sent none).
    pub description: String,
    /// Its input schema as sent (`""` when the server sent none).
    pub input_schema: String,
    /// Its annotations as sent, if any.
    pub annotations: Option<String>,
}

/// One pinned tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinnedTool {
    /// The server's name for it.
    pub name: String,
    /// Its description, as listed.
    pub description: String,
    /// Its input schema in canonical form (`null` when none was sent).
    pub input_schema: Canonical,
    /// BLAKE3 of the canonical schema bytes, lowercase hex.
    pub schema_hash: String,
    /// BLAKE3 of the description encoded as a JSON string (quotes
    /// included), lowercase hex.
    pub description_hash: String,
    /// The annotations as received (canonical), outside both hashes.
    pub annotations: Option<Canonical>,
}

/// The hash a description is pinned by: BLAKE3 over it encoded as a JSON
/// string, quotes included.
///
/// ```
/// let h = agentrt_mcp::description_hash("Reads a file.");
/// assert_eq!(h, agentrt::json::hash_hex(br#""Reads a file.""#));
/// ```
pub fn description_hash(description: &str) -> String {
    let mut encoded = String::with_capacity(description.len() + 2);
    write_string(&mut encoded, description);
    hash_hex(encoded.as_bytes())
}

impl PinnedTool {
    /// Pins a listed tool: its schema in canonical form (refused when it
    /// is not one JSON value the core accepts), both hashes.
    pub fn from_listed(tool: &ListedTool) -> Result<PinnedTool, McpError> {
        let refuse = |detail: String| McpError::Pin {
            tool: tool.name.clone(),
            detail,
        };
        let input_schema = if tool.input_schema.trim().is_empty() {
            Canonical::null()
        } else {
            Canonical::parse_str(&tool.input_schema)
                .map_err(|e| refuse(format!("input schema: {e}")))?
        };
        // `null` is no annotations, as the listing reads it: the manifest
        // leaves them out, so the pin reads back as itself.
        let annotations = tool
            .annotations
            .as_deref()
            .map(Canonical::parse_str)
            .transpose()
            .map_err(|e| refuse(format!("annotations: {e}")))?
            .filter(|a| !a.is_null());
        Ok(PinnedTool {
            name: tool.name.clone(),
            description: tool.description.clone(),
            schema_hash: input_schema.hash(),
            description_hash: description_hash(&tool.description),
            input_schema,
            annotations,
        })
    }
}

/// A server's tool set as pinned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// The server's name (as the operator described it).
    pub server: String,
    /// When it was pinned.
    pub pinned_at: Timestamp,
    /// The tools, by the server's names.
    pub tools: BTreeMap<String, PinnedTool>,
}

impl Manifest {
    /// Pins `tools` as listed by `server` at `pinned_at`; a name listed
    /// twice is refused.
    ///
    /// ```
    /// use agentrt_mcp::{ListedTool, Manifest, parse_manifest};
    /// let at = agentrt::Timestamp::parse("2026-12-01T09:00:00Z").unwrap();
    /// let tool = ListedTool {
    ///     name: "read_file".into(),
    ///     description: "Reads a file.".into(),
    ///     input_schema: r#"{"type": "object", "properties": {"path": {"type": "string"}}}"#.into(),
    ///     annotations: Some(r#"{"readOnlyHint": true}"#.into()),
    /// };
    /// let manifest = Manifest::pin("fs", at, &[tool])?;
    /// let text = manifest.to_json();
    /// assert_eq!(parse_manifest(text.as_bytes())?, manifest);
    /// # Ok::<(), agentrt_mcp::McpError>(())
    /// ```
    pub fn pin(
        server: &str,
        pinned_at: Timestamp,
        tools: &[ListedTool],
    ) -> Result<Manifest, McpError> {
        let mut pinned = BTreeMap::new();
        for tool in tools {
            if pinned.contains_key(&tool.name) {
                return Err(McpError::Pin {
                    tool: tool.name.clone(),
                    detail: "the server lists it twice".into(),
                });
            }
            pinned.insert(tool.name.clone(), PinnedTool::from_listed(tool)?);
        }
        Ok(Manifest {
            server: server.to_owned(),
            pinned_at,
            tools: pinned,
        })
    }

    /// The manifest file's text: canonical JSON (keys sorted), then a
    /// newline. `annotations` is left out of a tool the server sent none
    /// for.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"pinned_at\":");
        write_string(&mut out, &self.pinned_at.to_string());
        out.push_str(",\"server\":");
        write_string(&mut out, &self.server);
        out.push_str(",\"tools\":{");
        for (i, (name, tool)) in self.tools.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_string(&mut out, name);
            out.push_str(":{");
            if let Some(annotations) = &tool.annotations {
                out.push_str("\"annotations\":");
                out.push_str(annotations.as_str());
                out.push(',');
            }
            out.push_str("\"description\":");
            write_string(&mut out, &tool.description);
            out.push_str(",\"description_hash\":");
            write_string(&mut out, &tool.description_hash);
            out.push_str(",\"input_schema\":");
            out.push_str(tool.input_schema.as_str());
            out.push_str(",\"name\":");
            write_string(&mut out, &tool.name);
            out.push_str(",\"schema_hash\":");
            write_string(&mut out, &tool.schema_hash);
            out.push('}');
        }
        out.push_str("}}\n");
        out
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManifestFile<'a> {
    server: String,
    pinned_at: String,
    #[serde(borrow)]
    tools: BTreeMap<String, ToolFile<'a>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolFile<'a> {
    name: String,
    description: String,
    #[serde(borrow)]
    input_schema: &'a RawValue,
    schema_hash: String,
    description_hash: String,
    #[serde(default, borrow)]
    annotations: Option<&'a RawValue>,
}

/// Parses a manifest's bytes. Refused: JSON the core's boundary check
/// refuses, an unknown or missing field, a tool filed under another name
/// than its own, and a hash that does not match what it hashes (a
/// manifest edited by hand).
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest, McpError> {
    manifest_from(bytes, Path::new(""))
}

/// Reads and parses a manifest file that is owned privately.
pub fn read_manifest(path: &Path) -> Result<Manifest, McpError> {
    manifest_from(&read_private(path)?, path)
}

fn manifest_from(bytes: &[u8], path: &Path) -> Result<Manifest, McpError> {
    let bad = |detail: String| McpError::Manifest {
        path: path.to_owned(),
        detail,
    };
    let canonical = Canonical::parse(bytes).map_err(|e| bad(e.to_string()))?;
    let file: ManifestFile<'_> =
        serde_json::from_str(canonical.as_str()).map_err(|e| bad(e.to_string()))?;
    let pinned_at = Timestamp::parse(&file.pinned_at)
        .map_err(|e| bad(format!("pinned_at {:?}: {e}", file.pinned_at)))?;
    let mut tools = BTreeMap::new();
    for (key, tool) in file.tools {
        let problem = |detail: &str| bad(format!("tool {key:?}: {detail}"));
        if tool.name != key {
            return Err(problem("it is filed under another name than its own"));
        }
        let input_schema =
            Canonical::parse_str(tool.input_schema.get()).map_err(|e| problem(&e.to_string()))?;
        if input_schema.hash() != tool.schema_hash {
            return Err(problem("schema_hash does not match input_schema"));
        }
        if description_hash(&tool.description) != tool.description_hash {
            return Err(problem("description_hash does not match description"));
        }
        let annotations = tool
            .annotations
            .map(|a| Canonical::parse_str(a.get()))
            .transpose()
            .map_err(|e| problem(&e.to_string()))?;
        tools.insert(
            key,
            PinnedTool {
                name: tool.name,
                description: tool.description,
                input_schema,
                schema_hash: tool.schema_hash,
                description_hash: tool.description_hash,
                annotations,
            },
        );
    }
    Ok(Manifest {
        server: file.server,
        pinned_at,
        tools,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        Timestamp::parse("2026-12-01T09:00:00Z").unwrap()
    }

    fn listed(name: &str, schema: &str) -> ListedTool {
        ListedTool {
            name: name.into(),
            description: format!("The {name} tool."),
            input_schema: schema.into(),
            annotations: None,
        }
    }

    #[test]
    fn a_pin_keeps_the_schema_canonical_with_its_literals_and_hashes_it() {
        let m = Manifest::pin(
            "fs",
            at(),
            &[listed(
                "a",
                r#"{ "type" : "object", "maximum": 1.0, "x": "<&>" }"#,
            )],
        )
        .unwrap();
        let a = &m.tools["a"];
        assert_eq!(
            a.input_schema.as_str(),
            r#"{"maximum":1.0,"type":"object","x":"<&>"}"#
        );
        assert_eq!(a.schema_hash, hash_hex(a.input_schema.as_bytes()));
        assert_eq!(a.description_hash, hash_hex(br#""The a tool.""#));
        assert_eq!(a.annotations, None);
        let text = m.to_json();
        assert!(!text.contains("annotations"), "{text}");
        assert!(
            Canonical::parse(text.trim_end().as_bytes())
                .unwrap()
                .as_str()
                == text.trim_end()
        );
        assert_eq!(parse_manifest(text.as_bytes()).unwrap(), m);
    }

    #[test]
    fn an_empty_schema_pins_as_null_and_a_broken_one_names_the_tool() {
        let m = Manifest::pin("fs", at(), &[listed("none", "  ")]).unwrap();
        assert!(m.tools["none"].input_schema.is_null());
        for schema in [r#"{"a":1,"a":2}"#, r#"{"a":1} trailing"#, "{"] {
            match Manifest::pin("fs", at(), &[listed("bad", schema)]) {
                Err(McpError::Pin { tool, .. }) => assert_eq!(tool, "bad"),
                other => panic!("{schema}: {other:?}"),
            }
        }
        let twice = Manifest::pin("fs", at(), &[listed("t", "{}"), listed("t", "{}")]);
        assert!(matches!(twice, Err(McpError::Pin { .. })));
    }

    #[test]
    fn null_annotations_pin_as_none_and_the_manifest_reads_back_as_itself() {
        // Found by the fuzz target: `null` was pinned as annotations and
        // written, and read back as none.
        let mut tool = listed("a", r#"{"type":"object"}"#);
        tool.annotations = Some(" null ".into());
        let m = Manifest::pin("fs", at(), &[tool]).unwrap();
        assert_eq!(m.tools["a"].annotations, None);
        assert!(!m.to_json().contains("annotations"));
        assert_eq!(parse_manifest(m.to_json().as_bytes()).unwrap(), m);
    }

    #[test]
    fn a_hand_edited_manifest_is_refused() {
        let m = Manifest::pin("fs", at(), &[listed("a", r#"{"type":"object"}"#)]).unwrap();
        let text = m.to_json();
        let edits = [
            text.replace(r#""type":"object""#, r#""type":"array""#),
            text.replace("The a tool.", "The A tool."),
            text.replace(r#""name":"a""#, r#""name":"b""#),
            text.replace(r#""server":"fs""#, r#""server":"fs","extra":1"#),
            text.replace(&m.pinned_at.to_string(), "yesterday"),
        ];
        for edited in edits {
            assert_ne!(edited, text);
            assert!(
                matches!(
                    parse_manifest(edited.as_bytes()),
                    Err(McpError::Manifest { .. })
                ),
                "{edited}"
            );
        }
    }
}
