//! Two durable commits per proxied call, whichever way it is decided: the
//! run's creation and its request key's claim go with the first step's
//! verdict and the tool's start, the outcome with the run's end (design
//! §4.3–4.4 hold: a refused claim writes nothing). In process, against
//! the fixture server over HTTP; the commits counted by the store the
//! proxy writes through.

mod support;

use agentrt::{RunStatus, Store};
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Answer, Proxy};

/// Calls `read_file` with `args` and gives the commits it took, checking
/// the tool answered.
async fn commits_of(proxy: &Proxy, store: &Store, args: &str) -> u64 {
    let before = store.commits();
    let answer = proxy
        .call("fs_read_file", Some(args.as_bytes()), None)
        .await
        .expect("the tool is offered");
    assert!(
        matches!(answer, Answer::Result { ref text, .. } if text == args),
        "{args}: {answer:?}"
    );
    store.commits() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_is_two_commits_new_seen_before_or_after_a_restart() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "two""#,
        r#"{"side_effect": "read_only", "timeout": "2s"}"#,
    )
    .await;
    let args = r#"{"path":"a.txt"}"#;
    let (proxy, store) = support::proxy_and_store_on(dir.path()).await;
    assert_eq!(commits_of(&proxy, &store, args).await, 2, "a new request");
    assert_eq!(
        commits_of(&proxy, &store, args).await,
        2,
        "the same request again: its history read, the long way"
    );
    drop(proxy);
    // A new process believes the request new; its first write group finds
    // the key's rows, is refused and writes nothing (no commit), and the
    // call is decided the long way.
    let (proxy, store) = support::proxy_and_store_on(dir.path()).await;
    assert_eq!(commits_of(&proxy, &store, args).await, 2, "after a restart");
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_is_two_commits_and_its_run_completes() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "change""#,
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
    let (proxy, store) = support::proxy_and_store_on(dir.path()).await;
    for (i, args) in [r#"{"path":"a.txt"}"#, r#"{"path":"b.txt"}"#]
        .into_iter()
        .enumerate()
    {
        assert_eq!(commits_of(&proxy, &store, args).await, 2, "change {i}");
    }
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 2);
    let runs = store.list_runs(10, 0).expect("runs").items;
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter().all(|r| r.status == RunStatus::Completed),
        "{runs:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_is_opened_at_the_configured_durability() {
    let (url, _seen) = serve(Mode::Json).await;
    let rule = r#"{"side_effect": "read_only", "timeout": "2s"}"#;
    for (fields, expected) in [
        (r#""session": "d""#, agentrt::Durability::Full),
        (
            r#""session": "d", "durability": "full""#,
            agentrt::Durability::Full,
        ),
        (
            r#""session": "d", "durability": "normal""#,
            agentrt::Durability::Normal,
        ),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let config = support::configure(dir.path(), &url, fields, rule).await;
        let config = agentrt_proxy::read_config(&config).expect("config");
        // As `serve` and `check` open it.
        let store = agentrt_proxy::open_store(&config).await.expect("open");
        assert_eq!(store.durability(), Some(expected), "{fields}");
    }
}
