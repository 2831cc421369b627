//! What the binary says when the receiver (an HTTP server on 127.0.0.1
//! here) refuses: an internal error (500) is logged on stderr with its
//! status and retried; a partial success (the request accepted, some
//! spans rejected, which must not be sent again) is logged with the count
//! rejected. Neither line holds the request's headers, the receiver's
//! answer or a span's text.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use agentrt::store::NewRun;
use agentrt::{EventType, Store, Timestamp};
use axum::http::{StatusCode, header};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceResponse,
};
use prost::Message;

/// In the headers, the receiver's answers and the run's goal: never in a
/// line.
const SECRET: &str = "s3cret";

/// A finished run `r1`: one span to send.
fn one_run(db: &Path) {
    let store = Store::open(db).unwrap();
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
            let created = serde_json::json!({ "goal": format!("goal {SECRET}") }).to_string();
            tx.append_event("r1", "", &at, EventType::RunCreated, &created)?;
            tx.append_event(
                "r1",
                "",
                &at,
                EventType::RunFinished,
                r#"{"status":"FAILED","reason":"tool_abort","detail":"s3cret detail","steps":0}"#,
            )
        })
        .unwrap();
}

/// A receiver on 127.0.0.1 answering every request with `status`,
/// `content_type` and `body`; its address. It runs on its own runtime,
/// kept alive by the returned handle.
fn receiver(
    status: StatusCode,
    content_type: &'static str,
    body: Vec<u8>,
) -> (std::net::SocketAddr, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let addr = runtime.block_on(async move {
        let app = axum::Router::new().fallback(move || {
            let body = body.clone();
            async move { (status, [(header::CONTENT_TYPE, content_type)], body) }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    });
    (addr, runtime)
}

/// The binary following `db` into `addr`, with a token in its headers;
/// its stderr, a line at a time.
fn exporter(db: &Path, addr: std::net::SocketAddr, once: bool) -> (Child, Receiver<String>) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentrt-export-otel"));
    command
        .arg("--db")
        .arg(db)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", format!("http://{addr}"))
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .env(
            "OTEL_EXPORTER_OTLP_HEADERS",
            format!("authorization=Bearer%20{SECRET}-token"),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if once {
        command.arg("--once");
    }
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (send, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if send.send(line).is_err() {
                return;
            }
        }
    });
    (child, lines)
}

/// Lines until one satisfies `wanted` (within 30 s in all: a guard, not a
/// timing check; other lines, such as the OTLP crate's own warnings, keep
/// coming while the export is retried).
fn until(lines: &Receiver<String>, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => {
                let done = wanted(&line);
                seen.push(line);
                if done {
                    return seen;
                }
            }
            Err(_) => return seen,
        }
    }
}

#[test]
fn a_receivers_internal_error_is_logged_with_its_status_and_nothing_secret() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    one_run(&db);
    let (addr, _runtime) = receiver(
        StatusCode::INTERNAL_SERVER_ERROR,
        "text/plain",
        format!("internal error, you sent Bearer {SECRET}-token").into_bytes(),
    );
    let (mut child, lines) = exporter(&db, addr, true);
    let seen = until(&lines, |line| line.contains("status code: 500"));
    // It keeps the spans and tries again: stopped here by a signal.
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    // Everything it said, to the end of its stderr.
    let said: Vec<String> = seen.into_iter().chain(lines.iter()).collect();
    assert!(
        said.iter()
            .any(|l| l.contains("export of 1 span(s) failed") && l.contains("status code: 500")),
        "the failure is reported: {said:#?}"
    );
    assert!(
        said.iter().all(|l| !l.contains(SECRET)),
        "nothing secret: {said:#?}"
    );
    let cursor = dir.path().join("runs.db.otel-cursor");
    assert!(
        !cursor.exists(),
        "the cursor did not move past unsent spans"
    );
}

#[test]
fn a_receivers_partial_rejection_is_logged_with_the_count_and_nothing_secret() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    one_run(&db);
    let answer = ExportTraceServiceResponse {
        partial_success: Some(ExportTracePartialSuccess {
            rejected_spans: 1,
            error_message: format!("span rejected: attribute {SECRET} too long"),
        }),
    };
    let (addr, _runtime) = receiver(
        StatusCode::OK,
        "application/x-protobuf",
        answer.encode_to_vec(),
    );
    let (mut child, lines) = exporter(&db, addr, true);
    assert!(child.wait().unwrap().success());
    // Everything it said, to the end of its stderr.
    let said: Vec<String> = lines.iter().collect();
    assert!(
        said.iter()
            .any(|l| l.contains("PartialSuccess") && l.contains("rejected_spans=1")),
        "the rejection is reported: {said:#?}"
    );
    assert!(
        said.iter().all(|l| !l.contains(SECRET)),
        "nothing secret: {said:#?}"
    );
}
