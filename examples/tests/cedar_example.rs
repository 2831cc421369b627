//! The cedar example: three runs decided by a Cedar policy, a stricter one
//! tried beside it; and the files docs/policy.md shows kept true (every
//! policy it quotes is in `policy.cedar`, the cases pass, `tools.json` is
//! the example's tools).

#[path = "../cedar/demo.rs"]
#[allow(dead_code)]
mod demo;

use agentrt::{RunStatus, Store};
use agentrt_cedar::CedarPolicy;
use agentrt_cedar::cases::{read_cases, read_tools, run_cases};

fn file(path: &str) -> String {
    std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test]
async fn the_policy_decides_each_request_and_the_shadows_disagreements_are_recorded() {
    let store = Store::open(":memory:").unwrap();
    let mut out = Vec::new();
    let ran = demo::run(&store, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let summary: Vec<(&str, RunStatus, usize)> = ran
        .iter()
        .map(|r| (r.run_id.as_str(), r.status, r.shadow_disagreements))
        .collect();
    assert_eq!(
        summary,
        [
            ("docs-1", RunStatus::WaitingForApproval, 1),
            ("release-1", RunStatus::Completed, 0),
            ("docs-2", RunStatus::Failed, 1),
        ],
        "{text}"
    );
    let outcomes: Vec<Vec<(&str, &str)>> = ran
        .iter()
        .map(|r| {
            r.decided
                .iter()
                .map(|(tool, outcome, _)| (tool.as_str(), outcome.as_str()))
                .collect()
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            vec![
                ("write_file", "allow"),
                ("push", "allow"),
                ("write_file", "require_approval")
            ],
            vec![("deploy", "allow"), ("send_mail", "allow")],
            vec![("deploy", "deny"), ("send_mail", "abort")],
        ]
    );
    for line in [
        "  write_file: require_approval: a write outside notes/drafts/ (cedar policy other-writes)\n",
        "  deploy: deny: no cedar policy permits deploy\n",
        "  send_mail: abort: mail to another domain (cedar policy mail-outside)\n",
        "\nverify: intact\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
}

#[test]
fn the_tools_file_is_the_examples_tools_and_every_case_passes() {
    let tools = read_tools(file("cedar/tools.json").as_bytes()).unwrap();
    assert_eq!(tools, demo::specs().unwrap());
    let policy = CedarPolicy::new(demo::POLICY, &tools).unwrap();
    let cases = read_cases(file("cedar/cases.json").as_bytes()).unwrap();
    assert_eq!(cases.len(), 10);
    for result in run_cases(&policy, cases) {
        assert!(result.passed(), "{result:?}");
    }
}

/// Every fenced block of `lang` in `text`.
fn blocks<'a>(text: &'a str, lang: &str) -> Vec<&'a str> {
    let open = format!("```{lang}\n");
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&open) {
        let body = &rest[start + open.len()..];
        let end = body.find("```").expect("a closed block");
        found.push(&body[..end]);
        rest = &body[end..];
    }
    found
}

#[test]
fn every_policy_docs_policy_md_quotes_is_in_the_example_and_validates() {
    let doc = file("../docs/policy.md");
    let quoted = blocks(&doc, "cedar");
    assert_eq!(quoted.len(), 6, "the five worked policies and no-deletes");
    let specs = demo::specs().unwrap();
    for block in quoted {
        assert!(
            demo::POLICY.contains(block.trim_end()),
            "docs/policy.md quotes a policy policy.cedar does not hold:\n{block}"
        );
        CedarPolicy::new(block, &specs).unwrap_or_else(|e| panic!("{block}\n{e}"));
    }
    // The cases the page shows are among the example's.
    let shown = blocks(&doc, "json")
        .into_iter()
        .find(|b| b.contains("\"expect\""))
        .expect("the cases block");
    let policy = CedarPolicy::new(demo::POLICY, &specs).unwrap();
    for result in run_cases(&policy, read_cases(shown.as_bytes()).unwrap()) {
        assert!(result.passed(), "{result:?}");
    }
}
