//! The `agentrt` binary against databases made with the core library
//! (design §18, §19).

mod support;

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use agentrt::*;
use support::*;

const PUSH_ARGS: &str = r#"{"branch":"main","n":7}"#;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

fn chmod(path: &std::path::Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

// ---- invocation, help and usage errors ----

#[test]
fn help_prints_the_one_usage_text_to_stdout() {
    // A command's own -h/--help prints that command's help instead
    // (`command_line::each_command_has_its_own_help…`).
    for args in [&["-h"][..], &["--help"], &["help"], &["--db", "x", "help"]] {
        let out = agentrt_raw(args);
        assert_eq!(out.code, 0, "{args:?}");
        assert_eq!(out.stderr, "", "{args:?}");
        assert_eq!(
            out.stdout
                .matches("Usage: agentrt [--db PATH|URL] [--json] <command>")
                .count(),
            1
        );
        for needle in [
            "no resume command",
            "Driver::resume",
            "agentrt::recheck",
            "--limit N",
            "--offset N",
            "default 100",
            "default 500",
            "AGENTRT_DB",
        ] {
            assert!(out.stdout.contains(needle), "usage lacks {needle:?}");
        }
    }
}

#[test]
fn no_command_prints_usage_to_stderr_and_exits_2() {
    let out = agentrt_raw(&[]);
    assert_eq!(out.code, 2);
    assert_eq!(out.stdout, "");
    assert_eq!(out.usage_count(), 1);
}

/// Every usage error: exit 2, the problem in one line and a pointer to
/// --help, stdout empty, and the (missing) database never created.
#[test]
fn usage_errors_exit_2_before_the_database_is_opened() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    let cases: &[(&[&str], &str)] = &[
        (&["resume", "r1"], "unknown command \"resume\""),
        (&["verify", "--to", "x"], "--to"),
        (&["--bogus", "runs"], "unknown flag --bogus"),
        (&["runs", "--bogus"], "unknown flag --bogus for runs"),
        (&["runs", "-limit", "2"], "--limit"),
        (&["runs", "extra"], "unexpected argument \"extra\""),
        (&["runs", "--limit", "ten"], "--limit"),
        (&["show"], "needs a run id"),
        (&["events"], "needs a run id"),
        (
            &["approve", "r1", "wrong-id", "--by", "alice", "--yes"],
            "exactly one run id",
        ),
        (&["cancel", "r1", "r2"], "exactly one run id"),
        (&["cancel", "r1", "--by", ""], "--by is empty"),
        (&["approve", "r1", "--by"], "--by needs a value"),
        (&["runs", "--json"], "global flag"),
        (
            &["runs", "--label", "Env=prod"],
            "invalid value \"Env=prod\" for --label",
        ),
        (&["runs", "--label", "env"], "has no '='"),
        (
            &["runs", "--label", "a=1", "--label", "a=2"],
            "the key \"a\" is given twice",
        ),
    ];
    for (args, needle) in cases {
        let out = agentrt(&db, args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}");
        assert!(out.first_err_line().starts_with("error: "), "{args:?}");
        assert!(
            out.first_err_line().contains(needle),
            "{args:?}: {:?} lacks {needle:?}",
            out.first_err_line()
        );
        assert!(out.is_one_line_and_a_pointer_to_help(), "{args:?}: {out:?}");
        assert!(!db.exists(), "{args:?} created the database");
    }
}

#[test]
fn no_database_is_a_usage_error_and_agentrt_db_alone_works() {
    let out = agentrt_raw(&["runs"]);
    assert_eq!(out.code, 2);
    assert!(out.first_err_line().contains("no database"));
    assert!(out.is_one_line_and_a_pointer_to_help(), "{out:?}");

    let mut c = cli();
    c.env("AGENTRT_DB", "").arg("runs");
    let out = run_cmd(c);
    assert_eq!(out.code, 2);
    assert!(out.first_err_line().contains("no database"));

    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let mut c = cli();
    c.env("AGENTRT_DB", &db).arg("runs");
    let out = run_cmd(c);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "no runs\n");
}

#[test]
fn by_defaults_to_user_and_both_empty_is_a_usage_error() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push it", PUSH_ARGS);

    let mut c = cli();
    c.env("USER", "")
        .arg("--db")
        .arg(&db)
        .args(["approve", "r1", "--yes"]);
    let out = run_cmd(c);
    assert_eq!(out.code, 2);
    assert!(out.first_err_line().contains("--by is empty"));
    assert_eq!(approvals(&db, "r1")[0].status, ApprovalStatus::Pending);

    let mut c = cli();
    c.env("USER", "carol")
        .arg("--db")
        .arg(&db)
        .args(["approve", "--yes", "r1"]);
    let out = run_cmd(c);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("approved by carol"));
    assert_eq!(approvals(&db, "r1")[0].decided_by, "carol");
}

