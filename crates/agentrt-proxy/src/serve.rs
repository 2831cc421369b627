//! `agentrt-proxy serve` (design §28, stdio): the proxy as an MCP
//! server named `gated-tools`, offering the loaded tools and answering
//! each call through [`Proxy`]. stdout carries only the protocol; the
//! reports and notices go to stderr. It offers protocol versions
//! 2025-06-18 and 2025-11-25 only, both of which open a session with the
//! initialize handshake.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use agentrt::{Gate, GateConfig, Store, Tool, ToolSpec};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ProtocolVersion,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};

use crate::answer::Answer;
use crate::call::Proxy;
use crate::caller::Caller;
use crate::check::{LoadedServers, load_all};
use crate::config::Config;
use crate::error::ProxyError;
use crate::oauth::Identity;
use crate::policy::{ProxyPolicy, ToolFacts};
use crate::raw_args::{RawArguments, TeeInput};
use crate::reach::check_reach;

/// The protocol versions offered.
pub const PROTOCOL_VERSIONS: &[ProtocolVersion] =
    &[ProtocolVersion::V_2025_06_18, ProtocolVersion::V_2025_11_25];

/// A tool registered as terminal: one call per run, so a success completes
/// the run with its result.
struct Terminal(Arc<dyn Tool>);

impl Tool for Terminal {
    fn spec(&self) -> ToolSpec {
        let mut spec = self.0.spec();
        spec.terminal = true;
        spec
    }

    fn call(
        &self,
        call: agentrt::ToolCall,
    ) -> agentrt::BoxFuture<'_, Result<agentrt::ToolResult, agentrt::ToolError>> {
        self.0.call(call)
    }
}

/// The proxy as an MCP server.
#[derive(Clone)]
pub struct ProxyServer {
    proxy: Arc<Proxy>,
    tools: Arc<Vec<rmcp::model::Tool>>,
    raw: Arc<RawArguments>,
}

impl ProxyServer {
    /// The server over `proxy`; the host's raw arguments are found in
    /// `raw` (see [`TeeInput`]).
    pub fn new(proxy: Arc<Proxy>, raw: Arc<RawArguments>) -> ProxyServer {
        let tools = proxy
            .specs()
            .values()
            .filter_map(|spec| {
                // Load refuses a tool whose schema serde_json cannot read
                // (check names it), so this leaves nothing out; it never
                // offers a tool with a schema other than its own, `{}`.
                let schema: serde_json::Map<String, serde_json::Value> =
                    serde_json::from_str(spec.input_schema.as_str()).ok()?;
                Some(rmcp::model::Tool::new(
                    spec.name.clone(),
                    spec.description.clone(),
                    Arc::new(schema),
                ))
            })
            .chain(std::iter::once(status_tool(proxy.status_tool())))
            .collect();
        ProxyServer {
            proxy,
            tools: Arc::new(tools),
            raw,
        }
    }
}

/// The status tool as the host sees it.
fn status_tool(name: &str) -> rmcp::model::Tool {
    let schema: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(crate::status::STATUS_SCHEMA).unwrap_or_default();
    rmcp::model::Tool::new(
        name.to_owned(),
        crate::status::STATUS_DESCRIPTION,
        Arc::new(schema),
    )
}

/// An answer as the host receives it.
fn to_result(answer: Answer) -> CallToolResult {
    match answer {
        Answer::Result {
            text,
            structured,
            edited,
        } => {
            let mut content = Vec::with_capacity(2);
            content.extend(edited.map(ContentBlock::text));
            content.push(ContentBlock::text(text));
            let mut result = CallToolResult::success(content);
            result.structured_content = structured;
            result
        }
        Answer::Prose { text, is_error } => {
            let content = vec![ContentBlock::text(text)];
            if is_error {
                CallToolResult::error(content)
            } else {
                CallToolResult::success(content)
            }
        }
    }
}

impl ServerHandler for ProxyServer {
    fn get_info(&self) -> ServerConfig {
        let mut identity = Implementation::default();
        identity.name = "gated-tools".into();
        identity.version = "0.1.0".into();
        identity.title = None;
        identity.description = None;
        identity.icons = None;
        identity.website_url = None;
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(identity)
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(PROTOCOL_VERSIONS)
    }

    fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<rmcp::model::DiscoverResult, ErrorData>>
    + rmcp::service::MaybeSendFuture
    + '_ {
        // Answering it would let a client pick 2026-07-28, which has no
        // session: a client that gets no answer falls back to initialize.
        std::future::ready(Err(ErrorData::method_not_found::<
            rmcp::model::DiscoverRequestMethod,
        >()))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Over HTTP: the request's parts, with the raw arguments its body
        // held and the session it belongs to.
        let parts = context.extensions.get::<http::request::Parts>();
        let http_raw = parts.and_then(|p| p.extensions.get::<Arc<RawArguments>>());
        let http_session = parts
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok());
        // The bytes the host wrote; rmcp's reading only when they were
        // not seen (a line past the cap, too many calls waiting).
        let raw = match http_raw {
            Some(raw) => raw.take(&context.id),
            None => self.raw.take(&context.id),
        };
        let args = match raw {
            Some(raw) => raw.map(String::into_bytes),
            None => match &request.arguments {
                None => None,
                Some(map) => Some(
                    serde_json::to_vec(map)
                        .map_err(|e| ErrorData::invalid_params(e.to_string(), None))?,
                ),
            },
        };
        let identity = parts
            .and_then(|p| p.extensions.get::<Arc<Identity>>())
            .map(Arc::clone);
        if request.name == self.proxy.status_tool() {
            let answer = self.proxy.status_for(args.as_deref(), identity).await;
            return Ok(CallToolResponse::Complete(to_result(answer)));
        }
        let mut caller = host_side(&context);
        caller.http_session = http_session.map(str::to_owned);
        caller.identity = identity;
        match self
            .proxy
            .call_as(&request.name, args.as_deref(), &mut caller)
            .await
        {
            Some(answer) => Ok(CallToolResponse::Complete(to_result(answer))),
            None => Err(ErrorData::invalid_params(
                format!("no tool named {:?} is offered", request.name),
                None,
            )),
        }
    }
}

/// The host's side of a call: told a held call's progress when it sent a
/// progress token; gone when it cancels the request or its session ends.
fn host_side(context: &RequestContext<RoleServer>) -> Caller {
    let mut caller = Caller::default().gone_when(context.ct.clone().cancelled_owned());
    if let Some(token) = context.meta.get_progress_token() {
        let peer = context.peer.clone();
        caller = caller.with_progress(Box::new(move |waited, hold| {
            let (peer, token) = (peer.clone(), token.clone());
            Box::pin(async move {
                let progress = ProgressNotificationParam::new(token, waited as f64)
                    .with_total(hold as f64)
                    .with_message("waiting for an operator's approval");
                // A host that cannot be told is not waited for.
                let _ = peer.notify_progress(progress).await;
            })
        }));
    }
    caller
}

/// Builds the proxy from `config` and what `loaded` offers.
pub fn build_proxy(
    config: Arc<Config>,
    store: Store,
    loaded: &LoadedServers,
    notices: Box<dyn Write + Send>,
) -> Result<Proxy, ProxyError> {
    let mut facts = BTreeMap::new();
    let mut specs = BTreeMap::new();
    let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
    for (name, tool) in &loaded.tools {
        let Some((server, upstream)) = loaded.origins.get(name) else {
            continue;
        };
        let rule = config
            .servers
            .iter()
            .find(|s| &s.server.name == server)
            .and_then(|s| s.rules.get(upstream));
        facts.insert(
            name.clone(),
            ToolFacts {
                server: server.clone(),
                upstream: upstream.clone(),
                outcome: rule.and_then(|r| r.outcome),
                fixed: rule.map(|r| r.rule.fixed.clone()).unwrap_or_default(),
                approvers: rule.map_or(1, |r| r.approvers),
            },
        );
        let terminal: Arc<dyn Tool> = Arc::new(Terminal(Arc::clone(tool)));
        specs.insert(name.clone(), terminal.spec());
        tools.push(terminal);
    }
    let reruns: crate::policy::Reruns = Arc::default();
    let offered: Vec<ToolSpec> = specs.values().cloned().collect();
    let cedar = crate::cedar::load_cedar(&config, &offered)?;
    let shadow = crate::cedar::load_shadow(&config, &offered)?
        .map(|c| ProxyPolicy::with_cedar(&config, facts.clone(), Arc::clone(&reruns), Some(c)));
    let policy = ProxyPolicy::with_cedar(&config, facts, Arc::clone(&reruns), cedar);
    let mut gate_config = GateConfig::new(store, policy, tools)
        .with_lease_ttl(config.lease_ttl)
        .with_lease_owner(format!("agentrt-proxy:{}", config.session));
    if let Some(shadow) = shadow {
        gate_config = gate_config.with_shadow(shadow);
    }
    let gate = Gate::new(gate_config)?;
    Ok(Proxy::new(
        gate,
        config,
        specs,
        loaded.origins.clone(),
        reruns,
        notices,
    ))
}

