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

use std::borrow::Cow;
use std::fmt::Write as _;

use serde::{Serialize, Serializer};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::json::{Canonical, check_boundary, object_members, write_string};
use crate::model::{
    Approval, ApprovalStatus, Event, Labels, Run, RunStatus, Step, StepStatus, TerminalReason,
    Usage,
};
use crate::store::{PAGE_READ_ROWS, Page, Store};
use crate::text::{cap_with_count, sanitize};

/// Strings longer than this many bytes in a bounded approval are shown as
/// head and tail around a marker (see [`bound_text`]).
pub const MAX_FIELD_BYTES: usize = 2000;

/// Bytes of the head kept by [`bound_text`].
const HEAD_BYTES: usize = MAX_FIELD_BYTES / 2;
/// Bytes of the tail kept by [`bound_text`].
const TAIL_BYTES: usize = MAX_FIELD_BYTES / 2;

/// How many pending approval ids [`Error::AmbiguousApproval`] lists.
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

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero_i64(n: &i64) -> bool {
    *n == 0
}

/// One run as listed: `{id, goal, labels?, status, reason?, reason_detail?,
/// steps, created_at, finished_at?, pending_approval_id?, model_calls?,
/// usage?, estimated_cost_micros?}` in JSON (optional fields omitted when
/// empty or zero; `labels` is an object of strings).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    /// The run id.
    pub id: String,
    /// The goal, in full (as far as the page read returns it).
    pub goal: String,
    /// The labels the run was begun with.
    #[serde(skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Where the run stands.
    pub status: RunStatus,
    /// Why it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<TerminalReason>,
    /// Detail of the reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason_detail: String,
    /// Steps started.
    pub steps: u64,
    /// When it was created.
    pub created_at: Timestamp,
    /// When it finished (never set for a run that has not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Timestamp>,
    /// The pending approval, only for a run waiting for approval with
    /// exactly one pending approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_approval_id: Option<String>,
    /// Model call attempts charged.
    #[serde(skip_serializing_if = "is_zero_u64")]
    pub model_calls: u64,
    /// Tokens charged.
    #[serde(skip_serializing_if = "Usage::is_zero")]
    pub usage: Usage,
    /// Estimated spend in micro-dollars.
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub estimated_cost_micros: i64,
}

impl RunSummary {
    /// The summary of `run`. `pending_approval_id` is kept only when the
    /// run is waiting for approval.
    pub fn from_run(run: &Run, pending_approval_id: Option<String>) -> RunSummary {
        RunSummary {
            id: run.id.clone(),
            goal: run.goal.clone(),
            labels: run.labels.clone(),
            status: run.status,
            reason: run.reason,
            reason_detail: run.reason_detail.clone(),
            steps: run.step_count,
            created_at: run.created_at,
            finished_at: run.finished_at,
            pending_approval_id: pending_approval_id
                .filter(|_| run.status == RunStatus::WaitingForApproval),
            model_calls: run.model_calls,
            usage: run.usage,
            estimated_cost_micros: run.estimated_cost_micros,
        }
    }
}

/// One step as listed: `{index, id, tool?, decision?, status, policy?,
/// observation?, summary?}` in JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    /// Position in the run.
    pub index: u64,
    /// The step id.
    pub id: String,
    /// The tool the decision named.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tool: String,
    /// The decision kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub decision: String,
    /// Where the step stands.
    pub status: StepStatus,
    /// The policy's outcome.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub policy: String,
    /// The observation kind.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub observation: String,
    /// The observation's summary.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// Why a column of the step could not be read (not part of the JSON
    /// form; text views may show it).
    #[serde(skip)]
    pub decode_error: Option<String>,
}

