//! Properties over random result files: every count adds up to its
//! denominator, one unsafe trial disqualifies its mode (and only its
//! mode), and writing a file that was read gives the same bytes.

use std::collections::BTreeMap;

use agentrt_bench::{
    Class, CompareOptions, RawJson, ResultFile, Taxonomy, Timestamp, Trial, compare, latest,
};
use proptest::prelude::*;

const MODES: [&str; 3] = ["baseline", "scripted", "replay"];
const MODELS: [&str; 2] = ["", "m1"];
const EXPECTS: [&str; 4] = ["", "proposal", "refusal", "other"];

fn taxonomy() -> impl Strategy<Value = Taxonomy> {
    prop_oneof![Just(Taxonomy::repo_steward()), Just(Taxonomy::casework())]
}

/// Text with the characters the encoder must escape.
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-z_]{1,12}",
        "[ -~]{0,12}",
        prop::collection::vec(
            prop::sample::select(vec![
                '<', '>', '&', '"', '\\', '\n', '\t', '\u{1}', '\u{7f}', 'é', '—', '\u{2028}',
                '\u{2029}', '😀', 'x'
            ]),
            0..8
        )
        .prop_map(|c| c.into_iter().collect()),
    ]
}

fn extra() -> impl Strategy<Value = RawJson> {
    prop_oneof![
        any::<i64>().prop_map(RawJson::integer),
        (0i64..100).prop_map(RawJson::integer),
        text().prop_map(|s| RawJson::string(&s)),
        Just(RawJson::parse("{ \"b\" : [1.50, null, true], \"a\": \"<x>\" }").unwrap()),
        Just(RawJson::parse("2.5").unwrap()),
    ]
}

/// A trial shape: its key, what it expects, and how it was judged
/// (`None` = excluded; `Some(i)` = outcome `i mod outcomes`).
#[derive(Debug, Clone)]
struct Shape {
    scenario: u8,
    mode: usize,
    model: usize,
    repeat: i64,
    expect: usize,
    outcome: Option<usize>,
    counters: [i64; 8],
    reached: String,
    extra: BTreeMap<String, RawJson>,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        (
            0u8..12,
            0..MODES.len(),
            0..MODELS.len(),
            1i64..4,
            0..EXPECTS.len(),
        ),
        prop::option::weighted(0.85, 0usize..16),
        prop::array::uniform8(prop_oneof![0i64..1_000, Just(i64::MAX)]),
        text(),
        prop::collection::btree_map("[a-c]", extra(), 0..3),
    )
        .prop_map(
            |((scenario, mode, model, repeat, expect), outcome, counters, reached, extra)| Shape {
                scenario,
                mode,
                model,
                repeat,
                expect,
                outcome,
                counters,
                reached,
                extra,
            },
        )
}

/// A valid file from shapes: duplicates of a key are dropped, and with
/// `safe_only` no trial gets an unsafe outcome.
fn build(tax: Taxonomy, shapes: Vec<Shape>, safe_only: bool) -> ResultFile {
    let mut f = ResultFile::new(
        Timestamp::parse("2026-09-25T20:04:11.413822Z").unwrap(),
        tax,
    );
    let allowed: Vec<String> = f
        .taxonomy
        .outcomes
        .iter()
        .filter(|o| !safe_only || o.class != Class::Unsafe)
        .map(|o| o.name.clone())
        .collect();
    for s in shapes {
        let mut t = match s.outcome {
            Some(i) => Trial::judged("", MODES[s.mode], s.repeat, &allowed[i % allowed.len()]),
            None => Trial::excluded("", MODES[s.mode], s.repeat, "not recorded"),
        };
        t.scenario = format!("S{}", s.scenario);
        t.model = MODELS[s.model].to_string();
        t.expect = EXPECTS[s.expect].to_string();
        t.reached = s.reached;
        [
            t.steps,
            t.tool_calls,
            t.policy_denials,
            t.model_calls,
            t.input_tokens,
            t.output_tokens,
            t.cost_micros,
            t.wall_ns,
        ] = s.counters;
        t.extra = s.extra;
        let duplicate = f.trials.iter().any(|u| {
            (&u.scenario, &u.mode, &u.model, u.repeat) == (&t.scenario, &t.mode, &t.model, t.repeat)
        });
        if !duplicate {
            f.trials.push(t);
        }
    }
    f
}

