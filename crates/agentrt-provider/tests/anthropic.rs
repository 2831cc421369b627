//! The Anthropic adapter against a fake Messages API server.

#![cfg(feature = "anthropic")]

mod common;

use std::sync::Mutex;

use agentrt::{
    Canonical, Model, ModelError, ModelRequest, Usage, llm::ContentBlock, llm::Message,
    llm::ModelTool, llm::Role, llm::StopReason,
};
use agentrt_provider::anthropic::{self, Config, RAW_ASSISTANT_BLOCK};
use agentrt_provider::{ApiKey, ConfigError};
use common::*;
use serde_json::{Value, json};

const PROVIDER: &str = "anthropic";
const KEY: &str = "sk-ant-test-0123456789abcdef";

fn ok_body() -> String {
    r#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-opus-5","content":[{"type":"text","text":"hello","citations":null}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":3,"service_tier":"standard"}}"#.to_owned()
}

fn config(base: &str) -> Config {
    Config {
        base_url: Some(base.to_owned()),
        api_key: Some(ApiKey::new(KEY)),
        ..Config::new("claude-opus-5")
    }
}

fn model(base: &str, client: Option<reqwest::Client>) -> Box<dyn Model> {
    Box::new(
        Config {
            http_client: client,
            ..config(base)
        }
        .build_with_env(|_| None)
        .expect("build"),
    )
}

transport_suite!();

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn user(blocks: Vec<ContentBlock>) -> Message {
    Message {
        role: Role::User,
        content: blocks,
    }
}

#[tokio::test]
async fn the_request_goes_to_v1_messages_with_x_api_key_and_the_documented_body() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = Config {
        effort: Some("high".into()),
        ..config(&fake.url())
    }
    .build_with_env(|_| None)
    .expect("build");
    let request = ModelRequest {
        system: "Be brief.".into(),
        messages: vec![
            user(vec![
                ContentBlock::text("read it"),
                ContentBlock::text("  "),
            ]),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text(""),
                    ContentBlock::tool_use(
                        "tu_1",
                        "fs_read",
                        c(r#"{"path":"/a","n":9007199254740993}"#),
                    ),
                    ContentBlock {
                        input: None,
                        ..ContentBlock::tool_use("tu_2", "now", Canonical::null())
                    },
                ],
            },
            user(vec![
                ContentBlock::tool_result("tu_1", "contents", false),
                ContentBlock::tool_result("tu_2", "boom", true),
            ]),
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::text(" \n")],
            },
        ],
        tools: vec![ModelTool {
            name: "fs_read".into(),
            description: "Reads a file.".into(),
            input_schema: c(
                r#"{"type":"object","properties":{"path":{"type":"string","maxLength":99}},"required":["path"]}"#,
            ),
        }],
        max_output_tokens: None,
    };
    let reply = m.generate(&request).await.expect("reply");
    let seen = fake.only();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(seen.header("x-api-key").as_deref(), Some(KEY));
    assert_eq!(
        seen.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        seen.json(),
        json!({
            "model": "claude-opus-5",
            "max_tokens": 4096,
            "system": [{"type": "text", "text": "Be brief."}],
            "output_config": {"effort": "high"},
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
            "tools": [{"name": "fs_read", "description": "Reads a file.",
                "input_schema": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 99}},
                                 "required": ["path"]}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "read it"}]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "tu_1", "name": "fs_read", "input": {"path": "/a", "n": 9007199254740993u64}},
                    {"type": "tool_use", "id": "tu_2", "name": "now", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "tu_1", "content": "contents", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "tu_2", "content": "boom", "is_error": true}]},
                {"role": "assistant", "content": [{"type": "text", "text": "(no output)"}]}
            ]
        })
    );
    assert!(String::from_utf8_lossy(&seen.body).contains("9007199254740993"));
    assert_eq!(reply.text, "hello");
    assert_eq!(reply.stop_reason, Some(StopReason::EndTurn));
    assert_eq!(
        reply.usage,
        Usage {
            input_tokens: 12,
            output_tokens: 3,
            cached_input_tokens: 0
        }
    );
    assert_eq!(reply.raw.as_deref(), Some(ok_body().as_str()));
    fake.stop().await;
}

