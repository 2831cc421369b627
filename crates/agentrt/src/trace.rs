//! Observers that write the event trace as it commits: aligned text lines
//! for people, JSON Lines for machines. Both are safe to share between
//! threads and keep the first write error (an observer cannot return one).

use std::io::Write;
use std::sync::Mutex;

use crate::agent::Observer;
use crate::clock::{Timestamp, lock};
use crate::model::Event;
use crate::view;

/// A stamp renderer: the event time as people read it.
pub type Stamp = Box<dyn Fn(&Timestamp) -> String + Send + Sync>;

/// `YYYY-MM-DD HH:MM:SS.mmm +0000`: the trace stamp in UTC. The core has no
/// time-zone data; a binary that has it passes its own local-time stamp.
///
/// ```
/// let t = agentrt::Timestamp::parse("2026-10-01T09:00:00.25Z").unwrap();
/// assert_eq!(agentrt::trace::utc_stamp(&t), "2026-10-01 09:00:00.250 +0000");
/// ```
pub fn utc_stamp(t: &Timestamp) -> String {
    let text = t.to_string(); // 2026-10-01T09:00:00.250000000Z
    match (text.get(..10), text.get(11..23)) {
        (Some(date), Some(time)) => format!("{date} {time} +0000"),
        _ => text,
    }
}

struct Sink<W> {
    out: Mutex<W>,
    error: Mutex<Option<std::io::Error>>,
}

impl<W: Write> Sink<W> {
    fn new(out: W) -> Sink<W> {
        Sink {
            out: Mutex::new(out),
            error: Mutex::new(None),
        }
    }

    fn line(&self, line: &str) {
        let mut out = lock(&self.out);
        let written = out
            .write_all(line.as_bytes())
            .and_then(|_| out.write_all(b"\n"))
            .and_then(|_| out.flush());
        if let Err(e) = written {
            lock(&self.error).get_or_insert(e);
        }
    }

    fn take_error(&self) -> Option<std::io::Error> {
        lock(&self.error).take()
    }
}

/// Writes each event as `<stamp>  <type padded to 22> <sanitized payload>`.
///
/// ```
/// use agentrt::trace::TextTrace;
/// let trace = TextTrace::new(std::io::stderr());
/// # let _ = trace;
/// ```
pub struct TextTrace<W> {
    sink: Sink<W>,
    stamp: Stamp,
}

impl<W: Write> TextTrace<W> {
    /// A trace with UTC stamps.
    pub fn new(out: W) -> TextTrace<W> {
        TextTrace {
            sink: Sink::new(out),
            stamp: Box::new(utc_stamp),
        }
    }

    /// A trace with the caller's stamps (local time, say).
    pub fn with_stamp(out: W, stamp: Stamp) -> TextTrace<W> {
        TextTrace {
            sink: Sink::new(out),
            stamp,
        }
    }

    /// The first write error since the last call, if any.
    pub fn take_error(&self) -> Option<std::io::Error> {
        self.sink.take_error()
    }
}

impl<W: Write + Send> Observer for TextTrace<W> {
    fn observe(&self, event: &Event) {
        self.sink.line(&view::event_line_with(event, &self.stamp));
    }
}

/// Writes each event as one JSON object per line: `{seq, run_id, step_id?,
/// at, type, payload}`, the payload as stored.
pub struct JsonlTrace<W> {
    sink: Sink<W>,
}

impl<W: Write> JsonlTrace<W> {
    /// A JSON Lines trace.
    pub fn new(out: W) -> JsonlTrace<W> {
        JsonlTrace {
            sink: Sink::new(out),
        }
    }

    /// The first write error since the last call, if any.
    pub fn take_error(&self) -> Option<std::io::Error> {
        self.sink.take_error()
    }
}

impl<W: Write + Send> Observer for JsonlTrace<W> {
    fn observe(&self, event: &Event) {
        self.sink.line(&view::event_record(event));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::EventType;

    fn event() -> Event {
        Event {
            seq: 3,
            run_id: "r".into(),
            step_id: "s".into(),
            at: "2026-10-01T09:00:00.000000000Z".into(),
            event_type: EventType::StepStarted,
            payload: "{\"index\":0}".into(),
        }
    }

    /// Shares its bytes with the test.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            lock(&self.0).extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn text_lines_are_aligned_and_jsonl_records_are_compact() {
        let buf = Shared::default();
        let text = TextTrace::new(buf.clone());
        text.observe(&event());
        let jsonl = JsonlTrace::new(buf.clone());
        jsonl.observe(&event());
        let out = String::from_utf8(lock(&buf.0).clone()).unwrap();
        assert_eq!(
            out,
            "2026-10-01 09:00:00.000 +0000  step.started           {\"index\":0}\n\
             {\"seq\":3,\"run_id\":\"r\",\"step_id\":\"s\",\"at\":\"2026-10-01T09:00:00.000000000Z\",\"type\":\"step.started\",\"payload\":{\"index\":0}}\n"
        );
    }

    struct Broken;
    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk full"))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn the_first_write_error_is_kept() {
        let trace = TextTrace::new(Broken);
        trace.observe(&event());
        trace.observe(&event());
        assert_eq!(trace.take_error().unwrap().to_string(), "disk full");
        assert!(trace.take_error().is_none());
    }
}