// ---- opening ----

#[test]
fn a_missing_database_is_an_error_and_is_not_created() {
    let dir = tempdir();
    let db = dir.path().join("nope.db");
    for args in [&["runs"][..], &["show", "r1"], &["cancel", "r1"]] {
        let out = agentrt(&db, args);
        assert_eq!(out.code, 1, "{args:?}");
        assert_eq!(out.stdout, "");
        assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
        assert!(out.stderr.contains("no database at"), "{}", out.stderr);
        assert!(!db.exists());
    }
}

#[test]
fn a_newer_or_older_schema_is_refused_naming_the_newer_side() {
    let dir = tempdir();
    let db = new_db(dir.path(), "newer.db");
    sql(
        &db,
        "INSERT INTO schema_migrations (version, applied_at) VALUES (99, '')",
    );
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.starts_with("error: "));
    assert!(out.stderr.contains("is newer than this build of agentrt"));
    assert!(out.stderr.contains("version 99"));
    assert!(out.stderr.contains("consumer"));
    assert_eq!(out.stderr.lines().count(), 3, "{}", out.stderr);

    let db = new_db(dir.path(), "older.db");
    sql(&db, "DELETE FROM schema_migrations");
    let out = agentrt(&db, &["cancel", "r1"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("this build of agentrt is newer than"));
    assert!(out.stderr.contains("consumer"));
}

#[test]
fn a_group_writable_database_is_refused_in_one_line() {
    let dir = tempdir();
    let db = new_db(dir.path(), "open.db");
    chmod(&db, 0o666);
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains(&db.display().to_string()));
    assert!(out.stderr.contains("writable by group or others"));
    assert!(out.stderr.contains("chmod 600"));
}

#[test]
fn a_trigger_is_refused_in_one_line() {
    let dir = tempdir();
    let db = new_db(dir.path(), "trigger.db");
    sql(
        &db,
        "CREATE TRIGGER sneaky AFTER INSERT ON runs BEGIN SELECT 1; END",
    );
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("trigger or view"));
}

