//! Any OpenAI-compatible chat-completions endpoint: `POST
//! <base>/chat/completions`, no streaming, temperature 0 (feature
//! `openai`).
//!
//! The request is built from `async-openai`'s chat types
//! ([`CreateChatCompletionRequest`]) and sent with this crate's own
//! `reqwest` transport. `async-openai` is compiled with its types only
//! (`chat-completion-types`): its client, which retries on its own and reads
//! `OPENAI_BASE_URL`, `OPENAI_ORG_ID` and `OPENAI_PROJECT_ID`, is not in
//! the build at all. The reply is decoded leniently (an unknown
//! `finish_reason` passes through, counts are checked as literals) so a
//! local server's off-spec JSON is still usable.
//!
//! The key: the configured `api_key`, else `OPENAI_API_KEY` **only** when
//! the base URL is [`DEFAULT_BASE_URL`] (the environment's key is
//! OpenAI's and never goes to another server). No key is fine for a local
//! server; with one, plain `http` is refused unless the host is loopback.
//!
//! ```no_run
//! use agentrt_provider::{ApiKey, openai};
//!
//! # fn run() -> Result<(), agentrt_provider::ConfigError> {
//! // A local server: no key, any base URL.
//! let local = openai::Config {
//!     base_url: Some("http://127.0.0.1:8080/v1".into()),
//!     ..openai::Config::new("qwen3")
//! }
//! .build()?;
//! // OpenAI itself: the key from the configuration, or OPENAI_API_KEY.
//! let hosted = openai::Config { api_key: Some(ApiKey::new("sk-…")), ..openai::Config::new("gpt-x") }.build()?;
//! assert_eq!(format!("{hosted:?}").contains("sk-"), false);
//! # let _ = local; Ok(()) }
//! ```
//!
//! [`CreateChatCompletionRequest`]: async_openai::types::chat::CreateChatCompletionRequest

use std::fmt;

use agentrt::model::BoxFuture;
use agentrt::{
    Model, ModelError, ModelRequest, ModelResponse, llm::BlockKind, llm::Message, llm::Role,
    llm::StopReason, llm::ToolUse,
};
use async_openai::types::chat::{
    ChatCompletionMessageToolCall, ChatCompletionMessageToolCalls,
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestAssistantMessageContent,
    ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestToolMessage,
    ChatCompletionRequestToolMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionTool, ChatCompletionToolChoiceOption,
    ChatCompletionTools, CreateChatCompletionRequest, FunctionCall, FunctionObject,
    ToolChoiceOptions,
};
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::{ConfigError, process_env};
use crate::http::{Transport, check_endpoint, client_for, join};
use crate::key::ApiKey;
use crate::price::{PriceTable, free as free_names};
use crate::shared::{MAX_ECHO_BYTES, object_args, tool_use_id, truncate};
use crate::usage::{check_usage, member, text, top_level, usage_count};

const PROVIDER: &str = "openai";

/// OpenAI's own endpoint, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The one environment variable this adapter reads, and only for
/// [`DEFAULT_BASE_URL`].
pub const KEY_ENV: &str = "OPENAI_API_KEY";

/// The name an adapter for `model` reports when the configuration sets
/// none: `openai:<model>`.
///
/// ```
/// assert_eq!(agentrt_provider::openai::name("gpt-x"), "openai:gpt-x");
/// ```
#[must_use]
pub fn name(model: &str) -> String {
    format!("{PROVIDER}:{model}")
}

/// How to reach one model on one OpenAI-compatible endpoint. `Debug` and
/// `Serialize` show the key as `[redacted]`.
#[derive(Clone, Default, Serialize)]
pub struct Config {
    /// The model id. Required.
    pub model: String,
    /// What [`Model::name`] reports; default [`name`]`(model)`.
    pub name: Option<String>,
    /// The endpoint `/chat/completions` is appended to; default
    /// [`DEFAULT_BASE_URL`].
    pub base_url: Option<String>,
    /// Sent as `Authorization: Bearer <key>`; unset means `OPENAI_API_KEY`
    /// for the default base URL and no key for any other.
    pub api_key: Option<ApiKey>,
    /// A client of your own, used as is (you answer for its redirects,
    /// proxies and dialling). Default: a client with redirects off, no
    /// proxy, a 15-minute backstop timeout and, for a key over plain
    /// `http`, a resolver that yields loopback addresses only.
    #[serde(skip)]
    pub http_client: Option<reqwest::Client>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("openai::Config")
            .field("model", &self.model)
            .field("name", &self.name)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
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

