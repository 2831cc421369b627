//! What the proxy's tests (and its benchmark) share.

use std::path::Path;

/// Runs `agentrt-proxy pin --config <config>` in process; it must succeed.
pub async fn pin(config: &Path) {
    let args = [
        "pin".to_owned(),
        "--config".to_owned(),
        config.to_string_lossy().into_owned(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    assert_eq!(code, 0, "pin: {}", String::from_utf8_lossy(&err));
}

/// A proxy on the configuration `proxy.json` and the database `proxy.db`
/// in `dir`, built as `serve` builds it (a new process, as far as the
/// proxy knows).
#[allow(dead_code)] // Not every test target builds a proxy in process.
pub async fn proxy_on(dir: &Path) -> agentrt_proxy::Proxy {
    proxy_and_store_on(dir).await.0
}

/// [`proxy_on`] and a handle on the store it writes through (a clone:
/// the same commit counters).
#[allow(dead_code)] // Not every test target builds a proxy in process.
pub async fn proxy_and_store_on(dir: &Path) -> (agentrt_proxy::Proxy, agentrt::Store) {
    let config = agentrt_proxy::read_config(&dir.join("proxy.json")).expect("config");
    let loaded = agentrt_proxy::load_all(&config).await.expect("load");
    let store = store_on(dir);
    let proxy = agentrt_proxy::build_proxy(
        std::sync::Arc::new(config),
        store.clone(),
        &loaded,
        Box::new(std::io::sink()),
    )
    .expect("proxy");
    (proxy, store)
}

/// The database `proxy.db` in `dir`, opened with the proxy's call index.
#[allow(dead_code)] // Not every test target opens it.
pub fn store_on(dir: &Path) -> agentrt::Store {
    agentrt::Store::open_with(
        dir.join("proxy.db"),
        agentrt::StoreOptions {
            extensions: vec![agentrt_proxy::INDEX],
            ..agentrt::StoreOptions::default()
        },
    )
    .expect("store")
}

/// Writes `proxy.json` in `dir` (the database `proxy.db`, the top-level
/// configuration `fields`, the fixture at `url` as the server `fs` with
/// `read_file_rule` for its `read_file`) and pins it; the file's path.
#[allow(dead_code)] // Not every test target configures a file.
pub async fn configure(
    dir: &Path,
    url: &str,
    fields: &str,
    read_file_rule: &str,
) -> std::path::PathBuf {
    configure_on(dir, "proxy.db", url, fields, read_file_rule).await
}

/// [`configure`] with the database `database` (a file name in `dir`, or a
/// `postgres://` URL).
#[allow(dead_code)] // Not every test target configures another database.
pub async fn configure_on(
    dir: &Path,
    database: &str,
    url: &str,
    fields: &str,
    read_file_rule: &str,
) -> std::path::PathBuf {
    let config = dir.join("proxy.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"database": "{database}", {fields},
                 "servers": [{{"name": "fs", "endpoint": "{url}", "manifest": "fs.manifest.json",
                   "connect_timeout": "10s", "rules": {{"read_file": {read_file_rule}}}}}]}}"#
        ),
    )
    .expect("config");
    pin(&config).await;
    config
}

/// A stdio MCP server, a POSIX shell script written into `dir` (so a test
/// controls every byte it lists and the proxy starts it as it starts any
/// server): it copies the environment it was started with, byte for byte
/// as the kernel holds it (`/proc/<pid>/environ`, NUL-separated), to
/// `environ` in `dir`, then answers `initialize` and each `tools/list`
/// with the lines of `tools_replies` (`@ID@` replaced by the
/// request's id; each line sent as written), and everything else
/// with an error. Linux only (`/proc`). The script's path.
#[allow(dead_code)] // Not every test target starts a shell server.
#[cfg(target_os = "linux")]
pub fn shell_server(dir: &Path, tools_replies: &[&str]) -> std::path::PathBuf {
    let replies = dir.join("replies");
    std::fs::write(&replies, tools_replies.join("\n") + "\n").expect("replies");
    let script = dir.join("server.sh");
    std::fs::write(
        &script,
        format!(
            r#"cat "/proc/$$/environ" > '{environ}'
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  [ -n "$id" ] || continue
  case "$line" in
    *'"method":"initialize"'*)
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"shell","version":"0"}}}}}}\n' "$id" ;;
    *'"method":"tools/list"'*)
      sed "s/@ID@/$id/g" '{replies}' ;;
    *)
      printf '{{"jsonrpc":"2.0","id":%s,"error":{{"code":-32601,"message":"no such method"}}}}\n' "$id" ;;
  esac
done
"#,
            environ = dir.join("environ").display(),
            replies = replies.display(),
        ),
    )
    .expect("script");
    script
}

/// `agentrt-proxy serve --config <config> --http 127.0.0.1:0`, started:
/// the process (killed when dropped), the URL hosts call, and what it said
/// on stderr up to then (the rest is drained so it never blocks).
#[allow(dead_code)] // Not every test target serves over HTTP.
pub async fn serve_http(config: &Path) -> (tokio::process::Child, String, Vec<String>) {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_agentrt-proxy"))
        .args(["serve", "--config"])
        .arg(config)
        .args(["--http", "127.0.0.1:0"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let mut said = Vec::new();
    let url = loop {
        let line = lines
            .next_line()
            .await
            .expect("stderr")
            .unwrap_or_else(|| panic!("the proxy says where it serves: {said:#?}"));
        said.push(line.clone());
        if let Some(at) = line.find(" on http://") {
            break line[at + 4..].to_owned();
        }
    };
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url, said)
}

/// An MCP `initialize` posted to `url` with the bearer `token` (if any)
/// in MCP session `session` (if any): the answer.
#[allow(dead_code)] // Not every test target speaks plain HTTP.
pub async fn initialize(
    url: &str,
    token: Option<&str>,
    session: Option<&str>,
) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    if let Some(session) = session {
        request = request.header("mcp-session-id", session);
    }
    request.send().await.expect("an answer")
}

/// The `WWW-Authenticate` challenge of `response` (empty without one).
#[allow(dead_code)] // Not every test target is refused.
pub fn challenge(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().expect("text").to_owned())
        .unwrap_or_default()
}
