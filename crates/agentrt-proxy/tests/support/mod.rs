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
