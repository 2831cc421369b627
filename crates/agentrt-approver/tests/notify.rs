//! `agentrt-approver notify`: notices from the log, delivered to real
//! HTTP receivers on loopback; the cursor, retries, restarts, reminders.

mod support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrt::{Limits, Store};
use agentrt_approver::notify::{Notifier, NotifyConfig};
use agentrt_approver::signature::Secret;
use axum::body::Bytes;
use hmac::{KeyInit, Mac};
use support::receiver::{Received, Receiver, listener};
use support::{SECRET, pause_on_push, write_secret};

/// The outbound webhook's own secret (not the page's).
const OUT_SECRET: &str = "notify-secret-0123456789abcdef0123456789abcdef";

fn private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// A config with a signed webhook to `port` and page links, in `dir`.
fn webhook_config(dir: &Path, port: u16, extra: &str) -> PathBuf {
    private(&dir.join("out.secret"), OUT_SECRET);
    let path = dir.join("notify.json");
    private(
        &path,
        &format!(
            r#"{{{extra}"page": {{"base": "http://127.0.0.1:8787/", "link_minutes": 30}},
               "channels": [{{"kind": "webhook", "url": "http://127.0.0.1:{port}/hooks/agentrt",
                              "secret_file": "out.secret", "link_as": "on-call"}}]}}"#
        ),
    );
    path
}

fn page_secret() -> Secret {
    Secret::new(SECRET).unwrap()
}

fn notifier(config: &Path) -> Notifier {
    Notifier::new(NotifyConfig::load(config).unwrap(), Some(page_secret())).unwrap()
}

