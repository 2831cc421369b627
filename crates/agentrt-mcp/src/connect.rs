//! Reaching a server (periphery §3.1): over stdio, a child process with
//! only the environment the operator named, in its own process group and
//! killed with its descendants on close; over streamable HTTP, our own
//! client. The handshake and the whole tool listing run under one connect
//! bound; the listing is pinned from the raw bytes the server sent.

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
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStderr, Command};

use crate::capture::{Capture, TeeReader, TeeWriter};
use crate::error::McpError;
use crate::http_client::{HttpClient, MAX_BODY};
use crate::listing::Listing;
use crate::manifest::{ListedTool, Manifest};
use crate::server::{Endpoint, Server};

/// The oldest protocol version accepted (rmcp does not check).
const OLDEST_VERSION: &str = "2025-06-18";

/// How much of a child's stderr is kept for errors.
const STDERR_TAIL: usize = 4096;

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

/// A stdio server's process and the tail of its stderr.
struct ServerProcess {
    child: tokio::sync::Mutex<Child>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

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
/// names, runs in its own process group (a terminal's Ctrl-C reaches this
/// process, not the server) and, on Linux, is killed when the thread that
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
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| fail("the command is empty".into()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        // The OS's own strings: a variable that is not UTF-8 is passed
        // through or left out by name, never a panic.
        .envs(server.child_env(std::env::vars_os()))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    #[cfg(target_os = "linux")]
    // SAFETY: between fork and exec only async-signal-safe calls are made:
    // prctl, which sets this child's parent-death signal so the server
    // dies when this process does, however it ends.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| fail(format!("cannot start {program:?}: {e}")))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(fail("the child's pipes are missing".into()));
    };
    let stderr = keep_stderr_tail(stderr);
    let reader = TeeReader::new(stdout, Arc::clone(capture));
    let writer = TeeWriter::new(stdin, Arc::clone(capture));
    match handshake(server.connect_timeout(), (reader, writer)).await {
        Ok(service) => Ok((
            service,
            ServerProcess {
                child: tokio::sync::Mutex::new(child),
                stderr,
            },
        )),
        Err(detail) => Err(fail(stop_child(&mut child, &stderr, detail).await)),
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

/// Kills a child whose handshake failed and returns `detail` with the
/// tail of its stderr.
async fn stop_child(child: &mut Child, stderr: &Arc<Mutex<Vec<u8>>>, detail: String) -> String {
    kill_group(child);
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    with_stderr_tail(stderr, detail).await
}

/// SIGKILLs the process group `child` leads (it was started in its own),
/// so its descendants die too.
fn kill_group(child: &Child) {
    #[cfg(unix)]
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill has no memory preconditions; a negative pid names
        // the group the child leads.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
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

    /// The server process's id, while it runs (none over HTTP).
    pub async fn process_id(&self) -> Option<u32> {
        self.process.as_ref()?.child.lock().await.id()
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
                kill_group(&*process.child.lock().await);
                with_stderr_tail(&process.stderr, detail).await
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

    /// Closes the connection: rmcp's shutdown (over HTTP, the session is
    /// deleted), then a child's whole process group is killed, so its
    /// descendants die too. Safe to call
    /// twice, concurrently, and during a call (which then fails).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(client) = self.running.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), client.cancel()).await;
        }
        if let Some(process) = &self.process {
            let mut child = process.child.lock().await;
            kill_group(&child);
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
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

/// Keeps the last [`STDERR_TAIL`] bytes of a child's stderr; the handle
/// is dropped by the reader when the pipe closes.
fn keep_stderr_tail(mut stderr: ChildStderr) -> Arc<Mutex<Vec<u8>>> {
    let tail = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&tail);
    tokio::spawn(async move {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buf).await {
            if n == 0 {
                break;
            }
            if let Ok(mut t) = kept.lock() {
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(STDERR_TAIL);
                t.drain(..excess);
            }
        }
    });
    tail
}
