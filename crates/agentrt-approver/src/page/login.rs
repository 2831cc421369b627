//! One-time login links and the sessions they open.
//!
//! A link's token is `<expires>.<by>.<run>.<nonce>.<mac>`: when it stops
//! working (Unix seconds, decimal), who it signs in and the run it opens
//! (each the lowercase hex of its UTF-8), a nonce (1 to 64 ASCII letters,
//! digits, `-` or `_`), and the HMAC-SHA256 of the four under the webhook's secret,
//! domain-separated from request signatures (`agentrt-approver login v2`).
//! The run and the decider are under the MAC: a link cannot be pointed at
//! another run or person. A token of the first format (no run) is
//! malformed.
//!
//! The server takes a link once, ever: its nonce is recorded in the run's
//! database ([`Approver::sign_in`](crate::Approver::sign_in)), so a used
//! link stays used after a restart and across processes. Taking it opens a
//! session: a random id in an `HttpOnly`, `SameSite=Strict` cookie (with
//! `Secure` when the page is reached over HTTPS, see [`SecureCookie`]), the
//! person and the one run it may see and decide, and a CSRF token every
//! form carries. Sessions live in the server's memory for 8 hours: a
//! restart signs everyone out.

use std::collections::HashMap;

use axum::http::{HeaderMap, HeaderName, header};
use hmac::Mac;

use crate::signature::{Secret, constant_time_eq, hex};

/// What a link's MAC covers before its fields: never a request signature,
/// nor a link of the first format.
const DOMAIN: &str = "agentrt-approver login v2";

/// What a console link's MAC covers before its fields: never a run's link.
const CONSOLE_DOMAIN: &str = "agentrt-approver console v1";

/// What a console link's token starts with.
const CONSOLE_PREFIX: &str = "console.";

/// The longest a console link may last, in seconds: a console link's
/// one use is remembered by the server that took it, not by the database
/// (it opens no run), so a link that outlives a restart must not live long.
pub const CONSOLE_LINK_SECONDS: i64 = 3600;

/// How long a session lasts, in seconds.
pub(crate) const SESSION_SECONDS: i64 = 8 * 3600;

/// The longest token read, in bytes.
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The longest nonce, in characters.
const MAX_NONCE: usize = 64;

/// The session cookie's name.
pub(crate) const COOKIE: &str = "agentrt_session";