#[tokio::test]
async fn the_request_cap_wins_over_the_configured_one_and_an_oversize_cap_is_never_sent() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = Config {
        max_tokens: Some(1000),
        ..config(&fake.url())
    }
    .build_with_env(|_| None)
    .expect("build");
    let mut request = hello();
    m.generate(&request).await.expect("reply");
    request.max_output_tokens = Some(21_333);
    m.generate(&request).await.expect("reply");
    request.max_output_tokens = Some(32_000);
    let err = m.generate(&request).await.err();
    assert!(
        matches!(&err, Some(ModelError::Other { message }) if message.contains("32000") && message.contains("non-streaming")),
        "{err:?}"
    );
    let caps: Vec<Value> = fake
        .seen()
        .iter()
        .map(|s| s.json()["max_tokens"].clone())
        .collect();
    assert_eq!(
        caps,
        [json!(1000), json!(21_333)],
        "the oversize request was sent"
    );
    fake.stop().await;
}

#[test]
fn building_refuses_unpriced_models_missing_keys_and_oversize_caps() {
    let none = |_: &str| None;
    let key = Some(ApiKey::new(KEY));
    let err = Config {
        api_key: key.clone(),
        ..Config::new("claude-unknown-9")
    }
    .build_with_env(none)
    .err();
    assert!(
        matches!(&err, Some(ConfigError::NoPrice { name, .. }) if name == "anthropic:claude-unknown-9"),
        "{err:?}"
    );
    assert!(
        err.map(|e| e.to_string())
            .is_some_and(|t| t.contains("no price") && t.contains("name"))
    );
    // A bare id is not priced either, but naming the model makes it the caller's to price.
    assert!(
        Config {
            api_key: key.clone(),
            name: Some("my-claude".into()),
            ..Config::new("claude-unknown-9")
        }
        .build_with_env(none)
        .is_ok()
    );

    let err = Config::new("claude-opus-5").build_with_env(none).err();
    assert!(matches!(err, Some(ConfigError::NoApiKey { .. })), "{err:?}");
    assert!(err.is_some_and(|e| e.to_string().contains("no API key")));

    let err = Config {
        api_key: key.clone(),
        max_tokens: Some(32_000),
        ..Config::new("claude-opus-5")
    }
    .build_with_env(none)
    .err();
    assert!(
        matches!(
            err,
            Some(ConfigError::MaxTokensTooLarge {
                max_tokens: 32_000,
                limit: 21_333,
                ..
            })
        ),
        "{err:?}"
    );
    assert!(
        Config {
            api_key: key.clone(),
            max_tokens: Some(21_333),
            ..Config::new("claude-opus-5")
        }
        .build_with_env(none)
        .is_ok()
    );

    let err = Config {
        base_url: Some("http://example.com".into()),
        ..config("")
    }
    .build_with_env(none)
    .err();
    assert!(
        matches!(err, Some(ConfigError::KeyOverPlainHttp { .. })),
        "{err:?}"
    );
    assert!(matches!(
        Config::new("").build_with_env(none),
        Err(ConfigError::MissingModel { .. })
    ));
}

#[test]
fn only_anthropic_api_key_is_read_and_an_explicit_key_wins() {
    let asked = Mutex::new(Vec::<String>::new());
    let env = |name: &str| {
        asked.lock().expect("lock").push(name.to_owned());
        match name {
            "ANTHROPIC_API_KEY" => Some("sk-ant-env".to_owned()),
            "ANTHROPIC_BASE_URL" => Some("http://attacker.example".to_owned()),
            _ => Some("ignored".to_owned()),
        }
    };
    let m = Config::new("claude-opus-5")
        .build_with_env(env)
        .expect("build");
    assert_eq!(*asked.lock().expect("lock"), ["ANTHROPIC_API_KEY"]);
    assert_eq!(m.base_url(), "https://api.anthropic.com/");

    asked.lock().expect("lock").clear();
    let m = Config {
        api_key: Some(ApiKey::new(KEY)),
        ..Config::new("claude-opus-5")
    }
    .build_with_env(env)
    .expect("build");
    assert!(
        asked.lock().expect("lock").is_empty(),
        "the environment was read despite an explicit key"
    );
    assert_eq!(m.name(), "anthropic:claude-opus-5");
}

