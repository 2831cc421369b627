//! The Anthropic Messages API over `reqwest`: `POST <base>/v1/messages`
//! with `x-api-key`, no streaming (feature `anthropic`).
//!
//! Beyond the shared contract:
//!
//! - **Raw assistant turns.** Every response keeps the provider's message
//!   JSON in `raw`; [`Anthropic::raw_assistant_message`] wraps it as an
//!   assistant turn that is replayed verbatim on the next request, so
//!   thinking blocks and their signatures survive a continuation and
//!   tool-use inputs keep big integers exactly.
//! - **Strict tool schemas** (opt-in, [`Config::strict`]): each schema is
//!   reduced to the subset strict tool use accepts ([`strict`]).
//! - **Prices** ship as a dated data file ([`prices`]); building refuses a
//!   model the table does not price unless `name` is set (an unknown model
//!   is unpriced, not free).
//! - **Cache writes** have no counter in [`Usage`], so they are folded into
//!   input tokens at the multiple they are billed at ([`fold_usage`]).
//! - **Output cap**: a non-streaming request may ask for at most
//!   [`MAX_NON_STREAMING_TOKENS`] (and less for a few older models, see
//!   [`NON_STREAMING_CAPS`]); a larger cap is refused before sending.
//! - **Environment**: only `ANTHROPIC_API_KEY`, and only when `api_key` is
//!   unset. `ANTHROPIC_BASE_URL`, `ANTHROPIC_AUTH_TOKEN`, custom headers and
//!   profiles are ignored.
//!
//! ```no_run
//! use agentrt::{llm::Message, Model, ModelRequest};
//! use agentrt_provider::{ApiKey, anthropic};
//!
//! # async fn run(mut conversation: Vec<Message>) -> Result<(), Box<dyn std::error::Error>> {
//! let model = anthropic::Config {
//!     api_key: Some(ApiKey::new("sk-ant-…")),
//!     ..anthropic::Config::new("claude-opus-5")
//! }
//! .build()?;
//! let price = anthropic::prices().price_for(model.name())?;
//! let reply = model
//!     .generate(&ModelRequest { system: String::new(), messages: conversation.clone(), tools: vec![], max_output_tokens: None })
//!     .await?;
//! // Continue the conversation with the provider's own turn, thinking and all.
//! conversation.extend(model.raw_assistant_message(&reply));
//! # let _ = price; Ok(()) }
//! ```

pub mod strict;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use agentrt::model::BoxFuture;
use agentrt::{
    Model, ModelError, ModelRequest, ModelResponse, Usage, llm::BlockKind, llm::ContentBlock,
    llm::Message, llm::Role, llm::StopReason, llm::ToolUse,
};
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::{RawValue, to_raw_value};

use crate::config::{ConfigError, process_env};
use crate::http::{Transport, check_endpoint, client_for, join};
use crate::key::ApiKey;
use crate::price::PriceTable;
use crate::shared::{MAX_ECHO_BYTES, object_args, tool_use_id, truncate};
use crate::usage::{check_usage, member, text, top_level, usage_count};

const PROVIDER: &str = "anthropic";

/// The content-block name that marks an assistant turn carrying the
/// provider's own message JSON (the default of
/// [`Config::raw_assistant_block`]).
pub const RAW_ASSISTANT_BLOCK: &str = "anthropic.raw_assistant";

/// The output cap when neither the request nor the configuration sets one
/// (the API requires a value).
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The Claude API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/";

/// The path appended to the base URL.
pub const MESSAGES_PATH: &str = "/v1/messages";

/// The header that carries the key.
pub const KEY_HEADER: &str = "x-api-key";

/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// The one environment variable this adapter reads.
pub const KEY_ENV: &str = "ANTHROPIC_API_KEY";

/// The largest output cap a non-streaming request may ask for: a request
/// is expected to take `max_tokens` × 3600 s / 128 000 tokens, and one
/// expected to take more than 600 s must stream (21 333 × 3600 / 128 000 ≈
/// 599.99 s).
pub const MAX_NON_STREAMING_TOKENS: u64 = 21_333;

