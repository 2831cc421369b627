//! `agentrt-proxy serve --http`: the binary on 127.0.0.1, hosts as rmcp
//! clients over streamable HTTP, the fixture server upstream. Sixteen
//! calls at once are sixteen runs and sixteen answers; each run is
//! labelled with its MCP session; a token file guards the door; SIGTERM
//! ends it cleanly.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use agentrt_mcp_fixture::{Mode, serve};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::ServiceExt;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// Pins the fixture into a fresh configuration.
async fn setup(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        url,
        r#""session": "web""#,
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await;
    dir
}

/// A proxy serving over HTTP: the process, its URL, and the token hosts
/// send (read from the file it names on stderr), with what it said.
struct Serving {
    child: Child,
    url: String,
    token: String,
    said: Vec<String>,
}

/// Starts `serve --http 127.0.0.1:0` (and `extra`).
async fn start(dir: &Path, extra: &[&str]) -> Serving {
    start_on(dir, "127.0.0.1:0", extra).await
}

/// Starts `serve --http ADDR` (and `extra`); its URL and token, read from
/// its stderr.
async fn start_on(dir: &Path, addr: &str, extra: &[&str]) -> Serving {
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(dir.join("proxy.json"))
        .args(["--http", addr])
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut said = Vec::new();
    let mut token_file = None;
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .unwrap_or_else(|| panic!("the proxy says where it serves: {said:#?}"));
        said.push(line.clone());
        if let Some(rest) = line.split_once("bearer token in ").map(|(_, rest)| rest) {
            let path = rest.split(" (owner-only)").next().expect("the file");
            token_file = Some(std::path::PathBuf::from(path));
        }
        if let Some(at) = line.find(" on http://") {
            break line[at + 4..].to_owned();
        }
    };
    let token_file = token_file.expect("the token's file is named before serving");
    let token = std::fs::read_to_string(&token_file)
        .expect("token")
        .trim()
        .to_owned();
    // Keep draining stderr so the proxy never blocks on it.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Serving {
        child,
        url,
        token,
        said,
    }
}

