//! `agentrt-proxy serve --http ADDR` (beyond the original): the proxy over
//! streamable HTTP, one MCP session per host connection, each call's run
//! labelled with its session.
//!
//! Who may call: every request carries the bearer token (`token`: the
//! operator's owner-only file, or one made at start beside the
//! configuration) or, with `"oauth"` configured, an access token of the
//! configured issuer for this resource (`admit`, `crate::oauth`), names in `Host` the address its connection reached or a
//! name the operator allowed, and comes from no `Origin` or an allowed one
//! (`door`). How much one caller can make the proxy hold: a capped number
//! of sessions, each with a capped number of requests in flight
//! (`sessions`), and one cap on a request's body, the same for the raw
//! bytes read here and for rmcp. Each POST's body is read before rmcp
//! parses it, so a call's arguments are the bytes the host wrote, as over
//! stdio.

mod admit;
mod door;
mod sessions;
mod token;

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::config::Config;
use crate::error::ProxyError;
use crate::raw_args::RawArguments;
use crate::reach::check_extra_files;
use crate::serve::{ProxyServer, file_work, land, start, stop_signal};

pub use sessions::{DEFAULT_MAX_REQUESTS_PER_SESSION, DEFAULT_MAX_SESSIONS};

/// The most bytes of one request body, here and in rmcp alike.
pub const MAX_HTTP_BODY: usize = 4 * 1024 * 1024;

/// Where and how to serve over HTTP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// The address to bind (`127.0.0.1:0` picks a free port).
    pub addr: SocketAddr,
    /// An owner-only file holding the bearer token every request must
    /// carry; without one, a new token is made at each start in
    /// `<configuration>.token`.
    pub token_file: Option<PathBuf>,
    /// Host names a host may reach the proxy by, beside the address its
    /// connection reached (and `localhost` on loopback).
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://app.example.com`) a browser page may call from;
    /// a request with any other `Origin` is refused.
    pub allowed_origins: Vec<String>,
    /// MCP sessions open at once.
    pub max_sessions: usize,
    /// Requests of one session in flight at once.
    pub max_requests_per_session: usize,
}

impl HttpOptions {
    /// Serving on `addr` with the defaults: a token made at start, no
    /// other host name or origin, the default caps.
    pub fn new(addr: SocketAddr) -> HttpOptions {
        HttpOptions {
            addr,
            token_file: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_requests_per_session: DEFAULT_MAX_REQUESTS_PER_SESSION,
        }
    }
}

/// Reads a POST's body, notes its calls' raw arguments in the request's
/// extensions (rmcp hands them on to the handler), and passes it on.
async fn note_raw_arguments(request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_HTTP_BODY).await else {
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
    let http_error = |detail: String| ProxyError::Http {
        addr: options.addr,
        detail,
    };
    let allowed = door::Allowed::new(&options.allowed_hosts, &options.allowed_origins)
        .map_err(&http_error)?;
    if options.max_sessions == 0 || options.max_requests_per_session == 0 {
        return Err(http_error("the session caps must be at least 1".into()));
    }
    if config.oauth.is_some() && options.token_file.is_some() {
        return Err(http_error(
            "--token-file and the configuration's \"oauth\" exclude each other: with OAuth, \
             callers bring access tokens"
                .into(),
        ));
    }
    let token = match config.oauth {
        Some(_) => None,
        None => {
            let source = token::TokenSource::new(options.token_file.clone(), &config.path);
            let token_path = source.path().to_owned();
            let reach = config.clone();
            let protect = token_path.clone();
            let token = file_work(&config, move || {
                // No server may be handed the token's file or its directory.
                check_extra_files(&reach, &[protect])?;
                source.token()
            })
            .await?;
            Some((token, token_path))
        }
    };
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| http_error(format!("cannot listen: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| http_error(e.to_string()))?;
    // How callers are admitted, and the line that tells the operator.
    let (admission, admitted) = match (&config.oauth, token) {
        (Some(oauth), _) => {
            let verifier = crate::oauth::verifier(oauth, bound)
                .await
                .map_err(|e| http_error(format!("oauth: {e}")))?;
            let said = format!(
                "hosts send access tokens of {} for {} (metadata at {})",
                oauth.issuer,
                verifier.resource(),
                crate::oauth::metadata_url(verifier.resource())
            );
            (admit::Admission::OAuth(Arc::new(verifier)), said)
        }
        (None, Some((token, path))) => {
            let said = format!(
                "hosts send the bearer token in {} (owner-only){}",
                path.display(),
                if options.token_file.is_some() {
                    ""
                } else {
                    ", made now: a new one at each start"
                }
            );
            (admit::Admission::Token(token), said)
        }
        (None, None) => return Err(http_error("no way to admit callers".into())),
    };
    let (proxy, loaded, config) = start(config, err).await?;
    let _ = writeln!(err, "agentrt-proxy: {admitted}");
    let _ = writeln!(
        err,
        "agentrt-proxy: serving session {} on http://{bound}/mcp",
        config.session
    );
    // The Host check is ours (by the connection's own address), so rmcp's
    // list of loopback names is turned off; the body cap is one for both.
    let http = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(MAX_HTTP_BODY);
    let stop = http.cancellation_token.clone();
    let factory_proxy = Arc::clone(&proxy);
    let open = sessions::Open::new(options.max_sessions, options.max_requests_per_session);
    let service = StreamableHttpService::new(
        move || {
            Ok(ProxyServer::new(
                Arc::clone(&factory_proxy),
                Arc::new(RawArguments::default()),
            ))
        },
        Arc::new(sessions::CappedSessions::new(Arc::clone(&open))),
        http,
    );
    let admission = Arc::new(admission);
    let allowed = Arc::new(allowed);
    // Layers run last-added first: Host and Origin, then the caller (the
    // metadata is for anyone), then the caps and the session's owner, then
    // the body is read.
    let mcp = axum::Router::new()
        .route_service("/mcp", service)
        .layer(axum::middleware::from_fn(note_raw_arguments))
        .layer(axum::middleware::from_fn(
            move |request: Request, next: Next| {
                sessions::limit_sessions(Arc::clone(&open), request, next)
            },
        ))
        .layer(axum::middleware::from_fn({
            let admission = Arc::clone(&admission);
            move |request: Request, next: Next| admit::admit(Arc::clone(&admission), request, next)
        }));
    let mut app = axum::Router::new().merge(mcp);
    if let admit::Admission::OAuth(verifier) = &*admission {
        let metadata = {
            let verifier = Arc::clone(verifier);
            move || {
                let verifier = Arc::clone(&verifier);
                async move { admit::metadata_response(&verifier) }
            }
        };
        app = app
            .route(
                crate::oauth::METADATA_PATH,
                axum::routing::get(metadata.clone()),
            )
            .route(
                &format!("{}/{{*resource}}", crate::oauth::METADATA_PATH),
                axum::routing::get(metadata),
            );
    }
    let app = app.layer(axum::middleware::from_fn(
        move |connection: ConnectInfo<door::ListenAddr>, request: Request, next: Next| {
            door::check_door(Arc::clone(&allowed), connection, request, next)
        },
    ));
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<door::ListenAddr>(),
    )
    .with_graceful_shutdown(async move {
        stop_signal().await;
        stop.cancel();
    })
    .await;
    land(&proxy, err).await;
    loaded.close().await;
    served.map_err(|e| http_error(format!("serving over HTTP: {e}")))
}
