//! Replay: scripted, recording and replaying models (design §15; control 73).

use std::path::Path;
use std::sync::Arc;

use agentrt::json::Canonical;
use agentrt::render::{self, RenderOptions};
use agentrt::replay::{self, FORMAT, NotRecorded, Recorder, ReplayError, Replayer, Scripted};
use agentrt::*;
use agentrt::{
    clock::ManualClock, ids::sequential_ids, llm::ContentBlock, llm::Message, llm::ModelTool,
    llm::Role, llm::StopReason, llm::ToolUse, model::Step,
};

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn user(text: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::text(text)],
    }
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        system: String::new(),
        messages,
        tools: vec![],
        max_output_tokens: None,
    }
}

fn ask(text: &str) -> ModelRequest {
    request(vec![user(text)])
}

fn reply(text: &str, raw: Option<&str>) -> ModelResponse {
    ModelResponse {
        text: text.into(),
        tool_uses: vec![],
        stop_reason: Some(StopReason::EndTurn),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 2,
            cached_input_tokens: 0,
        },
        raw: raw.map(str::to_owned),
    }
}

/// A request with a tool use whose input holds `n` literally.
fn with_number(n: &str) -> ModelRequest {
    request(vec![
        user("go"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::tool_use(
                "step_0",
                "add",
                c(&format!(r#"{{"n":{n}}}"#)),
            )],
        },
    ])
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect();
    names.sort();
    names
}

fn recorder(model: Scripted, dir: &Path) -> Recorder {
    Recorder::new(Arc::new(model), dir).expect("recorder")
}

fn not_recorded(result: Result<ModelResponse, ReplayError>) -> NotRecorded {
    match result {
        Err(ReplayError::NotRecorded(miss)) => miss,
        other => panic!("expected NotRecorded, got {other:?}"),
    }
}

/// The replay key is BLAKE3 of the canonical `{"model","request"}`: the
/// bytes and the hash are pinned.
#[test]
fn the_replay_key_golden_is_pinned() {
    let req = ModelRequest {
        system: "Be <brief> & exact.".into(),
        messages: vec![
            user("héllo"),
            Message {
                role: Role::Assistant,
                content: vec![
                    ContentBlock::text("ok"),
                    ContentBlock::tool_use(
                        "step_0",
                        "add",
                        c(r#"{"n": 12345678901234567890, "x": 1.50}"#),
                    ),
                ],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::tool_result("step_0", "{\"sum\":3}", true)],
            },
        ],
        tools: vec![ModelTool {
            name: "add".into(),
            description: "Add n".into(),
            input_schema: c(
                r#"{"type":"object","properties":{"n":{"type":"integer","minimum":1}}}"#,
            ),
        }],
        max_output_tokens: Some(4096),
    };
    let doc = replay::key_document("scripted", &req).expect("document");
    assert_eq!(
        doc.as_str(),
        concat!(
            r#"{"model":"scripted","request":{"max_output_tokens":4096,"messages":["#,
            r#"{"content":[{"text":"héllo","type":"text"}],"role":"user"},"#,
            r#"{"content":[{"text":"ok","type":"text"},{"input":{"n":12345678901234567890,"x":1.50},"name":"add","tool_use_id":"step_0","type":"tool_use"}],"role":"assistant"},"#,
            r#"{"content":[{"content":"{\"sum\":3}","is_error":true,"tool_use_id":"step_0","type":"tool_result"}],"role":"user"}],"#,
            r#""system":"Be <brief> & exact.","#,
            r#""tools":[{"description":"Add n","input_schema":{"properties":{"n":{"minimum":1,"type":"integer"}},"type":"object"},"name":"add"}]}}"#
        )
    );
    let key = replay::key("scripted", &req).expect("key");
    assert_eq!(key, json::hash_hex(doc.as_bytes()));
    assert_eq!(
        key,
        "4ccbfe2f18b6077fe77d5cc181541ef44040bc16631a828c432d55ef9a34b657"
    );
    // The model name is part of the key.
    assert_ne!(replay::key("other", &req).expect("key"), key);
}

/// Scripted: errors[i] wins, then responses[i], then "exhausted"; every
/// request is kept.
#[tokio::test]
async fn scripted_answers_errors_then_responses_then_exhaustion() {
    let model = Scripted::new([reply("a", None), reply("b", None)])
        .with_name("test-model")
        .with_errors([
            None,
            Some(ModelError::Transient {
                message: "busy".into(),
                retry_after: None,
            }),
        ]);
    assert_eq!(model.name(), "test-model");
    assert_eq!(model.generate(&ask("1")).await, Ok(reply("a", None)));
    assert_eq!(
        model.generate(&ask("2")).await,
        Err(ModelError::Transient {
            message: "busy".into(),
            retry_after: None
        })
    );
    let Err(ModelError::Other { message }) = model.generate(&ask("3")).await else {
        panic!("exhausted");
    };
    assert!(message.contains("exhausted"), "{message}");
    let asked: Vec<String> = model
        .requests()
        .iter()
        .map(|r| r.messages[0].content[0].text.clone())
        .collect();
    assert_eq!(asked, ["1", "2", "3"]);
    assert_eq!(model.calls(), 3);
    assert_eq!(Scripted::new([]).name(), "scripted");
}

/// Record then replay: the response comes back identical, its raw bytes
/// exactly as received (HTML characters, escapes, controls, non-ASCII,
/// U+2028), and the file holds them as `raw_bytes` in pretty JSON.
#[tokio::test]
async fn record_then_replay_is_byte_exact() {
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("rec");
    let raw = "{\"id\":\"msg_1\",  \"text\":\"<b>&amp;</b> \\u003c \\\"q\\\" \\\\ \\n\"}\n\t\u{1}\u{2028} 日本語 🙂 \r\n";
    let mut original = reply("héllo <world> & \"you\"", Some(raw));
    original.tool_uses = vec![ToolUse {
        id: "toolu_1".into(),
        name: "add".into(),
        args: r#"{ "n" : 12345678901234567890 }"#.into(),
    }];
    original.stop_reason = Some(StopReason::Other("pause_turn".into()));
    let rec = recorder(Scripted::new([original.clone()]), &dir);
    let req = ask("say <hi> & bye");
    assert_eq!(rec.generate(&req).await, Ok(original.clone()));

    let key = replay::key("scripted", &req).expect("key");
    assert_eq!(files(&dir), [format!("{key}.json")]);
    let text = std::fs::read_to_string(dir.join(format!("{key}.json"))).expect("read");
    assert!(
        text.starts_with(
            "{\n  \"format\": \"agentrt-replay/v1\",\n  \"model\": \"scripted\",\n  \"request\": {"
        ),
        "{text}"
    );
    assert!(text.contains("say <hi> & bye"), "no HTML escaping: {text}");
    let file: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(file["raw_bytes"].as_str(), Some(raw));
    assert!(file["response"].get("raw").is_none());
    assert_eq!(file["format"], FORMAT);

    let replayer = Replayer::new("scripted", &dir);
    let served = replayer.generate(&req).await.expect("replayed");
    assert_eq!(served, original);
    assert_eq!(
        served.raw.as_deref().map(str::as_bytes),
        Some(raw.as_bytes())
    );
    assert_eq!(
        served.tool_uses[0].args,
        r#"{ "n" : 12345678901234567890 }"#
    );
    // A response without raw bytes records and replays without them.
    let dir2 = tmp.path().join("rec2");
    let plain = reply("plain", None);
    recorder(Scripted::new([plain.clone()]), &dir2)
        .generate(&req)
        .await
        .expect("recorded");
    let text = std::fs::read_to_string(dir2.join(format!("{key}.json"))).expect("read");
    assert!(!text.contains("raw_bytes"));
    assert_eq!(
        Replayer::new("scripted", &dir2).generate(&req).await,
        Ok(plain)
    );
}

/// The n-th identical request is recorded as `<key>.<n>.json` and replayed
/// in order; one more ask is NotRecorded with the counts.
#[tokio::test]
async fn ordered_duplicates_are_recorded_and_served_in_order() {
    let tmp = tempfile::tempdir().expect("tmp");
    let answers = [
        reply("one", Some("r1")),
        reply("two", Some("r2")),
        reply("three", Some("r3")),
    ];
    let rec = recorder(Scripted::new(answers.clone()), tmp.path());
    let req = ask("again");
    for want in &answers {
        assert_eq!(rec.generate(&req).await.as_ref(), Ok(want));
    }
    let key = replay::key("scripted", &req).expect("key");
    assert_eq!(
        files(tmp.path()),
        [
            format!("{key}.2.json"),
            format!("{key}.3.json"),
            format!("{key}.json")
        ]
    );

    let replayer = Replayer::new("scripted", tmp.path());
    for want in &answers {
        assert_eq!(replayer.generate_replayed(&req).await.as_ref(), Ok(want));
    }
    let miss = not_recorded(replayer.generate_replayed(&req).await);
    assert_eq!(
        miss,
        NotRecorded {
            model: "scripted".into(),
            key: key.clone(),
            asked: 4,
            recorded: 3,
            nearest: None
        }
    );
    // A second replayer counts from the start again.
    let again = Replayer::new("scripted", tmp.path());
    assert_eq!(
        again.generate_replayed(&req).await.as_ref(),
        Ok(&answers[0])
    );
}

/// A new recorder's first exchange of a key deletes that key's later
/// files, so a shorter re-recording never serves stale turns; other keys
/// are untouched.
#[tokio::test]
async fn a_new_recording_replaces_a_keys_later_exchanges() {
    let tmp = tempfile::tempdir().expect("tmp");
    let req = ask("again");
    let other = ask("other");
    let first = recorder(
        Scripted::new([
            reply("1", None),
            reply("2", None),
            reply("3", None),
            reply("o", None),
        ]),
        tmp.path(),
    );
    for _ in 0..3 {
        first.generate(&req).await.expect("recorded");
    }
    first.generate(&other).await.expect("recorded");
    let second = recorder(Scripted::new([reply("new", None)]), tmp.path());
    second.generate(&req).await.expect("recorded");
    let key = replay::key("scripted", &req).expect("key");
    let other_key = replay::key("scripted", &other).expect("key");
    let mut want = vec![format!("{key}.json"), format!("{other_key}.json")];
    want.sort();
    assert_eq!(files(tmp.path()), want);
    let replayer = Replayer::new("scripted", tmp.path());
    assert_eq!(
        replayer.generate_replayed(&req).await,
        Ok(reply("new", None))
    );
    let miss = not_recorded(replayer.generate_replayed(&req).await);
    assert_eq!((miss.asked, miss.recorded), (2, 1));
}

/// A request never recorded fails loudly: typed NotRecorded with the
/// counts and the nearest recorded key (the longest shared prefix of the
/// canonical key document), and through `Model::generate` an `Other`
/// error naming the key prefixes.
#[tokio::test]
async fn an_unrecorded_request_is_refused_with_counts_and_the_nearest_key() {
    let tmp = tempfile::tempdir().expect("tmp");
    let history = vec![
        user("goal: count"),
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text("reading")],
        },
    ];
    let long = request([history.clone(), vec![user("result: 1")]].concat());
    let short = ask("something else entirely");
    let rec = recorder(
        Scripted::new([reply("a", None), reply("b", None)]),
        tmp.path(),
    );
    rec.generate(&long).await.expect("recorded");
    rec.generate(&short).await.expect("recorded");

    let diverged = request([history, vec![user("result: 2")]].concat());
    let key = replay::key("scripted", &diverged).expect("key");
    let long_key = replay::key("scripted", &long).expect("key");
    let replayer = Replayer::new("scripted", tmp.path());
    let miss = not_recorded(replayer.generate_replayed(&diverged).await);
    assert_eq!(
        miss,
        NotRecorded {
            model: "scripted".into(),
            key: key.clone(),
            asked: 1,
            recorded: 0,
            nearest: Some(long_key.clone())
        }
    );
    let Err(ModelError::Other { message }) = replayer.generate(&diverged).await else {
        panic!("a replay miss is an Other model error");
    };
    assert_eq!(
        message,
        format!(
            "replay: request not recorded: model \"scripted\" key {} asked 2 time(s), recorded 0 time(s); nearest recorded key {}",
            &key[..12],
            &long_key[..12]
        )
    );
    assert_eq!(replayer.misses().len(), 2);
    assert_eq!(replayer.misses()[1].asked, 2);
    // Another model name has its own keys: nothing recorded for it.
    let other = Replayer::new("other-model", tmp.path());
    let miss = not_recorded(other.generate_replayed(&long).await);
    assert_eq!((miss.recorded, miss.model.as_str()), (0, "other-model"));
    assert!(miss.nearest.is_some());
    // An empty or missing directory has no nearest key.
    let empty = Replayer::new("scripted", tmp.path().join("missing"));
    let miss = not_recorded(empty.generate_replayed(&long).await);
    assert_eq!(
        (miss.asked, miss.recorded, miss.nearest.as_deref()),
        (1, 0, None)
    );
    assert!(miss.to_string().ends_with("; nothing recorded"), "{miss}");
}

