//! "Being told, and deciding" end to end, with real parts: the demo pauses
//! on its pull request; `notify` e-mails the operator through a real SMTP
//! server (aiosmtpd, which `cargo xtask test` installs pinned with hashes
//! and names in `AGENTRT_AIOSMTPD_PYTHON`), first while the server is
//! down, then once it is up; the link in the e-mail opens the approval
//! page in headless Chromium, which approves; the demo resumes and opens
//! the pull request once. And the same page edits the pull request's
//! arguments before approving them. Behind the `real-smtp` feature.

#[path = "../scripted/demo.rs"]
#[allow(dead_code)]
mod demo;
#[path = "../../crates/agentrt-approver/tests/browser/webdriver.rs"]
#[allow(dead_code)]
mod webdriver;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentrt::{ApprovalStatus, EventType, RunStatus, Store};
use agentrt_approver::notify::{Notifier, NotifyConfig};
use agentrt_approver::page::SecureCookie;
use agentrt_approver::serve::{ServeOptions, read_secret, serve};

const PAGE_SECRET: &str = "c2b7e1f09a3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d2c3b4a5f6e7d8c9b";
const OPERATOR: &str = "alice@example.test";

fn private(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (cargo xtask test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A private CA (`ca.pem`) and a server certificate it signed for
/// 127.0.0.1 and localhost (`server.pem`, `server.key`), in `dir`.
fn private_ca(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=agentrt test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n\
         keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.pem",
            "-days",
            "2",
            "-extfile",
            "server.ext",
        ],
    );
}

/// A loopback port nothing listens on (yet).
/// The approval page, served from this process on loopback over `db`,
/// its secret in a private file in `dir`.
struct Page {
    secret_file: PathBuf,
    base: String,
    stop: tokio::sync::oneshot::Sender<()>,
    served: tokio::task::JoinHandle<Result<(), agentrt_approver::serve::ServeError>>,
}

impl Page {
    async fn serve(db: &Path, dir: &Path) -> Page {
        let secret_file = dir.join("page.secret");
        private(&secret_file, PAGE_SECRET);
        let (addr_tx, addr_rx) = tokio::sync::oneshot::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let options = ServeOptions {
            db: db.to_owned(),
            listen: "127.0.0.1:0".parse().unwrap(),
            secret_file: secret_file.clone(),
            keys_file: None,
            oidc_file: None,
            allow_remote: false,
            secure_cookie: SecureCookie::Never,
            notify: None,
        };
        let served = tokio::spawn(async move {
            serve(&options, |addr| addr_tx.send(addr).unwrap(), async move {
                let _ = stopped.await;
            })
            .await
        });
        let base = format!("http://{}", addr_rx.await.unwrap());
        Page {
            secret_file,
            base,
            stop,
            served,
        }
    }

    /// Stops the server and waits for it to end cleanly.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.served.await.unwrap().unwrap();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// aiosmtpd on `port`, writing each message it takes into the Maildir at
/// `maildir` (created by it); killed when dropped.
struct SmtpServer(Child);

impl SmtpServer {
    fn start(port: u16, maildir: &Path) -> SmtpServer {
        SmtpServer::start_with(port, maildir, &[])
    }

    /// With aiosmtpd's `extra` options (its TLS certificate and key).
    fn start_with(port: u16, maildir: &Path, extra: &[&std::ffi::OsStr]) -> SmtpServer {
        let python = std::env::var("AGENTRT_AIOSMTPD_PYTHON").expect(
            "AGENTRT_AIOSMTPD_PYTHON names the python with aiosmtpd (cargo xtask test sets it)",
        );
        let child = Command::new(python)
            .args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(maildir)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "aiosmtpd did not listen"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        SmtpServer(child)
    }
}

impl Drop for SmtpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The messages in the Maildir, as delivered.
fn messages(maildir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(maildir.join("new")) else {
        return Vec::new();
    };
    entries
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .collect()
}

/// A message's body, decoded from quoted-printable when it is that.
fn body(message: &str) -> String {
    let (head, body) = message
        .split_once("\n\n")
        .or_else(|| message.split_once("\r\n\r\n"))
        .unwrap();
    if !head
        .to_ascii_lowercase()
        .contains("content-transfer-encoding: quoted-printable")
    {
        return body.to_owned();
    }
    let joined = body.replace("=\r\n", "").replace("=\n", "");
    let bytes = joined.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'=' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_s_approval_is_mailed_and_its_link_approves_in_a_browser_and_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let options = demo::Options {
        db: db.clone(),
        resume: None,
    };
    let first = demo::run(&options, &mut Vec::new(), Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(first.run.status, RunStatus::WaitingForApproval);
    let approval_id = first.approval.clone().unwrap();

    // The approval page, served from this process on loopback.
    let page = Page::serve(&db, dir.path()).await;
    let (secret_file, base) = (page.secret_file.clone(), page.base.clone());

    // notify, e-mailing alice through an SMTP server that is not up yet.
    let smtp_port = free_port();
    let maildir = dir.path().join("maildir");
    let config = dir.path().join("notify.json");
    private(
        &config,
        &format!(
            r#"{{"page": {{"base": "{base}", "link_minutes": 15}},
                "channels": [{{"kind": "email", "host": "127.0.0.1", "port": {smtp_port},
                               "security": "none", "from": "agentrt <agentrt@example.test>",
                               "to": ["{OPERATOR}"]}}]}}"#
        ),
    );
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let told = Arc::clone(&failures);
    let notifier = Notifier::new(
        NotifyConfig::load(&config).unwrap(),
        Some(read_secret(&secret_file).unwrap()),
    )
    .unwrap()
    .with_log(move |line| told.lock().unwrap().push(line.to_owned()));
    let (stop_notify, stop) = agentrt::cancel_pair();
    let cursor: PathBuf = dir.path().join("notify.cursor");
    let notifying = {
        let (db, cursor) = (db.clone(), cursor.clone());
        tokio::spawn(async move { notifier.run(db, cursor, false, &stop).await })
    };
    let start = Instant::now();
    while failures.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(failures.lock().unwrap()[0].contains(&format!("email #0 to {OPERATOR}")));
    let _smtp = SmtpServer::start(smtp_port, &maildir);
    let start = Instant::now();
    while messages(&maildir).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no message arrived"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Long enough for a second delivery to show, had there been one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_notify.cancel();
    notifying.await.unwrap().unwrap();
    let mail = messages(&maildir);
    assert_eq!(mail.len(), 1, "one message for one approval");
    let message = &mail[0];
    assert!(message.contains(&format!("To: {OPERATOR}")), "{message}");
    assert!(
        message.contains("waits for approval (pr_open)"),
        "{message}"
    );
    let text = body(message);
    assert!(text.contains(&approval_id), "{text}");
    let link = text
        .lines()
        .find(|l| l.starts_with(&format!("{base}/ui/login?token=")))
        .unwrap_or_else(|| panic!("no link in {text}"))
        .trim()
        .to_owned();

