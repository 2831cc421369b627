//! The OpenAI-compatible adapter against a fake `/chat/completions`
//! server.

#![cfg(feature = "openai")]

mod common;

use std::sync::Mutex;

use agentrt::{
    Canonical, Model, ModelError, ModelRequest, Usage, llm::ContentBlock, llm::Message,
    llm::ModelTool, llm::Role, llm::StopReason,
};
use agentrt_provider::openai::{self, Config, DEFAULT_BASE_URL};
use agentrt_provider::{ApiKey, ConfigError};
use common::*;
use serde_json::json;

const PROVIDER: &str = "openai";
const KEY: &str = "sk-test-0123456789abcdef";

fn ok_body() -> String {
    r#"{"id":"chatcmpl-1","object":"chat.completion","created":1764410400,"model":"gpt-x","choices":[{"index":0,"message":{"role":"assistant","content":"hello","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},"system_fingerprint":"fp_1"}"#.to_owned()
}

fn model(base: &str, client: Option<reqwest::Client>) -> Box<dyn Model> {
    Box::new(
        Config {
            base_url: Some(format!("{base}/v1")),
            api_key: Some(ApiKey::new(KEY)),
            http_client: client,
            ..Config::new("gpt-x")
        }
        .build_with_env(|_| None)
        .expect("build"),
    )
}

transport_suite!();

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn with_tools() -> ModelRequest {
    ModelRequest {
        system: "Be brief.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::text("read it")],
            },
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::tool_use(
                    "call_1",
                    "fs_read",
                    c(r#"{"path":"/a"}"#),
                )],
            },
            Message {
                role: Role::User,
                content: vec![
                    ContentBlock::tool_result("call_1", "contents", false),
                    ContentBlock::text("go on"),
                ],
            },
        ],
        tools: vec![ModelTool {
            name: "fs_read".into(),
            description: "Reads a file.".into(),
            input_schema: c(r#"{"type":"object","properties":{"path":{"type":"string"}}}"#),
        }],
        max_output_tokens: Some(512),
    }
}

#[tokio::test]
async fn the_request_is_the_chat_completions_shape_with_a_bearer_key() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let reply = model(&fake.url(), None)
        .generate(&with_tools())
        .await
        .expect("reply");
    let seen = fake.only();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(seen.header("authorization"), Some(format!("Bearer {KEY}")));
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        seen.json(),
        json!({
            "model": "gpt-x",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": "",
                 "tool_calls": [{"id": "call_1", "type": "function",
                                 "function": {"name": "fs_read", "arguments": "{\"path\":\"/a\"}"}}]},
                {"role": "tool", "content": "contents", "tool_call_id": "call_1"},
                {"role": "user", "content": "go on"}
            ],
            "tools": [{"type": "function", "function": {"name": "fs_read", "description": "Reads a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
            "tool_choice": "auto",
            "parallel_tool_calls": false,
            "temperature": 0.0,
            "max_tokens": 512
        })
    );
    assert_eq!(reply.text, "hello");
    assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 19,
            output_tokens: 10,
            cached_input_tokens: 0
        }
    );
    fake.stop().await;
}

#[tokio::test]
async fn without_tools_there_is_no_tool_choice_and_without_a_key_no_authorization() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let local = Config {
        base_url: Some(format!("{}/v1/", fake.url())),
        ..Config::new("qwen3")
    }
    .build_with_env(|_| Some("sk-from-env".to_owned()))
    .expect("build");
    assert!(!local.has_key());
    local.generate(&hello()).await.expect("reply");
    let seen = fake.only();
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(
        seen.json(),
        json!({"model": "qwen3", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0})
    );
    fake.stop().await;
}

#[test]
fn the_environment_key_is_read_only_for_the_default_base_url() {
    let asked = Mutex::new(Vec::<String>::new());
    let env = |name: &str| {
        asked.lock().expect("lock").push(name.to_owned());
        Some("sk-env".to_owned())
    };
    let hosted = Config::new("gpt-x").build_with_env(env).expect("build");
    assert!(hosted.has_key());
    assert_eq!(hosted.base_url(), DEFAULT_BASE_URL);
    assert_eq!(*asked.lock().expect("lock"), ["OPENAI_API_KEY"]);

    asked.lock().expect("lock").clear();
    let other = Config {
        base_url: Some("https://llm.internal.example/v1".into()),
        ..Config::new("gpt-x")
    }
    .build_with_env(env)
    .expect("build");
    assert!(
        !other.has_key(),
        "the environment's key went to another server"
    );
    assert!(asked.lock().expect("lock").is_empty());

    // An explicit key wins and the environment is not consulted.
    let explicit = Config {
        api_key: Some(ApiKey::new("sk-explicit")),
        ..Config::new("gpt-x")
    }
    .build_with_env(env)
    .expect("build");
    assert!(explicit.has_key());
    assert!(asked.lock().expect("lock").is_empty());
}

