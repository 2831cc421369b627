//! `agentrt verify`, `head sign` and `keygen` (design §16, items 20–22,
//! and the signed heads of issue 4).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use support::*;

const PUSH_ARGS: &str = r#"{"branch":"main","n":7}"#;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

/// A database with a completed run and a waiting one.
fn populated(dir: &Path, name: &str) -> PathBuf {
    let db = new_db(dir, name);
    completed_run(&db, "done", "read the readme");
    waiting_run(&db, "wait", "push it", PUSH_ARGS);
    db
}

fn head_line(db: &Path) -> (i64, String) {
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    conn.query_row(
        "SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .expect("head")
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `keygen --out <dir>/op`: the key pair's paths.
fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let prefix = dir.join(name);
    let out = agentrt_raw(&["keygen", "--out", prefix.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "{out:?}");
    (prefix.with_extension("key"), prefix.with_extension("pub"))
}

fn sign(db: &Path, key: &Path, out_file: &Path) {
    let out = agentrt(
        db,
        &[
            "head",
            "sign",
            "--key",
            key.to_str().expect("utf-8"),
            "--out",
            out_file.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(out.code, 0, "{out:?}");
}

fn verify_signed(db: &Path, head: &Path, pubkey: &Path, extra: &[&str]) -> Out {
    let mut args = vec![
        "verify",
        "--signed-head",
        head.to_str().expect("utf-8"),
        "--pubkey",
        pubkey.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(extra);
    agentrt(db, &args)
}

/// Recomputes every link from the first event on, as someone who can write
/// the file and knows the layout could after changing an event.
fn relink(db: &Path) {
    let conn = rusqlite::Connection::open(db).expect("sqlite");
    type Row = (i64, String, String, String, String, String, String);
    let rows: Vec<Row> = conn
        .prepare("SELECT seq, run_id, step_id, at, type, payload_json, rows_json FROM events ORDER BY seq")
        .expect("prepare")
        .query_map([], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?, r.get(5)?, r.get(6)?))
        })
        .expect("query")
        .map(|r| r.expect("row"))
        .collect();
    let mut prev = String::new();
    for (seq, run_id, step_id, at, kind, payload, rows) in rows {
        let link = agentrt::chain::link(&agentrt::chain::Link {
            prev: &prev,
            seq,
            run_id: &run_id,
            step_id: &step_id,
            at: &at,
            event_type: &kind,
            payload: &payload,
            rows: &rows,
        });
        conn.execute(
            "UPDATE events SET hash = ?1 WHERE seq = ?2",
            rusqlite::params![link, seq],
        )
        .expect("update");
        prev = link;
    }
}

// ---- verify, head sign, keygen (design §16) ----

#[test]
fn an_untouched_chain_prints_exactly_three_lines() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let (seq, hash) = head_line(&db);
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stderr, "");
    assert_eq!(
        out.stdout,
        format!(
            "head: seq {seq} {hash}\nintact: {seq} event(s), seq 1 to {seq}\nlast checked: seq {seq} {hash}\n"
        )
    );

    let out = agentrt(&db, &["--json", "verify", "--from", "3", "--to", "5"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = json(&out.stdout);
    assert_eq!(v["checked"], 3);
    assert_eq!(v["intact"], true);
    assert_eq!((v["from"].as_i64(), v["to"].as_i64()), (Some(3), Some(5)));
    assert_eq!(v["head"]["seq"], seq);
    assert_eq!(v["head"]["hash"], hash.as_str());
    assert!(is_hex64(v["hash"].as_str().unwrap()));
    assert_eq!(v["requested"]["to"], 5);
    assert_eq!(v["requested"]["reached"], true);
    assert!(v.get("break").is_none());
    assert!(v.get("kept_head").is_none());

    // An empty database.
    let empty = new_db(dir.path(), "empty.db");
    let out = agentrt(&empty, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        out.stdout,
        "head: no events\nintact: no events in the range\n"
    );
}

#[test]
fn an_altered_event_breaks_at_its_seq_and_the_range_before_it_is_intact() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    sql(&db, "UPDATE events SET payload_json = '{}' WHERE seq = 4");
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("head: seq "), "{lines:?}");
    assert!(lines[1].starts_with("broken at seq 4: "), "{lines:?}");
    assert!(lines[2].starts_with("  expected "), "{lines:?}");
    assert!(lines[3].starts_with("  found    "), "{lines:?}");
    assert_eq!(
        out.first_err_line(),
        "error: the event chain is broken at seq 4"
    );

    let out = agentrt(&db, &["--json", "verify"]);
    assert_eq!(out.code, 1);
    let v = json(&out.stdout);
    assert_eq!(v["intact"], false);
    assert_eq!(v["break"]["seq"], 4);
    let expected = v["break"]["expected"].as_str().unwrap();
    let found = v["break"]["found"].as_str().unwrap();
    assert!(
        is_hex64(expected) && is_hex64(found) && expected != found,
        "{v}"
    );
    assert_eq!(v["checked"], 3);

    let out = agentrt(&db, &["verify", "--to", "3"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("intact: 3 event(s), seq 1 to 3"));
}

#[test]
fn a_changed_step_row_is_named_with_the_seq_that_wrote_it() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let conn = rusqlite::Connection::open(&db).expect("sqlite");
    let (id, written): (String, i64) = conn
        .query_row(
            "SELECT id, written_seq FROM steps WHERE run_id = 'done' ORDER BY idx LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("step");
    drop(conn);
    sql(
        &db,
        &format!("UPDATE steps SET observation_json = '{{}}' WHERE id = '{id}'"),
    );
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains(&format!(
            "broken at seq {written}: steps row \"{id}\" was changed"
        )),
        "{}",
        out.stdout
    );
    // An approval row too.
    let db = populated(dir.path(), "approval.db");
    sql(&db, "UPDATE approvals SET note = 'fine by me'");
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stdout.contains(": approvals row "), "{}", out.stdout);
}

