//! The configuration's Cedar policy (design §41): the file read (its owner
//! alone may write it: it decides what runs), its policies validated
//! against the tools the proxy offers, each request's principal the
//! proxy's session and its resource the tool's server.

use std::path::Path;

use agentrt::ToolSpec;
use agentrt::private_file::{self, Others};
use agentrt_cedar::CedarPolicy;

use crate::config::Config;
use crate::error::ProxyError;

/// The largest Cedar file read (1 MiB: thousands of policies).
pub const MAX_CEDAR_BYTES: u64 = 1 << 20;

/// The run label a Cedar request's principal is read from: the proxy's
/// session, the only caller the proxy knows unless callers bring OAuth
/// tokens; with `"oauth"` configured, the caller's subject
/// ([`SUBJECT_LABEL`](crate::SUBJECT_LABEL); `anonymous` over stdio).
pub const PRINCIPAL_LABEL: &str = "mcp.session";

/// The run label a Cedar request's resource is read from: the server.
pub const RESOURCE_LABEL: &str = "mcp.server";

/// The Cedar policy `config` names, validated against `specs` (the tools
/// offered, by their model-visible names); `None` without one.
///
/// # Errors
///
/// [`ProxyError::Cedar`]: the file cannot be read (or others may write
/// it), or its policies do not parse or validate (Cedar's diagnostic).
pub fn load_cedar(config: &Config, specs: &[ToolSpec]) -> Result<Option<CedarPolicy>, ProxyError> {
    load_at(config, config.cedar.as_deref(), specs)
}

/// The shadow Cedar policy `config` names, validated against `specs`;
/// `None` without one.
///
/// # Errors
///
/// As [`load_cedar`].
pub fn load_shadow(config: &Config, specs: &[ToolSpec]) -> Result<Option<CedarPolicy>, ProxyError> {
    load_at(config, config.shadow.as_deref(), specs)
}

/// The Cedar policy at `path`, if any, with the configuration's windows.
fn load_at(
    config: &Config,
    path: Option<&Path>,
    specs: &[ToolSpec],
) -> Result<Option<CedarPolicy>, ProxyError> {
    let windows: Vec<String> = config.windows.keys().cloned().collect();
    let principal = match config.oauth {
        Some(_) => crate::oauth::SUBJECT_LABEL,
        None => PRINCIPAL_LABEL,
    };
    path.map(|path| {
        cedar_from_file(path, specs, &windows).map(|p| p.with_principal_label(principal))
    })
    .transpose()
}

/// The Cedar policy in `path`, validated against `specs`, with
/// `context.recent` holding each of `windows`.
pub fn cedar_from_file(
    path: &Path,
    specs: &[ToolSpec],
    windows: &[String],
) -> Result<CedarPolicy, ProxyError> {
    let refused = |detail: String| ProxyError::Cedar {
        path: path.to_owned(),
        detail,
    };
    let bytes = private_file::read(path, Others::MayRead, MAX_CEDAR_BYTES)
        .map_err(|e| refused(e.detail()))?;
    let text = String::from_utf8(bytes).map_err(|_| refused("not UTF-8 text".into()))?;
    let windows: Vec<&str> = windows.iter().map(String::as_str).collect();
    let policy =
        CedarPolicy::with_windows(&text, specs, &windows).map_err(|e| refused(e.to_string()))?;
    Ok(policy
        .with_principal_label(PRINCIPAL_LABEL)
        .with_resource_label(RESOURCE_LABEL))
}

/// The specs each server's pinned manifest would offer under its rules.
pub(crate) fn pinned_offer(config: &Config) -> Result<Vec<ToolSpec>, ProxyError> {
    let mut specs = Vec::new();
    for server in &config.servers {
        let manifest = agentrt_mcp::read_manifest(&server.manifest)?;
        specs.extend(agentrt_mcp::pinned_specs(
            &server.server.name,
            &manifest,
            &crate::check::mcp_rules(server),
            server.server.default_timeout,
        ));
    }
    Ok(specs)
}

/// `tools`: the pinned offer as a JSON array of tool specs, one line.
pub(crate) fn print_offer(config: &Config, out: &mut dyn std::io::Write) -> Result<(), ProxyError> {
    let specs = pinned_offer(config)?;
    let text = serde_json::to_string(&specs).map_err(|e| ProxyError::Write {
        path: std::path::PathBuf::new(),
        detail: e.to_string(),
    })?;
    writeln!(out, "{text}").map_err(crate::pin::output_error)
}
