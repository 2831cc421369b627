//! `events <run>`: the run's events in order, as trace lines or JSON Lines.

use std::io::Write;

use agentrt::store::PAGE_READ_ROWS;
use agentrt::view;
use agentrt::{Event, Store};

use super::footer;
use crate::args::Paging;
use crate::error::CliError;
use crate::output::{self, line};

pub fn run(
    store: &Store,
    run_id: &str,
    paging: Paging,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    // An unknown run is an error, not an empty listing.
    store.get_run_capped(run_id)?;
    let write = |out: &mut dyn Write, events: &[Event]| -> Result<(), CliError> {
        for event in events {
            let text = if json {
                view::event_record(event)
            } else {
                view::event_line_with(event, output::stamp_ms)
            };
            line(out, &text)?;
        }
        Ok(())
    };
    if paging.limit == 0 {
        // Every event from the offset on, printed a page at a time as read.
        let first = store.events_page_capped(run_id, PAGE_READ_ROWS, paging.offset)?;
        write(out, &first.items)?;
        let mut last = first.items.last().map(|e| e.seq);
        let mut got = first.items.len() as u64;
        while got == PAGE_READ_ROWS {
            let Some(after) = last else { break };
            let next = store.events_after_capped(Some(run_id), after, PAGE_READ_ROWS)?;
            write(out, &next)?;
            last = next.last().map(|e| e.seq);
            got = next.len() as u64;
        }
        return Ok(());
    }
    let page = store.events_page_capped(run_id, paging.limit, paging.offset)?;
    write(out, &page.items)?;
    let shown = page.items.len();
    if paging.offset.saturating_add(shown as u64) < page.total {
        if json {
            line(
                out,
                &format!(
                    "{{\"meta\":true,\"truncated\":true,\"total\":{},\"returned\":{shown},\"offset\":{}}}",
                    page.total, paging.offset
                ),
            )?;
        } else if let Some(text) = footer("event(s)", paging.offset, shown, page.total) {
            line(out, &text)?;
        }
    }
    Ok(())
}