/// Models with a non-streaming output cap of their own, below
/// [`MAX_NON_STREAMING_TOKENS`] (the Anthropic SDKs' table; none of them is
/// in [`prices`]).
pub const NON_STREAMING_CAPS: &[(&str, u64)] = &[
    ("claude-opus-4-20250514", 8192),
    ("claude-opus-4-0", 8192),
    ("claude-4-opus-20250514", 8192),
    ("anthropic.claude-opus-4-20250514-v1:0", 8192),
    ("claude-opus-4@20250514", 8192),
    ("claude-opus-4-1-20250805", 8192),
    ("anthropic.claude-opus-4-1-20250805-v1:0", 8192),
    ("claude-opus-4-1@20250805", 8192),
];

/// The price table as shipped: `data/anthropic-prices.json`.
pub const PRICES_JSON: &str = include_str!("../../data/anthropic-prices.json");

/// How old the shipped price table may be before building an adapter logs a
/// warning, in days.
pub const PRICES_STALE_AFTER_DAYS: i64 = 180;

/// The shipped price table: `anthropic:<model>` → USD micros per million
/// tokens, dated ([`PriceTable::as_of`]). A bare model id is not priced.
///
/// ```
/// use agentrt_provider::anthropic::prices;
///
/// let t = prices();
/// assert_eq!(t.len(), 12);
/// assert_eq!(t.price_for("anthropic:claude-opus-5")?.input_per_mtok_micros, 5_000_000);
/// assert!(t.price_for("claude-opus-5").is_err());
/// assert_eq!(t.as_of().map(|d| d.to_string()).as_deref(), Some("2026-09-29"));
/// # Ok::<(), agentrt_provider::price::PriceError>(())
/// ```
#[must_use]
pub fn prices() -> &'static PriceTable {
    static TABLE: OnceLock<PriceTable> = OnceLock::new();
    // The file is checked by this crate's tests; an unreadable table would
    // price nothing, which refuses every model rather than under-charging.
    TABLE.get_or_init(|| PriceTable::from_json(PRICES_JSON).unwrap_or_default())
}

/// The name an adapter for `model` reports when the configuration sets
/// none, and the key of [`prices`]: `anthropic:<model>`.
///
/// ```
/// assert_eq!(agentrt_provider::anthropic::name("claude-opus-5"), "anthropic:claude-opus-5");
/// ```
#[must_use]
pub fn name(model: &str) -> String {
    format!("{PROVIDER}:{model}")
}

/// The largest output cap a non-streaming request to `model` may ask for.
///
/// ```
/// use agentrt_provider::anthropic::max_tokens_limit;
///
/// assert_eq!(max_tokens_limit("claude-opus-5"), 21_333);
/// assert_eq!(max_tokens_limit("claude-opus-4-1-20250805"), 8192);
/// ```
#[must_use]
pub fn max_tokens_limit(model: &str) -> u64 {
    NON_STREAMING_CAPS
        .iter()
        .find(|(id, _)| *id == model)
        .map_or(MAX_NON_STREAMING_TOKENS, |(_, cap)| {
            (*cap).min(MAX_NON_STREAMING_TOKENS)
        })
}

fn check_max_tokens(model: &str, max_tokens: u64) -> Result<(), ConfigError> {
    let limit = max_tokens_limit(model);
    if max_tokens > limit {
        return Err(ConfigError::MaxTokensTooLarge {
            provider: PROVIDER,
            model: model.to_owned(),
            max_tokens,
            limit,
        });
    }
    Ok(())
}