/// Big integers are kept as written, so neighbours never collide, and
/// neither do `1` and `1.0`.
#[tokio::test]
async fn big_integer_requests_get_distinct_keys_and_recordings() {
    let a = with_number("12345678901234567890");
    let b = with_number("12345678901234567891");
    let key_a = replay::key("scripted", &a).expect("key");
    let key_b = replay::key("scripted", &b).expect("key");
    assert_ne!(key_a, key_b);
    assert_ne!(
        replay::key("scripted", &with_number("1")).expect("key"),
        replay::key("scripted", &with_number("1.0")).expect("key")
    );
    let tmp = tempfile::tempdir().expect("tmp");
    let rec = recorder(
        Scripted::new([reply("for a", None), reply("for b", None)]),
        tmp.path(),
    );
    rec.generate(&a).await.expect("recorded");
    rec.generate(&b).await.expect("recorded");
    let replayer = Replayer::new("scripted", tmp.path());
    assert_eq!(replayer.generate(&b).await, Ok(reply("for b", None)));
    assert_eq!(replayer.generate(&a).await, Ok(reply("for a", None)));
    // The file keeps the literal.
    let text = std::fs::read_to_string(tmp.path().join(format!("{key_a}.json"))).expect("read");
    assert!(text.contains("12345678901234567890"));
}

