//! The `agentrt-approver serve` binary: it serves the webhook over a
//! database on loopback, stops at SIGTERM, and refuses a remote address
//! without its flag and a secret or keys file others can read.

use std::path::Path;
use std::process::{Command, Stdio};

use agentrt::{Limits, Store};

mod support;

use agentrt_approver::signature::{Secret, keyed_headers};
use support::{SECRET, approver, send, write_secret};

/// Runs `command`, which is expected to refuse to start: its exit code and
/// stderr. One that is still running (serving) after `deadline` is killed
/// and fails the test, instead of leaving it waiting forever.
fn refused_within(mut command: Command, deadline: std::time::Duration) -> (Option<i32>, String) {
    let mut child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let until = std::time::Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "still running after {deadline:?}, not refused: {}",
                reader.join().unwrap_or_default()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    (status.code(), reader.join().unwrap())
}

async fn waiting_run(db: &Path) -> (String, String) {
    support::pause_on_push(db, "r1", "{}", Limits::default(), None).await
}

#[tokio::test]
async fn serve_answers_signed_requests_on_loopback_and_stops_at_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (approval, hash) = waiting_run(&db).await;
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);

    let (mut child, _stderr, base) = support::serve_on(db.as_os_str(), &secret);
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");

    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let (status, listed) = send(&http, &base, reqwest::Method::GET, "/runs/r1/approvals", "").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["pending"][0]["hash"], hash.as_str());
    let body =
        serde_json::json!({"run_id": "r1", "approval_id": approval, "hash": hash, "by": "alice"})
            .to_string();
    let path = format!("/runs/r1/approvals/{approval}/approve");
    let (status, decided) = send(&http, &base, reqwest::Method::POST, &path, &body).await;
    assert_eq!(status, 202, "{decided}");
    assert_eq!(decided["status"], "approved");

    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let exit = child.wait().unwrap();
    assert!(exit.success(), "{exit:?}");
}

#[test]
fn a_remote_address_needs_its_flag_and_the_secret_must_be_private_and_long() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    drop(Store::open(&db).unwrap());
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);
    let run = |listen: &str, secret: &Path| {
        let mut command = approver();
        command
            .args(["serve", "--listen", listen, "--db"])
            .arg(&db)
            .arg("--secret-file")
            .arg(secret);
        refused_within(command, std::time::Duration::from_secs(20))
    };

    let (code, stderr) = run("0.0.0.0:0", &secret);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("not a loopback address") && stderr.contains("--allow-remote"),
        "{stderr}"
    );

    write_secret(&secret, 0o640);
    let (code, stderr) = run("127.0.0.1:0", &secret);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("chmod go-rwx"), "{stderr}");
    assert!(
        !stderr.contains(SECRET),
        "the secret is never shown: {stderr}"
    );

    use std::os::unix::fs::PermissionsExt;
    std::fs::write(&secret, "short\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (code, stderr) = run("127.0.0.1:0", &secret);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("at least 32"), "{stderr}");

    let (code, stderr) = run("127.0.0.1:0", &dir.path().join("missing"));
    assert_eq!(code, Some(1), "{stderr}");
}

#[tokio::test]
async fn serve_takes_the_database_from_agentrt_db_when_no_db_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (_, hash) = waiting_run(&db).await;
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);

    let mut command = approver();
    command.arg("serve").env("AGENTRT_DB", &db);
    let (child, _stderr, base) = support::serve_with(command, &secret);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let (status, listed) = send(&http, &base, reqwest::Method::GET, "/runs/r1/approvals", "").await;
    assert_eq!(status, 200, "{listed}");
    assert_eq!(listed["pending"][0]["hash"], hash.as_str());
    support::stop(child);

    let mut command = approver();
    command
        .args(["serve", "--secret-file"])
        .arg(&secret)
        .env_remove("AGENTRT_DB");
    let (code, stderr) = refused_within(command, std::time::Duration::from_secs(20));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("pass --db PATH or set AGENTRT_DB"),
        "{stderr}"
    );
}

