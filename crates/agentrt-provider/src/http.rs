//! The HTTP side every adapter shares (compiled with any provider feature):
//! endpoint checks, the client an adapter builds for itself, the loopback
//! resolver, the capped body read, and the mapping of responses and
//! transport failures onto [`ModelError`].
//!
//! Transport failures are classified by type, never by message:
//!
//! | failure | variant |
//! |---|---|
//! | reqwest timeout (`is_timeout`: reqwest, hyper or `io::ErrorKind::TimedOut`) | `Timeout` |
//! | name resolved to no loopback address for a key over `http` | `Other` (permanent) |
//! | DNS failure (`is_dns`) | `Other` (permanent) |
//! | TLS failure while connecting (`io::ErrorKind::InvalidData` in the chain) | `Other` (permanent) |
//! | bad URL or scheme (`is_builder`) | `Other` (permanent) |
//! | other connect failure (refused, reset before sending) | `Transient` |
//! | failure after the request was sent, body cut mid-read (`is_request`, `is_body`, `is_decode`) | `ConnectionLost` |
//! | body over [`MAX_BODY_BYTES`] | `Other` (permanent) |

use std::error::Error as StdError;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use agentrt::ModelError;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderValue, LOCATION, RETRY_AFTER};

use crate::config::{ConfigError, EndpointProblem};
use crate::shared::{
    DEFAULT_TIMEOUT, MAX_BODY_BYTES, MAX_DRAIN_BYTES, loopback, loopback_ip, retry_after,
    status_error, truncate,
};

/// A checked endpoint: the URL, and whether the key it carries must stay
/// on loopback addresses (a key over plain `http`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// The base URL, user-info free, trailing `/` trimmed from its path.
    pub url: Url,
    /// A key travels over plain `http`: every dialled address must be
    /// loopback.
    pub loopback_only: bool,
}

/// Checks a base URL for `provider`: it must parse as `http` or `https`
/// with a host and no user-info; with a key, plain `http` is refused unless
/// the host is [`loopback`].
///
/// ```
/// use agentrt_provider::{ConfigError, http::check_endpoint};
///
/// let e = check_endpoint("openai", "http://127.0.0.1:8080/v1/", true)?;
/// assert!(e.loopback_only);
/// assert_eq!(e.url.as_str(), "http://127.0.0.1:8080/v1");
/// assert!(!check_endpoint("openai", "https://api.openai.com/v1", true)?.loopback_only);
/// assert!(matches!(
///     check_endpoint("openai", "http://example.com/v1", true),
///     Err(ConfigError::KeyOverPlainHttp { .. })
/// ));
/// assert!(check_endpoint("openai", "http://example.com/v1", false).is_ok());
/// assert!(check_endpoint("openai", "ftp://127.0.0.1/", false).is_err());
/// assert!(check_endpoint("openai", "https://u:p@host/", false).is_err());
/// # Ok::<(), ConfigError>(())
/// ```
///
/// # Errors
///
/// [`ConfigError::Endpoint`] or [`ConfigError::KeyOverPlainHttp`].
pub fn check_endpoint(
    provider: &'static str,
    base: &str,
    has_key: bool,
) -> Result<Endpoint, ConfigError> {
    let refuse = |shown: String, problem| ConfigError::Endpoint {
        provider,
        shown,
        problem,
    };
    let Ok(mut url) = Url::parse(base.trim()) else {
        return Err(refuse(shown_unparsed(base), EndpointProblem::NotAUrl));
    };
    let has_user_info = !url.username().is_empty() || url.password().is_some();
    // Never show user-info, even when refusing the URL for it.
    let _ = url.set_password(None);
    let _ = url.set_username("");
    if url.scheme() != "http" && url.scheme() != "https" {
        let scheme = url.scheme().to_owned();
        return Err(refuse(url.to_string(), EndpointProblem::Scheme { scheme }));
    }
    let host = url.host_str().unwrap_or_default().to_owned();
    if host.is_empty() {
        return Err(refuse(url.to_string(), EndpointProblem::NoHost));
    }
    if has_user_info {
        return Err(refuse(url.to_string(), EndpointProblem::UserInfo));
    }
    let plain = url.scheme() == "http";
    // The host as written, not as `Url` normalises it (`127.1` and
    // `LOCALHOST` become `127.0.0.1` and `localhost` there): the loopback
    // rule is about the spelling.
    let written = written_host(base.trim());
    if has_key && plain && !(loopback(&host) && loopback(written)) {
        return Err(ConfigError::KeyOverPlainHttp {
            provider,
            host: truncate(written, 200),
        });
    }
    let trimmed = url.path().trim_end_matches('/').to_owned();
    url.set_path(&trimmed);
    Ok(Endpoint {
        url,
        loopback_only: has_key && plain,
    })
}