/// The model's errors are returned unchanged and not recorded; they do
/// not use up an ordinal.
#[tokio::test]
async fn model_errors_are_returned_unchanged_and_not_recorded() {
    let tmp = tempfile::tempdir().expect("tmp");
    let timeout = ModelError::Timeout {
        message: "slow".into(),
    };
    let model =
        Scripted::new([reply("unused", None), reply("ok", None)]).with_error(0, timeout.clone());
    let rec = recorder(model, tmp.path());
    let req = ask("x");
    assert_eq!(rec.generate(&req).await, Err(timeout.clone()));
    assert!(files(tmp.path()).is_empty());
    assert_eq!(rec.generate_recorded(&req).await, Ok(reply("ok", None)));
    let key = replay::key("scripted", &req).expect("key");
    assert_eq!(files(tmp.path()), [format!("{key}.json")]);
    assert_eq!(rec.name(), "scripted");
}

/// The directory is created 0700 (parents too), each file is 0600, and
/// no temporary file is left behind.
#[cfg(unix)]
#[tokio::test]
async fn files_are_private_and_written_atomically() {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = tempfile::tempdir().expect("tmp");
    let dir = tmp.path().join("a").join("recordings");
    let rec = recorder(
        Scripted::new((0..5).map(|i| reply(&i.to_string(), Some("raw")))),
        &dir,
    );
    for i in 0..5 {
        rec.generate(&ask(&(i % 2).to_string()))
            .await
            .expect("recorded");
    }
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&tmp.path().join("a")), 0o700);
    let names = files(&dir);
    assert_eq!(names.len(), 5);
    for name in &names {
        assert!(
            !name.starts_with('.') && name.ends_with(".json"),
            "left over: {name}"
        );
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    // An existing directory is used as it is.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let _again = recorder(Scripted::new([]), &dir);
    assert_eq!(mode(&dir), 0o750);
}

