//! A request this process has not seen begins its run at once, and the
//! run's first write group checks the call index: a request the database
//! knows (an earlier process made it) is decided the long way, with its
//! history read. In process, against the fixture server over HTTP.

mod support;

use agentrt::RunStatus;
use agentrt::store::SqlValue;
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Answer, CALLS_TABLE, Proxy};

const ARGS: &str = r#"{"path":"again.txt"}"#;

async fn read(proxy: &Proxy) -> Answer {
    read_args(proxy, ARGS).await
}

async fn read_args(proxy: &Proxy, args: &str) -> Answer {
    proxy
        .call("fs_read_file", Some(args.as_bytes()), None)
        .await
        .expect("the tool is offered")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_repeated_after_a_restart_runs_again_and_closes_the_earlier_row() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "again""#,
        r#"{"side_effect": "read_only", "timeout": "2s"}"#,
    )
    .await;

    let first = support::proxy_on(dir.path()).await;
    assert!(matches!(read(&first).await, Answer::Result { ref text, .. } if text == ARGS));
    // The same process knows the request: the long way, a new run.
    assert!(matches!(read(&first).await, Answer::Result { ref text, .. } if text == ARGS));
    drop(first);
    // A new process does not: its first write group finds the key's rows
    // and the call is decided the long way, not refused as a lost race.
    let second = support::proxy_on(dir.path()).await;
    let answer = read(&second).await;
    assert!(
        matches!(answer, Answer::Result { ref text, .. } if text == ARGS),
        "{answer:?}"
    );
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 3);

    let store = support::store_on(dir.path());
    let rows = store
        .rows_where(CALLS_TABLE, &[("session", SqlValue::from("again"))], 0)
        .expect("rows");
    let open: Vec<i64> = rows.iter().filter_map(|r| r.int("open")).collect();
    assert_eq!(open, [0, 0, 1], "one open row per key, the newest");
    let keys: std::collections::BTreeSet<&str> =
        rows.iter().filter_map(|r| r.text("request_key")).collect();
    assert_eq!(keys.len(), 1);
    for row in &rows {
        let run = store
            .get_run(row.text("run_id").expect("run id"))
            .expect("run");
        assert_eq!(run.status, RunStatus::Completed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rows_a_refused_first_write_carried_are_closed_by_the_next() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "carried""#,
        r#"{"side_effect": "read_only", "timeout": "2s"}"#,
    )
    .await;
    let (first, other) = (r#"{"path":"x.txt"}"#, r#"{"path":"y.txt"}"#);
    let a = support::proxy_on(dir.path()).await;
    let b = support::proxy_on(dir.path()).await;
    // A's read settles; its row is closed by A's next run's first write.
    call(&a, first).await;
    // Another process makes a request A then believes new: A's first
    // write, carrying the settled row, is refused and writes nothing; the
    // call is decided the long way, whose first write carries it again.
    call(&b, other).await;
    call(&a, other).await;
    let store = support::store_on(dir.path());
    let rows = store
        .rows_where(CALLS_TABLE, &[("session", SqlValue::from("carried"))], 0)
        .expect("rows");
    let open: Vec<i64> = rows.iter().filter_map(|r| r.int("open")).collect();
    assert_eq!(
        open,
        [0, 0, 1],
        "A's first row closed, B's closed by A's run, A's own open"
    );
}

async fn call(proxy: &Proxy, args: &str) {
    let answer = read_args(proxy, args).await;
    assert!(
        matches!(answer, Answer::Result { ref text, .. } if text == args),
        "{answer:?}"
    );
}
