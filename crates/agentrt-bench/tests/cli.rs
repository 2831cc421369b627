//! The `agentrt-bench` binary, run as a process: both goldens through
//! `compare`, the per-file report through `summarize`, and the exit codes
//! 0 (done), 1 (refused) and 2 (usage).
#![cfg(feature = "cli")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use agentrt_bench::ResultFile;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}

fn run<P: AsRef<std::ffi::OsStr>>(args: &[P]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_agentrt-bench"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

const GOLDEN_FLAGS: [&str; 5] = [
    "compare",
    "--order",
    "baseline,scripted,replay",
    "--link-prefix",
    "results/",
];

/// The golden's input copied into a fresh directory under `name`.
fn copy_to(dir: &Path, from: &str, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(data(from), &path).unwrap();
    path
}

#[test]
fn compare_reproduces_both_goldens() {
    let dir = tempfile::tempdir().unwrap();
    for (input, golden) in [
        ("casework.json", "casework.compare.md"),
        ("repo-steward.json", "repo-steward.compare.md"),
    ] {
        let path = copy_to(dir.path(), input, input);
        let mut args: Vec<std::ffi::OsString> = GOLDEN_FLAGS.iter().map(Into::into).collect();
        args.push(path.into_os_string());
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
        assert_eq!(
            text(&out.stdout),
            std::fs::read_to_string(data(golden)).unwrap(),
            "{golden}"
        );
    }
}

#[test]
fn summarize_prints_the_per_file_report() {
    for name in ["casework.json", "repo-steward.json"] {
        let out = run(&[data(name)]);
        assert_eq!(out.status.code(), Some(2), "summarize is required");
        let out = run(&[Path::new("summarize").to_path_buf(), data(name)]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let want = ResultFile::read_path(data(name)).unwrap().markdown();
        assert_eq!(text(&out.stdout), want);
    }
    let out = run(&[
        Path::new("summarize").to_path_buf(),
        data("repo-steward.json"),
    ]);
    let md = text(&out.stdout);
    assert!(md.starts_with(
        "# Results: repo-steward\n\nStarted 2026-09-25T20:04:11Z at commit a4fccc3. Options: max_cost_micros_per_run=0, max_model_calls_per_run=80, max_total_calls=1500, max_total_cost_micros=0.\n\n## model ollama:qwen3:30b-a3b\n\n22 trials over 11 scenarios, 22 judged.\n"
    ), "{md}");
    assert!(md.contains("| Completed | success | 8 | 10 trials expecting proposal |\n"));
    assert!(md.contains("- policy denials: 3\n- policy_aborts: 2\n- model calls: 176, tokens 447854 in / 102401 out\n"), "{md}");
}

#[test]
fn mixed_commits_are_refused_with_exit_1_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let a = copy_to(dir.path(), "repo-steward.json", "a.json");
    let mut other = ResultFile::read_path(data("casework.json")).unwrap();
    other.commit = "bbb".into();
    let mut steward = ResultFile::read_path(&a).unwrap();
    steward.commit = "bbb".into();
    steward.started_at = agentrt_bench::Timestamp::parse("2026-09-24T00:00:00Z").unwrap();
    for t in &mut steward.trials {
        t.model = "other-model".into();
    }
    let b = dir.path().join("b.json");
    steward.write_path(&b).unwrap();

    let out = run(&[PathBuf::from("compare"), a.clone(), b.clone()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        "agentrt-bench: results from different commits are not comparable: a4fccc3, bbb (--allow-mixed-commits compares them anyway)\n"
    );

    let out = run(&[
        PathBuf::from("compare"),
        PathBuf::from("--allow-mixed-commits"),
        a.clone(),
        b.clone(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let md = text(&out.stdout);
    assert!(md.starts_with("**These columns come from 2 commits (a4fccc3, bbb) and are not comparable as like for like.** Each column names its commit.\n\n"), "{md}");
    assert!(md.contains("| model ollama:qwen3:30b-a3b, 2 repeats | a4fccc3 |"));
    assert!(md.contains("| model other-model, 2 repeats | bbb |"));
    assert!(md.contains("file a.json;") && md.contains("file b.json;"));

    let c = dir.path().join("c.json");
    other.write_path(&c).unwrap();
    let out = run(&[
        PathBuf::from("compare"),
        PathBuf::from("--allow-mixed-commits"),
        a,
        c,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "agentrt-bench: results scored by different taxonomies are not comparable: casework and repo-steward\n"
    );
}

#[test]
fn a_malformed_file_is_refused_with_exit_1_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(data("casework.json")).unwrap();
    let bad = dir.path().join("bad.json");
    let from = "\"repeat\": 1,\n      \"reached\"";
    assert!(good.contains(from));
    std::fs::write(
        &bad,
        good.replacen(from, "\"repeat\": 0,\n      \"reached\"", 1),
    )
    .unwrap();
    for command in ["summarize", "compare"] {
        let out = run(&[PathBuf::from(command), bad.clone()]);
        assert_eq!(out.status.code(), Some(1), "{command}");
        assert!(out.stdout.is_empty());
        assert_eq!(
            text(&out.stderr),
            format!(
                "agentrt-bench: {}: invalid result file: trials[0].repeat: is 0; repeats count from 1\n",
                bad.display()
            )
        );
    }
    let missing = dir.path().join("missing.json");
    let out = run(&[PathBuf::from("summarize"), missing.clone()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.starts_with(&format!("agentrt-bench: {}: ", missing.display())),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn nothing_to_compare_is_a_refusal() {
    let dir = tempfile::tempdir().unwrap();
    let f = ResultFile::new(
        agentrt_bench::Timestamp::parse("2026-09-25T20:00:00Z").unwrap(),
        agentrt_bench::Taxonomy::casework(),
    );
    let path = dir.path().join("empty.json");
    f.write_path(&path).unwrap();
    let out = run(&[PathBuf::from("compare"), path]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stderr), "agentrt-bench: nothing to compare\n");
}

#[test]
fn usage_errors_print_one_problem_line_then_the_usage_and_exit_2() {
    let usage = "usage: agentrt-bench summarize FILE\n       agentrt-bench compare [--order MODE,MODE,...] [--link-prefix PREFIX] [--allow-mixed-commits] FILE...\n";
    for (args, problem) in [
        (vec![], "no command given (summarize or compare)"),
        (
            vec!["compare"],
            "the following required arguments were not provided: <FILE>...",
        ),
        (
            vec!["compare", "--frobnicate", "x.json"],
            "unexpected argument '--frobnicate' found",
        ),
        (
            vec!["compare", "-order", "a", "x.json"],
            "unknown option '-order'; long options take two dashes (--order)",
        ),
        (vec!["report", "x.json"], "unrecognized subcommand 'report'"),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        assert_eq!(
            text(&out.stderr),
            format!("agentrt-bench: {problem}\n{usage}"),
            "{args:?}"
        );
    }
}

#[test]
fn help_goes_to_stdout_with_exit_0() {
    for args in [vec!["-h"], vec!["--help"], vec!["compare", "--help"]] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(out.stderr.is_empty());
        let help = text(&out.stdout);
        assert!(
            help.contains("usage: agentrt-bench summarize FILE\n"),
            "{help}"
        );
        assert!(help.contains("--allow-mixed-commits"));
        assert!(help.contains("exit status: 0 done; 1 refused"));
    }
}
