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
    let config = agentrt_proxy::read_config(&dir.join("proxy.json")).expect("config");
    let loaded = agentrt_proxy::load_all(&config).await.expect("load");
    agentrt_proxy::build_proxy(
        std::sync::Arc::new(config),
        store_on(dir),
        &loaded,
        Box::new(std::io::sink()),
    )
    .expect("proxy")
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