#[tokio::test]
async fn the_explicit_key_is_the_one_sent() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = config(&fake.url())
        .build_with_env(|_| Some("sk-ant-from-env".to_owned()))
        .expect("build");
    m.generate(&hello()).await.expect("reply");
    assert_eq!(fake.only().header("x-api-key").as_deref(), Some(KEY));
    fake.stop().await;
}

fn casework_tools() -> Vec<ModelTool> {
    #[derive(serde::Deserialize)]
    struct Entry {
        name: String,
        schema: String,
    }
    let entries: Vec<Entry> =
        serde_json::from_str(include_str!("data/anthropic/casework_schemas.json"))
            .expect("schemas");
    assert_eq!(entries.len(), 12);
    entries
        .into_iter()
        .map(|e| ModelTool {
            name: e.name,
            description: "d".into(),
            input_schema: c(&e.schema),
        })
        .collect()
}

#[tokio::test]
async fn strict_tools_match_the_conformance_golden_as_json_values() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = Config {
        strict: true,
        ..config(&fake.url())
    }
    .build_with_env(|_| None)
    .expect("build");
    let request = ModelRequest {
        tools: casework_tools(),
        ..hello()
    };
    m.generate(&request).await.expect("reply");
    let golden: Value =
        serde_json::from_str(include_str!("data/anthropic/casework_strict.golden.json"))
            .expect("golden");
    let sent = fake.only().json();
    let (Some(sent_tools), Some(golden_tools)) = (sent["tools"].as_array(), golden.as_array())
    else {
        panic!("tools are not arrays");
    };
    assert_eq!(sent_tools.len(), golden_tools.len());
    for (s, g) in sent_tools.iter().zip(golden_tools) {
        assert_eq!(s, g, "tool {}", g["name"]);
    }
    fake.stop().await;
}

#[tokio::test]
async fn schemas_strict_mode_cannot_express_are_refused_before_sending_and_fine_without_strict() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let strict = Config {
        strict: true,
        ..config(&fake.url())
    }
    .build_with_env(|_| None)
    .expect("build");
    let lax = config(&fake.url()).build_with_env(|_| None).expect("build");
    for (schema, expect) in [
        (
            r#"{"type":"object","properties":{"v":{"oneOf":[{"type":"string"},{"type":"integer"}]}}}"#,
            "oneOf",
        ),
        (
            r#"{"type":"object","additionalProperties":{"type":"string"}}"#,
            "schema-valued additionalProperties",
        ),
        (
            r##"{"type":"object","properties":{"tree":{"$ref":"#/$defs/node"}},"$defs":{"node":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}}}}}"##,
            "recursive $ref",
        ),
        (
            r##"{"type":"object","properties":{"again":{"$ref":"#"}}}"##,
            "root schema",
        ),
    ] {
        let request = ModelRequest {
            tools: vec![ModelTool {
                name: "t".into(),
                description: "d".into(),
                input_schema: c(schema),
            }],
            ..hello()
        };
        let before = fake.seen().len();
        let err = strict.generate(&request).await.err();
        assert!(
            matches!(&err, Some(ModelError::Other { message }) if message.contains(expect) && message.contains("tool t")),
            "{schema}: {err:?}"
        );
        assert_eq!(
            fake.seen().len(),
            before,
            "{schema}: sent despite the refusal"
        );
        lax.generate(&request).await.expect("fine without strict");
        assert_eq!(fake.seen().len(), before + 1);
    }
    fake.stop().await;
}

