//! The `OTEL_*` environment reaches what the binary sends: the endpoint,
//! the headers, the service name and the resource attributes, seen in the
//! raw OTLP/HTTP request a capturing endpoint on 127.0.0.1 receives (the
//! spans themselves are checked against a real receiver in `receiver`).

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use agentrt::store::NewRun;
use agentrt::{EventType, Store, Timestamp};
use axum::body::Bytes;
use axum::http::HeaderMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otel_environment_sets_endpoint_headers_service_and_resource() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let store = Store::open(&db).unwrap();
    let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id: "r1",
                goal: "g",
                limits_json: "{}",
                created_at: at,
                lease_owner: "me",
                lease_expires_at: at,
            })?;
            tx.append_event("r1", "", &at, EventType::RunCreated, r#"{"goal":"g"}"#)?;
            tx.append_event(
                "r1",
                "",
                &at,
                EventType::RunFinished,
                r#"{"status":"COMPLETED","reason":"completed","detail":"","steps":0}"#,
            )
        })
        .unwrap();
    drop(store);

    let seen: Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: Bytes| {
            let sink = Arc::clone(&sink);
            async move {
                sink.lock()
                    .unwrap()
                    .push((uri.path().to_owned(), headers, body));
                ""
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let status = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_agentrt-export-otel"))
            .arg("--db")
            .arg(&db)
            .arg("--once")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-token=abc123")
            .env("OTEL_SERVICE_NAME", "my-agents")
            .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci-test")
            .stdin(Stdio::null())
            .status()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(status.success());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one export");
    let (path, headers, body) = &seen[0];
    assert_eq!(path, "/v1/traces");
    assert_eq!(headers["x-collector-token"], "abc123");
    assert_eq!(headers["content-type"], "application/x-protobuf");
    let contains = |needle: &str| body.windows(needle.len()).any(|w| w == needle.as_bytes());
    for needle in [
        "service.name",
        "my-agents",
        "deployment.environment",
        "ci-test",
        "agentrt.run",
    ] {
        assert!(contains(needle), "{needle} is not in the request");
    }
}