/// The keys file of these tests: alice's key, and `extra` entries.
fn write_keys(path: &Path, mode: u32, extra: serde_json::Value) {
    use std::os::unix::fs::PermissionsExt;
    let mut keys = serde_json::json!({
        "alice-laptop": {"approver": "alice", "secret": ALICE_SECRET},
    });
    if let (Some(keys), Some(extra)) = (keys.as_object_mut(), extra.as_object()) {
        keys.extend(extra.clone());
    }
    std::fs::write(path, serde_json::json!({ "keys": keys }).to_string()).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const ALICE_SECRET: &str = "alice-0123456789abcdef0123456789abcdef";

/// `serve --keys`: a request signed with alice's key decides as alice;
/// by the shared secret as before.
#[tokio::test]
async fn serve_with_keys_decides_as_the_keys_approver() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    let (approval, hash) = waiting_run(&db).await;
    let (secret, keys) = (dir.path().join("secret"), dir.path().join("keys.json"));
    write_secret(&secret, 0o600);
    write_keys(&keys, 0o600, serde_json::json!({}));

    let mut command = approver();
    command
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--keys")
        .arg(&keys);
    let (child, _stderr, base) = support::serve_with(command, &secret);
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let path = format!("/runs/r1/approvals/{approval}/approve");
    let send_as = async |by: &str| {
        let body =
            serde_json::json!({"run_id": "r1", "approval_id": approval, "hash": hash, "by": by})
                .to_string();
        let headers = keyed_headers(
            &Secret::new(ALICE_SECRET).unwrap(),
            "alice-laptop",
            "POST",
            &path,
            body.as_bytes(),
        )
        .unwrap();
        support::send_signed(&http, &base, reqwest::Method::POST, &path, &body, &headers).await
    };
    let (status, refused) = send_as("bob").await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("by_mismatch")),
        "{refused}"
    );
    let (status, decided) = send_as("alice").await;
    assert_eq!(status, 202, "{decided}");
    assert_eq!(decided["by"], "alice");
    let (status, listed) = send(&http, &base, reqwest::Method::GET, "/runs/r1/approvals", "").await;
    assert_eq!(status, 200, "the shared secret still reads: {listed}");
    support::stop(child);
}

/// A keys file others may read, or with a bad key, or a key whose secret
/// is the shared secret: `serve` refuses to start, naming the file and
/// the key, never a secret.
#[test]
fn serve_refuses_a_keys_file_others_may_read_or_a_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    drop(Store::open(&db).unwrap());
    let (secret, keys) = (dir.path().join("secret"), dir.path().join("keys.json"));
    write_secret(&secret, 0o600);
    let run = || {
        let mut command = approver();
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(&db)
            .arg("--secret-file")
            .arg(&secret)
            .arg("--keys")
            .arg(&keys);
        refused_within(command, std::time::Duration::from_secs(20))
    };
    let cases = [
        (0o640, serde_json::json!({}), "chmod go-rwx"),
        (0o604, serde_json::json!({}), "chmod go-rwx"),
        (
            0o600,
            serde_json::json!({"bob-ci": {"approver": "bob", "secret": "short"}}),
            r#"key "bob-ci": its secret has 5 bytes"#,
        ),
        (
            0o600,
            serde_json::json!({"bob ci": {"approver": "bob", "secret": SECRET}}),
            r#"key "bob ci": a key id is 1 to 64"#,
        ),
        (
            0o600,
            serde_json::json!({"ops": {"approver": "ops", "secret": SECRET}}),
            r#"key "ops": its secret is the shared secret"#,
        ),
    ];
    for (mode, extra, says) in cases {
        write_keys(&keys, mode, extra);
        let (code, stderr) = run();
        assert_eq!(code, Some(1), "{stderr}");
        assert!(stderr.contains("keys file"), "{stderr}");
        assert!(stderr.contains(says), "{says}: {stderr}");
        assert!(
            !stderr.contains(ALICE_SECRET) && !stderr.contains(SECRET),
            "never a secret: {stderr}"
        );
    }
}

