//! The CLI on a real PostgreSQL server: every command against
//! `--db postgres://…` (and `$AGENTRT_DB`), a URL's password never shown,
//! and a database the CLI would have to create or migrate refused as it
//! is on SQLite.
//!
//! Needs `AGENTRT_TEST_POSTGRES` (libpq key=value pairs naming the test
//! server, as `cargo xtask postgres -- …` sets it; the role may create
//! databases and any password is accepted).

mod support;

use agentrt::{
    Decision, DefaultPolicy, Driver, GateConfig, Limits, RunStatus, ScriptedAgent, Store,
};

use support::{NONCES, cli, json, run_cmd, runtime, tools};

// The test server and a fresh database on it, as agentrt-postgres's own
// tests make them.
#[path = "../../agentrt-postgres/tests/real_postgres/backends.rs"]
mod backends;

use backends::{PASSWORD, tls_url, url};

/// Creates an empty database; returns its name.
fn fresh_database() -> String {
    backends::fresh_database_name()
}

/// Starts run `id` with `decisions` on `store` and drives it until it
/// pauses or ends.
fn drive(store: &Store, id: &str, decisions: Vec<Decision>) -> agentrt::Run {
    let mut driver = Driver::new(
        GateConfig::new(store.clone(), DefaultPolicy, tools()),
        ScriptedAgent::new(decisions),
    )
    .unwrap();
    runtime()
        .block_on(driver.start(Some(id), "goal", Limits::default()))
        .unwrap()
}

/// `agentrt --db <url> <args…>`: fails the test if the password shows.
fn agentrt(db: &str, args: &[&str]) -> support::Out {
    let mut c = cli();
    c.arg("--db").arg(db).args(args);
    let out = run_cmd(c);
    assert!(
        !out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD),
        "the password shows: {out:?}"
    );
    out
}

