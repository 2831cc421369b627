//! `agentrt-proxy`: an MCP server that an MCP host launches in place of
//! its real servers. It loads the upstream servers through `agentrt-mcp`,
//! offers the host only pinned and classified tools, and puts every
//! `tools/call` through agentrt's gate as a run of its own (design §28).
//!
//! The pieces: the configuration file ([`read_config`]), the policy
//! identity ([`policy_id`]), the checks made before any server starts (the
//! database file, the reach of each server's arguments), `pin`, `check`,
//! `recheck`, and `serve` over stdio ([`serve_stdio`]) or streamable HTTP
//! ([`serve_http`]): one run per call ([`Proxy`]), indexed by request key
//! ([`INDEX`], [`request_key`]), decided by the rules of design §30,
//! held for an operator and collected by the same call, with the host's
//! side of each call in a [`Caller`].
#![deny(missing_docs)]

mod answer;
mod call;
mod caller;
mod cedar;
mod check;
pub mod cli;
mod config;
mod database;
mod error;
mod flight;
mod history;
mod http_serve;
mod index;
mod key_state;
mod notices;
mod oauth;
mod pin;
mod policy;
mod policy_id;
mod raw_args;
mod reach;
mod recheck;
mod repeat;
mod run_rows;
mod serve;
mod status;

pub use answer::Answer;
pub use call::Proxy;
pub use caller::{Caller, ProgressFn};
pub use cedar::{
    MAX_CEDAR_BYTES, PRINCIPAL_LABEL, RESOURCE_LABEL, cedar_from_file, load_cedar, load_shadow,
};
pub use check::{LoadedServers, check, load_all, open_store};
pub use config::{
    Config, DEFAULT_HOLD, DEFAULT_LEASE_TTL, DEFAULT_MAX_PENDING, DEFAULT_REPEAT_WINDOW,
    DEFAULT_STATUS_TOOL, DEFAULT_TTL, MIN_LEASE_TTL, ProxyRule, ServerConfig, default_policy,
    parse_config, read_config,
};
pub use database::Database;
pub use error::ProxyError;
pub use http_serve::{
    DEFAULT_MAX_REQUESTS_PER_SESSION, DEFAULT_MAX_SESSIONS, HttpOptions, MAX_HTTP_BODY, serve_http,
};
pub use index::{CALLS_TABLE, CallRow, INDEX, caller_request_key, request_key};
pub use key_state::{KeyState, OnCall, RowFacts, classify, on_call};
pub use notices::NOTICE_QUEUE;
pub use oauth::{
    CLIENT_LABEL, DEFAULT_GROUPS_CLAIM, DEFAULT_JWKS_COOLDOWN, DEFAULT_LEEWAY, DEFAULT_TOKEN_TYPES,
    GROUPS_LABEL, ISSUER_LABEL, Identity, MAX_GROUPS_CHARS, MAX_LEEWAY, MAX_SUBJECT_CHARS,
    METADATA_PATH, OAuthConfig, SUBJECT_LABEL,
};
pub use pin::{pin_all, write_listing};
pub use policy::{ProxyPolicy, ToolFacts, capability};
pub use policy_id::{POLICY_ID_PREFIX, policy_document, policy_id, policy_id_with};
pub use raw_args::{RawArguments, TeeInput};
pub use reach::{Protected, candidates, check_reach, check_server};
pub use recheck::recheck;
pub use serve::{PROTOCOL_VERSIONS, ProxyServer, build_proxy, serve_stdio};
