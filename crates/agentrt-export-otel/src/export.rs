//! Following a database into an OTLP/HTTP receiver: the follower's pages
//! turned into spans and exported, the cursor moved only once an export
//! succeeded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use agentrt::follow::{Cursor, FileCursor};
use agentrt::{Cancel, Event, EventType, Store};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{SpanData, SpanExporter as _};

use crate::environment::{EnvironmentError, OtelEnvironment};
use crate::{Spans, SpansOptions};

/// Events read at a time.
const PAGE: u64 = 500;
/// The longest pause between two attempts at a failed export.
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long one wait for a commit lasts before looking again.
const WAIT: Duration = Duration::from_secs(60);

/// What `agentrt-export-otel` is asked to do.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    /// The database (opened read-only).
    pub db: PathBuf,
    /// Where the position is kept.
    pub cursor: PathBuf,
    /// What the spans carry.
    pub spans: SpansOptions,
    /// Export what is there, then return.
    pub once: bool,
}

/// Why exporting stopped.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The database or the cursor failed.
    #[error(transparent)]
    Store(#[from] agentrt::Error),
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// An `OTEL_*` variable cannot be used.
    #[error(transparent)]
    Environment(#[from] EnvironmentError),
}

/// The OTLP/HTTP (protobuf) exporter `environment` describes (read it
/// with [`OtelEnvironment::from_process`]): its endpoint, headers and
/// timeout, and a resource with its service name and attributes.
pub fn otlp_exporter(environment: &OtelEnvironment) -> Result<SpanExporter, ExportError> {
    let headers: HashMap<String, String> = environment
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(environment.endpoint.clone())
        .with_timeout(environment.timeout)
        .with_headers(headers)
        .build()
        .map_err(|e| ExportError::Exporter(e.to_string()))?;
    // The SDK's own detectors would read the environment again.
    let resource = Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attributes(
            environment
                .resource
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone())),
        )
        .with_service_name(environment.service_name.clone())
        .build();
    exporter.set_resource(&resource);
    Ok(exporter)
}

/// Feeds `spans` the earlier events of the run `event` belongs to, when
/// it has not seen the run begin (a restart past the run's start): the
/// spans those events finish were exported before the cursor and are
/// dropped; the spans they open finish later, whole.
async fn prime(store: &Store, spans: &mut Spans, event: &Event) -> Result<(), ExportError> {
    if spans.knows(&event.run_id) || event.event_type == EventType::RunCreated {
        return Ok(());
    }
    let run = event.run_id.clone();
    let before = event.seq;
    let earlier = store
        .off_executor(move |s| {
            let mut all = Vec::new();
            let mut after = 0;
            loop {
                let page = s.events_after_capped(Some(&run), after, PAGE)?;
                let full = page.len() as u64 == PAGE;
                for e in page {
                    if e.seq >= before {
                        return Ok(all);
                    }
                    after = e.seq;
                    all.push(e);
                }
                if !full {
                    return Ok(all);
                }
            }
        })
        .await?;
    for e in &earlier {
        let _already_exported = spans.handle(e);
    }
    Ok(())
}

/// Exports `batch`, again and again with a growing pause while it fails,
/// until it succeeds (`true`) or `stop` fires (`false`).
async fn export(exporter: &SpanExporter, batch: Vec<SpanData>, stop: &Cancel) -> bool {
    let mut pause = Duration::from_millis(200);
    loop {
        match exporter.export(batch.clone()).await {
            Ok(()) => return true,
            Err(e) => eprintln!(
                "agentrt-export-otel: export of {} span(s) failed ({e}); again in {} ms",
                batch.len(),
                pause.as_millis()
            ),
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => return false,
        }
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

/// Runs `f` on the blocking pool.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> agentrt::Result<T> + Send + 'static,
) -> Result<T, ExportError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ExportError::Exporter(format!("a blocking task failed: {e}")))?
        .map_err(ExportError::Store)
}

/// Follows the database into `exporter` until `stop` (or, with `once`,
/// until caught up). The cursor moves past a page only once its spans
/// were exported: a receiver that is down holds the follower where it is,
/// and nothing is lost from the database's point of view.
pub async fn run(
    options: &ExportOptions,
    exporter: &SpanExporter,
    stop: &Cancel,
) -> Result<(), ExportError> {
    // Opening, and every load and save of the cursor (a synced file),
    // run on the blocking pool, never on the runtime's thread.
    let (db, cursor) = (options.db.clone(), FileCursor::new(&options.cursor));
    let (store, mut after) = blocking(move || {
        let store = Store::open_existing(&db, true)?;
        let mut cursor = cursor;
        Ok((store, cursor.load()?))
    })
    .await?;
    let mut spans = Spans::new(options.spans.clone());
    loop {
        if stop.is_cancelled() {
            return Ok(());
        }
        let page = store
            .off_executor(move |s| s.events_after_capped(None, after, PAGE))
            .await?;
        let mut batch = Vec::new();
        for event in &page {
            prime(&store, &mut spans, event).await?;
            batch.extend(spans.handle(event));
        }
        if let Some(last) = page.last() {
            if !batch.is_empty() && !export(exporter, batch, stop).await {
                // Stopped while the receiver was down: the cursor stays.
                return Ok(());
            }
            let (cursor, seq) = (FileCursor::new(&options.cursor), last.seq);
            blocking(move || {
                let mut cursor = cursor;
                cursor.save(seq)
            })
            .await?;
            after = last.seq;
        }
        if page.len() as u64 == PAGE {
            continue;
        }
        if options.once {
            return Ok(());
        }
        tokio::select! {
            waited = store.wait_for_event(after, WAIT) => { waited?; }
            () = stop.cancelled() => return Ok(()),
        }
    }
}
