//! `agentrt-mcp`: an MCP server's tools behind agentrt's policy.
//!
//! A server's annotations come from the server, so they never classify
//! anything: the operator classifies every tool in a rules file
//! ([`Rules`]), and the server's whole tool set is pinned in a manifest
//! ([`Manifest`]) that every load compares with what the server lists.
//!
//! [`pin`] connects to a server (a child process over stdio, or a
//! streamable-HTTP URL), lists its tools from the raw bytes it sent and
//! records them; [`load`] checks the operator's files, each pinned tool
//! against its rule and the live listing ([`check_tools`]), reports per
//! tool ([`Report`]), and offers the tools that pass as the core's `Tool`s
//! ([`McpTool`]) over one [`Connection`]. A call sends exactly the
//! arguments the policy approved ([`call_arguments`]) and records the
//! result from the bytes the server sent ([`map_result`]). Only a result
//! with `isError`, a refusal before anything was sent, or a JSON-RPC
//! "invalid params" answer ([`INVALID_PARAMS`]) is a known failure; an
//! answer lost after sending, any other error answer, or a result that
//! cannot be read is an unknown outcome.
#![deny(missing_docs)]

mod call;
mod capture;
mod check;
mod connect;
mod duration;
mod error;
mod http_client;
mod listing;
mod load;
mod manifest;
mod private_file;
mod process;
mod report;
mod rules;
mod server;
mod sse;
pub mod supervise;
mod tool;

pub use call::{DEFAULT_MAX_CONTENT_BYTES, call_arguments, map_result};
pub use check::{OfferedTool, check_files, check_tools, pinned_specs};
pub use connect::{Connection, connect, pin};
pub use duration::parse_duration;
pub use error::McpError;
pub use listing::{Listing, MAX_PAGES, MAX_TOOLS};
pub use load::{Loaded, load};
pub use manifest::{
    ListedTool, Manifest, PinnedTool, description_hash, parse_manifest, read_manifest,
};
pub use private_file::{read_private, read_secret, write_private};
pub use process::{SHUTDOWN_EOF_WAIT, SHUTDOWN_KILL_WAIT, SHUTDOWN_TERM_WAIT};
pub use report::{Registered, Report};
pub use rules::{Rule, RuleEntry, Rules, parse_rules, read_rules};
pub use server::{DEFAULT_CONNECT_TIMEOUT, Endpoint, Server};
pub use supervise::{
    SUPERVISE_ARG, SupervisorArgs, SupervisorArgsError, own_supervisor, parse_supervisor_args,
    run_supervisor, supervise_if_asked,
};
pub use tool::{INVALID_PARAMS, McpTool};