#[tokio::test]
async fn a_raw_assistant_turn_replays_thinking_signatures_and_exact_inputs() {
    let body = r#"{"id":"msg_02","type":"message","role":"assistant","model":"claude-opus-5",
        "content":[{"type":"thinking","thinking":"Let me look.","signature":"EqQBCkYIBxgCKkBsig=="},
                   {"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix/LafPsn4a"},
                   {"type":"text","text":"Reading.","citations":null},
                   {"type":"tool_use","id":"toolu_01","name":"fs_read","input":{"path":"/a","n":9007199254740993}}],
        "stop_reason":"tool_use","stop_sequence":null,
        "usage":{"input_tokens":10,"output_tokens":20}}"#;
    let fake = Fake::start(ok_json(body)).await;
    let m = config(&fake.url()).build_with_env(|_| None).expect("build");
    let first = m.generate(&hello()).await.expect("reply");
    assert_eq!(first.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(first.text, "Reading.");
    assert_eq!(first.tool_uses.len(), 1);
    assert_eq!(first.tool_uses[0].id, "toolu_01");
    assert_eq!(
        first.tool_uses[0].args,
        r#"{"path":"/a","n":9007199254740993}"#
    );

    let turn = m.raw_assistant_message(&first).expect("raw turn");
    assert_eq!(turn.content.len(), 1);
    assert_eq!(turn.content[0].name, RAW_ASSISTANT_BLOCK);
    let next = ModelRequest {
        messages: vec![
            user(vec![ContentBlock::text("hi")]),
            turn,
            user(vec![ContentBlock::tool_result(
                "toolu_01", "contents", false,
            )]),
        ],
        ..hello()
    };
    m.generate(&next).await.expect("reply");
    let seen = fake.seen();
    assert_eq!(seen.len(), 2);
    let sent = seen[1].json();
    assert_eq!(
        sent["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "Let me look.", "signature": "EqQBCkYIBxgCKkBsig=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_01", "name": "fs_read", "input": {"path": "/a", "n": 9007199254740993u64}}
        ]})
    );
    assert!(String::from_utf8_lossy(&seen[1].body).contains(r#""n":9007199254740993"#));
    fake.stop().await;
}

#[tokio::test]
async fn raw_blocks_of_another_name_or_out_of_place_are_refused() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = config(&fake.url()).build_with_env(|_| None).expect("build");
    let raw = anthropic::raw_assistant_block("openai.raw_assistant", ok_body());
    let own = anthropic::raw_assistant_block(RAW_ASSISTANT_BLOCK, ok_body());
    for messages in [
        vec![Message {
            role: Role::Assistant,
            content: vec![raw],
        }],
        vec![Message {
            role: Role::Assistant,
            content: vec![own.clone(), ContentBlock::text("x")],
        }],
        vec![Message {
            role: Role::User,
            content: vec![own],
        }],
        vec![Message {
            role: Role::Assistant,
            content: vec![anthropic::raw_assistant_block(
                RAW_ASSISTANT_BLOCK,
                "not json".into(),
            )],
        }],
    ] {
        let err = m
            .generate(&ModelRequest {
                messages,
                ..hello()
            })
            .await
            .err();
        assert!(
            matches!(&err, Some(ModelError::Other { message })
                if message.contains("unsupported content block type") || message.contains("raw assistant turn")),
            "{err:?}"
        );
    }
    assert!(fake.seen().is_empty());
    // A configured name is honoured.
    let custom = Config {
        raw_assistant_block: Some("mine.raw".into()),
        ..config(&fake.url())
    }
    .build_with_env(|_| None)
    .expect("build");
    let messages = vec![Message {
        role: Role::Assistant,
        content: vec![anthropic::raw_assistant_block("mine.raw", ok_body())],
    }];
    custom
        .generate(&ModelRequest {
            messages,
            ..hello()
        })
        .await
        .expect("reply");
    assert_eq!(
        fake.only().json()["messages"][0],
        json!({"role": "assistant", "content": [{"type": "text", "text": "hello"}]})
    );
    fake.stop().await;
}

