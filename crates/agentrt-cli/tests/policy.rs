//! `agentrt policy check` and `agentrt policy test`: a Cedar policy
//! validated against the tools it decides, and put to a table of requests
//! with the outcomes expected (exit 1 naming each mismatch), without a
//! database.

mod support;

use std::path::Path;

use support::agentrt_raw;

const TOOLS: &str = r#"[
  {"name": "write_file", "description": "Write a file", "side_effect": "local_mutation", "timeout_ms": 5000,
   "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]}},
  {"name": "move_file", "description": "Move a file", "side_effect": "destructive", "timeout_ms": 5000,
   "input_schema": {"type": "object", "properties": {"source": {"type": "string"}, "destination": {"type": "string"}}, "required": ["source", "destination"]}},
  {"name": "push", "description": "Push a branch", "side_effect": "remote_mutation", "timeout_ms": 5000,
   "input_schema": {"type": "object", "properties": {"branch": {"type": "string"}}, "required": ["branch"]}}
]"#;

const POLICY: &str = r#"
@id("drafts")
permit(principal, action == Agentrt::Action::"write_file", resource)
when { context.args.path like "notes/drafts/*" && context.run.calls_of_tool < 20 };

@id("other-writes")
@approval("a write outside drafts")
permit(principal, action == Agentrt::Action::"write_file", resource)
unless { context.args.path like "notes/drafts/*" };

@id("no-moves")
forbid(principal, action == Agentrt::Action::"move_file", resource);

@id("main-asks")
@approval("a push to main")
permit(principal, action == Agentrt::Action::"push", resource)
when { context.args.branch == "main" };

@id("release-pushes")
permit(principal in Agentrt::Caller::"release", action == Agentrt::Action::"push", resource)
when { context.labels.contains("group=release") };
"#;

const CASES: &str = r#"[
  {"name": "a draft", "tool": "write_file", "args": {"path": "notes/drafts/a.md"}, "expect": "allow"},
  {"name": "elsewhere", "tool": "write_file", "args": {"path": "src/main.rs"}, "expect": "require_approval",
   "reason_contains": "outside drafts"},
  {"name": "the 21st draft", "tool": "write_file", "args": {"path": "notes/drafts/b.md"},
   "run": {"calls_of_tool": 20}, "expect": "deny"},
  {"name": "a move", "tool": "move_file", "args": {"source": "a", "destination": "b"}, "expect": "deny",
   "reason_contains": "no-moves"},
  {"name": "main", "tool": "push", "args": {"branch": "main"}, "expect": "require_approval"},
  {"name": "release group", "tool": "push", "args": {"branch": "v2"}, "principal": "release",
   "labels": {"group": "release"}, "expect": "allow"},
  {"name": "anyone else", "tool": "push", "args": {"branch": "v2"}, "expect": "deny"}
]"#;

fn files(dir: &Path, policy: &str, cases: &str) -> [String; 3] {
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    [
        write("policy.cedar", policy),
        write("tools.json", TOOLS),
        write("cases.json", cases),
    ]
}

#[test]
fn check_validates_a_policy_against_the_tools_and_prints_its_identity() {
    let dir = tempfile::tempdir().unwrap();
    let [policy, tools, _] = files(dir.path(), POLICY, CASES);
    let out = agentrt_raw(&["policy", "check", &policy, "--tools", &tools]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("valid against 3 tool(s); identity cedar:"),
        "{out:?}"
    );
    let json = agentrt_raw(&["--json", "policy", "check", &policy, "--tools", &tools]);
    let value: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(value["tools"], 3);
    assert!(value["identity"].as_str().unwrap().starts_with("cedar:"));
}

#[test]
fn check_refuses_a_policy_naming_an_argument_a_tool_lacks_with_cedars_diagnostic() {
    let dir = tempfile::tempdir().unwrap();
    let [policy, tools, _] = files(
        dir.path(),
        r#"permit(principal, action == Agentrt::Action::"move_file", resource)
           when { context.args.target == "x" };"#,
        CASES,
    );
    let out = agentrt_raw(&["policy", "check", &policy, "--tools", &tools]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("do not validate") && out.stderr.contains("args.target"),
        "{out:?}"
    );
}

