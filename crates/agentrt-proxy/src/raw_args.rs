//! The host's `tools/call` arguments as it sent them. rmcp hands the
//! handler a `serde_json` map, which rewrites number spellings (`1.50`
//! becomes `1.5`) and keeps the last of repeated keys; the proxy records,
//! keys and judges the bytes the host wrote. Its input is read through
//! [`TeeInput`], which notes each call's raw `params.arguments` by request
//! id before rmcp parses the line.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line noted (rmcp refuses longer ones anyway).
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The most calls noted and not yet taken (a host that floods calls
/// faster than they are answered loses exactness for the excess, which
/// then fall back to rmcp's reading).
const MAX_WAITING: usize = 1024;

/// Raw arguments by request id (the id as JSON text).
#[derive(Debug, Default)]
pub struct RawArguments {
    waiting: Mutex<HashMap<String, Option<String>>>,
}

#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(default)]
    id: Option<serde_json::Value>,
    #[serde(default)]
    method: Option<&'a str>,
    #[serde(borrow, default)]
    params: Option<Params<'a>>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
}

impl RawArguments {
    /// Notes one message the host sent (a line, or an HTTP body), if it
    /// is a `tools/call` request.
    pub(crate) fn note(&self, line: &[u8]) {
        let Ok(msg) = serde_json::from_slice::<Incoming<'_>>(line) else {
            return;
        };
        let (Some(id), Some("tools/call")) = (msg.id, msg.method) else {
            return;
        };
        let raw = msg
            .params
            .and_then(|p| p.arguments)
            .map(|a| a.get().to_owned());
        if let Ok(mut waiting) = self.waiting.lock()
            && waiting.len() < MAX_WAITING
        {
            waiting.insert(id.to_string(), raw);
        }
    }

    /// The raw arguments of request `id` (`None` when it was not seen;
    /// `Some(None)` when the request had none), taken.
    pub fn take(&self, id: &impl serde::Serialize) -> Option<Option<String>> {
        let key = serde_json::to_value(id).ok()?.to_string();
        self.waiting.lock().ok()?.remove(&key)
    }
}

/// The host's input, seen line by line on its way to rmcp.
pub struct TeeInput<R> {
    inner: R,
    raw: Arc<RawArguments>,
    line: Vec<u8>,
    overlong: bool,
}

impl<R> TeeInput<R> {
    /// `inner`, noting calls into `raw`.
    pub fn new(inner: R, raw: Arc<RawArguments>) -> TeeInput<R> {
        TeeInput {
            inner,
            raw,
            line: Vec::new(),
            overlong: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for TeeInput<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = &polled {
            for chunk in buf.filled()[before..].split_inclusive(|b| *b == b'\n') {
                if this.line.len() + chunk.len() > MAX_LINE {
                    this.overlong = true;
                } else if !this.overlong {
                    this.line.extend_from_slice(chunk);
                }
                if chunk.ends_with(b"\n") {
                    if !this.overlong {
                        this.raw.note(&this.line);
                    }
                    this.line.clear();
                    this.overlong = false;
                }
            }
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn a_calls_arguments_are_noted_as_written_by_request_id() {
        let input: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t\",\"arguments\":{\"n\": 1.50,\"n\":2}}}\n\
            {\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}\n\
            {\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/list\"}\n";
        let raw = Arc::new(RawArguments::default());
        let mut tee = TeeInput::new(input, Arc::clone(&raw));
        let mut all = Vec::new();
        // Small reads: lines arrive in pieces.
        let mut piece = [0u8; 7];
        loop {
            let n = tee.read(&mut piece).await.expect("read");
            if n == 0 {
                break;
            }
            all.extend_from_slice(&piece[..n]);
        }
        assert_eq!(all, input, "the bytes pass through unchanged");
        assert_eq!(raw.take(&7), Some(Some(r#"{"n": 1.50,"n":2}"#.to_owned())));
        assert_eq!(raw.take(&7), None, "taken once");
        assert_eq!(raw.take(&"a"), Some(None), "a call without arguments");
        assert_eq!(raw.take(&8), None, "only calls are noted");
    }
}
