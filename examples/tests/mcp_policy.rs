//! The mcp example's policy, without Node: reads pass, a file write goes
//! to an operator who is shown its path, size and a bounded preview, and
//! nothing else passes.

#[path = "../mcp/demo.rs"]
#[allow(dead_code)]
mod demo;

use agentrt::testkit::policy_check::{PolicyCase, check_policy};
use agentrt::{Outcome, SideEffect, ToolSpec};

#[test]
fn reads_pass_writes_ask_and_everything_else_is_denied() {
    let schema = r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path"]}"#;
    let tools = [
        ToolSpec::new("fs_read_text_file", "", SideEffect::ReadOnly)
            .with_schema_str(schema)
            .unwrap(),
        ToolSpec::new("fs_write_file", "", SideEffect::LocalMutation)
            .with_schema_str(schema)
            .unwrap(),
        ToolSpec::new("fs_move_file", "", SideEffect::Destructive),
        ToolSpec::new("upload", "", SideEffect::RemoteMutation),
        ToolSpec::new("finish", "", SideEffect::ReadOnly).terminal(),
    ];
    let cases = [
        PolicyCase::new(
            "a read passes",
            "fs_read_text_file",
            r#"{"path":"notes/monday.md"}"#,
            Outcome::Allow,
        ),
        PolicyCase::new(
            "a write asks",
            "fs_write_file",
            r#"{"path":"todo.md","content":"x\n"}"#,
            Outcome::RequireApproval,
        ),
        PolicyCase::new(
            "a destructive call is denied",
            "fs_move_file",
            "{}",
            Outcome::Deny,
        ),
        PolicyCase::new("a remote change is denied", "upload", "{}", Outcome::Deny),
        PolicyCase::new("finish passes", "finish", "{}", Outcome::Allow),
    ];
    if let Err(table) = check_policy(&demo::FileWriteAsks, &tools, &cases) {
        panic!("{table}");
    }
}

#[test]
fn the_operator_sees_the_path_the_size_and_a_bounded_preview() {
    let content = "# Open tasks\n\nMonday:\n- order the cake\n\nTuesday:\n- pick up the cake\n";
    let shown = demo::presentation("fs_write_file", "todo.md", content);
    assert_eq!(shown["path"], "todo.md");
    assert_eq!(shown["lines"], 7);
    assert_eq!(shown["bytes"], content.len());
    assert_eq!(
        shown["preview"],
        "# Open tasks\n\nMonday:\n- order the cake\n…"
    );
    assert_eq!(
        shown["question"],
        "Let the agent write 7 line(s), 68 bytes, to todo.md?"
    );
}

#[test]
fn a_preview_is_whole_when_short_and_cut_on_a_character_when_long() {
    assert_eq!(demo::preview("a\nb\n"), "a\nb");
    assert_eq!(demo::preview(""), "");
    let long = "é".repeat(500);
    let cut = demo::preview(&long);
    assert!(cut.len() <= demo::PREVIEW_BYTES, "{}", cut.len());
    assert!(cut.ends_with('…') && cut.starts_with("éé"), "{cut}");
    let lines = "line\n".repeat(20);
    assert_eq!(demo::preview(&lines), "line\nline\nline\nline\nline…");
}
