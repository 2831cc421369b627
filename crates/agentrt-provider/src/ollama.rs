//! Ollama's native chat API: `POST <host>/api/chat`, no streaming, tool
//! calling, temperature 0 (feature `ollama`).
//!
//! The host is resolved once, when the adapter is built: the configured
//! `host`, else `OLLAMA_HOST`, else [`DEFAULT_HOST`]. Nothing else is read
//! from the environment, and no key is ever sent.
//!
//! ```no_run
//! use agentrt::{llm::ContentBlock, llm::Message, Model, ModelRequest, llm::Role};
//! use agentrt_provider::ollama;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ollama::Config::new("qwen3:30b-a3b").build()?;
//! assert_eq!(model.name(), "ollama:qwen3:30b-a3b");
//! let reply = model.generate(&ModelRequest {
//!     system: "Be brief.".into(),
//!     messages: vec![Message { role: Role::User, content: vec![ContentBlock::text("hi")] }],
//!     tools: vec![],
//!     max_output_tokens: Some(256),
//! }).await?;
//! println!("{}", reply.text);
//! let prices = ollama::free([&model]); // a local model costs nothing
//! # let _ = prices; Ok(()) }
//! ```

use std::fmt;

use agentrt::model::BoxFuture;
use agentrt::{
    Model, ModelError, ModelRequest, ModelResponse, llm::BlockKind, llm::Message, llm::Role,
    llm::StopReason, llm::ToolUse,
};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::config::{ConfigError, EndpointProblem, process_env};
use crate::http::{Transport, client_for};
use crate::price::{PriceTable, free as free_names};
use crate::shared::{MAX_ECHO_BYTES, object_args, tool_use_id, truncate};
use crate::usage::{check_usage, top_level, usage_count};

const PROVIDER: &str = "ollama";

/// Where an Ollama server listens when neither the configuration nor
/// `OLLAMA_HOST` says otherwise.
pub const DEFAULT_HOST: &str = "127.0.0.1:11434";

/// The context window asked for when the configuration says 0: Ollama's own
/// default is far smaller than a tool-using agent's context, and a server
/// that silently truncates the prompt is worse than one that refuses it.
pub const DEFAULT_NUM_CTX: u64 = 32768;

/// The one environment variable this adapter reads.
pub const HOST_ENV: &str = "OLLAMA_HOST";

/// The name an adapter for `model` reports when the configuration sets
/// none: `ollama:<model>`.
///
/// ```
/// assert_eq!(agentrt_provider::ollama::name("llama3"), "ollama:llama3");
/// ```
#[must_use]
pub fn name(model: &str) -> String {
    format!("{PROVIDER}:{model}")
}

/// How to reach one model on one Ollama server.
#[derive(Clone, Default, Serialize)]
pub struct Config {
    /// The Ollama model id (`qwen3:30b-a3b`). Required.
    pub model: String,
    /// What [`Model::name`] reports; default [`name`]`(model)`.
    pub name: Option<String>,
    /// The server, with or without an `http`/`https` scheme; default
    /// `OLLAMA_HOST`, then [`DEFAULT_HOST`].
    pub host: Option<String>,
    /// Leave the model's thinking mode on (default off: tool-calling
    /// models are steadier without it).
    pub think: bool,
    /// The context window asked for; 0 means [`DEFAULT_NUM_CTX`].
    pub num_ctx: u64,
    /// A client of your own, used as is (you answer for its redirects and
    /// proxies). Default: a client with redirects off, no proxy and a
    /// 15-minute backstop timeout.
    #[serde(skip)]
    pub http_client: Option<reqwest::Client>,
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ollama::Config")
            .field("model", &self.model)
            .field("name", &self.name)
            .field("host", &self.host)
            .field("think", &self.think)
            .field("num_ctx", &self.num_ctx)
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

    /// Builds the adapter, reading `OLLAMA_HOST` only when `host` is unset.
    ///
    /// # Errors
    ///
    /// [`ConfigError::MissingModel`], [`ConfigError::Endpoint`] for a host
    /// that is not an `http`/`https` server address, or
    /// [`ConfigError::Client`].
    pub fn build(self) -> Result<Ollama, ConfigError> {
        self.build_with_env(process_env)
    }