/// Folds the Messages API's usage into the runtime's three counters. Cache
/// writes have no counter of their own, so they are charged as input at
/// the multiple they are billed at: 2 for a one-hour write, 1.25 (rounded
/// up) for the rest. Cache reads are input and cached input.
///
/// `input = input + read + ceil(1.25 × max(creation − one_hour, 0)) + 2 ×
/// one_hour`, `cached = read`, `output = output`, in `i64`; an overflow or
/// a negative count is unusable.
///
/// ```
/// use agentrt_provider::anthropic::fold_usage;
///
/// let u = fold_usage(100, 7, 2000, 401, 0)?;
/// assert_eq!((u.input_tokens, u.cached_input_tokens, u.output_tokens), (2602, 2000, 7));
/// assert_eq!(fold_usage(100, 0, 0, 501, 100)?.input_tokens, 802);
/// assert!(fold_usage(i64::MAX, 0, 1, 0, 0).is_err());
/// # Ok::<(), agentrt::ModelError>(())
/// ```
///
/// # Errors
///
/// [`ModelError::UnusableUsage`] on overflow or a negative count.
pub fn fold_usage(
    input: i64,
    output: i64,
    cache_read: i64,
    cache_creation: i64,
    one_hour: i64,
) -> Result<Usage, ModelError> {
    if [input, output, cache_read, cache_creation, one_hour]
        .iter()
        .any(|n| *n < 0)
    {
        return Err(ModelError::UnusableUsage {
            message: "a usage count is negative".to_owned(),
        });
    }
    let short = cache_creation.saturating_sub(one_hour).max(0);
    let total = short
        .checked_add(short / 4 + i64::from(short % 4 != 0))
        .and_then(|writes| writes.checked_add(input))
        .and_then(|t| t.checked_add(cache_read))
        .and_then(|t| one_hour.checked_mul(2).and_then(|h| t.checked_add(h)));
    let Some(total) = total else {
        return Err(ModelError::UnusableUsage {
            message: "input tokens with cache reads and writes folded in overflow".to_owned(),
        });
    };
    check_usage(total, output, cache_read)
}

