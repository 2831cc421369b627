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

/// A variable the exporter cannot use stops it before it sends anything,
/// its error naming the variable (and the entry) but never the value: a
/// header entry that is not `name=value` (the OTLP crate alone would drop
/// it and send the rest), a service name that is not UTF-8 (the SDK alone
/// would fall back to `unknown_service`).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_otel_variable_stops_the_exporter_by_name_without_its_value() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

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
    let requests: Arc<Mutex<usize>> = Arc::default();
    let counter = Arc::clone(&requests);
    let app = axum::Router::new().fallback(move || {
        let counter = Arc::clone(&counter);
        async move {
            *counter.lock().unwrap() += 1;
            ""
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    for (variable, value, says) in [
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            OsString::from("authorization=Bearer%20s3cret-token,broken"),
            "OTEL_EXPORTER_OTLP_HEADERS: entry 2",
        ),
        (
            "OTEL_SERVICE_NAME",
            OsString::from_vec(b"s3cret-\xff".to_vec()),
            "OTEL_SERVICE_NAME is not valid UTF-8",
        ),
    ] {
        let (db, cursor) = (db.clone(), dir.path().join("cursor"));
        let output = tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_agentrt-export-otel"))
                .arg("--db")
                .arg(&db)
                .arg("--cursor")
                .arg(&cursor)
                .arg("--once")
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
                .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                .env_remove("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
                .env(variable, value)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{variable}: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
        assert!(!stderr.contains("s3cret"), "{stderr}");
    }
    assert_eq!(*requests.lock().unwrap(), 0, "nothing was sent");
}
