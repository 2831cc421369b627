//! The Ollama adapter against a fake `/api/chat` server.

#![cfg(feature = "ollama")]

mod common;

use std::sync::Mutex;

use agentrt::{
    Canonical, Model, ModelError, ModelRequest, Usage, llm::ContentBlock, llm::Message,
    llm::ModelTool, llm::Role, llm::StopReason,
};
use agentrt_provider::ollama::{self, Config, DEFAULT_HOST, resolve_host};
use agentrt_provider::price::Price;
use common::*;
use serde_json::json;

const PROVIDER: &str = "ollama";

fn ok_body() -> String {
    r#"{"model":"qwen3:30b-a3b","created_at":"2026-11-29T10:00:00.000000Z","message":{"role":"assistant","content":"hello"},"done":true,"done_reason":"stop","total_duration":100,"prompt_eval_count":12,"eval_count":3}"#.to_owned()
}

fn model(base: &str, client: Option<reqwest::Client>) -> Box<dyn Model> {
    Box::new(
        Config {
            host: Some(base.to_owned()),
            http_client: client,
            ..Config::new("qwen3:30b-a3b")
        }
        .build_with_env(|_| None)
        .expect("build"),
    )
}

transport_suite!();

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn conversation() -> ModelRequest {
    ModelRequest {
        system: "Be brief.".into(),
        messages: vec![
            Message {
                role: Role::User,
                content: vec![ContentBlock::text("read it")],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("ok"),
                    ContentBlock::tool_use(
                        "call_1",
                        "fs_read",
                        c(r#"{"path":"/a","n":9007199254740993}"#),
                    ),
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock {
                    name: "fs_read".into(),
                    ..ContentBlock::tool_result("call_1", "contents", false)
                }],
            },
        ],
        tools: vec![ModelTool {
            name: "fs_read".into(),
            description: "Reads a file.".into(),
            input_schema: c(
                r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#,
            ),
        }],
        max_output_tokens: None,
    }
}

#[tokio::test]
async fn the_request_is_the_native_chat_shape() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let reply = model(&fake.url(), None)
        .generate(&conversation())
        .await
        .expect("reply");
    let seen = fake.only();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/api/chat")
    );
    assert_eq!(
        seen.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(seen.header("authorization"), None);
    assert_eq!(
        seen.json(),
        json!({
            "model": "qwen3:30b-a3b",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "read it"},
                {"role": "assistant", "content": "ok",
                 "tool_calls": [{"id": "call_1", "function": {"name": "fs_read",
                     "arguments": {"n": 9007199254740993u64, "path": "/a"}}}]},
                {"role": "tool", "content": "contents", "tool_name": "fs_read"}
            ],
            "tools": [{"type": "function", "function": {"name": "fs_read", "description": "Reads a file.",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}],
            "stream": false,
            "think": false,
            "options": {"temperature": 0, "num_ctx": 32768}
        })
    );
    // The recorded input's literal travels untouched.
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
    fake.stop().await;
}

#[tokio::test]
async fn options_carry_num_predict_only_when_set_and_the_configured_context() {
    let fake = Fake::start(ok_json(ok_body())).await;
    let m = Config {
        host: Some(fake.url()),
        think: true,
        num_ctx: 8192,
        ..Config::new("m")
    }
    .build_with_env(|_| None)
    .expect("build");
    let mut request = hello();
    request.max_output_tokens = Some(100);
    m.generate(&request).await.expect("reply");
    request.max_output_tokens = Some(0);
    m.generate(&request).await.expect("reply");
    let seen = fake.seen();
    assert_eq!(
        seen[0].json()["options"],
        json!({"temperature": 0, "num_ctx": 8192, "num_predict": 100})
    );
    assert_eq!(seen[0].json()["think"], json!(true));
    assert_eq!(
        seen[1].json()["options"],
        json!({"temperature": 0, "num_ctx": 8192})
    );
    assert!(
        seen[0].json().get("tools").is_none(),
        "empty tools are omitted"
    );
    fake.stop().await;
}

