//! The raw results seen on the wire: a `tools/list` result is pinned from
//! the bytes the server sent, and a `tools/call` result is recorded from
//! them, not from rmcp's re-serialized reading. Stdio is seen line by line
//! through [`TeeReader`] and [`TeeWriter`]; HTTP message by message.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The longest JSON-RPC line captured (rmcp's own cap).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The `_meta` key a call is marked with, so its raw result can be found
/// on the wire.
pub(crate) const CALL_MARK: &str = "agentrt/call";

/// The most call results kept waiting for their callers.
const MAX_WAITING_RESULTS: usize = 1024;

/// The raw results of the `tools/list` and `tools/call` requests seen on
/// the wire.
#[derive(Default)]
pub(crate) struct Capture {
    state: Mutex<CaptureState>,
}

#[derive(Default)]
struct CaptureState {
    /// Ids (as JSON text) of `tools/list` requests sent, in order.
    list_ids: Vec<String>,
    /// Raw results received for them.
    results: HashMap<String, String>,
    /// The mark of each `tools/call` request sent, by id.
    call_ids: HashMap<String, String>,
    /// Raw call results received, by mark.
    call_results: HashMap<String, String>,
}

#[derive(Deserialize)]
struct Outgoing<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<OutgoingParams>,
}

#[derive(Deserialize)]
struct OutgoingParams {
    #[serde(rename = "_meta", default)]
    meta: Option<HashMap<String, serde_json::Value>>,
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    result: Option<&'a RawValue>,
}

impl Capture {
    /// Notes a message this client sends.
    pub(crate) fn sent(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Outgoing<'_>>(line) else {
            return;
        };
        let Some(id) = msg.id else { return };
        let Ok(mut s) = self.state.lock() else { return };
        match msg.method.as_deref() {
            Some("tools/list") if !s.list_ids.iter().any(|i| i == id.get()) => {
                s.list_ids.push(id.get().to_owned());
            }
            Some("tools/call") => {
                let mark = msg
                    .params
                    .and_then(|p| p.meta)
                    .and_then(|m| m.get(CALL_MARK).and_then(|v| v.as_str().map(str::to_owned)));
                if let Some(mark) = mark {
                    s.call_ids.insert(id.get().to_owned(), mark);
                }
            }
            _ => {}
        }
    }

    /// Notes a message the server sent.
    pub(crate) fn received(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Incoming<'_>>(line) else {
            return;
        };
        let (Some(id), Some(result)) = (msg.id, msg.result) else {
            return;
        };
        let Ok(mut s) = self.state.lock() else { return };
        if s.list_ids.iter().any(|i| i == id.get()) {
            s.results
                .insert(id.get().to_owned(), result.get().to_owned());
        } else if let Some(mark) = s.call_ids.remove(id.get())
            && s.call_results.len() < MAX_WAITING_RESULTS
        {
            s.call_results.insert(mark, result.get().to_owned());
        }
    }

    /// The raw result of the call marked `mark`, once received.
    pub(crate) fn take_call_result(&self, mark: &str) -> Option<String> {
        self.state.lock().ok()?.call_results.remove(mark)
    }

    /// Forgets a call whose caller stopped waiting.
    pub(crate) fn forget_call(&self, mark: &str) {
        if let Ok(mut s) = self.state.lock() {
            s.call_ids.retain(|_, m| m != mark);
            s.call_results.remove(mark);
        }
    }

    /// The raw result of the latest `tools/list` request.
    pub(crate) fn take_list_result(&self) -> Option<String> {
        let mut s = self.state.lock().ok()?;
        let id = s.list_ids.last()?.clone();
        s.results.remove(&id)
    }
}

/// Feeds complete lines of `bytes` to `f`, keeping a partial line in
/// `line` (dropped past [`MAX_LINE`]: rmcp refuses such a line anyway).
fn feed(line: &mut Vec<u8>, bytes: &[u8], mut f: impl FnMut(&[u8])) {
    for chunk in bytes.split_inclusive(|b| *b == b'\n') {
        if line.len() + chunk.len() <= MAX_LINE {
            line.extend_from_slice(chunk);
        }
        if chunk.ends_with(b"\n") {
            f(line);
            line.clear();
        }
    }
}

/// The child's stdout, seen on its way to rmcp.
pub(crate) struct TeeReader<R> {
    inner: R,
    capture: Arc<Capture>,
    line: Vec<u8>,
}

impl<R> TeeReader<R> {
    pub(crate) fn new(inner: R, capture: Arc<Capture>) -> Self {
        TeeReader {
            inner,
            capture,
            line: Vec::new(),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TeeReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            let capture = Arc::clone(&this.capture);
            feed(&mut this.line, &buf.filled()[before..], |l| {
                capture.received(l)
            });
        }
        polled
    }
}

/// The child's stdin, seen on its way from rmcp.
pub(crate) struct TeeWriter<W> {
    inner: W,
    capture: Arc<Capture>,
    line: Vec<u8>,
}

impl<W> TeeWriter<W> {
    pub(crate) fn new(inner: W, capture: Arc<Capture>) -> Self {
        TeeWriter {
            inner,
            capture,
            line: Vec::new(),
        }
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for TeeWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        // Note the requests these bytes complete before they can reach the
        // server, whose answer may be read before this write returns. A
        // line offered again after a short write is noted again, which
        // changes nothing.
        let mut ahead = this.line.clone();
        let capture = Arc::clone(&this.capture);
        feed(&mut ahead, bytes, |l| capture.sent(l));
        let polled = Pin::new(&mut this.inner).poll_write(cx, bytes);
        if let Poll::Ready(Ok(n)) = &polled {
            feed(&mut this.line, &bytes[..*n], |_| {});
        }
        polled
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