impl StepSummary {
    /// The summary of `step`.
    pub fn from_step(step: &Step) -> StepSummary {
        let decision = step.decision.as_ref();
        StepSummary {
            index: step.index,
            id: step.id.clone(),
            tool: decision.map(|d| d.tool.clone()).unwrap_or_default(),
            decision: decision
                .map(|d| d.kind.as_str().to_owned())
                .unwrap_or_default(),
            status: step.status,
            policy: step
                .policy
                .as_ref()
                .map(|p| p.outcome.as_str().to_owned())
                .unwrap_or_default(),
            observation: step
                .observation
                .as_ref()
                .map(|o| o.kind.as_str().to_owned())
                .unwrap_or_default(),
            summary: step
                .observation
                .as_ref()
                .map(|o| o.summary.clone())
                .unwrap_or_default(),
            decode_error: step.decode_error.clone(),
        }
    }
}

/// A page of runs, newest first: `{"runs":[…],"total":N,"limit":L,
/// "offset":O,"truncated":true}` in JSON (`truncated` omitted when false).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsPage {
    /// The runs of this page.
    pub runs: Vec<RunSummary>,
    /// How many runs there are.
    pub total: u64,
    /// The page size asked for (0: all).
    pub limit: u64,
    /// How many runs were skipped.
    pub offset: u64,
    /// More runs exist past this page.
    #[serde(skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// A run with a page of its steps and pending approvals (they share
/// `limit` and `offset`). In JSON the approvals are bounded
/// ([`bound_approval`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detail {
    /// The run.
    pub run: RunSummary,
    /// The page of steps, in index order.
    pub steps: Vec<StepSummary>,
    /// How many steps the run has.
    pub steps_total: u64,
    /// More steps exist past this page.
    #[serde(skip_serializing_if = "is_false")]
    pub steps_truncated: bool,
    /// The page of pending approvals, in creation order (as read; bounded
    /// in JSON).
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_bounded_list"
    )]
    pub approvals: Vec<Approval>,
    /// How many approvals of the run are pending.
    pub approvals_total: u64,
    /// The approval the run waits for, when it waits for exactly one
    /// (bounded in JSON).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "serialize_bounded_option"
    )]
    pub waiting_approval: Option<Approval>,
    /// The page size asked for (0: all).
    pub limit: u64,
    /// How many steps (and pending approvals) were skipped.
    pub offset: u64,
}

impl Detail {
    /// More pending approvals exist past this page.
    pub fn approvals_truncated(&self) -> bool {
        self.offset.saturating_add(self.approvals.len() as u64) < self.approvals_total
    }
}

fn serialize_bounded_list<S: Serializer>(list: &[Approval], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(list.iter().map(bound_approval))
}

fn serialize_bounded_option<S: Serializer>(
    approval: &Option<Approval>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match approval {
        Some(a) => bound_approval(a).serialize(s),
        None => s.serialize_none(),
    }
}

/// Reads `limit` rows at `offset` with `read`, or, for `limit` 0, every
/// row from `offset` on, [`PAGE_READ_ROWS`] at a time. The total is the
/// first read's.
fn read_paged<T>(
    limit: u64,
    offset: u64,
    mut read: impl FnMut(u64, u64) -> Result<Page<T>>,
) -> Result<Page<T>> {
    if limit > 0 {
        return read(limit, offset);
    }
    let mut first = read(PAGE_READ_ROWS, offset)?;
    let mut got = first.items.len() as u64;
    let mut at = offset.saturating_add(got);
    while got == PAGE_READ_ROWS {
        let next = read(PAGE_READ_ROWS, at)?;
        got = next.items.len() as u64;
        at = at.saturating_add(got);
        first.items.extend(next.items);
    }
    Ok(first)
}

/// A page of runs, newest first; `limit` 0 reads them all, a page of
/// [`PAGE_READ_ROWS`] at a time. Each waiting run with exactly one pending
/// approval carries its id.
pub fn runs_page(store: &Store, limit: u64, offset: u64) -> Result<RunsPage> {
    runs_page_labelled(store, limit, offset, &Labels::new())
}