#[test]
fn a_symbolic_link_is_refused_in_one_line() {
    let dir = tempdir();
    let db = new_db(dir.path(), "real.db");
    let link = dir.path().join("link.db");
    std::os::unix::fs::symlink(&db, &link).expect("symlink");
    let out = agentrt(&link, &["runs"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.contains("symbolic link"));
}

#[test]
fn read_commands_leave_a_read_only_file_byte_identical() {
    let dir = tempdir();
    let db = new_db(dir.path(), "ro.db");
    completed_run(&db, "done", "read the readme");
    waiting_run(&db, "wait", "push it", PUSH_ARGS);
    chmod(&db, 0o444);
    let before = std::fs::read(&db).expect("read");
    for args in [
        &["runs"][..],
        &["--json", "runs"],
        &["show", "wait"],
        &["--json", "show", "wait"],
        &["events", "done"],
        &["--json", "events", "done"],
        &["events", "wait", "--limit", "0"],
        &["verify"],
        &["--json", "verify"],
    ] {
        let mut c = cli();
        c.arg("--db").arg(&db).args(args);
        let out = run_cmd(c);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    }
    assert_eq!(std::fs::read(&db).expect("read"), before);
    assert_eq!(
        std::fs::metadata(&db).expect("meta").permissions().mode() & 0o777,
        0o444
    );
}

#[test]
fn paths_with_spaces_and_url_characters_open_the_file_named() {
    let dir = tempdir();
    let sub = dir.path().join("my dir & #1?x=%20");
    std::fs::create_dir(&sub).expect("mkdir");
    let db = new_db(&sub, "agent db #2?.db");
    completed_run(&db, "r1", "goal");
    let out = agentrt(&db, &["runs"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("r1"));
}

// ---- runs ----

#[test]
fn runs_lists_newest_first_with_paging_footers() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    for i in 1..=5 {
        completed_run(&db, &format!("run{i}"), &format!("goal {i}"));
    }
    let out = agentrt(&db, &["runs", "--limit", "2"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", out.stdout);
    for column in [
        "RUN", "STATUS", "REASON", "STEPS", "CREATED", "APPROVAL", "GOAL",
    ] {
        assert!(lines[0].contains(column));
    }
    assert!(lines[1].starts_with("run5  COMPLETED  goal_completed  2  "));
    assert!(lines[1].ends_with("  -         goal 5"), "{:?}", lines[1]);
    let created = &lines[1][lines[0].find("CREATED").unwrap_or(0)..][..25];
    assert!(is_stamp(created), "{created:?}");
    assert!(lines[2].starts_with("run4 "));
    assert_eq!(
        lines[3],
        "... 3 more run(s); rerun with --offset 2 to see them (showing 2 of 5)"
    );

    let out = agentrt(&db, &["runs", "--limit", "2", "--offset", "4"]);
    assert_eq!(out.stdout.lines().count(), 2, "{}", out.stdout);
    assert!(out.stdout.contains("run1"));
    assert!(!out.stdout.contains("more run(s)"));

    let out = agentrt(&db, &["runs", "--limit", "0"]);
    assert_eq!(out.stdout.lines().count(), 6);
    let out = agentrt(&db, &["runs", "--limit", "-3", "--offset", "-1"]);
    assert_eq!(out.stdout.lines().count(), 6);
}

#[test]
fn runs_json_has_totals_truncation_and_summaries() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "done", "read");
    waiting_run(&db, "wait", "push <it> & go", PUSH_ARGS);
    let approval = approvals(&db, "wait").remove(0);

    let out = agentrt(&db, &["--json", "runs", "--limit", "1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.starts_with("{\n  \"runs\": [\n    {\n"),
        "{}",
        out.stdout
    );
    let v = json(&out.stdout);
    assert_eq!(v["total"], 2);
    assert_eq!(v["limit"], 1);
    assert_eq!(v["offset"], 0);
    assert_eq!(v["truncated"], true);
    let run = &v["runs"][0];
    assert_eq!(run["id"], "wait");
    assert_eq!(run["status"], "WAITING_FOR_APPROVAL");
    assert_eq!(run["pending_approval_id"], approval.id.as_str());
    assert_eq!(run["steps"], 1);
    assert!(run.get("finished_at").is_none());
    assert!(run.get("reason").is_none());
    assert!(run.get("model_calls").is_none());
    assert!(run.get("usage").is_none());
    // No HTML escaping.
    assert!(out.stdout.contains("push <it> & go"));

    let out = agentrt(&db, &["--json", "runs"]);
    let v = json(&out.stdout);
    assert!(v.get("truncated").is_none());
    assert_eq!(v["runs"][1]["reason"], "goal_completed");
    assert!(v["runs"][1]["finished_at"].is_string());
    assert!(v["runs"][1].get("pending_approval_id").is_none());
}

#[test]
fn an_empty_database_prints_no_runs() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let out = agentrt(&db, &["runs"]);
    assert_eq!((out.code, out.stdout.as_str()), (0, "no runs\n"));
    let v = json(&agentrt(&db, &["--json", "runs"]).stdout);
    assert_eq!(v["total"], 0);
    assert_eq!(v["runs"], serde_json::json!([]));
}

#[test]
fn runs_with_labels_lists_only_the_runs_that_carry_every_one() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    labelled_run(&db, "a", &["env=prod", "team=infra"]);
    labelled_run(&db, "b", &["env=prod"]);
    labelled_run(&db, "c", &["env=dev", "team=infra"]);
    completed_run(&db, "d", "no labels");
    labelled_run(&db, "e", &["team=infra", "env=prod"]);

    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["runs"];
        all.extend_from_slice(args);
        let out = agentrt(&db, &all);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        out.stdout
            .lines()
            .skip(1)
            .filter(|l| !l.starts_with("..."))
            .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
            .collect()
    };
    assert_eq!(ids(&["--label", "env=prod"]), ["e", "b", "a"]);
    assert_eq!(ids(&["--label", "team=infra"]), ["e", "c", "a"]);
    assert_eq!(
        ids(&["--label", "env=prod", "--label", "team=infra"]),
        ["e", "a"]
    );
    assert_eq!(ids(&[]), ["e", "d", "c", "b", "a"]);

    // The footer and the totals count the matching runs only.
    let out = agentrt(&db, &["runs", "--label", "env=prod", "--limit", "1"]);
    assert_eq!(
        out.stdout.lines().last(),
        Some("... 2 more run(s); rerun with --offset 1 to see them (showing 1 of 3)")
    );
    let v = json(&agentrt(&db, &["--json", "runs", "--label=env=prod", "--limit", "2"]).stdout);
    assert_eq!(
        (&v["total"], &v["truncated"]),
        (&serde_json::json!(3), &serde_json::json!(true))
    );
    assert_eq!(v["runs"][0]["id"], "e");
    assert_eq!(
        v["runs"][0]["labels"],
        serde_json::json!({"env": "prod", "team": "infra"})
    );

    // No match, and a page past the matching runs.
    let out = agentrt(&db, &["runs", "--label", "env=staging"]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "no runs labelled env=staging\n")
    );
    let out = agentrt(
        &db,
        &[
            "runs",
            "--label",
            "env=prod",
            "--label",
            "team=infra",
            "--offset",
            "5",
        ],
    );
    assert_eq!(
        out.stdout,
        "no runs labelled env=prod team=infra at --offset 5 (there are 2)\n"
    );
    let v = json(&agentrt(&db, &["--json", "runs", "--label", "env=staging"]).stdout);
    assert_eq!(
        (&v["total"], &v["runs"]),
        (&serde_json::json!(0), &serde_json::json!([]))
    );
}