/// Item 22. A raw deletion of the last event leaves the rows it wrote
/// behind, which name the cut. A consistent cut (an earlier copy of the
/// same file) verifies alone; only a kept head reveals it.
#[test]
fn a_cut_tail_fails_against_a_kept_head() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "done", "read the readme");
    let early = dir.path().join("early.db");
    std::fs::copy(&db, &early).expect("copy");
    let (old_seq, old_hash) = head_line(&early);
    waiting_run(&db, "wait", "push it", PUSH_ARGS);
    let (seq, hash) = head_line(&db);
    assert!(seq > old_seq);

    // The earlier copy, alone: intact.
    let out = agentrt(&early, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");
    // Against the later head, or asked to reach it: not reached.
    let head = format!("{seq}:{hash}");
    let out = agentrt(&early, &["verify", "--head", &head]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.first_err_line(),
        format!(
            "error: the event chain is shorter than the kept head: the kept head, seq {seq}, was not reached; the last event checked is seq {old_seq}"
        )
    );
    let out = agentrt(&early, &["verify", "--to", &seq.to_string()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.first_err_line(),
        format!(
            "error: the event chain is shorter than asked: --to {seq} was not reached; the last event checked is seq {old_seq}"
        )
    );
    let out = agentrt(&early, &["--json", "verify", "--head", &head]);
    let v = json(&out.stdout);
    assert_eq!(v["kept_head"]["seq"], seq);
    assert_eq!(v["kept_head"]["matches"], false);
    assert!(v["kept_head"]["found"].is_null());

    // An inner kept head matches; a wrong hash does not.
    let out = agentrt(&db, &["verify", "--head", &format!("{old_seq}:{old_hash}")]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .ends_with(&format!("kept head: seq {old_seq} matches\n")),
        "{}",
        out.stdout
    );
    let wrong = "0".repeat(64);
    let out = agentrt(&db, &["verify", "--head", &format!("{old_seq}:{wrong}")]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.first_err_line(),
        format!(
            "error: the event chain does not match the head kept: seq {old_seq} has hash {old_hash}, not the {wrong} kept"
        )
    );

    // The last event deleted by hand: the rows its transaction wrote name
    // the cut, even without a kept head.
    sql(&db, &format!("DELETE FROM events WHERE seq = {seq}"));
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout.contains(&format!("broken at seq {seq}: "))
            && out.stdout.contains("cut from the end"),
        "{}",
        out.stdout
    );
}