    /// [`Config::build`] with the environment read through `env`.
    ///
    /// ```
    /// use agentrt_provider::ollama::Config;
    ///
    /// let m = Config::new("llama3").build_with_env(|name| {
    ///     (name == "OLLAMA_HOST").then(|| "gpu-box:11434".to_owned())
    /// })?;
    /// assert_eq!(m.host(), "http://gpu-box:11434");
    /// # Ok::<(), agentrt_provider::ConfigError>(())
    /// ```
    ///
    /// # Errors
    ///
    /// As [`Config::build`].
    pub fn build_with_env(
        self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Ollama, ConfigError> {
        if self.model.is_empty() {
            return Err(ConfigError::MissingModel { provider: PROVIDER });
        }
        let host = resolve_host(self.host.as_deref(), env)?;
        let url = Url::parse(&format!("{host}/api/chat")).map_err(|_| ConfigError::Endpoint {
            provider: PROVIDER,
            shown: host.clone(),
            problem: EndpointProblem::NotAUrl,
        })?;
        let client = client_for(PROVIDER, self.http_client, false)?;
        Ok(Ollama {
            name: self
                .name
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| name(&self.model)),
            model: self.model,
            host,
            url,
            think: self.think,
            num_ctx: if self.num_ctx == 0 {
                DEFAULT_NUM_CTX
            } else {
                self.num_ctx
            },
            transport: Transport {
                provider: PROVIDER,
                client,
            },
        })
    }
}

/// The server a configured host resolves to (the argument, else
/// `OLLAMA_HOST`, else [`DEFAULT_HOST`], with `http://` added when no scheme
/// is given), or `None` when the adapter would refuse it. For a consumer
/// that probes the server before a run.
///
/// ```
/// use agentrt_provider::ollama::resolved_host;
///
/// assert_eq!(resolved_host(Some("localhost:11434/")).as_deref(), Some("http://localhost:11434"));
/// assert_eq!(resolved_host(Some("ftp://localhost")), None);
/// ```
#[must_use]
pub fn resolved_host(host: Option<&str>) -> Option<String> {
    resolve_host(host, process_env).ok()
}

/// [`resolved_host`] with the environment read through `env`, and the
/// reason for a refusal.
///
/// # Errors
///
/// [`ConfigError::Endpoint`]: not a URL, a scheme other than `http` or
/// `https`, user-info, a query, a fragment, or no host.
pub fn resolve_host(
    host: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<String, ConfigError> {
    let given = host
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            env(HOST_ENV)
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_HOST.to_owned());
    let with_scheme = if given.contains("://") {
        given
    } else {
        format!("http://{given}")
    };
    let refuse = |problem| ConfigError::Endpoint {
        provider: PROVIDER,
        shown: if with_scheme.contains('@') {
            "(not shown: it may carry user-info)".to_owned()
        } else {
            format!("{:?}", truncate(&with_scheme, 200))
        },
        problem,
    };
    let url = Url::parse(&with_scheme).map_err(|_| refuse(EndpointProblem::NotAUrl))?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(refuse(EndpointProblem::Scheme {
            scheme: url.scheme().to_owned(),
        }));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse(EndpointProblem::NoHost));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(refuse(EndpointProblem::UserInfo));
    }
    if url.query().is_some() {
        return Err(refuse(EndpointProblem::Query));
    }
    if url.fragment().is_some() {
        return Err(refuse(EndpointProblem::Fragment));
    }
    Ok(with_scheme.trim_end_matches('/').to_owned())
}

/// One model on one Ollama server.
#[derive(Clone)]
pub struct Ollama {
    name: String,
    model: String,
    host: String,
    url: Url,
    think: bool,
    num_ctx: u64,
    transport: Transport,
}

impl fmt::Debug for Ollama {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ollama")
            .field("name", &self.name)
            .field("model", &self.model)
            .field("host", &self.host)
            .field("think", &self.think)
            .field("num_ctx", &self.num_ctx)
            .finish_non_exhaustive()
    }
}

impl fmt::Display for Ollama {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at {}", self.name, self.host)
    }
}

impl Ollama {
    /// The resolved server (`http://127.0.0.1:11434`).
    #[must_use]
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The Ollama model id.
    #[must_use]
    pub fn model(&self) -> &str {
        &self.model
    }

