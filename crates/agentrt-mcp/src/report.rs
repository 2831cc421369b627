//! Load's report: per tool, offered or why not, as text for a terminal
//! (every server-chosen name and reason sanitized) and as JSON (raw).

use agentrt::SideEffect;
use agentrt::json::write_string;
use agentrt::text::sanitize;

/// A tool load registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    /// The server's name of the tool.
    pub tool: String,
    /// The name the model sees.
    pub name: String,
    /// The operator's class.
    pub side_effect: SideEffect,
    /// The hints' contradiction the rule allowed, if any.
    pub hint_mismatch: Option<String>,
}

/// What load did with each of a server's tools.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// The server's name.
    pub server: String,
    /// The tools offered, in name order.
    pub registered: Vec<Registered>,
    /// The pinned tools refused, with the reason, in name order.
    pub refused: Vec<(String, String)>,
    /// Tools the server lists that the manifest does not pin (never
    /// offered), sorted.
    pub unpinned: Vec<String>,
    /// Pinned tools without a rule (never offered), in name order.
    pub unclassified: Vec<String>,
}

impl Report {
    /// One line per tool: registered, refused, unclassified, unpinned.
    pub fn text(&self) -> String {
        let server = sanitize(&self.server);
        let mut out = String::new();
        for r in &self.registered {
            out.push_str(&format!(
                "{server}: registered {} as {} ({})",
                sanitize(&r.tool),
                sanitize(&r.name),
                r.side_effect.as_str()
            ));
            if let Some(text) = &r.hint_mismatch {
                out.push_str(&format!(" [hint mismatch allowed: {}]", sanitize(text)));
            }
            out.push('\n');
        }
        for (tool, reason) in &self.refused {
            out.push_str(&format!(
                "{server}: refused {}: {}\n",
                sanitize(tool),
                sanitize(reason)
            ));
        }
        for tool in &self.unclassified {
            out.push_str(&format!(
                "{server}: unclassified {}: no rule\n",
                sanitize(tool)
            ));
        }
        for tool in &self.unpinned {
            out.push_str(&format!(
                "{server}: unpinned {}: not in the manifest\n",
                sanitize(tool)
            ));
        }
        out
    }

    /// `{"server", "registered":[{"tool","name","side_effect",
    /// "hint_mismatch"}], "refused":[{"tool","reason"}], "unpinned":[…],
    /// "unclassified":[…]}`, empty lists and an absent mismatch left out;
    /// canonical (keys sorted).
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        if !self.refused.is_empty() {
            out.push_str("\"refused\":[");
            for (i, (tool, reason)) in self.refused.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str("{\"reason\":");
                write_string(&mut out, reason);
                out.push_str(",\"tool\":");
                write_string(&mut out, tool);
                out.push('}');
            }
            out.push_str("],");
        }
        if !self.registered.is_empty() {
            out.push_str("\"registered\":[");
            for (i, r) in self.registered.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('{');
                if let Some(text) = &r.hint_mismatch {
                    out.push_str("\"hint_mismatch\":");
                    write_string(&mut out, text);
                    out.push(',');
                }
                out.push_str("\"name\":");
                write_string(&mut out, &r.name);
                out.push_str(",\"side_effect\":");
                write_string(&mut out, r.side_effect.as_str());
                out.push_str(",\"tool\":");
                write_string(&mut out, &r.tool);
                out.push('}');
            }
            out.push_str("],");
        }
        out.push_str("\"server\":");
        write_string(&mut out, &self.server);
        for (key, names) in [
            ("unclassified", &self.unclassified),
            ("unpinned", &self.unpinned),
        ] {
            if names.is_empty() {
                continue;
            }
            out.push_str(&format!(",\"{key}\":["));
            for (i, name) in names.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(&mut out, name);
            }
            out.push(']');
        }
        out.push('}');
        out
    }
}