/// The host of an absolute URL exactly as written: after `scheme://` and
/// any user-info, before the port, path, query or fragment (an IPv6
/// literal keeps its brackets).
fn written_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#', '\\']).next().unwrap_or_default();
    let host_port = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host_port.starts_with('[') {
        return host_port
            .find(']')
            .and_then(|end| host_port.get(..=end))
            .unwrap_or(host_port);
    }
    host_port
        .rsplit_once(':')
        .map_or(host_port, |(host, _)| host)
}

/// Shows a URL that did not parse without anything that may be a secret.
fn shown_unparsed(text: &str) -> String {
    if text.contains('@') {
        "(not shown: it may carry user-info)".to_owned()
    } else {
        format!("{:?}", truncate(text.trim(), 200))
    }
}

/// `base` with `path` appended (`path` starts with `/`).
#[cfg(any(feature = "openai", feature = "anthropic"))]
pub(crate) fn join(
    provider: &'static str,
    base: &Endpoint,
    path: &str,
) -> Result<Url, ConfigError> {
    let text = format!("{}{path}", base.url.as_str().trim_end_matches('/'));
    Url::parse(&text).map_err(|_| ConfigError::Endpoint {
        provider,
        shown: base.url.to_string(),
        problem: EndpointProblem::NotAUrl,
    })
}

/// The client an adapter uses: the caller's own, as is (its owner answers
/// for its redirects, proxies and dialling), or a new one with redirects
/// off, no proxy from the environment, the 15-minute backstop timeout and,
/// when a key travels over plain `http`, a resolver that yields only
/// loopback addresses.
pub(crate) fn client_for(
    provider: &'static str,
    given: Option<reqwest::Client>,
    loopback_only: bool,
) -> Result<reqwest::Client, ConfigError> {
    if let Some(client) = given {
        return Ok(client);
    }
    build_client(provider, loopback_only, Arc::new(system_lookup))
}

/// Looks a name up: the addresses it resolves to.
pub(crate) type Lookup = Arc<
    dyn Fn(String) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>>
        + Send
        + Sync,
>;

fn system_lookup(
    host: String,
) -> Pin<Box<dyn Future<Output = io::Result<Vec<SocketAddr>>> + Send>> {
    Box::pin(async move {
        tokio::net::lookup_host((host.as_str(), 0))
            .await
            .map(Iterator::collect)
    })
}

pub(crate) fn build_client(
    provider: &'static str,
    loopback_only: bool,
    lookup: Lookup,
) -> Result<reqwest::Client, ConfigError> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(DEFAULT_TIMEOUT);
    if loopback_only {
        builder = builder.dns_resolver(LoopbackResolver { lookup });
    }
    builder.build().map_err(|e| ConfigError::Client {
        provider,
        detail: e.without_url().to_string(),
    })
}

/// Why the loopback resolver refused a name.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    /// The name resolved, but to no loopback address.
    #[error(
        "{host} does not resolve to a loopback address (not loopback), refusing to send the key"
    )]
    NotLoopback { host: String },
    /// The name did not resolve.
    #[error("cannot resolve {host}: {kind}")]
    Lookup { host: String, kind: io::ErrorKind },
}

/// Resolves names to their loopback addresses only; a name with none is
/// refused before any connection is dialled, so a key sent over plain
/// `http` never leaves the machine.
struct LoopbackResolver {
    lookup: Lookup,
}