    fn body(&self, request: &ModelRequest) -> Result<Vec<u8>, ModelError> {
        let mut messages = Vec::new();
        if !request.system.is_empty() {
            messages.push(WireMessage::text("system", request.system.clone()));
        }
        for message in &request.messages {
            convert(message, &mut messages)?;
        }
        let tools = request
            .tools
            .iter()
            .map(|t| WireTool {
                kind: "function",
                function: WireFunction {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.input_schema,
                },
            })
            .collect();
        let body = ChatRequest {
            model: &self.model,
            messages,
            tools,
            stream: false,
            think: self.think,
            options: Options {
                temperature: 0,
                num_ctx: self.num_ctx,
                num_predict: request.max_output_tokens.filter(|n| *n > 0),
            },
        };
        serde_json::to_vec(&body).map_err(|e| ModelError::Other {
            message: format!("{PROVIDER}: cannot encode the request: {e}"),
        })
    }
}

/// A price table that records each adapter's model as free, under the
/// name it reports (so a `name` override and the table stay in step).
pub fn free<'a>(models: impl IntoIterator<Item = &'a Ollama>) -> PriceTable {
    free_names(models.into_iter().map(|m| m.name.clone()))
}

impl Model for Ollama {
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
                .post_json(&self.url, reqwest::header::HeaderMap::new(), body)
                .await?;
            parse_reply(&raw)
        })
    }
}

#[derive(Serialize)]
struct ChatRequest<'a> {
    model: &'a str,
    messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    stream: bool,
    think: bool,
    options: Options,
}

#[derive(Serialize)]
struct Options {
    temperature: u8,
    num_ctx: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_predict: Option<u64>,
}

#[derive(Serialize)]
struct WireMessage {
    role: &'static str,
    content: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireCall>,
    #[serde(skip_serializing_if = "String::is_empty")]
    tool_name: String,
}

impl WireMessage {
    fn text(role: &'static str, content: String) -> WireMessage {
        WireMessage {
            role,
            content,
            tool_calls: Vec::new(),
            tool_name: String::new(),
        }
    }
}

#[derive(Serialize)]
struct WireCall {
    #[serde(skip_serializing_if = "String::is_empty")]
    id: String,
    function: WireCallFunction,
}

#[derive(Serialize)]
struct WireCallFunction {
    name: String,
    arguments: Box<RawValue>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a agentrt::Canonical,
}

/// One runtime message as Ollama messages: an assistant turn is one
/// message (its text and its tool calls); a user turn is a `user` message
/// when it has text, then one `tool` message per tool result.
fn convert(message: &Message, out: &mut Vec<WireMessage>) -> Result<(), ModelError> {
    let mut text = String::new();
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for block in &message.content {
        match block.kind {
            BlockKind::Text => text.push_str(&block.text),
            BlockKind::ToolUse => {
                let input = block
                    .input
                    .as_ref()
                    .filter(|c| !c.is_null())
                    .map_or("{}", |c| c.as_str());
                let arguments =
                    RawValue::from_string(input.to_owned()).map_err(|e| ModelError::Other {
                        message: format!("{PROVIDER}: tool use {}: input: {e}", block.name),
                    })?;
                calls.push(WireCall {
                    id: block.tool_use_id.clone(),
                    function: WireCallFunction {
                        name: block.name.clone(),
                        arguments,
                    },
                });
            }
            BlockKind::ToolResult => results.push(WireMessage {
                role: "tool",
                content: block.content.clone(),
                tool_calls: Vec::new(),
                tool_name: block.name.clone(),
            }),
        }
    }
    match message.role {
        Role::Assistant => out.push(WireMessage {
            role: "assistant",
            content: text,
            tool_calls: calls,
            tool_name: String::new(),
        }),
        Role::User => {
            if !text.is_empty() {
                out.push(WireMessage::text("user", text));
            }
            out.extend(results);
        }
    }
    Ok(())
}

#[derive(Deserialize)]
struct ChatResponse {
    #[serde(default)]
    message: Option<ReplyMessage>,
    #[serde(default)]
    done_reason: Option<String>,
    #[serde(default)]
    error: Option<Box<RawValue>>,
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
    function: ReplyFunction,
}

#[derive(Deserialize)]
struct ReplyFunction {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: Option<Box<RawValue>>,
}

