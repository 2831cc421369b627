//! Reaching a server (design §24): over stdio, a child process (see
//! [`crate::process`]: only the environment the operator named, its own
//! process group, stopped in stages on close, under our supervisor where
//! one is named); over streamable HTTP, our own client. The handshake and
//! the whole tool listing run under one connect bound; the listing is
//! pinned from the raw bytes the server sent.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::Timestamp;
use agentrt::text::sanitize;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{Peer, RoleClient, RunningService, serve_client};
use rmcp::transport::IntoTransport;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use crate::capture::{Capture, TeeReader, TeeWriter};
use crate::error::McpError;
use crate::http_client::{HttpClient, MAX_BODY};
use crate::listing::Listing;
use crate::manifest::{ListedTool, Manifest};
use crate::process::ServerProcess;
use crate::server::{Endpoint, Server};

/// The oldest protocol version accepted (rmcp does not check).
const OLDEST_VERSION: &str = "2025-06-18";

/// How long close waits for rmcp's own shutdown (over HTTP, the
/// session's deletion).
const PROTOCOL_CLOSE_WAIT: Duration = Duration::from_secs(2);

/// An open connection to one server, shared by the tools load offers;
/// the consumer closes it (there is no reconnect).
pub struct Connection {
    server: String,
    cap: usize,
    peer: Peer<RoleClient>,
    running: tokio::sync::Mutex<Option<Service>>,
    /// The child, for a stdio server.
    process: Option<ServerProcess>,
    closed: AtomicBool,
    capture: Arc<Capture>,
}

/// rmcp's running client.
type Service = RunningService<RoleClient, Client>;

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.server)
            .finish()
    }
}

/// This client's side of the protocol: it identifies itself and refuses
/// every request a server makes of it that only a person could answer.
/// Sampling is refused by rmcp's default; an elicitation, which rmcp
/// would decline (an answer of a kind), is refused here as a method this
/// client does not have.
struct Client {
    config: ClientConfig,
}

impl rmcp::ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    fn create_elicitation(
        &self,
        _request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> impl Future<Output = Result<rmcp::model::ElicitResult, rmcp::ErrorData>>
    + rmcp::service::MaybeSendFuture
    + '_ {
        std::future::ready(Err(rmcp::ErrorData::method_not_found::<
            rmcp::model::ElicitationCreateRequestMethod,
        >()))
    }
}

/// The identity sent to servers.
fn client_config() -> ClientConfig {
    let mut identity = Implementation::default();
    identity.name = "agent-runtime".into();
    identity.version = "0.1.0".into();
    identity.title = None;
    identity.description = None;
    identity.icons = None;
    identity.website_url = None;
    ClientConfig::new(ClientCapabilities::default(), identity)
}

/// Connects to `server`, negotiates, and checks the version; the whole
/// under the server's connect bound.
///
/// Over stdio the child gets only the environment [`Server::child_env`]
/// names and runs in its own process group (a terminal's Ctrl-C reaches
/// this process, not the server). On Linux, under the supervisor
/// [`Server::supervisor`] names (see [`supervise`](mod@crate::supervise)),
/// the server and every descendant die when this process does, however it
/// ends; without one, the server alone is killed when the thread that
/// started it ends: call this from a thread that lives as long as the
/// connection (a runtime worker or the main thread, not a blocking-pool
/// thread, which ends when idle). Over streamable HTTP the client follows
/// no redirect, takes no proxy from the environment, caps every response
/// body at 16 MiB, and never re-initializes an expired session.
pub async fn connect(server: &Server) -> Result<Connection, McpError> {
    server.validate()?;
    let capture = Arc::new(Capture::default());
    let (client, process) = match &server.endpoint {
        Endpoint::Command(argv) => {
            let (client, process) = connect_stdio(server, argv, &capture).await?;
            (client, Some(process))
        }
        Endpoint::Url(url) => (connect_http(server, url, &capture).await?, None),
    };
    let version = client
        .peer_info()
        .map(|info| info.protocol_version.clone())
        .unwrap_or_else(|| ProtocolVersion::V_2024_11_05);
    let connection = Connection {
        server: server.name.clone(),
        cap: server.max_content_bytes(),
        peer: client.peer().clone(),
        running: tokio::sync::Mutex::new(Some(client)),
        process,
        closed: AtomicBool::new(false),
        capture,
    };
    if version.as_str() < OLDEST_VERSION {
        connection.close().await;
        return Err(connection.connect_error(format!(
            "the server negotiated protocol version {}, older than {OLDEST_VERSION}",
            sanitize(version.as_str())
        )));
    }
    Ok(connection)
}

