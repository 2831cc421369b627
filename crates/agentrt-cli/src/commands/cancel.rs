//! `cancel <run>`: cancel a run that has not finished.

use std::io::Write;

use agentrt::text::sanitize;
use agentrt::view::{self, RunSummary};
use agentrt::{Error, Operator, Store};
use serde::Serialize;

use crate::error::CliError;
use crate::output::{self, line};

/// The JSON report.
#[derive(Serialize)]
struct Report<'a> {
    run: &'a RunSummary,
}

pub fn run(
    store: &Store,
    run_id: &str,
    by: &str,
    note: &str,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let cancelled = Operator::new(store.clone())
        .cancel(run_id, by, note)
        .map_err(|e| match e {
            Error::RunState { run, status, .. } if status.is_terminal() => CliError::Failed(
                format!("run {run} is already {status}; nothing was changed"),
            ),
            other => CliError::from(other),
        })?;
    let summary = view::run_summary(store, &cancelled.id)?;
    if json {
        return output::json(out, &Report { run: &summary });
    }
    let mut text = format!("run {}: {}", sanitize(&summary.id), summary.status);
    if let Some(reason) = summary.reason {
        text.push_str(&format!(" ({reason})"));
    }
    line(out, &text)
}