/// How to reach one Claude model. `Debug` and `Serialize` show the key as
/// `[redacted]`.
#[derive(Clone, Default, Serialize)]
pub struct Config {
    /// The model id (`claude-opus-5`). Required.
    pub model: String,
    /// What [`Model::name`] reports; default [`name`]`(model)`, which must
    /// be in [`prices`]. Set it to use a model you price yourself.
    pub name: Option<String>,
    /// The key; unset means `ANTHROPIC_API_KEY`. Building fails without
    /// one.
    pub api_key: Option<ApiKey>,
    /// The API endpoint; default [`DEFAULT_BASE_URL`]. Plain `http` only to
    /// a loopback host.
    pub base_url: Option<String>,
    /// `output_config.effort`, when set.
    pub effort: Option<String>,
    /// The output cap when a request sets none; default
    /// [`DEFAULT_MAX_TOKENS`]. At most [`max_tokens_limit`] of the model.
    pub max_tokens: Option<u64>,
    /// Reduce each tool schema to the strict subset and ask for strict
    /// tool use.
    pub strict: bool,
    /// The content-block name that marks a raw assistant turn; default
    /// [`RAW_ASSISTANT_BLOCK`].
    pub raw_assistant_block: Option<String>,
    /// A client of your own, used as is (you answer for its redirects,
    /// proxies and dialling). Default: redirects off, no proxy, a 15-minute
    /// backstop timeout and, for a key over plain `http`, loopback-only
    /// name resolution.
    #[serde(skip)]
    pub http_client: Option<reqwest::Client>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("anthropic::Config")
            .field("model", &self.model)
            .field("name", &self.name)
            .field("api_key", &self.api_key)
            .field("base_url", &self.base_url)
            .field("effort", &self.effort)
            .field("max_tokens", &self.max_tokens)
            .field("strict", &self.strict)
            .field("raw_assistant_block", &self.raw_assistant_block)
            .field("http_client", &self.http_client.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl Config {
    /// A configuration for `model` with every default.
    pub fn new(model: impl Into<String>) -> Config {
        Config {
            model: model.into(),
            ..Config::default()
        }
    }

    /// Builds the adapter, reading `ANTHROPIC_API_KEY` only when `api_key`
    /// is unset.
    ///
    /// # Errors
    ///
    /// In this order: [`ConfigError::MissingModel`];
    /// [`ConfigError::NoPrice`] for an unpriced model without `name`;
    /// [`ConfigError::MaxTokensTooLarge`]; [`ConfigError::NoApiKey`];
    /// [`ConfigError::Endpoint`] or [`ConfigError::KeyOverPlainHttp`];
    /// [`ConfigError::BadApiKey`]; [`ConfigError::Client`].
    pub fn build(self) -> Result<Anthropic, ConfigError> {
        self.build_with_env(process_env)
    }

    /// [`Config::build`] with the environment read through `env`.
    ///
    /// ```
    /// use agentrt_provider::{ConfigError, anthropic::Config};
    ///
    /// let no_env = |_: &str| None;
    /// assert!(matches!(Config::new("claude-opus-5").build_with_env(no_env),
    ///                  Err(ConfigError::NoApiKey { .. })));
    /// let env = |name: &str| (name == "ANTHROPIC_API_KEY").then(|| "sk-ant-env".to_owned());
    /// assert!(Config::new("claude-opus-5").build_with_env(env).is_ok());
    /// assert!(matches!(Config::new("claude-unknown").build_with_env(env),
    ///                  Err(ConfigError::NoPrice { .. })));
    /// # Ok::<(), ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Config::build`].
    pub fn build_with_env(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Anthropic, ConfigError> {
        if self.model.is_empty() {
            return Err(ConfigError::MissingModel { provider: PROVIDER });
        }
        let name = match self.name.filter(|n| !n.is_empty()) {
            Some(n) => n,
            None => {
                let n = name(&self.model);
                if prices().price_for(&n).is_err() {
                    return Err(ConfigError::NoPrice {
                        provider: PROVIDER,
                        name: n,
                    });
                }
                n
            }
        };
        let max_tokens = self
            .max_tokens
            .filter(|n| *n > 0)
            .unwrap_or(DEFAULT_MAX_TOKENS);
        check_max_tokens(&self.model, max_tokens)?;
        let key = match self.api_key.filter(|k| !k.is_empty()) {
            Some(key) => key,
            None => env(KEY_ENV)
                .map(ApiKey::from)
                .ok_or(ConfigError::NoApiKey {
                    provider: PROVIDER,
                    env: KEY_ENV,
                })?,
        };
        let base = self
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .unwrap_or(DEFAULT_BASE_URL);
        let endpoint = check_endpoint(PROVIDER, base, true)?;
        let url = join(PROVIDER, &endpoint, MESSAGES_PATH)?;
        let mut headers = HeaderMap::new();
        let mut value = HeaderValue::from_str(key.expose())
            .map_err(|_| ConfigError::BadApiKey { provider: PROVIDER })?;
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static(KEY_HEADER), value);
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        let client = client_for(PROVIDER, self.http_client, endpoint.loopback_only)?;
        warn_if_stale();
        Ok(Anthropic {
            name,
            model: self.model,
            base: endpoint.url,
            url,
            key,
            headers,
            effort: self.effort.filter(|e| !e.is_empty()),
            max_tokens,
            strict: self.strict,
            raw_block: self
                .raw_assistant_block
                .filter(|b| !b.is_empty())
                .unwrap_or_else(|| RAW_ASSISTANT_BLOCK.to_owned()),
            transport: Transport {
                provider: PROVIDER,
                client,
            },
        })
    }
}

fn warn_if_stale() {
    let today = jiff::tz::Offset::UTC
        .to_datetime(jiff::Timestamp::now())
        .date();
    let table = prices();
    if table.is_stale(today, PRICES_STALE_AFTER_DAYS) {
        tracing::warn!(
            as_of = %table.as_of().map(|d| d.to_string()).unwrap_or_default(),
            "the shipped Anthropic price table is more than {PRICES_STALE_AFTER_DAYS} days old; check the prices"
        );
    }
}

/// One Claude model. `Debug` and `Display` show the key as `[redacted]`;
/// no plain copy of it is reachable by printing.
#[derive(Clone)]
pub struct Anthropic {
    name: String,
    model: String,
    base: Url,
    url: Url,
    key: ApiKey,
    headers: HeaderMap,
    effort: Option<String>,
    max_tokens: u64,
    strict: bool,
    raw_block: String,
    transport: Transport,
}

impl fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anthropic")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("base_url", &self.base.as_str())
            .field("api_key", &self.key)
            .field("effort", &self.effort)
            .field("max_tokens", &self.max_tokens)
            .field("strict", &self.strict)
            .field("raw_assistant_block", &self.raw_block)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Anthropic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {} (key {})", self.name, self.base, self.key)
    }
}