#[test]
fn a_malformed_label_is_a_usage_error_in_one_line() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let out = agentrt(&db, &["runs", "--label", "Env=prod"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "error: invalid value \"Env=prod\" for --label: the key \"Env\" starts with 'E'; \
         a key starts with a-z or 0-9\n\nFor more information, try 'agentrt runs --help'.\n"
    );
}

// ---- show ----

#[test]
fn show_prints_the_run_the_approval_block_and_the_steps() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "r0", "warm up");
    waiting_run(&db, "r1", "push main", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let out = agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "run     r1");
    assert_eq!(lines[1], "goal    push main");
    assert_eq!(lines[2], "status  WAITING_FOR_APPROVAL");
    assert_eq!(lines[3], "steps   1");
    assert!(lines[4].starts_with("created ") && is_stamp(&lines[4][8..]));
    assert_eq!(lines[5], "");
    assert_eq!(lines[6], format!("APPROVAL WAITING  {}", approval.id));
    assert_eq!(lines[7], "kind    remote_mutation");
    assert_eq!(lines[8], "tool    push");
    let block_end = format!("----- end of approval {} for tool push -----", approval.id);
    let expected_tail = format!(
        "arguments (the tool call the model made; one field per line, byte count is the field's own size)
  branch (6 bytes)
    \"main\"
  n (1 bytes)
    7
presentation (supplied by the consumer's policy; it may contain model-chosen text)
  args (23 bytes)
    {{
      \"branch\": \"main\",
      \"n\": 7
    }}
  tool (6 bytes)
    \"push\"
decide with: agentrt --db {:?} approve r1 --approval {}
{block_end}

STEP  TOOL  DECISION   STATUS             POLICY            OBSERVATION  SUMMARY
0     push  tool_call  awaiting_approval  require_approval  -            -
",
        db.display().to_string(),
        approval.id
    );
    assert!(
        out.stdout.ends_with(&expected_tail),
        "got:\n{}\nwant tail:\n{expected_tail}",
        out.stdout
    );
}

#[test]
fn show_prints_the_labels_one_a_line_and_in_json_only_when_there_are_some() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    labelled_run(&db, "r1", &["ticket=OPS-12", "host=build-7", "note=a b"]);
    completed_run(&db, "r2", "plain");
    let out = agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines[..6],
        [
            "run     r1",
            "goal    labelled",
            "labels  host=build-7",
            "        note=a b",
            "        ticket=OPS-12",
            "status  COMPLETED (goal_completed)",
        ]
    );
    let v = json(&agentrt(&db, &["--json", "show", "r1"]).stdout);
    assert_eq!(
        v["run"]["labels"],
        serde_json::json!({"host": "build-7", "note": "a b", "ticket": "OPS-12"})
    );

    let out = agentrt(&db, &["show", "r2"]);
    assert!(!out.stdout.contains("labels"), "{}", out.stdout);
    assert!(
        out.stdout
            .starts_with("run     r2\ngoal    plain\nstatus  ")
    );
    let v = json(&agentrt(&db, &["--json", "show", "r2"]).stdout);
    assert!(v["run"].get("labels").is_none(), "{v}");
}