    /// Builds the adapter, reading `OPENAI_API_KEY` only when `api_key` is
    /// unset and the base URL is the default.
    ///
    /// # Errors
    ///
    /// [`ConfigError::MissingModel`], [`ConfigError::Endpoint`],
    /// [`ConfigError::KeyOverPlainHttp`], [`ConfigError::BadApiKey`] or
    /// [`ConfigError::Client`].
    pub fn build(self) -> Result<OpenAi, ConfigError> {
        self.build_with_env(process_env)
    }

    /// [`Config::build`] with the environment read through `env`.
    ///
    /// ```
    /// use agentrt_provider::openai::Config;
    ///
    /// let env = |name: &str| (name == "OPENAI_API_KEY").then(|| "sk-env".to_owned());
    /// let hosted = Config::new("gpt-x").build_with_env(env)?;
    /// assert!(hosted.has_key());
    /// let local = Config { base_url: Some("http://127.0.0.1:1/v1".into()), ..Config::new("q") }
    ///     .build_with_env(env)?;
    /// assert!(!local.has_key()); // never sent to another server
    /// # Ok::<(), agentrt_provider::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Config::build`].
    pub fn build_with_env(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenAi, ConfigError> {
        if self.model.is_empty() {
            return Err(ConfigError::MissingModel { provider: PROVIDER });
        }
        let base = self
            .base_url
            .as_deref()
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .unwrap_or(DEFAULT_BASE_URL)
            .trim_end_matches('/')
            .to_owned();
        let key = match self.api_key.filter(|k| !k.is_empty()) {
            Some(key) => key,
            None if base == DEFAULT_BASE_URL => env(KEY_ENV).map(ApiKey::from).unwrap_or_default(),
            None => ApiKey::default(),
        };
        let endpoint = check_endpoint(PROVIDER, &base, !key.is_empty())?;
        let url = join(PROVIDER, &endpoint, "/chat/completions")?;
        let mut headers = HeaderMap::new();
        if !key.is_empty() {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
                .map_err(|_| ConfigError::BadApiKey { provider: PROVIDER })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let client = client_for(PROVIDER, self.http_client, endpoint.loopback_only)?;
        Ok(OpenAi {
            name: self
                .name
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| name(&self.model)),
            model: self.model,
            base: endpoint.url,
            url,
            key,
            headers,
            transport: Transport {
                provider: PROVIDER,
                client,
            },
        })
    }
}

/// One model on one OpenAI-compatible endpoint. `Debug` and `Display` show
/// the key as `[redacted]`.
#[derive(Clone)]
pub struct OpenAi {
    name: String,
    model: String,
    base: Url,
    url: Url,
    key: ApiKey,
    headers: HeaderMap,
    transport: Transport,
}

impl fmt::Debug for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAi")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("base_url", &self.base.as_str())
            .field("api_key", &self.key)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for OpenAi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {} (key {})", self.name, self.base, self.key)
    }
}

impl OpenAi {
    /// The model id.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The base URL requests go to (trailing `/` trimmed).
    #[must_use]
    pub fn base_url(&self) -> &str {
        self.base.as_str()
    }

    /// Whether requests carry a key.
    #[must_use]
    pub fn has_key(&self) -> bool {
        !self.key.is_empty()
    }

    /// The request body as `async-openai`'s type, before it is encoded;
    /// fails for an output cap beyond `u32`.
    #[allow(deprecated)] // `max_tokens` is what OpenAI-compatible servers read
    fn request(&self, request: &ModelRequest) -> Result<CreateChatCompletionRequest, ModelError> {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(ChatCompletionRequestMessage::System(
                ChatCompletionRequestSystemMessage {
                    content: ChatCompletionRequestSystemMessageContent::Text(
                        request.system.clone(),
                    ),
                    name: None,
                },
            ));
        }
        for message in &request.messages {
            convert(message, &mut messages);
        }
        let tools: Vec<ChatCompletionTools> = request
            .tools
            .iter()
            .map(|t| {
                ChatCompletionTools::Function(ChatCompletionTool {
                    function: FunctionObject {
                        name: t.name.clone(),
                        description: Some(t.description.clone()),
                        parameters: Some(t.input_schema.to_value()),
                        strict: None,
                    },
                })
            })
            .collect();
        let with_tools = !tools.is_empty();
        let max_tokens = match request.max_output_tokens.filter(|n| *n > 0) {
            None => None,
            Some(n) => Some(u32::try_from(n).map_err(|_| ModelError::Other {
                message: format!("{PROVIDER}: max_output_tokens {n} does not fit the request"),
            })?),
        };
        Ok(CreateChatCompletionRequest {
            model: self.model.clone(),
            messages,
            tools: with_tools.then_some(tools),
            tool_choice: with_tools.then_some(ChatCompletionToolChoiceOption::Mode(
                ToolChoiceOptions::Auto,
            )),
            parallel_tool_calls: with_tools.then_some(false),
            temperature: Some(0.0),
            max_tokens,
            ..CreateChatCompletionRequest::default()
        })
    }
}

