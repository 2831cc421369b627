//! Reaching a server over stdio (periphery §3.1): a child process with
//! only the environment the operator named, in its own process group and
//! killed with its descendants on close; the handshake and the whole tool
//! listing under one connect bound; the listing pinned from the raw bytes
//! the server sent.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use agentrt::Timestamp;
use agentrt::text::sanitize;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams, ProtocolVersion,
};
use rmcp::service::{Peer, RoleClient, RunningService, serve_client};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::process::{Child, ChildStderr, Command};

use crate::error::McpError;
use crate::listing::Listing;
use crate::manifest::{ListedTool, Manifest};
use crate::server::{Endpoint, Server};

/// The oldest protocol version accepted (rmcp does not check).
const OLDEST_VERSION: &str = "2025-06-18";

/// How much of a child's stderr is kept for errors.
const STDERR_TAIL: usize = 4096;

/// The longest JSON-RPC line captured (rmcp's own cap).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// An open connection to one server, shared by the tools load offers;
/// the consumer closes it (there is no reconnect).
pub struct Connection {
    server: String,
    cap: usize,
    peer: Peer<RoleClient>,
    running: tokio::sync::Mutex<Option<RunningService<RoleClient, Client>>>,
    child: tokio::sync::Mutex<Child>,
    closed: AtomicBool,
    capture: Arc<Capture>,
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

/// Connects to `server` (stdio), negotiates, and checks the version; the
/// whole under the server's connect bound.
///
/// The child gets only the environment [`Server::child_env`] names, runs
/// in its own process group (a terminal's Ctrl-C reaches this process, not
/// the server) and, on Linux, is killed when the thread that started it
/// ends: call this from a thread that lives as long as the connection (a
/// runtime worker or the main thread, not a blocking-pool thread, which
/// ends when idle).
pub async fn connect(server: &Server) -> Result<Connection, McpError> {
    server.validate()?;
    let fail = |detail: String| McpError::Connect {
        server: server.name.clone(),
        detail,
    };
    let Endpoint::Command(argv) = &server.endpoint else {
        return Err(fail(
            "streamable HTTP is not built yet; describe a command".into(),
        ));
    };
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| fail("the command is empty".into()))?;
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .envs(server.child_env(std::env::vars()))
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
    let stderr_tail = keep_stderr_tail(stderr);
    let capture = Arc::new(Capture::default());
    let reader = TeeReader {
        inner: stdout,
        capture: Arc::clone(&capture),
        line: Vec::new(),
    };
    let writer = TeeWriter {
        inner: stdin,
        capture: Arc::clone(&capture),
        line: Vec::new(),
    };
    let bound = server.connect_timeout();
    let handshake = tokio::time::timeout(
        bound,
        serve_client(
            Client {
                config: client_config(),
            },
            (reader, writer),
        ),
    )
    .await;
    let client = match handshake {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => {
            let detail = format!("connect: {}", sanitize(&e.to_string()));
            return Err(fail(stop_child(&mut child, &stderr_tail, detail).await));
        }
        Err(_) => {
            let detail = format!("connect: timed out after {}", seconds(bound));
            return Err(fail(stop_child(&mut child, &stderr_tail, detail).await));
        }
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
        child: tokio::sync::Mutex::new(child),
        closed: AtomicBool::new(false),
        capture,
        stderr: stderr_tail,
    };
    if version.as_str() < OLDEST_VERSION {
        connection.close().await;
        return Err(fail(format!(
            "the server negotiated protocol version {}, older than {OLDEST_VERSION}",
            sanitize(version.as_str())
        )));
    }
    Ok(connection)
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

    /// The server process's id, while it runs.
    pub async fn process_id(&self) -> Option<u32> {
        self.child.lock().await.id()
    }

    fn connect_error(&self, detail: String) -> McpError {
        McpError::Connect {
            server: self.server.clone(),
            detail,
        }
    }

    /// `detail` with the tail of the child's stderr, the child stopped.
    async fn with_stderr(&self, detail: String) -> String {
        kill_group(&*self.child.lock().await);
        with_stderr_tail(&self.stderr, detail).await
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

    /// Closes the connection: rmcp's shutdown, then the child's whole
    /// process group is killed, so its descendants die too. Safe to call
    /// twice, concurrently, and during a call (which then fails).
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(client) = self.running.lock().await.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), client.cancel()).await;
        }
        let mut child = self.child.lock().await;
        kill_group(&child);
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
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

/// The `_meta` key a call is marked with, so its raw result can be found
/// on the wire.
pub(crate) const CALL_MARK: &str = "agentrt/call";

