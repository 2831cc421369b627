//! One-time login links and the sessions they open.
//!
//! A link carries `<expires>.<by>.<nonce>.<mac>`: when it stops working
//! (Unix seconds), who it logs in (hex of the name), a random nonce, and
//! the HMAC-SHA256 of the three under the webhook's secret, domain-separated
//! from request signatures. The server takes a link once (its nonce is
//! remembered until it expires) and answers with a session: a random id in
//! an `HttpOnly`, `SameSite=Strict` cookie, and a CSRF token every form
//! carries. Sessions live in the server's memory: a restart logs everyone
//! out, and a link not yet used stays usable until it expires.

use std::collections::{BTreeSet, HashMap, HashSet};

use hmac::Mac;

use crate::signature::{Secret, constant_time_eq, hex};

/// What a link's MAC covers before its fields: never a request signature.
const DOMAIN: &str = "agentrt-approver login v1";

/// How long a session lasts, in seconds.
pub(crate) const SESSION_SECONDS: i64 = 8 * 3600;

fn mac(secret: &Secret, expires: i64, by_hex: &str, nonce: &str) -> String {
    let mut mac = secret.mac();
    mac.update(format!("{DOMAIN}\n{expires}\n{by_hex}\n{nonce}").as_bytes());
    hex(&mac.finalize().into_bytes())
}

/// The token of a login link for `by`, good until `expires` (Unix
/// seconds), with `nonce` (random, from the caller).
pub fn login_token(secret: &Secret, by: &str, expires: i64, nonce: &str) -> String {
    let by_hex = hex(by.as_bytes());
    let tag = mac(secret, expires, &by_hex, nonce);
    format!("{expires}.{by_hex}.{nonce}.{tag}")
}

/// A logged-in person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) by: String,
    pub(crate) csrf: String,
    pub(crate) expires: i64,
}

/// The links taken and the sessions open.
#[derive(Debug, Default)]
pub(crate) struct Logins {
    used: HashSet<String>,
    /// `(expires, nonce)`: when each used nonce may be forgotten.
    used_until: BTreeSet<(i64, String)>,
    sessions: HashMap<String, Session>,
}

/// Why a link was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkRefusal {
    Malformed,
    Forged,
    Expired,
    Used,
}

impl Logins {
    /// Takes the link's token at `now`: the person it names, if it holds
    /// and was never taken.
    pub(crate) fn take(
        &mut self,
        secret: &Secret,
        token: &str,
        now: i64,
    ) -> Result<String, LinkRefusal> {
        self.forget(now);
        let parts: Vec<&str> = token.split('.').collect();
        let [expires, by_hex, nonce, tag] = parts.as_slice() else {
            return Err(LinkRefusal::Malformed);
        };
        let expires: i64 = expires.parse().map_err(|_| LinkRefusal::Malformed)?;
        if nonce.is_empty() || nonce.len() > 64 {
            return Err(LinkRefusal::Malformed);
        }
        let expected = mac(secret, expires, by_hex, nonce);
        if !constant_time_eq(expected.as_bytes(), tag.as_bytes()) {
            return Err(LinkRefusal::Forged);
        }
        if now >= expires {
            return Err(LinkRefusal::Expired);
        }
        if !self.used.insert((*nonce).to_owned()) {
            return Err(LinkRefusal::Used);
        }
        self.used_until.insert((expires, (*nonce).to_owned()));
        let by = unhex(by_hex).ok_or(LinkRefusal::Malformed)?;
        Ok(by)
    }

    /// Opens a session for `by`; `id` and `csrf` are random, from the
    /// caller.
    pub(crate) fn open(&mut self, id: String, by: String, csrf: String, now: i64) {
        let expires = now.saturating_add(SESSION_SECONDS);
        self.sessions.insert(id, Session { by, csrf, expires });
    }

    /// The session `id` names at `now`, if open.
    pub(crate) fn session(&mut self, id: &str, now: i64) -> Option<Session> {
        self.forget(now);
        self.sessions.get(id).cloned()
    }

    fn forget(&mut self, now: i64) {
        while let Some((until, _)) = self.used_until.first() {
            if *until > now {
                break;
            }
            if let Some((_, nonce)) = self.used_until.pop_first() {
                self.used.remove(&nonce);
            }
        }
        self.sessions.retain(|_, s| s.expires > now);
    }
}

fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret() -> Secret {
        Secret::new([5u8; 32]).unwrap()
    }

    #[test]
    fn a_link_is_taken_once_before_it_expires_and_a_forged_one_never() {
        let mut logins = Logins::default();
        let token = login_token(&secret(), "alice", 1000, "n1");
        assert_eq!(logins.take(&secret(), &token, 999), Ok("alice".into()));
        assert_eq!(logins.take(&secret(), &token, 999), Err(LinkRefusal::Used));
        let late = login_token(&secret(), "alice", 1000, "n2");
        assert_eq!(
            logins.take(&secret(), &late, 1000),
            Err(LinkRefusal::Expired)
        );
        let other = Secret::new([6u8; 32]).unwrap();
        let forged = login_token(&other, "alice", 1000, "n3");
        assert_eq!(
            logins.take(&secret(), &forged, 10),
            Err(LinkRefusal::Forged)
        );
        let renamed = token.replacen(&hex(b"alice"), &hex(b"mallory"), 1);
        assert_eq!(
            logins.take(&secret(), &renamed, 10),
            Err(LinkRefusal::Forged)
        );
        for bad in ["", "a.b.c", "x.y.z.w", "1.2.3.4.5"] {
            assert!(logins.take(&secret(), bad, 10).is_err(), "{bad}");
        }
    }

    #[test]
    fn sessions_end_after_their_time() {
        let mut logins = Logins::default();
        logins.open("s1".into(), "alice".into(), "c1".into(), 100);
        assert_eq!(
            logins.session("s1", 101).map(|s| s.by),
            Some("alice".into())
        );
        assert_eq!(logins.session("s1", 100 + SESSION_SECONDS), None);
        assert_eq!(logins.session("nope", 101), None);
    }
}