// ---- signed heads ----

#[test]
fn keygen_writes_an_owner_only_pair_and_never_overwrites() {
    let dir = tempdir();
    let prefix = dir.path().join("ops");
    let out = agentrt_raw(&["--json", "keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    let v = json(&out.stdout);
    let (key, public) = (dir.path().join("ops.key"), dir.path().join("ops.pub"));
    assert_eq!(v["private_key_file"], key.to_str().unwrap());
    assert_eq!(v["public_key_file"], public.to_str().unwrap());
    assert!(is_hex64(v["public_key"].as_str().unwrap()));
    assert_eq!(mode(&key), 0o600);
    assert_eq!(mode(&public), 0o644);
    let text = std::fs::read_to_string(&public).unwrap();
    assert_eq!(
        text,
        format!(
            "agentrt-ed25519-public-key:{}\n",
            v["public_key"].as_str().unwrap()
        )
    );
    let before = std::fs::read(&key).unwrap();
    let out = agentrt_raw(&["keygen", "--out", prefix.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("never overwrites"), "{out:?}");
    assert_eq!(std::fs::read(&key).unwrap(), before);
}

#[test]
fn a_signed_head_verifies_and_is_reported() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let (key, public) = keygen(dir.path(), "ops");
    let head_file = dir.path().join("head-1.json");
    sign(&db, &key, &head_file);
    let (seq, hash) = head_line(&db);
    let doc = json(&std::fs::read_to_string(&head_file).unwrap());
    assert_eq!(doc["format"], "agentrt-signed-head/v1");
    assert_eq!(doc["seq"], seq);
    assert_eq!(doc["hash"], hash.as_str());
    assert_eq!(doc["signature"].as_str().unwrap().len(), 128);

    let out = verify_signed(&db, &head_file, &public, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let last = out.stdout.lines().last().unwrap();
    assert!(
        last.starts_with(&format!("signed head: seq {seq} matches (signed ")),
        "{last}"
    );
    let mut c = cli();
    c.arg("--db").arg(&db).arg("--json").args([
        "verify",
        "--signed-head",
        head_file.to_str().unwrap(),
        "--pubkey",
        public.to_str().unwrap(),
    ]);
    let v = json(&run_cmd(c).stdout);
    assert_eq!(v["signed_head"]["seq"], seq);
    assert_eq!(v["signed_head"]["matches"], true);
    assert_eq!(v["signed_head"]["found"], hash.as_str());
    assert_eq!(v["signed_head"]["public_key"], doc["public_key"]);

    // The log grows: the old signed head still matches inside it.
    completed_run(&db, "later", "more");
    let out = verify_signed(&db, &head_file, &public, &[]);
    assert_eq!(out.code, 0, "{out:?}");

    // Without --out the document goes to stdout; a second --out to the
    // same file is refused.
    let out = agentrt(&db, &["head", "sign", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(json(&out.stdout)["format"], "agentrt-signed-head/v1");
    let out = agentrt(
        &db,
        &[
            "head",
            "sign",
            "--key",
            key.to_str().unwrap(),
            "--out",
            head_file.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("never overwrites"));
}

/// Someone who can write the file changes an event and recomputes every
/// link: plain verify passes, the signed head does not.
#[test]
fn a_rewritten_chain_passes_alone_and_fails_the_signed_head() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let (key, public) = keygen(dir.path(), "ops");
    let head_file = dir.path().join("head.json");
    sign(&db, &key, &head_file);
    let (seq, signed_hash) = head_line(&db);

    sql(
        &db,
        "UPDATE events SET payload_json = '{\"path\":\"/etc/shadow\"}' WHERE seq = 5",
    );
    relink(&db);
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 0, "a relinked chain is intact alone: {out:?}");
    let (_, now) = head_line(&db);
    let out = verify_signed(&db, &head_file, &public, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(
        out.first_err_line(),
        format!(
            "error: the event chain does not match the signed head: seq {seq} has hash {now}, not the {signed_hash} signed"
        )
    );

    // A cut back to an earlier copy: the signed head is not reached.
    let early = new_db(dir.path(), "early.db");
    completed_run(&early, "done", "read the readme");
    let out = verify_signed(&early, &head_file, &public, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.first_err_line()
            .contains(&format!("the signed head, seq {seq}, was not reached")),
        "{out:?}"
    );
}

#[test]
fn forged_foreign_or_loose_signed_heads_and_keys_are_refused() {
    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let (key, public) = keygen(dir.path(), "ops");
    let (_, other_public) = keygen(dir.path(), "other");
    let head_file = dir.path().join("head.json");
    sign(&db, &key, &head_file);

    // Another key.
    let out = verify_signed(&db, &head_file, &other_public, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("another key"), "{out:?}");
    // An edited document.
    let text = std::fs::read_to_string(&head_file).unwrap();
    let forged = dir.path().join("forged.json");
    std::fs::write(&forged, text.replacen("\"seq\": ", "\"seq\": 1", 1)).unwrap();
    let out = verify_signed(&db, &forged, &public, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("does not verify"), "{out:?}");
    // A group-writable public key, a group-readable private key.
    chmod(&public, 0o664);
    let out = verify_signed(&db, &head_file, &public, &[]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("chmod go-w"), "{out:?}");
    chmod(&public, 0o644);
    chmod(&key, 0o640);
    let out = agentrt(&db, &["head", "sign", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.first_err_line().contains("readable by group or others"),
        "{out:?}"
    );
    // A public key given as the private one.
    let out = agentrt(&db, &["head", "sign", "--key", public.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.first_err_line().contains("holds a public key"),
        "{out:?}"
    );
}

#[test]
fn head_sign_refuses_a_broken_chain_and_an_empty_log() {
    let dir = tempdir();
    let (key, _) = keygen(dir.path(), "ops");
    let empty = new_db(dir.path(), "empty.db");
    let out = agentrt(&empty, &["head", "sign", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.first_err_line().contains("no events"), "{out:?}");
    let db = populated(dir.path(), "agentrt.db");
    sql(&db, "UPDATE events SET at = 'x' WHERE seq = 2");
    let out = agentrt(&db, &["head", "sign", "--key", key.to_str().unwrap()]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.first_err_line()
            .starts_with("error: the event chain is broken at seq 2"),
        "{out:?}"
    );
    assert_eq!(out.stdout, "");
}

// ---- arguments and the file ----

#[test]
fn bad_verify_arguments_exit_2_and_create_nothing() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    let cases: &[(&[&str], &str)] = &[
        (&["verify", "extra"], "takes no arguments"),
        (&["verify", "--from", "-1"], "--from is negative"),
        (&["verify", "--to", "-1"], "--to is negative"),
        (&["verify", "--from", "5", "--to", "2"], "before --from"),
        (&["verify", "--head", "x"], "SEQ:HASH"),
        (&["verify", "--head", "0:ab"], "SEQ:HASH"),
        (&["verify", "--head", "3:"], "SEQ:HASH"),
        (&["verify", "--to", "2", "--head", "3:ab"], "after --to"),
        (
            &["verify", "--from", "4", "--head", "3:ab"],
            "before --from",
        ),
        (&["verify", "--signed-head", "h.json"], "needs --pubkey"),
        (&["verify", "--bogus"], "unknown flag --bogus for verify"),
        (&["head", "sign"], "--key is required"),
        (&["head"], "needs a subcommand"),
    ];
    for (args, needle) in cases {
        let out = agentrt(&db, args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "");
        assert!(out.first_err_line().contains(needle), "{args:?}: {out:?}");
        assert!(out.is_one_line_and_a_pointer_to_help(), "{args:?}: {out:?}");
        assert!(!db.exists(), "{args:?} created the database");
    }
    // A signed head outside --to is a usage problem found before the
    // database is opened.
    let real = populated(dir.path(), "agentrt.db");
    let (key, public) = keygen(dir.path(), "ops");
    let head_file = dir.path().join("head.json");
    sign(&real, &key, &head_file);
    let out = verify_signed(&db, &head_file, &public, &["--to", "1"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.first_err_line().contains("the signed head: "),
        "{out:?}"
    );
    assert!(!db.exists());
    // A missing database: exit 1, nothing created.
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 1);
    assert!(!db.exists());
}

#[test]
fn verify_and_head_sign_leave_a_read_only_file_byte_identical() {
    let dir = tempdir();
    let db = populated(dir.path(), "ro.db");
    let (key, public) = keygen(dir.path(), "ops");
    chmod(&db, 0o444);
    let before = std::fs::read(&db).expect("read");
    let head_file = dir.path().join("head.json");
    sign(&db, &key, &head_file);
    for out in [
        agentrt(&db, &["verify"]),
        agentrt(&db, &["--json", "verify", "--to", "2"]),
        verify_signed(&db, &head_file, &public, &[]),
    ] {
        assert_eq!(out.code, 0, "{out:?}");
    }
    assert_eq!(std::fs::read(&db).expect("read"), before);
    assert_eq!(mode(&db), 0o444);
}

#[test]
fn the_help_explains_what_an_intact_chain_proves() {
    let out = agentrt_raw(&["--help"]);
    assert_eq!(out.code, 0);
    for needle in [
        "verify",
        "--from N",
        "--to N",
        "--head SEQ:HASH",
        "--signed-head FILE",
        "--pubkey FILE",
        "head sign",
        "keygen",
        "only up to a head kept where\nthe database's writers cannot reach it",
    ] {
        assert!(out.stdout.contains(needle), "usage lacks {needle:?}");
    }
}

/// A model that answers every request with the same usage.
struct Answering;

impl agentrt::Model for Answering {
    fn name(&self) -> &str {
        "answering"
    }
    fn generate<'a>(
        &'a self,
        _: &'a agentrt::ModelRequest,
    ) -> agentrt::BoxFuture<'a, Result<agentrt::ModelResponse, agentrt::ModelError>> {
        Box::pin(async {
            Ok(agentrt::ModelResponse {
                text: "read the readme".into(),
                tool_uses: vec![],
                stop_reason: Some(agentrt::llm::StopReason::EndTurn),
                usage: agentrt::Usage {
                    input_tokens: 100,
                    output_tokens: 20,
                    cached_input_tokens: 0,
                },
                raw: Some("{}".into()),
            })
        })
    }
}

/// Asks the model, then reads; then completes.
struct Asking(Vec<agentrt::Decision>);

impl agentrt::Agent for Asking {
    fn decide<'a>(
        &'a mut self,
        input: &'a agentrt::StepInput,
    ) -> agentrt::BoxFuture<'a, Result<agentrt::Decision, agentrt::AgentError>> {
        Box::pin(async move {
            let model = input.model.clone().expect("a model is configured");
            model
                .generate(agentrt::ModelRequest {
                    system: String::new(),
                    messages: vec![agentrt::llm::Message {
                        role: agentrt::llm::Role::User,
                        content: vec![agentrt::llm::ContentBlock::text("what next?")],
                    }],
                    tools: vec![],
                    max_output_tokens: Some(64),
                })
                .await
                .expect("the model answers");
            Ok(self.0.remove(0))
        })
    }
}

#[test]
fn an_edited_model_call_cost_or_tool_spec_is_named_with_the_seq_that_wrote_it() {
    use agentrt::budget::{ModelConfig, Price, PriceTable};
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let store = agentrt::Store::open(&db).expect("open");
    let model = ModelConfig::new(
        std::sync::Arc::new(Answering),
        PriceTable::new().with(
            "answering",
            Price {
                input_per_mtok_micros: 3_000_000,
                output_per_mtok_micros: 15_000_000,
                cached_input_per_mtok_micros: 300_000,
            },
        ),
    );
    let mut driver = agentrt::Driver::new(
        agentrt::GateConfig::new(store, agentrt::DefaultPolicy, tools()).with_model(model),
        Asking(vec![
            agentrt::Decision::tool_call("fs_read", r#"{"path":"README.md"}"#),
            agentrt::Decision::complete("true"),
        ]),
    )
    .expect("driver");
    let run = runtime()
        .block_on(driver.start(Some("asked"), "read", agentrt::Limits::default()))
        .expect("run");
    assert_eq!(run.status, agentrt::RunStatus::Completed);
    drop(driver);
    assert_eq!(agentrt(&db, &["verify"]).code, 0);
    for (table, key, edit) in [
        ("model_calls", "id", "cost_micros = 0"),
        ("tool_specs", "hash", "spec_json = '{}'"),
    ] {
        let copy = dir.path().join(format!("{table}.db"));
        std::fs::copy(&db, &copy).expect("copy");
        chmod(&copy, 0o600);
        let conn = rusqlite::Connection::open(&copy).expect("sqlite");
        let (row, written): (String, i64) = conn
            .query_row(
                &format!("SELECT {key}, written_seq FROM {table} ORDER BY rowid LIMIT 1"),
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .expect("row");
        drop(conn);
        sql(
            &copy,
            &format!("UPDATE {table} SET {edit} WHERE {key} = '{row}'"),
        );
        let out = agentrt(&copy, &["verify"]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(
            out.stdout.contains(&format!(
                "broken at seq {written}: {table} row \"{row}\" was changed"
            )),
            "{}",
            out.stdout
        );
    }
}

/// Issue 10: a satellite's rows, written through the store's extension
/// point by a program the CLI knows nothing of, are checked by `agentrt
/// verify` from the registry in the file; an edited one is named with the
/// seq that wrote it, a deleted one with the seq that first listed it.
#[test]
fn an_edited_or_deleted_extension_row_is_named_with_the_seq_that_wrote_it() {
    use agentrt::store::{NewRun, SqlValue};
    use agentrt::{EventType, Store, StoreOptions, Timestamp};

    let dir = tempdir();
    let db = populated(dir.path(), "agentrt.db");
    let store = Store::open_with(
        &db,
        StoreOptions {
            extensions: vec![NONCES],
            ..StoreOptions::default()
        },
    )
    .expect("open with the extension");
    let at = Timestamp::parse("2026-10-01T09:00:00Z").expect("time");
    let (_, events) = store
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
                &[
                    ("nonce", SqlValue::from("n-1")),
                    ("seen_at", SqlValue::from("2026-10-01T09:00:00.000000000Z")),
                ],
            )?;
            tx.append_event("hook", "", &at, EventType::RunCreated, "{}")
        })
        .expect("write");
    drop(store);
    let written = events[0].seq;
    let out = agentrt(&db, &["verify"]);
    assert_eq!(out.code, 0, "{out:?}");

    for (name, statement) in [
        (
            "edited.db",
            "UPDATE approver_nonces SET seen_at = '2026-10-02T09:00:00.000000000Z'",
        ),
        ("deleted.db", "DELETE FROM approver_nonces"),
    ] {
        let copy = dir.path().join(name);
        std::fs::copy(&db, &copy).expect("copy");
        chmod(&copy, 0o600);
        sql(&copy, statement);
        let out = agentrt(&copy, &["verify"]);
        assert_eq!(out.code, 1, "{out:?}");
        assert!(
            out.stdout.contains(&format!(
                "broken at seq {written}: approver_nonces row \"n-1\""
            )),
            "{}",
            out.stdout
        );
    }
}