/// The most call results kept waiting for their callers.
const MAX_WAITING_RESULTS: usize = 1024;

/// The raw results of the `tools/list` and `tools/call` requests seen on
/// the wire.
#[derive(Default)]
pub(crate) struct Capture {
    state: Mutex<CaptureState>,
}

#[derive(Default)]
struct CaptureState {
    /// Ids (as JSON text) of `tools/list` requests sent, in order.
    list_ids: Vec<String>,
    /// Raw results received for them.
    results: HashMap<String, String>,
    /// The mark of each `tools/call` request sent, by id.
    call_ids: HashMap<String, String>,
    /// Raw call results received, by mark.
    call_results: HashMap<String, String>,
}

#[derive(Deserialize)]
struct Outgoing<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<OutgoingParams>,
}

#[derive(Deserialize)]
struct OutgoingParams {
    #[serde(rename = "_meta", default)]
    meta: Option<HashMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
}

impl Capture {
    fn sent(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Outgoing<'_>>(line) else {
            return;
        };
        let Some(id) = msg.id else { return };
        let Ok(mut s) = self.state.lock() else { return };
        match msg.method.as_deref() {
            Some("tools/list") if !s.list_ids.iter().any(|i| i == id.get()) => {
                s.list_ids.push(id.get().to_owned());
            }
            Some("tools/call") => {
                let mark = msg
                    .params
                    .and_then(|p| p.meta)
                    .and_then(|m| m.get(CALL_MARK).and_then(|v| v.as_str().map(str::to_owned)));
                if let Some(mark) = mark {
                    s.call_ids.insert(id.get().to_owned(), mark);
                }
            }
            _ => {}
        }
    }

    fn received(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Incoming<'_>>(line) else {
            return;
        };
        let (Some(id), Some(result)) = (msg.id, msg.result) else {
            return;
        };
        let Ok(mut s) = self.state.lock() else { return };
        if s.list_ids.iter().any(|i| i == id.get()) {
            s.results
                .insert(id.get().to_owned(), result.get().to_owned());
        } else if let Some(mark) = s.call_ids.remove(id.get())
            && s.call_results.len() < MAX_WAITING_RESULTS
        {
            s.call_results.insert(mark, result.get().to_owned());
        }
    }

    /// The raw result of the call marked `mark`, once received.
    pub(crate) fn take_call_result(&self, mark: &str) -> Option<String> {
        self.state.lock().ok()?.call_results.remove(mark)
    }

    /// Forgets a call whose caller stopped waiting.
    pub(crate) fn forget_call(&self, mark: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.call_ids.retain(|_, m| m != mark);
            s.call_results.remove(mark);
        }
    }

    /// The raw result of the latest `tools/list` request.
    fn take_list_result(&self) -> Option<String> {
        let mut s = self.state.lock().ok()?;
        let id = s.list_ids.last()?.clone();
        s.results.remove(&id)
    }
}

/// Feeds complete lines of `bytes` to `f`, keeping a partial line in
/// `line` (dropped past [`MAX_LINE`]: rmcp refuses such a line anyway).
fn feed(line: &mut Vec<u8>, bytes: &[u8], mut f: impl FnMut(&[u8])) {
    for chunk in bytes.split_inclusive(|b| *b == b'\n') {
        if line.len() + chunk.len() <= MAX_LINE {
            line.extend_from_slice(chunk);
        }
        if chunk.ends_with(b"\n") {
            f(line);
            line.clear();
        }
    }
}

/// The child's stdout, seen on its way to rmcp.
struct TeeReader<R> {
    inner: R,
    capture: Arc<Capture>,
    line: Vec<u8>,
}

impl<R: AsyncRead + Unpin> AsyncRead for TeeReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let capture = Arc::clone(&this.capture);
            feed(&mut this.line, &buf.filled()[before..], |l| {
                capture.received(l)
            });
        }
        polled
    }
}

/// The child's stdin, seen on its way from rmcp.
struct TeeWriter<W> {
    inner: W,
    capture: Arc<Capture>,
    line: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TeeWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        // Note the requests these bytes complete before they can reach the
        // server, whose answer may be read before this write returns. A
        // line offered again after a short write is noted again, which
        // changes nothing.
        let mut ahead = this.line.clone();
        let capture = Arc::clone(&this.capture);
        feed(&mut ahead, bytes, |l| capture.sent(l));
        let polled = Pin::new(&mut this.inner).poll_write(cx, bytes);
        if let Poll::Ready(Ok(n)) = &polled {
            feed(&mut this.line, &bytes[..*n], |_| {});
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
