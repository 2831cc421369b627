//! A call's arguments and its mapped result (design §27), without a
//! server.

use std::time::Duration;

use agentrt::{Canonical, SideEffect, ToolError, ToolSpec};
use agentrt_mcp::*;

fn tool(deny: &[&str], fixed: &[(&str, &str)]) -> OfferedTool {
    let mut rule = Rule::new(SideEffect::LocalMutation).with_timeout(Duration::from_secs(5));
    rule.deny = deny.iter().map(|d| (*d).to_owned()).collect();
    rule.fixed = fixed
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Canonical::parse_str(v).expect("json")))
        .collect();
    OfferedTool {
        upstream: "write_file".into(),
        spec: ToolSpec::new("fs_write", "Writes.", SideEffect::LocalMutation),
        rule,
    }
}

fn message(e: ToolError) -> String {
    match e {
        ToolError::Failed { message } => message,
        other => panic!("not a plain tool error: {other:?}"),
    }
}

#[test]
fn arguments_are_checked_against_the_rule_and_fixed_values_injected() {
    let t = tool(&["force"], &[("root", r#""/srv""#), ("mode", "420")]);
    assert_eq!(
        call_arguments(&t, b"  ").expect("empty").as_str(),
        r#"{"mode":420,"root":"/srv"}"#
    );
    assert_eq!(
        call_arguments(&t, br#"{"path":"a","z":[1,2]}"#)
            .expect("args")
            .as_str(),
        r#"{"mode":420,"path":"a","root":"/srv","z":[1,2]}"#
    );
    let fixed = message(call_arguments(&t, br#"{"root":"/"}"#).expect_err("fixed"));
    assert_eq!(
        fixed,
        r#"fs_write: parameter "root" is fixed by the operator"#
    );
    let denied = message(call_arguments(&t, br#"{"force":true}"#).expect_err("denied"));
    assert_eq!(
        denied,
        r#"fs_write: parameter "force" is denied by the operator"#
    );
    for bad in [&b"[1]"[..], b"\"a\"", b"{", br#"{"a":1,"a":2}"#] {
        let e = message(call_arguments(&t, bad).expect_err("not an object"));
        assert!(e.starts_with("fs_write: "), "{e}");
    }
}

#[test]
fn arguments_the_protocol_library_would_rewrite_are_refused_not_sent_changed() {
    let t = tool(&[], &[]);
    for sent_as_is in [
        r#"{"n":100}"#,
        r#"{"n":1.5}"#,
        r#"{"n":1.0}"#,
        r#"{"n":-3}"#,
        r#"{"n":18446744073709551615}"#,
        r#"{"s":"é\u0001<>"}"#,
    ] {
        let sent = call_arguments(&t, sent_as_is.as_bytes()).expect(sent_as_is);
        assert_eq!(
            sent.as_str(),
            Canonical::parse_str(sent_as_is).expect("json").as_str()
        );
    }
    for rewritten in [
        r#"{"n":1e2}"#,
        r#"{"n":1.50}"#,
        r#"{"n":0.1e1}"#,
        r#"{"n":100000000000000000000}"#,
        r#"{"n":-0}"#,
    ] {
        let e = message(call_arguments(&t, rewritten.as_bytes()).expect_err(rewritten));
        assert!(
            e.contains("would not reach the server as approved"),
            "{rewritten}: {e}"
        );
    }
}

#[test]
fn structured_content_that_fits_is_recorded_as_sent() {
    let r = map_result(
        "fs",
        "stat",
        r#"{"content":[{"type":"text","text":"{}"}],"structuredContent":{"size":9007199254740993,"name":"a"}}"#,
        1024,
    )
    .expect("result");
    assert_eq!(r.content, br#"{"name":"a","size":9007199254740993}"#);
    assert_eq!(r.summary, "fs/stat: 36 bytes");
}

#[test]
fn content_blocks_are_joined_and_other_kinds_named() {
    let r = map_result(
        "fs",
        "t",
        r#"{"content":[{"type":"text","text":"a"},{"type":"image","data":"x","mimeType":"image/png"},
            {"type":"audio"},{"type":"resource_link"},{"type":"resource"},{"type":"video"}]}"#,
        1024,
    )
    .expect("result");
    let text: String = serde_json::from_slice(&r.content).expect("a JSON string");
    assert_eq!(
        text,
        "a\n[image omitted]\n[audio omitted]\n[resource link omitted]\n[embedded resource omitted]\n[content omitted]"
    );
}

#[test]
fn too_much_is_cut_or_dropped_and_the_summary_says_so() {
    let long = "x".repeat(100);
    let r = map_result(
        "fs",
        "t",
        &format!(r#"{{"content":[{{"type":"text","text":"{long}"}}]}}"#),
        40,
    )
    .expect("result");
    assert_eq!(r.content.len(), 40);
    assert_eq!(r.summary, "fs/t: 40 bytes, truncated");
    let text: String = serde_json::from_slice(&r.content).expect("string");
    assert!(text.ends_with("\n[truncated]"));

    let big = format!(r#"{{"blob":"{long}"}}"#);
    let r = map_result(
        "fs",
        "t",
        &format!(r#"{{"content":[{{"type":"text","text":"short"}}],"structuredContent":{big}}}"#),
        40,
    )
    .expect("result");
    assert_eq!(r.content, br#""short""#);
    assert_eq!(
        r.summary,
        format!(
            "fs/t: 7 bytes, truncated, structured content of {} bytes dropped for the text",
            big.len()
        )
    );

    let r =
        map_result("fs", "t", &format!(r#"{{"structuredContent":{big}}}"#), 50).expect("result");
    assert_eq!(r.content, br#""[structured content dropped: too large]""#);
}

#[test]
fn an_error_result_is_a_tool_error_with_its_text() {
    let e = map_result(
        "fs",
        "write_file",
        r#"{"content":[{"type":"text","text":"Access denied - path outside allowed directories"}],"isError":true}"#,
        1024,
    )
    .expect_err("isError");
    assert_eq!(
        message(e),
        "fs/write_file: 50 bytes, error: Access denied - path outside allowed directories"
    );
}

#[test]
fn a_result_that_cannot_be_read_is_an_unknown_outcome() {
    for unreadable in ["[]", r#"{"content":[],"content":[]}"#, "{"] {
        match map_result("fs", "t", unreadable, 1024) {
            Err(ToolError::Unknown { message }) => {
                assert!(message.starts_with("fs/t: "), "{message}");
                assert!(
                    message.ends_with("what the server did is not known"),
                    "{message}"
                );
            }
            other => panic!("{unreadable}: the server answered, not with a result: {other:?}"),
        }
    }
}
