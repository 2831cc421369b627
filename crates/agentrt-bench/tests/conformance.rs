//! The conformance data of the original: both comparison goldens byte for
//! byte, the byte-identical round trip of `casework.json`, and the
//! summaries upstream's own tests assert.

use std::path::PathBuf;

use agentrt_bench::{CompareOptions, FileError, ResultFile, compare, latest};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("data")
        .join(name)
}

fn read_bytes(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn read(name: &str) -> ResultFile {
    ResultFile::read_path(data(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn golden_options() -> CompareOptions {
    CompareOptions {
        order: vec!["baseline".into(), "scripted".into(), "replay".into()],
        link_prefix: "results/".into(),
        ..CompareOptions::default()
    }
}

/// Shows the first differing line, so a failure names the cell.
fn assert_same_text(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "{what}: line {} differs", i + 1);
    }
    assert_eq!(got, want, "{what}: lengths or line endings differ");
}

#[test]
fn compare_reproduces_the_casework_golden() {
    let files = [read("casework.json")];
    assert_eq!(files[0].source, "casework.json");
    let md = compare(&latest(&files), &golden_options()).unwrap();
    let want = String::from_utf8(read_bytes("casework.compare.md")).unwrap();
    assert_same_text(&md, &want, "casework.compare.md");
}

#[test]
fn compare_reproduces_the_repo_steward_golden() {
    let files = [read("repo-steward.json")];
    assert_eq!(files[0].source, "repo-steward.json");
    let md = compare(&latest(&files), &golden_options()).unwrap();
    let want = String::from_utf8(read_bytes("repo-steward.compare.md")).unwrap();
    assert_same_text(&md, &want, "repo-steward.compare.md");
}

#[test]
fn casework_round_trip_is_byte_identical() {
    let bytes = read_bytes("casework.json");
    let f = ResultFile::from_slice(&bytes).unwrap();
    let out = f.to_json().unwrap();
    assert_same_text(&out, std::str::from_utf8(&bytes).unwrap(), "casework.json");
    assert_eq!(out.as_bytes(), bytes.as_slice());
}

/// The reconstruction is not upstream's file, but it was written in the
/// same encoding, so it round-trips too.
#[test]
fn repo_steward_reconstruction_round_trips() {
    let bytes = read_bytes("repo-steward.json");
    let out = ResultFile::from_slice(&bytes).unwrap().to_json().unwrap();
    assert_eq!(out.as_bytes(), bytes.as_slice());
}

#[test]
fn write_path_then_read_path_is_identity() {
    let dir = tempfile::tempdir().unwrap();
    let f = read("casework.json");
    let path = dir.path().join("copy.json");
    f.write_path(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), read_bytes("casework.json"));
    let back = ResultFile::read_path(&path).unwrap();
    assert_eq!(back.source, "copy.json");
    assert_eq!(
        ResultFile {
            source: f.source.clone(),
            ..back
        },
        f
    );
}

/// Upstream's TestSummarize_DenominatorsMatchRepoSteward: 8/10 completed,
/// 1/10 incorrect refusals, 10/12 correct refusals, 3/22 failed, 3 denials,
/// 2 policy aborts, 176 model calls, 2 repeats, 11 scenarios.
#[test]
fn repo_steward_summary_matches_its_published_figures() {
    let f = read("repo-steward.json");
    let s = f.summaries();
    assert_eq!(s.len(), 1);
    let got: Vec<(&str, u64, u64)> = s[0]
        .counts
        .iter()
        .map(|c| (c.outcome.as_str(), c.n, c.of))
        .collect();
    assert_eq!(
        got,
        [
            ("completed", 8, 10),
            ("safe_nonresult", 0, 22),
            ("incorrect_refusal", 1, 10),
            ("correct_refusal", 10, 12),
            ("false_success", 0, 22),
            ("failed", 3, 22),
        ]
    );
    assert_eq!(s[0].policy_denials, 3);
    assert_eq!(s[0].totals.get("policy_aborts"), Some(&2));
    assert_eq!(s[0].model_calls, 176);
    assert_eq!(s[0].repeats, 2);
    assert_eq!(s[0].scenarios, 11);
    assert!(!s[0].disqualified());
}

/// Upstream's TestSummarize_MatchesCaseworkPerMode: per mode 5, 1, 5 of
/// 11; replay at 137 model calls, 542243 input tokens, mean 12.45 steps.
#[test]
fn casework_summaries_match_its_published_figures() {
    let f = read("casework.json");
    let s = f.summaries();
    let modes: Vec<&str> = s.iter().map(|s| s.mode.as_str()).collect();
    assert_eq!(modes, ["baseline", "scripted", "replay"]);
    for m in &s {
        let c = |name: &str| m.count(name).map(|c| (c.n, c.of));
        assert_eq!(c("correct_resolution"), Some((5, 11)), "{}", m.mode);
        assert_eq!(c("justified_clarification"), Some((1, 11)), "{}", m.mode);
        assert_eq!(c("appropriate_escalation"), Some((5, 11)), "{}", m.mode);
        assert!(!m.disqualified());
    }
    assert_eq!(s[2].model_calls, 137);
    assert_eq!(s[2].input_tokens, 542_243);
    assert!((s[2].mean_steps() - 12.45).abs() < 0.01);
}

/// Upstream's TestDecode_RefusesWhatDoesNotFollowFromTheTrials, with the
/// field each refusal names.
#[test]
fn decode_refuses_edits_that_do_not_follow_from_the_trials() {
    let text = String::from_utf8(read_bytes("repo-steward.json")).unwrap();
    let edits = [
        (
            "\"outcome\": \"completed\",\n          \"class\": \"success\",\n          \"n\": 8",
            "\"outcome\": \"completed\",\n          \"class\": \"success\",\n          \"n\": 9",
            "summaries[0].counts[0].n",
        ),
        (
            "\"outcome\": \"incorrect_refusal\",\n      \"steps\"",
            "\"outcome\": \"completed\",\n      \"steps\"",
            "summaries[0].counts[0].n",
        ),
        ("agent-runtime/bench/v1", "agent-runtime/bench/v0", "format"),
        (
            "\"commit\": \"a4fccc3\",",
            "\"commit\": \"a4fccc3\", \"rate\": 0.9,",
            "rate",
        ),
    ];
    for (from, to, field) in edits {
        assert!(text.contains(from), "fixture lacks {from:?}");
        let err = ResultFile::from_json(&text.replacen(from, to, 1)).unwrap_err();
        assert_eq!(err.field_path(), Some(field), "{err}");
        assert!(err.to_string().starts_with("invalid result file: "));
    }
    let twice = format!("{text}{text}");
    assert!(matches!(
        ResultFile::from_json(&twice),
        Err(FileError::TrailingData { .. })
    ));
}

#[test]
fn read_dir_sets_source_skips_other_files_and_names_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("b.json"), read_bytes("casework.json")).unwrap();
    std::fs::write(dir.path().join("a.json"), read_bytes("repo-steward.json")).unwrap();
    std::fs::write(dir.path().join("a.md"), "not json").unwrap();
    std::fs::create_dir(dir.path().join("c.json")).unwrap();
    let files = agentrt_bench::read_dir(dir.path()).unwrap();
    let sources: Vec<&str> = files.iter().map(|f| f.source.as_str()).collect();
    assert_eq!(sources, ["a.json", "b.json"]);
    std::fs::write(dir.path().join("d.json"), "{}").unwrap();
    let err = agentrt_bench::read_dir(dir.path()).unwrap_err();
    assert!(
        matches!(&err, FileError::InFile { name, .. } if name == "d.json"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("d.json: invalid result file: format: "),
        "{err}"
    );
}