#[test]
fn a_key_travels_over_plain_http_only_to_loopback() {
    let with_key = |base: &str| {
        Config {
            base_url: Some(base.into()),
            api_key: Some(ApiKey::new(KEY)),
            ..Config::new("m")
        }
        .build_with_env(|_| None)
    };
    for refused in [
        "http://example.com/v1",
        "http://192.168.1.2:8080/v1",
        "http://localhost./v1",
    ] {
        let err = with_key(refused).err();
        assert!(
            matches!(err, Some(ConfigError::KeyOverPlainHttp { .. })),
            "{refused}: {err:?}"
        );
    }
    for allowed in [
        "http://127.0.0.1:8080/v1",
        "http://localhost:8080/v1",
        "http://[::1]:8080/v1",
        "https://example.com/v1",
    ] {
        assert!(with_key(allowed).is_ok(), "{allowed}");
    }
    // Without a key any http server is fine (a local model server).
    assert!(
        Config {
            base_url: Some("http://gpu-box:8000/v1".into()),
            ..Config::new("m")
        }
        .build_with_env(|_| None)
        .is_ok()
    );
    for bad in [
        "ftp://127.0.0.1/v1",
        "not a url",
        "https://user:pw@example.com/v1",
    ] {
        assert!(
            matches!(
                Config {
                    base_url: Some(bad.into()),
                    ..Config::new("m")
                }
                .build_with_env(|_| None),
                Err(ConfigError::Endpoint { .. })
            ),
            "{bad}"
        );
    }
}