#[test]
fn show_lists_every_pending_approval_and_pages_them() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    // A second pending approval for the same run (say, another step's).
    sql(
        &db,
        "INSERT INTO approvals (id, run_id, step_id, kind, capability_json, presentation_json,
            request_json, hash, status, created_at)
         SELECT 'second', run_id, step_id, kind, capability_json, presentation_json,
            request_json, hash, status, created_at FROM approvals WHERE run_id = 'r1'",
    );
    let out = agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout.matches("APPROVAL WAITING  ").count(), 2);
    assert_eq!(out.stdout.matches("----- end of approval ").count(), 2);

    let v = json(&agentrt(&db, &["--json", "show", "r1"]).stdout);
    assert_eq!(v["approvals"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["approvals_total"], 2);
    assert!(v.get("waiting_approval").is_none());
    assert!(v["run"].get("pending_approval_id").is_none());
    assert_eq!(v["steps_total"], 1);
    assert_eq!(v["limit"], 500);

    let out = agentrt(&db, &["show", "r1", "--limit", "1"]);
    assert_eq!(out.stdout.matches("APPROVAL WAITING  ").count(), 1);
    assert!(out.stdout.contains(
        "\n\n... 1 more pending approval(s) not shown; rerun with --offset 1 to see them\n"
    ));

    // Without --approval the choice is ambiguous: both ids are named.
    let out = agentrt(&db, &["approve", "r1", "--yes"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("second"), "{}", out.stderr);
    assert!(out.stderr.contains("several pending approvals"));
}

#[test]
fn show_json_keeps_the_goal_whole_and_bounds_long_arguments() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let goal = format!("{}END", "g".repeat(5000));
    let long = "x".repeat(5000);
    let args = format!(r#"{{"body":"{long}","n":1}}"#);
    waiting_run(&db, "r1", &goal, &args);
    let approval = approvals(&db, "r1").remove(0);

    let out = agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let goal_line = out.stdout.lines().nth(1).unwrap_or_default();
    assert!(goal_line.contains("… [1003 more bytes]"), "{goal_line}");
    assert!(out.stdout.contains("  body (5002 bytes)"));
    assert!(out.stdout.contains("…[3000 bytes omitted]…"));
    // The closing line is the block's last line, right before the steps.
    let end = format!(
        "----- end of approval {} for tool push -----\n\nSTEP",
        approval.id
    );
    assert!(out.stdout.contains(&end));

    let v = json(&agentrt(&db, &["--json", "show", "r1"]).stdout);
    assert_eq!(v["run"]["goal"], goal.as_str());
    let shown = &v["waiting_approval"];
    assert_eq!(shown["hash"], approval.hash.as_str());
    let body = shown["presentation"]["args"]["body"]
        .as_str()
        .unwrap_or_default();
    assert!(body.contains("bytes omitted"));
    assert!(body.len() < 2100);
    assert_eq!(v["approvals"][0]["hash"], approval.hash.as_str());
}

#[test]
fn text_output_is_sanitized_and_json_is_raw() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let goal = "clear\u{1b}[2J bell\u{7} csi\u{9b} rlo\u{202e} lri\u{2066} zwj\u{200d} e\u{301}\u{301}\u{301}\u{301}\u{301}\u{301} literal \\u001b[2J";
    let args = r#"{"msg":"\u001b]0;pwned\u0007","n":1}"#;
    waiting_run(&db, "r1", goal, args);
    for cmd in [&["runs"][..], &["show", "r1"], &["events", "r1"]] {
        let out = agentrt(&db, cmd);
        assert_eq!(out.code, 0);
        for bad in [
            '\u{1b}', '\u{7}', '\u{9b}', '\r', '\u{202e}', '\u{2066}', '\u{200d}',
        ] {
            assert!(!out.stdout.contains(bad), "{cmd:?} printed {bad:?}");
        }
    }
    let out = agentrt(&db, &["show", "r1"]);
    for visible in [
        "\\x1b[2J",
        "\\x07",
        "\\x9b",
        "\\u{202e}",
        "\\u{2066}",
        "\\u{200d}",
        "combining marks dropped",
        "literal \\u001b[2J",
    ] {
        assert!(out.stdout.contains(visible), "show lacks {visible:?}");
    }
    let v = json(&agentrt(&db, &["--json", "show", "r1"]).stdout);
    assert_eq!(v["run"]["goal"], goal);
    let v = json(&agentrt(&db, &["--json", "runs"]).stdout);
    assert_eq!(v["runs"][0]["goal"], goal);
}

#[test]
fn unknown_runs_are_errors_and_a_missing_run_id_is_usage() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    for cmd in ["show", "events"] {
        let out = agentrt(&db, &[cmd, "nope"]);
        assert_eq!(out.code, 1, "{cmd}");
        assert_eq!(out.stdout, "");
        assert!(out.stderr.contains("no run \"nope\""), "{}", out.stderr);
        assert_eq!(agentrt(&db, &[cmd]).code, 2);
    }
}

