//! The proxy's typed errors.

use std::path::PathBuf;

/// What went wrong, with the fields a caller may act on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The configuration file breaks its format.
    #[error("config {}: {detail}", path.display())]
    Config {
        /// The configuration file.
        path: PathBuf,
        /// The first problem found.
        detail: String,
    },
    /// The database file cannot be used.
    #[error("database {}: {detail}", path.display())]
    Database {
        /// The database file as configured.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A server's command could reach one of the proxy's own files.
    #[error(
        "server {server:?}: argument {argument:?} reaches {}, which the proxy protects; \
         remove it, or set \"skip_path_check\" if the server cannot write there",
        file.display()
    )]
    Reach {
        /// The server.
        server: String,
        /// The argument as written.
        argument: String,
        /// The protected file or directory it reaches.
        file: PathBuf,
    },
    /// From the MCP adapter: an operator's file, a connection, a load.
    #[error(transparent)]
    Mcp(#[from] agentrt_mcp::McpError),
    /// From the core: the store.
    #[error(transparent)]
    Core(#[from] agentrt::Error),
    /// The Cedar policy file cannot be read, or its policies do not parse
    /// or do not validate against the tools the proxy offers (Cedar's
    /// diagnostic in `detail`).
    #[error("cedar policy {}: {detail}", path.display())]
    Cedar {
        /// The policy file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The HTTP door's bearer token cannot be read or made.
    #[error("token file {}: {detail}", path.display())]
    Token {
        /// The token file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Serving over HTTP failed: the address, or the server itself.
    #[error("serving on {addr}: {detail}")]
    Http {
        /// The address asked for.
        addr: std::net::SocketAddr,
        /// What failed.
        detail: String,
    },
    /// Writing a file or the output failed.
    #[error("{}: {detail}", path.display())]
    Write {
        /// The file (empty for the output).
        path: PathBuf,
        /// What failed.
        detail: String,
    },
}
