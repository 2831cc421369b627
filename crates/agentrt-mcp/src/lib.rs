//! `agentrt-mcp`: an MCP server's tools behind agentrt's policy.
//!
//! A server's annotations come from the server, so they never classify
//! anything: the operator classifies every tool in a rules file
//! ([`Rules`]), and the server's whole tool set is pinned in a manifest
//! ([`Manifest`]) that every load compares with what the server lists.
//!
//! This slice holds the operator's files (the manifest and its hashes, the
//! rules file and its durations, both read only when private to their
//! owner) and load's checks of each pinned tool against its rule and the
//! live listing ([`check_tools`]), with the report, and a call's two ends
//! that need no connection: the arguments sent ([`call_arguments`]) and the
//! result recorded ([`map_result`]). Connecting to a server (rmcp) comes
//! next.

mod call;
mod check;
mod connect;
mod duration;
mod error;
mod listing;
mod load;
mod manifest;
mod private_file;
mod report;
mod rules;
mod server;
mod tool;

pub use call::{DEFAULT_MAX_CONTENT_BYTES, call_arguments, map_result};
pub use check::{OfferedTool, check_files, check_tools};
pub use connect::{Connection, connect, pin};
pub use duration::parse_duration;
pub use error::McpError;
pub use listing::{Listing, MAX_PAGES, MAX_TOOLS};
pub use load::{Loaded, load};
pub use manifest::{
    ListedTool, Manifest, PinnedTool, description_hash, parse_manifest, read_manifest,
};
pub use private_file::read_private;
pub use report::{Registered, Report};
pub use rules::{Rule, Rules, parse_rules, read_rules};
pub use server::{DEFAULT_CONNECT_TIMEOUT, Endpoint, Server};
pub use tool::McpTool;