impl reqwest::dns::Resolve for LoopbackResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let pending = (self.lookup)(host.clone());
        Box::pin(async move {
            let addrs = match pending.await {
                Ok(addrs) => addrs,
                Err(e) => {
                    let kind = e.kind();
                    return Err(Box::new(ResolveError::Lookup { host, kind }) as _);
                }
            };
            let kept: Vec<SocketAddr> = addrs.into_iter().filter(|a| loopback_ip(a.ip())).collect();
            if kept.is_empty() {
                return Err(Box::new(ResolveError::NotLoopback { host }) as _);
            }
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// An adapter's transport: who it is (for messages) and its client.
#[derive(Clone)]
pub(crate) struct Transport {
    pub(crate) provider: &'static str,
    pub(crate) client: reqwest::Client,
}

impl Transport {
    /// Sends one POST with a JSON body and returns the 2xx body, read with
    /// the cap. Never retries.
    pub(crate) async fn post_json(
        &self,
        url: &Url,
        mut headers: HeaderMap,
        body: Vec<u8>,
    ) -> Result<Vec<u8>, ModelError> {
        let provider = self.provider;
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        let response = self
            .client
            .post(url.clone())
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| classify_transport(provider, &e))?;
        let status = response.status();
        if status.is_redirection() {
            let message = redirect_message(provider, status.as_u16(), url, response.headers());
            drain(response).await;
            return Err(ModelError::Status {
                status: status.as_u16(),
                message,
            });
        }
        let wait = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, jiff::Timestamp::now()));
        let body = read_capped(provider, response).await?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(status_error(provider, status.as_u16(), &body, wait))
        }
    }
}

/// Reads a body, refusing more than [`MAX_BODY_BYTES`].
async fn read_capped(
    provider: &'static str,
    mut response: reqwest::Response,
) -> Result<Vec<u8>, ModelError> {
    let too_large = || ModelError::Other {
        message: format!(
            "{provider}: response body too large: over the {MAX_BODY_BYTES}-byte limit"
        ),
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| classify_transport(provider, &e))?
    {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Reads and discards up to [`MAX_DRAIN_BYTES`] of a body, then drops it.
async fn drain(mut response: reqwest::Response) {
    let mut seen = 0;
    while seen <= MAX_DRAIN_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => seen += chunk.len(),
            _ => break,
        }
    }
}

/// The permanent error for a 3xx: redirects are not followed; the message
/// names only the host `Location` points to, never its path or query.
fn redirect_message(provider: &str, status: u16, from: &Url, headers: &HeaderMap) -> String {
    let target = match headers.get(LOCATION).map(HeaderValue::to_str) {
        None => "there is no Location header".to_owned(),
        Some(Err(_)) => "the Location header did not parse".to_owned(),
        Some(Ok(location)) => match from.join(location) {
            Err(_) => "the Location header did not parse".to_owned(),
            Ok(to) => match to.host_str() {
                None => "the Location header did not parse".to_owned(),
                Some(host) if Some(host) == from.host_str() => {
                    "the Location header pointed elsewhere on the same host".to_owned()
                }
                Some(host) => format!("the Location header pointed to host {host}"),
            },
        },
    };
    format!("{provider}: {status}: redirects are not followed; {target}")
}

/// Maps a reqwest failure onto [`ModelError`] by its type (see the module
/// docs for the table).
pub(crate) fn classify_transport(provider: &str, error: &reqwest::Error) -> ModelError {
    let detail = describe(error);
    let message = format!("{provider}: {detail}");
    if error.is_timeout() {
        return ModelError::Timeout { message };
    }
    if has::<ResolveError>(error) || error.is_dns() || error.is_builder() {
        return ModelError::Other { message };
    }
    if error.is_connect() {
        if has_io_kind(error, io::ErrorKind::InvalidData) {
            // rustls reports a failed handshake (bad certificate, unknown
            // authority, wrong host name) as InvalidData.
            return ModelError::Other {
                message: format!("{provider}: TLS failure: {detail}"),
            };
        }
        return ModelError::Transient {
            message,
            retry_after: None,
        };
    }
    if error.is_request() || error.is_body() || error.is_decode() {
        return ModelError::ConnectionLost { message };
    }
    ModelError::Other { message }
}

/// The error and its sources, joined by `: ` (URLs are the endpoint's,
/// which carries no credential).
fn describe(error: &reqwest::Error) -> String {
    agentrt::text::with_causes(error)
}

