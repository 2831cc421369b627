//! `agentrt-proxy pin` (design §19): each server pinned into its
//! manifest, and what it listed shown with its own hints, which classify
//! nothing: the operator classifies each tool in the rules.

use std::io::Write;

use agentrt::Timestamp;
use agentrt::text::sanitize;
use agentrt_mcp::{Manifest, PinnedTool, write_private};

use crate::config::Config;
use crate::error::ProxyError;
use crate::reach::check_reach;

/// The longest description shown.
const DESCRIPTION_WIDTH: usize = 72;

/// Pins every server of `config` as of `now`, writes each manifest
/// (owner-only), and prints the tools to `out`. The reach check runs
/// first: pinning starts the servers.
pub async fn pin_all(
    config: &Config,
    now: Timestamp,
    out: &mut dyn Write,
) -> Result<(), ProxyError> {
    check_reach(config)?;
    for server in &config.servers {
        let manifest = agentrt_mcp::pin(&server.server, now).await?;
        write_private(&server.manifest, manifest.to_json().as_bytes())?;
        write_listing(&manifest, &server.manifest.display().to_string(), out)?;
    }
    let path = config.path.display();
    writeln!(
        out,
        "classify each tool to offer in its server's \"rules\" in {path}, then run: agentrt-proxy check --config {path}"
    )
    .map_err(output_error)
}

pub(crate) fn output_error(e: std::io::Error) -> ProxyError {
    ProxyError::Write {
        path: std::path::PathBuf::new(),
        detail: e.to_string(),
    }
}

/// The lines `pin` prints for one manifest.
pub fn write_listing(
    manifest: &Manifest,
    path: &str,
    out: &mut dyn Write,
) -> Result<(), ProxyError> {
    writeln!(
        out,
        "server {}: {} tools pinned in {}, with the server's own hints, which classify nothing:",
        sanitize(&manifest.server),
        manifest.tools.len(),
        sanitize(path)
    )
    .map_err(output_error)?;
    for tool in manifest.tools.values() {
        writeln!(
            out,
            "  {:<28} {:<26} {}",
            sanitize(&tool.name),
            hints(tool),
            one_line(&tool.description, DESCRIPTION_WIDTH)
        )
        .map_err(output_error)?;
    }
    Ok(())
}

/// `no annotations`, `claims nothing`, or the hints the server claims.
fn hints(tool: &PinnedTool) -> String {
    let Some(annotations) = &tool.annotations else {
        return "no annotations".into();
    };
    let value: serde_json::Value =
        serde_json::from_str(annotations.as_str()).unwrap_or(serde_json::Value::Null);
    let claimed: Vec<&str> = [
        ("readOnlyHint", "readOnly"),
        ("destructiveHint", "destructive"),
        ("idempotentHint", "idempotent"),
        ("openWorldHint", "openWorld"),
    ]
    .into_iter()
    .filter(|(key, _)| value.get(key) == Some(&serde_json::Value::Bool(true)))
    .map(|(_, shown)| shown)
    .collect();
    if claimed.is_empty() {
        "claims nothing".into()
    } else {
        claimed.join(",")
    }
}

/// `text` on one line (whitespace runs as one space), sanitized, at most
/// `width` characters (`...` ending a cut one).
fn one_line(text: &str, width: usize) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let clean = sanitize(&joined);
    if clean.chars().count() <= width {
        return clean;
    }
    let mut cut: String = clean.chars().take(width.saturating_sub(3)).collect();
    cut.push_str("...");
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_description_is_shown_on_one_line_within_its_width() {
        assert_eq!(one_line("Reads\n  a file.\t", 72), "Reads a file.");
        let long = "word ".repeat(30);
        let shown = one_line(&long, 72);
        assert_eq!(shown.chars().count(), 72);
        assert!(shown.ends_with("..."));
        assert_eq!(one_line("\u{1b}[31mred", 72), "\\x1b[31mred");
    }
}
