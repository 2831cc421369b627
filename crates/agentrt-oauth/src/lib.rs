//! An OAuth 2.0 / OpenID Connect issuer as agentrt's doors use it: its
//! metadata found (RFC 8414, else OpenID discovery) and checked to name
//! the issuer asked for, and its signing keys (JWKS) fetched, kept, and
//! fetched again for a key a token names that the set lacks (at most once
//! per cool-down) or when the set is an hour old; a token checked
//! against them ([`Keys::check`]).
//!
//! Every fetch goes only to HTTPS, or plain HTTP to a loopback host (a
//! provider on the same machine), follows no redirect, uses no proxy from
//! the environment, and reads at most [`MAX_DOCUMENT_BYTES`]. Tokens are
//! checked by `jsonwebtoken` with the keys this crate hands out; no JOSE
//! is written here.
//!
//! Used by `agentrt-proxy` (access tokens of MCP hosts) and
//! `agentrt-approver` (approvers who sign in).
//!
//! ```
//! // Plain HTTP only to this machine.
//! assert!(agentrt_oauth::web_url("issuer", "http://127.0.0.1:4000").is_ok());
//! assert!(agentrt_oauth::web_url("issuer", "http://id.example.com").is_err());
//! ```
#![deny(missing_docs)]

mod claims;
mod error;
mod fetch;
mod keys;
mod metadata;
mod token;
mod web_url;

pub use claims::{MAX_SUBJECT_CHARS, names, subject};
pub use error::OAuthError;
pub use fetch::{FETCH_TIMEOUT, MAX_DOCUMENT_BYTES, http_client};
pub use keys::{KeyRefusal, Keys, MAX_KEY_SET_AGE};
pub use metadata::{IssuerMetadata, discover};
pub use token::{ASYMMETRIC, Checked, Expected};
pub use web_url::web_url;
