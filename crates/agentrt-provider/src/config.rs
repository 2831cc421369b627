//! Building an adapter: the typed errors and the environment source.

use std::fmt;

/// Reads one environment variable for an adapter: `None` when it is unset,
/// empty, or not UTF-8. This is what each adapter's `build()` uses; tests
/// and embedders pass their own lookup to `build_with_env` instead.
///
/// Adapters ask only for the names design §22 allows: `OLLAMA_HOST`,
/// `OPENAI_API_KEY` (default base URL only) and `ANTHROPIC_API_KEY`.
///
/// ```
/// assert_eq!(agentrt_provider::process_env("AGENTRT_PROVIDER_SURELY_UNSET"), None);
/// ```
#[must_use]
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name)
        .and_then(|v| v.into_string().ok())
        .filter(|v| !v.is_empty())
}

/// Why an adapter could not be built. Nothing here carries a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The configuration names no model.
    #[error("{provider}: model is required")]
    MissingModel {
        /// `ollama`, `openai` or `anthropic`.
        provider: &'static str,
    },
    /// No key in the configuration nor in the one variable the adapter may
    /// read.
    #[error("{provider}: no API key: set the configuration's api_key or {env}")]
    NoApiKey {
        /// The adapter.
        provider: &'static str,
        /// The environment variable that was consulted.
        env: &'static str,
    },
    /// The default name of the model is not in the adapter's price table:
    /// an unknown model is unpriced, not free.
    #[error(
        "{provider}: no price for {name}; set the configuration's name and price the model yourself"
    )]
    NoPrice {
        /// The adapter.
        provider: &'static str,
        /// The name looked up (`anthropic:<model>`).
        name: String,
    },
    /// The base URL or host is not one the adapter will talk to.
    #[error("{provider}: endpoint {shown}: {problem}")]
    Endpoint {
        /// The adapter.
        provider: &'static str,
        /// The endpoint as it may be shown (never its user-info).
        shown: String,
        /// What is wrong with it.
        problem: EndpointProblem,
    },
    /// A key would travel over plain `http` to a host that is not
    /// loopback.
    #[error(
        "{provider}: refusing to send an API key over plain http to {host}, which is not a loopback host"
    )]
    KeyOverPlainHttp {
        /// The adapter.
        provider: &'static str,
        /// The host named by the endpoint.
        host: String,
    },
    /// The key cannot be sent as an HTTP header value (control characters).
    #[error("{provider}: the API key is not a valid HTTP header value")]
    BadApiKey {
        /// The adapter.
        provider: &'static str,
    },
    /// The output cap cannot be served without streaming (Anthropic).
    #[error(
        "{provider}: max_tokens {max_tokens} is too large for a non-streaming request to {model} (at most {limit})"
    )]
    MaxTokensTooLarge {
        /// The adapter.
        provider: &'static str,
        /// The model id.
        model: String,
        /// The cap asked for.
        max_tokens: u64,
        /// The largest cap allowed for this model.
        limit: u64,
    },
    /// The HTTP client could not be built.
    #[error("{provider}: cannot build the HTTP client: {detail}")]
    Client {
        /// The adapter.
        provider: &'static str,
        /// What reqwest said.
        detail: String,
    },
}

/// What is wrong with an endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EndpointProblem {
    /// It does not parse as a URL.
    NotAUrl,
    /// Its scheme is neither `http` nor `https`.
    Scheme {
        /// The scheme found.
        scheme: String,
    },
    /// It names no host.
    NoHost,
    /// It carries user-info (`user:password@`), which is refused.
    UserInfo,
    /// It carries a query (Ollama host).
    Query,
    /// It carries a fragment (Ollama host).
    Fragment,
}

impl fmt::Display for EndpointProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndpointProblem::NotAUrl => f.write_str("is not a URL"),
            EndpointProblem::Scheme { scheme } => {
                write!(f, "scheme {scheme:?} is not http or https")
            }
            EndpointProblem::NoHost => f.write_str("names no host"),
            EndpointProblem::UserInfo => f.write_str("carries user-info, which is refused"),
            EndpointProblem::Query => f.write_str("carries a query, which is refused"),
            EndpointProblem::Fragment => f.write_str("carries a fragment, which is refused"),
        }
    }
}
