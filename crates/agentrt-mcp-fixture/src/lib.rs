//! A small MCP server over streamable HTTP on 127.0.0.1 (axum), for the
//! workspace's tests: answers as JSON or as an event stream, or misbehaves
//! as its [`Mode`] says, and notes what it saw. It lists one tool,
//! `read_file` (its schema holds a `1e2`, a number spelling `serde_json`
//! would rewrite), and answers a call with its arguments as text.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use serde_json::{Value, json};

/// How the server behaves.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Mode {
    /// Every answer a JSON body.
    Json,
    /// Every answer an event stream, after a priming event and a comment.
    Sse,
    /// Never answers.
    Hang,
    /// Negotiates 2025-03-26.
    Old,
    /// Sends every POST elsewhere (307).
    Redirect,
    /// A call's answer is 17 MiB.
    Huge,
    /// A call finds its session gone (404).
    Expire,
    /// A call is noted and never answered (the rest answers).
    HangOnCall,
    /// A call's event stream breaks before its answer.
    Lost,
    /// A call is answered with a JSON-RPC error of this `code`, in a JSON
    /// body under the HTTP status `http_status` (200, or an error status).
    CallError {
        /// The JSON-RPC error code.
        code: i32,
        /// The HTTP status of the answer.
        http_status: u16,
    },
    /// A call is answered 200 with a JSON body that is not JSON.
    Garbled,
}

/// What the server saw.
pub struct Seen {
    pub mode: Mode,
    pub initializes: AtomicUsize,
    pub elsewhere: AtomicUsize,
    /// GETs of `/mcp` (a server-push stream or a resumption asked for).
    pub gets: AtomicUsize,
    /// The session header of each `tools/call`.
    pub call_sessions: Mutex<Vec<Option<String>>>,
    /// The arguments of each `tools/call`, as parsed.
    pub call_arguments: Mutex<Vec<Value>>,
    /// The session header of each DELETE.
    pub deletes: Mutex<Vec<Option<String>>>,
    /// The `Authorization` headers of every POST that carried one (a
    /// proxy must never hand its callers' tokens on).
    pub authorizations: Mutex<Vec<String>>,
    /// While set, a call (in any mode) is noted and never answered, as in
    /// [`Mode::HangOnCall`]: a test sets it to cut off a call in flight.
    pub hang_calls: AtomicBool,
}