#[test]
fn serve_help_says_a_password_belongs_in_agentrt_db_not_on_the_command_line() {
    let out = approver().args(["serve", "--help"]).output().unwrap();
    assert!(out.status.success());
    // Its words, however clap wraps them to the terminal.
    let help = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains(
            "A URL with a password belongs in $AGENTRT_DB, not here: a command line is visible to every process"
        ),
        "{help}"
    );
    assert!(help.contains("Default: $AGENTRT_DB"), "{help}");
}

/// Serves `db` with `flags`, signs in to r1 with a link from `login-link`
/// sending `headers`: the session cookie as set.
async fn cookie_served_with(
    db: &Path,
    secret: &Path,
    flags: &[&str],
    headers: &[(&str, &str)],
) -> String {
    let mut command = approver();
    command.args(["serve", "--db"]).arg(db).args(flags);
    let (child, _stderr, base) = support::serve_with(command, secret);
    let link = approver()
        .args([
            "login-link",
            "--run",
            "r1",
            "--by",
            "alice",
            "--base",
            &base,
        ])
        .arg("--secret-file")
        .arg(secret)
        .output()
        .unwrap();
    assert!(link.status.success(), "{link:?}");
    let link = String::from_utf8(link.stdout).unwrap();
    assert!(
        link.starts_with(&format!("{base}/ui/login?token=")),
        "{link}"
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = http.get(link.trim());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 303);
    assert_eq!(response.headers()["location"], "/ui/runs/r1");
    let cookie = response.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .to_owned();
    support::stop(child);
    cookie
}

#[tokio::test]
async fn the_cookie_is_secure_with_cookie_secure_or_a_trusted_forwarded_https_and_not_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    waiting_run(&db).await;
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);
    let https = [("X-Forwarded-Proto", "https")];

    let plain = cookie_served_with(&db, &secret, &[], &https).await;
    assert!(
        plain.contains("HttpOnly") && !plain.contains("Secure"),
        "{plain}"
    );
    let secure = cookie_served_with(&db, &secret, &["--cookie-secure"], &[]).await;
    assert!(secure.ends_with("; Secure"), "{secure}");
    let trusted = ["--trust-forwarded-proto", "X-Forwarded-Proto"];
    let forwarded = cookie_served_with(&db, &secret, &trusted, &https).await;
    assert!(forwarded.ends_with("; Secure"), "{forwarded}");
    let direct = cookie_served_with(&db, &secret, &trusted, &[]).await;
    assert!(!direct.contains("Secure"), "{direct}");

    let mut both = approver();
    both.args(["serve", "--db"])
        .arg(&db)
        .args([
            "--cookie-secure",
            "--trust-forwarded-proto",
            "X-Forwarded-Proto",
        ])
        .arg("--secret-file")
        .arg(&secret);
    let (code, stderr) = refused_within(both, std::time::Duration::from_secs(20));
    assert_eq!(code, Some(2), "one or the other: {stderr}");
}

#[tokio::test]
async fn an_internal_error_is_told_to_the_operator_on_stderr_and_not_to_the_caller() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("runs.db");
    waiting_run(&db).await;
    let secret = dir.path().join("secret");
    write_secret(&secret, 0o600);
    let (mut child, stderr, base) = support::serve_on(db.as_os_str(), &secret);
    // The store's table goes away behind the server: its next read fails
    // inside, which is no fault of the caller.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("ALTER TABLE approvals RENAME TO approvals_gone")
        .unwrap();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let (status, answer) = send(&http, &base, reqwest::Method::GET, "/runs/r1/approvals", "").await;
    assert_eq!(status, 500, "{answer}");
    assert_eq!(
        answer["error"], "internal error",
        "the caller learns nothing of it"
    );
    // SAFETY: kill with a valid pid of our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let said: Vec<String> = stderr.lines().map_while(Result::ok).collect();
    let line = said
        .iter()
        .find(|l| l.starts_with("agentrt-approver: internal error: webhook: reading approvals: "))
        .unwrap_or_else(|| panic!("the operator is told: {said:#?}"));
    assert!(line.contains("approvals"), "the cause: {line}");
    assert!(!said.iter().any(|l| l.contains(SECRET)), "{said:#?}");
}