    // The link opens the page in a real browser, which approves.
    let browser = webdriver::Browser::start().await;
    browser.goto(&link).await;
    assert_eq!(
        browser.title().await,
        format!("Approvals of run {}", first.run.id)
    );
    browser.screenshot("notify-email-page").await;
    let button = browser.find(&format!("#approve-{approval_id}")).await;
    browser.click(&button).await;
    let shown = browser.wait_for("#message").await;
    assert!(browser.text(&shown).await.contains("was approved"));
    // The link signs in once: opened again, it is refused.
    browser.goto(&link).await;
    assert_ne!(
        browser.title().await,
        format!("Approvals of run {}", first.run.id)
    );
    browser.quit().await;
    let store = Store::open_existing(&db, true).unwrap();
    let decided = store.get_approval(&first.run.id, &approval_id).unwrap();
    assert_eq!(decided.status, ApprovalStatus::Approved);
    assert_eq!(
        decided.decided_by, OPERATOR,
        "the link signs in its recipient"
    );

    // The demo resumes and opens the pull request once.
    let resumed = demo::run(
        &demo::Options {
            db: db.clone(),
            resume: Some(first.run.id.clone()),
        },
        &mut Vec::new(),
        Arc::new(|_: &agentrt::Event| {}),
    )
    .await
    .unwrap();
    assert_eq!(resumed.run.status, RunStatus::Completed);
    let started = store
        .list_events(&first.run.id)
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::StepToolStarted && e.payload.contains(&approval_id))
        .count();
    assert_eq!(started, 1, "the approved call ran once");
    page.stop().await;
}