/// The initialize handshake over `transport`, under `bound`; a failure
/// says which step and why.
async fn handshake<T, E, A>(bound: Duration, transport: T) -> Result<Service, String>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let client = Client {
        config: client_config(),
    };
    match tokio::time::timeout(bound, serve_client(client, transport)).await {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(e)) => Err(format!("connect: {}", sanitize(&e.to_string()))),
        Err(_) => Err(format!("connect: timed out after {}", seconds(bound))),
    }
}

/// Starts the server's command and runs the handshake over its stdio.
async fn connect_stdio(
    server: &Server,
    argv: &[String],
    capture: &Arc<Capture>,
) -> Result<(Service, ServerProcess), McpError> {
    let fail = |detail: String| McpError::Connect {
        server: server.name.clone(),
        detail,
    };
    let started = crate::process::start(server, argv).map_err(fail)?;
    let reader = TeeReader::new(started.stdout, Arc::clone(capture));
    let writer = TeeWriter::new(started.stdin, Arc::clone(capture));
    let process = started.process;
    match handshake(server.connect_timeout(), (reader, writer)).await {
        Ok(service) => Ok((service, process)),
        Err(detail) => {
            process.kill().await;
            Err(fail(with_stderr_tail(process.stderr(), detail).await))
        }
    }
}

/// Runs the handshake with the server at `url` over our own HTTP client.
async fn connect_http(
    server: &Server,
    url: &str,
    capture: &Arc<Capture>,
) -> Result<Service, McpError> {
    let fail = |detail: String| McpError::Connect {
        server: server.name.clone(),
        detail,
    };
    let client = HttpClient::new(Arc::clone(capture))
        .map_err(|e| fail(format!("cannot build the HTTP client: {e}")))?;
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
        .reinit_on_expired_session(false);
    config.max_json_response_size = MAX_BODY;
    config.max_sse_event_size = MAX_BODY;
    let transport = StreamableHttpClientTransport::with_client(client, config);
    handshake(server.connect_timeout(), transport)
        .await
        .map_err(fail)
}

/// `detail`, then the last of the child's stderr (quoted, sanitized),
/// waiting up to 2 s for the pipe to close.
async fn with_stderr_tail(stderr: &Arc<Mutex<Vec<u8>>>, detail: String) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while Arc::strong_count(stderr) > 1 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let tail = stderr.lock().map(|t| t.clone()).unwrap_or_default();
    let tail = String::from_utf8_lossy(&tail);
    let tail = tail.trim();
    if tail.is_empty() {
        detail
    } else {
        format!("{detail}; its stderr ends: \"{}\"", sanitize(tail))
    }
}

/// `30s`, `1.5s`: a bound as people write it.
pub(crate) fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs_f64())
}