#[tokio::test]
async fn finish_reasons_map_and_cut_or_filtered_replies_drop_their_tool_calls() {
    let body = |finish: &str| {
        format!(
            r#"{{"choices":[{{"message":{{"role":"assistant","content":null,"tool_calls":[
                {{"id":"call_a","type":"function","function":{{"name":"a","arguments":"{{\"x\": 9007199254740993}}"}}}},
                {{"type":"function","function":{{"name":"b","arguments":""}}}}]}},"finish_reason":{finish}}}],
                "usage":{{"prompt_tokens":5,"completion_tokens":6,"prompt_tokens_details":{{"cached_tokens":2}}}}}}"#
        )
    };
    for (finish, stop, calls) in [
        (r#""tool_calls""#, StopReason::ToolUse, 2),
        (r#""stop""#, StopReason::EndTurn, 2),
        (r#""length""#, StopReason::MaxTokens, 0),
        (r#""content_filter""#, StopReason::Refusal, 0),
        ("null", StopReason::ToolUse, 2),
        (r#""eos""#, StopReason::Other("eos".into()), 2),
    ] {
        let fake = Fake::start(ok_json(body(finish))).await;
        let reply = model(&fake.url(), None)
            .generate(&hello())
            .await
            .expect("reply");
        assert_eq!(reply.stop_reason, Some(stop), "{finish}");
        assert_eq!(reply.tool_uses.len(), calls, "{finish}");
        assert_eq!(
            reply.usage,
            Usage {
                input_tokens: 5,
                output_tokens: 6,
                cached_input_tokens: 2
            }
        );
        if calls == 2 {
            assert_eq!(reply.tool_uses[0].id, "call_a");
            assert_eq!(reply.tool_uses[0].args, r#"{"x": 9007199254740993}"#);
            assert!(
                reply.tool_uses[1].id.starts_with("call_") && reply.tool_uses[1].id.ends_with("_1")
            );
            assert_eq!(reply.tool_uses[1].args, "{}");
        }
        fake.stop().await;
    }
    // No finish reason and no calls: end of turn.
    let fake = Fake::start(ok_json(r#"{"choices":[{"message":{"content":"done"}}]}"#)).await;
    let reply = model(&fake.url(), None)
        .generate(&hello())
        .await
        .expect("reply");
    assert_eq!(
        (reply.stop_reason, reply.text.as_str()),
        (Some(StopReason::EndTurn), "done")
    );
    fake.stop().await;
}

#[tokio::test]
async fn served_but_unusable_replies_are_served_errors_with_their_usage() {
    let usage = r#""usage":{"prompt_tokens":8,"completion_tokens":2}"#;
    let want = Usage {
        input_tokens: 8,
        output_tokens: 2,
        cached_input_tokens: 0,
    };
    for (body, expect) in [
        (format!(r#"{{"choices":[],{usage}}}"#), "no choices"),
        (format!(r#"{{{usage}}}"#), "no choices"),
        (
            format!(r#"{{"error":{{"type":"server_error","message":"overloaded"}},{usage}}}"#),
            "openai: server_error: overloaded",
        ),
        (
            format!(
                r#"{{"choices":[{{"message":{{"tool_calls":[{{"id":"c","function":{{"name":"a","arguments":"[1]"}}}}]}},"finish_reason":"tool_calls"}}],{usage}}}"#
            ),
            "arguments are not a JSON object",
        ),
        (
            format!(
                r#"{{"choices":[{{"message":{{"tool_calls":[{{"id":"c","function":{{"name":"a","arguments":"{{\"a\":"}}}}]}}}}],{usage}}}"#
            ),
            "arguments are not a JSON object",
        ),
        (format!(r#"{{"choices":"many",{usage}}}"#), "decode"),
    ] {
        let fake = Fake::start(ok_json(body.clone())).await;
        let err = model(&fake.url(), None).generate(&hello()).await.err();
        assert!(
            matches!(&err, Some(ModelError::Served { message, usage }) if message.contains(expect) && *usage == want),
            "{body}: {err:?}"
        );
        assert_eq!(fake.seen().len(), 1);
        fake.stop().await;
    }
}

#[tokio::test]
async fn implausible_usage_is_unusable() {
    for usage in [
        r#"{"prompt_tokens":-1,"completion_tokens":2}"#,
        r#"{"prompt_tokens":3,"completion_tokens":-2}"#,
        r#"{"prompt_tokens":10,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":11}}"#,
        r#"{"prompt_tokens":1.0,"completion_tokens":2}"#,
        r#"{"prompt_tokens":1,"completion_tokens":"2"}"#,
        r#""lots""#,
    ] {
        let body = format!(
            r#"{{"choices":[{{"message":{{"content":"x"}},"finish_reason":"stop"}}],"usage":{usage}}}"#
        );
        let fake = Fake::start(ok_json(body)).await;
        let err = model(&fake.url(), None).generate(&hello()).await.err();
        assert!(
            matches!(&err, Some(ModelError::UnusableUsage { .. })),
            "{usage}: {err:?}"
        );
        fake.stop().await;
    }
    // null usage and null details are zero, not unusable.
    let fake = Fake::start(ok_json(
        r#"{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":null,"prompt_tokens_details":null}}"#,
    ))
    .await;
    let reply = model(&fake.url(), None)
        .generate(&hello())
        .await
        .expect("reply");
    assert_eq!(reply.usage.input_tokens, 1);
    fake.stop().await;
}

#[tokio::test]
async fn the_key_is_never_printed() {
    let fake = Fake::start(reply(
        401,
        &[],
        r#"{"error":{"message":"Incorrect API key provided"}}"#,
    ))
    .await;
    let config = Config {
        base_url: Some(format!("{}/v1", fake.url())),
        api_key: Some(ApiKey::new(KEY)),
        ..Config::new("gpt-x")
    };
    let shown = [
        format!("{config:?}"),
        format!("{config:#?}"),
        serde_json::to_string(&config).expect("serialise"),
    ];
    let m = config.build_with_env(|_| None).expect("build");
    let err = m.generate(&hello()).await.expect_err("401");
    for text in shown.into_iter().chain([
        format!("{m:?}"),
        format!("{m:#?}"),
        m.to_string(),
        err.to_string(),
        format!("{err:?}"),
    ]) {
        assert!(
            !text.contains(KEY) && !text.contains("0123456789abcdef"),
            "{text}"
        );
    }
    assert!(format!("{m:?}").contains("[redacted]"));
    fake.stop().await;
}

#[test]
fn names_and_free_prices() {
    assert_eq!(openai::name("m"), "openai:m");
    let m = Config {
        base_url: Some("http://127.0.0.1:1/v1".into()),
        ..Config::new("m")
    }
    .build_with_env(|_| None)
    .expect("build");
    assert_eq!(m.name(), "openai:m");
    assert!(openai::free([&m]).price_for("openai:m").is_ok());
    assert!(matches!(
        Config::new("").build_with_env(|_| None),
        Err(ConfigError::MissingModel { .. })
    ));
}