impl Anthropic {
    /// The model id.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL requests go to.
    #[must_use]
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// Whether tool schemas are reduced to the strict subset.
    #[must_use]
    pub fn strict(&self) -> bool {
        self.strict
    }

    /// The content-block name that marks a raw assistant turn.
    #[must_use]
    pub fn raw_assistant_block(&self) -> &str {
        &self.raw_block
    }

    /// The assistant turn to append to the conversation after `response`:
    /// one text block named [`Anthropic::raw_assistant_block`] whose text is
    /// the provider's message JSON, replayed verbatim by the next request
    /// (thinking blocks, signatures and exact tool inputs included). `None`
    /// when the response carries no raw bytes.
    #[must_use]
    pub fn raw_assistant_message(&self, response: &ModelResponse) -> Option<Message> {
        let raw = response.raw.as_ref()?;
        Some(Message {
            role: Role::Assistant,
            content: vec![raw_assistant_block(&self.raw_block, raw.clone())],
        })
    }

    fn body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        let max_tokens = request
            .max_output_tokens
            .filter(|n| *n > 0)
            .unwrap_or(self.max_tokens);
        check_max_tokens(&self.model, max_tokens).map_err(|e| ModelError::Other {
            message: e.to_string(),
        })?;
        let mut tools = Vec::with_capacity(request.tools.len());
        for tool in &request.tools {
            let schema = if self.strict {
                strict::strict_input_schema(&tool.input_schema).map_err(|e| ModelError::Other {
                    message: format!(
                        "{PROVIDER}: tool {}: strict mode cannot express its schema: {e}",
                        tool.name
                    ),
                })?
            } else {
                strict::input_schema(&tool.input_schema).map_err(|e| ModelError::Other {
                    message: format!("{PROVIDER}: tool {}: {e}", tool.name),
                })?
            };
            tools.push(WireTool {
                name: &tool.name,
                description: &tool.description,
                input_schema: schema,
                strict: self.strict.then_some(true),
            });
        }
        let mut messages = Vec::with_capacity(request.messages.len());
        for message in &request.messages {
            messages.push(self.message(message)?);
        }
        let body = MessagesRequest {
            model: &self.model,
            max_tokens,
            system: if request.system.is_empty() {
                Vec::new()
            } else {
                vec![SystemBlock {
                    kind: "text",
                    text: &request.system,
                }]
            },
            messages,
            tool_choice: (!tools.is_empty()).then_some(ToolChoice {
                kind: "auto",
                disable_parallel_tool_use: true,
            }),
            tools,
            output_config: self.effort.as_deref().map(|effort| OutputConfig { effort }),
        };
        serde_json::to_vec(&body).map_err(|e| ModelError::Other {
            message: format!("{PROVIDER}: cannot encode the request: {e}"),
        })
    }

    /// One runtime message as a Messages API message.
    fn message(&self, message: &Message) -> Result<WireMessage, ModelError> {
        let refuse = |message: String| ModelError::Other {
            message: format!("{PROVIDER}: {message}"),
        };
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        if let [only] = message.content.as_slice()
            && message.role == Role::Assistant
            && only.kind == BlockKind::Text
            && only.name == self.raw_block
        {
            return replay(&only.text).map_err(refuse);
        }
        let mut content = Vec::with_capacity(message.content.len());
        for block in &message.content {
            let encoded = match block.kind {
                BlockKind::Text if !block.name.is_empty() => {
                    return Err(refuse(format!(
                        "unsupported content block type {:?}",
                        truncate(&block.name, MAX_ECHO_BYTES)
                    )));
                }
                BlockKind::Text if block.text.trim().is_empty() => continue,
                BlockKind::Text => to_raw_value(&OutBlock::Text { text: &block.text }),
                BlockKind::ToolUse => {
                    let input = block
                        .input
                        .as_ref()
                        .filter(|c| !c.is_null())
                        .map_or("{}", |c| c.as_str());
                    let input = RawValue::from_string(input.to_owned()).map_err(|e| {
                        refuse(format!("tool use {}: input is not JSON: {e}", block.name))
                    })?;
                    to_raw_value(&OutBlock::ToolUse {
                        id: &block.tool_use_id,
                        name: &block.name,
                        input,
                    })
                }
                BlockKind::ToolResult => to_raw_value(&OutBlock::ToolResult {
                    tool_use_id: &block.tool_use_id,
                    content: &block.content,
                    is_error: block.is_error,
                }),
            };
            content.push(encoded.map_err(|e| refuse(format!("cannot encode a block: {e}")))?);
        }
        if content.is_empty() {
            content.push(no_output().map_err(|e| refuse(e.to_string()))?);
        }
        Ok(WireMessage { role, content })
    }
}