/// A price table that records each adapter's model as free, under the
/// name it reports (for a local server).
pub fn free<'a>(models: impl IntoIterator<Item = &'a OpenAi>) -> PriceTable {
    free_names(models.into_iter().map(|m| m.name.clone()))
}

impl Model for OpenAi {
    fn name(&self) -> &str {
        &self.name
    }

    fn generate<'a>(
        &'a self,
        request: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async move {
            let body =
                serde_json::to_vec(&self.request(request)?).map_err(|e| ModelError::Other {
                    message: format!("{PROVIDER}: cannot encode the request: {e}"),
                })?;
            let raw = self
                .transport
                .post_json(&self.url, self.headers.clone(), body)
                .await?;
            parse_reply(&raw)
        })
    }
}

/// One runtime message as chat-completions messages. An assistant turn is
/// one message whose `content` is always present (empty allowed). A user
/// turn gives one `tool` message per tool result **first** (OpenAI requires
/// them right after the assistant turn that made the calls), then a `user`
/// message when it has text.
fn convert(message: &Message, out: &mut Vec<ChatCompletionRequestMessage>) {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for block in &message.content {
        match block.kind {
            BlockKind::Text => text.push_str(&block.text),
            BlockKind::ToolUse => {
                let arguments = block
                    .input
                    .as_ref()
                    .filter(|c| !c.is_null())
                    .map_or_else(|| "{}".to_owned(), |c| c.as_str().to_owned());
                calls.push(ChatCompletionMessageToolCalls::Function(
                    ChatCompletionMessageToolCall {
                        id: block.tool_use_id.clone(),
                        function: FunctionCall {
                            name: block.name.clone(),
                            arguments,
                        },
                    },
                ));
            }
            BlockKind::ToolResult => results.push(ChatCompletionRequestMessage::Tool(
                ChatCompletionRequestToolMessage {
                    content: ChatCompletionRequestToolMessageContent::Text(block.content.clone()),
                    tool_call_id: block.tool_use_id.clone(),
                },
            )),
        }
    }
    match message.role {
        Role::Assistant => out.push(ChatCompletionRequestMessage::Assistant(
            ChatCompletionRequestAssistantMessage {
                content: Some(ChatCompletionRequestAssistantMessageContent::Text(text)),
                tool_calls: (!calls.is_empty()).then_some(calls),
                ..ChatCompletionRequestAssistantMessage::default()
            },
        )),
        Role::User => {
            out.extend(results);
            if !text.is_empty() {
                out.push(ChatCompletionRequestMessage::User(
                    ChatCompletionRequestUserMessage {
                        content: ChatCompletionRequestUserMessageContent::Text(text),
                        name: None,
                    },
                ));
            }
        }
    }
}

#[derive(Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    completion_tokens: Option<Box<RawValue>>,
    #[serde(default)]
    prompt_tokens_details: Option<WireUsageDetails>,
}

#[derive(Deserialize)]
struct WireUsageDetails {
    #[serde(default)]
    cached_tokens: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct ReplyMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ReplyCall>>,
}

#[derive(Deserialize)]
struct ReplyCall {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<ReplyFunction>,
}

#[derive(Deserialize)]
struct ReplyFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// The arguments text of a call: a JSON string's content (the documented
/// form), or an object as written (some local servers); `None` for
/// anything else.
fn arguments_text(raw: Option<&RawValue>) -> Option<String> {
    let Some(raw) = raw else {
        return Some(String::new());
    };
    let text = raw.get().trim();
    if text.starts_with('"') {
        serde_json::from_str::<String>(text).ok()
    } else if text == "null" || text.starts_with('{') {
        Some(text.to_owned())
    } else {
        None
    }
}