impl Connection {
    /// Lists every tool, page by page, from the raw results the server
    /// sent (see [`Listing`]); rmcp's own reading must name the same tools.
    pub async fn list_tools(&self) -> Result<Vec<ListedTool>, McpError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(self.connect_error("the connection is closed".into()));
        }
        let client = &self.peer;
        let mut listing = Listing::new(&self.server);
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor.clone().map(|c| {
                let mut p = PaginatedRequestParams::default();
                p.cursor = Some(c);
                p
            });
            let page = client.list_tools(params).await.map_err(|e| {
                self.connect_error(format!("list tools: {}", sanitize(&e.to_string())))
            })?;
            let raw = self.capture.take_list_result().ok_or_else(|| {
                self.connect_error("list tools: the server's reply was not seen on the wire".into())
            })?;
            let before = listing.len();
            let next = listing.add_page(&raw)?;
            let raw_names: HashSet<&str> = listing.names_since(before).collect();
            if let Some(missing) = page
                .tools
                .iter()
                .find(|t| !raw_names.contains(t.name.as_ref()))
            {
                return Err(self.connect_error(format!(
                    "list tools: tool {:?} is missing from the page as sent",
                    sanitize(&missing.name)
                )));
            }
            match next {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        Ok(listing.finish())
    }

    /// The id of the process this connection started, while it runs: the
    /// server's, or its supervisor's when one is named (none over HTTP).
    pub async fn process_id(&self) -> Option<u32> {
        self.process.as_ref()?.id().await
    }

    fn connect_error(&self, detail: String) -> McpError {
        McpError::Connect {
            server: self.server.clone(),
            detail,
        }
    }

    /// `detail` with the tail of the child's stderr, the child stopped.
    async fn with_stderr(&self, detail: String) -> String {
        match &self.process {
            Some(process) => {
                process.kill().await;
                with_stderr_tail(process.stderr(), detail).await
            }
            None => detail,
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Whether [`Connection::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The most bytes of a call's recorded content.
    pub(crate) fn content_cap(&self) -> usize {
        self.cap
    }

    pub(crate) fn peer(&self) -> &Peer<RoleClient> {
        &self.peer
    }

    pub(crate) fn capture(&self) -> &Capture {
        &self.capture
    }

    /// Closes the connection. Over stdio, the normal shutdown in stages
    /// (design §24): the server's stdin closed and up to
    /// [`SHUTDOWN_EOF_WAIT`](crate::SHUTDOWN_EOF_WAIT) for it to exit,
    /// then SIGTERM to its process group and up to
    /// [`SHUTDOWN_TERM_WAIT`](crate::SHUTDOWN_TERM_WAIT), then killed
    /// (under a supervisor, the supervisor's lifeline ended, so it kills
    /// the server's group and every descendant; then SIGKILL to the
    /// group), up to [`SHUTDOWN_KILL_WAIT`](crate::SHUTDOWN_KILL_WAIT)
    /// each; whatever stage it ends in, the group is SIGKILLed last, so
    /// its descendants die too. Over HTTP, rmcp's shutdown deletes the
    /// session. Bounded (about 10 s at worst); safe to call twice,
    /// concurrently, and during a call (which then fails, its outcome
    /// unknown).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(process) = &self.process {
            // First, so that rmcp's shutdown finds no write waiting on a
            // server that does not read.
            process.close_stdin();
        }
        if let Some(client) = self.running.lock().await.take() {
            let _ = tokio::time::timeout(PROTOCOL_CLOSE_WAIT, client.cancel()).await;
        }
        if let Some(process) = &self.process {
            process.stop().await;
        }
    }
}

/// Pins `server` as of `pinned_at`: connects, lists every tool, records
/// them, closes; the connect and listing under the connect bound.
pub async fn pin(server: &Server, pinned_at: Timestamp) -> Result<Manifest, McpError> {
    let bound = server.connect_timeout();
    let connection = connect(server).await?;
    let listed = tokio::time::timeout(bound, connection.list_tools()).await;
    let result = match listed {
        Ok(Ok(tools)) => Manifest::pin(&server.name, pinned_at, &tools),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(McpError::Connect {
            server: server.name.clone(),
            detail: connection
                .with_stderr(format!("list tools: timed out after {}", seconds(bound)))
                .await,
        }),
    };
    connection.close().await;
    result
}