// ---- events ----

#[test]
fn events_print_trace_lines_and_page() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "r1", "read");
    let stored = Store::open(&db)
        .expect("open")
        .list_events("r1")
        .expect("events");
    let out = agentrt(&db, &["events", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), stored.len());
    let first = lines[0];
    // `YYYY-MM-DD HH:MM:SS.mmm ±hhmm`, two spaces, the type in 22 columns.
    assert_eq!(&first[19..20], ".");
    assert!(is_stamp(&format!("{}{}", &first[..19], &first[23..29])));
    assert_eq!(&first[29..31], "  ");
    assert_eq!(&first[31..54], "run.created            ");
    assert!(first[54..].starts_with("{\"goal\":\"read\""));

    let out = agentrt(&db, &["events", "r1", "--limit", "2", "--offset", "1"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 3);
    assert!(lines[0].contains("run.started"));
    assert_eq!(
        lines[2],
        format!(
            "... {} more event(s); rerun with --offset 3 to see them (showing 2 of {})",
            stored.len() - 3,
            stored.len()
        )
    );
}

#[test]
fn events_json_lines_with_meta_and_invalid_payloads() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "r1", "read <a> & b");
    let stored = Store::open(&db)
        .expect("open")
        .list_events("r1")
        .expect("events");
    let out = agentrt(&db, &["--json", "events", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), stored.len());
    for (line, event) in lines.iter().zip(&stored) {
        let v = json(line);
        assert_eq!(v["seq"], event.seq);
        assert!(event.seq > 0);
        assert_eq!(v["run_id"], "r1");
        assert_eq!(v["type"], event.event_type.as_str());
        assert_eq!(v["at"], event.at.as_str());
        assert!(v["payload"].is_object());
        assert!(v.get("invalid_payload").is_none());
    }
    assert!(lines[0].contains("read <a> & b"));

    let out = agentrt(&db, &["--json", "events", "r1", "--limit", "1"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[1],
        format!(
            "{{\"meta\":true,\"truncated\":true,\"total\":{},\"returned\":1,\"offset\":0}}",
            stored.len()
        )
    );

    sql(
        &db,
        &format!(
            "UPDATE events SET payload_json = 'not json {{' WHERE seq = {}",
            stored[1].seq
        ),
    );
    let out = agentrt(&db, &["--json", "events", "r1", "--limit", "0"]);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), stored.len());
    let v = json(lines[1]);
    assert_eq!(v["payload"], "not json {");
    assert_eq!(v["invalid_payload"], true);
}