/// [`runs_page`] of the runs that carry every label of `labels` (all runs
/// for none); the total counts the matching runs only.
pub fn runs_page_labelled(
    store: &Store,
    limit: u64,
    offset: u64,
    labels: &Labels,
) -> Result<RunsPage> {
    let page = read_paged(limit, offset, |l, o| {
        store.runs_page_capped_labelled(l, o, labels)
    })?;
    let waiting: Vec<&str> = page
        .items
        .iter()
        .filter(|r| r.status == RunStatus::WaitingForApproval)
        .map(|r| r.id.as_str())
        .collect();
    let mut pending = store.pending_counts_capped(&waiting)?;
    let runs: Vec<RunSummary> = page
        .items
        .iter()
        .map(|r| {
            let id = pending.remove(&r.id).and_then(|p| p.only_id);
            RunSummary::from_run(r, id)
        })
        .collect();
    let truncated = offset.saturating_add(runs.len() as u64) < page.total;
    Ok(RunsPage {
        runs,
        total: page.total,
        limit,
        offset,
        truncated,
    })
}

/// The summary of one run ([`Error::NotFound`] if there is none).
pub fn run_summary(store: &Store, run_id: &str) -> Result<RunSummary> {
    let run = store.get_run_capped(run_id)?;
    let pending = if run.status == RunStatus::WaitingForApproval {
        store
            .pending_counts_capped(&[run.id.as_str()])?
            .remove(&run.id)
            .and_then(|p| p.only_id)
    } else {
        None
    };
    Ok(RunSummary::from_run(&run, pending))
}

/// A run with a page of its steps and of its pending approvals, sharing
/// `limit` and `offset` (`limit` 0 reads them all, a page at a time).
/// [`Error::NotFound`] if there is no such run.
pub fn detail_page(store: &Store, run_id: &str, limit: u64, offset: u64) -> Result<Detail> {
    let run = store.get_run_capped(run_id)?;
    let steps = read_paged(limit, offset, |l, o| store.steps_page_capped(run_id, l, o))?;
    let approvals = read_paged(limit, offset, |l, o| {
        store.pending_approvals_page_capped(run_id, l, o)
    })?;
    let waiting = run.status == RunStatus::WaitingForApproval && approvals.total == 1;
    let waiting_approval = if !waiting {
        None
    } else if let Some(first) = approvals.items.first() {
        Some(first.clone())
    } else {
        store
            .pending_approvals_page_capped(run_id, 1, 0)?
            .items
            .into_iter()
            .next()
    };
    let summary = RunSummary::from_run(&run, waiting_approval.as_ref().map(|a| a.id.clone()));
    let steps_truncated = offset.saturating_add(steps.items.len() as u64) < steps.total;
    Ok(Detail {
        run: summary,
        steps: steps.items.iter().map(StepSummary::from_step).collect(),
        steps_total: steps.total,
        steps_truncated,
        approvals: approvals.items,
        approvals_total: approvals.total,
        waiting_approval,
        limit,
        offset,
    })
}

/// The approval an operator means (core §5.7), read capped.
///
/// With `named`, that approval of that run, which must be pending
/// ([`Error::NotPending`] naming its status; [`Error::NotFound`] if the run
/// has no such approval). Without, the run's only pending approval:
/// [`Error::NoPendingApproval`] when there is none,
/// [`Error::AmbiguousApproval`] listing up to [`MAX_LISTED_APPROVALS`] ids
/// and how many more when there are several. [`Error::NotFound`] if there
/// is no such run.
pub fn pending_approval(store: &Store, run_id: &str, named: Option<&str>) -> Result<Approval> {
    let run = store.get_run_capped(run_id)?;
    if let Some(id) = named {
        let approval = store.get_approval_capped(run_id, id)?;
        if approval.status != ApprovalStatus::Pending {
            return Err(Error::NotPending {
                approval: approval.id,
                status: approval.status,
            });
        }
        return Ok(approval);
    }
    let listed = MAX_LISTED_APPROVALS as u64;
    let (ids, total) = store.pending_approval_ids_capped(run_id, listed + 1)?;
    match (ids.as_slice(), total) {
        (_, 0) | ([], _) => Err(Error::NoPendingApproval { run: run.id }),
        ([only], 1) => store.get_approval_capped(run_id, only),
        _ => {
            let ids: Vec<String> = ids.into_iter().take(MAX_LISTED_APPROVALS).collect();
            let more =
                usize::try_from(total.saturating_sub(ids.len() as u64)).unwrap_or(usize::MAX);
            Err(Error::AmbiguousApproval {
                run: run.id,
                ids,
                more,
            })
        }
    }
}

