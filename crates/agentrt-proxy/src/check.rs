//! `agentrt-proxy check` (design §19): everything opened and loaded as
//! serving would, and each server's report printed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use agentrt::{Store, Tool};
use agentrt_mcp::{Connection, McpError, Rules, load, read_manifest};

use crate::config::Config;
use crate::database::Database;
use crate::error::ProxyError;
use crate::pin::output_error;
use crate::reach::check_reach;

/// How many of the session's newest calls `check` counts a shadow
/// policy's disagreements over (one count each).
const SHADOW_COUNTED_CALLS: u64 = 1_000;

/// What a load of every server gives.
pub struct LoadedServers {
    /// Each server's report text, in the configuration's order.
    pub reports: Vec<String>,
    /// The servers that offer nothing, with why.
    pub failed: Vec<(String, String)>,
    /// Every tool offered, by its model-visible name.
    pub tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Each offered tool's server and the server's own name for it.
    pub origins: BTreeMap<String, (String, String)>,
    /// The open connections.
    pub connections: Vec<Arc<Connection>>,
}

impl LoadedServers {
    /// Closes every connection, all at once: each stops its server in
    /// stages (a few seconds for a server that does not exit at the end of
    /// its stdin), so the whole takes no longer than the slowest.
    pub async fn close(&self) {
        let mut closing = tokio::task::JoinSet::new();
        for c in &self.connections {
            let c = Arc::clone(c);
            closing.spawn(async move { c.close().await });
        }
        while closing.join_next().await.is_some() {}
    }
}

/// The adapter's rules of a server's configured rules.
pub(crate) fn mcp_rules(server: &crate::config::ServerConfig) -> Rules {
    server
        .rules
        .iter()
        .map(|(tool, rule)| (tool.clone(), rule.rule.clone()))
        .collect()
}

/// Loads every server of `config`. A server that offers nothing (or
/// cannot be reached) is reported in `failed`; a model-visible name
/// offered twice, or taken by the status tool, refuses the whole load.
pub async fn load_all(config: &Config) -> Result<LoadedServers, ProxyError> {
    let mut loaded = LoadedServers {
        reports: Vec::new(),
        failed: Vec::new(),
        tools: BTreeMap::new(),
        origins: BTreeMap::new(),
        connections: Vec::new(),
    };
    for server in &config.servers {
        let name = server.server.name.clone();
        let manifest = read_manifest(&server.manifest)?;
        match load(&server.server, &manifest, &mcp_rules(server)).await {
            Ok(l) => {
                loaded.reports.push(l.report.text());
                for r in &l.report.registered {
                    loaded
                        .origins
                        .insert(r.name.clone(), (name.clone(), r.tool.clone()));
                }
                loaded.connections.push(Arc::clone(&l.connection));
                for tool in l.tools {
                    let visible = tool.spec().name.clone();
                    if visible == config.status_tool {
                        loaded.close().await;
                        return Err(clash(config, &visible, "the status tool"));
                    }
                    if loaded.tools.insert(visible.clone(), tool).is_some() {
                        loaded.close().await;
                        return Err(clash(config, &visible, "another server's tool"));
                    }
                }
            }
            Err(McpError::NoToolOffered { report, .. }) => {
                loaded.reports.push(report.text());
                loaded.failed.push((name, "registers no tool".to_owned()));
            }
            Err(e) => {
                loaded.failed.push((name, e.to_string()));
            }
        }
    }
    Ok(loaded)
}

fn clash(config: &Config, name: &str, other: &str) -> ProxyError {
    ProxyError::Config {
        path: config.path.clone(),
        detail: format!("the tool name {name:?} is also {other}'s; rename one"),
    }
}

/// Refuses a database path that names a symlink or anything but a
/// regular file (a missing one is created by the store). Checked before
/// the store opens it and again after, so a file swapped in between is
/// caught; the store checks who owns and may write it.
fn check_database_file(path: &std::path::Path) -> Result<(), ProxyError> {
    let bad = |detail: String| ProxyError::Database {
        path: path.to_owned(),
        detail,
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(bad(e.to_string())),
        Ok(meta) if meta.file_type().is_symlink() => Err(bad(
            "is a symbolic link; name the database file itself".into(),
        )),
        Ok(meta) if !meta.is_file() => Err(bad("is not a regular file".into())),
        Ok(_) => Ok(()),
    }
}

/// Opens the database as serving does (created owner-only when missing,
/// with the proxy's index), the path checked before and after.
pub async fn open_store(config: &Config) -> Result<Store, ProxyError> {
    let options = crate::index::store_options(config.durability);
    let database = config.database.clone();
    tokio::task::spawn_blocking(move || match &database {
        Database::File(path) => {
            check_database_file(path)?;
            let store = Store::open_with(path, options)?;
            check_database_file(path)?;
            Ok::<_, ProxyError>(store)
        }
        Database::Postgres(url) => Ok(Database::open_postgres(url, options, true)?),
    })
    .await
    .map_err(|e| config.database.error(e.to_string()))?
}

/// Runs `check`: the reach check, the database, every server; prints each
/// report, the status tool, the session and the database. Whether every
/// server offers at least one tool.
pub async fn check(config: &Config, out: &mut dyn Write) -> Result<bool, ProxyError> {
    check_reach(config)?;
    let store = open_store(config).await?;
    let loaded = load_all(config).await?;
    loaded.close().await;
    for report in &loaded.reports {
        out.write_all(report.as_bytes()).map_err(output_error)?;
    }
    for (server, why) in &loaded.failed {
        writeln!(
            out,
            "server {}: {}",
            agentrt::text::sanitize(server),
            agentrt::text::sanitize(why)
        )
        .map_err(output_error)?;
    }
    // The Cedar policy validated against what serving would offer: a
    // policy naming an argument no tool has is refused here, not at the
    // first call.
    let offered: Vec<agentrt::ToolSpec> = loaded.tools.values().map(|t| t.spec()).collect();
    let validated = |what: &str, path: Option<&Path>, identity: &str, tail: &str| {
        format!(
            "{what}: cedar {} validated against {} tool(s) ({identity}){tail}",
            path.unwrap_or(Path::new("")).display(),
            offered.len()
        )
    };
    if let Some(cedar) = crate::cedar::load_cedar(config, &offered)? {
        let said = validated("policy", config.cedar.as_deref(), cedar.identity(), "");
        writeln!(out, "{said}").map_err(output_error)?;
    }
    if let Some(shadow) = crate::cedar::load_shadow(config, &offered)? {
        let said = validated(
            "shadow policy",
            config.shadow.as_deref(),
            shadow.identity(),
            "; its disagreements are recorded, never enforced",
        );
        writeln!(out, "{said}").map_err(output_error)?;
        let session = config.session.clone();
        let (calls, disagreed) = store
            .off_executor(move |store| {
                let runs = crate::index::newest_runs(store, &session, SHADOW_COUNTED_CALLS)?;
                let mut disagreed = 0;
                for run in &runs {
                    disagreed += store.event_count(run, &agentrt::EventType::PolicyShadow)?;
                }
                Ok((runs.len(), disagreed))
            })
            .await?;
        writeln!(
            out,
            "shadow policy: disagreed with {disagreed} of the session's last {calls} call(s)"
        )
        .map_err(output_error)?;
    }
    writeln!(out, "status tool: {}", config.status_tool).map_err(output_error)?;
    writeln!(out, "session: {}", config.session).map_err(output_error)?;
    writeln!(out, "database: {}", config.database).map_err(output_error)?;
    Ok(loaded.failed.is_empty())
}