/// A raw assistant block: a text block named `block_type` carrying the
/// provider's message JSON. (The core's [`BlockKind`] has no variant of
/// its own for it yet, so the block's `name` marks it.)
#[must_use]
pub fn raw_assistant_block(block_type: &str, message_json: String) -> ContentBlock {
    ContentBlock {
        name: block_type.to_owned(),
        ..ContentBlock::text(message_json)
    }
}

fn no_output() -> Result<Box<RawValue>, serde_json::Error> {
    to_raw_value(&OutBlock::Text {
        text: "(no output)",
    })
}

/// Rebuilds an assistant message from the provider's own message JSON: its
/// `content` blocks, each reduced to the fields a request takes (response
/// only fields such as `citations: null` dropped), values kept as raw text.
fn replay(message_json: &str) -> Result<WireMessage, String> {
    #[derive(Deserialize)]
    struct Turn {
        content: Vec<BTreeMap<String, Box<RawValue>>>,
    }
    let turn: Turn = serde_json::from_str(message_json)
        .map_err(|e| format!("raw assistant turn does not decode: {e}"))?;
    let mut content = Vec::with_capacity(turn.content.len());
    for mut block in turn.content {
        block.retain(|_, v| v.get().trim() != "null");
        let kind = block
            .get("type")
            .and_then(|t| serde_json::from_str::<String>(t.get()).ok())
            .unwrap_or_default();
        let keep: Option<&[&str]> = match kind.as_str() {
            "text" => Some(&["type", "text", "citations"]),
            "thinking" => Some(&["type", "thinking", "signature"]),
            "redacted_thinking" => Some(&["type", "data"]),
            "tool_use" | "server_tool_use" => Some(&["type", "id", "name", "input"]),
            _ => None,
        };
        if let Some(keep) = keep {
            block.retain(|k, _| keep.contains(&k.as_str()));
        }
        content.push(to_raw_value(&block).map_err(|e| e.to_string())?);
    }
    if content.is_empty() {
        content.push(no_output().map_err(|e| e.to_string())?);
    }
    Ok(WireMessage {
        role: "assistant",
        content,
    })
}

impl Model for Anthropic {
    fn name(&self) -> &str {
        &self.name
    }

    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body = self.body(request)?;
            let raw = self
                .transport
                .post_json(&self.url, self.headers.clone(), body)
                .await?;
            parse_reply(&raw)
        })
    }
}

#[derive(Serialize)]
struct MessagesRequest<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<SystemBlock<'a>>,
    messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<ToolChoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_config: Option<OutputConfig<'a>>,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct ToolChoice {
    #[serde(rename = "type")]
    kind: &'static str,
    disable_parallel_tool_use: bool,
}

#[derive(Serialize)]
struct OutputConfig<'a> {
    effort: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: agentrt::Canonical,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

