//! The view's renderings: the bounded-field marker, bounded approvals, the
//! approval text block, the JSON shapes of summaries, and the event record
//! and trace line (design §18; control 72).

use agentrt::json::Canonical;
use agentrt::model::StepStatus;
use agentrt::view::{self, BlockOptions, RunSummary, StepSummary};
use agentrt::*;

fn c(text: &str) -> Canonical {
    Canonical::parse_str(text).expect("canonical")
}

fn t(text: &str) -> Timestamp {
    Timestamp::parse(text).expect("time")
}

fn approval() -> Approval {
    Approval {
        id: "a1".into(),
        run_id: "r1".into(),
        step_id: "s1".into(),
        kind: "remote_mutation".into(),
        capability: c(r#"{"args":{"n":7,"ref":"refs/heads/main"},"tool":"push"}"#),
        presentation: c(
            r#"{"title":"Publish <PR> & tag\u001b[2J \u202e","nested":{"list":[1,2.50,{}],"empty":[]},"lines":1.0}"#,
        ),
        request: c(
            r#"{"args":{"n":7,"ref":"refs/heads/main"},"run_id":"r1","spec":{"name":"push","description":"push <main> & tag","input_schema":{"type":"object"},"side_effect":"remote_mutation","timeout_ms":30000},"step_id":"s1"}"#,
        ),
        hash: "ab".repeat(32),
        status: ApprovalStatus::Pending,
        created_at: t("2026-10-01T09:00:00Z"),
        expires_at: Some(t("2026-10-01T10:00:00Z")),
        decided_at: None,
        decided_by: String::new(),
        note: String::new(),
        decode_error: None,
    }
}

fn utc(ts: &Timestamp) -> String {
    ts.to_string()
}

/// The marker text is a stable fact: head, `…[N bytes omitted]…`, tail.
#[test]
fn the_bytes_omitted_marker_is_pinned() {
    let s = format!(
        "{}{}{}",
        "h".repeat(1000),
        "m".repeat(3000),
        "t".repeat(1000)
    );
    assert_eq!(
        view::bound_text(&s),
        format!(
            "{}…[3000 bytes omitted]…{}",
            "h".repeat(1000),
            "t".repeat(1000)
        )
    );
    // At the limit nothing changes; one byte more is bounded.
    let exact = "x".repeat(view::MAX_FIELD_BYTES);
    assert_eq!(view::bound_text(&exact), exact);
    let over = "x".repeat(view::MAX_FIELD_BYTES + 1);
    assert_eq!(
        view::bound_text(&over),
        format!(
            "{}…[1 bytes omitted]…{}",
            "x".repeat(1000),
            "x".repeat(1000)
        )
    );
    // Cuts never split a character.
    let wide = "日".repeat(1000); // 3000 bytes
    let bounded = view::bound_text(&wide);
    assert!(bounded.starts_with(&"日".repeat(333)));
    assert!(bounded.contains("…[1002 bytes omitted]…"));
}

#[test]
fn bound_approval_bounds_strings_and_never_the_hash() {
    let mut a = approval();
    let long = "y".repeat(5000);
    a.presentation = c(&format!(r#"{{"body":"{long}","n":1.50}}"#));
    a.request = c(&format!(
        r#"{{"args":{{"body":"{long}"}},"spec":{{"name":"push"}}}}"#
    ));
    let b = view::bound_approval(&a);
    assert_eq!(b.hash, a.hash);
    assert_eq!(b.id, a.id);
    assert_eq!(b.capability, a.capability);
    let expected_body = format!(
        "{}…[3000 bytes omitted]…{}",
        "y".repeat(1000),
        "y".repeat(1000)
    );
    let mut want = String::new();
    agentrt::json::write_string(&mut want, &expected_body);
    assert_eq!(
        b.presentation.as_str(),
        format!(r#"{{"body":{want},"n":1.50}}"#)
    );
    assert!(b.request.as_str().contains("[3000 bytes omitted]"));
    // The bounded JSON form keeps every field of the approval.
    let json: serde_json::Value = serde_json::to_value(&b).expect("json");
    assert_eq!(json["hash"], a.hash.as_str());
    assert_eq!(json["status"], "pending");
    assert_eq!(json["expires_at"], "2026-10-01T10:00:00.000000000Z");
    assert!(json.get("decided_at").is_none());
}

#[test]
fn the_approval_block_is_pinned() {
    let a = approval();
    let block = view::approval_block(
        &a,
        &BlockOptions {
            db_path: Some("/tmp/my db/agentrt.db"),
            stamp: &utc,
        },
    );
    let want = r#"
APPROVAL WAITING  a1
kind    remote_mutation
tool    push
expires 2026-10-01T10:00:00.000000000Z
arguments (the tool call the model made; one field per line, byte count is the field's own size)
  n (1 bytes)
    7
  ref (17 bytes)
    "refs/heads/main"
presentation (supplied by the consumer's policy; it may contain model-chosen text)
  lines (3 bytes)
    1.0
  nested (31 bytes)
    {
      "empty": [],
      "list": [
        1,
        2.50,
        {}
      ]
    }
  title (33 bytes)
    "Publish <PR> & tag\u001b[2J \u{202e}"
decide with: agentrt --db "/tmp/my db/agentrt.db" approve r1 --approval a1
----- end of approval a1 for tool push -----
"#;
    assert_eq!(block, want);
}

#[test]
fn the_block_shows_unread_rows_and_odd_shapes() {
    let mut a = approval();
    a.id = "a2\u{1b}[2J".into();
    a.status = ApprovalStatus::Approved;
    a.expires_at = None;
    a.request = c(r#"{"args":[1,"two"],"spec":{}}"#);
    a.presentation = c("{}");
    a.decode_error = Some("presentation_json: bad\nline".into());
    let block = view::approval_block(
        &a,
        &BlockOptions {
            db_path: None,
            stamp: &utc,
        },
    );
    let want = r#"
APPROVAL APPROVED  a2\x1b[2J
kind    remote_mutation
tool    -
unread  presentation_json: bad line
arguments (the tool call the model made; one field per line, byte count is the field's own size)
  value (9 bytes)
    [
      1,
      "two"
    ]
presentation (supplied by the consumer's policy; it may contain model-chosen text)
  (no fields)
----- end of approval a2\x1b[2J for tool - -----
"#;
    assert_eq!(block, want);

    a.request = c(r#"{"spec":{"name":"push"}}"#);
    a.presentation = Canonical::null();
    let block = view::approval_block(
        &a,
        &BlockOptions {
            db_path: None,
            stamp: &utc,
        },
    );
    assert!(block.contains("byte count is the field's own size)\n  (none)\npresentation"));
    assert!(block.contains("model-chosen text)\n  (none)\n-----"));
}

#[test]
fn a_long_argument_is_bounded_in_the_block_and_the_closing_line_stays_last() {
    let mut a = approval();
    a.request = c(&format!(
        r#"{{"args":{{"body":"{}"}},"spec":{{"name":"push"}}}}"#,
        "z".repeat(5000)
    ));
    let block = view::approval_block(
        &a,
        &BlockOptions {
            db_path: Some("db"),
            stamp: &utc,
        },
    );
    assert!(block.contains("  body (5002 bytes)\n"));
    assert!(block.contains("…[3000 bytes omitted]…"));
    assert!(block.ends_with("----- end of approval a1 for tool push -----\n"));
    assert!(block.lines().all(|l| l.len() < 2100));
}

#[test]
fn summaries_serialize_with_the_spec_fields_and_omissions() {
    let minimal = RunSummary {
        id: "r1".into(),
        goal: "a <b> & c".into(),
        labels: Labels::new(),
        status: RunStatus::WaitingForApproval,
        reason: None,
        reason_detail: String::new(),
        steps: 1,
        created_at: t("2026-10-01T09:00:00Z"),
        finished_at: None,
        pending_approval_id: Some("a1".into()),
        model_calls: 0,
        usage: Usage::default(),
        estimated_cost_micros: 0,
    };
    assert_eq!(
        serde_json::to_string(&minimal).expect("json"),
        r#"{"id":"r1","goal":"a <b> & c","status":"WAITING_FOR_APPROVAL","steps":1,"created_at":"2026-10-01T09:00:00.000000000Z","pending_approval_id":"a1"}"#
    );
    let full = RunSummary {
        labels: Labels::parse(["host=build-7", "env=prod"]).expect("labels"),
        status: RunStatus::Failed,
        reason: Some(TerminalReason::LimitCost),
        reason_detail: "over budget".into(),
        finished_at: Some(t("2026-10-01T09:05:00Z")),
        pending_approval_id: None,
        model_calls: 3,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 0,
        },
        estimated_cost_micros: 1234,
        ..minimal
    };
    assert_eq!(
        serde_json::to_string(&full).expect("json"),
        r#"{"id":"r1","goal":"a <b> & c","labels":{"env":"prod","host":"build-7"},"status":"FAILED","reason":"limit_cost","reason_detail":"over budget","steps":1,"created_at":"2026-10-01T09:00:00.000000000Z","finished_at":"2026-10-01T09:05:00.000000000Z","model_calls":3,"usage":{"input_tokens":10,"output_tokens":5,"cached_input_tokens":0},"estimated_cost_micros":1234}"#
    );
    let step = StepSummary {
        index: 0,
        id: "s1".into(),
        tool: String::new(),
        decision: String::new(),
        status: StepStatus::Deciding,
        policy: String::new(),
        observation: String::new(),
        summary: String::new(),
        decode_error: Some("hidden from JSON".into()),
    };
    assert_eq!(
        serde_json::to_string(&step).expect("json"),
        r#"{"index":0,"id":"s1","status":"deciding"}"#
    );
}

fn event(payload: &str) -> Event {
    Event {
        seq: 42,
        run_id: "r1".into(),
        step_id: "s1".into(),
        at: "2026-10-01T09:00:00.123456789Z".into(),
        event_type: EventType::ApprovalRequested,
        payload: payload.into(),
    }
}

#[test]
fn the_event_record_is_pinned_and_byte_stable() {
    let e = event("{ \"b\" : [1, 2.50],\n \"a\": \"<x> & \u{2028}\" }");
    let record = view::event_record(&e);
    assert_eq!(
        record,
        "{\"seq\":42,\"run_id\":\"r1\",\"step_id\":\"s1\",\"at\":\"2026-10-01T09:00:00.123456789Z\",\"type\":\"approval.requested\",\"payload\":{\"b\":[1,2.50],\"a\":\"<x> & \u{2028}\"}}"
    );
    assert_eq!(view::event_record(&e), record);
    assert!(!record.contains('\n'));

    let mut no_step = event("");
    no_step.step_id.clear();
    assert_eq!(
        view::event_record(&no_step),
        r#"{"seq":42,"run_id":"r1","at":"2026-10-01T09:00:00.123456789Z","type":"approval.requested","payload":{}}"#
    );
}

#[test]
fn an_invalid_payload_is_kept_as_a_flagged_string() {
    for bad in [r#"{"a":"#, r#"{"a":1,"a":2}"#, "not json\n\u{1b}"] {
        let record = view::event_record(&event(bad));
        let v: serde_json::Value = serde_json::from_str(&record).expect("record is JSON");
        assert_eq!(v["payload"], bad);
        assert_eq!(v["invalid_payload"], true);
        assert!(!record.contains('\n'));
    }
}

#[test]
fn the_trace_line_pads_the_type_and_caps_the_payload() {
    let e = event(r#"{"say":"hi"}"#);
    assert_eq!(
        view::event_line(&e, "2026-10-01 11:00:00.123 +0200"),
        "2026-10-01 11:00:00.123 +0200  approval.requested     {\"say\":\"hi\"}"
    );
    let big = event(&format!("{}\u{1b}", "x".repeat(9000)));
    let line = view::event_line(&big, "STAMP");
    assert!(line.starts_with(&format!(
        "STAMP  approval.requested     {}",
        "x".repeat(7977)
    )));
    // 9000 x and `\x1b` (4 bytes) sanitized: 9004 bytes, 8000 shown.
    assert!(line.ends_with("x...[1004 more bytes]"));
    let with = view::event_line_with(&e, |ts| format!("<{}>", ts.as_unix_nanos()));
    assert!(with.starts_with("<1790845200123456789>  approval.requested"));
    let mut odd = event("{}");
    odd.at = "yesterday\u{7}".into();
    assert!(view::event_line_with(&odd, |_| String::new()).starts_with("yesterday\\x07  "));
}

#[test]
fn pretty_json_lines_up_nested_braces() {
    assert_eq!(
        view::pretty_json(r#"{"a":{"b":[1,{"c":null}]},"d":"}{,:"}"#),
        "{\n  \"a\": {\n    \"b\": [\n      1,\n      {\n        \"c\": null\n      }\n    ]\n  },\n  \"d\": \"}{,:\"\n}"
    );
}
