//! # agentrt-provider
//!
//! Model adapters for [agentrt]: each implements [`agentrt::Model`] for one
//! provider's wire format and maps its transport failures onto
//! [`agentrt::ModelError`], so the accounting caller can charge, retry or
//! stop without reading any text.
//!
//! One cargo feature per provider, none by default, so a user compiles only
//! the client they use:
//!
//! | feature | adapter | wire |
//! |---|---|---|
//! | `openai` | [`openai::OpenAi`] | any OpenAI-compatible `/chat/completions` endpoint (request types from `async-openai`, sent with `reqwest`) |
//! | `anthropic` | [`anthropic::Anthropic`] | the Anthropic Messages API over `reqwest` |
//! | `ollama` | [`ollama::Ollama`] | Ollama's native `/api/chat` over `reqwest` |
//!
//! What every adapter does, whatever the provider:
//!
//! - **No retries** of its own: one call to `generate` sends at most one
//!   request. Retrying is the accounting caller's job, so every attempt is
//!   recorded.
//! - **No redirects** followed: a 3xx is a permanent error naming only the
//!   host the `Location` header points to.
//! - **Keys stay home**: an API key travels over plain `http` only to a
//!   loopback host (`localhost` or a loopback IP literal), and a client the
//!   adapter builds for that case resolves names to loopback addresses
//!   only. Keys are held in an [`ApiKey`], which prints and serialises as
//!   `[redacted]`.
//! - **Bounded bodies**: a response is read up to [`MAX_BODY_BYTES`]
//!   (16 MiB); one byte more is a permanent error, never a silent cut.
//! - **Typed failures**: transient statuses (408, 409, 425, 429, 5xx) are
//!   [`ModelError::Transient`](agentrt::ModelError::Transient) with the
//!   `Retry-After` delay; a timeout is `Timeout`; a connection lost after
//!   the request went out (a body cut mid-read) is `ConnectionLost`; a
//!   refused connection is `Transient`; a served reply that cannot be used
//!   is `Served` with the usage it reported; implausible usage is
//!   `UnusableUsage`. Transport errors are classified by their type (reqwest
//!   error kinds, `std::io::ErrorKind`), never by their message.
//! - **Raw bytes kept**: every successful [`ModelResponse`](agentrt::ModelResponse)
//!   carries the provider's body in `raw`.
//! - **Environment**: only `OLLAMA_HOST`, `OPENAI_API_KEY` (for the default
//!   OpenAI base URL only) and `ANTHROPIC_API_KEY` are read, each only when
//!   the configuration leaves the value unset; every adapter can be built
//!   from code alone (`build_with_env(|_| None)`). The clients the adapters
//!   build ignore `HTTP_PROXY` and friends (`no_proxy`).
//!
//! The helpers shared by the adapters ([`shared`], [`usage`], [`price`])
//! are compiled with any feature set, none included.
//!
//! ```
//! use agentrt_provider::price::{Price, PriceTable, free, merge, parse_dollars};
//!
//! let mut paid = PriceTable::new();
//! paid.insert("openai:gpt-x", Price {
//!     input_per_mtok_micros: parse_dollars("$2.50")?,
//!     output_per_mtok_micros: parse_dollars("10")?,
//!     cached_input_per_mtok_micros: parse_dollars("1.25")?,
//! });
//! let table = merge([paid, free(["ollama:qwen3:30b-a3b"])]);
//! assert_eq!(table.price_for("ollama:qwen3:30b-a3b")?, Price::FREE);
//! assert!(table.price_for("gpt-x").is_err()); // unknown is unpriced, not free
//! # Ok::<(), agentrt_provider::price::PriceError>(())
//! ```
#![deny(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod config;
mod key;
pub mod price;
pub mod shared;
pub mod usage;

#[cfg(any(feature = "openai", feature = "anthropic", feature = "ollama"))]
pub mod http;

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "ollama")]
pub mod ollama;
#[cfg(feature = "openai")]
pub mod openai;

pub use config::{ConfigError, EndpointProblem, process_env};
pub use key::ApiKey;
pub use shared::{MAX_BODY_BYTES, loopback};