#[derive(Serialize)]
struct WireMessage {
    role: &'static str,
    content: Vec<Box<RawValue>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Box<RawValue>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a str,
        is_error: bool,
    },
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    output_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    cache_read_input_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    cache_creation_input_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    cache_creation: Option<WireCacheCreation>,
}

#[derive(Deserialize)]
struct WireCacheCreation {
    #[serde(default)]
    ephemeral_1h_input_tokens: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Reply {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    content: Option<Vec<ReplyBlock>>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Deserialize)]
struct ReplyBlock {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

fn stop_reason(given: &str) -> StopReason {
    match given {
        "end_turn" => StopReason::EndTurn,
        "tool_use" => StopReason::ToolUse,
        "max_tokens" => StopReason::MaxTokens,
        "refusal" => StopReason::Refusal,
        "model_context_window_exceeded" => StopReason::ModelContextWindowExceeded,
        other => StopReason::Other(other.to_owned()),
    }
}

/// Maps a 2xx body onto a response: usage first (folded), then the rest.
fn parse_reply(raw: &[u8]) -> Result<ModelResponse, ModelError> {
    let top = top_level(raw).unwrap_or_default();
    let usage = match member::<WireUsage>(&top, "usage")? {
        None => check_usage(0, 0, 0)?,
        Some(u) => fold_usage(
            usage_count("usage.input_tokens", text(&u.input_tokens))?,
            usage_count("usage.output_tokens", text(&u.output_tokens))?,
            usage_count(
                "usage.cache_read_input_tokens",
                text(&u.cache_read_input_tokens),
            )?,
            usage_count(
                "usage.cache_creation_input_tokens",
                text(&u.cache_creation_input_tokens),
            )?,
            usage_count(
                "usage.cache_creation.ephemeral_1h_input_tokens",
                u.cache_creation
                    .as_ref()
                    .and_then(|c| text(&c.ephemeral_1h_input_tokens)),
            )?,
        )?,
    };
    let served = |message: String| ModelError::Served {
        message: format!("{PROVIDER}: {message}"),
        usage,
    };
    let reply: Reply = serde_json::from_slice(raw).map_err(|e| served(format!("decode: {e}")))?;
    if reply.kind.as_deref() == Some("error") || reply.error.is_some() {
        let e = reply.error.unwrap_or(WireError {
            kind: None,
            message: None,
        });
        return Err(served(format!(
            "{}: {}",
            truncate(e.kind.as_deref().unwrap_or("error"), MAX_ECHO_BYTES),
            truncate(e.message.as_deref().unwrap_or_default(), MAX_ECHO_BYTES)
        )));
    }
    let mut texts = Vec::new();
    let mut tool_uses = Vec::new();
    for (i, block) in reply.content.unwrap_or_default().into_iter().enumerate() {
        match block.kind.as_str() {
            "text" => {
                if let Some(t) = block.text.filter(|t| !t.is_empty()) {
                    texts.push(t);
                }
            }
            "tool_use" => {
                let name = block.name.unwrap_or_default();
                let written = block.input.as_deref().map_or("", RawValue::get);
                let Some(args) = object_args(written) else {
                    return Err(served(format!(
                        "tool use {}: input is not a JSON object: {}",
                        truncate(&name, MAX_ECHO_BYTES),
                        truncate(written, MAX_ECHO_BYTES)
                    )));
                };
                tool_uses.push(ToolUse {
                    id: block
                        .id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| tool_use_id(i)),
                    name,
                    args,
                });
            }
            _ => {}
        }
    }
    let stop = reply.stop_reason.as_deref().map(stop_reason);
    if matches!(stop, Some(StopReason::MaxTokens | StopReason::Refusal)) {
        tool_uses.clear();
    }
    Ok(ModelResponse {
        text: texts.join("\n"),
        tool_uses,
        stop_reason: stop,
        usage,
        raw: Some(String::from_utf8_lossy(raw).into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_price_table_parses_with_the_twelve_names() {
        let table = PriceTable::from_json(PRICES_JSON);
        assert!(table.is_ok(), "{table:?}");
        let names: Vec<&str> = prices().names().collect();
        assert_eq!(names.len(), 12);
        for id in [
            "claude-fable-5-1",
            "claude-mythos-5-1",
            "claude-fable-5",
            "claude-mythos-5",
            "claude-opus-5-5",
            "claude-opus-5",
            "claude-opus-4-8",
            "claude-opus-4-7",
            "claude-opus-4-6",
            "claude-sonnet-5",
            "claude-sonnet-4-6",
            "claude-haiku-4-5",
        ] {
            assert!(prices().price_for(&name(id)).is_ok(), "{id}");
            assert!(
                prices().price_for(id).is_err(),
                "bare {id} must be unpriced"
            );
        }
        for (_, cap) in NON_STREAMING_CAPS {
            assert!(*cap <= MAX_NON_STREAMING_TOKENS);
        }
        for (id, _) in NON_STREAMING_CAPS {
            assert!(prices().price_for(&name(id)).is_err(), "{id}");
        }
    }

    #[test]
    fn cache_reads_are_a_fraction_of_input_as_documented() {
        for (name, price) in prices().iter() {
            let divisor = match name {
                "anthropic:claude-fable-5-1" | "anthropic:claude-mythos-5-1" => 40,
                "anthropic:claude-opus-5-5" => 20,
                _ => 10,
            };
            assert_eq!(
                price.cached_input_per_mtok_micros * divisor,
                price.input_per_mtok_micros,
                "{name}"
            );
        }
    }

    #[test]
    fn the_non_streaming_rule_is_the_sdk_rule() {
        // max_tokens × 3600 / 128 000 must not exceed 600 seconds.
        const { assert!(MAX_NON_STREAMING_TOKENS * 3600 <= 600 * 128_000) };
        const { assert!((MAX_NON_STREAMING_TOKENS + 1) * 3600 > 600 * 128_000) };
        assert!(check_max_tokens("claude-opus-5", 21_333).is_ok());
        assert!(check_max_tokens("claude-opus-5", 32_000).is_err());
        assert!(check_max_tokens("claude-opus-4-0", 8192).is_ok());
        assert!(check_max_tokens("claude-opus-4-0", 8193).is_err());
    }

    #[test]
    fn folding_overflow_and_negatives_are_unusable() {
        assert!(matches!(
            fold_usage(0, 0, 0, i64::MAX, 0),
            Err(ModelError::UnusableUsage { .. })
        ));
        assert!(matches!(
            fold_usage(0, 0, 0, 0, i64::MAX / 2 + 1),
            Err(ModelError::UnusableUsage { .. })
        ));
        assert!(matches!(
            fold_usage(-1, 0, 0, 0, 0),
            Err(ModelError::UnusableUsage { .. })
        ));
        // More one-hour writes than writes: the short part floors at 0.
        assert_eq!(fold_usage(1, 0, 0, 10, 20).map(|u| u.input_tokens), Ok(41));
    }

    #[test]
    fn replay_keeps_request_fields_and_exact_inputs() {
        let turn = r#"{"id":"msg_1","type":"message","role":"assistant","model":"m",
            "content":[{"type":"thinking","thinking":"hmm","signature":"c2ln"},
                       {"type":"text","text":"ok","citations":null},
                       {"type":"tool_use","id":"tu_1","name":"t","input":{"n":9007199254740993},"caller":null}],
            "stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}"#;
        let Ok(message) = replay(turn) else {
            panic!("replay failed");
        };
        let text = serde_json::to_string(&message).unwrap_or_default();
        assert_eq!(
            text,
            r#"{"role":"assistant","content":[{"signature":"c2ln","thinking":"hmm","type":"thinking"},{"text":"ok","type":"text"},{"id":"tu_1","input":{"n":9007199254740993},"name":"t","type":"tool_use"}]}"#
        );
        assert!(replay("not json").is_err());
        let empty =
            replay(r#"{"content":[]}"#).map(|m| serde_json::to_string(&m).unwrap_or_default());
        assert_eq!(
            empty.as_deref(),
            Ok(r#"{"role":"assistant","content":[{"type":"text","text":"(no output)"}]}"#)
        );
    }
}