fn file(safe_only: bool) -> impl Strategy<Value = ResultFile> {
    (taxonomy(), prop::collection::vec(shape(), 0..40))
        .prop_map(move |(tax, shapes)| build(tax, shapes, safe_only))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every count adds up: judged + excluded = trials; the outcomes'
    /// numerators sum to the judged trials; each n <= of; an outcome over
    /// every judged trial has of = judged, one over an expectation has of =
    /// judged trials expecting it + trials with the outcome expecting
    /// something else; unsafe = the unsafe outcomes' numerators.
    #[test]
    fn counts_add_up_to_their_denominators(f in file(false)) {
        for s in f.summaries() {
            let group: Vec<&Trial> = f.trials.iter()
                .filter(|t| t.mode == s.mode && t.model == s.model)
                .collect();
            prop_assert_eq!(s.trials, group.len() as u64);
            prop_assert_eq!(s.judged + s.excluded, s.trials);
            prop_assert_eq!(s.counts.len(), f.taxonomy.outcomes.len());
            prop_assert_eq!(s.counts.iter().map(|c| c.n).sum::<u64>(), s.judged);
            let mut unsafe_n = 0;
            for (c, o) in s.counts.iter().zip(&f.taxonomy.outcomes) {
                prop_assert_eq!(&c.outcome, &o.name);
                prop_assert!(c.n <= c.of, "{} {}/{}", c.outcome, c.n, c.of);
                let judged = group.iter().filter(|t| t.is_judged());
                if o.over.is_empty() {
                    prop_assert_eq!(c.of, s.judged);
                } else {
                    let expecting = judged.clone().filter(|t| t.expect == o.over).count();
                    let elsewhere = judged.filter(|t| t.outcome == o.name && t.expect != o.over).count();
                    prop_assert_eq!(c.of, (expecting + elsewhere) as u64);
                }
                if o.class == Class::Unsafe {
                    unsafe_n += c.n;
                }
            }
            prop_assert_eq!(s.unsafe_trials, unsafe_n);
            prop_assert!(s.unsafe_trials <= s.judged);
        }
    }

    /// One unsafe trial in a mode disqualifies that mode, in the summary,
    /// the comparison and the per-file report, and no other mode.
    #[test]
    fn one_unsafe_trial_disqualifies_its_mode(
        f in file(true),
        mode in 0..MODES.len(),
        model in 0..MODELS.len(),
        which in any::<prop::sample::Index>(),
    ) {
        let mut f = f;
        for s in f.summaries() {
            prop_assert!(!s.disqualified());
        }
        let unsafe_names: Vec<String> = f.taxonomy.outcomes.iter()
            .filter(|o| o.class == Class::Unsafe)
            .map(|o| o.name.clone())
            .collect();
        let outcome = which.get(&unsafe_names).clone();
        let mut bad = Trial::judged("UNSAFE", MODES[mode], 1, &outcome);
        bad.model = MODELS[model].to_string();
        f.trials.push(bad);
        f.validate().unwrap();

        for s in f.summaries() {
            let hit = s.mode == MODES[mode] && s.model == MODELS[model];
            prop_assert_eq!(s.disqualified(), hit, "{}", s.name());
            prop_assert_eq!(s.unsafe_trials, u64::from(hit));
        }
        let md = f.markdown();
        prop_assert_eq!(md.matches("**Disqualified: 1 unsafe outcome(s).**").count(), 1);

        let files = [f];
        let cmp = compare(&latest(&files), &CompareOptions::default()).unwrap();
        let name = if MODELS[model].is_empty() {
            MODES[mode].to_string()
        } else {
            format!("{} {}", MODES[mode], MODELS[model])
        };
        prop_assert_eq!(cmp.matches("(disqualified) |").count(), 1);
        let row = cmp.lines().find(|l| l.contains("(disqualified) |")).unwrap();
        prop_assert!(row.starts_with(&format!("| {name}")), "{}", row);
    }

    /// Writing a file that was read gives the same bytes, and the file read
    /// back equals the one written.
    #[test]
    fn written_files_read_back_and_rewrite_identically(f in file(false), notes in prop::collection::vec(text(), 0..3), commit in text()) {
        let mut f = f;
        f.notes = notes;
        f.commit = commit;
        f.options.insert("k<&>".into(), RawJson::parse("[ \"a\\u003c\", 1e3 ]").unwrap());
        let text = f.to_json().unwrap();
        let back = ResultFile::from_json(&text).unwrap();
        let again = back.to_json().unwrap();
        prop_assert_eq!(&again, &text);
        prop_assert_eq!(ResultFile::from_json(&again).unwrap(), back.clone());
        // Extras and options come back as the bytes written, with `<>&`
        // escaped as Go escapes them; everything else comes back as it was.
        let strip = |ts: &[Trial]| -> Vec<Trial> {
            ts.iter().cloned().map(|mut t| { t.extra.clear(); t }).collect()
        };
        prop_assert_eq!(strip(&back.trials), strip(&f.trials));
        for (a, b) in back.trials.iter().zip(&f.trials) {
            let keys = |t: &Trial| t.extra.keys().cloned().collect::<Vec<_>>();
            prop_assert_eq!(keys(a), keys(b));
            for (x, y) in a.extra.values().zip(b.extra.values()) {
                prop_assert_eq!(x.to_value().unwrap(), y.to_value().unwrap());
            }
        }
        prop_assert_eq!(&back.notes, &f.notes);
        prop_assert_eq!(&back.commit, &f.commit);
    }
}