/// `s` itself when it is at most [`MAX_FIELD_BYTES`] bytes; otherwise its
/// first 1000 bytes and its last 1000 bytes (cut on character boundaries)
/// around the marker `…[N bytes omitted]…`, where N counts the bytes left
/// out.
///
/// ```
/// use agentrt::view::bound_text;
/// assert_eq!(bound_text("short"), "short");
/// let long = format!("{}{}", "a".repeat(2500), "b".repeat(2500));
/// let shown = bound_text(&long);
/// assert!(shown.starts_with(&"a".repeat(1000)));
/// assert!(shown.contains("…[3000 bytes omitted]…"));
/// assert!(shown.ends_with(&"b".repeat(1000)));
/// ```
pub fn bound_text(s: &str) -> Cow<'_, str> {
    if s.len() <= MAX_FIELD_BYTES {
        return Cow::Borrowed(s);
    }
    let head = floor_prefix(s, HEAD_BYTES);
    let tail = ceil_suffix(s, TAIL_BYTES);
    let omitted = s.len() - head.len() - tail.len();
    Cow::Owned(format!(
        "{head}\u{2026}[{omitted} bytes omitted]\u{2026}{tail}"
    ))
}

/// `value` with every string over [`MAX_FIELD_BYTES`] bytes bounded by
/// [`bound_text`]. Object keys, numbers and the order of members are kept,
/// so the result is still canonical.
///
/// ```
/// use agentrt::json::Canonical;
/// use agentrt::view::bound_value;
/// let v = Canonical::parse_str(&format!(r#"{{"n":1.50,"s":"{}"}}"#, "x".repeat(5000)))?;
/// let b = bound_value(&v);
/// assert!(b.as_str().starts_with(r#"{"n":1.50,"s":"xxx"#));
/// assert!(b.as_str().contains("[3000 bytes omitted]"));
/// # Ok::<(), agentrt::json::JsonError>(())
/// ```
pub fn bound_value(value: &Canonical) -> Canonical {
    match bound_json(value.as_str()) {
        Cow::Borrowed(_) => value.clone(),
        // Strings were replaced by canonically escaped strings; keys and
        // everything else were copied: the text stays canonical.
        Cow::Owned(text) => Canonical::assume_canonical(text),
    }
}

/// `approval` with its capability, presentation and request bounded by
/// [`bound_value`]. The hash is never altered: it is the hash of the
/// approval as stored.
pub fn bound_approval(approval: &Approval) -> Approval {
    Approval {
        capability: bound_value(&approval.capability),
        presentation: bound_value(&approval.presentation),
        request: bound_value(&approval.request),
        ..approval.clone()
    }
}

/// The longest prefix of `s` of at most `max` bytes ending on a character
/// boundary.
fn floor_prefix(s: &str, max: usize) -> &str {
    let mut end = max.min(s.len());
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

/// The longest suffix of `s` of at most `max` bytes starting on a
/// character boundary.
fn ceil_suffix(s: &str, max: usize) -> &str {
    let mut start = s.len().saturating_sub(max);
    while start < s.len() && !s.is_char_boundary(start) {
        start += 1;
    }
    s.get(start..).unwrap_or_default()
}

/// Index of the quote closing the string that opens at `start` (or the
/// last byte, for an unterminated string).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while let Some(&b) = bytes.get(j) {
        match b {
            b'\\' => j += 2,
            b'"' => return j,
            _ => j += 1,
        }
    }
    bytes.len().saturating_sub(1)
}