#[tokio::test]
async fn cache_writes_are_folded_into_input_tokens() {
    for (usage, want) in [
        (
            r#"{"input_tokens":100,"cache_read_input_tokens":2000,"cache_creation_input_tokens":401,"output_tokens":5}"#,
            Usage {
                input_tokens: 2602,
                output_tokens: 5,
                cached_input_tokens: 2000,
            },
        ),
        (
            r#"{"input_tokens":100,"cache_creation_input_tokens":501,"cache_creation":{"ephemeral_5m_input_tokens":401,"ephemeral_1h_input_tokens":100},"output_tokens":5}"#,
            Usage {
                input_tokens: 802,
                output_tokens: 5,
                cached_input_tokens: 0,
            },
        ),
        (
            r#"{"input_tokens":1,"cache_read_input_tokens":null,"cache_creation":null,"output_tokens":2}"#,
            Usage {
                input_tokens: 1,
                output_tokens: 2,
                cached_input_tokens: 0,
            },
        ),
    ] {
        let body = format!(
            r#"{{"type":"message","role":"assistant","content":[{{"type":"text","text":"x"}}],"stop_reason":"end_turn","usage":{usage}}}"#
        );
        let fake = Fake::start(ok_json(body)).await;
        let reply = model(&fake.url(), None)
            .generate(&hello())
            .await
            .expect("reply");
        assert_eq!(reply.usage, want, "{usage}");
        fake.stop().await;
    }
}

#[tokio::test]
async fn refusal_and_max_tokens_drop_tool_uses_and_keep_usage() {
    for (stop, want) in [
        ("refusal", StopReason::Refusal),
        ("max_tokens", StopReason::MaxTokens),
    ] {
        let body = format!(
            r#"{{"type":"message","role":"assistant","content":[{{"type":"text","text":"partial"}},
               {{"type":"tool_use","id":"toolu_9","name":"rm","input":{{"path":"/"}}}}],
               "stop_reason":"{stop}","usage":{{"input_tokens":50,"output_tokens":4096}}}}"#
        );
        let fake = Fake::start(ok_json(body)).await;
        let reply = model(&fake.url(), None)
            .generate(&hello())
            .await
            .expect("reply");
        assert_eq!(reply.stop_reason, Some(want));
        assert!(reply.tool_uses.is_empty(), "{stop}");
        assert_eq!(
            (reply.usage.input_tokens, reply.usage.output_tokens),
            (50, 4096)
        );
        assert_eq!(reply.text, "partial");
        fake.stop().await;
    }
    let body = r#"{"type":"message","content":[],"stop_reason":"pause_turn","usage":{"input_tokens":1,"output_tokens":1}}"#;
    let fake = Fake::start(ok_json(body)).await;
    let reply = model(&fake.url(), None)
        .generate(&hello())
        .await
        .expect("reply");
    assert_eq!(
        reply.stop_reason,
        Some(StopReason::Other("pause_turn".into()))
    );
    fake.stop().await;
}

