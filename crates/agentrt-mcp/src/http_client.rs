//! The streamable-HTTP side of a connection (design §24): our own
//! reqwest client under rmcp's transport, so redirects are refused, no
//! proxy is taken from the environment, every response body is capped
//! before it is parsed (past the cap fails, never truncates), the
//! server-push stream is never opened, and each message's bytes are seen
//! by the capture before rmcp parses them.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::stream::{BoxStream, StreamExt};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, StatusCode};
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    HttpStatusError, SseError, StreamableHttpClient, StreamableHttpError,
    StreamableHttpPostResponse, StreamableHttpResponseLimits,
};
use sse_stream::Sse;

use crate::capture::Capture;
use crate::sse;

/// The most bytes of one response body.
pub(crate) const MAX_BODY: usize = 16 * 1024 * 1024;

const SESSION_HEADER: &str = "mcp-session-id";
const JSON: &str = "application/json";
const EVENT_STREAM: &str = "text/event-stream";

type HttpError = StreamableHttpError<reqwest::Error>;

/// rmcp's HTTP backend: one reqwest client and the connection's capture.
#[derive(Clone)]
pub(crate) struct HttpClient {
    http: reqwest::Client,
    capture: Arc<Capture>,
}

impl HttpClient {
    /// A client that follows no redirect and uses no proxy.
    pub(crate) fn new(capture: Arc<Capture>) -> Result<HttpClient, reqwest::Error> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()?;
        Ok(HttpClient { http, capture })
    }
}

/// Whether `content_type` names `media` (parameters ignored).
fn is_media(content_type: Option<&HeaderValue>, media: &str) -> bool {
    content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|m| m.trim().eq_ignore_ascii_case(media))
}

/// The whole body, refused past `cap` bytes.
async fn read_capped(response: reqwest::Response, cap: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = || StreamableHttpError::ResponseBodyTooLarge { max_size: cap };
    if response
        .content_length()
        .is_some_and(|n| n > u64::try_from(cap).unwrap_or(u64::MAX))
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(StreamableHttpError::Client)?;
        if body.len() + chunk.len() > cap {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A short, sanitized view of a body that is not a message.
fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(256)]);
    agentrt::text::sanitize(text.trim())
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, HttpError> {
        let cap = limits.max_json_response_size.min(MAX_BODY);
        let body = serde_json::to_vec(&message)?;
        // Noted before it is sent: the answer may arrive before send returns.
        self.capture.sent(&body);
        let mut request = self
            .http
            .post(uri.as_ref())
            .header(ACCEPT, format!("{JSON}, {EVENT_STREAM}"))
            .header(CONTENT_TYPE, JSON);
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &session_id {
            request = request.header(SESSION_HEADER, session.as_ref());
        }
        let response = request
            .body(body)
            .send()
            .await
            .map_err(StreamableHttpError::Client)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        if status.is_redirection() {
            return Err(StreamableHttpError::UnexpectedServerResponse(
                format!("HTTP {}: redirects are refused", status.as_u16()).into(),
            ));
        }
        let content_type = response.headers().get(CONTENT_TYPE).cloned();
        let session = response
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if !status.is_success() {
            return failure(response, status, &content_type, cap, session).await;
        }
        let awaits_nothing = !matches!(message, ClientJsonRpcMessage::Request(_));
        if is_media(content_type.as_ref(), EVENT_STREAM) {
            let capture = Arc::clone(&self.capture);
            let events = sse::events(response.bytes_stream(), MAX_BODY, move |data| {
                capture.received(data)
            });
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        let is_json = is_media(content_type.as_ref(), JSON);
        let body = read_capped(response, cap).await?;
        if body.is_empty() && awaits_nothing {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if !is_json {
            return Err(StreamableHttpError::UnexpectedContentType(
                content_type.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            ));
        }
        self.capture.received(&body);
        let parsed: ServerJsonRpcMessage = serde_json::from_slice(&body).map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(
                format!("not a JSON-RPC message ({e}): {}", preview(&body)).into(),
            )
        })?;
        Ok(StreamableHttpPostResponse::Json(parsed, session))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), HttpError> {
        let mut request = self
            .http
            .delete(uri.as_ref())
            .header(SESSION_HEADER, session_id.as_ref());
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        // Best effort: a server that keeps the session only wastes it.
        request.send().await.map_err(StreamableHttpError::Client)?;
        Ok(())
    }

    /// Never opens a stream: the server-push stream is not used, and a
    /// response stream that broke is not resumed (a call whose answer was
    /// lost is an unknown outcome, not fetched again).
    async fn get_stream(
        &self,
        _uri: Arc<str>,
        _session_id: Option<Arc<str>>,
        _last_event_id: Option<String>,
        _auth_header: Option<String>,
        _custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, HttpError> {
        Err(StreamableHttpError::ServerDoesNotSupportSse)
    }
}

/// A non-success response: the JSON-RPC error it carries (the server's
/// answer), or else an error naming its status.
async fn failure(
    response: reqwest::Response,
    status: StatusCode,
    content_type: &Option<HeaderValue>,
    cap: usize,
    session: Option<String>,
) -> Result<StreamableHttpPostResponse, HttpError> {
    let retry_after = response
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = if is_media(content_type.as_ref(), JSON) {
        read_capped(response, cap).await.unwrap_or_default()
    } else {
        Vec::new()
    };
    if let Ok(message @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
        return Ok(StreamableHttpPostResponse::Json(message, session));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
    }
    let detail = if body.is_empty() {
        format!("HTTP {}", status.as_u16())
    } else {
        format!("HTTP {}: {}", status.as_u16(), preview(&body))
    };
    Err(StreamableHttpError::UnexpectedServerResponse(detail.into()))
}
