//! `agentrt-export-otel`: an agentrt database's runs sent to an
//! OpenTelemetry collector over OTLP/HTTP, as they commit.

use std::path::PathBuf;
use std::process::ExitCode;

use agentrt::cancel_pair;
use agentrt_export_otel::SpansOptions;
use agentrt_export_otel::environment::OtelEnvironment;
use agentrt_export_otel::export::{ExportOptions, otlp_exporter, run};
use agentrt_export_otel::warnings::OtelWarnings;
use clap::Parser;

/// Send a database's runs to an OpenTelemetry collector (OTLP/HTTP), as
/// they commit. The endpoint, headers, timeout and resource come from the
/// OTEL_* environment (OTEL_EXPORTER_OTLP_ENDPOINT, default
/// http://localhost:4318; OTEL_EXPORTER_OTLP_HEADERS; OTEL_SERVICE_NAME,
/// default agentrt; OTEL_RESOURCE_ATTRIBUTES), checked before anything is
/// sent.
#[derive(Parser)]
#[command(name = "agentrt-export-otel", version)]
struct Cli {
    /// The database (read only).
    #[arg(long)]
    db: PathBuf,
    /// Where the position is kept (default: the database's path with
    /// `.otel-cursor` added).
    #[arg(long)]
    cursor: Option<PathBuf>,
    /// Export what models, tools, policies and servers wrote too (tool
    /// arguments, results and errors, reasons, details; bounded): they may
    /// hold secrets. Without it a failure is sent as its kind and length.
    #[arg(long)]
    content: bool,
    /// Export what is there, then exit.
    #[arg(long)]
    once: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // What the OTLP crate reports only as its own log events (a receiver
    // rejecting part of an export) goes to stderr, without text fields.
    let _ = tracing::subscriber::set_global_default(OtelWarnings::to_stderr());
    let cursor = cli.cursor.unwrap_or_else(|| {
        let mut path = cli.db.clone().into_os_string();
        path.push(".otel-cursor");
        PathBuf::from(path)
    });
    let options = ExportOptions {
        db: cli.db,
        cursor,
        spans: SpansOptions {
            content: cli.content,
            ..SpansOptions::default()
        },
        once: cli.once,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentrt-export-otel: error: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(async {
        let environment = OtelEnvironment::from_process()?;
        let exporter = otlp_exporter(&environment)?;
        let (handle, stop) = cancel_pair();
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            if let (Ok(mut term), Ok(mut int)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                tokio::spawn(async move {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                    handle.cancel();
                });
            }
        }
        run(&options, &exporter, &stop).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agentrt-export-otel: error: {e}");
            ExitCode::from(1)
        }
    }
}