fn mac(secret: &Secret, expires: i64, by_hex: &str, run_hex: &str, nonce: &str) -> String {
    let mut mac = secret.mac();
    mac.update(format!("{DOMAIN}\n{expires}\n{by_hex}\n{run_hex}\n{nonce}").as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// The token of a login link that signs `by` in to the page of `run`,
/// good until `expires` (Unix seconds), with `nonce` (random, from the
/// caller: 1 to 64 ASCII letters, digits, `-` or `_`).
pub fn login_token(secret: &Secret, by: &str, run: &str, expires: i64, nonce: &str) -> String {
    let (by_hex, run_hex) = (hex(by.as_bytes()), hex(run.as_bytes()));
    let tag = mac(secret, expires, &by_hex, &run_hex, nonce);
    format!("{expires}.{by_hex}.{run_hex}.{nonce}.{tag}")
}

/// The token of a console link: it signs `by` in to the console (every
/// run, read; every pending approval, decided as on a run's page) until
/// `expires`, at most [`CONSOLE_LINK_SECONDS`] after it is used.
pub fn console_token(secret: &Secret, by: &str, expires: i64, nonce: &str) -> String {
    let by_hex = hex(by.as_bytes());
    let tag = console_mac(secret, expires, &by_hex, nonce);
    format!("{CONSOLE_PREFIX}{expires}.{by_hex}.{nonce}.{tag}")
}

fn console_mac(secret: &Secret, expires: i64, by_hex: &str, nonce: &str) -> String {
    let mut mac = secret.mac();
    mac.update(format!("{CONSOLE_DOMAIN}\n{expires}\n{by_hex}\n{nonce}").as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// What a link opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One run's page: the only run its session may see and decide.
    Run(String),
    /// The console: every run's record, and every pending approval.
    Console,
}

/// A login link whose token holds: its MAC is the secret's and its time
/// has not passed. Whether it was used is the database's to say (the
/// server's, for a console link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Who it signs in.
    pub by: String,
    /// What it opens.
    pub scope: Scope,
    /// When it stops working, Unix seconds.
    pub expires: i64,
    /// Its nonce.
    pub nonce: String,
}

/// Why a link's token was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LinkRefusal {
    /// Not a token of this format (an old link without its run is one).
    #[error("not a login link of this version")]
    Malformed,
    /// Its MAC is not the secret's over its fields.
    #[error("not signed with the server's secret")]
    Forged,
    /// Its time has passed.
    #[error("expired")]
    Expired,
    /// A console link that would last longer than
    /// [`CONSOLE_LINK_SECONDS`] from now.
    #[error("a console link may last an hour at most")]
    TooLong,
}

impl Link {
    /// Reads `token` at `now` (Unix seconds): in order its shape, its MAC
    /// (compared in constant time), its time.
    pub fn read(secret: &Secret, token: &str, now: i64) -> Result<Link, LinkRefusal> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(LinkRefusal::Malformed);
        }
        if let Some(console) = token.strip_prefix(CONSOLE_PREFIX) {
            return Link::read_console(secret, console, now);
        }
        let parts: Vec<&str> = token.split('.').collect();
        let [expires_text, by_hex, run_hex, nonce, tag] = parts.as_slice() else {
            return Err(LinkRefusal::Malformed);
        };
        let expires = decimal(expires_text).ok_or(LinkRefusal::Malformed)?;
        let by = unhex(by_hex).ok_or(LinkRefusal::Malformed)?;
        let run_id = unhex(run_hex).ok_or(LinkRefusal::Malformed)?;
        if !nonce_ok(nonce) {
            return Err(LinkRefusal::Malformed);
        }
        let expected = mac(secret, expires, by_hex, run_hex, nonce);
        if !constant_time_eq(expected.as_bytes(), tag.as_bytes()) {
            return Err(LinkRefusal::Forged);
        }
        if now >= expires {
            return Err(LinkRefusal::Expired);
        }
        Ok(Link {
            by,
            scope: Scope::Run(run_id),
            expires,
            nonce: (*nonce).to_owned(),
        })
    }

    /// A console token after its prefix: its shape, its MAC, its time, and
    /// how long it has left.
    fn read_console(secret: &Secret, token: &str, now: i64) -> Result<Link, LinkRefusal> {
        let parts: Vec<&str> = token.split('.').collect();
        let [expires_text, by_hex, nonce, tag] = parts.as_slice() else {
            return Err(LinkRefusal::Malformed);
        };
        let expires = decimal(expires_text).ok_or(LinkRefusal::Malformed)?;
        let by = unhex(by_hex).ok_or(LinkRefusal::Malformed)?;
        if !nonce_ok(nonce) {
            return Err(LinkRefusal::Malformed);
        }
        let expected = console_mac(secret, expires, by_hex, nonce);
        if !constant_time_eq(expected.as_bytes(), tag.as_bytes()) {
            return Err(LinkRefusal::Forged);
        }
        if now >= expires {
            return Err(LinkRefusal::Expired);
        }
        if expires - now > CONSOLE_LINK_SECONDS {
            return Err(LinkRefusal::TooLong);
        }
        Ok(Link {
            by,
            scope: Scope::Console,
            expires,
            nonce: (*nonce).to_owned(),
        })
    }
}

