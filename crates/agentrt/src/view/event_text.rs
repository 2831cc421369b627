//! An event as a record (one JSON line) and as a trace line.

use std::fmt::Write as _;

use super::{EVENT_TYPE_WIDTH, MAX_PAYLOAD_TEXT_BYTES, bound::floor_prefix};
use crate::clock::Timestamp;
use crate::json::layout::compact_into;
use crate::json::{check_boundary, write_string};
use crate::model::Event;
use crate::text::sanitize;

/// The JSON Lines record of an event (design §18):
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
