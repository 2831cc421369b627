//! The result file `agent-runtime/bench/v1`: its types, its invariants, and
//! writing it byte for byte as the original writes it.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::error::{FileError, Problem};
use crate::gojson::{self, Node, Obj};
use crate::raw::RawJson;
use crate::summary::{Count, Summary, summarize};
use crate::taxonomy::{Outcome, Taxonomy};
use crate::time::Timestamp;
use crate::trial::Trial;
use crate::version::FORMAT;

/// One result file: what one invocation of a consumer's harness ran,
/// where, and how it scored.
///
/// The `format` and `summaries` of the written file are not fields: writing
/// puts [`FORMAT`] and the summaries computed from the trials, and reading
/// checks both.
///
/// ```
/// use agentrt_bench::{ResultFile, Taxonomy, Timestamp, Trial};
/// let mut f = ResultFile::new(Timestamp::parse("2026-09-25T20:00:00Z")?, Taxonomy::casework());
/// f.commit = "a4fccc3".into();
/// f.trials.push(Trial::judged("s1", "baseline", 1, "correct_resolution"));
/// let text = f.to_json()?;
/// assert!(text.starts_with("{\n  \"format\": \"agent-runtime/bench/v1\",\n  \"commit\": \"a4fccc3\",\n"));
/// let back = ResultFile::from_json(&text)?;
/// assert_eq!(back, f);
/// assert_eq!(back.to_json()?, text);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResultFile {
    /// The consumer's commit the trials ran at; empty means unknown.
    pub commit: String,
    /// When the run started (required; not Go's zero time).
    pub started_at: Timestamp,
    /// The harness settings, as JSON values.
    pub options: BTreeMap<String, RawJson>,
    /// The outcome set the trials were scored by.
    pub taxonomy: Taxonomy,
    /// The trials, in file order.
    pub trials: Vec<Trial>,
    /// Run-level remarks.
    pub notes: Vec<String>,
    /// The name the file was read from (set by [`ResultFile::read_path`]
    /// and [`read_dir`](crate::read_dir)); never written.
    pub source: String,
}

impl ResultFile {
    /// An empty file: no commit, options, trials or notes.
    pub fn new(started_at: Timestamp, taxonomy: Taxonomy) -> ResultFile {
        ResultFile {
            commit: String::new(),
            started_at,
            options: BTreeMap::new(),
            taxonomy,
            trials: Vec::new(),
            notes: Vec::new(),
            source: String::new(),
        }
    }

    /// Checks the invariants: a valid taxonomy; a start time; every trial
    /// with a scenario, a mode and a repeat from 1, no two trials with the
    /// same scenario, mode, model and repeat; exactly one of outcome and
    /// exclusion, the outcome in the taxonomy; no negative counter, cost or
    /// wall time.
    pub fn validate(&self) -> Result<(), FileError> {
        if let Err(e) = self.taxonomy.validate() {
            return Err(FileError::field(
                format!("taxonomy.{}", e.field()),
                Problem::Taxonomy(e),
            ));
        }
        if self.started_at.is_zero() {
            return Err(FileError::field("started_at", Problem::Required));
        }
        let mut seen: HashMap<(&str, &str, &str, i64), usize> = HashMap::new();
        for (i, t) in self.trials.iter().enumerate() {
            let at = |field: &str| format!("trials[{i}].{field}");
            if t.scenario.is_empty() {
                return Err(FileError::field(at("scenario"), Problem::Required));
            }
            if t.mode.is_empty() {
                return Err(FileError::field(at("mode"), Problem::Required));
            }
            if t.repeat < 1 {
                return Err(FileError::field(
                    at("repeat"),
                    Problem::RepeatBelowOne { repeat: t.repeat },
                ));
            }
            let key = (
                t.scenario.as_str(),
                t.mode.as_str(),
                t.model.as_str(),
                t.repeat,
            );
            if let Some(&first) = seen.get(&key) {
                return Err(FileError::field(
                    format!("trials[{i}]"),
                    Problem::RecordedTwice { first },
                ));
            }
            seen.insert(key, i);
            match (t.outcome.is_empty(), t.excluded.is_empty()) {
                (false, false) => {
                    return Err(FileError::field(
                        at("outcome"),
                        Problem::OutcomeAndExclusion,
                    ));
                }
                (true, true) => {
                    return Err(FileError::field(
                        at("outcome"),
                        Problem::NoOutcomeOrExclusion,
                    ));
                }
                (false, true) if self.taxonomy.lookup(&t.outcome).is_none() => {
                    return Err(FileError::field(
                        at("outcome"),
                        Problem::NotInTaxonomy {
                            outcome: t.outcome.clone(),
                            taxonomy: self.taxonomy.name.clone(),
                        },
                    ));
                }
                _ => {}
            }
            let counters = [
                ("steps", t.steps),
                ("tool_calls", t.tool_calls),
                ("policy_denials", t.policy_denials),
                ("model_calls", t.model_calls),
                ("input_tokens", t.input_tokens),
                ("output_tokens", t.output_tokens),
                ("cost_micros", t.cost_micros),
                ("wall_ns", t.wall_ns),
            ];
            if let Some((field, value)) = counters.into_iter().find(|(_, v)| *v < 0) {
                return Err(FileError::field(at(field), Problem::Negative { value }));
            }
        }
        Ok(())
    }

