//! The proxy as an OAuth 2.1 protected resource with real parts: a real
//! OpenID provider (npm `oidc-provider`, pinned by `tests/oidc`'s
//! lockfile, started here on 127.0.0.1 by `tests/oidc/provider.mjs`) and
//! a real MCP host with OAuth (the Python SDK's `OAuthClientProvider`,
//! `tests/host/oauth_host.py`): the host discovers the provider from the
//! proxy's challenge and metadata, registers, signs a user in (code +
//! PKCE + resource indicator) and calls; the run carries the subject.
//! Tokens the provider mints for another audience, an expired one, one
//! signed by another provider's key, and none, are refused with the
//! spec's status and header.
//!
//! `cargo xtask test` installs the provider (`npm ci` into
//! target/real-servers/oidc) and the SDK (target/real-hosts/venv), and
//! runs this target with the `real-oidc` feature, naming them in
//! `AGENTRT_OIDC_PROVIDER` and `AGENTRT_PYTHON_HOST`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agentrt_mcp_fixture::{Mode, serve};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

/// How long the provider's access tokens live (seconds): short, so that
/// one expires within the test.
const TOKEN_TTL: u64 = 4;

fn env_file(name: &str, what: &str) -> PathBuf {
    let Some(path) = std::env::var_os(name) else {
        panic!("{name} is not set: it names {what}; run `cargo xtask test`");
    };
    let path = PathBuf::from(path);
    assert!(path.is_file(), "{name}: {} is not a file", path.display());
    path
}

/// A running provider and its issuer URL.
struct Provider {
    _child: Child,
    issuer: String,
}

/// Starts the provider; its standard input stays open while it runs (it
/// exits when the test's end closes it).
async fn start_provider() -> Provider {
    let script = env_file("AGENTRT_OIDC_PROVIDER", "tests/oidc/provider.mjs installed");
    let mut child = Command::new("node")
        .arg(&script)
        .current_dir(script.parent().expect("its directory"))
        .env("OIDC_ACCESS_TOKEN_TTL", TOKEN_TTL.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the provider starts")
        .expect("stdout")
        .expect("a line");
    let issuer = first
        .strip_prefix("ISSUER ")
        .unwrap_or_else(|| panic!("the provider said {first:?}"))
        .to_owned();
    Provider {
        _child: child,
        issuer,
    }
}

/// Serves the fixture through the proxy admitting `issuer`'s tokens (no
/// leeway, so an expired token is refused at once): the process and URL.
async fn proxy(dir: &Path, issuer: &str) -> (Child, String) {
    let (upstream, _seen) = serve(Mode::Json).await;
    support::configure(
        dir,
        &upstream,
        &format!(
            r#""session": "team", "oauth": {{"issuer": "{issuer}", "scopes": ["mcp:tools"], "leeway": "0s"}}"#
        ),
        r#"{"side_effect": "read_only", "timeout": "5s"}"#,
    )
    .await;
    let (child, url, _) = support::serve_http(&dir.join("proxy.json")).await;
    (child, url)
}

/// Runs the OAuth host as `user` against `url`, calling `fs_read_file`:
/// its exit status, its JSON lines, its stderr.
async fn host(url: &str, user: &str, password: &str) -> (bool, Vec<Value>, String) {
    let python = env_file(
        "AGENTRT_PYTHON_HOST",
        "a python with tests/host/requirements.txt",
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/host/oauth_host.py");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        Command::new(python)
            .arg(script)
            .args(["--url", url, "--user", user, "--password", password])
            .args([
                "--tool",
                "fs_read_file",
                "--args",
                r#"{"path": "notes.txt"}"#,
            ])
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the host finishes")
    .expect("python");
    let lines = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (
        output.status.success(),
        lines,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A token the provider mints for `resource` by client credentials.
async fn client_token(issuer: &str, resource: &str) -> String {
    let answer: Value = reqwest::Client::new()
        .post(format!("{issuer}/token"))
        .basic_auth("agentrt-test", Some("test-secret"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("grant_type", "client_credentials")
                .append_pair("resource", resource)
                .append_pair("scope", "mcp:tools")
                .finish(),
        )
        .send()
        .await
        .expect("the token endpoint")
        .json()
        .await
        .expect("JSON");
    answer["access_token"]
        .as_str()
        .unwrap_or_else(|| panic!("a token: {answer}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_signs_in_at_the_provider_and_its_call_carries_the_subject() {
    let provider = start_provider().await;
    let dir = tempfile::tempdir().expect("dir");
    let (_proxy, url) = proxy(dir.path(), &provider.issuer).await;

    let (ok, lines, stderr) = host(&url, "alice", "alice-password").await;
    assert!(ok, "the host signed in and called: {stderr}");
    let token = &lines[0]["token"];
    assert_eq!(token["sub"], json!("alice"), "{lines:?}");
    assert_eq!(
        token["aud"],
        json!(url),
        "the resource indicator: {lines:?}"
    );
    let call = lines
        .iter()
        .find(|l| l.get("call").is_some())
        .unwrap_or_else(|| panic!("a call: {lines:?}"));
    assert_eq!(call["isError"], json!(false), "{call}");

    let store = agentrt::Store::open_existing(dir.path().join("proxy.db"), true).expect("db");
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 1, "one call, one run");
    assert_eq!(runs[0].labels.get("caller.subject"), Some("alice"));
    assert_eq!(
        runs[0].labels.get("caller.issuer"),
        Some(provider.issuer.as_str())
    );
    assert_eq!(runs[0].labels.get("caller.groups"), Some("approvers,staff"));

    // A wrong password signs nobody in, and nothing runs.
    let (ok, _, stderr) = host(&url, "bob", "not-bobs-password").await;
    assert!(!ok && stderr.contains("sign-in failed"), "{stderr}");
    assert_eq!(store.list_runs(10, 0).expect("runs").items.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_for_another_audience_expired_or_of_an_unknown_key_and_none_are_refused() {
    let provider = start_provider().await;
    let other = start_provider().await;
    let dir = tempfile::tempdir().expect("dir");
    let (_proxy, url) = proxy(dir.path(), &provider.issuer).await;
    let metadata = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp");

    let none = support::initialize(&url, None, None).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        support::challenge(&none),
        format!(r#"Bearer scope="mcp:tools", resource_metadata="{metadata}""#)
    );

    let good = client_token(&provider.issuer, &url).await;
    assert_eq!(
        support::initialize(&url, Some(&good), None).await.status(),
        200,
        "the provider's token"
    );

    let elsewhere = client_token(&provider.issuer, "http://127.0.0.1:1/mcp").await;
    let unknown_key = client_token(&other.issuer, &url).await;
    for (what, token, says) in [
        ("another audience", &elsewhere, "another audience"),
        ("another provider's key", &unknown_key, "no signing key"),
    ] {
        let refused = support::initialize(&url, Some(token), None).await;
        assert_eq!(refused.status(), 401, "{what}");
        let header = support::challenge(&refused);
        assert!(
            header.starts_with(r#"Bearer error="invalid_token""#),
            "{what}: {header}"
        );
        assert!(header.contains(says), "{what}: {header}");
        assert!(header.contains(&metadata), "{what}: {header}");
    }

    // The good token, once its lifetime is over.
    tokio::time::sleep(Duration::from_secs(TOKEN_TTL + 1)).await;
    let expired = support::initialize(&url, Some(&good), None).await;
    assert_eq!(expired.status(), 401);
    assert!(
        support::challenge(&expired).contains("expired"),
        "{}",
        support::challenge(&expired)
    );
}
