//! An approval as plain text (`?format=text`, or `Accept: text/plain`): the
//! CLI's approval block under the webhook's own header.

use std::fmt::Write;

use agentrt::text::{cap_with_count, sanitize};
use agentrt::view::{BlockOptions, MAX_TEXT_FIELD_BYTES, approval_block, approval_tool};
use agentrt::{ApprovalStatus, Timestamp};

use crate::Pending;

/// Where the CLI's block begins its fields: the header above it is ours.
const FIELDS_START: &str = "\narguments (";

/// One sanitized line of operator text, cut with a count of the rest.
fn line(s: &str) -> String {
    cap_with_count(&sanitize(s), MAX_TEXT_FIELD_BYTES)
}

/// The text form of `shown`:
///
/// ```text
/// APPROVAL <STATUS>  <id>
/// run     <run id>
/// kind    <kind>
/// tool    <tool>
/// reason  <policy reason>          (if any)
/// hash    <hash>
/// expires <RFC 3339>[ (expired)]   (if set)
/// decided <RFC 3339> by <who>      (if decided)
/// unread  <decode error>           (if any)
/// arguments (…)                    (the CLI's fields, then its closing line)
/// ```
pub(crate) fn approval_text(shown: &Pending) -> String {
    let approval = &shown.approval;
    let status = match approval.status.as_str() {
        "" => "UNKNOWN".to_owned(),
        s => s.to_uppercase(),
    };
    let tool = match approval_tool(approval) {
        t if t.is_empty() => "-".to_owned(),
        t => line(&t),
    };
    let mut out = String::new();
    let _ = writeln!(out, "APPROVAL {status}  {}", sanitize(&approval.id));
    let _ = writeln!(out, "run     {}", line(&approval.run_id));
    let _ = writeln!(out, "kind    {}", line(&approval.kind));
    let _ = writeln!(out, "tool    {tool}");
    if !shown.reason.is_empty() {
        let _ = writeln!(out, "reason  {}", line(&shown.reason));
    }
    let _ = writeln!(out, "hash    {}", sanitize(&approval.hash));
    if let Some(expires) = &approval.expires_at {
        let expired = if shown.expired || approval.status == ApprovalStatus::Expired {
            " (expired)"
        } else {
            ""
        };
        let _ = writeln!(out, "expires {expires}{expired}");
    }
    if let Some(decided) = &approval.decided_at {
        let _ = writeln!(out, "decided {decided} by {}", line(&approval.decided_by));
    }
    if let Some(problem) = &approval.decode_error {
        let _ = writeln!(out, "unread  {}", line(problem));
    }
    let stamp = |t: &Timestamp| t.to_string();
    let block = approval_block(
        approval,
        &BlockOptions {
            db_path: None,
            stamp: &stamp,
        },
    );
    match block.find(FIELDS_START) {
        Some(at) => out.push_str(&block[at + 1..]),
        None => out.push_str(&block),
    }
    out
}