/// A host's session with the proxy at `url`, with `token`.
async fn host(
    url: &str,
    token: &str,
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ()>, rmcp::service::ClientInitializeError>
{
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    ().serve(StreamableHttpClientTransport::from_config(config))
        .await
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn args(path: &str) -> serde_json::Map<String, serde_json::Value> {
    let serde_json::Value::Object(args) = serde_json::json!({"path": path}) else {
        unreachable!();
    };
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_calls_at_once_over_http_are_sixteen_runs_and_sixteen_answers() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let Serving {
        child: mut proxy,
        url: proxy_url,
        token,
        ..
    } = start(dir.path(), &[]).await;
    let client = host(&proxy_url, &token).await.expect("handshake");
    let calls = (0..16).map(|i| {
        let client = &client;
        async move {
            let path = format!("file-{i}.txt");
            let result = client
                .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args(&path)))
                .await
                .expect("an answer");
            (path, text(&result))
        }
    });
    let answers = futures_util::future::join_all(calls).await;
    for (path, answer) in &answers {
        assert_eq!(answer, &format!(r#"{{"path":"{path}"}}"#));
    }
    assert_eq!(seen.call_sessions.lock().expect("lock").len(), 16);
    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(100, 0).expect("runs").items;
    assert_eq!(runs.len(), 16, "one run per call");
    let sessions: std::collections::BTreeSet<_> = runs
        .iter()
        .map(|r| {
            r.labels
                .get("mcp.http_session")
                .expect("labelled with its MCP session")
                .to_owned()
        })
        .collect();
    assert_eq!(sessions.len(), 1, "one host, one session");
    for run in &runs {
        assert_eq!(run.status, agentrt::RunStatus::Completed);
    }
    client.cancel().await.expect("close");

    // SIGTERM: it stops cleanly.
    #[cfg(unix)]
    {
        let pid = proxy.id().expect("pid");
        // SAFETY: kill has no memory preconditions.
        unsafe {
            libc::kill(i32::try_from(pid).expect("pid"), libc::SIGTERM);
        }
        let status = tokio::time::timeout(Duration::from_secs(20), proxy.wait())
            .await
            .expect("it stops")
            .expect("status");
        assert!(status.success(), "{status}");
    }
    #[cfg(not(unix))]
    let _ = proxy.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_token_file_guards_the_door_and_one_others_may_read_is_refused() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let token_file = dir.path().join("token");
    agentrt_mcp::write_private(&token_file, b"s3cret-token\n").expect("token");
    let token_arg = token_file.to_string_lossy().into_owned();
    let serving = start(dir.path(), &["--token-file", &token_arg]).await;
    assert_eq!(serving.token, "s3cret-token");
    let proxy_url = serving.url.clone();

    let without = ().serve(StreamableHttpClientTransport::from_uri(proxy_url.as_str())).await;
    assert!(without.is_err(), "no token, no session");
    let wrong = host(&proxy_url, "s3cret-tokeN").await;
    assert!(wrong.is_err(), "a wrong token, no session");
    let client = host(&proxy_url, "s3cret-token")
        .await
        .expect("with the token");
    let result = client
        .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args("t.txt")))
        .await
        .expect("an answer");
    assert_eq!(text(&result), r#"{"path":"t.txt"}"#);
    client.cancel().await.expect("close");
    drop(serving);

    // A token file its group may read is refused before anything listens.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o640))
            .expect("chmod");
        let out = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
            .args(["serve", "--config"])
            .arg(dir.path().join("proxy.json"))
            .args(["--http", "127.0.0.1:0", "--token-file", &token_arg])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(Duration::from_secs(30), out)
            .await
            .expect("refused at start, not served")
            .expect("run");
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("readable by group or others (mode 0640)"),
            "{err}"
        );
        assert!(err.contains("chmod go-rwx"), "{err}");
        assert!(!err.contains("serving session"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_file_the_proxy_makes_one_and_still_requires_it_on_loopback() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let first = start(dir.path(), &[]).await;
    let made = dir.path().join("proxy.json.token");
    let said = first.said.join("\n");
    assert!(
        said.contains(&made.display().to_string()),
        "the file is named: {said}"
    );
    assert!(
        !said.contains(&first.token),
        "the token is never printed: {said}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&made).expect("made").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "owner-only");
    }
    let without = ().serve(StreamableHttpClientTransport::from_uri(first.url.as_str())).await;
    assert!(without.is_err(), "on loopback too, no token, no session");
    let (status, _) = raw_post(&first.url, &[], "{}").await;
    assert_eq!(status, 401);
    let client = host(&first.url, &first.token)
        .await
        .expect("with the token");
    client.cancel().await.expect("close");
    let first_token = first.token.clone();
    drop(first);

    // The next start makes a new token: the old one opens nothing.
    let second = start(dir.path(), &[]).await;
    assert_ne!(second.token, first_token);
    let old = std::fs::read_to_string(&made).expect("made");
    assert_eq!(old.trim(), second.token);
    let client = host(&second.url, &second.token)
        .await
        .expect("the new token");
    client.cancel().await.expect("close");
}

/// An address of this machine other than 127.0.0.1: a second loopback
/// address always, and the address of the interface the default route
/// leaves by when there is one (no packet is sent to learn it).
fn machine_addresses() -> Vec<std::net::IpAddr> {
    let mut addresses = vec![std::net::IpAddr::from([127, 0, 0, 2])];
    let outward = std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| s.connect("192.0.2.1:9").map(|()| s))
        .and_then(|s| s.local_addr());
    if let Ok(addr) = outward
        && !addr.ip().is_loopback()
        && !addr.ip().is_unspecified()
    {
        addresses.push(addr.ip());
    }
    addresses
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_bind_answers_the_machines_addresses_and_refuses_other_hosts() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let serving = start_on(dir.path(), "0.0.0.0:0", &["--allow-host", "proxy.example"]).await;
    let port = serving
        .url
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .expect("port")
        .to_owned();
    for address in machine_addresses() {
        let at = format!("http://{address}:{port}/mcp");
        let client = host(&at, &serving.token)
            .await
            .unwrap_or_else(|e| panic!("a host using {address}: {e}"));
        let result = client
            .call_tool(CallToolRequestParams::new("fs_read_file").with_arguments(args("a.txt")))
            .await
            .expect("an answer");
        assert_eq!(text(&result), r#"{"path":"a.txt"}"#);
        client.cancel().await.expect("close");
    }
    let at = format!("http://127.0.0.2:{port}/mcp");
    let auth = format!("Bearer {}", serving.token);
    // A name the operator allowed is answered; any other, or an address
    // the connection did not reach, is refused (DNS rebinding).
    let (status, _) = raw_post(
        &at,
        &[("Authorization", &auth), ("Host", "proxy.example")],
        INITIALIZE,
    )
    .await;
    assert_eq!(status, 200, "an allowed name");
    for wrong in ["evil.example", "127.0.0.1", &format!("10.9.9.9:{port}")] {
        let (status, body) = raw_post(
            &at,
            &[("Authorization", &auth), ("Host", wrong)],
            INITIALIZE,
        )
        .await;
        assert_eq!(status, 403, "{wrong}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_is_absent_or_one_the_operator_allowed() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let serving = start(dir.path(), &["--allow-origin", "https://app.example"]).await;
    let auth = format!("Bearer {}", serving.token);
    let (status, _) = raw_post(&serving.url, &[("Authorization", &auth)], INITIALIZE).await;
    assert_eq!(status, 200, "no Origin: not a browser");
    let (status, _) = raw_post(
        &serving.url,
        &[("Authorization", &auth), ("Origin", "https://app.example")],
        INITIALIZE,
    )
    .await;
    assert_eq!(status, 200, "an allowed origin");
    for origin in ["https://evil.example", "http://app.example", "null"] {
        let (status, body) = raw_post(
            &serving.url,
            &[("Authorization", &auth), ("Origin", origin)],
            INITIALIZE,
        )
        .await;
        assert_eq!(status, 403, "{origin}: {body}");
    }
    // GET and DELETE are judged too.
    for method in ["GET", "DELETE"] {
        let (status, _) = raw_request(
            method,
            &serving.url,
            &[("Authorization", &auth), ("Origin", "https://evil.example")],
            "",
        )
        .await;
        assert_eq!(status, 403, "{method}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_and_requests_in_flight_are_capped() {
    let (url, seen) = serve(Mode::HangOnCall).await;
    let dir = setup(&url).await;
    let serving = start(
        dir.path(),
        &["--max-sessions", "1", "--max-requests-per-session", "1"],
    )
    .await;
    let auth = format!("Bearer {}", serving.token);
    let (status, headers) = raw_post(&serving.url, &[("Authorization", &auth)], INITIALIZE).await;
    assert_eq!(status, 200);
    let session = session_of(&headers);
    // The one place is taken: a second session waits.
    let (status, body) = raw_post(&serving.url, &[("Authorization", &auth)], INITIALIZE).await;
    assert_eq!(status, 503, "{body}");
    let with_session = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", session.as_str()),
    ];
    let (status, _) = raw_post(&serving.url, &with_session, INITIALIZED).await;
    assert_eq!(status, 202);
    // A call the server never answers holds the session's one request...
    let url_for_call = serving.url.clone();
    let call_headers: Vec<(String, String)> = with_session
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let held = tokio::spawn(async move {
        let headers: Vec<(&str, &str)> = call_headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        raw_exchange("POST", &url_for_call, &headers, CALL, true).await
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.call_sessions.lock().expect("lock").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the call reached the server"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // ...so the next one of that session is refused while it is in flight.
    let (status, body) = raw_post(&serving.url, &with_session, LIST).await;
    assert_eq!(status, 429, "{body}");
    let _ = held.await;
    // Its place is back once the call is answered (the tool's timeout).
    let (status, _) = raw_post(&serving.url, &with_session, LIST).await;
    assert_eq!(status, 200);
    // The session closed, its place is free for another.
    let (status, _) = raw_request("DELETE", &serving.url, &with_session, "").await;
    assert!(status == 200 || status == 202 || status == 204, "{status}");
    let (status, body) = raw_post(&serving.url, &[("Authorization", &auth)], INITIALIZE).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_cap_is_refused_without_reading_further() {
    let (url, _) = serve(Mode::Json).await;
    let dir = setup(&url).await;
    let serving = start(dir.path(), &[]).await;
    let (host_port, path) = split_url(&serving.url);
    let mut stream = tokio::net::TcpStream::connect(&host_port)
        .await
        .expect("connect");
    // Announces 16 MiB and sends only a little more than the cap: the
    // answer comes without the rest (it was read up to 16 MiB before).
    let sent = agentrt_proxy::MAX_HTTP_BODY + 1;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {host_port}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\n\r\n",
        serving.token,
        16 * 1024 * 1024
    );
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream.write_all(head.as_bytes()).await.expect("head");
    stream.write_all(&vec![b' '; sent]).await.expect("body");
    let mut answer = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut answer))
        .await
        .expect("an answer before the rest of the body")
        .expect("read");
    let line = String::from_utf8_lossy(&answer[..n]);
    assert!(line.starts_with("HTTP/1.1 413"), "{line}");
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
const LIST: &str = r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#;
const CALL: &str = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"fs_read_file","arguments":{"path":"held.txt"}}}"#;

/// `host:port` and the path of `url` (`http://host:port/path`).
fn split_url(url: &str) -> (String, String) {
    let rest = url.strip_prefix("http://").expect("http URL");
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    (authority.to_owned(), format!("/{path}"))
}

/// POSTs `body` to `url` with `headers`: the status and the head.
async fn raw_post(url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    raw_request("POST", url, headers, body).await
}

/// One HTTP/1.1 request over a new connection (`Host` from the URL unless
/// `headers` names one): the status and the answer's head.
async fn raw_request(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    raw_exchange(method, url, headers, body, false).await
}

/// [`raw_request`], reading the whole answer when `whole` (the connection
/// stays open until the server ends the body).
async fn raw_exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    whole: bool,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (host_port, path) = split_url(url);
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {host_port}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    let mut stream = tokio::net::TcpStream::connect(&host_port)
        .await
        .expect("connect");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    // Enough to hold the head and the start of an SSE body; an event
    // stream is not read to its end.
    loop {
        match tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => read.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("read: {e}"),
        }
        if !whole && String::from_utf8_lossy(&read).contains("\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&read).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    (status, text)
}

/// The `Mcp-Session-Id` of an answer's head.
fn session_of(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_owned())
        })
        .expect("a session id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_could_reach_the_token_file_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let secrets = tempfile::tempdir().expect("the token's directory");
    let token_file = secrets.path().join("token");
    agentrt_mcp::write_private(&token_file, b"t0ken\n").expect("token");
    let config = dir.path().join("proxy.json");
    std::fs::write(
        &config,
        serde_json::json!({
            "database": "proxy.db", "session": "s",
            "servers": [{"name": "fs", "command": ["mcp-server-filesystem", secrets.path()],
                         "manifest": "fs.manifest.json"}]
        })
        .to_string(),
    )
    .expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(&config)
        .args(["--http", "127.0.0.1:0", "--token-file"])
        .arg(&token_file)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), out)
        .await
        .expect("refused at start")
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("which the proxy protects"), "{err}");
    assert!(err.contains(&secrets.path().display().to_string()), "{err}");
}