/// Edit, then approve, on the page in headless Chromium: the demo's
/// pull request, paused; arguments the tool's schema refuses are refused
/// on a page saying nothing was decided; the edit is approved, and the
/// resumed demo opens the edited pull request once, its observation saying
/// the operator changed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_s_pull_request_edited_on_the_page_in_a_browser_is_the_one_opened() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("demo.db");
    let quiet = || Arc::new(|_: &agentrt::Event| {});
    let options = demo::Options {
        db: db.clone(),
        resume: None,
    };
    let first = demo::run(&options, &mut Vec::new(), quiet()).await.unwrap();
    let (run, approval_id) = (first.run.id.clone(), first.approval.clone().unwrap());

    let page = Page::serve(&db, dir.path()).await;
    let (secret_file, base) = (page.secret_file.clone(), page.base.clone());
    let link = agentrt_approver::serve::mint_login_link(
        &read_secret(&secret_file).unwrap(),
        &base,
        OPERATOR,
        &run,
        Duration::from_secs(900),
    )
    .unwrap();

    let browser = webdriver::Browser::start().await;
    browser.goto(&link).await;
    let area = browser.find(&format!("#edit-args-{approval_id}")).await;
    browser
        .type_into(&area, r#"{"title": 7, "branch": "docs/readme-typo"}"#)
        .await;
    browser
        .click(&browser.find(&format!("#edit-{approval_id}")).await)
        .await;
    let refused = browser.wait_for("#refused").await;
    assert!(
        browser
            .text(&refused)
            .await
            .contains("pr_open refuses them")
    );
    browser.screenshot("edit-demo-refused").await;
    browser.click(&browser.find("#back").await).await;
    let area = browser.wait_for(&format!("#edit-args-{approval_id}")).await;
    browser
        .type_into(
            &area,
            r#"{"title": "Fix the typo in README.md", "branch": "docs/readme-typo"}"#,
        )
        .await;
    browser
        .click(&browser.find(&format!("#edit-{approval_id}")).await)
        .await;
    let shown = browser.wait_for("#message").await;
    assert!(
        browser
            .text(&shown)
            .await
            .contains("was replaced by your edit")
    );
    browser.screenshot("edit-demo-approved").await;
    browser.quit().await;

    let resumed = demo::run(
        &demo::Options {
            db: db.clone(),
            resume: Some(run.clone()),
        },
        &mut Vec::new(),
        quiet(),
    )
    .await
    .unwrap();
    assert_eq!(resumed.run.status, RunStatus::Completed);
    let store = Store::open_existing(&db, true).unwrap();
    let opened: Vec<_> = store
        .list_events(&run)
        .unwrap()
        .into_iter()
        .filter(|e| e.event_type == EventType::StepToolStarted && e.payload.contains("pr_open"))
        .collect();
    assert_eq!(opened.len(), 1, "the pull request is opened once");
    assert!(
        opened[0].payload.contains("docs/readme-typo"),
        "{}",
        opened[0].payload
    );
    let step = store
        .list_steps(&run)
        .unwrap()
        .into_iter()
        .find(|s| s.decision.as_ref().is_some_and(|d| d.tool == "pr_open"))
        .unwrap();
    let edit = step.observation.unwrap().operator_edit.unwrap();
    assert_eq!(edit.by, OPERATOR, "the page records who signed in");
    page.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starttls_and_tls_reach_a_relay_whose_certificate_the_given_ca_signed_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    private_ca(dir.path());
    let db = dir.path().join("demo.db");
    let first = demo::run(
        &demo::Options {
            db: db.clone(),
            resume: None,
        },
        &mut Vec::new(),
        Arc::new(|_: &agentrt::Event| {}),
    )
    .await
    .unwrap();
    let (cert, key) = (dir.path().join("server.pem"), dir.path().join("server.key"));
    let (starttls_port, tls_port) = (free_port(), free_port());
    let (starttls_mail, tls_mail) = (dir.path().join("starttls"), dir.path().join("tls"));
    let _starttls = SmtpServer::start_with(
        starttls_port,
        &starttls_mail,
        &[
            "--tlscert".as_ref(),
            cert.as_os_str(),
            "--tlskey".as_ref(),
            key.as_os_str(),
        ],
    );
    let _tls = SmtpServer::start_with(
        tls_port,
        &tls_mail,
        &[
            "--smtpscert".as_ref(),
            cert.as_os_str(),
            "--smtpskey".as_ref(),
            key.as_os_str(),
        ],
    );
    let channel = |security: &str, port: u16, ca: bool| {
        let ca = if ca { r#", "ca_file": "ca.pem""# } else { "" };
        format!(
            r#"{{"kind": "email", "host": "127.0.0.1", "port": {port}, "security": "{security}",
                "from": "agentrt@example.test", "to": ["{OPERATOR}"]{ca}}}"#
        )
    };
    let config = dir.path().join("notify.json");
    private(
        &config,
        &format!(
            r#"{{"channels": [{}, {}]}}"#,
            channel("starttls", starttls_port, true),
            channel("tls", tls_port, true)
        ),
    );
    Notifier::new(NotifyConfig::load(&config).unwrap(), None)
        .unwrap()
        .run(
            db.clone(),
            dir.path().join("c1"),
            true,
            &agentrt::Cancel::never(),
        )
        .await
        .unwrap();
    for maildir in [&starttls_mail, &tls_mail] {
        let mail = messages(maildir);
        assert_eq!(mail.len(), 1, "{}", maildir.display());
        assert!(body(&mail[0]).contains(first.approval.as_deref().unwrap()));
    }
    // Without the CA the platform's roots do not vouch for the relay:
    // nothing is sent, and the failure names the certificate.
    private(
        &config,
        &format!(
            r#"{{"channels": [{}]}}"#,
            channel("starttls", starttls_port, false)
        ),
    );
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let told = Arc::clone(&failures);
    let notifier = Notifier::new(NotifyConfig::load(&config).unwrap(), None)
        .unwrap()
        .with_log(move |line| told.lock().unwrap().push(line.to_owned()));
    let (stop_notify, stop) = agentrt::cancel_pair();
    let task = {
        let db = db.clone();
        let cursor = dir.path().join("c2");
        tokio::spawn(async move { notifier.run(db, cursor, false, &stop).await })
    };
    let start = Instant::now();
    while failures.lock().unwrap().is_empty() {
        assert!(start.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_notify.cancel();
    task.await.unwrap().unwrap();
    let line = failures.lock().unwrap()[0].clone();
    assert!(line.to_lowercase().contains("certificate"), "{line}");
    assert_eq!(messages(&starttls_mail).len(), 1, "nothing more was sent");
}