    /// One summary per mode and model, in order of first appearance.
    pub fn summaries(&self) -> Vec<Summary> {
        summarize(&self.taxonomy, &self.trials)
    }

    /// The file as written: validated, with [`FORMAT`] and the summaries
    /// computed from the trials, in Go's `MarshalIndent` form plus `\n`.
    pub fn to_json(&self) -> Result<String, FileError> {
        self.validate()?;
        Ok(gojson::to_indented(&file_node(self)))
    }

    /// Writes the file (see [`ResultFile::to_json`]) to `path`.
    pub fn write_path(&self, path: impl AsRef<Path>) -> Result<(), FileError> {
        let text = self.to_json()?;
        let path = path.as_ref();
        std::fs::write(path, text).map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })
    }
}

fn outcome_node(o: &Outcome) -> Node {
    Obj::new()
        .str("name", &o.name)
        .str("class", o.class.as_str())
        .str_omit("over", &o.over)
        .str_omit("label", &o.label)
        .build()
}

fn trial_node(t: &Trial) -> Node {
    Obj::new()
        .str("scenario", &t.scenario)
        .str("mode", &t.mode)
        .str_omit("model", &t.model)
        .int("repeat", t.repeat)
        .str_omit("run_id", &t.run_id)
        .str_omit("expect", &t.expect)
        .str_omit("reached", &t.reached)
        .str_omit("outcome", &t.outcome)
        .str_omit("excluded", &t.excluded)
        .int("steps", t.steps)
        .int("tool_calls", t.tool_calls)
        .int("policy_denials", t.policy_denials)
        .int("model_calls", t.model_calls)
        .int("input_tokens", t.input_tokens)
        .int("output_tokens", t.output_tokens)
        .int("cost_micros", t.cost_micros)
        .int("wall_ns", t.wall_ns)
        .str_omit("error", &t.error)
        .strs_omit("notes", &t.notes)
        .map_omit("extra", &t.extra, |v| Node::Raw(v.as_str().to_string()))
        .build()
}

fn count_node(c: &Count) -> Node {
    Obj::new()
        .str("outcome", &c.outcome)
        .str("class", c.class.as_str())
        .uint("n", c.n)
        .uint("of", c.of)
        .str_omit("over", &c.over)
        .build()
}

/// A summary as the file writes it.
pub(crate) fn summary_node(s: &Summary) -> Node {
    Obj::new()
        .str("mode", &s.mode)
        .str_omit("model", &s.model)
        .uint("trials", s.trials)
        .uint("judged", s.judged)
        .uint("excluded", s.excluded)
        .uint("scenarios", s.scenarios)
        .int("repeats", s.repeats)
        .field(
            "counts",
            Node::Arr(s.counts.iter().map(count_node).collect()),
        )
        .uint("unsafe", s.unsafe_trials)
        .int("steps", s.steps)
        .int("tool_calls", s.tool_calls)
        .int("policy_denials", s.policy_denials)
        .int("model_calls", s.model_calls)
        .int("input_tokens", s.input_tokens)
        .int("output_tokens", s.output_tokens)
        .int("cost_micros", s.cost_micros)
        .int("wall_ns", s.wall_ns)
        .map_omit("totals", &s.totals, |v| Node::Int(*v))
        .build()
}

