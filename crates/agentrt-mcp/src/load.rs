//! Load (design §26): the operator's files checked, the server reached
//! and listed, each pinned tool checked on its own, and the tools offered
//! as the core's [`Tool`]s over one shared connection.

use std::sync::Arc;

use agentrt::Tool;

use crate::check::{check_files, check_tools};
use crate::connect::{Connection, connect, seconds};
use crate::error::McpError;
use crate::manifest::Manifest;
use crate::report::Report;
use crate::rules::Rules;
use crate::server::Server;
use crate::tool::McpTool;

/// What load offers: the tools (for [`agentrt::GateConfig`]), the report,
/// and the connection they share, which the consumer closes.
pub struct Loaded {
    /// The tools offered, in the server's name order.
    pub tools: Vec<Arc<dyn Tool>>,
    /// Per tool, offered or why not.
    pub report: Report,
    /// The connection the tools share (no reconnect).
    pub connection: Arc<Connection>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("tools", &self.tools.len())
            .field("report", &self.report)
            .finish()
    }
}

/// Loads `server`'s tools as pinned in `manifest` and ruled by `rules`.
/// Refused before connecting: an invalid description, a manifest for
/// another server, rules naming unpinned tools. The connect, the listing
/// and the checks run under the connect bound; a failing tool is refused
/// alone; none offered at all is [`McpError::NoToolOffered`] (with the
/// report; the connection is closed).
pub async fn load(server: &Server, manifest: &Manifest, rules: &Rules) -> Result<Loaded, McpError> {
    server.validate()?;
    check_files(&server.name, manifest, rules)?;
    let bound = server.connect_timeout();
    let connection = Arc::new(connect(server).await?);
    let listed = tokio::time::timeout(bound, connection.list_tools()).await;
    let live = match listed {
        Ok(Ok(live)) => live,
        Ok(Err(e)) => {
            connection.close().await;
            return Err(e);
        }
        Err(_) => {
            connection.close().await;
            return Err(McpError::Load {
                server: server.name.clone(),
                detail: format!("timed out after {}", seconds(bound)),
            });
        }
    };
    let (offered, report) =
        check_tools(&server.name, manifest, rules, &live, server.default_timeout);
    if offered.is_empty() {
        connection.close().await;
        return Err(McpError::NoToolOffered {
            server: server.name.clone(),
            report: Box::new(report),
        });
    }
    let tools = offered
        .into_iter()
        .map(|o| Arc::new(McpTool::new(Arc::clone(&connection), o)) as Arc<dyn Tool>)
        .collect();
    Ok(Loaded {
        tools,
        report,
        connection,
    })
}