/// 1 to 64 ASCII letters, digits, `-` or `_`.
fn nonce_ok(nonce: &str) -> bool {
    (1..=MAX_NONCE).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Decimal digits only (no sign, no space, no leading zero), as an
/// `i64`: a token has one spelling.
fn decimal(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value: i64 = text.parse().ok()?;
    (value.to_string() == text).then_some(value)
}

/// Non-empty lowercase hex of UTF-8 text, decoded.
fn unhex(text: &str) -> Option<String> {
    if text.is_empty()
        || !text.len().is_multiple_of(2)
        || !text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

/// When the session cookie carries `Secure`, so that a browser sends it
/// over HTTPS only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SecureCookie {
    /// Never: the page is reached over plain HTTP, on loopback (the
    /// default; a `Secure` cookie would not come back over plain HTTP).
    #[default]
    Never,
    /// Always: every browser reaches the page over HTTPS (TLS in front of
    /// the server). `serve --cookie-secure`.
    Always,
    /// When the request's header of this name, set by the proxy that
    /// terminates TLS (`X-Forwarded-Proto`), says `https`: its value, or
    /// one of its comma-separated values, is `https` in any case.
    /// `serve --trust-forwarded-proto HEADER`. A client that sets the
    /// header itself only makes its own cookie `Secure`.
    WhenForwardedProto(HeaderName),
}

impl SecureCookie {
    /// Whether the cookie set in answer to a request with `headers` is
    /// `Secure`.
    pub fn applies(&self, headers: &HeaderMap) -> bool {
        match self {
            SecureCookie::Never => false,
            SecureCookie::Always => true,
            SecureCookie::WhenForwardedProto(name) => headers
                .get_all(name)
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .any(|proto| proto.trim().eq_ignore_ascii_case("https")),
        }
    }
}

/// The session id a request's `Cookie` headers carry: the value of the
/// first `agentrt_session` pair.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// A signed-in person, for one run or the console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) by: String,
    pub(crate) scope: Scope,
    pub(crate) csrf: String,
    pub(crate) expires: i64,
}

/// The sessions open, and the console links taken (until they expire).
#[derive(Debug, Default)]
pub(crate) struct Sessions {
    open: HashMap<String, Session>,
    console_nonces: HashMap<String, i64>,
}

impl Sessions {
    /// Opens a session for the person and run of `link`; `id` and `csrf`
    /// are random, from the caller.
    pub(crate) fn open(&mut self, id: String, link: Link, csrf: String, now: i64) {
        let expires = now.saturating_add(SESSION_SECONDS);
        self.forget(now);
        self.open.insert(
            id,
            Session {
                by: link.by,
                scope: link.scope,
                csrf,
                expires,
            },
        );
    }

    /// Takes a console link's nonce once: `false` when this server took it
    /// before (kept until the link expires).
    pub(crate) fn take_console(&mut self, link: &Link, now: i64) -> bool {
        self.console_nonces.retain(|_, expires| *expires > now);
        if self.console_nonces.contains_key(&link.nonce) {
            return false;
        }
        self.console_nonces.insert(link.nonce.clone(), link.expires);
        true
    }

    /// The session `id` names at `now`, if open.
    pub(crate) fn session(&mut self, id: &str, now: i64) -> Option<Session> {
        self.forget(now);
        self.open.get(id).cloned()
    }