/// Maps a 2xx body onto a response: usage first, then the rest.
fn parse_reply(raw: &[u8]) -> Result<ModelResponse, ModelError> {
    let top = top_level(raw).unwrap_or_default();
    let usage = match member::<WireUsage>(&top, "usage")? {
        None => check_usage(0, 0, 0)?,
        Some(u) => check_usage(
            usage_count("usage.prompt_tokens", text(&u.prompt_tokens))?,
            usage_count("usage.completion_tokens", text(&u.completion_tokens))?,
            usage_count(
                "usage.prompt_tokens_details.cached_tokens",
                u.prompt_tokens_details
                    .as_ref()
                    .and_then(|d| text(&d.cached_tokens)),
            )?,
        )?,
    };
    let served = |message: String| ModelError::Served {
        message: format!("{PROVIDER}: {message}"),
        usage,
    };
    let reply: ChatResponse =
        serde_json::from_slice(raw).map_err(|e| served(format!("decode: {e}")))?;
    if let Some(error) = reply.error.as_deref().filter(|e| e.get().trim() != "null") {
        let shown = match serde_json::from_str::<WireError>(error.get()) {
            Ok(e) => format!(
                "{}: {}",
                truncate(e.kind.as_deref().unwrap_or("error"), MAX_ECHO_BYTES),
                truncate(e.message.as_deref().unwrap_or_default(), MAX_ECHO_BYTES)
            ),
            Err(_) => truncate(error.get(), MAX_ECHO_BYTES),
        };
        return Err(served(shown));
    }
    let Some(choice) = reply.choices.unwrap_or_default().into_iter().next() else {
        return Err(served("the response carried no choices".to_owned()));
    };
    let message = choice.message.unwrap_or(ReplyMessage {
        content: None,
        tool_calls: None,
    });
    let mut tool_uses = Vec::new();
    for (i, call) in message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        let function = call.function.unwrap_or(ReplyFunction {
            name: None,
            arguments: None,
        });
        let name = function.name.unwrap_or_default();
        let written = arguments_text(function.arguments.as_deref());
        let Some(args) = written.as_deref().and_then(object_args) else {
            let shown = function.arguments.as_deref().map_or("", RawValue::get);
            return Err(served(format!(
                "tool call {}: arguments are not a JSON object: {}",
                truncate(&name, MAX_ECHO_BYTES),
                truncate(shown, MAX_ECHO_BYTES)
            )));
        };
        tool_uses.push(ToolUse {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| tool_use_id(i)),
            name,
            args,
        });
    }
    let stop = match choice.finish_reason.as_deref().unwrap_or_default() {
        "tool_calls" => StopReason::ToolUse,
        "stop" => StopReason::EndTurn,
        "length" => StopReason::MaxTokens,
        "content_filter" => StopReason::Refusal,
        // Some servers answer a tool call with no finish reason at all.
        "" if !tool_uses.is_empty() => StopReason::ToolUse,
        "" => StopReason::EndTurn,
        other => StopReason::Other(other.to_owned()),
    };
    if matches!(stop, StopReason::MaxTokens | StopReason::Refusal) {
        tool_uses.clear();
    }
    Ok(ModelResponse {
        text: message.content.unwrap_or_default(),
        tool_uses,
        stop_reason: Some(stop),
        usage,
        raw: Some(String::from_utf8_lossy(raw).into_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stop(body: &str) -> Result<(Option<StopReason>, usize), ModelError> {
        parse_reply(body.as_bytes()).map(|r| (r.stop_reason, r.tool_uses.len()))
    }

    #[test]
    fn finish_reasons_map_per_the_spec() {
        let call = r#""tool_calls":[{"id":"c1","type":"function","function":{"name":"t","arguments":"{}"}}]"#;
        let with = |finish: &str, calls: bool| {
            let finish = if finish.is_empty() {
                String::new()
            } else {
                format!(r#","finish_reason":"{finish}""#)
            };
            let calls = if calls {
                format!(",{call}")
            } else {
                String::new()
            };
            format!(r#"{{"choices":[{{"message":{{"content":"x"{calls}}}{finish}}}]}}"#)
        };
        assert_eq!(
            stop(&with("tool_calls", true)),
            Ok((Some(StopReason::ToolUse), 1))
        );
        assert_eq!(
            stop(&with("stop", false)),
            Ok((Some(StopReason::EndTurn), 0))
        );
        assert_eq!(
            stop(&with("length", true)),
            Ok((Some(StopReason::MaxTokens), 0))
        );
        assert_eq!(
            stop(&with("content_filter", true)),
            Ok((Some(StopReason::Refusal), 0))
        );
        assert_eq!(stop(&with("", true)), Ok((Some(StopReason::ToolUse), 1)));
        assert_eq!(stop(&with("", false)), Ok((Some(StopReason::EndTurn), 0)));
        assert_eq!(
            stop(&with("eos", false)),
            Ok((Some(StopReason::Other("eos".into())), 0))
        );
    }

    #[test]
    fn arguments_arrive_as_a_json_string_that_must_hold_an_object() {
        assert_eq!(arguments_text(None).as_deref(), Some(""));
        let raw = |s: &str| RawValue::from_string(s.to_owned()).ok();
        let got = |s: &str| arguments_text(raw(s).as_deref());
        assert_eq!(got(r#""{\"a\":1}""#).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(got(r#"{"a":1}"#).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(got("null").as_deref(), Some("null"));
        assert_eq!(got("[1]"), None);
        assert_eq!(got("1"), None);
    }
}
