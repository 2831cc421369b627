//! `runs`: the runs, newest first; with `--label`, only the runs that carry
//! every label given.

use std::io::Write;

use agentrt::text::{clip, sanitize};
use agentrt::view;
use agentrt::{Labels, Store};

use super::footer;
use crate::args::Paging;
use crate::error::CliError;
use crate::output::{self, cell, line};

/// Goals are clipped to this many bytes in the table.
const GOAL_BYTES: usize = 60;

pub fn run(
    store: &Store,
    paging: Paging,
    labels: &Labels,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let page = view::runs_page_labelled(store, paging.limit, paging.offset, labels)?;
    if json {
        return output::json(out, &page);
    }
    let runs = if labels.is_empty() {
        "runs".to_owned()
    } else {
        let given: Vec<String> = labels
            .iter()
            .map(|(key, value)| sanitize(&format!("{key}={value}")))
            .collect();
        format!("runs labelled {}", given.join(" "))
    };
    if page.total == 0 {
        return line(out, &format!("no {runs}"));
    }
    if page.runs.is_empty() {
        return line(
            out,
            &format!(
                "no {runs} at --offset {} (there are {})",
                page.offset, page.total
            ),
        );
    }
    let rows: Vec<Vec<String>> = page
        .runs
        .iter()
        .map(|r| {
            vec![
                cell(&r.id),
                cell(r.status.as_str()),
                cell(r.reason.map(|x| x.as_str()).unwrap_or_default()),
                r.steps.to_string(),
                output::stamp(&r.created_at),
                cell(r.pending_approval_id.as_deref().unwrap_or_default()),
                cell(&clip(&r.goal, GOAL_BYTES)),
            ]
        })
        .collect();
    let headers = [
        "RUN", "STATUS", "REASON", "STEPS", "CREATED", "APPROVAL", "GOAL",
    ];
    for text in output::table(&headers, &rows) {
        line(out, &text)?;
    }
    if let Some(text) = footer("run(s)", page.offset, page.runs.len(), page.total) {
        line(out, &text)?;
    }
    Ok(())
}
