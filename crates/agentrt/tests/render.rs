//! render: the conversation a model agent shows its model, and `decide`
//! (design §18; control 74).

use std::sync::Arc;

use agentrt::json::Canonical;
use agentrt::render::{self, RenderOptions};
use agentrt::text::truncate;
use agentrt::*;
use agentrt::{
    llm::BlockKind, llm::ContentBlock, llm::Message, llm::Role, llm::StopReason, llm::ToolUse,
    model::DecisionKind, model::Observation, model::ObservationKind, model::RecordedDecision,
    model::Step, model::StepStatus,
};

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn t0() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").expect("time")
}

fn run() -> Run {
    Run {
        id: "r1".into(),
        goal: "count to <5> & stop".into(),
        status: RunStatus::Running,
        reason: None,
        reason_detail: String::new(),
        limits: Limits::default(),
        labels: Labels::new(),
        step_count: 1,
        created_at: t0(),
        finished_at: None,
        result: None,
        model_calls: 0,
        usage: Usage::default(),
        estimated_cost_micros: 0,
        active_ms: 0,
        decode_error: None,
    }
}

fn step(index: u64, decision: Option<RecordedDecision>, obs: Option<Observation>) -> Step {
    let status = match &obs {
        Some(o) if o.is_failure() => StepStatus::Failed,
        Some(_) => StepStatus::Done,
        None => StepStatus::Interrupted,
    };
    Step {
        id: format!("s{index}"),
        run_id: "r1".into(),
        index,
        status,
        decision,
        policy: None,
        observation: obs,
        started_at: t0(),
        finished_at: None,
        spec_hash: String::new(),
        policy_id: String::new(),
        decode_error: None,
    }
}

fn recorded(d: Decision) -> RecordedDecision {
    RecordedDecision::record(&d).0
}

fn call(tool: &str, args: &str) -> Option<RecordedDecision> {
    Some(recorded(Decision::tool_call(tool, args)))
}

fn ok(content: &str, summary: &str) -> Option<Observation> {
    Some(Observation::new(
        ObservationKind::ToolResult,
        Some(c(content)),
        summary,
    ))
}

fn input(steps: Vec<Step>) -> StepInput {
    let count = steps.len() as u64;
    StepInput {
        run: Run {
            step_count: count + 1,
            ..run()
        },
        steps: Arc::new(steps.into_iter().map(Arc::new).collect()),
        approvals: Arc::new(Vec::new()),
        tools: Arc::new(vec![
            ToolSpec::new("fs_read", "Read a file", SideEffect::ReadOnly)
                .with_schema_str(r#"{"type":"object","properties":{"path":{"type":"string"}}}"#)
                .expect("schema"),
            ToolSpec::new("finish", "Finish with a result", SideEffect::ReadOnly).terminal(),
        ]),
        model: None,
    }
}

fn opts() -> RenderOptions {
    RenderOptions::new(|input: &StepInput| format!("Goal: {}", input.run.goal))
}

/// The single text of a one-text-block message.
fn text_of(m: &Message) -> &str {
    assert_eq!(m.content.len(), 1, "{m:?}");
    &m.content[0].text
}

/// The tool_result block of a user turn.
fn result_of(m: &Message) -> &ContentBlock {
    assert_eq!(m.role, Role::User);
    assert_eq!(m.content.len(), 1, "{m:?}");
    assert_eq!(m.content[0].kind, BlockKind::ToolResult);
    &m.content[0]
}

fn response(text: &str, uses: &[(&str, &str)], stop: Option<StopReason>) -> ModelResponse {
    ModelResponse {
        text: text.into(),
        tool_uses: uses
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolUse {
                id: format!("toolu_{i}"),
                name: (*name).into(),
                args: (*args).into(),
            })
            .collect(),
        stop_reason: stop,
        usage: Usage::default(),
        raw: None,
    }
}