#[test]
fn test_passes_when_every_case_gets_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    let [policy, tools, cases] = files(dir.path(), POLICY, CASES);
    let out = agentrt_raw(&[
        "policy", "test", &policy, "--tools", &tools, "--cases", &cases,
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("pass  a draft: allow"), "{out:?}");
    assert!(out.stdout.ends_with("7 case(s), 0 failed\n"), "{out:?}");
}

#[test]
fn test_exits_1_naming_each_case_that_did_not_get_its_outcome() {
    let dir = tempfile::tempdir().unwrap();
    // Drafts lose their cap: the 21st draft is allowed, not denied; and a
    // case expects a move to be allowed.
    let loose = POLICY.replace(" && context.run.calls_of_tool < 20", "");
    let cases = CASES.replace(
        r#""destination": "b"}, "expect": "deny""#,
        r#""destination": "b"}, "expect": "allow""#,
    );
    let [policy, tools, cases] = files(dir.path(), &loose, &cases);
    let out = agentrt_raw(&[
        "policy", "test", &policy, "--tools", &tools, "--cases", &cases,
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains(
            "FAIL  the 21st draft: expected deny, got allow (permitted by cedar policy drafts)"
        ),
        "{out:?}"
    );
    assert!(
        out.stdout.contains(
            "FAIL  a move: expected allow with a reason containing \"no-moves\", got deny (forbidden by cedar policy no-moves)"
        ),
        "{out:?}"
    );
    assert!(out.stdout.ends_with("7 case(s), 2 failed\n"), "{out:?}");
    assert!(
        out.stderr
            .contains("2 of 7 case(s) did not get the outcome expected"),
        "{out:?}"
    );
}

#[test]
fn a_bad_cases_file_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let [policy, tools, cases] = files(
        dir.path(),
        POLICY,
        r#"[{"name": "odd", "tool": "push", "expect": "maybe"}]"#,
    );
    let out = agentrt_raw(&[
        "policy", "test", &policy, "--tools", &tools, "--cases", &cases,
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("odd: expect \"maybe\" is not one of"),
        "{out:?}"
    );
    let missing = agentrt_raw(&["policy", "check", &policy]);
    assert_eq!(missing.code, 2, "{missing:?}");
}

#[test]
fn recheck_reports_the_recorded_decisions_a_cedar_policy_would_change() {
    use agentrt::Decision;
    let dir = tempfile::tempdir().unwrap();
    let db = support::new_db(dir.path(), "runs.db");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    const SAME: &str = r#"permit(principal, action == Agentrt::Action::"fs_read", resource);
           @approval("a push") permit(principal, action == Agentrt::Action::"push", resource);"#;
    let same = write("same.cedar", SAME);
    // Recorded under that policy: the read allowed, the push asks.
    {
        use agentrt::{Driver, GateConfig, Limits, ScriptedAgent, Store};
        let tools = support::tools();
        let specs: Vec<_> = tools.iter().map(|t| t.spec()).collect();
        let policy = agentrt_cedar::CedarPolicy::new(SAME, &specs).unwrap();
        let store = Store::open(&db).unwrap();
        let agent = ScriptedAgent::new(vec![
            Decision::tool_call("fs_read", "{}"),
            Decision::tool_call("push", "{}"),
        ]);
        let mut driver = Driver::new(GateConfig::new(store, policy, tools), agent).unwrap();
        support::runtime()
            .block_on(driver.start(Some("r1"), "read, then push", Limits::default()))
            .unwrap();
    }
    let out = support::agentrt(&db, &["policy", "recheck", &same]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("1 run(s) re-checked under ")
            && out
                .stdout
                .contains(": 2 decision(s) re-checked; 0 run(s) differ"),
        "{out:?}"
    );

    // Pushes no longer permitted: the recorded approval would be a denial.
    let stricter = write(
        "stricter.cedar",
        r#"permit(principal, action == Agentrt::Action::"fs_read", resource);"#,
    );
    let out = support::agentrt(&db, &["policy", "recheck", &stricter, "--run", "r1"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("DIFFERENT step 1"), "{out:?}");
    assert!(out.stdout.contains("1 run(s) differ"), "{out:?}");
    assert!(
        out.stderr.contains("1 run(s) would be decided otherwise"),
        "{out:?}"
    );
    let json = support::agentrt(&db, &["--json", "policy", "recheck", &stricter]);
    let reports: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(reports[0]["same"], false, "{}", json.stdout);

    // A policy naming a tool the run never recorded does not validate.
    let unknown = write(
        "unknown.cedar",
        r#"permit(principal, action == Agentrt::Action::"deploy", resource);"#,
    );
    let out = support::agentrt(&db, &["policy", "recheck", &unknown]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("against the tools run r1 recorded"),
        "{out:?}"
    );
}

#[test]
fn show_counts_a_shadow_policys_disagreements() {
    use agentrt::{Decision, DefaultPolicy, Driver, GateConfig, Limits, ScriptedAgent, Store};
    let dir = tempfile::tempdir().unwrap();
    let db = support::new_db(dir.path(), "runs.db");
    let tools = support::tools();
    let specs: Vec<_> = tools.iter().map(|t| t.spec()).collect();
    // The shadow permits reads only: it would deny the push the default
    // policy asks about.
    let shadow = agentrt_cedar::CedarPolicy::new(
        r#"permit(principal, action == Agentrt::Action::"fs_read", resource);"#,
        &specs,
    )
    .unwrap();
    let agent = ScriptedAgent::new(vec![
        Decision::tool_call("fs_read", "{}"),
        Decision::tool_call("push", "{}"),
    ]);
    let config =
        GateConfig::new(Store::open(&db).unwrap(), DefaultPolicy, tools).with_shadow(shadow);
    let mut driver = Driver::new(config, agent).unwrap();
    support::runtime()
        .block_on(driver.start(Some("r1"), "read, then push", Limits::default()))
        .unwrap();

    let out = support::agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(
            "shadow  the shadow policy disagreed with 1 decision(s): agentrt events r1\n"
        ),
        "{out:?}"
    );
    let json = support::agentrt(&db, &["--json", "show", "r1"]);
    let shown: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(shown["shadow_disagreements"], 1, "{}", json.stdout);
    assert_eq!(shown["run"]["id"], "r1");
    let events = support::agentrt(&db, &["events", "r1"]);
    assert!(events.stdout.contains("policy.shadow"), "{events:?}");
}

#[test]
fn check_and_test_read_the_tools_of_a_pinned_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("fs.manifest.json");
    std::fs::write(
        &manifest,
        r#"{"pinned_at":"2026-12-01T00:00:00.000000000Z","server":"fs","tools":{
          "move_file":{"annotations":{"destructiveHint":true},"description":"Move a file","description_hash":"x",
            "input_schema":{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}},"required":["source","destination"]},
            "name":"move_file","schema_hash":"y"},
          "read_text_file":{"annotations":{"readOnlyHint":true},"description":"Read","description_hash":"x",
            "input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]},
            "name":"read_text_file","schema_hash":"y"}}}"#,
    )
    .unwrap();
    let manifest = manifest.to_string_lossy().into_owned();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    };
    let policy = write(
        "p.cedar",
        r#"permit(principal, action == Agentrt::Action::"fs_read_text_file", resource);
           permit(principal, action == Agentrt::Action::"fs_move_file", resource == Agentrt::Resource::"destructive")
           when { context.args.destination like "archive/*" };"#,
    );
    let out = agentrt_raw(&["policy", "check", &policy, "--manifest", &manifest]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("valid against 2 tool(s)"), "{out:?}");
    let cases = write(
        "cases.json",
        r#"[{"tool": "fs_move_file", "args": {"source": "a", "destination": "archive/a"}, "expect": "allow"},
            {"tool": "fs_move_file", "args": {"source": "a", "destination": "b"}, "expect": "deny"}]"#,
    );
    let out = agentrt_raw(&[
        "policy",
        "test",
        &policy,
        "--manifest",
        &manifest,
        "--cases",
        &cases,
    ]);
    assert_eq!(out.code, 0, "{out:?}");

    let wrong = write(
        "wrong.cedar",
        r#"permit(principal, action == Agentrt::Action::"fs_move_file", resource) when { context.args.target == "x" };"#,
    );
    let out = agentrt_raw(&["policy", "check", &wrong, "--manifest", &manifest]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("args.target"), "{out:?}");
    let both = agentrt_raw(&[
        "policy",
        "check",
        &policy,
        "--manifest",
        &manifest,
        "--tools",
        &manifest,
    ]);
    assert_eq!(both.code, 2, "{both:?}");
}