fn session(headers: &HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

const TOOLS: &str = r#"[{"name":"read_file","description":"Reads a file.","inputSchema":{"type":"object","properties":{"path":{"type":"string"},"lines":{"type":"number","maximum":1e2}},"required":["path"]},"annotations":{"readOnlyHint":true}}]"#;

/// A JSON-RPC answer as text (the tool list spliced in as written: a
/// number spelling serde_json would rewrite).
fn answer(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .replace("\"__TOOLS__\"", TOOLS)
}

fn reply(mode: Mode, text: String) -> Response {
    if mode == Mode::Sse {
        // A priming event (an id, no data), a comment, then the answer.
        let body = format!("id: 0\ndata:\n\n: a comment\nid: 1\ndata: {text}\n\n");
        ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
    } else {
        ([(header::CONTENT_TYPE, "application/json")], text).into_response()
    }
}

async fn post(State(seen): State<Arc<Seen>>, headers: HeaderMap, body: Bytes) -> Response {
    if let Some(given) = headers.get(header::AUTHORIZATION)
        && let Ok(mut seen_ones) = seen.authorizations.lock()
    {
        seen_ones.push(String::from_utf8_lossy(given.as_bytes()).into_owned());
    }
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = msg.get("id") else {
        return StatusCode::ACCEPTED.into_response();
    };
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    match (seen.mode, method) {
        (Mode::Hang, _) => std::future::pending().await,
        (Mode::Redirect, _) => (
            StatusCode::TEMPORARY_REDIRECT,
            [(header::LOCATION, "/elsewhere")],
        )
            .into_response(),
        (_, "initialize") => {
            seen.initializes.fetch_add(1, Ordering::SeqCst);
            let version = if seen.mode == Mode::Old {
                "2025-03-26"
            } else {
                msg.pointer("/params/protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("2025-06-18")
            };
            let text = answer(
                id,
                json!({"protocolVersion": version, "capabilities": {"tools": {}},
                       "serverInfo": {"name": "fixture", "version": "0"}}),
            );
            let mut response = reply(seen.mode, text);
            response.headers_mut().insert(
                "mcp-session-id",
                header::HeaderValue::from_static("session-1"),
            );
            response
        }
        (_, "tools/list") => reply(seen.mode, answer(id, json!({"tools": "__TOOLS__"}))),
        (mode, "tools/call") => {
            if let Ok(mut s) = seen.call_sessions.lock() {
                s.push(session(&headers));
            }
            let args = msg
                .pointer("/params/arguments")
                .cloned()
                .unwrap_or(json!({}));
            if let Ok(mut a) = seen.call_arguments.lock() {
                a.push(args.clone());
            }
            if seen.hang_calls.load(Ordering::SeqCst) {
                return std::future::pending().await;
            }
            match mode {
                Mode::Expire => StatusCode::NOT_FOUND.into_response(),
                Mode::CallError { code, http_status } => {
                    let error = json!({"jsonrpc": "2.0", "id": id,
                                       "error": {"code": code, "message": "the transfer failed halfway"}});
                    (
                        StatusCode::from_u16(http_status).unwrap_or(StatusCode::OK),
                        [(header::CONTENT_TYPE, "application/json")],
                        error.to_string(),
                    )
                        .into_response()
                }
                Mode::Garbled => (
                    [(header::CONTENT_TYPE, "application/json")],
                    "{\"jsonrpc\": \"2.0\", \"id\": ",
                )
                    .into_response(),
                Mode::HangOnCall => std::future::pending().await,
                Mode::Huge => {
                    let text = "x".repeat(17 * 1024 * 1024);
                    reply(
                        mode,
                        answer(id, json!({"content": [{"type": "text", "text": text}]})),
                    )
                }
                Mode::Lost => {
                    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                        Ok(Bytes::from_static(b": working\n\n")),
                        Err(std::io::Error::other("the server went away")),
                    ];
                    let body = Body::from_stream(futures_stream(chunks));
                    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
                }
                _ => reply(
                    mode,
                    answer(
                        id,
                        json!({"content": [{"type": "text", "text": args.to_string()}]}),
                    ),
                ),
            }
        }
        (mode, _) => reply(
            mode,
            json!({"jsonrpc": "2.0", "id": id,
                   "error": {"code": -32601, "message": "no such method"}})
            .to_string(),
        ),
    }
}

/// A body stream of `chunks`, pausing before each so that they arrive
/// apart.
fn futures_stream(
    chunks: Vec<Result<Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::iter(chunks).then(|chunk| async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        chunk
    })
}

/// Serves a fixture in `mode`; returns its `/mcp` URL and what it saw.
pub async fn serve(mode: Mode) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen {
        mode,
        initializes: AtomicUsize::new(0),
        elsewhere: AtomicUsize::new(0),
        gets: AtomicUsize::new(0),
        call_sessions: Mutex::new(Vec::new()),
        call_arguments: Mutex::new(Vec::new()),
        deletes: Mutex::new(Vec::new()),
        authorizations: Mutex::new(Vec::new()),
        hang_calls: AtomicBool::new(false),
    });
    let app = axum::Router::new()
        .route(
            "/mcp",
            axum::routing::post(post)
                .delete(
                    |State(seen): State<Arc<Seen>>, headers: HeaderMap| async move {
                        if let Ok(mut d) = seen.deletes.lock() {
                            d.push(session(&headers));
                        }
                        StatusCode::OK
                    },
                )
                .get(|State(seen): State<Arc<Seen>>| async move {
                    // Offered, so a client that asks would get a stream.
                    seen.gets.fetch_add(1, Ordering::SeqCst);
                    let body = Body::from_stream(futures_util::stream::pending::<
                        Result<Bytes, std::io::Error>,
                    >());
                    ([(header::CONTENT_TYPE, "text/event-stream")], body)
                }),
        )
        .route(
            "/elsewhere",
            axum::routing::post(|State(seen): State<Arc<Seen>>| async move {
                seen.elsewhere.fetch_add(1, Ordering::SeqCst);
                StatusCode::OK
            }),
        )
        .with_state(Arc::clone(&seen));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/mcp"), seen)
}
