//! `CedarPolicy` deciding requests: the outcomes and reasons of worked
//! policies, refusals at load, the identity, and a Rust program's runs
//! through the gate.

use std::sync::Arc;

use agentrt::json::Canonical;
use agentrt::model::{Limits, RunStatus};
use agentrt::{
    Decision, Driver, GateConfig, Outcome, Policy, ScriptedAgent, SideEffect, Store, ToolRequest,
    ToolResult, ToolSpec, tool_fn,
};
use agentrt_cedar::{CedarError, CedarPolicy};
use common::view;

mod common;

fn spec(name: &str, class: SideEffect, schema: &str) -> ToolSpec {
    ToolSpec::new(name, name, class)
        .with_schema_str(schema)
        .expect("schema")
}

fn tools() -> Vec<ToolSpec> {
    vec![
        spec(
            "write_file",
            SideEffect::LocalMutation,
            r#"{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}},"required":["path","content"]}"#,
        ),
        spec(
            "move_file",
            SideEffect::Destructive,
            r#"{"type":"object","properties":{"source":{"type":"string"},"destination":{"type":"string"}},"required":["source","destination"]}"#,
        ),
        spec(
            "deploy",
            SideEffect::RemoteMutation,
            r#"{"type":"object","properties":{"replicas":{"type":"integer"}}}"#,
        ),
    ]
}

const TEAM_POLICY: &str = r#"
@id("drafts")
permit(principal, action == Agentrt::Action::"write_file", resource)
when { context.args.path like "notes/drafts/*" };

@id("writes-need-me")
@approval("a write outside notes/drafts")
permit(principal, action == Agentrt::Action::"write_file", resource)
unless { context.args.path like "notes/drafts/*" };

@id("twenty-writes")
forbid(principal, action == Agentrt::Action::"write_file", resource)
when { context.run.calls_of_tool >= 20 };

@id("release-deploys")
permit(principal == Agentrt::Caller::"release", action == Agentrt::Action::"deploy", resource);

@id("no-huge-deploys")
@abort("a deploy of more than 50 replicas")
forbid(principal, action == Agentrt::Action::"deploy", resource)
when { context.args has replicas && context.args.replicas > 50 };
"#;

fn request(tool: &str, args: &str) -> ToolRequest {
    let spec = tools()
        .into_iter()
        .find(|t| t.name == tool)
        .unwrap_or_else(|| spec(tool, SideEffect::ReadOnly, "{}"));
    ToolRequest {
        run_id: "r".into(),
        step_id: "s".into(),
        spec,
        args: Canonical::parse_str(args).expect("args"),
    }
}

fn decided(policy: &CedarPolicy, tool: &str, args: &str, labels: &[&str]) -> (Outcome, String) {
    let d = policy
        .evaluate(&request(tool, args), &view(labels))
        .expect("decided");
    (d.outcome, d.reason)
}

#[test]
fn a_teams_policy_decides_each_request_and_names_the_policies_that_decided() {
    let policy = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    assert_eq!(
        decided(
            &policy,
            "write_file",
            r#"{"path":"notes/drafts/a.md","content":"x"}"#,
            &[]
        ),
        (Outcome::Allow, "permitted by cedar policy drafts".into())
    );
    assert_eq!(
        decided(
            &policy,
            "write_file",
            r#"{"path":"src/main.rs","content":"x"}"#,
            &[]
        ),
        (
            Outcome::RequireApproval,
            "a write outside notes/drafts (cedar policy writes-need-me)".into()
        )
    );
    assert_eq!(
        decided(
            &policy,
            "move_file",
            r#"{"source":"a","destination":"b"}"#,
            &[]
        ),
        (Outcome::Deny, "no cedar policy permits move_file".into())
    );
    assert_eq!(
        decided(
            &policy,
            "deploy",
            r#"{"replicas":3}"#,
            &["principal=intern"]
        )
        .0,
        Outcome::Deny
    );
    assert_eq!(
        decided(
            &policy,
            "deploy",
            r#"{"replicas":3}"#,
            &["principal=release"]
        ),
        (
            Outcome::Allow,
            "permitted by cedar policy release-deploys".into()
        )
    );
    assert_eq!(
        decided(
            &policy,
            "deploy",
            r#"{"replicas":80}"#,
            &["principal=release"]
        ),
        (
            Outcome::Abort,
            "a deploy of more than 50 replicas (cedar policy no-huge-deploys)".into()
        )
    );
}

