//! The read model an operator sees: run and step summaries, paged listings
//! over the store's bounded reads, which approval an operator means,
//! approvals bounded for display, the approval text block, and the event
//! record (JSON Lines) and trace line.
//!
//! Everything here reads through the capped page reads of the store, so a
//! database with huge rows is shown with small memory. Text meant for a
//! terminal is sanitized here ([`crate::text::sanitize`]); JSON is never
//! sanitized and never HTML-escaped.
//!
//! The core has no time-zone data, so functions that print a time take the
//! formatted stamp, or a formatter, from the caller.

mod approval_text;
mod bound;
mod event_text;
mod listing;

pub use crate::json::layout::pretty_json;
pub use approval_text::{BlockOptions, approval_block, approval_tool};
pub use bound::{bound_approval, bound_text, bound_value};
pub use event_text::{event_line, event_line_with, event_record};
pub use listing::{
    Detail, RunSummary, RunsPage, StepSummary, detail_page, pending_approval, run_summary,
    runs_page, runs_page_labelled,
};

/// Strings longer than this many bytes in a bounded approval are shown as
/// head and tail around a marker (see [`bound_text`]).
pub const MAX_FIELD_BYTES: usize = 2000;

/// How many pending approval ids [`Error::AmbiguousApproval`](crate::Error::AmbiguousApproval) lists.
pub const MAX_LISTED_APPROVALS: usize = 20;

/// Text fields of a run or an approval (goal, reason detail, kind, decode
/// error) are cut at this many bytes in the text forms, with a count of
/// the rest.
pub const MAX_TEXT_FIELD_BYTES: usize = 4000;

/// A trace line's payload is cut at this many bytes, with a count of the
/// rest.
pub const MAX_PAYLOAD_TEXT_BYTES: usize = 8000;

/// The width the event type is padded to in a trace line.
pub const EVENT_TYPE_WIDTH: usize = 22;