/// Serves one host over stdin and stdout until stdin closes or the
/// process is told to stop (SIGINT, SIGTERM); then in-flight calls finish
/// and are recorded, and the upstream servers are closed.
pub async fn serve_stdio(config: Config, err: &mut dyn Write) -> Result<(), ProxyError> {
    let (proxy, loaded, config) = start(config, err).await?;
    let _ = writeln!(
        err,
        "agentrt-proxy: serving session {} on database {}",
        config.session, config.database
    );
    let raw = Arc::new(RawArguments::default());
    let input = TeeInput::new(tokio::io::stdin(), Arc::clone(&raw));
    let served = ProxyServer::new(Arc::clone(&proxy), raw)
        .serve((input, tokio::io::stdout()))
        .await;
    let result = match served {
        Ok(running) => {
            let stop = stop_signal();
            tokio::select! {
                _ = running.waiting() => Ok(()),
                () = stop => Ok(()),
            }
        }
        Err(e) => Err(ProxyError::Config {
            path: config.path.clone(),
            detail: format!("the host's handshake failed: {e}"),
        }),
    };
    land(&proxy, err).await;
    loaded.close().await;
    result
}

/// What serving starts from, over stdio or HTTP: the reach check, the
/// database, every server loaded (their reports on `err`; one that offers
/// nothing refuses the start), and the proxy built.
pub(crate) async fn start(
    config: Config,
    err: &mut dyn Write,
) -> Result<(Arc<Proxy>, LoadedServers, Arc<Config>), ProxyError> {
    // Files are looked at off the async workers.
    let reach = config.clone();
    file_work(&config, move || check_reach(&reach)).await?;
    let store = crate::check::open_store(&config).await?;
    let loaded = load_all(&config).await?;
    for report in &loaded.reports {
        for line in report.lines() {
            let _ = writeln!(err, "agentrt-proxy: {line}");
        }
    }
    if let Some((server, why)) = loaded.failed.first() {
        loaded.close().await;
        return Err(ProxyError::Config {
            path: config.path.clone(),
            detail: format!("server {server:?} {why}"),
        });
    }
    let config = Arc::new(config);
    match build_proxy(
        Arc::clone(&config),
        store,
        &loaded,
        Box::new(std::io::stderr()),
    ) {
        Ok(proxy) => Ok((Arc::new(proxy), loaded, config)),
        Err(e) => {
            loaded.close().await;
            Err(e)
        }
    }
}

/// Runs start-up file work (`work`) on a blocking thread, never on an
/// async worker.
pub(crate) async fn file_work<T: Send + 'static>(
    config: &Config,
    work: impl FnOnce() -> Result<T, ProxyError> + Send + 'static,
) -> Result<T, ProxyError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| ProxyError::Config {
            path: config.path.clone(),
            detail: e.to_string(),
        })?
}

/// Stops the proxy taking calls and waits for those in flight to finish
/// and be recorded (each within its tool's timeout).
pub(crate) async fn land(proxy: &Proxy, err: &mut dyn Write) {
    proxy.stop();
    let _ = writeln!(
        err,
        "agentrt-proxy: stopping: the calls in flight finish and are recorded"
    );
    proxy.landed().await;
    let dropped = proxy.dropped_notices();
    if dropped > 0 {
        let _ = writeln!(
            err,
            "agentrt-proxy: {dropped} approval notice(s) were dropped: stderr was not read fast enough (`agentrt runs` lists what waits)"
        );
    }
}

/// Resolves on SIGINT or SIGTERM (Ctrl-C elsewhere).
pub(crate) async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An edited call's result reaches the host as two text blocks, the
    /// edit first; the result's structure is the tool's alone.
    #[test]
    fn an_edited_result_is_said_in_a_block_before_the_result() {
        let result = to_result(Answer::Result {
            text: r#"{"n":1}"#.into(),
            structured: Some(serde_json::json!({"n": 1})),
            edited: Some("EDITED: changed".into()),
        });
        let texts: Vec<String> = result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|t| t.text.clone()))
            .collect();
        assert_eq!(texts, ["EDITED: changed", r#"{"n":1}"#]);
        assert_eq!(result.structured_content, Some(serde_json::json!({"n": 1})));
        assert_eq!(result.is_error, Some(false));
    }
}
