//! Bounded work (issue 33): planning a call reads what decides it, not
//! the session's history; the status tool reads at most 200 rows; an
//! operator notice never waits for stderr. In process, against the fixture
//! server over HTTP, on a SQLite file.

mod support;

use std::io::Write;
use std::sync::{Arc, Condvar, Mutex};

use agentrt::Canonical;
use agentrt::store::SqlValue;
use agentrt_mcp_fixture::{Mode, serve};
use agentrt_proxy::{Answer, CALLS_TABLE, NOTICE_QUEUE, Proxy, request_key};

const TOOL: &str = "fs_read_file";

async fn call(proxy: &Proxy, path: &str) -> Answer {
    let args = format!(r#"{{"path":"{path}"}}"#);
    proxy
        .call(TOOL, Some(args.as_bytes()), None)
        .await
        .expect("the tool is offered")
}

fn prose(answer: &Answer) -> &str {
    match answer {
        Answer::Prose { text, .. } => text,
        other => panic!("not prose: {other:?}"),
    }
}

fn open_rows(store: &agentrt::Store, session: &str) -> Vec<String> {
    store
        .rows_where(
            CALLS_TABLE,
            &[
                ("session", SqlValue::from(session)),
                ("open", SqlValue::Int(1)),
            ],
            0,
        )
        .expect("rows")
        .iter()
        .filter_map(|r| r.text("run_id").map(str::to_owned))
        .collect()
}

/// A change that ran settles its row: the next call's first write group
/// closes it, so rule 7 and the status tool read only the calls still
/// running, waiting or unknown, however many the session made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_that_ran_leaves_no_open_row_for_later_calls_to_read() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "settle""#,
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    for i in 0..20 {
        let answer = call(&proxy, &format!("f{i}")).await;
        assert!(matches!(answer, Answer::Result { .. }), "{answer:?}");
    }
    let store = support::store_on(dir.path());
    let open = open_rows(&store, "settle");
    assert_eq!(open.len(), 1, "only the last call's row: {open:?}");
}

/// Rules 4–6 read a request's runs newest first and stop at the first that
/// decides: a change that ran with a known outcome (no window: no
/// duplicate) decides rule 6, and nothing older is read. The oldest run's
/// row, pointed at a run that does not exist, shows it: reading it would
/// answer `UNAVAILABLE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requests_runs_older_than_the_one_that_decides_are_never_read() {
    let (url, seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "walk", "repeat_window": "0s""#,
        r#"{"side_effect": "local_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    for _ in 0..3 {
        let answer = call(&proxy, "same").await;
        assert!(matches!(answer, Answer::Result { .. }), "{answer:?}");
    }
    let key = request_key(
        TOOL,
        &Canonical::parse_str(r#"{"path":"same"}"#).expect("args"),
    );
    let db = rusqlite::Connection::open(dir.path().join("proxy.db")).expect("db");
    let changed = db
        .execute(
            "UPDATE proxy_calls SET run_id = 'walk.missing' WHERE rowid =
                 (SELECT MIN(rowid) FROM proxy_calls WHERE request_key = ?1)",
            [&key],
        )
        .expect("update");
    assert_eq!(changed, 1);
    drop(db);
    let answer = call(&proxy, "same").await;
    assert!(matches!(answer, Answer::Result { .. }), "{answer:?}");
    assert_eq!(seen.call_arguments.lock().expect("lock").len(), 4);
}

