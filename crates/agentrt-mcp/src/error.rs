//! The crate's typed errors.

use std::path::{Path, PathBuf};

/// ` <path>` for a file, nothing for bytes given in memory.
fn at(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        String::new()
    } else {
        format!(" {}", path.display())
    }
}

/// What went wrong, with the fields a caller may act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A duration in an operator's file does not parse.
    #[error("duration {text:?}: {detail}")]
    Duration {
        /// The text as written.
        text: String,
        /// Why it does not parse.
        detail: String,
    },
    /// An operator's file could not be read.
    #[error("{}: {detail}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What failed.
        detail: String,
    },
    /// An operator's file is not private to the current user: group or
    /// others could change what tools may do.
    #[error(
        "{}: {detail}; it decides what tools may do, so only its owner may write it",
        path.display()
    )]
    NotPrivate {
        /// The file.
        path: PathBuf,
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// A rules file breaks its format.
    #[error("rules{}: {detail}", at(path))]
    Rules {
        /// The file (empty when the rules came from memory).
        path: PathBuf,
        /// The first problem found.
        detail: String,
    },
    /// A manifest breaks its format.
    #[error("manifest{}: {detail}", at(path))]
    Manifest {
        /// The file (empty when the manifest came from memory).
        path: PathBuf,
        /// The first problem found.
        detail: String,
    },
    /// A listed tool cannot be pinned (its schema is not canonical JSON).
    #[error("pin: tool {tool:?}: {detail}")]
    Pin {
        /// The server's name of the tool.
        tool: String,
        /// Why.
        detail: String,
    },
    /// Load refused the server as a whole (before or after connecting).
    #[error("load {server:?}: {detail}")]
    Load {
        /// The server's name.
        server: String,
        /// Why.
        detail: String,
    },
    /// A server description cannot work.
    #[error("server {server:?}: {detail}")]
    Server {
        /// The server's name.
        server: String,
        /// Why.
        detail: String,
    },
    /// A server's tool listing breaks the protocol's rules or our bounds.
    #[error("server {server:?}: list tools: {detail}")]
    Listing {
        /// The server's name.
        server: String,
        /// What is wrong (server-chosen text sanitized).
        detail: String,
    },
    /// Reaching a server, its handshake or its listing failed.
    #[error("server {server:?}: {detail}")]
    Connect {
        /// The server's name.
        server: String,
        /// What failed (server-chosen text sanitized).
        detail: String,
    },
    /// Load offered no tool at all: the report says why each was not.
    #[error("load {server:?}: no tool registered")]
    NoToolOffered {
        /// The server's name.
        server: String,
        /// Per tool, why not.
        report: Box<crate::report::Report>,
    },
}
