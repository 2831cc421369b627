//! A server's tool listing, from the raw `tools/list` results it sent
//! (design §25): pinned from the server's own bytes, page by page, with
//! the protocol library's exact key matching (`tools`, not `Tools`).

use std::collections::HashSet;

use agentrt::Canonical;
use agentrt::json::object_members;
use agentrt::text::sanitize;

use crate::error::McpError;
use crate::manifest::ListedTool;

/// The most pages a listing may take.
pub const MAX_PAGES: usize = 100;
/// The most tools a listing may hold.
pub const MAX_TOOLS: usize = 1000;

/// A listing in progress: feed it each page's raw result until it returns
/// no cursor.
///
/// ```
/// use agentrt_mcp::Listing;
/// let mut listing = Listing::new("fs");
/// let next = listing.add_page(r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"2"}"#)?;
/// assert_eq!(next.as_deref(), Some("2"));
/// assert_eq!(listing.add_page(r#"{"tools":[{"name":"b","description":"B.","inputSchema":{"type":"object"}}]}"#)?, None);
/// let tools = listing.finish();
/// assert_eq!((tools[0].name.as_str(), tools[1].description.as_str()), ("a", "B."));
/// assert_eq!(tools[0].input_schema, r#"{"type":"object"}"#);
/// # Ok::<(), agentrt_mcp::McpError>(())
/// ```
#[derive(Debug)]
pub struct Listing {
    server: String,
    tools: Vec<ListedTool>,
    names: HashSet<String>,
    cursors: HashSet<String>,
    pages: usize,
}

impl Listing {
    /// An empty listing of `server`.
    pub fn new(server: &str) -> Listing {
        Listing {
            server: server.to_owned(),
            tools: Vec::new(),
            names: HashSet::new(),
            cursors: HashSet::new(),
            pages: 0,
        }
    }

    fn refuse(&self, detail: String) -> McpError {
        McpError::Listing {
            server: self.server.clone(),
            detail,
        }
    }

    /// Adds one page (the raw JSON of a `tools/list` result); returns the
    /// cursor of the next page, if any. Refused: JSON the core refuses, a
    /// page without a `tools` list, a tool without a name, a tool listed
    /// twice (within or across pages), a cursor seen before, more than
    /// [`MAX_PAGES`] pages or [`MAX_TOOLS`] tools.
    pub fn add_page(&mut self, raw: &str) -> Result<Option<String>, McpError> {
        self.pages += 1;
        if self.pages > MAX_PAGES {
            return Err(self.refuse(format!("more than {MAX_PAGES} pages")));
        }
        let page = Canonical::parse_str(raw)
            .map_err(|e| self.refuse(format!("the result is not acceptable JSON: {e}")))?;
        let members = object_members(&page)
            .ok_or_else(|| self.refuse("the result is not a JSON object".into()))?;
        let field = |key: &str| members.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let tools: Vec<Canonical> = match field("tools") {
            Some(list) => {
                elements(list).ok_or_else(|| self.refuse("tools is not a list".into()))?
            }
            None => return Err(self.refuse("the result has no tools list".into())),
        };
        for tool in tools {
            let listed = self.tool(&tool)?;
            if !self.names.insert(listed.name.clone()) {
                return Err(
                    self.refuse(format!("tool {:?} is listed twice", sanitize(&listed.name)))
                );
            }
            self.tools.push(listed);
            if self.tools.len() > MAX_TOOLS {
                return Err(self.refuse(format!("more than {MAX_TOOLS} tools")));
            }
        }
        let cursor = match field("nextCursor") {
            None => None,
            Some(c) if c.is_null() => None,
            Some(c) => Some(
                serde_json::from_str::<String>(c.as_str())
                    .map_err(|_| self.refuse("nextCursor is not a string".into()))?,
            ),
        };
        if let Some(cursor) = &cursor
            && !self.cursors.insert(cursor.clone())
        {
            return Err(self.refuse(format!(
                "the cursor {:?} came back: the listing would never end",
                sanitize(cursor)
            )));
        }
        Ok(cursor)
    }