fn is_json_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// JSON text with every string value (not key) over [`MAX_FIELD_BYTES`]
/// bytes bounded; borrowed when nothing changed.
fn bound_json(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    if bytes.len() <= MAX_FIELD_BYTES + 2 {
        return Cow::Borrowed(text);
    }
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'"' {
            i += 1;
            continue;
        }
        let end = string_end(bytes, i);
        let is_key = bytes
            .get(end + 1..)
            .and_then(|rest| rest.iter().find(|b| !is_json_space(**b)))
            == Some(&b':');
        if !is_key
            && end - i + 1 > MAX_FIELD_BYTES + 2
            && let Some(token) = text.get(i..=end)
            && let Ok(value) = serde_json::from_str::<String>(token)
            && value.len() > MAX_FIELD_BYTES
        {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(text.get(copied..i).unwrap_or_default());
            write_string(o, &bound_text(&value));
            copied = end + 1;
        }
        i = end + 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut o) => {
            o.push_str(text.get(copied..).unwrap_or_default());
            Cow::Owned(o)
        }
    }
}

/// Re-indents JSON text with two spaces per level, one member or element
/// per line, `": "` after keys, and `{}`/`[]` for empty containers.
/// Number literals and strings are copied as written.
///
/// ```
/// use agentrt::view::pretty_json;
/// assert_eq!(pretty_json(r#"{"a":[1,2.50],"b":{}}"#), "{\n  \"a\": [\n    1,\n    2.50\n  ],\n  \"b\": {}\n}");
/// ```
pub fn pretty_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut need_indent = false;
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    };
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        if matches!(c, ' ' | '\t' | '\n' | '\r') {
            continue;
        }
        if need_indent {
            need_indent = false;
            if c == '}' || c == ']' {
                out.push(c);
                continue;
            }
            depth += 1;
            newline(&mut out, depth);
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                need_indent = true;
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

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

/// The approval as an operator reads it before deciding (periphery §1.5):
///
/// ```text
///
/// APPROVAL WAITING  <id>
/// kind    <kind>
/// tool    <tool>
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
/// bounded ([`bound_value`]) and pretty-printed, every line indented four
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

/// The JSON Lines record of an event (core §11 trace):
/// `{"seq":…,"run_id":…,"step_id":…,"at":…,"type":…,"payload":…}` on one
/// line, without a trailing newline. `step_id` is omitted when empty, `at`
/// is the stored text, the payload is the stored JSON without its
/// insignificant whitespace (nothing is HTML-escaped); an empty payload is
/// `{}`; a payload that is not acceptable JSON is kept as a JSON string and
/// flagged `"invalid_payload":true`.
///
/// ```
/// use agentrt::{Event, EventType};
/// let event = Event {
///     seq: 7,
///     run_id: "r1".into(),
///     step_id: String::new(),
///     at: "2026-10-01T09:00:00.000000000Z".into(),
///     event_type: EventType::RunCreated,
///     payload: r#"{"goal":"a <b> & c"}"#.into(),
/// };
/// assert_eq!(
///     agentrt::view::event_record(&event),
///     r#"{"seq":7,"run_id":"r1","at":"2026-10-01T09:00:00.000000000Z","type":"run.created","payload":{"goal":"a <b> & c"}}"#
/// );
/// ```
pub fn event_record(event: &Event) -> String {
    let mut out = String::with_capacity(event.payload.len() + 160);
    let _ = write!(out, "{{\"seq\":{}", event.seq);
    out.push_str(",\"run_id\":");
    write_string(&mut out, &event.run_id);
    if !event.step_id.is_empty() {
        out.push_str(",\"step_id\":");
        write_string(&mut out, &event.step_id);
    }
    out.push_str(",\"at\":");
    write_string(&mut out, &event.at);
    out.push_str(",\"type\":");
    write_string(&mut out, event.event_type.as_str());
    out.push_str(",\"payload\":");
    let payload = event
        .payload
        .trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    if payload.is_empty() {
        out.push_str("{}");
    } else if check_boundary(payload.as_bytes()).is_ok() {
        compact_into(&mut out, payload);
    } else {
        write_string(&mut out, &event.payload);
        out.push_str(",\"invalid_payload\":true");
    }
    out.push('}');
    out
}

/// Copies valid JSON text without its insignificant whitespace.
fn compact_into(out: &mut String, text: &str) {
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            out.push(c);
        }
    }
}

