//! The approval text block an operator reads before deciding.

use std::fmt::Write as _;

use super::MAX_TEXT_FIELD_BYTES;
use super::bound::{bound_json, bound_text};
use crate::clock::Timestamp;
use crate::json::layout::pretty_json;
use crate::json::{Canonical, object_members};
use crate::model::{Approval, ApprovalStatus};
use crate::text::{cap_with_count, sanitize};

/// How [`approval_block`] renders the parts that depend on the caller.
pub struct BlockOptions<'a> {
    /// The database path as the operator named it; when set, the block
    /// ends with the command that decides the approval
    /// (`decide with: agentrt --db "<path>" approve <run> --approval <id>`).
    pub db_path: Option<&'a str>,
    /// Formats a time for the `expires` line (local time is the caller's
    /// business: the core has no time-zone data).
    pub stamp: &'a dyn Fn(&Timestamp) -> String,
}

/// One line of operator text: sanitized, then cut at
/// [`MAX_TEXT_FIELD_BYTES`] with a count of the rest.
fn text_line(s: &str) -> String {
    cap_with_count(&sanitize(s), MAX_TEXT_FIELD_BYTES)
}

/// A JSON string member of `value`, decoded.
fn string_member(value: &Canonical, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(|v| serde_json::from_str::<String>(v.as_str()).ok())
}

/// The tool an approval's request names (empty if it names none).
pub fn approval_tool(approval: &Approval) -> String {
    approval
        .request
        .get("spec")
        .and_then(|spec| string_member(&spec, "name"))
        .unwrap_or_default()
}

/// The approval as an operator reads it before deciding (design §18):
///
/// ```text
///
/// APPROVAL WAITING  <id>
/// kind    <kind>
/// tool    <tool>
/// needs   2 approvers[; approved by <first>, waiting for another]   (design §46)
/// expires <stamp>                 (when set)
/// unread  <decode error>          (when the row did not read back whole)
/// arguments (the tool call the model made; one field per line, byte count is the field's own size)
/// <fields of the request's args>
/// presentation (supplied by the consumer's policy; it may contain model-chosen text)
/// <fields of the presentation>
/// decide with: agentrt --db "<path>" approve <run> --approval <id>    (with a path)
/// ----- end of approval <id> for tool <tool> -----
/// ```
///
/// Fields: absent or `null` → `  (none)`; an empty object →
/// `  (no fields)`; any other non-object → one field named `value`;
/// otherwise one field per key, sorted, headed `  <key> (<N> bytes)` where
/// N is the size of the member's compact JSON as stored, then the value
/// bounded ([`bound_value`](super::bound_value)) and pretty-printed, every line indented four
/// spaces and sanitized. Every line is sanitized; the closing line is
/// always last. The text ends with a newline.
pub fn approval_block(approval: &Approval, options: &BlockOptions<'_>) -> String {
    let id = sanitize(&approval.id);
    let tool = approval_tool(approval);
    let tool = if tool.is_empty() {
        "-".to_owned()
    } else {
        text_line(&tool)
    };
    let mut out = String::new();
    let state = match approval.status {
        ApprovalStatus::Pending => "WAITING".to_owned(),
        other => other.as_str().to_uppercase(),
    };
    let _ = writeln!(out);
    let _ = writeln!(out, "APPROVAL {state}  {id}");
    let _ = writeln!(out, "kind    {}", text_line(&approval.kind));
    let _ = writeln!(out, "tool    {tool}");
    let needed = crate::approval::approvers_needed(approval);
    if needed > 1 {
        let first = crate::approval::first_approver(approval)
            .map(|by| format!("; approved by {}, waiting for another", text_line(by)))
            .unwrap_or_default();
        let _ = writeln!(out, "needs   {needed} approvers{first}");
    }
    if let Some(expires) = &approval.expires_at {
        let _ = writeln!(out, "expires {}", sanitize(&(options.stamp)(expires)));
    }
    if let Some(problem) = &approval.decode_error {
        let _ = writeln!(out, "unread  {}", text_line(problem));
    }
    let _ = writeln!(
        out,
        "arguments (the tool call the model made; one field per line, byte count is the field's own size)"
    );
    write_fields(&mut out, approval.request.get("args").as_ref());
    let _ = writeln!(
        out,
        "presentation (supplied by the consumer's policy; it may contain model-chosen text)"
    );
    write_fields(&mut out, Some(&approval.presentation));
    if let Some(path) = options.db_path {
        let _ = writeln!(
            out,
            "decide with: agentrt --db {} approve {} --approval {id}",
            sanitize(&format!("{path:?}")),
            sanitize(&approval.run_id),
        );
    }
    let _ = writeln!(out, "----- end of approval {id} for tool {tool} -----");
    out
}

/// The fields of one part of an approval (see [`approval_block`]).
fn write_fields(out: &mut String, value: Option<&Canonical>) {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        out.push_str("  (none)\n");
        return;
    };
    match object_members(value) {
        Some(members) if members.is_empty() => out.push_str("  (no fields)\n"),
        Some(members) => {
            for (key, member) in &members {
                write_field(out, key, member);
            }
        }
        None => write_field(out, "value", value),
    }
}

fn write_field(out: &mut String, key: &str, value: &Canonical) {
    let _ = writeln!(
        out,
        "  {} ({} bytes)",
        sanitize(&bound_text(key)),
        value.as_str().len()
    );
    for line in pretty_json(&bound_json(value.as_str())).lines() {
        let _ = writeln!(out, "    {}", sanitize(line));
    }
}