/// Every fixed text of the conversation and of `decide`, pinned: replay
/// keys hash the rendered request, so a changed word breaks every
/// recording.
#[test]
fn every_fixed_text_is_pinned() {
    assert_eq!(render::SUMMARY_PREFIX, "[summary] ");
    assert_eq!(render::EMPTY_SUMMARY, "(no summary)");
    assert_eq!(
        render::INTERRUPTED_TEXT,
        "[interrupted] The outcome of this call is unknown: it was cut short before its result was recorded. Check the current state, and call the tool again if it is still needed."
    );
    assert_eq!(render::ASSISTANT_PLACEHOLDER, "(no text)");
    assert_eq!(
        render::OPERATOR_EDIT_PREFIX,
        "[operator edit] An operator changed this call before it ran. It ran with these arguments instead of yours: "
    );
    assert_eq!(render::OPERATOR_EDIT_NOTE, " Their note: ");
    assert_eq!(
        render::NUDGE_NO_TOOL_CALL,
        "Your last reply did not call a tool, so nothing was done. Reply with exactly one tool call."
    );
    assert_eq!(
        render::NUDGE_TRUNCATED,
        "Your last reply was cut off at the output limit, so nothing was done. Reply with exactly one tool call, and keep it shorter."
    );
    assert_eq!(
        render::NUDGE_GENERIC,
        "Your last reply could not be acted on: "
    );
    assert_eq!(render::REFUSAL_MESSAGE, "the model refused");
    assert_eq!(
        render::CONTEXT_WINDOW_MESSAGE,
        "the conversation outgrew the model's context window"
    );
    assert_eq!(
        (
            render::DEFAULT_RECENT_RESULTS,
            render::DEFAULT_MAX_CONTENT_BYTES,
            render::REASON_BYTES,
            render::NAME_BYTES
        ),
        (6, 24_000, 500, 64)
    );
    let use_of = |name: &str| ToolUse {
        id: String::new(),
        name: name.into(),
        args: String::new(),
    };
    assert_eq!(
        render::extra_calls_note(&[use_of("a"), use_of("b")]).as_deref(),
        Some("[2 more tool calls not executed: a, b]")
    );
    assert_eq!(
        render::truncated_calls_note(&[use_of("a")]).as_deref(),
        Some("[cut off at the output limit: 1 tool call not executed: a]")
    );
}

/// The whole default rendering of a small run, as JSON, and the replay key
/// of its request: any change to the wording or the shape shows here.
#[test]
fn a_rendered_conversation_and_its_replay_key_are_pinned() {
    let steps = vec![
        step(
            0,
            Some(recorded(
                Decision::tool_call("fs_read", r#"{ "path": "a<b>.txt" }"#).with_reason("look"),
            )),
            ok(r#"{"text":"héllo & bye"}"#, "read 1 line"),
        ),
        step(
            1,
            Some(recorded(Decision::new(DecisionKind::NoToolCall))),
            Some(Observation::runtime(
                ObservationKind::InvalidDecision,
                &[("error", "no tool call")],
                "no tool call",
            )),
        ),
        step(2, None, None),
        step(3, call("fs_read", r#"{"path":"b"}"#), None),
    ];
    let req = render::request(&input(steps), &opts().with_system("Be brief."));
    let json = serde_json::to_string(&req.messages).expect("json");
    let want = concat!(
        r#"[{"role":"user","content":[{"type":"text","text":"Goal: count to <5> & stop"}]},"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"look"},{"type":"tool_use","tool_use_id":"step_0","name":"fs_read","input":{"path":"a<b>.txt"}}]},"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"step_0","content":"{\"text\":\"héllo & bye\"}"}]},"#,
        r#"{"role":"assistant","content":[{"type":"text","text":"(no text)"}]},"#,
        r#"{"role":"user","content":[{"type":"text","text":"Your last reply did not call a tool, so nothing was done. Reply with exactly one tool call."}]},"#,
        r#"{"role":"assistant","content":[{"type":"tool_use","tool_use_id":"step_3","name":"fs_read","input":{"path":"b"}}]},"#,
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"step_3","content":"[interrupted] The outcome of this call is unknown: it was cut short before its result was recorded. Check the current state, and call the tool again if it is still needed.","is_error":true}]}]"#,
    );
    assert_eq!(json, want);
    assert_eq!(req.system, "Be brief.");
    assert_eq!(
        replay::key("scripted", &req).expect("key"),
        "0d3b715eb599b4dc0da8d39599af4a9add6096ffa9f7fba742b0f0ed4c47fdbc"
    );
}

#[test]
fn the_request_carries_system_tools_and_output_cap() {
    let req = render::request(&input(vec![]), &opts().with_max_output_tokens(4096));
    assert_eq!(req.messages.len(), 1);
    assert_eq!(req.messages[0].role, Role::User);
    assert_eq!(text_of(&req.messages[0]), "Goal: count to <5> & stop");
    assert_eq!(req.system, "");
    assert_eq!(req.max_output_tokens, Some(4096));
    let names: Vec<&str> = req.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["fs_read", "finish"]);
    assert_eq!(req.tools[0].description, "Read a file");
    assert_eq!(
        req.tools[0].input_schema.as_str(),
        r#"{"properties":{"path":{"type":"string"}},"type":"object"}"#
    );
}