/// design §32: the status tool reads at most 200 of the session's rows (its
/// newest unsettled ones, for what waits): with 250 approvals waiting it
/// lists the 200 newest and says that older ones may wait too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_tool_lists_at_most_200_waiting_requests_and_says_so() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "many", "hold": "0s", "max_pending": 1000"#,
        r#"{"side_effect": "remote_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    let mut first = None;
    for i in 0..250 {
        let answer = call(&proxy, &format!("w{i}")).await;
        let text = prose(&answer);
        assert!(text.starts_with("PENDING_APPROVAL: "), "{text}");
        first.get_or_insert_with(|| text.to_owned());
    }
    let status = proxy.status(None).await;
    let text = prose(&status);
    assert!(
        text.starts_with(
            "GATE_STATUS: 200 requests of this session wait for an operator's approval:\n"
        ),
        "{}",
        &text[..200.min(text.len())]
    );
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("- approval "))
            .count(),
        200
    );
    assert!(
        text.ends_with(
            "\nOnly the 200 most recent unsettled requests were read; older ones may wait too."
        ),
        "{text}"
    );
    // The newest are listed, the oldest not.
    assert!(text.contains(r#"{"path":"w249"}"#), "{text}");
    assert!(!text.contains(r#"{"path":"w0"}"#), "{text}");
    // An approval among the 200 newest is known; the first is past them.
    let first = first.expect("the first answer");
    let first_id = first
        .split("(approval ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("an approval id");
    let about = proxy
        .status(Some(
            format!(r#"{{"approval_id":"{first_id}"}}"#).as_bytes(),
        ))
        .await;
    assert!(
        prose(&about).starts_with("GATE_STATUS: no approval "),
        "{}",
        prose(&about)
    );
}

/// What [`Gate`] holds: whether it is open, how many writes began, what
/// was written.
type GateState = (Mutex<(bool, usize, Vec<u8>)>, Condvar);

/// A `Write` that blocks every write until the test opens it, and says
/// when a write began.
#[derive(Clone, Default)]
struct Gate {
    state: Arc<GateState>,
}

impl Gate {
    /// Waits until a write began.
    fn entered(&self) {
        let (lock, cond) = &*self.state;
        let mut state = lock.lock().expect("lock");
        while state.1 == 0 {
            state = cond.wait(state).expect("wait");
        }
    }

    /// Lets every write through.
    fn open(&self) {
        let (lock, cond) = &*self.state;
        lock.lock().expect("lock").0 = true;
        cond.notify_all();
    }

    /// Waits until `notices` notices were written; what was written.
    fn written(&self, notices: usize) -> String {
        let (lock, cond) = &*self.state;
        let mut state = lock.lock().expect("lock");
        loop {
            let text = String::from_utf8_lossy(&state.2).into_owned();
            if text.matches("decide with: agentrt --db").count() >= notices {
                return text;
            }
            state = cond.wait(state).expect("wait");
        }
    }
}

impl Write for Gate {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let (lock, cond) = &*self.state;
        let mut state = lock.lock().expect("lock");
        state.1 += 1;
        cond.notify_all();
        while !state.0 {
            state = cond.wait(state).expect("wait");
        }
        state.2.extend_from_slice(buf);
        cond.notify_all();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An operator notice never waits for stderr: with a notices writer that
/// blocks (a host that never reads the proxy's stderr), every call that
/// asks for an approval still answers at once; the notices past the
/// queue are dropped and counted, and the next one that gets through says
/// how many.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stderr_nobody_reads_never_holds_a_call_and_dropped_notices_are_counted() {
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let config_path = support::configure(
        dir.path(),
        &url,
        r#""session": "quiet", "hold": "0s", "max_pending": 1000"#,
        r#"{"side_effect": "remote_mutation", "timeout": "2s"}"#,
    )
    .await;
    let config = agentrt_proxy::read_config(&config_path).expect("config");
    let loaded = agentrt_proxy::load_all(&config).await.expect("load");
    let stderr = Gate::default();
    let proxy = Arc::new(
        agentrt_proxy::build_proxy(
            Arc::new(config),
            support::store_on(dir.path()),
            &loaded,
            Box::new(stderr.clone()),
        )
        .expect("proxy"),
    );
    // The first notice reaches the writer, which blocks on it.
    assert!(prose(&call(&proxy, "n0").await).starts_with("PENDING_APPROVAL: "));
    stderr.entered();
    // The calls run on the runtime's workers; were one to wait for stderr,
    // the guard below (on this thread) would still end the test.
    let more = NOTICE_QUEUE + 10;
    let calling = Arc::clone(&proxy);
    let calls = tokio::spawn(async move {
        for i in 1..=more {
            let answer = call(&calling, &format!("n{i}")).await;
            assert!(
                prose(&answer).starts_with("PENDING_APPROVAL: "),
                "{answer:?}"
            );
        }
    });
    let asked = tokio::time::timeout(std::time::Duration::from_secs(20), calls).await;
    // Counted before the writer is let go (which would also free a call
    // stuck on stderr, so that a failure ends the test).
    let dropped = proxy.dropped_notices();
    stderr.open();
    assert!(
        matches!(asked, Ok(Ok(()))),
        "a call waited for stderr: {asked:?}"
    );
    // The queue holds NOTICE_QUEUE of them; the rest were dropped.
    assert_eq!(dropped, 10);
    // Once the queue is written, the next notice gets through, and says
    // how many were dropped before it.
    let queued = stderr.clone();
    tokio::task::spawn_blocking(move || queued.written(NOTICE_QUEUE + 1))
        .await
        .expect("written");
    assert!(prose(&call(&proxy, "last").await).starts_with("PENDING_APPROVAL: "));
    let all = stderr.clone();
    let written = tokio::task::spawn_blocking(move || all.written(NOTICE_QUEUE + 2))
        .await
        .expect("written");
    assert!(
        written.contains(
            "agentrt-proxy: 10 earlier approval notice(s) dropped: stderr is not read fast enough\n\
             agentrt-proxy: approval "
        ),
        "{written}"
    );
    assert_eq!(proxy.dropped_notices(), 10);
    drop(loaded);
}

/// With an id, the status tool also reads the rows settled within the last
/// hour: an approval whose call was collected, ran and settled (its row
/// closed by the next call) is still answered for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_tool_answers_for_an_approval_whose_call_settled_within_the_hour() {
    use agentrt::operator::{DecideOptions, Operator};
    let (url, _seen) = serve(Mode::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    support::configure(
        dir.path(),
        &url,
        r#""session": "later", "hold": "0s""#,
        r#"{"side_effect": "remote_mutation", "timeout": "2s"}"#,
    )
    .await;
    let proxy = support::proxy_on(dir.path()).await;
    let asked = call(&proxy, "x").await;
    let approval = prose(&asked)
        .split("(approval ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .expect("an approval id")
        .to_owned();
    let store = support::store_on(dir.path());
    let run = open_rows(&store, "later")
        .pop()
        .expect("the waiting call's row");
    Operator::new(store.clone())
        .approve(
            &run,
            &approval,
            &DecideOptions {
                by: "operator",
                note: "",
                shown_hash: None,
            },
        )
        .expect("approved");
    assert!(matches!(call(&proxy, "x").await, Answer::Result { .. }));
    // The next call's first write group closes the collected call's row.
    assert!(prose(&call(&proxy, "y").await).starts_with("PENDING_APPROVAL: "));
    assert!(!open_rows(&store, "later").contains(&run), "settled");
    let about = proxy
        .status(Some(
            format!(r#"{{"approval_id":"{approval}"}}"#).as_bytes(),
        ))
        .await;
    assert_eq!(
        prose(&about),
        format!("GATE_STATUS: approval {approval} was approved and its request ran and succeeded.")
    );
}
