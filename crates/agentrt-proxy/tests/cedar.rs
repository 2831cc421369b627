//! The proxy with a Cedar policy (design §41): each call put to Cedar with
//! the session as principal, the server as resource and the arguments in
//! the context; permits run, `@approval` permits wait for an operator,
//! forbids and calls nothing permits are denied; the policy's identity is
//! recorded with each decision; a policy the pinned tools refute is
//! refused when the proxy is built. In process, against the fixture server
//! over HTTP.

mod support;

use std::path::Path;

use agentrt::EventType;
use agentrt::store::SqlValue;
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Answer, CALLS_TABLE, Proxy, ProxyError};

const POLICY: &str = r#"
@id("drafts")
permit(principal, action == Agentrt::Action::"fs_read_file", resource == Agentrt::Resource::"fs")
when { context.args.path like "drafts/*" };

@id("notes-ask")
@approval("notes are read with a person's consent")
permit(principal == Agentrt::Caller::"cedar", action == Agentrt::Action::"fs_read_file", resource)
when { context.args.path like "notes/*" };

@id("no-secrets")
@abort("secrets are never read")
forbid(principal, action, resource)
when { context.args.path like "*secret*" };
"#;

async fn read(proxy: &Proxy, path: &str) -> Answer {
    proxy
        .call(
            "fs_read_file",
            Some(format!(r#"{{"path":"{path}"}}"#).as_bytes()),
            None,
        )
        .await
        .expect("the tool is offered")
}

/// A proxy in `dir` on the fixture at `url`, its `read_file` a local
/// mutation, its policy `policy` in `policy.cedar`.
async fn configure(dir: &Path, url: &str, session: &str, policy: &str) {
    std::fs::write(dir.join("policy.cedar"), policy).expect("policy");
    support::configure(
        dir,
        url,
        &format!(r#""session": "{session}", "hold": "0s", "policy": {{"cedar": "policy.cedar"}}"#),
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cedar_policy_allows_asks_and_denies_each_call_and_its_identity_is_recorded() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(dir.path(), &url, "cedar", POLICY).await;
    let proxy = support::proxy_on(dir.path()).await;

    let ran = read(&proxy, "drafts/a.txt").await;
    assert!(matches!(ran, Answer::Result { .. }), "{ran:?}");

    let asked = read(&proxy, "notes/n.txt").await;
    assert!(asked.text().starts_with("PENDING_APPROVAL: "), "{asked:?}");

    let nothing = read(&proxy, "elsewhere.txt").await;
    assert!(
        nothing.text().starts_with(
            "DENIED: The policy refused this request: no cedar policy permits fs_read_file."
        ),
        "{nothing:?}"
    );
    let forbidden = read(&proxy, "drafts/secret.txt").await;
    assert!(
        forbidden.text().starts_with("DENIED: ")
            && forbidden
                .text()
                .contains("secrets are never read (cedar policy no-secrets)"),
        "{forbidden:?}"
    );
    // Only the permitted call reached the server.
    assert_eq!(
        seen.call_arguments.lock().expect("lock").len(),
        1,
        "one call ran"
    );

    // Every decision names the same identity, which holds the Cedar
    // policy's: the proxy's identity without it differs.
    let store = support::store_on(dir.path());
    let rows = store
        .rows_where(CALLS_TABLE, &[("session", SqlValue::from("cedar"))], 0)
        .expect("rows");
    assert_eq!(rows.len(), 4);
    let mut ids = std::collections::BTreeSet::new();
    for row in &rows {
        let run = row.text("run_id").expect("run id");
        for event in store.list_events(run).expect("events") {
            if event.event_type == EventType::StepPolicy {
                let payload: serde_json::Value =
                    serde_json::from_str(&event.payload).expect("payload");
                ids.insert(payload["policy_id"].as_str().expect("id").to_owned());
            }
        }
    }
    let config = agentrt_proxy::read_config(&dir.path().join("proxy.json")).expect("config");
    assert_eq!(ids.len(), 1, "{ids:?}");
    let id = ids.pop_first().expect("one id");
    assert!(id.starts_with(agentrt_proxy::POLICY_ID_PREFIX), "{id}");
    assert_ne!(id, agentrt_proxy::policy_id(&config));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_session_is_another_principal() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(dir.path(), &url, "laptop", POLICY).await;
    let proxy = support::proxy_on(dir.path()).await;
    // `notes-ask` names the principal `cedar`: this session is not it.
    let answer = read(&proxy, "notes/n.txt").await;
    assert!(
        answer.text().starts_with(
            "DENIED: The policy refused this request: no cedar policy permits fs_read_file."
        ),
        "{answer:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_naming_an_argument_the_pinned_tool_lacks_is_refused_with_cedars_diagnostic() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(
        dir.path(),
        &url,
        "strict",
        r#"permit(principal, action == Agentrt::Action::"fs_read_file", resource)
           when { context.args.destination == "x" };"#,
    )
    .await;
    let config = agentrt_proxy::read_config(&dir.path().join("proxy.json")).expect("config");
    let loaded = agentrt_proxy::load_all(&config).await.expect("load");
    let built = agentrt_proxy::build_proxy(
        std::sync::Arc::new(config.clone()),
        support::store_on(dir.path()),
        &loaded,
        Box::new(std::io::sink()),
    );
    loaded.close().await;
    let Err(ProxyError::Cedar { path, detail }) = built else {
        panic!("built a proxy on a policy that does not validate");
    };
    assert_eq!(path, dir.path().join("policy.cedar"));
    assert!(detail.contains("destination"), "{detail}");

    // `check` refuses it the same way, before serving.
    let mut out = Vec::new();
    let checked = agentrt_proxy::check(&config, &mut out).await;
    assert!(
        matches!(checked, Err(ProxyError::Cedar { ref detail, .. }) if detail.contains("destination")),
        "{checked:?}"
    );
}

#[test]
fn outcomes_beside_a_cedar_policy_are_refused() {
    let parse = |policy: &str, rule: &str| {
        agentrt_proxy::parse_config(
            format!(
                r#"{{"database": "p.db", "session": "s", "policy": {policy},
                    "servers": [{{"name": "fs", "command": ["x"], "manifest": "m.json",
                      "rules": {{"read": {{"side_effect": "read_only", "timeout": "5s"{rule}}}}}}}]}}"#
            )
            .as_bytes(),
            Path::new("/etc/proxy.json"),
        )
    };
    let config = parse(r#"{"cedar": "p.cedar"}"#, "").expect("cedar alone");
    assert_eq!(config.cedar.as_deref(), Some(Path::new("/etc/p.cedar")));
    let class = parse(r#"{"cedar": "p.cedar", "read_only": "allow"}"#, "").unwrap_err();
    assert!(class.to_string().contains("beside \"cedar\""), "{class}");
    let rule = parse(r#"{"cedar": "p.cedar"}"#, r#", "outcome": "deny""#).unwrap_err();
    assert!(
        rule.to_string().contains("outcome beside a Cedar policy"),
        "{rule}"
    );
    // A shadow beside the classes is what trying a policy first looks like.
    let tried =
        parse(r#"{"shadow": "s.cedar", "read_only": "deny"}"#, "").expect("shadow and classes");
    assert_eq!(tried.shadow.as_deref(), Some(Path::new("/etc/s.cedar")));
    let empty = parse(r#"{"cedar": ""}"#, "").unwrap_err();
    assert!(empty.to_string().contains("cedar: empty"), "{empty}");
}

/// Runs `agentrt-proxy recheck --config <dir>/proxy.json`.
async fn recheck(dir: &Path) -> (u8, String, String) {
    let args = [
        "recheck".to_owned(),
        "--config".to_owned(),
        dir.join("proxy.json").to_string_lossy().into_owned(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    (
        code,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recheck_judges_the_recorded_calls_under_the_cedar_file_as_it_is_now() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(dir.path(), &url, "cedar", POLICY).await;
    let proxy = support::proxy_on(dir.path()).await;
    let ran = read(&proxy, "drafts/a.txt").await;
    assert!(matches!(ran, Answer::Result { .. }), "{ran:?}");
    drop(proxy);

    // The same file: the decision re-checks the same, under the identity
    // the decision recorded.
    let (code, out, err) = recheck(dir.path()).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("1 decision(s) re-checked") && out.contains("0 run(s) differ"),
        "{out}"
    );

    // Drafts now need a person: the recorded allow would change.
    std::fs::write(
        dir.path().join("policy.cedar"),
        POLICY.replace(
            "@id(\"drafts\")\n",
            "@id(\"drafts\")\n@approval(\"drafts need a person now\")\n",
        ),
    )
    .expect("policy");
    let (code, out, _) = recheck(dir.path()).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 run(s) differ"), "{out}");

    // A file that no longer validates is refused, not read as "no policy".
    std::fs::write(
        dir.path().join("policy.cedar"),
        r#"permit(principal, action, resource) when { context.args.missing == 1 };"#,
    )
    .expect("policy");
    let (code, _, err) = recheck(dir.path()).await;
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cedar policy") && err.contains("args.missing"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_cedar_policy_beside_the_classes_records_each_disagreement_and_changes_nothing() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("shadow.cedar"), POLICY).expect("policy");
    // The classes decide (a local mutation is allowed); Cedar is tried.
    support::configure(
        dir.path(),
        &url,
        r#""session": "cedar", "hold": "0s", "policy": {"shadow": "shadow.cedar"}"#,
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    for path in ["drafts/a.txt", "elsewhere.txt", "notes/n.txt"] {
        let ran = read(&proxy, path).await;
        assert!(matches!(ran, Answer::Result { .. }), "{path}: {ran:?}");
    }
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 3);

    let store = support::store_on(dir.path());
    let rows = store
        .rows_where(CALLS_TABLE, &[("session", SqlValue::from("cedar"))], 0)
        .expect("rows");
    let mut shadows = Vec::new();
    for row in &rows {
        let run = row.text("run_id").expect("run id");
        for event in store.list_events(run).expect("events") {
            if event.event_type == EventType::PolicyShadow {
                let payload: serde_json::Value =
                    serde_json::from_str(&event.payload).expect("payload");
                shadows.push((
                    payload["enforced"].as_str().unwrap_or_default().to_owned(),
                    payload["shadow"].as_str().unwrap_or_default().to_owned(),
                    payload["reason"].as_str().unwrap_or_default().to_owned(),
                ));
            }
        }
    }
    shadows.sort();
    assert_eq!(
        shadows,
        [
            (
                "allow".to_owned(),
                "deny".to_owned(),
                "no cedar policy permits fs_read_file".to_owned()
            ),
            (
                "allow".to_owned(),
                "require_approval".to_owned(),
                "notes are read with a person's consent (cedar policy notes-ask)".to_owned()
            ),
        ],
        "drafts/a.txt agreed; the other two did not"
    );
    let report = agentrt::verify::verify(&store, &agentrt::verify::VerifyOptions::default())
        .expect("verify");
    assert!(report.intact(), "{report:?}");

    // `check` validates the shadow file too, and says it is not enforced.
    let config = agentrt_proxy::read_config(&dir.path().join("proxy.json")).expect("config");
    let mut out = Vec::new();
    agentrt_proxy::check(&config, &mut out)
        .await
        .expect("check");
    let out = String::from_utf8_lossy(&out);
    assert!(
        out.contains("shadow policy: cedar ") && out.contains("never enforced"),
        "{out}"
    );
    assert!(
        out.contains("shadow policy: disagreed with 2 of the session's last 3 call(s)"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_prints_the_pinned_offer_as_the_tools_a_policy_is_checked_against() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(dir.path(), &url, "cedar", POLICY).await;
    let args = [
        "tools".to_owned(),
        "--config".to_owned(),
        dir.path().join("proxy.json").to_string_lossy().into_owned(),
    ];
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let tools = agentrt_cedar::cases::read_tools(&out).expect("a tools file");
    let names: Vec<(&str, agentrt::SideEffect)> = tools
        .iter()
        .map(|t| (t.name.as_str(), t.side_effect))
        .collect();
    assert_eq!(
        names,
        [("fs_read_file", agentrt::SideEffect::LocalMutation)]
    );
    // The offer is what the proxy validates its Cedar file against.
    agentrt_cedar::CedarPolicy::new(POLICY, &tools).expect("validates");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_counts_the_sessions_earlier_calls_of_the_tool_and_caps_them() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("policy.cedar"),
        r#"@id("three-an-hour")
           permit(principal, action == Agentrt::Action::"fs_read_file", resource)
           when { context.recent.hour < 3 };"#,
    )
    .expect("policy");
    support::configure(
        dir.path(),
        &url,
        r#""session": "quota", "hold": "0s",
           "policy": {"cedar": "policy.cedar", "windows": {"hour": "1h"}}"#,
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    for n in 0..3 {
        let ran = read(&proxy, &format!("drafts/{n}.txt")).await;
        assert!(matches!(ran, Answer::Result { .. }), "call {n}: {ran:?}");
    }
    let fourth = read(&proxy, "drafts/3.txt").await;
    assert!(
        fourth.text().starts_with(
            "DENIED: The policy refused this request: no cedar policy permits fs_read_file."
        ),
        "{fourth:?}"
    );
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 3);

    // Each run carries the count its decision saw.
    let store = support::store_on(dir.path());
    let mut counts: Vec<String> = store
        .rows_where(CALLS_TABLE, &[("session", SqlValue::from("quota"))], 0)
        .expect("rows")
        .iter()
        .map(|row| {
            let run = store.get_run(row.text("run_id").expect("id")).expect("run");
            run.labels.get("recent.hour").unwrap_or("none").to_owned()
        })
        .collect();
    counts.sort();
    assert_eq!(counts, ["0", "1", "2", "3"]);

    // The window's length is part of the policy's identity.
    let config = |window: &str| {
        agentrt_proxy::parse_config(
            format!(
                r#"{{"database": "p.db", "session": "s",
                    "policy": {{"cedar": "p.cedar", "windows": {{"hour": "{window}"}}}},
                    "servers": [{{"name": "fs", "command": ["x"], "manifest": "m.json"}}]}}"#
            )
            .as_bytes(),
            Path::new("/etc/proxy.json"),
        )
        .expect("config")
    };
    assert_ne!(
        agentrt_proxy::policy_id(&config("1h")),
        agentrt_proxy::policy_id(&config("2h"))
    );
    // Windows without a Cedar policy count for nothing: refused.
    let alone = agentrt_proxy::parse_config(
        br#"{"database": "p.db", "session": "s", "policy": {"windows": {"hour": "1h"}},
             "servers": [{"name": "fs", "command": ["x"], "manifest": "m.json"}]}"#,
        Path::new("/etc/proxy.json"),
    )
    .unwrap_err();
    assert!(
        alone
            .to_string()
            .contains("windows count calls for a Cedar policy"),
        "{alone}"
    );
}

/// A re-pin that removes an argument the Cedar policy names: `check`
/// (and serving) refuses the policy with Cedar's diagnostic, where before
/// the re-pin it passed. The server is a shell script whose listing the
/// test rewrites (Linux: it reads `/proc`).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_pin_that_removes_an_argument_the_policy_names_refuses_the_policy() {
    let dir = tempfile::tempdir().expect("dir");
    let listing = |properties: &str, required: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":@ID@,"result":{{"tools":[{{"name":"move","inputSchema":{{"type":"object","properties":{{{properties}}},"required":[{required}]}},"annotations":{{"destructiveHint":true}}}}]}}}}"#
        )
    };
    let script = support::shell_server(
        dir.path(),
        &[&listing(
            r#""source":{"type":"string"},"destination":{"type":"string"}"#,
            r#""source","destination""#,
        )],
    );
    std::fs::write(
        dir.path().join("policy.cedar"),
        r#"@id("into-archive")
           permit(principal, action == Agentrt::Action::"fs_move", resource)
           when { context.args.destination like "archive/*" };"#,
    )
    .expect("policy");
    std::fs::write(
        dir.path().join("proxy.json"),
        format!(
            r#"{{"database": "proxy.db", "session": "repin", "policy": {{"cedar": "policy.cedar"}},
                 "servers": [{{"name": "fs", "command": ["/bin/sh", "{}"],
                   "manifest": "fs.manifest.json", "connect_timeout": "10s",
                   "rules": {{"move": {{"side_effect": "destructive", "timeout": "5s"}}}}}}]}}"#,
            script.display()
        ),
    )
    .expect("config");
    let run = |command: &'static str| {
        let dir = dir.path().to_owned();
        async move {
            let args = [
                command.to_owned(),
                "--config".to_owned(),
                dir.join("proxy.json").to_string_lossy().into_owned(),
            ];
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let code = agentrt_proxy::cli::run(&args, &mut out, &mut err).await;
            let said = format!(
                "{}{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            );
            (code, said)
        }
    };
    let (code, said) = run("pin").await;
    assert_eq!(code, 0, "{said}");
    let (code, said) = run("check").await;
    assert_eq!(code, 0, "{said}");
    assert!(said.contains("policy: cedar "), "{said}");

    // The server drops `destination`; the operator re-pins.
    std::fs::write(
        dir.path().join("replies"),
        listing(r#""source":{"type":"string"}"#, r#""source""#) + "\n",
    )
    .expect("replies");
    std::fs::remove_file(dir.path().join("fs.manifest.json")).expect("unpin");
    let (code, said) = run("pin").await;
    assert_eq!(code, 0, "{said}");
    let (code, said) = run("check").await;
    assert_ne!(code, 0, "{said}");
    assert!(
        said.contains("cedar policy") && said.contains("destination"),
        "{said}"
    );
}

/// The Cedar file decides what runs: one another user may write is
/// refused, as the configuration is.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cedar_file_another_user_may_write_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    configure(dir.path(), &url, "shared", POLICY).await;
    let policy = dir.path().join("policy.cedar");
    std::fs::set_permissions(&policy, std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let config = agentrt_proxy::read_config(&dir.path().join("proxy.json")).expect("config");
    let mut out = Vec::new();
    let checked = agentrt_proxy::check(&config, &mut out).await;
    let Err(ProxyError::Cedar { path, detail }) = checked else {
        panic!("a shared Cedar file was read: {checked:?}");
    };
    assert_eq!(path, policy);
    assert!(detail.contains("chmod go-w"), "{detail}");
}