    /// One listed tool from its raw JSON.
    fn tool(&self, tool: &Canonical) -> Result<ListedTool, McpError> {
        let members = object_members(tool)
            .ok_or_else(|| self.refuse("a listed tool is not a JSON object".into()))?;
        let field = |key: &str| members.iter().find(|(k, _)| k == key).map(|(_, v)| v);
        let text = |key: &str| -> Result<Option<String>, McpError> {
            field(key)
                .filter(|v| !v.is_null())
                .map(|v| {
                    serde_json::from_str::<String>(v.as_str())
                        .map_err(|_| self.refuse(format!("a listed tool's {key} is not a string")))
                })
                .transpose()
        };
        let name = text("name")?
            .filter(|n| !n.is_empty())
            .ok_or_else(|| self.refuse("a listed tool has no name".into()))?;
        Ok(ListedTool {
            description: text("description")?.unwrap_or_default(),
            input_schema: field("inputSchema")
                .map(|s| s.as_str().to_owned())
                .unwrap_or_default(),
            annotations: field("annotations")
                .filter(|a| !a.is_null())
                .map(|a| a.as_str().to_owned()),
            name,
        })
    }

    /// How many tools are listed so far.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is listed yet.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The names of the tools listed after the first `before`.
    pub(crate) fn names_since(&self, before: usize) -> impl Iterator<Item = &str> {
        self.tools.iter().skip(before).map(|t| t.name.as_str())
    }

    /// The tools listed, in the order the server sent them.
    pub fn finish(self) -> Vec<ListedTool> {
        self.tools
    }
}

/// The elements of a JSON array, canonical (read with the core's limits,
/// not serde_json's: any depth the core allows, numbers as written).
pub(crate) fn elements(list: &Canonical) -> Option<Vec<Canonical>> {
    // Each element keeps its bytes: read raw, then made canonical.
    let values: Vec<Box<serde_json::value::RawValue>> = serde_json::from_str(list.as_str()).ok()?;
    values
        .iter()
        .map(|v| Canonical::parse_str(v.get()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(tools: &str, cursor: Option<&str>) -> String {
        match cursor {
            Some(c) => format!(r#"{{"tools":[{tools}],"nextCursor":"{c}"}}"#),
            None => format!(r#"{{"tools":[{tools}]}}"#),
        }
    }

    #[test]
    fn the_schema_is_taken_from_the_bytes_the_server_sent() {
        let mut l = Listing::new("fs");
        l.add_page(r#"{"tools":[{"name":"a","inputSchema":{"maximum":1.0,"type":"object"},"annotations":{"readOnlyHint":true}}]}"#)
            .unwrap();
        let t = &l.finish()[0];
        assert_eq!(t.input_schema, r#"{"maximum":1.0,"type":"object"}"#);
        assert_eq!(t.annotations.as_deref(), Some(r#"{"readOnlyHint":true}"#));
        assert_eq!(t.description, "");
    }

    #[test]
    fn a_listing_that_breaks_the_rules_is_refused() {
        let a = r#"{"name":"a"}"#;
        let cases: Vec<(Vec<String>, &str)> = vec![
            (vec![r#"{"Tools":[]}"#.into()], "no tools list"),
            (
                vec![r#"{"tools":[],"tools":[]}"#.into()],
                "not acceptable JSON",
            ),
            (vec![page(&format!("{a},{a}"), None)], "listed twice"),
            (vec![page(a, Some("1")), page(a, None)], "listed twice"),
            (
                vec![page(a, Some("1")), page(r#"{"name":"b"}"#, Some("1"))],
                "came back",
            ),
            (vec![page(r#"{"description":"x"}"#, None)], "no name"),
            (vec![page(r#"{"name":7}"#, None)], "name is not a string"),
            (vec![r#"{"tools":{}}"#.into()], "not a list"),
        ];
        for (pages, want) in cases {
            let mut l = Listing::new("fs");
            let mut result = Ok(None);
            for p in &pages {
                result = l.add_page(p);
                if result.is_err() {
                    break;
                }
            }
            let e = result.expect_err(want);
            assert!(e.to_string().contains(want), "{pages:?}: {e}");
        }
    }

    #[test]
    fn pages_and_tools_are_bounded() {
        let mut l = Listing::new("fs");
        for i in 0..MAX_PAGES {
            l.add_page(&page("", Some(&i.to_string()))).unwrap();
        }
        let e = l.add_page(&page("", None)).unwrap_err();
        assert!(e.to_string().contains("more than 100 pages"), "{e}");

        let mut l = Listing::new("fs");
        let many: Vec<String> = (0..=MAX_TOOLS)
            .map(|i| format!(r#"{{"name":"t{i}"}}"#))
            .collect();
        let e = l.add_page(&page(&many.join(","), None)).unwrap_err();
        assert!(e.to_string().contains("more than 1000 tools"), "{e}");
    }
}