/// The trace line of an event: `<stamp>  <type padded to 22> <payload>`,
/// the payload sanitized and cut at [`MAX_PAYLOAD_TEXT_BYTES`] bytes
/// followed by `...[N more bytes]`. `stamp` is the caller's rendering of
/// the event time (the CLI writes local time as
/// `YYYY-MM-DD HH:MM:SS.mmm ±hhmm`). No trailing newline.
///
/// ```
/// use agentrt::{Event, EventType};
/// let event = Event {
///     seq: 1,
///     run_id: "r1".into(),
///     step_id: String::new(),
///     at: "2026-10-01T09:00:00.000000000Z".into(),
///     event_type: EventType::RunStarted,
///     payload: "{\"say\":\"\u{1b}[2J\"}".into(),
/// };
/// assert_eq!(
///     agentrt::view::event_line(&event, "2026-10-01 09:00:00.000 +0000"),
///     "2026-10-01 09:00:00.000 +0000  run.started            {\"say\":\"\\x1b[2J\"}"
/// );
/// ```
pub fn event_line(event: &Event, stamp: &str) -> String {
    let payload = sanitize(&event.payload);
    let payload = if payload.len() > MAX_PAYLOAD_TEXT_BYTES {
        let head = floor_prefix(&payload, MAX_PAYLOAD_TEXT_BYTES);
        format!("{head}...[{} more bytes]", payload.len() - head.len())
    } else {
        payload
    };
    format!(
        "{}  {:<width$} {payload}",
        sanitize(stamp),
        event.event_type.as_str(),
        width = EVENT_TYPE_WIDTH
    )
}

/// [`event_line`] with the stamp made by `stamp` from the stored time; a
/// stored text that is not a time is shown as it is (sanitized).
pub fn event_line_with(event: &Event, stamp: impl Fn(&Timestamp) -> String) -> String {
    match Timestamp::parse(&event.at) {
        Ok(t) => event_line(event, &stamp(&t)),
        Err(_) => event_line(event, &event.at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_text_keeps_head_and_tail_on_char_boundaries() {
        let s = "é".repeat(1500); // 3000 bytes
        let b = bound_text(&s);
        let (head, rest) = b.split_once('\u{2026}').unwrap_or_default();
        assert!(head.len() <= HEAD_BYTES && head.len() >= HEAD_BYTES - 1);
        assert!(rest.starts_with('['));
        assert!(b.contains(" bytes omitted]"));
    }

    #[test]
    fn bound_json_leaves_keys_and_short_strings() {
        let key = "k".repeat(3000);
        let text = format!(r#"{{"{key}":"v","s":"{}"}}"#, "x".repeat(2001));
        let out = bound_json(&text);
        assert!(out.contains(&key));
        assert!(out.contains("…[1 bytes omitted]…"));
        let short = r#"{"a":"b"}"#;
        assert!(matches!(bound_json(short), Cow::Borrowed(_)));
    }

    #[test]
    fn pretty_json_handles_escapes_and_nesting() {
        assert_eq!(pretty_json("[]"), "[]");
        assert_eq!(pretty_json(r#""a\"{b""#), r#""a\"{b""#);
        assert_eq!(
            pretty_json(r#"{"a":{"b":[{}]}}"#),
            "{\n  \"a\": {\n    \"b\": [\n      {}\n    ]\n  }\n}"
        );
    }

    #[test]
    fn compact_removes_only_insignificant_whitespace() {
        let mut out = String::new();
        compact_into(&mut out, "{ \"a b\" : [ 1 , \"\\\" x\" ] }");
        assert_eq!(out, r#"{"a b":[1,"\" x"]}"#);
    }
}