#[test]
fn every_command_works_on_postgres_and_never_shows_the_password() {
    let name = fresh_database();
    let db = url(&name);
    let store = agentrt_postgres::open(&db).unwrap();
    let done = drive(
        &store,
        "done",
        vec![
            Decision::tool_call("fs_read", r#"{"path":"README.md"}"#),
            Decision::complete(r#"{"done":true}"#),
        ],
    );
    assert_eq!(done.status, RunStatus::Completed);
    let waiting = drive(
        &store,
        "waiting",
        vec![Decision::tool_call("push", r#"{"ref":"main"}"#)],
    );
    assert_eq!(waiting.status, RunStatus::WaitingForApproval);

    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("done") && out.stdout.contains("waiting"));

    // The hint to decide names the database without its password.
    let out = agentrt(&db, &["show", "waiting"]);
    assert_eq!(out.code, 0, "{out:?}");
    let shown = format!(
        "agentrt --db \"{}\" approve waiting",
        agentrt_postgres::redacted(&db)
    );
    assert!(out.stdout.contains(&shown), "{}", out.stdout);

    let out = agentrt(&db, &["--json", "events", "done"]);
    assert_eq!(out.code, 0, "{out:?}");
    let first = json(out.stdout.lines().next().unwrap());
    assert_eq!(first["type"], "run.created");

    let out = agentrt(&db, &["approve", "waiting", "--yes", "--by", "ops"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("approved by ops"), "{}", out.stdout);
    assert_eq!(
        store.list_approvals("waiting").unwrap()[0].status,
        agentrt::ApprovalStatus::Approved
    );

    let out = agentrt(&db, &["cancel", "waiting", "--by", "ops"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        store.get_run("waiting").unwrap().status,
        RunStatus::Cancelled
    );

    let out = agentrt(&db, &["--json", "verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = json(&out.stdout);
    assert_eq!(report["intact"], true, "{report}");
    let events =
        store.list_events("done").unwrap().len() + store.list_events("waiting").unwrap().len();
    assert_eq!(report["checked"], events as u64, "{report}");

    // $AGENTRT_DB names it as well as --db.
    let mut c = cli();
    c.env("AGENTRT_DB", &db).arg("runs");
    let out = run_cmd(c);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("waiting") && !out.stdout.contains(PASSWORD));
}

#[test]
fn a_database_without_the_schema_is_refused_and_left_untouched() {
    let name = fresh_database();
    let db = url(&name);
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("agentrt never migrates a database"),
        "{}",
        out.stderr
    );
    // Nothing was created: opening for a program that owns the database
    // still finds it empty and migrates it now.
    let store = agentrt_postgres::open(&db).unwrap();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 0);
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 0, "{out:?}");
}

#[test]
fn an_unreachable_server_or_unknown_database_is_an_error_without_the_password() {
    // No database of that name.
    let out = agentrt(&url("agentrt_cli_no_such_database"), &["runs"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("agentrt_cli_no_such_database"),
        "{}",
        out.stderr
    );
    // Nothing listens on that port.
    let closed = format!("postgres://ops:{PASSWORD}@127.0.0.1:1/agentrt");
    let out = agentrt(&closed, &["runs"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("127.0.0.1"), "{}", out.stderr);
}

/// `agentrt <args…>` without --db: fails the test if the password shows.
fn agentrt_raw(args: &[&str]) -> support::Out {
    let mut c = cli();
    c.args(args);
    let out = run_cmd(c);
    assert!(
        !out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD),
        "the password shows: {out:?}"
    );
    out
}

/// A SQLite database with a completed run, a labelled one and one waiting
/// for approval.
fn sqlite_with_runs(dir: &std::path::Path) -> std::path::PathBuf {
    let db = support::new_db(dir, "agentrt.db");
    support::completed_run(&db, "done", "read it");
    support::labelled_run(&db, "labelled", &["team=ops"]);
    support::waiting_run(&db, "waiting", "push", r#"{"ref":"main"}"#);
    db
}

#[test]
fn migrate_copies_a_sqlite_database_with_its_chain_and_the_copy_writes_on() {
    let dir = tempfile::tempdir().unwrap();
    let file = sqlite_with_runs(dir.path());
    let file_text = file.to_str().unwrap();
    let db = url(&fresh_database());
    let out = agentrt_raw(&["migrate", "--from", file_text, "--to", &db]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("verify: both intact"), "{}", out.stdout);

    // The same runs, the same head, on both.
    let head = |location: &str| {
        let out = agentrt(location, &["--json", "verify"]);
        assert_eq!(out.code, 0, "{out:?}");
        let report = json(&out.stdout);
        (report["head"].clone(), report["checked"].clone())
    };
    assert_eq!(head(&db), head(file_text));
    let runs = |location: &str| agentrt(location, &["--json", "runs"]).stdout;
    assert_eq!(runs(&db), runs(file_text));
    let out = agentrt(&db, &["runs", "--label", "team=ops"]);
    assert!(out.stdout.contains("labelled") && !out.stdout.contains("waiting"));

    // The copy goes on where the file stopped: approved on PostgreSQL,
    // resumed there, its new events chained onto the copied head.
    let out = agentrt(&db, &["approve", "waiting", "--yes", "--by", "ops"]);
    assert_eq!(out.code, 0, "{out:?}");
    let store = agentrt_postgres::open(&db).unwrap();
    let mut driver = Driver::new(
        GateConfig::new(store.clone(), DefaultPolicy, tools()),
        ScriptedAgent::new([Decision::complete(r#"{"pushed":true}"#)]),
    )
    .unwrap();
    let run = runtime().block_on(driver.resume("waiting")).unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");

    // A destination that holds runs is refused, and keeps what it holds.
    let before = runs(&db);
    let out = agentrt_raw(&["migrate", "--from", file_text, "--to", &db]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("empty database only"), "{}", out.stderr);
    assert_eq!(runs(&db), before);
}

#[test]
fn migrate_refuses_a_broken_chain_and_a_file_destination() {
    let dir = tempfile::tempdir().unwrap();
    let file = sqlite_with_runs(dir.path());
    let file_text = file.to_str().unwrap();
    support::sql(
        &file,
        "UPDATE events SET payload_json = payload_json || ' ' WHERE seq = 2",
    );
    let db = url(&fresh_database());
    let out = agentrt_raw(&["migrate", "--from", file_text, "--to", &db]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("copies only an intact chain"),
        "{}",
        out.stderr
    );
    // Nothing arrived: the destination was not even given a schema.
    let out = agentrt(&db, &["runs"]);
    assert!(out.stderr.contains("never migrates"), "{out:?}");

    let out = agentrt_raw(&["migrate", "--from", file_text, "--to", "other.db"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stderr.contains("--to must be a PostgreSQL URL"),
        "{}",
        out.stderr
    );
}

#[test]
fn migrate_carries_a_satellites_tables_and_verify_checks_their_rows_on_postgres() {
    use agentrt::store::NewRun;
    use agentrt::{EventType, StoreOptions, Timestamp};

    let dir = tempfile::tempdir().unwrap();
    let file = sqlite_with_runs(dir.path());
    let store = Store::open_with(
        &file,
        StoreOptions {
            extensions: vec![NONCES],
            ..StoreOptions::default()
        },
    )
    .unwrap();
    let at = Timestamp::parse("2026-10-01T09:00:00Z").unwrap();
    store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id: "hook",
                goal: "approve by webhook",
                limits_json: "{}",
                created_at: at,
                lease_owner: "agentrt-approver",
                lease_expires_at: at,
            })?;
            tx.insert_row(
                "approver_nonces",
                &[("nonce", "n-1".into()), ("seen_at", "t1".into())],
            )?;
            tx.append_event("hook", "", &at, EventType::RunCreated, "{}")
        })
        .unwrap();
    drop(store);
    let file_text = file.to_str().unwrap();
    let name = fresh_database();
    let db = url(&name);
    let out = agentrt_raw(&["--json", "migrate", "--from", file_text, "--to", &db]);
    assert_eq!(out.code, 0, "{out:?}");
    let report = json(&out.stdout);
    let copied: Vec<String> = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["table"].as_str().unwrap().to_owned())
        .collect();
    assert!(copied.contains(&"approver_nonces".to_owned()), "{copied:?}");
    let verified = |location: &str| {
        let out = agentrt(location, &["--json", "verify"]);
        (out.code, json(&out.stdout)["head"].clone())
    };
    assert_eq!(verified(&db), verified(file_text));
    assert_eq!(verified(&db).0, 0);

    // An edit of the satellite's row on PostgreSQL is caught there.
    backends::on_plain_thread(|| {
        backends::client(&backends::location(&name))
            .batch_execute("UPDATE approver_nonces SET seen_at = 't2'")
            .unwrap()
    });
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains("approver_nonces"), "{out:?}");
}

#[test]
fn the_cli_works_over_verified_tls_and_refuses_a_server_it_cannot_verify() {
    let name = fresh_database();
    let store = agentrt_postgres::open(&url(&name)).unwrap();
    let waiting = drive(
        &store,
        "waiting",
        vec![Decision::tool_call("push", r#"{"ref":"main"}"#)],
    );
    assert_eq!(waiting.status, RunStatus::WaitingForApproval);
    let db = tls_url(&name);
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("waiting"), "{}", out.stdout);
    let out = agentrt(&db, &["approve", "waiting", "--yes", "--by", "ops"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = agentrt(&db, &["--json", "verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(json(&out.stdout)["intact"], true, "{}", out.stdout);
    // The system's roots do not hold the test server's CA.
    let untrusted = db
        .split("&sslrootcert=")
        .next()
        .unwrap_or_default()
        .to_owned();
    let out = agentrt(&untrusted, &["runs"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("certificate"), "{}", out.stderr);
}