/// A file with the raw reply embedded in `response.raw` and no `format`
/// (older recordings) loads; a file of another format, one that records
/// another request than its name says, and one that is not JSON are
/// refused with typed errors.
#[tokio::test]
async fn legacy_files_load_and_bad_files_are_refused() {
    let tmp = tempfile::tempdir().expect("tmp");
    let req = ask("legacy <q>");
    let key = replay::key("scripted", &req).expect("key");
    let legacy = r#"{
  "model": "scripted",
  "request": {"messages": [{"role": "user", "content": [{"type": "text", "text": "legacy <q>"}]}]},
  "response": {"text": "old", "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}, "raw": "{\"raw\": \"<&>\u2028\"}"}
}"#;
    std::fs::write(tmp.path().join(format!("{key}.json")), legacy).expect("write");
    let replayer = Replayer::new("scripted", tmp.path());
    let served = replayer
        .generate_replayed(&req)
        .await
        .expect("legacy loads");
    assert_eq!(served.text, "old");
    assert_eq!(served.raw.as_deref(), Some("{\"raw\": \"<&>\u{2028}\"}"));
    assert_eq!(served.usage.input_tokens, 1);

    let other = ask("other");
    let other_key = replay::key("scripted", &other).expect("key");
    let path = tmp.path().join(format!("{other_key}.json"));
    std::fs::write(
        &path,
        legacy.replacen('{', "{\n  \"format\": \"agentrt-replay/v9\",", 1),
    )
    .expect("write");
    let err = Replayer::new("scripted", tmp.path())
        .generate_replayed(&other)
        .await;
    assert!(
        matches!(err, Err(ReplayError::UnknownFormat { ref format, .. }) if format == "agentrt-replay/v9"),
        "{err:?}"
    );

    // The legacy file copied under another key does not match its name.
    std::fs::write(&path, legacy).expect("write");
    let err = Replayer::new("scripted", tmp.path())
        .generate_replayed(&other)
        .await;
    assert!(
        matches!(err, Err(ReplayError::Mismatch { ref key, .. }) if *key == other_key),
        "{err:?}"
    );

    std::fs::write(&path, "not json").expect("write");
    let err = Replayer::new("scripted", tmp.path())
        .generate_replayed(&other)
        .await;
    assert!(matches!(err, Err(ReplayError::Corrupt { .. })), "{err:?}");
    // Through the Model trait: an Other error with the same text.
    let Err(ModelError::Other { message }) =
        Replayer::new("scripted", tmp.path()).generate(&other).await
    else {
        panic!("Other");
    };
    assert!(
        message.starts_with("replay: ") && message.contains("is not a recording"),
        "{message}"
    );
}