#[test]
fn events_stream_every_page_with_limit_zero() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "r1", "read");
    // Pad the log past one 500-event page.
    sql(
        &db,
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1100)
         INSERT INTO events (run_id, step_id, at, type, payload_json)
         SELECT 'r1', '', '2026-10-01T09:00:00.000000000Z', 'step.started', '{\"index\":' || i || '}' FROM n",
    );
    let total = Store::open(&db)
        .expect("open")
        .list_events("r1")
        .expect("events")
        .len();
    let out = agentrt(
        &db,
        &["--json", "events", "r1", "--limit", "0", "--offset", "3"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let seqs: Vec<i64> = out
        .stdout
        .lines()
        .map(|l| json(l)["seq"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(seqs.len(), total - 3);
    assert!(seqs.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn a_failing_stdout_exits_1() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    completed_run(&db, "r1", "read");
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full here
    };
    let mut c = cli();
    c.arg("--db")
        .arg(&db)
        .args(["events", "r1"])
        .stdout(Stdio::from(full));
    let out = run_cmd(c);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("events: writing output:"),
        "{}",
        out.stderr
    );
}

// ---- approve / reject ----

#[test]
fn approve_with_yes_decides_and_traces_to_stderr() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let out = agentrt(
        &db,
        &["approve", "r1", "--yes", "--by", "joey", "--note", "x"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with(&format!("\nAPPROVAL WAITING  {}\n", approval.id))
    );
    assert!(out.stdout.contains(&format!(
        "\napproval {}: approved by joey\nrun r1: WAITING_FOR_APPROVAL\nrun r1 stays waiting until the consumer resumes it",
        approval.id
    )));
    assert!(out.stderr.contains("approval.decided"), "{}", out.stderr);
    assert!(out.stderr.contains("\"by\":\"joey\""));
    let stored = approvals(&db, "r1").remove(0);
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(
        (stored.decided_by.as_str(), stored.note.as_str()),
        ("joey", "x")
    );

    let out = agentrt(&db, &["approve", "r1", "--yes", "--by", "joey"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("no pending approval"), "{}", out.stderr);

    let out = agentrt(&db, &["reject", "r1", "--approval", &approval.id]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("not pending"), "{}", out.stderr);
    assert_eq!(approvals(&db, "r1")[0].status, ApprovalStatus::Approved);
}

#[test]
fn approve_without_consent_and_without_a_terminal_is_a_usage_error() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    // stdin is /dev/null: not a terminal.
    let out = agentrt(&db, &["approve", "r1"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert!(
        out.stdout
            .contains(&format!("APPROVAL WAITING  {}", approval.id))
    );
    assert!(!out.stdout.contains("[y/N]"));
    let first = out.first_err_line();
    assert!(
        first.contains("--approval") && first.contains("--yes"),
        "{first}"
    );
    assert!(out.is_one_line_and_a_pointer_to_help(), "{out:?}");
    // A pipe with a typed "y" is not a terminal either.
    let mut c = cli();
    c.arg("--db")
        .arg(&db)
        .args(["reject", "r1"])
        .stdin(Stdio::piped());
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(b"y\n");
    }
    let status = child.wait_with_output().expect("wait").status;
    assert_eq!(status.code(), Some(2));
    assert_eq!(approvals(&db, "r1")[0].status, ApprovalStatus::Pending);
    // In JSON mode nothing is printed before the refusal.
    let out = agentrt(&db, &["--json", "approve", "r1"]);
    assert_eq!((out.code, out.stdout.as_str()), (2, ""));
}

#[test]
fn approve_json_carries_the_stored_hash() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let out = agentrt(
        &db,
        &["--json", "approve", "r1", "--approval", &approval.id],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = json(&out.stdout);
    assert_eq!(v["approval"]["hash"], approval.hash.as_str());
    assert_eq!(v["approval"]["status"], "approved");
    assert_eq!(v["approval"]["decided_by"], "tester");
    assert_eq!(v["run"]["status"], "WAITING_FOR_APPROVAL");
    assert!(v["run"].get("pending_approval_id").is_none());
}

#[test]
fn approve_edit_binds_the_edited_arguments_and_refuses_what_is_not_an_object() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let missing = dir.path().join("missing.json");
    let list = dir.path().join("list.json");
    std::fs::write(&list, "[1]").unwrap();
    for (file, says) in [(&missing, "No such file"), (&list, "must be a JSON object")] {
        let file = file.to_str().unwrap();
        let out = agentrt(&db, &["approve", "r1", "--yes", "--edit", file]);
        assert_eq!(out.code, 1, "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
    // An edit is an approval: reject has no --edit.
    let out = agentrt(&db, &["reject", "r1", "--yes", "--edit", "x.json"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(approvals(&db, "r1")[0].status, ApprovalStatus::Pending);

    let edit = dir.path().join("edit.json");
    std::fs::write(&edit, r#"{"n":8, "branch":"fix"}"#).unwrap();
    let out = agentrt(
        &db,
        &[
            "--json",
            "approve",
            "r1",
            "--approval",
            &approval.id,
            "--edit",
            edit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = json(&out.stdout);
    assert_eq!(v["edited"], approval.id.as_str());
    assert_eq!(v["approval"]["status"], "approved");
    let stored = approvals(&db, "r1");
    assert_eq!(stored[0].status, ApprovalStatus::Edited);
    assert_eq!(v["approval"]["id"], stored[1].id.as_str());
    assert_eq!(v["approval"]["hash"], stored[1].hash.as_str());
    assert_eq!(
        stored[1].request.get("args").unwrap().as_str(),
        r#"{"branch":"fix","n":8}"#
    );
}

#[test]
fn reject_cancels_the_run() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let out = agentrt(&db, &["reject", "--note", "not today", "r1", "--yes"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.ends_with(&format!(
        "approval {}: rejected by tester\nrun r1: CANCELLED (approval_rejected)\n",
        approval.id
    )));
    let run = Store::open(&db).expect("open").get_run("r1").expect("run");
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(run.reason, Some(TerminalReason::ApprovalRejected));
    assert_eq!(run.reason_detail, "not today");
}

/// The decision is bound to the hash that was shown: a stale hash decides
/// nothing (the CLI passes the printed approval's hash the same way).
#[test]
fn a_stale_shown_hash_decides_nothing() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let approval = approvals(&db, "r1").remove(0);
    let store = Store::open_existing(&db, false).expect("open");
    let err = Operator::new(store.clone())
        .approve(
            "r1",
            &approval.id,
            &DecideOptions {
                by: "joey",
                note: "",
                shown_hash: Some("0".repeat(64).as_str()),
            },
        )
        .expect_err("stale hash refused");
    assert!(matches!(err, Error::ApprovalChanged { .. }), "{err:?}");
    assert_eq!(
        store
            .get_approval("r1", &approval.id)
            .expect("approval")
            .status,
        ApprovalStatus::Pending
    );
}

#[test]
fn an_approval_too_large_to_show_cannot_be_decided() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    sql(
        &db,
        "UPDATE approvals SET presentation_json = '{\"text\":\"' || hex(zeroblob(40000)) || '\"}'",
    );
    let out = agentrt(&db, &["show", "r1"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(
        "unread  presentation_json: 80011 characters, over the page-read cap of 65536\n"
    ));
    assert!(out.stdout.contains("  length (5 bytes)\n    80011\n"));
    assert!(out.stdout.contains("  truncated (4 bytes)"));
    let out = agentrt(&db, &["approve", "r1", "--yes"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("cannot be decided"), "{}", out.stderr);
    assert_eq!(approvals(&db, "r1")[0].status, ApprovalStatus::Pending);
}

// ---- cancel ----

#[test]
fn cancel_cancels_once_then_says_already() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push", PUSH_ARGS);
    let out = agentrt(&db, &["cancel", "r1", "--by", "ann", "--note", "stop"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "run r1: CANCELLED (operator_cancelled)\n");
    let out = agentrt(&db, &["cancel", "--by", "ann", "r1"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("already CANCELLED"), "{}", out.stderr);
    let out = agentrt(&db, &["cancel", "r1", "r2"]);
    assert_eq!(out.code, 2);

    completed_run(&db, "r2", "done");
    let out = agentrt(&db, &["--json", "cancel", "r2"]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("already COMPLETED"));

    waiting_run(&db, "r3", "push", PUSH_ARGS);
    let v = json(&agentrt(&db, &["--json", "cancel", "r3"]).stdout);
    assert_eq!(v["run"]["status"], "CANCELLED");
    assert_eq!(v["run"]["reason"], "operator_cancelled");
}

/// Pushes need two approvers (design §46).
struct TwoApprovers;

impl agentrt::Policy for TwoApprovers {
    fn evaluate(
        &self,
        request: &agentrt::ToolRequest,
        _view: &agentrt::RunView,
    ) -> Result<agentrt::PolicyDecision, agentrt::PolicyError> {
        let both = agentrt::policy::tool_and_args(request);
        Ok(agentrt::PolicyDecision::need_approval(
            "production",
            "two people",
            Some(both.clone()),
            Some(both),
        )
        .with_approvers(2))
    }
}

#[test]
fn approve_of_a_request_that_needs_two_says_it_waits_for_another_and_refuses_the_same_person() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    let store = agentrt::Store::open(&db).expect("open");
    let agent = agentrt::ScriptedAgent::new(vec![agentrt::Decision::tool_call("push", PUSH_ARGS)]);
    let mut driver = agentrt::Driver::new(
        agentrt::GateConfig::new(store, TwoApprovers, tools()),
        agent,
    )
    .expect("driver");
    let run = runtime()
        .block_on(driver.start(Some("r1"), "push", agentrt::Limits::default()))
        .expect("run");
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    let approval = approvals(&db, "r1").remove(0);

    let shown = agentrt(&db, &["show", "r1"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let out = agentrt(&db, &["approve", "r1", "--yes", "--by", "alice"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("\nneeds   2 approvers\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!(
            "approval {}: approved by alice (1 of 2): it waits for another approver",
            approval.id
        )),
        "{}",
        out.stdout
    );
    assert!(out.stderr.contains("approval.endorsed"), "{}", out.stderr);

    let again = agentrt(&db, &["approve", "r1", "--yes", "--by", "alice"]);
    assert_eq!(again.code, 1);
    assert!(
        again
            .stdout
            .contains("approved by alice, waiting for another"),
        "{}",
        again.stdout
    );
    assert!(
        again.stderr.contains("another person must decide it"),
        "{}",
        again.stderr
    );

    let out = agentrt(&db, &["approve", "r1", "--yes", "--by", "bob"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains(&format!("approval {}: approved by bob", approval.id)),
        "{}",
        out.stdout
    );
    let stored = approvals(&db, "r1").remove(0);
    assert_eq!(stored.status, ApprovalStatus::Approved);
    assert_eq!(stored.decided_by, "bob");
}