/// A notifier following `db` in the background, its log lines kept.
struct Following {
    handle: agentrt::CancelHandle,
    task: tokio::task::JoinHandle<Result<(), agentrt_approver::notify::NotifyError>>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Following {
    fn start(config: &Path, db: &Path, cursor: &Path) -> Following {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let told = Arc::clone(&lines);
        let notifier =
            notifier(config).with_log(move |line| told.lock().unwrap().push(line.into()));
        let (handle, stop) = agentrt::cancel_pair();
        let (db, cursor) = (db.to_owned(), cursor.to_owned());
        let task = tokio::spawn(async move { notifier.run(db, cursor, false, &stop).await });
        Following {
            handle,
            task,
            lines,
        }
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits (up to 30 s) until it logged `n` lines.
    async fn until_lines(&self, n: usize) -> Vec<String> {
        let start = Instant::now();
        while self.lines.lock().unwrap().len() < n {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waited for {n} lines"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.lines()
    }

    /// Stops it; it must end cleanly.
    async fn stop(self) {
        self.handle.cancel();
        self.task.await.unwrap().unwrap();
    }
}

/// The signature a receiver computes from the documented scheme alone:
/// HMAC-SHA256 over `<timestamp>\n<nonce>\nPOST\n<path>\n<body>`.
fn documented_signature(secret: &str, r: &Received) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(
        format!(
            "{}\n{}\nPOST\n{}\n",
            r.header("x-approval-timestamp"),
            r.header("x-approval-nonce"),
            r.path
        )
        .as_bytes(),
    );
    mac.update(&r.body);
    let tag = mac.finalize().into_bytes();
    format!(
        "v1={}",
        tag.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signed_notice_verifies_by_the_documented_scheme_and_carries_a_key_and_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (approval_id, hash) = pause_on_push(
        &db,
        "r-sign",
        r#"{"branch":"main"}"#,
        Limits::default(),
        None,
    )
    .await;
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, "");
    let cursor = dir.path().join("notify.cursor");
    notifier(&config)
        .run(db.clone(), cursor.clone(), true, &agentrt::Cancel::never())
        .await
        .unwrap();
    let seen = receiver.until(1).await;
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.path, "/hooks/agentrt");
    assert_eq!(
        r.header("x-approval-signature"),
        documented_signature(OUT_SECRET, r)
    );
    // A receiver holding the page's secret instead cannot verify it: the
    // channel's own secret signs it.
    assert_ne!(
        r.header("x-approval-signature"),
        documented_signature(SECRET, r)
    );
    // Any change of the body breaks the signature.
    let mut forged = r.clone();
    forged.body = Bytes::from(String::from_utf8_lossy(&r.body).replace("main", "prod"));
    assert_ne!(
        r.header("x-approval-signature"),
        documented_signature(OUT_SECRET, &forged)
    );
    let body = r.json();
    assert_eq!(body["kind"], "approval_requested");
    assert_eq!(body["run_id"], "r-sign");
    assert_eq!(body["approval"]["id"], approval_id.as_str());
    assert_eq!(body["approval"]["hash"], hash.as_str());
    let key = body["idempotency_key"].as_str().unwrap().to_owned();
    assert_eq!(r.header("idempotency-key"), key);
    assert!(key.starts_with("agentrt:"), "{key}");
    let link = body["link"].as_str().unwrap();
    assert!(
        link.starts_with("http://127.0.0.1:8787/ui/login?token="),
        "{link}"
    );
    // The cursor names the delivered event; a second pass sends nothing.
    let saved: i64 = std::fs::read_to_string(&cursor)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(saved >= body["seq"].as_i64().unwrap());
    notifier(&config)
        .run(db, cursor, true, &agentrt::Cancel::never())
        .await
        .unwrap();
    assert_eq!(receiver.seen().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_is_down_then_up_gets_every_notice_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for n in 0..3 {
        pause_on_push(&db, &format!("r{n}"), "{}", Limits::default(), None).await;
    }
    // A port nothing listens on yet.
    let port = listener().await.local_addr().unwrap().port();
    let config = webhook_config(dir.path(), port, "");
    let cursor = dir.path().join("notify.cursor");
    let following = Following::start(&config, &db, &cursor);
    let line = following.until_lines(2).await[0].clone();
    // Nothing moved while the receiver was down.
    assert!(!cursor.exists());
    assert!(line.contains("webhook #0 (127.0.0.1)"), "{line}");
    assert!(line.contains("not delivered"), "{line}");
    let receiver = Receiver::new();
    receiver.serve(
        tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap(),
    );
    receiver.until(3).await;
    // A run paused while the notifier follows is told too.
    pause_on_push(&db, "r-late", "{}", Limits::default(), None).await;
    let seen = receiver.until(4).await;
    following.stop().await;
    let mut keys: Vec<String> = seen.iter().map(|r| r.header("idempotency-key")).collect();
    let runs: Vec<String> = seen
        .iter()
        .map(|r| r.json()["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs, ["r0", "r1", "r2", "r-late"]);
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 4, "each notice once: {keys:?}");
    assert_eq!(receiver.seen().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_approval_is_not_told_and_a_failed_run_is_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (decided, hash) = pause_on_push(&db, "r-decided", "{}", Limits::default(), None).await;
    pause_on_push(&db, "r-waits", "{}", Limits::default(), None).await;
    let operator = agentrt::Operator::new(Store::open(&db).unwrap());
    let options = agentrt::DecideOptions {
        by: "alice",
        note: "no",
        shown_hash: Some(&hash),
    };
    operator.reject("r-decided", &decided, &options).unwrap();
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, r#""run_failed": true, "#);
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let told = Arc::clone(&lines);
    notifier(&config)
        .with_log(move |line| told.lock().unwrap().push(line.into()))
        .run(
            db.clone(),
            dir.path().join("c"),
            true,
            &agentrt::Cancel::never(),
        )
        .await
        .unwrap();
    let runs: Vec<String> = receiver
        .seen()
        .iter()
        .map(|r| r.json()["run_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(runs, ["r-waits"]);
    assert!(
        lines
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("r-decided") && l.contains("not told")),
        "{lines:?}"
    );
    // The rejection cancelled r-decided (not a failure); a run that fails
    // is told with its reason.
    support::fail_run(&db, "r-failed").await;
    notifier(&config)
        .run(db, dir.path().join("c"), true, &agentrt::Cancel::never())
        .await
        .unwrap();
    let seen = receiver.seen();
    assert_eq!(seen.len(), 2);
    let failed = seen[1].json();
    assert_eq!(failed["kind"], "run_failed");
    assert_eq!(failed["run_id"], "r-failed");
    assert!(failed["run"]["reason"].as_str().unwrap().len() > 2);
    assert!(
        failed.get("link").is_none(),
        "a failed run has no page link"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_whose_outcome_is_unknown_is_told_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    support::pause_on_unknown(&db, "r-unknown").await;
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, "");
    notifier(&config)
        .run(db, dir.path().join("c"), true, &agentrt::Cancel::never())
        .await
        .unwrap();
    let seen = receiver.until(1).await;
    let body = seen[0].json();
    assert_eq!(body["kind"], "unknown_outcome");
    assert_eq!(body["approval"]["kind"], "interrupted_side_effect");
    assert!(body["link"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_still_waiting_after_remind_after_is_reminded_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    pause_on_push(&db, "r-waits", "{}", Limits::default(), None).await;
    let (decided, hash) = pause_on_push(&db, "r-decided", "{}", Limits::default(), None).await;
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, r#""remind_after_seconds": 1, "#);
    let following = Following::start(&config, &db, &dir.path().join("c"));
    receiver.until(2).await;
    let options = agentrt::DecideOptions {
        by: "alice",
        note: "",
        shown_hash: Some(&hash),
    };
    agentrt::Operator::new(Store::open(&db).unwrap())
        .approve("r-decided", &decided, &options)
        .unwrap();
    let seen = receiver.until(3).await;
    // Past the second reminder's due time, nothing more arrives.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    following.stop().await;
    assert_eq!(receiver.seen().len(), 3);
    let reminder = seen[2].json();
    assert_eq!(reminder["kind"], "reminder");
    assert_eq!(reminder["run_id"], "r-waits");
    let first = seen[0].json();
    assert_eq!(
        reminder["idempotency_key"],
        format!("{}:reminder", first["idempotency_key"].as_str().unwrap())
    );
    assert_eq!(reminder["approval"]["hash"], first["approval"]["hash"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chat_message_holds_the_log_as_text_and_the_page_link_alone_as_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let args = r#"{"branch":"<script>alert(1)</script>","title":"```</code> [click](https://evil.example) <https://evil.example|here>"}"#;
    pause_on_push(&db, "r-chat", args, Limits::default(), None).await;
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let path = dir.path().join("notify.json");
    private(
        &path,
        &format!(
            r#"{{"page": {{"base": "http://127.0.0.1:8787"}},
                "channels": [{{"kind": "chat", "url": "http://127.0.0.1:{port}/services/T0/B0/credential"}}]}}"#
        ),
    );
    notifier(&path)
        .run(db, dir.path().join("c"), true, &agentrt::Cancel::never())
        .await
        .unwrap();
    let seen = receiver.until(1).await;
    let body = seen[0].json();
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    let text = body["text"].as_str().unwrap();
    assert!(text.contains("&lt;script&gt;"), "{text}");
    assert!(!text.contains("<script>"), "{text}");
    assert!(!text.contains("<https://evil"), "{text}");
    // One code block: the model's backticks cannot close it.
    assert_eq!(text.matches("```").count(), 2, "{text}");
    let (inside, after) = text.rsplit_once("```").unwrap();
    assert!(inside.contains("[click](https://evil.example)"));
    assert!(
        after.contains("http://127.0.0.1:8787/ui/login?token="),
        "{after}"
    );
    assert!(!after.contains("evil"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_not_followed_and_the_notice_is_not_counted_as_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    pause_on_push(&db, "r-moved", "{}", Limits::default(), None).await;
    let (elsewhere, listener_b) = (Receiver::new(), listener().await);
    let to = format!("http://{}/stolen", listener_b.local_addr().unwrap());
    elsewhere.serve(listener_b);
    let (receiver, listener_a) = (Receiver::new(), listener().await);
    let port = listener_a.local_addr().unwrap().port();
    *receiver.redirect.lock().unwrap() = Some(to);
    receiver.serve(listener_a);
    let config = webhook_config(dir.path(), port, "");
    let cursor = dir.path().join("c");
    let following = Following::start(&config, &db, &cursor);
    let seen = receiver.until(2).await;
    let lines = following.lines();
    following.stop().await;
    assert!(
        elsewhere.seen().is_empty(),
        "the signed body went nowhere else"
    );
    let seq = seen[0].json()["seq"].as_i64().unwrap();
    assert!(
        cursor_at(&cursor) < seq,
        "not delivered: the cursor stays before it"
    );
    assert!(lines[0].contains("answered 307"), "{lines:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_gives_up_on_a_destination_that_stays_down_and_keeps_the_cursor_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    pause_on_push(&db, "r-down", "{}", Limits::default(), None).await;
    let port = listener().await.local_addr().unwrap().port();
    let config = webhook_config(dir.path(), port, "");
    let secret = dir.path().join("page.secret");
    write_secret(&secret, 0o600);
    let cursor = dir.path().join("c");
    let out = support::approver()
        .args(["notify", "--once", "--db"])
        .arg(&db)
        .arg("--cursor")
        .arg(&cursor)
        .arg("--config")
        .arg(&config)
        .arg("--secret-file")
        .arg(&secret)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("webhook #0 (127.0.0.1) did not take agentrt:"),
        "{stderr}"
    );
    assert!(stderr.contains("after 4 attempts"), "{stderr}");
    // The events before the request were passed; the request was not.
    let requested = Store::open_existing(&db, true)
        .unwrap()
        .list_events("r-down")
        .unwrap()
        .into_iter()
        .find(|e| e.event_type == agentrt::EventType::ApprovalRequested)
        .unwrap()
        .seq;
    assert_eq!(cursor_at(&cursor), requested - 1);
}

#[test]
fn notify_refuses_a_config_others_may_read_and_a_page_without_its_secret() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    drop(Store::open(&db).unwrap());
    let config = webhook_config(dir.path(), 9, "");
    let run = |extra: &[&str]| {
        let out = support::approver()
            .args(["notify", "--once", "--db"])
            .arg(&db)
            .arg("--cursor")
            .arg(dir.path().join("c"))
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("--secret-file"), "{stderr}");
    let secret = dir.path().join("page.secret");
    write_secret(&secret, 0o600);
    let secret_arg = secret.to_str().unwrap();
    let (code, stderr) = run(&["--secret-file", secret_arg]);
    assert_eq!(code, Some(0), "{stderr}");
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, stderr) = run(&["--secret-file", secret_arg]);
    assert_eq!(code, Some(1));
    assert!(stderr.contains("notify config"), "{stderr}");
}

/// The seq the cursor file at `path` holds (0 while there is none).
fn cursor_at(path: &Path) -> i64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_killed_mid_delivery_and_restarted_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    for n in 0..3 {
        pause_on_push(&db, &format!("k{n}"), "{}", Limits::default(), None).await;
    }
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    // The second notice is taken and never answered: the notifier is
    // killed while it waits.
    *receiver.hang.lock().unwrap() = Some(1);
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, "");
    let secret = dir.path().join("page.secret");
    write_secret(&secret, 0o600);
    let cursor = dir.path().join("notify.cursor");
    let spawn = || {
        support::approver()
            .args(["notify", "--db"])
            .arg(&db)
            .arg("--cursor")
            .arg(&cursor)
            .arg("--config")
            .arg(&config)
            .arg("--secret-file")
            .arg(&secret)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let mut child = spawn();
    let seen = receiver.until(2).await;
    let first = &seen[..1];
    let in_flight = seen[1].header("idempotency-key");
    let saved = cursor_at(&cursor);
    assert!(saved >= first[0].json()["seq"].as_i64().unwrap());
    assert!(saved < seen[1].json()["seq"].as_i64().unwrap());
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let mut child = spawn();
    let seen = receiver.until(4).await;
    // Give it the chance to send more than it should.
    tokio::time::sleep(Duration::from_millis(300)).await;
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    let seen_all = receiver.seen();
    assert_eq!(seen_all.len(), seen.len());
    let mut counts: HashMap<String, usize> = HashMap::new();
    for r in &seen_all {
        *counts.entry(r.header("idempotency-key")).or_default() += 1;
    }
    assert_eq!(counts.len(), 3, "every notice arrived: {counts:?}");
    for (key, count) in &counts {
        let expected = if *key == in_flight { 2 } else { 1 };
        assert_eq!(*count, expected, "{key}: {counts:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_notifies_from_the_same_process_and_stops_at_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    pause_on_push(&db, "r-serve", "{}", Limits::default(), None).await;
    let (receiver, listener) = (Receiver::new(), listener().await);
    let port = listener.local_addr().unwrap().port();
    receiver.serve(listener);
    let config = webhook_config(dir.path(), port, "");
    let secret = dir.path().join("page.secret");
    write_secret(&secret, 0o600);
    let mut command = support::approver();
    command
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--notify-config")
        .arg(&config)
        .arg("--notify-cursor")
        .arg(dir.path().join("c"));
    let (mut child, _stderr, _base) = support::serve_with(command, &secret);
    let seen = receiver.until(1).await;
    assert_eq!(seen[0].json()["run_id"], "r-serve");
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(cursor_at(&dir.path().join("c")) >= seen[0].json()["seq"].as_i64().unwrap());
}