/// The recent window counts rendered steps: decision-less steps are
/// skipped and do not use up a place in it. Ids follow the step index.
#[test]
fn the_window_counts_rendered_steps_and_skips_decision_less_ones() {
    let mut steps = Vec::new();
    for i in 0..12u64 {
        if i % 3 == 2 {
            // Decision-less: crashed while deciding.
            steps.push(step(i, None, None));
        } else {
            let content = format!(r#"{{"n":{i}}}"#);
            steps.push(step(
                i,
                call("fs_read", "{}"),
                ok(&content, &format!("got {i}")),
            ));
        }
    }
    // Decided steps: 0 1 3 4 6 7 9 10 (eight); the last six are 3..=10.
    let msgs = render::messages(&input(steps), &opts());
    assert_eq!(msgs.len(), 1 + 2 * 8);
    let shown: Vec<(String, String)> = msgs[1..]
        .chunks(2)
        .map(|pair| {
            let block = result_of(&pair[1]);
            assert_eq!(pair[0].role, Role::Assistant);
            assert_eq!(pair[0].content[0].tool_use_id, block.tool_use_id);
            (block.tool_use_id.clone(), block.content.clone())
        })
        .collect();
    let want: Vec<(String, String)> = [
        (0, "[summary] got 0"),
        (1, "[summary] got 1"),
        (3, r#"{"n":3}"#),
        (4, r#"{"n":4}"#),
        (6, r#"{"n":6}"#),
        (7, r#"{"n":7}"#),
        (9, r#"{"n":9}"#),
        (10, r#"{"n":10}"#),
    ]
    .iter()
    .map(|(i, s)| (format!("step_{i}"), (*s).to_owned()))
    .collect();
    assert_eq!(shown, want);

    // A smaller window, and a zero window that shows only summaries.
    let steps = (0..4u64)
        .map(|i| step(i, call("fs_read", "{}"), ok("[1]", "one")))
        .collect();
    let input = input(steps);
    let msgs = render::messages(&input, &opts().with_recent_results(1));
    let contents: Vec<&str> = msgs[1..]
        .chunks(2)
        .map(|p| result_of(&p[1]).content.as_str())
        .collect();
    assert_eq!(
        contents,
        ["[summary] one", "[summary] one", "[summary] one", "[1]"]
    );
    let msgs = render::messages(&input, &opts().with_recent_results(0));
    assert!(
        msgs[1..]
            .chunks(2)
            .all(|p| result_of(&p[1]).content == "[summary] one")
    );
}

/// Non-tool steps in the window take a place in it too.
#[test]
fn non_tool_steps_use_a_place_in_the_window() {
    let steps = vec![
        step(0, call("fs_read", "{}"), ok("[0]", "zero")),
        step(
            1,
            Some(recorded(Decision::new(DecisionKind::Truncated))),
            Some(Observation::runtime(
                ObservationKind::InvalidDecision,
                &[],
                "cut",
            )),
        ),
        step(2, call("fs_read", "{}"), ok("[2]", "two")),
    ];
    let msgs = render::messages(&input(steps), &opts().with_recent_results(2));
    assert_eq!(result_of(&msgs[2]).content, "[summary] zero");
    assert_eq!(text_of(&msgs[4]), render::NUDGE_TRUNCATED);
    assert_eq!(result_of(&msgs[6]).content, "[2]");
}

/// Content over `max_content_bytes` is shown by its summary; content of
/// exactly the cap is shown whole (also at the 24 000-byte default).
#[test]
fn content_over_the_cap_becomes_the_summary_form() {
    let at_cap = format!(r#""{}""#, "x".repeat(24_000 - 2));
    let over_cap = format!(r#""{}""#, "x".repeat(24_000 - 1));
    let steps = vec![
        step(0, call("fs_read", "{}"), ok(&at_cap, "exactly the cap")),
        step(1, call("fs_read", "{}"), ok(&over_cap, "one byte over")),
        step(2, call("fs_read", "{}"), ok(r#""é""#, "")),
    ];
    let input = input(steps);
    let msgs = render::messages(&input, &opts());
    assert_eq!(result_of(&msgs[2]).content, at_cap);
    assert_eq!(result_of(&msgs[4]).content, "[summary] one byte over");
    assert_eq!(result_of(&msgs[6]).content, r#""é""#);
    // "é" is two bytes: with a 3-byte cap the 4-byte content is summarised.
    let msgs = render::messages(&input, &opts().with_max_content_bytes(3));
    assert_eq!(result_of(&msgs[6]).content, "[summary] (no summary)");
    let msgs = render::messages(&input, &opts().with_max_content_bytes(4));
    assert_eq!(result_of(&msgs[6]).content, r#""é""#);
}

/// An interrupted step gets the fixed text (whatever its content and
/// window), flagged as an error; so does a decided step with no
/// observation.
#[test]
fn interrupted_steps_get_the_fixed_text() {
    let mut interrupted = step(
        0,
        call("deploy", "{}"),
        Some(Observation::runtime(
            ObservationKind::Interrupted,
            &[("detail", "crashed")],
            "interrupted",
        )),
    );
    interrupted.status = StepStatus::Interrupted;
    let mut marked = step(1, call("deploy", "{}"), ok("[1]", "one"));
    marked.status = StepStatus::Interrupted;
    let missing = step(2, call("deploy", "{}"), None);
    let msgs = render::messages(&input(vec![interrupted, marked, missing]), &opts());
    for turn in [&msgs[2], &msgs[4], &msgs[6]] {
        let block = result_of(turn);
        assert_eq!(block.content, render::INTERRUPTED_TEXT);
        assert!(block.is_error);
    }
}

/// `is_error` is set exactly when the observation is a failure; failures
/// in the window show their content.
#[test]
fn failures_are_flagged_and_show_their_content() {
    let denied = Observation::runtime(
        ObservationKind::PolicyDenied,
        &[("reason", "no deletes")],
        "denied",
    );
    let tool_error = Observation::runtime(ObservationKind::ToolError, &[("error", "boom")], "boom");
    let steps = vec![
        step(0, call("rm", "{}"), Some(denied)),
        step(1, call("fs_read", "{}"), Some(tool_error)),
        step(2, call("fs_read", "{}"), ok("true", "ok")),
    ];
    let msgs = render::messages(&input(steps), &opts());
    let results: Vec<(&str, bool)> = [2, 4, 6]
        .iter()
        .map(|&i| {
            let b = result_of(&msgs[i]);
            (b.content.as_str(), b.is_error)
        })
        .collect();
    assert_eq!(
        results,
        [
            (r#"{"reason":"no deletes"}"#, true),
            (r#"{"error":"boom"}"#, true),
            ("true", false)
        ]
    );
}

/// Steps that are not tool calls: the assistant turn is the reason or the
/// placeholder; the user turn a nudge keyed on the kind.
#[test]
fn non_tool_steps_get_a_nudge_keyed_on_their_kind() {
    let invalid = |summary: &str| {
        Some(Observation::runtime(
            ObservationKind::InvalidDecision,
            &[],
            summary,
        ))
    };
    let mut other = Decision::new(DecisionKind::Other("launch".into()));
    other.reason = "why not".into();
    let steps = vec![
        step(
            0,
            Some(recorded(
                Decision::new(DecisionKind::NoToolCall).with_reason("All done, I think."),
            )),
            invalid("no tool call"),
        ),
        step(
            1,
            Some(recorded(Decision::new(DecisionKind::Truncated))),
            invalid("cut off"),
        ),
        step(
            2,
            Some(recorded(Decision::complete("{not json"))),
            invalid("the result is not JSON"),
        ),
        step(3, Some(recorded(other)), invalid("")),
    ];
    let msgs = render::messages(&input(steps), &opts());
    let turns: Vec<(Role, &str)> = msgs[1..].iter().map(|m| (m.role, text_of(m))).collect();
    assert_eq!(
        turns,
        [
            (Role::Assistant, "All done, I think."),
            (Role::User, render::NUDGE_NO_TOOL_CALL),
            (Role::Assistant, "(no text)"),
            (Role::User, render::NUDGE_TRUNCATED),
            (Role::Assistant, "(no text)"),
            (
                Role::User,
                "Your last reply could not be acted on: the result is not JSON"
            ),
            (Role::Assistant, "why not"),
            (
                Role::User,
                "Your last reply could not be acted on: (no summary)"
            ),
        ]
    );
}

/// A tool call with refused arguments is shown with `{}`; the reason comes
/// first as text.
#[test]
fn tool_calls_show_canonical_args_or_an_empty_object() {
    let steps = vec![
        step(
            0,
            Some(recorded(
                Decision::tool_call("fs_read", "{broken").with_reason("try"),
            )),
            Some(Observation::runtime(
                ObservationKind::InvalidDecision,
                &[],
                "bad args",
            )),
        ),
        step(
            1,
            call("fs_read", r#"{"b":1.50,"a":12345678901234567890}"#),
            ok("1", ""),
        ),
    ];
    let msgs = render::messages(&input(steps), &opts());
    assert_eq!(msgs[1].content.len(), 2);
    assert_eq!(msgs[1].content[0].text, "try");
    assert_eq!(
        msgs[1].content[1].input.as_ref().map(|c| c.as_str()),
        Some("{}")
    );
    assert_eq!(msgs[3].content.len(), 1);
    assert_eq!(
        msgs[3].content[0].input.as_ref().map(|c| c.as_str()),
        Some(r#"{"a":12345678901234567890,"b":1.50}"#)
    );
}

/// Each hook replaces its part; a hook returning `None` falls back to the
/// default.
#[test]
fn hooks_are_honoured_and_fall_back_to_the_defaults() {
    let steps = (0..3u64)
        .map(|i| step(i, call("fs_read", "{}"), ok("[1]", "one")))
        .collect();
    let input = input(steps);
    let opts = opts()
        .with_tool_use_id(|s: &Step| (s.index == 1).then(|| "call-one".to_owned()))
        .with_assistant_turn(|v: &render::RenderedStep<'_>| {
            (v.step.index == 0).then(|| Message {
                role: Role::Assistant,
                content: vec![ContentBlock::text(format!(
                    "raw turn for {}",
                    v.tool_use_id
                ))],
            })
        })
        .with_observation(|v: &render::RenderedStep<'_>| {
            (v.step.index == 2).then(|| {
                let mut m = render::default_observation(v);
                m.content[0].content = format!("recent={} {}", v.recent, m.content[0].content);
                m
            })
        });
    let msgs = render::messages(&input, &opts);
    assert_eq!(text_of(&msgs[1]), "raw turn for step_0");
    assert_eq!(result_of(&msgs[2]).tool_use_id, "step_0");
    assert_eq!(msgs[3].content[0].tool_use_id, "call-one");
    assert_eq!(result_of(&msgs[4]).tool_use_id, "call-one");
    assert_eq!(result_of(&msgs[4]).content, "[1]");
    assert_eq!(msgs[5].content[0].tool_use_id, "step_2");
    assert_eq!(result_of(&msgs[6]).content, "recent=true [1]");
}

/// Rendering is a pure function of the input: twice gives the same bytes.
#[test]
fn rendering_twice_gives_identical_requests() {
    let steps = vec![step(
        0,
        call("fs_read", r#"{"path":"a"}"#),
        ok("[1]", "one"),
    )];
    let input = input(steps);
    let a = serde_json::to_vec(&render::request(&input, &opts())).expect("json");
    let b = serde_json::to_vec(&render::request(&input.clone(), &opts())).expect("json");
    assert_eq!(a, b);
}

// ---- decide ----

#[test]
fn decide_end_turn_and_tool_use_take_the_first_tool_use() {
    for stop in [
        Some(StopReason::EndTurn),
        Some(StopReason::ToolUse),
        Some(StopReason::Other("pause_turn".into())),
        None,
    ] {
        let d = render::decide(&response(
            "\n  Reading.  \n",
            &[("fs_read", r#"{ "path" : "a", "n": 1.0 }"#)],
            stop.clone(),
        ));
        assert_eq!(d.kind, DecisionKind::ToolCall, "{stop:?}");
        assert_eq!(d.tool, "fs_read");
        // The arguments exactly as the model wrote them.
        assert_eq!(
            d.args.as_deref(),
            Some(br#"{ "path" : "a", "n": 1.0 }"#.as_slice())
        );
        assert_eq!(d.reason, "Reading.");
        assert_eq!(d.origin, "model");
    }
}

#[test]
fn decide_without_a_tool_use_is_no_tool_call() {
    for stop in [Some(StopReason::EndTurn), Some(StopReason::ToolUse), None] {
        let d = render::decide(&response(" I am done. ", &[], stop));
        assert_eq!(d.kind, DecisionKind::NoToolCall);
        assert_eq!(d.reason, "I am done.");
        assert_eq!(d.tool, "");
        assert_eq!(d.args, None);
        assert_eq!(d.origin, "model");
    }
}

#[test]
fn decide_max_tokens_is_truncated_and_never_runs_the_partial_call() {
    let d = render::decide(&response(
        "Writing",
        &[("fs_write", r#"{"path":"a","text":"hel"#)],
        Some(StopReason::MaxTokens),
    ));
    assert_eq!(d.kind, DecisionKind::Truncated);
    assert_eq!((d.tool.as_str(), d.args.as_ref()), ("", None));
    assert_eq!(
        d.reason,
        "Writing\n[cut off at the output limit: 1 tool call not executed: fs_write]"
    );
    assert_eq!(d.origin, "model");
    let d = render::decide(&response("", &[], Some(StopReason::MaxTokens)));
    assert_eq!((d.kind, d.reason.as_str()), (DecisionKind::Truncated, ""));
}

#[test]
fn decide_refusal_and_window_exceeded_fail() {
    let d = render::decide(&response(
        " No. ",
        &[("rm", "{}")],
        Some(StopReason::Refusal),
    ));
    assert_eq!(d.kind, DecisionKind::Fail);
    assert_eq!(d.message, render::REFUSAL_MESSAGE);
    assert_eq!((d.reason.as_str(), d.tool.as_str()), ("No.", ""));
    assert_eq!(d.origin, "model");
    let d = render::decide(&response(
        "",
        &[],
        Some(StopReason::ModelContextWindowExceeded),
    ));
    assert_eq!(d.kind, DecisionKind::Fail);
    assert_eq!(d.message, render::CONTEXT_WINDOW_MESSAGE);
    assert_eq!(d.origin, "model");
}

#[test]
fn decide_names_the_unexecuted_extra_calls() {
    let d = render::decide(&response(
        "Three at once.",
        &[("a", "{}"), ("b", "{}"), ("c", "{}")],
        Some(StopReason::ToolUse),
    ));
    assert_eq!(d.tool, "a");
    assert_eq!(
        d.reason,
        "Three at once.\n[2 more tool calls not executed: b, c]"
    );
    let d = render::decide(&response("", &[("a", "{}"), ("b", "{}")], None));
    assert_eq!(d.reason, "[1 more tool call not executed: b]");
}

/// The cap applies after composing: a long text plus many long names
/// still gives at most 500 bytes, cut on a character boundary, with each
/// name cut to `NAME_BYTES` and the note's count kept.
#[test]
fn decide_caps_the_reason_after_composing() {
    let text = "日本語".repeat(100); // 900 bytes
    let long_name = format!("{}é", "n".repeat(99)); // 101 bytes
    let mut uses: Vec<(&str, &str)> = vec![("first", "{}")];
    uses.extend(std::iter::repeat_n((long_name.as_str(), "{}"), 30));
    let d = render::decide(&response(&text, &uses, Some(StopReason::ToolUse)));
    assert!(d.reason.len() <= render::REASON_BYTES, "{}", d.reason.len());
    assert!(d.reason.len() > render::REASON_BYTES - 4);
    // Half of the reason is left to the text, cut on a character boundary.
    let (head, note) = d.reason.split_once('\n').expect("text and note");
    assert_eq!(head, truncate(&text, render::REASON_BYTES / 2));
    assert!(head.ends_with("…"));
    assert!(note.starts_with("[30 more tool calls not executed: "));
    let cut_name = truncate(&long_name, render::NAME_BYTES);
    assert_eq!(cut_name, format!("{}…", "n".repeat(61))); // 64 bytes
    assert!(note.contains(&format!("{cut_name}, {cut_name}")));
    assert!(note.ends_with("…"));

    // A long text with a short note keeps the whole note.
    let d = render::decide(&response(&text, &[("a", "{}"), ("b", "{}")], None));
    assert!(d.reason.len() <= render::REASON_BYTES);
    assert!(d.reason.ends_with("\n[1 more tool call not executed: b]"));
    // Without extra calls, only the text is cut.
    let d = render::decide(&response(&text, &[("a", "{}")], None));
    assert_eq!(d.reason, truncate(&text, render::REASON_BYTES));
    assert!(d.reason.len() <= render::REASON_BYTES);
}