fn file_node(f: &ResultFile) -> Node {
    let taxonomy = Obj::new()
        .str("name", &f.taxonomy.name)
        .field(
            "outcomes",
            Node::Arr(f.taxonomy.outcomes.iter().map(outcome_node).collect()),
        )
        .build();
    Obj::new()
        .str("format", FORMAT)
        .str_omit("commit", &f.commit)
        .str("started_at", &f.started_at.to_rfc3339())
        .map_omit("options", &f.options, |v| Node::Raw(v.as_str().to_string()))
        .field("taxonomy", taxonomy)
        .field(
            "trials",
            Node::Arr(f.trials.iter().map(trial_node).collect()),
        )
        .strs_omit("notes", &f.notes)
        .field(
            "summaries",
            Node::Arr(f.summaries().iter().map(summary_node).collect()),
        )
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> Timestamp {
        Timestamp::parse("2026-09-25T20:00:00Z").unwrap()
    }

    fn ok_trial() -> Trial {
        let mut t = Trial::judged("S1", "baseline", 1, "completed");
        t.expect = "proposal".into();
        t
    }

    fn file(trials: Vec<Trial>) -> ResultFile {
        let mut f = ResultFile::new(start(), Taxonomy::repo_steward());
        f.trials = trials;
        f
    }

    #[test]
    fn encode_refuses_a_file_that_breaks_an_invariant() {
        type Mutation = fn(&mut ResultFile);
        let cases: [(&str, Mutation, &str); 9] = [
            (
                "both",
                |f| f.trials[0].excluded = "not recorded".into(),
                "trials[0].outcome",
            ),
            (
                "neither",
                |f| f.trials[0].outcome.clear(),
                "trials[0].outcome",
            ),
            (
                "unknown",
                |f| f.trials[0].outcome = "partial".into(),
                "trials[0].outcome",
            ),
            ("twice", |f| f.trials.push(ok_trial()), "trials[1]"),
            ("repeat 0", |f| f.trials[0].repeat = 0, "trials[0].repeat"),
            ("no mode", |f| f.trials[0].mode.clear(), "trials[0].mode"),
            (
                "negative",
                |f| f.trials[0].model_calls = -1,
                "trials[0].model_calls",
            ),
            (
                "no start",
                |f| f.started_at = Timestamp::parse("0001-01-01T00:00:00Z").unwrap(),
                "started_at",
            ),
            (
                "bad set",
                |f| f.taxonomy = Taxonomy::new("x", vec![]),
                "taxonomy.outcomes",
            ),
        ];
        for (name, mutate, field) in cases {
            let mut f = file(vec![ok_trial()]);
            mutate(&mut f);
            let err = f.to_json().expect_err(name);
            assert_eq!(err.field_path(), Some(field), "{name}: {err}");
            assert!(
                err.to_string().starts_with("invalid result file: "),
                "{err}"
            );
        }
        let f = file(vec![
            ok_trial(),
            Trial::excluded("S1", "baseline", 2, "not recorded"),
        ]);
        assert!(f.validate().is_ok());
    }

    #[test]
    fn same_key_with_another_model_is_not_a_duplicate() {
        let mut other = ok_trial();
        other.model = "m".into();
        assert!(file(vec![ok_trial(), other]).validate().is_ok());
    }

    #[test]
    fn no_trials_writes_empty_arrays() {
        let text = file(vec![]).to_json().unwrap();
        assert!(
            text.contains("\n  \"trials\": [],\n  \"summaries\": []\n}\n"),
            "{text}"
        );
    }

    #[test]
    fn strings_and_extras_are_written_go_style() {
        let mut t = ok_trial();
        t.reached = "a<b>&c\u{2028}".into();
        t.extra.insert(
            "k".into(),
            RawJson::parse("{ \"x\": \"<tag>\", \"y\": [ 1.50 ] }").unwrap(),
        );
        let mut f = file(vec![t]);
        f.notes = vec!["note & more".into()];
        let text = f.to_json().unwrap();
        assert!(
            text.contains(r#""reached": "a\u003cb\u003e\u0026c\u2028","#),
            "{text}"
        );
        assert!(
            text.contains("\"extra\": {\n        \"k\": {\n          \"x\": \"\\u003ctag\\u003e\",\n          \"y\": [\n            1.50\n          ]\n        }\n      }"),
            "{text}"
        );
        assert!(
            text.contains("\"notes\": [\n    \"note \\u0026 more\"\n  ],"),
            "{text}"
        );
        let back = ResultFile::from_json(&text).unwrap();
        assert_eq!(back.trials[0].reached, "a<b>&c\u{2028}");
        assert_eq!(back.to_json().unwrap(), text);
    }
}
