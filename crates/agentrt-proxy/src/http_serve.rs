//! `agentrt-proxy serve --http ADDR` (beyond the original): the proxy over
//! streamable HTTP, one MCP session per host connection, each call's run
//! labelled with its session. A loopback address is the default; any
//! other needs a bearer token read from an owner-only file. Each POST's
//! body is read (capped) before rmcp parses it, so a call's arguments are
//! the bytes the host wrote, as over stdio.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::config::Config;
use crate::error::ProxyError;
use crate::raw_args::RawArguments;
use crate::serve::{ProxyServer, file_work, land, start, stop_signal};

/// The most bytes of one request body.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// Where and how to serve over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The address to bind (`127.0.0.1:0` picks a free port).
    pub addr: SocketAddr,
    /// An owner-only file holding the bearer token every request must
    /// carry; required for a non-loopback address.
    pub token_file: Option<PathBuf>,
}

/// Reads the bearer token: the file's text, trimmed, not empty.
fn read_token(path: &std::path::Path) -> Result<String, ProxyError> {
    let bytes = agentrt_mcp::read_private(path)?;
    let token = String::from_utf8(bytes)
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    if token.is_empty() {
        return Err(ProxyError::Write {
            path: path.to_owned(),
            detail: "the token file holds no token (one line of text)".into(),
        });
    }
    Ok(token)
}

/// Equal in time whatever the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Refuses a request without the bearer token.
async fn require_token(token: Arc<String>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if !same(given.as_bytes(), token.as_bytes()) {
        let mut refused = StatusCode::UNAUTHORIZED.into_response();
        refused
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return refused;
    }
    next.run(request).await
}

/// Reads a POST's body, notes its calls' raw arguments in the request's
/// extensions (rmcp hands them on to the handler), and passes it on.
async fn note_raw_arguments(request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let raw = RawArguments::default();
    raw.note(&bytes);
    parts.extensions.insert(Arc::new(raw));
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Serves hosts over streamable HTTP until SIGINT or SIGTERM; then the
/// sessions end, in-flight calls finish, and the upstreams are closed.
pub async fn serve_http(
    config: Config,
    options: HttpOptions,
    err: &mut dyn Write,
) -> Result<(), ProxyError> {
    let token = match options.token_file.clone() {
        Some(path) => Some(file_work(&config, move || read_token(&path)).await?),
        None => None,
    };
    if !options.addr.ip().is_loopback() && token.is_none() {
        return Err(ProxyError::Config {
            path: config.path.clone(),
            detail: format!(
                "serving on {}, which is not a loopback address, needs --token-file",
                options.addr
            ),
        });
    }
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| ProxyError::Config {
            path: config.path.clone(),
            detail: format!("cannot listen on {}: {e}", options.addr),
        })?;
    let bound = listener.local_addr().map_err(|e| ProxyError::Config {
        path: config.path.clone(),
        detail: e.to_string(),
    })?;
    let (proxy, loaded, config) = start(config, err).await?;
    let _ = writeln!(
        err,
        "agentrt-proxy: serving session {} on http://{bound}/mcp",
        config.session
    );
    let mut http = StreamableHttpServerConfig::default();
    if !bound.ip().is_loopback() {
        http.allowed_hosts.push(bound.ip().to_string());
        http.allowed_hosts.push(bound.to_string());
    }
    let stop = http.cancellation_token.clone();
    let factory_proxy = Arc::clone(&proxy);
    let service = StreamableHttpService::new(
        move || {
            Ok(ProxyServer::new(
                Arc::clone(&factory_proxy),
                Arc::new(RawArguments::default()),
            ))
        },
        Arc::new(LocalSessionManager::default()),
        http,
    );
    let mut app = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn(note_raw_arguments));
    if let Some(token) = token {
        let token = Arc::new(token);
        app = app.layer(axum::middleware::from_fn(move |request, next| {
            require_token(Arc::clone(&token), request, next)
        }));
    }
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            stop_signal().await;
            stop.cancel();
        })
        .await;
    land(&proxy, err).await;
    loaded.close().await;
    served.map_err(|e| ProxyError::Config {
        path: config.path.clone(),
        detail: format!("serving over HTTP: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
