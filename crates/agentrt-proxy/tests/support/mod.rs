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