/// Visits `error` and everything under it: its `source()` chain and, for
/// an `io::Error`, the error it wraps (which `io::Error::source` skips).
fn any_in(
    error: &(dyn StdError + 'static),
    test: &mut dyn FnMut(&(dyn StdError + 'static)) -> bool,
) -> bool {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(e) = current {
        if test(e) {
            return true;
        }
        if let Some(inner) = e.downcast_ref::<io::Error>().and_then(io::Error::get_ref)
            && any_in(inner, test)
        {
            return true;
        }
        current = e.source();
    }
    false
}

fn has<T: StdError + 'static>(error: &(dyn StdError + 'static)) -> bool {
    any_in(error, &mut |e| e.is::<T>())
}

fn has_io_kind(error: &(dyn StdError + 'static), kind: io::ErrorKind) -> bool {
    any_in(error, &mut |e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == kind)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_never_show_user_info() {
        let Err(e) = check_endpoint("openai", "https://alice:hunter2@host.example/v1", true) else {
            panic!("user-info must be refused");
        };
        assert!(matches!(
            e,
            ConfigError::Endpoint {
                problem: EndpointProblem::UserInfo,
                ..
            }
        ));
        assert!(!e.to_string().contains("hunter2"), "{e}");
        assert!(!e.to_string().contains("alice"), "{e}");
        let Err(e) = check_endpoint("openai", "not a url @ hunter2", false) else {
            panic!("junk must be refused");
        };
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }

    #[test]
    fn keys_over_http_go_only_to_loopback_hosts() {
        for ok in [
            "http://localhost:1/",
            "http://127.0.0.1:1/",
            "http://[::1]:1/",
            "http://[::ffff:127.0.0.1]:1/",
        ] {
            assert!(
                check_endpoint("x", ok, true).is_ok_and(|e| e.loopback_only),
                "{ok}"
            );
        }
        // The rule is about the spelling: `Url` would normalise `127.1`,
        // `2130706433` and `LOCALHOST` to loopback, but they are refused.
        for refused in [
            "http://example.com/",
            "http://LOCALHOST:1/",
            "http://localhost.:1/",
            "http://a.localhost/",
            "http://127.1:8080/",
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://10.0.0.1/",
        ] {
            assert!(
                matches!(
                    check_endpoint("x", refused, true),
                    Err(ConfigError::KeyOverPlainHttp { .. })
                ),
                "{refused}"
            );
        }
    }

    #[test]
    fn the_written_host_is_the_spelling_between_user_info_and_port() {
        for (url, host) in [
            ("http://127.0.0.1:8080/v1", "127.0.0.1"),
            ("http://localhost", "localhost"),
            ("http://[::1]:1/x", "[::1]"),
            ("http://[::ffff:127.0.0.1]/", "[::ffff:127.0.0.1]"),
            ("http://a:b@LOCALHOST:9?q", "LOCALHOST"),
            ("http://127.1#f", "127.1"),
        ] {
            assert_eq!(written_host(url), host, "{url}");
        }
    }

    fn lookup_to(addr: &'static str) -> Lookup {
        Arc::new(move |_host| {
            Box::pin(async move {
                addr.parse::<SocketAddr>()
                    .map(|a| vec![a])
                    .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
            })
        })
    }

    #[tokio::test]
    async fn a_key_bound_for_localhost_resolving_elsewhere_is_refused_before_dialling() {
        // A listener that would receive the key if anything were dialled.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or_default();
        let client = build_client("openai", true, lookup_to("93.184.216.34:0"))
            .unwrap_or_else(|e| panic!("client: {e}"));
        let transport = Transport {
            provider: "openai",
            client,
        };
        let url = Url::parse(&format!("http://localhost:{port}/v1/chat/completions"))
            .unwrap_or_else(|e| panic!("url: {e}"));
        let err = transport
            .post_json(&url, HeaderMap::new(), b"{}".to_vec())
            .await
            .err();
        let Some(ModelError::Other { message }) = err else {
            panic!("expected a permanent error, got {err:?}");
        };
        assert!(message.contains("not loopback"), "{message}");
        // Nothing connected.
        let accepted =
            tokio::time::timeout(std::time::Duration::from_millis(100), listener.accept()).await;
        assert!(accepted.is_err(), "a connection was dialled");

        // The same client with a lookup that does yield loopback connects.
        let client = build_client("openai", true, lookup_to("127.0.0.1:0"))
            .unwrap_or_else(|e| panic!("client: {e}"));
        let transport = Transport {
            provider: "openai",
            client,
        };
        let sent = tokio::spawn(async move {
            transport
                .post_json(&url, HeaderMap::new(), b"{}".to_vec())
                .await
        });
        let accepted =
            tokio::time::timeout(std::time::Duration::from_secs(5), listener.accept()).await;
        assert!(
            accepted.is_ok_and(|r| r.is_ok()),
            "loopback was not dialled"
        );
        sent.abort();
    }

    #[tokio::test]
    async fn a_lookup_failure_is_permanent() {
        let failing: Lookup =
            Arc::new(|_host| Box::pin(async { Err(io::Error::from(io::ErrorKind::NotFound)) }));
        let client = build_client("anthropic", true, failing).unwrap_or_else(|e| panic!("{e}"));
        let transport = Transport {
            provider: "anthropic",
            client,
        };
        let url = Url::parse("http://localhost:9/v1/messages").unwrap_or_else(|e| panic!("{e}"));
        let err = transport
            .post_json(&url, HeaderMap::new(), Vec::new())
            .await
            .err();
        assert!(
            matches!(&err, Some(ModelError::Other { message }) if message.contains("cannot resolve localhost")),
            "{err:?}"
        );
    }

    /// Serves one connection: reads the request, then writes `head` and
    /// `body_len` bytes of a JSON body (`{}` and spaces) and closes, with no
    /// `Content-Length`, so the client reads to EOF.
    async fn serve_unsized(body_len: usize) -> (Url, tokio::task::JoinHandle<()>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
        let task = tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            // Headers, then as many body bytes as Content-Length says.
            loop {
                let Ok(n) = socket.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                request.extend_from_slice(buf.get(..n).unwrap_or_default());
                let text = String::from_utf8_lossy(&request).to_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
            let mut body = b"{}".to_vec();
            body.resize(body_len, b' ');
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(&body).await;
            let _ = socket.shutdown().await;
        });
        let url = Url::parse(&format!("http://{addr}/api/chat")).unwrap_or_else(|e| panic!("{e}"));
        (url, task)
    }

    #[tokio::test]
    async fn the_cap_holds_for_a_body_without_content_length() {
        let transport = Transport {
            provider: "ollama",
            client: client_for("ollama", None, false).unwrap_or_else(|e| panic!("{e}")),
        };
        let (url, task) = serve_unsized(MAX_BODY_BYTES + 1).await;
        let err = transport
            .post_json(&url, HeaderMap::new(), b"{}".to_vec())
            .await
            .err();
        assert!(
            matches!(&err, Some(ModelError::Other { message }) if message.contains("too large")),
            "{err:?}"
        );
        task.abort();

        let (url, task) = serve_unsized(MAX_BODY_BYTES).await;
        let body = transport
            .post_json(&url, HeaderMap::new(), b"{}".to_vec())
            .await;
        assert_eq!(body.map(|b| b.len()), Ok(MAX_BODY_BYTES));
        let _ = task.await;
    }

    #[test]
    fn redirect_messages_name_only_the_host() {
        let from = Url::parse("https://api.example/v1/messages").unwrap_or_else(|e| panic!("{e}"));
        let with = |loc: &[u8]| {
            let mut h = HeaderMap::new();
            if let Ok(v) = HeaderValue::from_bytes(loc) {
                h.insert(LOCATION, v);
            }
            redirect_message("anthropic", 302, &from, &h)
        };
        let m = with(b"https://evil.example/steal?key=1");
        assert!(
            m.contains("host evil.example") && !m.contains("steal") && !m.contains("key="),
            "{m}"
        );
        let m = with(b"/v2/secret-path");
        assert!(
            m.contains("elsewhere on the same host") && !m.contains("secret"),
            "{m}"
        );
        let m = with(b"http://[bad");
        assert!(m.contains("did not parse"), "{m}");
        let m = with(b"\xff\xfe");
        assert!(m.contains("did not parse"), "{m}");
        let m = redirect_message("x", 301, &from, &HeaderMap::new());
        assert!(m.contains("no Location header"), "{m}");
    }
}