#[tokio::test]
async fn tool_calls_without_ids_get_synthesised_ids_and_all_are_returned() {
    let body = r#"{"message":{"role":"assistant","content":"","tool_calls":[
        {"function":{"name":"a","arguments":{"x":1}}},
        {"function":{"name":"b","arguments":{}}},
        {"id":"given","function":{"name":"c","arguments":null}}]},
        "done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":2}"#;
    let fake = Fake::start(ok_json(body)).await;
    let reply = model(&fake.url(), None)
        .generate(&hello())
        .await
        .expect("reply");
    assert_eq!(reply.stop_reason, Some(StopReason::ToolUse));
    let ids: Vec<&str> = reply.tool_uses.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids.len(), 3);
    for (i, id) in ids.iter().take(2).enumerate() {
        let rest = id.strip_prefix("call_").expect("call_ prefix");
        let (nanos, index) = rest.split_once('_').expect("call_<nanos>_<i>");
        assert!(nanos.parse::<u128>().is_ok_and(|n| n > 0), "{id}");
        assert_eq!(index, i.to_string());
    }
    assert_eq!(ids[2], "given");
    let args: Vec<&str> = reply.tool_uses.iter().map(|t| t.args.as_str()).collect();
    assert_eq!(args, [r#"{"x":1}"#, "{}", "{}"]);
    fake.stop().await;
}

#[tokio::test]
async fn length_drops_tool_calls_and_keeps_usage() {
    let body = r#"{"message":{"role":"assistant","content":"half","tool_calls":[{"function":{"name":"a","arguments":{}}}]},"done_reason":"length","prompt_eval_count":7,"eval_count":100}"#;
    let fake = Fake::start(ok_json(body)).await;
    let reply = model(&fake.url(), None)
        .generate(&hello())
        .await
        .expect("reply");
    assert_eq!(reply.stop_reason, Some(StopReason::MaxTokens));
    assert!(reply.tool_uses.is_empty());
    assert_eq!(
        (reply.usage.input_tokens, reply.usage.output_tokens),
        (7, 100)
    );
    fake.stop().await;
}

#[tokio::test]
async fn served_but_unusable_replies_are_served_errors_with_their_usage() {
    let usage = Usage {
        input_tokens: 9,
        output_tokens: 4,
        cached_input_tokens: 0,
    };
    for (body, expect) in [
        (
            r#"{"message":{"content":"","tool_calls":[{"function":{"name":"a","arguments":[1,2]}}]},"prompt_eval_count":9,"eval_count":4}"#,
            "arguments are not a JSON object",
        ),
        (
            r#"{"message":{"content":"","tool_calls":[{"function":{"name":"a","arguments":"{\"x\":1}"}}]},"prompt_eval_count":9,"eval_count":4}"#,
            "arguments are not a JSON object",
        ),
        (
            r#"{"error":"model requires more system memory","prompt_eval_count":9,"eval_count":4}"#,
            "ollama: model requires more system memory",
        ),
        (
            r#"{"message":5,"prompt_eval_count":9,"eval_count":4}"#,
            "decode",
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
    // A long error is echoed at most 512 bytes.
    let long = format!(r#"{{"error":"{}"}}"#, "x".repeat(2000));
    let fake = Fake::start(ok_json(long)).await;
    let err = model(&fake.url(), None).generate(&hello()).await.err();
    assert!(
        matches!(&err, Some(ModelError::Served { message, .. }) if message.len() < 600 && message.ends_with('…')),
        "{err:?}"
    );
    fake.stop().await;
}

#[tokio::test]
async fn negative_or_non_integer_counts_are_unusable_usage() {
    for counts in [
        r#""prompt_eval_count":-5,"eval_count":1"#,
        r#""prompt_eval_count":1.5,"eval_count":1"#,
        r#""prompt_eval_count":1,"eval_count":1e3"#,
        r#""prompt_eval_count":"3","eval_count":1"#,
        r#""prompt_eval_count":18446744073709551616,"eval_count":1"#,
    ] {
        let body = format!(r#"{{"message":{{"content":"x"}},"done_reason":"stop",{counts}}}"#);
        let fake = Fake::start(ok_json(body)).await;
        let err = model(&fake.url(), None).generate(&hello()).await.err();
        assert!(
            matches!(&err, Some(ModelError::UnusableUsage { .. })),
            "{counts}: {err:?}"
        );
        fake.stop().await;
    }
}

#[test]
fn the_host_comes_from_config_then_ollama_host_then_the_default_and_nothing_else_is_read() {
    let asked = Mutex::new(Vec::<String>::new());
    let env = |name: &str| {
        asked.lock().expect("lock").push(name.to_owned());
        match name {
            "OLLAMA_HOST" => Some("envbox:11434".to_owned()),
            _ => Some("http://must-not-be-used".to_owned()),
        }
    };
    let m = Config {
        host: Some("cfgbox:1".into()),
        ..Config::new("m")
    }
    .build_with_env(env)
    .expect("build");
    assert_eq!(m.host(), "http://cfgbox:1");
    assert!(
        asked.lock().expect("lock").is_empty(),
        "env read despite a configured host"
    );

    let m = Config::new("m").build_with_env(env).expect("build");
    assert_eq!(m.host(), "http://envbox:11434");
    assert_eq!(*asked.lock().expect("lock"), ["OLLAMA_HOST"]);

    let m = Config::new("m").build_with_env(|_| None).expect("build");
    assert_eq!(m.host(), format!("http://{DEFAULT_HOST}"));
    assert_eq!(
        ollama::resolved_host(Some("https://gpu:443/")).as_deref(),
        Some("https://gpu:443")
    );
}

#[test]
fn hosts_other_than_http_servers_are_refused() {
    for refused in [
        "ftp://box:21",
        "http://u:p@box",
        "http://box?x=1",
        "http://box#f",
        "http://",
    ] {
        assert!(resolve_host(Some(refused), |_| None).is_err(), "{refused}");
        assert!(
            Config {
                host: Some(refused.into()),
                ..Config::new("m")
            }
            .build_with_env(|_| None)
            .is_err(),
            "{refused}"
        );
        assert_eq!(ollama::resolved_host(Some(refused)), None);
    }
    assert!(Config::new("").build_with_env(|_| None).is_err());
}

#[test]
fn names_and_free_prices_follow_the_adapter_name() {
    assert_eq!(ollama::name("m"), "ollama:m");
    let a = Config::new("a").build_with_env(|_| None).expect("build");
    let b = Config {
        name: Some("local-b".into()),
        ..Config::new("b")
    }
    .build_with_env(|_| None)
    .expect("build");
    assert_eq!(a.name(), "ollama:a");
    assert_eq!(b.name(), "local-b");
    let prices = ollama::free([&a, &b]);
    assert_eq!(prices.price_for("ollama:a"), Ok(Price::FREE));
    assert_eq!(prices.price_for("local-b"), Ok(Price::FREE));
    assert!(prices.price_for("ollama:b").is_err());
}
