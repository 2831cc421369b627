//! Who a request says it is for: `Host` must name the address the
//! connection really reached (or a name the operator allowed), and
//! `Origin`, when a browser sends one, must be one the operator allowed
//! (MCP's streamable HTTP transport requires both, against DNS rebinding).
//!
//! The address is the connection's own local address, so a wildcard bind
//! (`0.0.0.0`, `[::]`) answers a host that uses any of the machine's
//! addresses, and nothing else.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;

/// The local address a connection was accepted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListenAddr(pub(crate) SocketAddr);

impl Connected<IncomingStream<'_, tokio::net::TcpListener>> for ListenAddr {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> ListenAddr {
        // An address the socket cannot tell matches no Host: refused.
        let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
        ListenAddr(stream.io().local_addr().unwrap_or(unknown))
    }
}

/// What the operator allows beyond the connection's own address.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowed {
    /// Host names (lowercase, no port) a host may reach the proxy by.
    hosts: Vec<String>,
    /// Origins (normalized) a browser page may call from.
    origins: Vec<String>,
}

impl Allowed {
    /// The operator's host names and origins; an origin that is not
    /// `http(s)://host[:port]` is refused with the reason.
    pub(crate) fn new(hosts: &[String], origins: &[String]) -> Result<Allowed, String> {
        let origins = origins
            .iter()
            .map(|o| {
                normalize_origin(o).ok_or_else(|| {
                    format!("--allow-origin {o:?} is not an origin like https://app.example.com")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let hosts = hosts
            .iter()
            .map(|h| {
                let name = h.trim_end_matches('.').to_ascii_lowercase();
                if name.is_empty() || name.contains(['/', ':', ' ', '@']) {
                    Err(format!("--allow-host {h:?} is not a host name"))
                } else {
                    Ok(name)
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Allowed { hosts, origins })
    }
}

/// Why a request's headers are refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No `Host`, or one that cannot be read.
    NoHost,
    /// A `Host` naming something other than this connection's address.
    WrongHost,
    /// An `Origin` the operator did not allow.
    WrongOrigin,
}

impl Refusal {
    fn text(self) -> &'static str {
        match self {
            Refusal::NoHost => "Forbidden: the request names no Host",
            Refusal::WrongHost => {
                "Forbidden: the Host header names no address this proxy listens on \
                 (name it with --allow-host)"
            }
            Refusal::WrongOrigin => {
                "Forbidden: the Origin is not allowed (name it with --allow-origin)"
            }
        }
    }
}

/// Whether `headers` may be served on a connection that reached `local`.
pub(crate) fn judge(
    headers: &HeaderMap,
    local: SocketAddr,
    allowed: &Allowed,
) -> Result<(), Refusal> {
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(host_of)
        .ok_or(Refusal::NoHost)?;
    if !host_allowed(&host, local.ip(), allowed) {
        return Err(Refusal::WrongHost);
    }
    match headers.get(header::ORIGIN) {
        None => Ok(()),
        Some(origin) => {
            let origin = origin.to_str().ok().and_then(normalize_origin);
            match origin {
                Some(o) if allowed.origins.contains(&o) => Ok(()),
                _ => Err(Refusal::WrongOrigin),
            }
        }
    }
}

/// A `Host` value's host, lowercase, without port or brackets.
fn host_of(value: &str) -> Option<String> {
    let value = value.trim();
    let host = if let Some(rest) = value.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || port(after.strip_prefix(':')?)) {
            return None;
        }
        inside
    } else {
        match value.rsplit_once(':') {
            Some((host, p)) if port(p) => host,
            Some(_) => return None,
            None => value,
        }
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

fn port(text: &str) -> bool {
    !text.is_empty() && text.len() <= 5 && text.bytes().all(|b| b.is_ascii_digit())
}

fn host_allowed(host: &str, local: IpAddr, allowed: &Allowed) -> bool {
    let local = local.to_canonical();
    if let Ok(ip) = host.parse::<IpAddr>() {
        return ip.to_canonical() == local;
    }
    (host == "localhost" && local.is_loopback()) || allowed.hosts.iter().any(|h| h == host)
}

/// `scheme://host[:port]` lowercased, the scheme's default port dropped;
/// none for anything else (`null`, a path, another scheme).
fn normalize_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, authority) = text.split_once("://")?;
    let default = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let host = host_of(authority)?;
    let explicit = authority
        .rsplit_once(':')
        .filter(|(_, p)| port(p) && !authority.ends_with(']'))
        .map(|(_, p)| p);
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Some(match explicit {
        Some(p) if p != default => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Refuses (403) a request whose `Host` or `Origin` is not allowed.
pub(crate) async fn check_door(
    allowed: Arc<Allowed>,
    ConnectInfo(ListenAddr(local)): ConnectInfo<ListenAddr>,
    request: Request,
    next: Next,
) -> Response {
    match judge(request.headers(), local, &allowed) {
        Ok(()) => next.run(request).await,
        Err(refusal) => (StatusCode::FORBIDDEN, refusal.text()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(host) = host {
            h.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        }
        if let Some(origin) = origin {
            h.insert(header::ORIGIN, HeaderValue::from_str(origin).unwrap());
        }
        h
    }

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_host_must_name_the_address_the_connection_reached() {
        let none = Allowed::default();
        let at = |host: &str, local: &str| judge(&headers(Some(host), None), addr(local), &none);
        assert_eq!(at("127.0.0.1:8080", "127.0.0.1:8080"), Ok(()));
        assert_eq!(at("localhost:8080", "127.0.0.1:8080"), Ok(()));
        assert_eq!(at("LOCALHOST.", "127.0.0.1:8080"), Ok(()));
        assert_eq!(at("[::1]:8080", "[::1]:8080"), Ok(()));
        assert_eq!(at("10.1.2.3:8080", "10.1.2.3:8080"), Ok(()));
        // A dual-stack socket sees a v4 client's address as v4-mapped v6.
        assert_eq!(at("10.1.2.3:8080", "[::ffff:10.1.2.3]:8080"), Ok(()));
        assert_eq!(
            at("10.1.2.4:8080", "10.1.2.3:8080"),
            Err(Refusal::WrongHost)
        );
        assert_eq!(
            at("localhost:8080", "10.1.2.3:8080"),
            Err(Refusal::WrongHost)
        );
        assert_eq!(
            at("evil.example:8080", "127.0.0.1:8080"),
            Err(Refusal::WrongHost)
        );
        assert_eq!(
            at("127.0.0.1:80:80", "127.0.0.1:80"),
            Err(Refusal::WrongHost)
        );
        assert_eq!(at("127.0.0.1:http", "127.0.0.1:80"), Err(Refusal::NoHost));
        assert_eq!(
            judge(&headers(None, None), addr("127.0.0.1:1"), &none),
            Err(Refusal::NoHost)
        );
        let named = Allowed::new(&["Proxy.Example.".into()], &[]).unwrap();
        assert_eq!(
            judge(
                &headers(Some("proxy.example:9"), None),
                addr("10.0.0.1:9"),
                &named
            ),
            Ok(())
        );
    }

    #[test]
    fn an_origin_is_absent_or_one_the_operator_allowed() {
        let allowed = Allowed::new(
            &[],
            &[
                "https://App.example.com:443".into(),
                "http://localhost:3000".into(),
            ],
        )
        .unwrap();
        let from = |origin: Option<&str>| {
            judge(
                &headers(Some("127.0.0.1"), origin),
                addr("127.0.0.1:1"),
                &allowed,
            )
        };
        assert_eq!(from(None), Ok(()));
        assert_eq!(from(Some("https://app.example.com")), Ok(()));
        assert_eq!(from(Some("http://localhost:3000")), Ok(()));
        assert_eq!(
            from(Some("http://localhost:3001")),
            Err(Refusal::WrongOrigin)
        );
        assert_eq!(
            from(Some("http://app.example.com")),
            Err(Refusal::WrongOrigin)
        );
        assert_eq!(from(Some("null")), Err(Refusal::WrongOrigin));
        assert_eq!(
            from(Some("https://evil.example")),
            Err(Refusal::WrongOrigin)
        );
        let nothing = Allowed::default();
        assert_eq!(
            judge(
                &headers(Some("127.0.0.1"), Some("http://localhost:3000")),
                addr("127.0.0.1:1"),
                &nothing
            ),
            Err(Refusal::WrongOrigin),
            "with no origin allowed, any origin is refused"
        );
    }

    #[test]
    fn the_operators_lists_are_checked() {
        assert!(Allowed::new(&[], &["app.example.com".into()]).is_err());
        assert!(Allowed::new(&[], &["ftp://x".into()]).is_err());
        assert!(Allowed::new(&[], &["https://x/path".into()]).is_err());
        assert!(Allowed::new(&["a:80".into()], &[]).is_err());
        assert!(Allowed::new(&["".into()], &[]).is_err());
        assert_eq!(
            normalize_origin("https://[::1]:443").as_deref(),
            Some("https://[::1]")
        );
        assert_eq!(
            normalize_origin("http://[::1]:8080").as_deref(),
            Some("http://[::1]:8080")
        );
    }
}
