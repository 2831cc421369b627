//! The HTTP client takes no proxy from the environment: with every proxy
//! variable naming a closed port, the server on 127.0.0.1 is reached
//! directly. Its own target, as it sets the process's environment.

use std::time::Duration;

use agentrt::Timestamp;
use agentrt_mcp::{Server, pin};
use agentrt_mcp_fixture::{Mode, serve};

#[test]
fn no_proxy_is_taken_from_the_environment() {
    // SAFETY: the only test of this binary sets the variables before it
    // starts the runtime, so no other thread reads the environment.
    unsafe {
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            std::env::set_var(name, "http://127.0.0.1:9");
            std::env::set_var(name.to_lowercase(), "http://127.0.0.1:9");
        }
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let (url, _) = serve(Mode::Json).await;
        let mut server = Server::url("fs", &url);
        server.connect_timeout = Some(Duration::from_secs(10));
        let manifest = pin(
            &server,
            Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
        )
        .await
        .expect("reached without the proxy");
        assert!(manifest.tools.contains_key("read_file"));
    });
}
