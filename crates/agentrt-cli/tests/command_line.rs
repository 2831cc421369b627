//! What users of Rust command lines expect of `agentrt` (README decision
//! 10): a help per command, `--version`, suggestions for typos, shell
//! completions, short usage errors, and a `--by` that works where `$USER`
//! is not set.

mod support;

use agentrt::ApprovalStatus;
use support::*;

const PUSH_ARGS: &str = r#"{"branch":"main","n":7}"#;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

#[test]
fn each_command_has_its_own_help_by_flag_and_by_help() {
    let approve: &[&str] = &[
        "Usage: agentrt [--db PATH|URL] [--json] approve [OPTIONS] <RUN>",
        "--approval <ID>",
        "--by <WHO>",
        "--note <TEXT>",
        "--yes",
        "no resume command",
        "Driver::resume",
    ];
    let runs: &[&str] = &[
        "Usage: agentrt [--db PATH|URL] [--json] runs [OPTIONS]",
        "--limit <N>",
        "default 100",
        "--offset <N>",
        "--label <KEY=VALUE>",
        "Only runs begun with this label",
    ];
    let head_sign: &[&str] = &["head sign --key FILE", "--key <FILE>", "--out <FILE>"];
    let cases: &[(&[&str], &[&str])] = &[
        (&["approve", "--help"], approve),
        (&["approve", "-h"], approve),
        (&["help", "approve"], approve),
        (&["--db", "x", "approve", "r1", "--help"], approve),
        (&["runs", "-h"], runs),
        (&["help", "runs"], runs),
        (&["head", "sign", "--help"], head_sign),
        (&["help", "head", "sign"], head_sign),
    ];
    for (args, needles) in cases {
        let out = agentrt_raw(args);
        assert_eq!(out.code, 0, "{args:?}: {out:?}");
        assert_eq!(out.stderr, "", "{args:?}");
        for needle in *needles {
            assert!(out.stdout.contains(needle), "{args:?} lacks {needle:?}");
        }
        // The command's help, not the manual.
        assert!(!out.stdout.contains("<command> [arguments]"), "{args:?}");
    }
}

#[test]
fn version_prints_the_name_and_version() {
    for flag in ["--version", "-V"] {
        let out = agentrt_raw(&[flag]);
        assert_eq!(out.code, 0, "{flag}: {out:?}");
        assert_eq!(
            out.stdout,
            format!("agentrt {}\n", env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(out.stderr, "");
    }
}

#[test]
fn a_mistyped_command_or_flag_gets_a_suggestion() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    let out = agentrt(&db, &["aprove", "r1"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.first_err_line(),
        "error: unknown command \"aprove\"; did you mean \"approve\"?"
    );
    assert!(out.is_one_line_and_a_pointer_to_help(), "{out:?}");

    let out = agentrt(&db, &["runs", "--limt", "3"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.first_err_line(),
        "error: unknown flag --limt for runs; did you mean --limit?"
    );
    assert!(!db.exists());
}

#[test]
fn a_usage_error_is_one_line_and_a_pointer_to_the_command_help() {
    let dir = tempdir();
    let db = dir.path().join("missing.db");
    let out = agentrt(&db, &["approve", "r1", "--bogus"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "error: unknown flag --bogus for approve\n\nFor more information, try 'agentrt approve --help'.\n"
    );
    // Before any command, the pointer is to agentrt's own help.
    let out = agentrt_raw(&["--bogus", "runs"]);
    assert_eq!(out.code, 2, "{out:?}");
    assert_eq!(
        out.stderr,
        "error: unknown flag --bogus\n\nFor more information, try 'agentrt --help'.\n"
    );
}

#[test]
fn completions_print_a_script_for_each_shell_without_a_database() {
    for shell in ["bash", "zsh", "fish"] {
        let out = agentrt_raw(&["completions", shell]);
        assert_eq!(out.code, 0, "{shell}: {out:?}");
        assert_eq!(out.stderr, "", "{shell}");
        assert!(out.stdout.len() > 100, "{shell}: {:?}", out.stdout);
        for needle in ["agentrt", "approve", "verify", "approval"] {
            assert!(
                out.stdout.contains(needle),
                "{shell} script lacks {needle:?}"
            );
        }
    }
}

#[test]
fn an_unknown_shell_is_a_usage_error() {
    for args in [&["completions", "tcsh"][..], &["completions"]] {
        let out = agentrt_raw(args);
        assert_eq!(out.code, 2, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "");
        let first = out.first_err_line();
        assert!(
            first.contains("bash, elvish, fish, powershell, zsh"),
            "{first}"
        );
        assert!(out.is_one_line_and_a_pointer_to_help(), "{out:?}");
    }
    assert!(
        agentrt_raw(&["completions", "tcsh"])
            .first_err_line()
            .contains("\"tcsh\"")
    );
}

/// The account's login name as `id` reads it from the user database, if
/// it has one.
fn account_name() -> Option<String> {
    let out = std::process::Command::new("id").arg("-un").output().ok()?;
    let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !name.is_empty()).then_some(name)
}

#[test]
fn without_user_or_logname_the_account_name_decides() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push it", PUSH_ARGS);
    let mut c = cli();
    c.env_remove("USER")
        .env_remove("LOGNAME")
        .arg("--db")
        .arg(&db)
        .args(["approve", "r1", "--yes"]);
    let out = run_cmd(c);
    match account_name() {
        Some(name) => {
            assert_eq!(out.code, 0, "{out:?}");
            assert!(
                out.stdout.contains(&format!("approved by {name}")),
                "{out:?}"
            );
            let stored = approvals(&db, "r1").remove(0);
            assert_eq!(stored.status, ApprovalStatus::Approved);
            assert_eq!(stored.decided_by, name);
        }
        // An account the user database does not know (a container run
        // with a bare uid): nothing to fall back to.
        None => {
            assert_eq!(out.code, 2, "{out:?}");
            assert!(out.first_err_line().contains("--by is empty"), "{out:?}");
            assert!(out.is_one_line_and_a_pointer_to_help(), "{out:?}");
        }
    }
}

#[test]
fn logname_stands_in_when_user_is_unset() {
    let dir = tempdir();
    let db = new_db(dir.path(), "agentrt.db");
    waiting_run(&db, "r1", "push it", PUSH_ARGS);
    let mut c = cli();
    c.env_remove("USER")
        .env("LOGNAME", "dora")
        .arg("--db")
        .arg(&db)
        .args(["approve", "r1", "--yes"]);
    let out = run_cmd(c);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(approvals(&db, "r1")[0].decided_by, "dora");
}