    fn forget(&mut self, now: i64) {
        self.open.retain(|_, s| s.expires > now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new([5u8; 32]).unwrap()
    }

    #[test]
    fn a_link_holds_before_it_expires_and_a_forged_one_never() {
        let token = login_token(&secret(), "alice", "r1", 1000, "n1");
        assert_eq!(
            Link::read(&secret(), &token, 999),
            Ok(Link {
                by: "alice".into(),
                scope: Scope::Run("r1".into()),
                expires: 1000,
                nonce: "n1".into(),
            })
        );
        assert_eq!(
            Link::read(&secret(), &token, 1000),
            Err(LinkRefusal::Expired)
        );
        let other = Secret::new([6u8; 32]).unwrap();
        let forged = login_token(&other, "alice", "r1", 1000, "n3");
        assert_eq!(Link::read(&secret(), &forged, 10), Err(LinkRefusal::Forged));
        let padded = format!("0{token}");
        for bad in [
            "",
            "a.b.c",
            "x.y.z.w.v",
            "1.2.3.4.5.6",
            "1.61.72.n.t",
            padded.as_str(),
        ] {
            assert!(Link::read(&secret(), bad, 10).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_link_cannot_be_pointed_at_another_run_or_person() {
        let token = login_token(&secret(), "alice", "r1", 1000, "n1");
        let other_run = token.replacen(&hex(b"r1"), &hex(b"r2"), 1);
        assert_eq!(
            Link::read(&secret(), &other_run, 10),
            Err(LinkRefusal::Forged)
        );
        let other_person = token.replacen(&hex(b"alice"), &hex(b"mallory"), 1);
        assert_eq!(
            Link::read(&secret(), &other_person, 10),
            Err(LinkRefusal::Forged)
        );
    }

    #[test]
    fn a_link_of_the_first_format_is_refused() {
        // `<expires>.<by>.<nonce>.<mac>` under the first domain.
        let mut mac = secret().mac();
        let by_hex = hex(b"alice");
        mac.update(format!("agentrt-approver login v1\n1000\n{by_hex}\nn1").as_bytes());
        let old = format!("1000.{by_hex}.n1.{}", hex(&mac.finalize().into_bytes()));
        assert_eq!(Link::read(&secret(), &old, 10), Err(LinkRefusal::Malformed));
    }

    #[test]
    fn sessions_end_after_their_time_and_keep_their_run() {
        let mut sessions = Sessions::default();
        let link = Link::read(
            &secret(),
            &login_token(&secret(), "alice", "r1", 1000, "n1"),
            100,
        )
        .unwrap();
        sessions.open("s1".into(), link, "c1".into(), 100);
        let open = sessions.session("s1", 101).unwrap();
        assert_eq!(open.by, "alice");
        assert_eq!(open.scope, Scope::Run("r1".into()));
        assert_eq!(sessions.session("s1", 100 + SESSION_SECONDS), None);
        assert_eq!(sessions.session("nope", 101), None);
    }

    #[test]
    fn a_console_link_is_its_own_format_lasts_an_hour_at_most_and_is_taken_once() {
        let token = console_token(&secret(), "alice", 1000, "c1");
        let link = Link::read(&secret(), &token, 999).unwrap();
        assert_eq!((link.by.as_str(), &link.scope), ("alice", &Scope::Console));
        assert_eq!(
            Link::read(&secret(), &token, 1000),
            Err(LinkRefusal::Expired)
        );
        let long = console_token(&secret(), "alice", 1000 + CONSOLE_LINK_SECONDS + 1, "c2");
        assert_eq!(
            Link::read(&secret(), &long, 1000),
            Err(LinkRefusal::TooLong)
        );
        // A run's link cannot be turned into a console link, nor back.
        let run = login_token(&secret(), "alice", "r1", 1000, "n1");
        assert!(Link::read(&secret(), &format!("console.{run}"), 10).is_err());
        let without = token.trim_start_matches("console.");
        assert!(Link::read(&secret(), without, 10).is_err());
        let other_person = token.replacen(&hex(b"alice"), &hex(b"mallory"), 1);
        assert_eq!(
            Link::read(&secret(), &other_person, 10),
            Err(LinkRefusal::Forged)
        );
        let mut sessions = Sessions::default();
        assert!(sessions.take_console(&link, 10));
        assert!(!sessions.take_console(&link, 20), "once");
    }

    #[test]
    fn a_forwarded_proto_header_makes_the_cookie_secure_only_when_it_says_https() {
        let name = HeaderName::from_static("x-forwarded-proto");
        let rule = SecureCookie::WhenForwardedProto(name.clone());
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(name.clone(), value.parse().unwrap());
            headers
        };
        assert!(rule.applies(&with("https")));
        assert!(rule.applies(&with("HTTPS")));
        assert!(rule.applies(&with("http, https")));
        assert!(!rule.applies(&with("http")));
        assert!(!rule.applies(&with("httpsx")));
        assert!(!rule.applies(&HeaderMap::new()));
        assert!(SecureCookie::Always.applies(&HeaderMap::new()));
        assert!(!SecureCookie::Never.applies(&with("https")));
    }
}