/// A model agent: render, the model, decide.
struct ModelAgent {
    model: Arc<dyn Model>,
    opts: RenderOptions,
}

impl Agent for ModelAgent {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        Box::pin(async move {
            let req = render::request(input, &self.opts);
            let resp = self
                .model
                .generate(&req)
                .await
                .map_err(AgentError::failed)?;
            Ok(render::decide(&resp))
        })
    }
}

fn tool_reply(text: &str, name: &str, args: &str, raw: &str) -> ModelResponse {
    ModelResponse {
        text: text.into(),
        tool_uses: vec![ToolUse {
            id: format!("toolu_{name}"),
            name: name.into(),
            args: args.into(),
        }],
        stop_reason: Some(StopReason::ToolUse),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 0,
        },
        raw: Some(raw.into()),
    }
}

/// Runs a governed run with a model agent over `model`; returns the run
/// and its steps.
async fn run_with(model: Arc<dyn Model>) -> (Run, Vec<Step>) {
    let store = Store::open(":memory:").expect("store");
    let clock = ManualClock::new(Timestamp::parse("2026-10-01T09:00:00Z").expect("time"))
        .stepping(std::time::Duration::from_secs(1));
    let read = tool_fn(
        ToolSpec::new("read_counter", "Read the counter", SideEffect::ReadOnly),
        |_call| async {
            Ok(ToolResult::raw(r#"{"counter":12345678901234567890}"#).with_summary("counter read"))
        },
    );
    let finish = tool_fn(
        ToolSpec::new("finish", "Finish with a result", SideEffect::ReadOnly).terminal(),
        |call| async move { Ok(ToolResult::raw(call.args.as_str()).with_summary("finished")) },
    );
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(read), Arc::new(finish)];
    let config = GateConfig::new(store.clone(), DefaultPolicy, tools)
        .with_clock(clock.clock())
        .with_ids(sequential_ids("id"));
    let agent = ModelAgent {
        model,
        opts: RenderOptions::new(|input: &StepInput| format!("Goal: {}", input.run.goal))
            .with_max_output_tokens(512),
    };
    let mut driver = Driver::new(config, agent).expect("driver");
    let run = driver
        .start(Some("r1"), "read the <counter> & finish", Limits::default())
        .await
        .expect("run");
    let steps = store.list_steps("r1").expect("steps");
    (run, steps)
}

/// A whole governed conversation recorded over a scripted model replays
/// with identical requests and responses, and the run comes out the same.
#[tokio::test]
async fn a_whole_scripted_conversation_replays_identically() {
    let tmp = tempfile::tempdir().expect("tmp");
    let script = [
        tool_reply(
            "First I read.",
            "read_counter",
            "{}",
            r#"{"id":"m1","content":"<read>"}"#,
        ),
        reply("Hmm, I think I am done.", Some("{\"id\":\"m2\"}")),
        tool_reply("Reading again.", "read_counter", "", "{\"id\":\"m3\"}"),
        tool_reply(
            "Done & dusted.",
            "finish",
            r#"{"counter": 12345678901234567890}"#,
            "{\"id\":\"m4\",\"note\":\"é\"}",
        ),
    ];
    let scripted = Arc::new(Scripted::new(script.clone()));
    let rec = Arc::new(Recorder::new(scripted.clone(), tmp.path()).expect("recorder"));
    let (recorded_run, recorded_steps) = run_with(rec).await;
    assert_eq!(
        recorded_run.status,
        RunStatus::Completed,
        "{recorded_run:?}"
    );
    assert_eq!(
        recorded_run.result.as_ref().map(|r| r.as_str()),
        Some(r#"{"counter":12345678901234567890}"#)
    );
    assert_eq!(scripted.calls(), 4);
    assert_eq!(files(tmp.path()).len(), 4);

    let replayer = Arc::new(Replayer::new("scripted", tmp.path()));
    let (replayed_run, replayed_steps) = run_with(replayer.clone()).await;
    assert!(replayer.misses().is_empty(), "{:?}", replayer.misses());
    assert_eq!(replayed_run, recorded_run);
    assert_eq!(replayed_steps, recorded_steps);
    // Every request the replayer was asked is one the recorder sent, in
    // order: each replayed response is the scripted one, byte for byte.
    for (i, req) in scripted.requests().iter().enumerate() {
        let fresh = Replayer::new("scripted", tmp.path());
        assert_eq!(fresh.replay(req).as_ref(), Ok(&script[i]), "call {i}");
    }
    // The nudge and the summary forms reached the model.
    let last = scripted.requests().pop().expect("requests");
    let texts: Vec<String> = last
        .messages
        .iter()
        .flat_map(|m| m.content.iter().map(|b| format!("{}{}", b.text, b.content)))
        .collect();
    assert!(
        texts.iter().any(|t| t == render::NUDGE_NO_TOOL_CALL),
        "{texts:?}"
    );
}
