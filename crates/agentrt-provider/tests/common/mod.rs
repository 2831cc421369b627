//! Fake provider servers for the adapter tests: axum routers on
//! 127.0.0.1:0, started and stopped by each test, recording every request
//! they receive (method, path, headers, body).

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::{ModelRequest, llm::ContentBlock, llm::Message, llm::Role};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::any;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Seen {
    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_default()
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// A running fake server.
pub struct Fake {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl Fake {
    /// Serves `router` on 127.0.0.1:0, recording every request.
    pub async fn start(router: Router) -> Fake {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let app = router.layer(middleware::from_fn(move |request: Request, next: Next| {
            let log = log.clone();
            async move {
                let (parts, body) = request.into_parts();
                let bytes = axum::body::to_bytes(body, 64 << 20)
                    .await
                    .unwrap_or_default();
                if let Ok(mut log) = log.lock() {
                    log.push(Seen {
                        method: parts.method.to_string(),
                        path: parts.uri.path().to_owned(),
                        headers: parts.headers.clone(),
                        body: bytes.clone(),
                    });
                }
                next.run(Request::from_parts(parts, Body::from(bytes)))
                    .await
            }
        }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Fake {
            addr,
            seen,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The only request so far (panics unless there was exactly one).
    pub fn only(&self) -> Seen {
        let seen = self.seen();
        assert_eq!(seen.len(), 1, "expected exactly one request, got {seen:?}");
        seen.into_iter().next().expect("one request")
    }

    /// Stops the server.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// A router answering every path with one canned response.
pub fn reply(status: u16, headers: &[(&str, &str)], body: impl Into<Bytes>) -> Router {
    let body: Bytes = body.into();
    let headers: Vec<(HeaderName, HeaderValue)> = headers
        .iter()
        .map(|(k, v)| {
            (
                HeaderName::from_bytes(k.as_bytes()).expect("header name"),
                HeaderValue::from_str(v).expect("header value"),
            )
        })
        .collect();
    Router::new().route(
        "/{*path}",
        any(move || {
            let body = body.clone();
            let headers = headers.clone();
            async move {
                let mut response = Response::new(Body::from(body));
                *response.status_mut() = StatusCode::from_u16(status).expect("status");
                for (k, v) in headers {
                    response.headers_mut().insert(k, v);
                }
                response
            }
        }),
    )
}

/// A JSON 200.
pub fn ok_json(body: impl Into<String>) -> Router {
    reply(200, &[("content-type", "application/json")], body.into())
}

/// A response whose `Content-Length` promises more than the body holds:
/// the server closes the connection mid-body.
pub fn cut_body(first_part: &'static str) -> Router {
    reply(
        200,
        &[
            ("content-type", "application/json"),
            ("content-length", "100000"),
        ],
        first_part,
    )
}

/// A handler that answers only after `delay`.
pub fn slow(delay: Duration, body: String) -> Router {
    Router::new().route(
        "/{*path}",
        any(move || {
            let body = body.clone();
            async move {
                tokio::time::sleep(delay).await;
                Response::new(Body::from(body))
            }
        }),
    )
}

/// A port on 127.0.0.1 nothing listens on.
pub async fn closed_port() -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    port
}

/// A resolver that fails every lookup, for a caller-supplied client.
pub struct FailingResolver;

impl reqwest::dns::Resolve for FailingResolver {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async { Err(Box::new(std::io::Error::from(std::io::ErrorKind::NotFound)) as _) })
    }
}

/// A one-message request.
pub fn hello() -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages: vec![Message {
            role: Role::User,
            content: vec![ContentBlock::text("hi")],
        }],
        tools: vec![],
        max_output_tokens: None,
    }
}

/// `body` padded with trailing spaces to exactly `len` bytes.
pub fn padded(body: &str, len: usize) -> String {
    let mut out = body.to_owned();
    out.push_str(&" ".repeat(len.saturating_sub(body.len())));
    out
}

/// The shared transport suite, run against one adapter. The including test
/// file defines `PROVIDER`, `ok_body() -> String` and `model(base: &str,
/// client: Option<reqwest::Client>) -> Box<dyn agentrt::Model>`, where
/// `base` is the fake server's URL.
#[macro_export]
macro_rules! transport_suite {
    () => {
        mod transport {
            use std::time::Duration;

            use agentrt::ModelError;
            use agentrt_provider::MAX_BODY_BYTES;

            use super::common::*;
            use super::{PROVIDER, model, ok_body};

            async fn call(fake: &Fake) -> Result<agentrt::ModelResponse, ModelError> {
                model(&fake.url(), None).generate(&hello()).await
            }

            #[tokio::test]
            async fn transient_statuses_are_transient_others_permanent_one_request_each() {
                for (status, transient) in [
                    (408, true),
                    (409, true),
                    (425, true),
                    (429, true),
                    (500, true),
                    (502, true),
                    (503, true),
                    (529, true),
                    (400, false),
                    (401, false),
                    (403, false),
                    (404, false),
                    (422, false),
                ] {
                    let body = r#"{"error":{"type":"some_error","message":"it went wrong"}}"#;
                    let fake = Fake::start(reply(status, &[], body)).await;
                    let err = call(&fake).await.err();
                    let message = match (&err, transient) {
                        (Some(ModelError::Transient { message, retry_after: None }), true) => message,
                        (Some(ModelError::Status { message, status: got }), false) if *got == status => message,
                        _ => panic!("{status}: {err:?}"),
                    };
                    assert_eq!(message, &format!("{PROVIDER}: {status}: {body}"));
                    assert_eq!(fake.seen().len(), 1, "{status}: retried");
                    fake.stop().await;
                }
            }

            #[tokio::test]
            async fn retry_after_in_seconds_or_http_date_rides_on_the_transient_error() {
                let fake = Fake::start(reply(429, &[("retry-after", "2")], "slow down")).await;
                let err = call(&fake).await.err();
                assert!(
                    matches!(&err, Some(ModelError::Transient { retry_after: Some(d), message })
                        if *d == Duration::from_secs(2) && message.ends_with("429: slow down")),
                    "{err:?}"
                );
                assert_eq!(fake.seen().len(), 1);
                fake.stop().await;

                let at = jiff::Timestamp::now()
                    .checked_add(jiff::SignedDuration::from_secs(30))
                    .expect("time");
                let date = jiff::fmt::rfc2822::DateTimePrinter::new()
                    .timestamp_to_rfc9110_string(&at)
                    .expect("date");
                let fake = Fake::start(reply(503, &[("retry-after", &date)], "busy")).await;
                let err = call(&fake).await.err();
                assert!(
                    matches!(&err, Some(ModelError::Transient { retry_after: Some(d), .. })
                        if *d > Duration::from_secs(20) && *d <= Duration::from_secs(30)),
                    "{date}: {err:?}"
                );
                fake.stop().await;

                for junk in ["-1", "3601", "soon"] {
                    let fake = Fake::start(reply(429, &[("retry-after", junk)], "x")).await;
                    let err = call(&fake).await.err();
                    assert!(
                        matches!(&err, Some(ModelError::Transient { retry_after: None, .. })),
                        "{junk}: {err:?}"
                    );
                    fake.stop().await;
                }
            }

            #[tokio::test]
            async fn a_body_cut_mid_read_is_connection_lost() {
                let fake = Fake::start(cut_body(r#"{"partial": tru"#)).await;
                let err = call(&fake).await.err();
                assert!(matches!(&err, Some(ModelError::ConnectionLost { .. })), "{err:?}");
                assert_eq!(fake.seen().len(), 1);
                fake.stop().await;
            }

            #[tokio::test]
            async fn redirects_are_not_followed_and_name_only_the_host() {
                let fake = Fake::start(reply(
                    302,
                    &[("location", "https://elsewhere.example/secret/path?token=abc")],
                    "",
                ))
                .await;
                let err = call(&fake).await.err();
                let Some(ModelError::Status { message, status: 302 }) = &err else {
                    panic!("{err:?}");
                };
                assert!(message.starts_with(&format!("{PROVIDER}: 302: redirects are not followed")), "{message}");
                assert!(message.contains("host elsewhere.example"), "{message}");
                assert!(!message.contains("secret") && !message.contains("token"), "{message}");
                assert_eq!(fake.seen().len(), 1);
                fake.stop().await;

                // A redirect to this very server is not followed either.
                let fake = Fake::start(reply(307, &[("location", "/moved/here")], "")).await;
                let err = call(&fake).await.err();
                assert!(
                    matches!(&err, Some(ModelError::Status { message, status: 307 })
                        if message.contains("elsewhere on the same host") && !message.contains("moved")),
                    "{err:?}"
                );
                assert_eq!(fake.seen().len(), 1, "the redirect was followed");
                fake.stop().await;
            }

            #[tokio::test]
            async fn a_body_one_byte_over_16_mib_is_refused_and_16_mib_exactly_is_read() {
                let fake = Fake::start(ok_json(padded(&ok_body(), MAX_BODY_BYTES + 1))).await;
                let err = call(&fake).await.err();
                assert!(
                    matches!(&err, Some(ModelError::Other { message }) if message.contains("too large")),
                    "{err:?}"
                );
                fake.stop().await;

                let fake = Fake::start(ok_json(padded(&ok_body(), MAX_BODY_BYTES))).await;
                let reply = call(&fake).await;
                assert!(
                    reply.as_ref().is_ok_and(|r| r.raw.as_ref().is_some_and(|raw| raw.len() == MAX_BODY_BYTES)),
                    "{:?}",
                    reply.map(|r| r.text)
                );
                fake.stop().await;
            }

            #[tokio::test]
            async fn a_timeout_is_a_timeout() {
                let fake = Fake::start(slow(Duration::from_secs(5), ok_body())).await;
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_millis(200))
                    .build()
                    .expect("client");
                let err = model(&fake.url(), Some(client)).generate(&hello()).await.err();
                assert!(matches!(&err, Some(ModelError::Timeout { .. })), "{err:?}");
                assert_eq!(fake.seen().len(), 1);
                fake.stop().await;
            }

            #[tokio::test]
            async fn a_refused_connection_is_transient() {
                let port = closed_port().await;
                let err = model(&format!("http://127.0.0.1:{port}"), None)
                    .generate(&hello())
                    .await
                    .err();
                assert!(
                    matches!(&err, Some(ModelError::Transient { retry_after: None, .. })),
                    "{err:?}"
                );
            }

            #[tokio::test]
            async fn a_tls_failure_is_permanent() {
                // https to a plain-http server: the handshake fails.
                let fake = Fake::start(ok_json(ok_body())).await;
                let base = fake.url().replace("http://", "https://");
                let err = model(&base, None).generate(&hello()).await.err();
                assert!(
                    matches!(&err, Some(ModelError::Other { message }) if message.contains("TLS")),
                    "{err:?}"
                );
                fake.stop().await;
            }

            #[tokio::test]
            async fn a_dns_failure_is_permanent() {
                let client = reqwest::Client::builder()
                    .dns_resolver(FailingResolver)
                    .build()
                    .expect("client");
                let err = model("http://localhost:9", Some(client))
                    .generate(&hello())
                    .await
                    .err();
                assert!(
                    matches!(&err, Some(ModelError::Other { message })
                        if message.to_lowercase().contains("dns")),
                    "{err:?}"
                );
            }

            #[tokio::test]
            async fn a_served_reply_keeps_its_raw_bytes() {
                let fake = Fake::start(ok_json(ok_body())).await;
                let reply = call(&fake).await.expect("reply");
                assert_eq!(reply.raw.as_deref(), Some(ok_body().as_str()));
                fake.stop().await;
            }
        }
    };
}
