//! Server-sent events read from a response body, with a cap on the whole
//! body: the events rmcp reads, and each message event's data handed to a
//! tap first (the capture of raw results).
//!
//! Our own reader rather than rmcp's: it must see each event's bytes as
//! sent, and its cap covers the whole response, not one event.

use std::collections::VecDeque;

use futures_util::stream::{BoxStream, Stream, StreamExt};
use sse_stream::{Error as SseError, Sse};

/// Why an event stream stopped early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SseReadError {
    /// The body grew past the cap (never truncated).
    #[error("the event stream passed {cap} bytes")]
    TooLarge {
        /// The cap in bytes.
        cap: usize,
    },
    /// An event's text is not UTF-8.
    #[error("an event is not UTF-8")]
    NotUtf8,
}

/// One event being assembled.
#[derive(Default)]
struct Pending {
    event: Option<String>,
    data: Option<String>,
    id: Option<String>,
    retry: Option<u64>,
}

/// Splits bytes into events (the WHATWG event-stream rules: lines end with
/// LF, CRLF or CR; a blank line ends an event; `:` starts a comment).
pub(crate) struct SseParser {
    cap: usize,
    seen: usize,
    line: Vec<u8>,
    /// The last byte was a CR, so a LF that follows ends nothing.
    after_cr: bool,
    pending: Pending,
}

impl SseParser {
    /// A parser that refuses a body longer than `cap` bytes.
    pub(crate) fn new(cap: usize) -> SseParser {
        SseParser {
            cap,
            seen: 0,
            line: Vec::new(),
            after_cr: false,
            pending: Pending::default(),
        }
    }

    /// Feeds `bytes`; the events they complete are pushed to `out`.
    pub(crate) fn push(
        &mut self,
        bytes: &[u8],
        out: &mut VecDeque<Sse>,
    ) -> Result<(), SseReadError> {
        self.seen = self.seen.saturating_add(bytes.len());
        if self.seen > self.cap {
            return Err(SseReadError::TooLarge { cap: self.cap });
        }
        for &byte in bytes {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    self.end_line(out)?;
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(byte);
                }
            }
        }
        Ok(())
    }

    fn end_line(&mut self, out: &mut VecDeque<Sse>) -> Result<(), SseReadError> {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            if pending.data.is_some() || pending.id.is_some() || pending.retry.is_some() {
                out.push_back(Sse {
                    event: pending.event,
                    data: pending.data,
                    id: pending.id,
                    retry: pending.retry,
                });
            }
            return Ok(());
        }
        if line.first() == Some(&b':') {
            return Ok(());
        }
        let text = String::from_utf8(line).map_err(|_| SseReadError::NotUtf8)?;
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text.as_str(), ""),
        };
        match field {
            "data" => match &mut self.pending.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.pending.data = Some(value.to_owned()),
            },
            "event" => self.pending.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            "retry" => self.pending.retry = value.parse().ok(),
            _ => {}
        }
        Ok(())
    }
}

/// Whether rmcp reads `event` as a JSON-RPC message (the others are
/// control frames).
pub(crate) fn is_message(event: &Sse) -> bool {
    matches!(event.event.as_deref(), None | Some("") | Some("message"))
}

/// The events of `body`, each message's data handed to `tap` before it is
/// yielded; an error ends the stream.
pub(crate) fn events<B, E>(
    body: B,
    cap: usize,
    tap: impl Fn(&[u8]) + Send + 'static,
) -> BoxStream<'static, Result<Sse, SseError>>
where
    B: Stream<Item = Result<bytes::Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    struct State<B, T> {
        body: std::pin::Pin<Box<B>>,
        parser: SseParser,
        ready: VecDeque<Sse>,
        tap: T,
        done: bool,
    }
    let state = State {
        body: Box::pin(body),
        parser: SseParser::new(cap),
        ready: VecDeque::new(),
        tap,
        done: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.ready.pop_front() {
                if is_message(&event)
                    && let Some(data) = &event.data
                {
                    (s.tap)(data.as_bytes());
                }
                return Some((Ok(event), s));
            }
            if s.done {
                return None;
            }
            match s.body.next().await {
                Some(Ok(chunk)) => {
                    if let Err(e) = s.parser.push(&chunk, &mut s.ready) {
                        s.done = true;
                        s.ready.clear();
                        return Some((Err(SseError::Body(Box::new(e))), s));
                    }
                }
                Some(Err(e)) => {
                    s.done = true;
                    s.ready.clear();
                    return Some((Err(SseError::Body(Box::new(e))), s));
                }
                // An event without its closing blank line is dropped, as
                // the event-stream rules say.
                None => s.done = true,
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Result<Vec<Sse>, SseReadError> {
        let mut parser = SseParser::new(1024);
        let mut out = VecDeque::new();
        for chunk in chunks {
            parser.push(chunk, &mut out)?;
        }
        Ok(out.into_iter().collect())
    }

    fn data(events: &[Sse]) -> Vec<Option<&str>> {
        events.iter().map(|e| e.data.as_deref()).collect()
    }

    #[test]
    fn events_end_at_a_blank_line_whatever_the_line_ends() {
        let events = parse(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d"]).expect("parsed");
        assert_eq!(data(&events), [Some("a"), Some("b"), Some("c")]);
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        let events = parse(&[b"data: a\r", b"\n\r", b"\ndata: b\n\n"]).expect("parsed");
        assert_eq!(data(&events), [Some("a"), Some("b")]);
    }

    #[test]
    fn data_lines_join_with_newlines_and_comments_are_skipped() {
        let events = parse(&[b"data: {\"a\":\n: ping\ndata:1}\nid: 7\n\n"]).expect("parsed");
        assert_eq!(data(&events), [Some("{\"a\":\n1}")]);
        assert_eq!(events[0].id.as_deref(), Some("7"));
    }

    #[test]
    fn a_named_event_is_not_a_message() {
        let events =
            parse(&[b"event: endpoint\ndata: /x\n\nevent: message\ndata: m\n\n"]).expect("parsed");
        assert!(!is_message(&events[0]));
        assert!(is_message(&events[1]));
    }

    #[test]
    fn a_body_past_the_cap_fails_rather_than_truncates() {
        let mut parser = SseParser::new(10);
        let mut out = VecDeque::new();
        parser.push(b"data: 1234", &mut out).expect("under the cap");
        let err = parser.push(b"\n\n", &mut out).expect_err("past the cap");
        assert!(matches!(err, SseReadError::TooLarge { cap: 10 }), "{err}");
        assert!(out.is_empty());
    }

    #[tokio::test]
    async fn the_tap_sees_each_message_before_it_is_yielded() {
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = std::sync::Arc::clone(&seen);
        let body = futures_util::stream::iter([
            Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"event: ping\ndata: p\n\n")),
            Ok(bytes::Bytes::from_static(b"data: {\"id\":1}\n\n")),
        ]);
        let mut stream = events(body, 1024, move |d| {
            kept.lock().expect("lock").push(d.to_vec());
        });
        let mut yielded = Vec::new();
        while let Some(event) = stream.next().await {
            yielded.push(event.expect("event").data);
        }
        assert_eq!(yielded.len(), 2);
        assert_eq!(*seen.lock().expect("lock"), [b"{\"id\":1}".to_vec()]);
    }
}