#[tokio::test]
async fn served_but_unusable_replies_and_implausible_usage() {
    let usage = Usage {
        input_tokens: 7,
        output_tokens: 1,
        cached_input_tokens: 0,
    };
    for (body, expect) in [
        (
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"usage":{"input_tokens":7,"output_tokens":1}}"#,
            "anthropic: overloaded_error: Overloaded",
        ),
        (
            r#"{"type":"message","content":"oops","usage":{"input_tokens":7,"output_tokens":1}}"#,
            "decode",
        ),
        (
            r#"{"type":"message","content":[{"type":"tool_use","id":"t","name":"a","input":[1]}],"stop_reason":"tool_use","usage":{"input_tokens":7,"output_tokens":1}}"#,
            "input is not a JSON object",
        ),
    ] {
        let fake = Fake::start(ok_json(body)).await;
        let err = model(&fake.url(), None).generate(&hello()).await.err();
        assert!(
            matches!(&err, Some(ModelError::Served { message, usage: u }) if message.contains(expect) && *u == usage),
            "{body}: {err:?}"
        );
        fake.stop().await;
    }
    for counts in [
        r#""input_tokens":-3,"output_tokens":1"#,
        r#""input_tokens":3,"output_tokens":1,"cache_read_input_tokens":-1"#,
        r#""input_tokens":3,"output_tokens":1.5"#,
        r#""input_tokens":9223372036854775807,"cache_read_input_tokens":1,"output_tokens":1"#,
    ] {
        let body = format!(
            r#"{{"type":"message","content":[],"stop_reason":"end_turn","usage":{{{counts}}}}}"#
        );
        let fake = Fake::start(ok_json(body)).await;
        let err = model(&fake.url(), None).generate(&hello()).await.err();
        assert!(
            matches!(&err, Some(ModelError::UnusableUsage { .. })),
            "{counts}: {err:?}"
        );
        fake.stop().await;
    }
}

#[tokio::test]
async fn status_errors_carry_the_body_and_retry_after_and_never_the_key() {
    let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"},"request_id":"req_011"}"#;
    let fake = Fake::start(reply(
        429,
        &[("retry-after", "2"), ("content-type", "application/json")],
        body,
    ))
    .await;
    let m = config(&fake.url()).build_with_env(|_| None).expect("build");
    let err = m.generate(&hello()).await.err();
    assert_eq!(
        err,
        Some(ModelError::Transient {
            message: format!("anthropic: 429: {body}"),
            retry_after: Some(std::time::Duration::from_secs(2)),
        })
    );
    assert_eq!(fake.seen().len(), 1);
    fake.stop().await;

    let fake = Fake::start(reply(
        401,
        &[],
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ))
    .await;
    let cfg = config(&fake.url());
    let mut shown = vec![
        format!("{cfg:?}"),
        format!("{cfg:#?}"),
        serde_json::to_string(&cfg).expect("json"),
    ];
    let m = cfg.build_with_env(|_| None).expect("build");
    let err = m.generate(&hello()).await.expect_err("401");
    assert!(
        matches!(err, ModelError::Status { status: 401, .. }),
        "{err:?}"
    );
    shown.extend([
        format!("{m:?}"),
        format!("{m:#?}"),
        m.to_string(),
        err.to_string(),
        format!("{err:?}"),
    ]);
    for text in shown {
        assert!(
            !text.contains(KEY) && !text.contains("0123456789abcdef"),
            "{text}"
        );
    }
    assert!(format!("{m:?}").contains("[redacted]"));
    fake.stop().await;
}

#[test]
fn the_price_table_is_the_twelve_dated_names_and_bare_ids_are_unpriced() {
    let table = anthropic::prices();
    let names: Vec<&str> = table.names().collect();
    assert_eq!(
        names,
        [
            "anthropic:claude-fable-5",
            "anthropic:claude-fable-5-1",
            "anthropic:claude-haiku-4-5",
            "anthropic:claude-mythos-5",
            "anthropic:claude-mythos-5-1",
            "anthropic:claude-opus-4-6",
            "anthropic:claude-opus-4-7",
            "anthropic:claude-opus-4-8",
            "anthropic:claude-opus-5",
            "anthropic:claude-opus-5-5",
            "anthropic:claude-sonnet-4-6",
            "anthropic:claude-sonnet-5",
        ]
    );
    let p = table
        .price_for("anthropic:claude-fable-5-1")
        .expect("price");
    assert_eq!(
        (
            p.input_per_mtok_micros,
            p.output_per_mtok_micros,
            p.cached_input_per_mtok_micros
        ),
        (10_000_000, 50_000_000, 250_000)
    );
    assert!(table.price_for("claude-opus-5").is_err());
    assert_eq!(
        table.as_of().map(|d| d.to_string()).as_deref(),
        Some("2026-09-29")
    );
}