#[test]
fn an_approval_binds_the_request_and_shows_the_policies_that_asked() {
    let policy = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    let d = policy
        .evaluate(
            &request("write_file", r#"{"content":"x","path":"src/a.rs"}"#),
            &view(&[]),
        )
        .expect("decided");
    assert_eq!(d.kind, "local_mutation");
    assert_eq!(
        d.capability.expect("capability").as_str(),
        r#"{"args":{"content":"x","path":"src/a.rs"},"tool":"write_file"}"#
    );
    assert_eq!(
        d.presentation.expect("presentation").as_str(),
        r#"{"args":{"content":"x","path":"src/a.rs"},"policies":["writes-need-me"],"reason":"a write outside notes/drafts (cedar policy writes-need-me)","tool":"write_file"}"#
    );
}

#[test]
fn the_principal_and_the_resource_come_from_the_labels_named() {
    let text = r#"
        permit(principal == Agentrt::Caller::"s-1", action, resource == Agentrt::Resource::"files");
    "#;
    let policy = CedarPolicy::new(text, &tools())
        .expect("loads")
        .with_principal_label("mcp.session")
        .with_resource_label("mcp.server");
    let args = r#"{"source":"a","destination":"b"}"#;
    assert_eq!(
        decided(
            &policy,
            "move_file",
            args,
            &["mcp.session=s-1", "mcp.server=files"]
        )
        .0,
        Outcome::Allow
    );
    assert_eq!(
        decided(
            &policy,
            "move_file",
            args,
            &["mcp.session=s-2", "mcp.server=files"]
        )
        .0,
        Outcome::Deny
    );
    // Without the resource label: the side-effect class.
    let by_class = CedarPolicy::new(
        r#"permit(principal, action, resource == Agentrt::Resource::"destructive");"#,
        &tools(),
    )
    .expect("loads");
    assert_eq!(decided(&by_class, "move_file", args, &[]).0, Outcome::Allow);
    assert_eq!(
        decided(&by_class, "write_file", r#"{"path":"a","content":""}"#, &[]).0,
        Outcome::Deny
    );
    // A tool's own resource (its MCP server) comes before the class; a
    // resource label the run carries comes before both.
    let by_server = CedarPolicy::new(
        r#"permit(principal, action, resource == Agentrt::Resource::"files");"#,
        &tools(),
    )
    .expect("loads")
    .with_tool_resource("move_file", "files")
    .with_resource_label("mcp.server");
    assert_eq!(
        decided(&by_server, "move_file", args, &[]).0,
        Outcome::Allow
    );
    assert_eq!(
        decided(&by_server, "move_file", args, &["mcp.server=other"]).0,
        Outcome::Deny
    );
    assert_eq!(
        decided(
            &by_server,
            "write_file",
            r#"{"path":"a","content":""}"#,
            &[]
        )
        .0,
        Outcome::Deny,
        "write_file has no resource of its own: its class"
    );
    // How requests are put to Cedar is part of the identity.
    assert_ne!(by_server.identity(), by_class.identity());
    assert_eq!(
        CedarPolicy::new(
            r#"permit(principal, action, resource == Agentrt::Resource::"files");"#,
            &tools()
        )
        .expect("loads")
        .with_principal_label("principal")
        .identity(),
        CedarPolicy::new(
            r#"permit(principal, action, resource == Agentrt::Resource::"files");"#,
            &tools()
        )
        .expect("loads")
        .identity(),
        "the defaults written out"
    );
}

#[test]
fn a_policy_naming_an_argument_a_tool_lacks_or_of_another_type_is_refused_at_load() {
    let missing = CedarPolicy::new(
        r#"permit(principal, action == Agentrt::Action::"move_file", resource)
           when { context.args.target == "x" };"#,
        &tools(),
    )
    .expect_err("no such argument");
    assert!(matches!(missing, CedarError::Validation(_)), "{missing}");
    assert!(missing.to_string().contains("target"), "{missing}");

    let mistyped = CedarPolicy::new(
        r#"permit(principal, action == Agentrt::Action::"deploy", resource)
           when { context.args has replicas && context.args.replicas == "three" };"#,
        &tools(),
    )
    .expect_err("a Long compared with a String");
    assert!(matches!(mistyped, CedarError::Validation(_)), "{mistyped}");

    // The same policy is refused once the argument is no longer in the
    // tool's schema (a re-pin that removed it).
    let uses_content = r#"permit(principal, action == Agentrt::Action::"write_file", resource)
        when { context.args.content == "" };"#;
    assert!(CedarPolicy::new(uses_content, &tools()).is_ok());
    let repinned = vec![spec(
        "write_file",
        SideEffect::LocalMutation,
        r#"{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}"#,
    )];
    let refused = CedarPolicy::new(uses_content, &repinned).expect_err("content is gone");
    assert!(refused.to_string().contains("content"), "{refused}");
}

#[test]
fn bad_text_duplicate_ids_and_templates_are_refused() {
    assert!(matches!(
        CedarPolicy::new("permit(principal, action", &tools()),
        Err(CedarError::Parse(_))
    ));
    let twice = r#"
        @id("a") permit(principal, action, resource);
        @id("a") forbid(principal, action, resource);
    "#;
    assert!(matches!(
        CedarPolicy::new(twice, &tools()),
        Err(CedarError::PolicyId { ref id, .. }) if id == "a"
    ));
    assert!(matches!(
        CedarPolicy::new(r#"@id("") permit(principal, action, resource);"#, &tools()),
        Err(CedarError::PolicyId { .. })
    ));
    assert!(matches!(
        CedarPolicy::new(
            "permit(principal == ?principal, action, resource);",
            &tools()
        ),
        Err(CedarError::Parse(_))
    ));
}

#[test]
fn a_policy_that_cannot_be_evaluated_denies_and_says_which() {
    let text = r#"
        @id("overflows")
        forbid(principal, action == Agentrt::Action::"deploy", resource)
        when { context.args has replicas && context.args.replicas + 9223372036854775807 > 0 };
        @id("anyone") permit(principal, action, resource);
    "#;
    let policy = CedarPolicy::new(text, &tools()).expect("loads");
    let (outcome, reason) = decided(&policy, "deploy", r#"{"replicas":5}"#, &[]);
    assert_eq!(outcome, Outcome::Deny);
    assert!(
        reason.starts_with("cedar policy overflows could not be evaluated:"),
        "{reason}"
    );
}

#[test]
fn a_tool_outside_the_schema_is_denied() {
    let policy = CedarPolicy::new("permit(principal, action, resource);", &tools()).expect("loads");
    assert_eq!(
        decided(&policy, "shell", "{}", &[]),
        (
            Outcome::Deny,
            "tool shell is not in the cedar schema".into()
        )
    );
}

#[test]
fn the_identity_follows_the_policies_and_the_schema_only() {
    let a = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    let again = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    assert_eq!(a.identity(), again.identity());
    assert_eq!(a.policy_id().as_deref(), Some(a.identity()));
    let edited = TEAM_POLICY.replace(">= 20", ">= 21");
    assert_ne!(
        CedarPolicy::new(&edited, &tools())
            .expect("loads")
            .identity(),
        a.identity()
    );
    let mut more = tools();
    more.push(spec("read_file", SideEffect::ReadOnly, "{}"));
    assert_ne!(
        CedarPolicy::new(TEAM_POLICY, &more)
            .expect("loads")
            .identity(),
        a.identity()
    );
    assert!(a.identity().len() <= 256);
}

#[tokio::test]
async fn a_rust_program_runs_on_a_cedar_policy_through_the_gate() {
    let store = Store::open(":memory:").expect("store");
    let write = tool_fn(tools().remove(0), |_call| async {
        Ok(ToolResult::json(&serde_json::json!({"written": true})))
    });
    let policy = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    let id = policy.identity().to_owned();
    let config = GateConfig::new(store.clone(), policy, vec![Arc::new(write)]);
    let mut driver = Driver::new(
        config,
        ScriptedAgent::new([
            Decision::tool_call(
                "write_file",
                r#"{"path":"notes/drafts/a.md","content":"x"}"#,
            ),
            Decision::tool_call("write_file", r#"{"path":"README.md","content":"x"}"#),
        ]),
    )
    .expect("driver");
    let run = driver
        .start(Some("r1"), "write notes", Limits::default())
        .await
        .expect("run");
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let steps = store.list_steps("r1").expect("steps");
    assert_eq!(steps.len(), 2);
    assert_eq!(
        steps[0].policy.as_ref().map(|p| p.outcome),
        Some(Outcome::Allow)
    );
    assert_eq!(
        steps[0].policy_id, id,
        "the identity is recorded with the decision"
    );
    let approvals = store.list_approvals("r1").expect("approvals");
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].kind, "local_mutation");
}

#[tokio::test]
async fn the_twenty_first_write_of_a_run_is_denied() {
    let store = Store::open(":memory:").expect("store");
    let write = tool_fn(tools().remove(0), |_call| async {
        Ok(ToolResult::json(&serde_json::json!({"written": true})))
    });
    let policy = CedarPolicy::new(TEAM_POLICY, &tools()).expect("loads");
    let config = GateConfig::new(store.clone(), policy, vec![Arc::new(write)]);
    let writes = (0..21).map(|i| {
        Decision::tool_call(
            "write_file",
            format!(r#"{{"path":"notes/drafts/{i}.md","content":"x"}}"#),
        )
    });
    let limits = Limits {
        max_steps: 50,
        ..Limits::default()
    };
    let mut driver = Driver::new(config, ScriptedAgent::new(writes)).expect("driver");
    driver
        .start(Some("r1"), "write notes", limits)
        .await
        .expect("run");
    let steps = store.list_steps("r1").expect("steps");
    let outcomes: Vec<Option<Outcome>> = steps
        .iter()
        .map(|s| s.policy.as_ref().map(|p| p.outcome))
        .collect();
    assert_eq!(outcomes[..20], [Some(Outcome::Allow); 20]);
    let last = steps[20].policy.as_ref().expect("decided");
    assert_eq!(last.outcome, Outcome::Deny);
    assert_eq!(last.reason, "forbidden by cedar policy twenty-writes");
}

/// Each tool is decided by the policies whose action scope can match it
/// (any action, the action, or a list holding it): the same answers as
/// the whole set.
#[test]
fn policies_scoped_to_any_action_a_list_or_one_action_decide_the_tools_they_name() {
    let policy = CedarPolicy::new(
        r#"
        @id("listed") permit(principal, action in [Agentrt::Action::"write_file", Agentrt::Action::"deploy"], resource);
        @id("one") permit(principal, action == Agentrt::Action::"move_file", resource)
        when { context.args.destination like "archive/*" };
        @id("anywhere") forbid(principal, action, resource) when { context.labels.contains("frozen=yes") };
        "#,
        &tools(),
    )
    .expect("policies");
    let write = r#"{"path":"a","content":"b"}"#;
    assert_eq!(
        decided(&policy, "write_file", write, &[]),
        (Outcome::Allow, "permitted by cedar policy listed".into())
    );
    assert_eq!(decided(&policy, "deploy", "{}", &[]).0, Outcome::Allow);
    assert_eq!(
        decided(
            &policy,
            "move_file",
            r#"{"source":"a","destination":"archive/a"}"#,
            &[]
        ),
        (Outcome::Allow, "permitted by cedar policy one".into())
    );
    assert_eq!(
        decided(
            &policy,
            "move_file",
            r#"{"source":"a","destination":"b"}"#,
            &[]
        ),
        (Outcome::Deny, "no cedar policy permits move_file".into())
    );
    assert_eq!(
        decided(&policy, "write_file", write, &["frozen=yes"]),
        (Outcome::Deny, "forbidden by cedar policy anywhere".into())
    );
}

#[test]
fn approvers_asks_for_two_people_and_is_refused_where_it_means_nothing() {
    let text = r#"
        @id("deploys") @approval("a deploy") @approvers("2")
        permit(principal, action == Agentrt::Action::"deploy", resource);
        @id("writes") @approval("a write")
        permit(principal, action == Agentrt::Action::"write_file", resource);
    "#;
    let policy = CedarPolicy::new(text, &tools()).expect("loads");
    let deploy = policy
        .evaluate(&request("deploy", r#"{"replicas":2}"#), &view(&[]))
        .expect("decided");
    assert_eq!(deploy.outcome, Outcome::RequireApproval);
    assert_eq!(deploy.approvers, 2);
    let write = policy
        .evaluate(
            &request("write_file", r#"{"content":"x","path":"a"}"#),
            &view(&[]),
        )
        .expect("decided");
    assert_eq!(write.approvers, 1);
    for (bad, says) in [
        (
            r#"@id("p") @approvers("2") permit(principal, action, resource);"#,
            "goes with @approval",
        ),
        (
            r#"@id("p") @approval("x") @approvers("3") permit(principal, action, resource);"#,
            "1 to 2",
        ),
        (
            r#"@id("p") @approval("x") @approvers("two") permit(principal, action, resource);"#,
            "1 to 2",
        ),
    ] {
        let refused = CedarPolicy::new(bad, &tools()).expect_err(bad);
        assert!(refused.to_string().contains(says), "{bad}: {refused}");
    }
}