/// Maps a 2xx body onto a response: usage first (`prompt_eval_count`,
/// `eval_count`), then the rest.
fn parse_reply(raw: &[u8]) -> Result<ModelResponse, ModelError> {
    let top = top_level(raw).unwrap_or_default();
    let counted = |key: &str| usage_count(key, top.get(key).map(|r| r.get()));
    let usage = check_usage(counted("prompt_eval_count")?, counted("eval_count")?, 0)?;
    let served = |message: String| ModelError::Served {
        message: format!("{PROVIDER}: {message}"),
        usage,
    };
    let reply: ChatResponse =
        serde_json::from_slice(raw).map_err(|e| served(format!("decode: {e}")))?;
    if let Some(error) = reply.error.as_deref() {
        let text =
            serde_json::from_str::<String>(error.get()).unwrap_or_else(|_| error.get().to_owned());
        if error.get() != "null" && !text.is_empty() {
            return Err(served(truncate(&text, MAX_ECHO_BYTES)));
        }
    }
    let message = reply.message.unwrap_or(ReplyMessage {
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
        let written = call.function.arguments.as_deref().map_or("", RawValue::get);
        let Some(args) = object_args(written) else {
            return Err(served(format!(
                "tool call {}: arguments are not a JSON object: {}",
                truncate(&call.function.name, MAX_ECHO_BYTES),
                truncate(written, MAX_ECHO_BYTES)
            )));
        };
        tool_uses.push(ToolUse {
            id: call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| tool_use_id(i)),
            name: call.function.name,
            args,
        });
    }
    let done = reply.done_reason.unwrap_or_default();
    let stop = if done == "length" {
        tool_uses.clear();
        StopReason::MaxTokens
    } else if !tool_uses.is_empty() {
        StopReason::ToolUse
    } else if done.is_empty() || done == "stop" {
        StopReason::EndTurn
    } else {
        StopReason::Other(done)
    };
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

    #[test]
    fn host_resolution_follows_the_precedence_and_refusals() {
        let env = |name: &str| (name == HOST_ENV).then(|| "envhost:1".to_owned());
        let none = |_: &str| None;
        assert_eq!(
            resolve_host(Some("cfg:2"), env).ok().as_deref(),
            Some("http://cfg:2")
        );
        assert_eq!(
            resolve_host(None, env).ok().as_deref(),
            Some("http://envhost:1")
        );
        assert_eq!(
            resolve_host(Some(""), env).ok().as_deref(),
            Some("http://envhost:1")
        );
        assert_eq!(
            resolve_host(None, none).ok().as_deref(),
            Some("http://127.0.0.1:11434")
        );
        assert_eq!(
            resolve_host(Some("https://h:3/x/"), none).ok().as_deref(),
            Some("https://h:3/x")
        );
        for refused in [
            "ftp://h",
            "http://u:p@h",
            "http://h?q=1",
            "http://h#f",
            "http://",
            "file:///etc",
        ] {
            assert!(resolve_host(Some(refused), none).is_err(), "{refused}");
        }
    }

    #[test]
    fn stop_reasons_map_per_the_spec() {
        let stop =
            |body: &str| parse_reply(body.as_bytes()).map(|r| (r.stop_reason, r.tool_uses.len()));
        let call = r#""tool_calls":[{"function":{"name":"t","arguments":{}}}]"#;
        assert_eq!(
            stop(&format!(
                r#"{{"message":{{"content":"",{call}}},"done_reason":"length"}}"#
            )),
            Ok((Some(StopReason::MaxTokens), 0))
        );
        assert_eq!(
            stop(&format!(
                r#"{{"message":{{"content":"",{call}}},"done_reason":"stop"}}"#
            )),
            Ok((Some(StopReason::ToolUse), 1))
        );
        assert_eq!(
            stop(r#"{"message":{"content":"x"},"done_reason":"stop"}"#),
            Ok((Some(StopReason::EndTurn), 0))
        );
        assert_eq!(
            stop(r#"{"message":{"content":"x"}}"#),
            Ok((Some(StopReason::EndTurn), 0))
        );
        assert_eq!(
            stop(r#"{"message":{"content":"x"},"done_reason":"unload"}"#),
            Ok((Some(StopReason::Other("unload".into())), 0))
        );
    }
}
