//! Reading a result file.
//!
//! The text must be one JSON object and nothing after it but whitespace.
//! Every field is checked for its type and named by its path when it is
//! wrong; unknown fields and keys that appear twice in one object are
//! refused. As in the original, a field that is absent or `null` takes its
//! zero value (empty text, 0, no entries), which the invariants then judge.
//! The `format` must be [`FORMAT`], the invariants of
//! [`ResultFile::validate`] must hold, and the recorded summaries must equal
//! the ones recomputed from the trials.

use std::collections::BTreeMap;
use std::path::Path;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::error::{FileError, Problem};
use crate::file::{ResultFile, summary_node};
use crate::gojson;
use crate::raw::RawJson;
use crate::summary::{Count, Summary};
use crate::taxonomy::{Class, Outcome, Taxonomy};
use crate::time::Timestamp;
use crate::trial::Trial;
use crate::version::FORMAT;

impl ResultFile {
    /// Reads a file from its JSON text. `source` is left empty.
    ///
    /// The text must be one JSON object and nothing after it but
    /// whitespace. Every field is checked for its type; unknown fields and
    /// keys that appear twice in one object are refused. As in the
    /// original, a field that is absent or `null` takes its zero value
    /// (empty text, 0, no entries), which the invariants then judge. The
    /// `format` must be [`FORMAT`], [`ResultFile::validate`] must pass, and
    /// the recorded `summaries` must equal the ones recomputed from the
    /// trials. Every error names the field (`trials[3].repeat`).
    pub fn from_json(text: &str) -> Result<ResultFile, FileError> {
        decode(text)
    }

    /// Reads a file from bytes, which must be UTF-8.
    pub fn from_slice(bytes: &[u8]) -> Result<ResultFile, FileError> {
        let text = std::str::from_utf8(bytes).map_err(|e| FileError::NotUtf8 {
            valid_up_to: e.valid_up_to(),
        })?;
        ResultFile::from_json(text)
    }

    /// Reads and decodes the file at `path`, with `source` set to its file
    /// name (without directories).
    pub fn read_path(path: impl AsRef<Path>) -> Result<ResultFile, FileError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| FileError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let mut f = ResultFile::from_slice(&bytes)?;
        f.source = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        Ok(f)
    }
}

/// Reads every `*.json` file (not directories) in `dir`, in name order, each
/// with `source` set to its file name. One bad file fails the whole read
/// with [`FileError::InFile`] naming it.
pub fn read_dir(dir: impl AsRef<Path>) -> Result<Vec<ResultFile>, FileError> {
    let dir = dir.as_ref();
    let io = |source| FileError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".json") || entry.path().is_dir() {
            continue;
        }
        names.push(name);
    }
    names.sort();
    names
        .into_iter()
        .map(|name| {
            ResultFile::read_path(dir.join(&name)).map_err(|e| FileError::InFile {
                name,
                error: Box::new(e),
            })
        })
        .collect()
}

/// An object's entries in document order, values unparsed.
struct Entries<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Entries<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// The text of a value, without surrounding whitespace.
fn text(v: &RawValue) -> &str {
    v.get().trim()
}

/// What a value is, for error messages.
fn describe(v: &RawValue) -> String {
    let t = text(v);
    match t.as_bytes().first() {
        Some(b'{') => "an object".to_string(),
        Some(b'[') => "an array".to_string(),
        Some(b'"') => {
            let short: String = t.chars().take(40).collect();
            if short.len() < t.len() {
                format!("a string ({short}…)")
            } else {
                format!("a string ({short})")
            }
        }
        _ => {
            let short: String = t.chars().take(40).collect();
            short
        }
    }
}

fn is_null(v: &RawValue) -> bool {
    text(v) == "null"
}

fn wrong(field: &str, expected: &'static str, v: &RawValue) -> FileError {
    FileError::field(
        field,
        Problem::WrongType {
            expected,
            found: describe(v),
        },
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// The entries of an object (none for `null`), refusing a key that appears
/// twice.
fn object<'a>(v: &'a RawValue, field: &str) -> Result<Vec<(String, &'a RawValue)>, FileError> {
    if is_null(v) {
        return Ok(Vec::new());
    }
    if !text(v).starts_with('{') {
        return Err(wrong(field, "an object", v));
    }
    let Entries(entries) =
        serde_json::from_str(v.get()).map_err(|_| wrong(field, "an object", v))?;
    for (i, (k, _)) in entries.iter().enumerate() {
        if entries[..i].iter().any(|(p, _)| p == k) {
            return Err(FileError::field(join(field, k), Problem::Duplicate));
        }
    }
    Ok(entries)
}

/// Calls `f` for each field of an object with its key and path; `f` returns
/// `false` for a key the format does not have.
fn fields<'a>(
    v: &'a RawValue,
    path: &str,
    mut f: impl FnMut(&str, &'a RawValue, &str) -> Result<bool, FileError>,
) -> Result<(), FileError> {
    for (key, value) in object(v, path)? {
        let field = join(path, &key);
        if !f(&key, value, &field)? {
            return Err(FileError::field(field, Problem::Unknown));
        }
    }
    Ok(())
}

fn array<'a>(v: &'a RawValue, field: &str) -> Result<Vec<&'a RawValue>, FileError> {
    if is_null(v) {
        return Ok(Vec::new());
    }
    if !text(v).starts_with('[') {
        return Err(wrong(field, "an array", v));
    }
    serde_json::from_str(v.get()).map_err(|_| wrong(field, "an array", v))
}

fn string(v: &RawValue, field: &str) -> Result<String, FileError> {
    if is_null(v) {
        return Ok(String::new());
    }
    if !text(v).starts_with('"') {
        return Err(wrong(field, "a string", v));
    }
    serde_json::from_str(v.get()).map_err(|_| wrong(field, "a string", v))
}

fn strings(v: &RawValue, field: &str) -> Result<Vec<String>, FileError> {
    array(v, field)?
        .into_iter()
        .enumerate()
        .map(|(i, item)| string(item, &format!("{field}[{i}]")))
        .collect()
}

fn int(v: &RawValue, field: &str) -> Result<i64, FileError> {
    if is_null(v) {
        return Ok(0);
    }
    serde_json::from_str(v.get()).map_err(|_| wrong(field, "an integer", v))
}

fn uint(v: &RawValue, field: &str) -> Result<u64, FileError> {
    if is_null(v) {
        return Ok(0);
    }
    serde_json::from_str(v.get()).map_err(|_| wrong(field, "a non-negative integer", v))
}

fn class(v: &RawValue, field: &str) -> Result<Class, FileError> {
    let name = string(v, field)?;
    if name.is_empty() {
        return Err(FileError::field(field, Problem::Required));
    }
    Class::from_name(&name)
        .ok_or_else(|| FileError::field(field, Problem::UnknownClass { class: name }))
}

fn raw_map(v: &RawValue, field: &str) -> Result<BTreeMap<String, RawJson>, FileError> {
    let mut out = BTreeMap::new();
    for (key, value) in object(v, field)? {
        let raw = RawJson::parse(value.get()).map_err(|_| wrong(field, "JSON", value))?;
        out.insert(key, raw);
    }
    Ok(out)
}

fn int_map(v: &RawValue, field: &str) -> Result<BTreeMap<String, i64>, FileError> {
    let mut out = BTreeMap::new();
    for (key, value) in object(v, field)? {
        let n = int(value, &join(field, &key))?;
        out.insert(key, n);
    }
    Ok(out)
}

fn timestamp(v: &RawValue, field: &str) -> Result<Option<Timestamp>, FileError> {
    if is_null(v) {
        return Ok(None);
    }
    let t = string(v, field)?;
    Timestamp::parse(&t)
        .map(Some)
        .map_err(|reason| FileError::field(field, Problem::Time { text: t, reason }))
}

fn outcome(v: &RawValue, path: &str) -> Result<Outcome, FileError> {
    let mut o = Outcome::new("", Class::Success);
    let mut class_seen = false;
    fields(v, path, |key, value, field| {
        match key {
            "name" => o.name = string(value, field)?,
            "class" => {
                o.class = class(value, field)?;
                class_seen = true;
            }
            "over" => o.over = string(value, field)?,
            "label" => o.label = string(value, field)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if !class_seen {
        return Err(FileError::field(join(path, "class"), Problem::Required));
    }
    Ok(o)
}

fn taxonomy(v: &RawValue, path: &str) -> Result<Taxonomy, FileError> {
    let mut t = Taxonomy::new("", Vec::new());
    fields(v, path, |key, value, field| {
        match key {
            "name" => t.name = string(value, field)?,
            "outcomes" => {
                t.outcomes = array(value, field)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, o)| outcome(o, &format!("{field}[{i}]")))
                    .collect::<Result<_, _>>()?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(t)
}

fn trial(v: &RawValue, path: &str) -> Result<Trial, FileError> {
    let mut t = Trial::default();
    fields(v, path, |key, value, field| {
        match key {
            "scenario" => t.scenario = string(value, field)?,
            "mode" => t.mode = string(value, field)?,
            "model" => t.model = string(value, field)?,
            "repeat" => t.repeat = int(value, field)?,
            "run_id" => t.run_id = string(value, field)?,
            "expect" => t.expect = string(value, field)?,
            "reached" => t.reached = string(value, field)?,
            "outcome" => t.outcome = string(value, field)?,
            "excluded" => t.excluded = string(value, field)?,
            "steps" => t.steps = int(value, field)?,
            "tool_calls" => t.tool_calls = int(value, field)?,
            "policy_denials" => t.policy_denials = int(value, field)?,
            "model_calls" => t.model_calls = int(value, field)?,
            "input_tokens" => t.input_tokens = int(value, field)?,
            "output_tokens" => t.output_tokens = int(value, field)?,
            "cost_micros" => t.cost_micros = int(value, field)?,
            "wall_ns" => t.wall_ns = int(value, field)?,
            "error" => t.error = string(value, field)?,
            "notes" => t.notes = strings(value, field)?,
            "extra" => t.extra = raw_map(value, field)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(t)
}

fn count(v: &RawValue, path: &str) -> Result<Count, FileError> {
    let mut c = Count {
        outcome: String::new(),
        class: Class::Success,
        n: 0,
        of: 0,
        over: String::new(),
    };
    let mut class_seen = false;
    fields(v, path, |key, value, field| {
        match key {
            "outcome" => c.outcome = string(value, field)?,
            "class" => {
                c.class = class(value, field)?;
                class_seen = true;
            }
            "n" => c.n = uint(value, field)?,
            "of" => c.of = uint(value, field)?,
            "over" => c.over = string(value, field)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if !class_seen {
        return Err(FileError::field(join(path, "class"), Problem::Required));
    }
    Ok(c)
}

fn summary(v: &RawValue, path: &str) -> Result<Summary, FileError> {
    let mut s = Summary {
        mode: String::new(),
        model: String::new(),
        trials: 0,
        judged: 0,
        excluded: 0,
        scenarios: 0,
        repeats: 0,
        counts: Vec::new(),
        unsafe_trials: 0,
        steps: 0,
        tool_calls: 0,
        policy_denials: 0,
        model_calls: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_micros: 0,
        wall_ns: 0,
        totals: BTreeMap::new(),
    };
    fields(v, path, |key, value, field| {
        match key {
            "mode" => s.mode = string(value, field)?,
            "model" => s.model = string(value, field)?,
            "trials" => s.trials = uint(value, field)?,
            "judged" => s.judged = uint(value, field)?,
            "excluded" => s.excluded = uint(value, field)?,
            "scenarios" => s.scenarios = uint(value, field)?,
            "repeats" => s.repeats = int(value, field)?,
            "counts" => {
                s.counts = array(value, field)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, c)| count(c, &format!("{field}[{i}]")))
                    .collect::<Result<_, _>>()?;
            }
            "unsafe" => s.unsafe_trials = uint(value, field)?,
            "steps" => s.steps = int(value, field)?,
            "tool_calls" => s.tool_calls = int(value, field)?,
            "policy_denials" => s.policy_denials = int(value, field)?,
            "model_calls" => s.model_calls = int(value, field)?,
            "input_tokens" => s.input_tokens = int(value, field)?,
            "output_tokens" => s.output_tokens = int(value, field)?,
            "cost_micros" => s.cost_micros = int(value, field)?,
            "wall_ns" => s.wall_ns = int(value, field)?,
            "totals" => s.totals = int_map(value, field)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(s)
}

/// The first difference between a recorded and a recomputed summary.
fn summary_difference(index: usize, recorded: &Summary, computed: &Summary) -> Option<FileError> {
    let path = format!("summaries[{index}]");
    let (mut r, mut c) = (Vec::new(), Vec::new());
    gojson::leaves(&summary_node(recorded), &path, &mut r);
    gojson::leaves(&summary_node(computed), &path, &mut c);
    let k = r
        .iter()
        .zip(&c)
        .position(|(a, b)| a != b)
        .unwrap_or(r.len().min(c.len()));
    let absent = || "(absent)".to_string();
    let value_of = |list: &[(String, String)], field: &str| {
        list.iter()
            .find(|(p, _)| p == field)
            .map_or_else(absent, |(_, v)| v.clone())
    };
    let field = match (r.get(k), c.get(k)) {
        (None, None) => return None,
        (Some((p, _)), None) | (None, Some((p, _))) => p.clone(),
        (Some((rp, _)), Some((cp, _))) => {
            if rp == cp || !c.iter().any(|(p, _)| p == rp) {
                rp.clone()
            } else {
                cp.clone()
            }
        }
    };
    Some(FileError::field(
        field.clone(),
        Problem::SummaryDiffers {
            recorded: value_of(&r, &field),
            computed: value_of(&c, &field),
        },
    ))
}

/// Decodes one result file from its text.
pub(crate) fn decode(input: &str) -> Result<ResultFile, FileError> {
    let mut de = serde_json::Deserializer::from_str(input);
    let root = <&RawValue>::deserialize(&mut de).map_err(FileError::Syntax)?;
    if let Err(e) = de.end() {
        return Err(FileError::TrailingData {
            line: e.line(),
            column: e.column(),
        });
    }
    match text(root).as_bytes().first() {
        Some(b'{') => {}
        Some(b'[') => return Err(FileError::NotAnObject { found: "an array" }),
        Some(b'"') => return Err(FileError::NotAnObject { found: "a string" }),
        Some(b'n') => return Err(FileError::NotAnObject { found: "null" }),
        Some(b't' | b'f') => return Err(FileError::NotAnObject { found: "a boolean" }),
        _ => return Err(FileError::NotAnObject { found: "a number" }),
    }

    let mut format = String::new();
    let mut commit = String::new();
    let mut started_at = None;
    let mut options = BTreeMap::new();
    let mut tax = Taxonomy::new("", Vec::new());
    let mut trials = Vec::new();
    let mut notes = Vec::new();
    let mut summaries: Option<Vec<Summary>> = None;
    fields(root, "", |key, value, field| {
        match key {
            "format" => format = string(value, field)?,
            "commit" => commit = string(value, field)?,
            "started_at" => started_at = timestamp(value, field)?,
            "options" => options = raw_map(value, field)?,
            "taxonomy" => tax = taxonomy(value, field)?,
            "trials" => {
                trials = array(value, field)?
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| trial(t, &format!("trials[{i}]")))
                    .collect::<Result<_, _>>()?;
            }
            "notes" => notes = strings(value, field)?,
            "summaries" if !is_null(value) => {
                summaries = Some(
                    array(value, field)?
                        .into_iter()
                        .enumerate()
                        .map(|(i, s)| summary(s, &format!("summaries[{i}]")))
                        .collect::<Result<_, _>>()?,
                );
            }
            "summaries" => summaries = None,
            _ => return Ok(false),
        }
        Ok(true)
    })?;

    if format != FORMAT {
        return Err(FileError::field(
            "format",
            Problem::Format { found: format },
        ));
    }
    let Some(started_at) = started_at else {
        return Err(FileError::field("started_at", Problem::Required));
    };
    let file = ResultFile {
        commit,
        started_at,
        options,
        taxonomy: tax,
        trials,
        notes,
        source: String::new(),
    };
    file.validate()?;
    let Some(recorded) = summaries else {
        return Err(FileError::field("summaries", Problem::Required));
    };
    let computed = file.summaries();
    if recorded.len() != computed.len() {
        return Err(FileError::field(
            "summaries",
            Problem::SummaryCount {
                recorded: recorded.len(),
                computed: computed.len(),
            },
        ));
    }
    for (i, (r, c)) in recorded.iter().zip(&computed).enumerate() {
        if r != c
            && let Some(e) = summary_difference(i, r, c)
        {
            return Err(e);
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{
  "format": "agent-runtime/bench/v1",
  "started_at": "2026-09-25T20:00:00Z",
  "taxonomy": {
    "name": "casework",
    "outcomes": [
      {
        "name": "ok",
        "class": "success"
      },
      {
        "name": "bad",
        "class": "unsafe"
      }
    ]
  },
  "trials": [
    {
      "scenario": "s1",
      "mode": "m",
      "repeat": 1,
      "outcome": "ok",
      "steps": 2,
      "tool_calls": 0,
      "policy_denials": 0,
      "model_calls": 0,
      "input_tokens": 0,
      "output_tokens": 0,
      "cost_micros": 0,
      "wall_ns": 0
    }
  ],
  "summaries": [
    {
      "mode": "m",
      "trials": 1,
      "judged": 1,
      "excluded": 0,
      "scenarios": 1,
      "repeats": 1,
      "counts": [
        {
          "outcome": "ok",
          "class": "success",
          "n": 1,
          "of": 1
        },
        {
          "outcome": "bad",
          "class": "unsafe",
          "n": 0,
          "of": 1
        }
      ],
      "unsafe": 0,
      "steps": 2,
      "tool_calls": 0,
      "policy_denials": 0,
      "model_calls": 0,
      "input_tokens": 0,
      "output_tokens": 0,
      "cost_micros": 0,
      "wall_ns": 0
    }
  ]
}
"#;

    fn edit(from: &str, to: &str) -> String {
        assert!(MINIMAL.contains(from), "{from}");
        MINIMAL.replacen(from, to, 1)
    }

    fn err_of(text: &str) -> FileError {
        decode(text).expect_err("accepted")
    }

    #[test]
    fn minimal_round_trips() {
        let f = decode(MINIMAL).unwrap();
        assert_eq!(f.to_json().unwrap(), MINIMAL);
    }

    #[test]
    fn every_malformed_field_is_named() {
        let cases = [
            (
                edit("\"repeat\": 1", "\"repeat\": \"1\""),
                "trials[0].repeat",
                "expected an integer, found a string (\"1\")",
            ),
            (
                edit("\"steps\": 2", "\"steps\": 2.5"),
                "trials[0].steps",
                "expected an integer, found 2.5",
            ),
            (
                edit("\"steps\": 2", "\"steps\": -2"),
                "trials[0].steps",
                "is negative (-2)",
            ),
            (
                edit("\"repeat\": 1", "\"repeat\": 0"),
                "trials[0].repeat",
                "is 0; repeats count from 1",
            ),
            (
                edit(
                    "\"mode\": \"m\",\n      \"repeat\"",
                    "\"mode\": \"\",\n      \"repeat\"",
                ),
                "trials[0].mode",
                "is required",
            ),
            (
                edit(
                    "\"outcome\": \"ok\",\n      \"steps\"",
                    "\"outcome\": \"meh\",\n      \"steps\"",
                ),
                "trials[0].outcome",
                "\"meh\" is not an outcome of taxonomy casework",
            ),
            (
                edit("\"outcome\": \"ok\",\n      \"steps\"", "\"steps\""),
                "trials[0].outcome",
                "has neither an outcome nor an exclusion; a trial has exactly one",
            ),
            (
                edit(
                    "\"outcome\": \"ok\",\n      \"steps\"",
                    "\"outcome\": \"ok\", \"excluded\": \"x\",\n      \"steps\"",
                ),
                "trials[0].outcome",
                "has both an outcome and an exclusion; a trial has exactly one",
            ),
            (
                edit(
                    "\"wall_ns\": 0\n    }\n  ],\n  \"summaries\"",
                    "\"wall_ns\": 0, \"rate\": 1\n    }\n  ],\n  \"summaries\"",
                ),
                "trials[0].rate",
                "unknown field",
            ),
            (
                edit(
                    "\"scenario\": \"s1\",",
                    "\"scenario\": \"s1\", \"scenario\": \"s2\",",
                ),
                "trials[0].scenario",
                "appears twice",
            ),
            (
                edit(
                    "\"class\": \"success\"\n      }",
                    "\"class\": \"partial\"\n      }",
                ),
                "taxonomy.outcomes[0].class",
                "\"partial\" is not a class; the classes are success, safe_non_success and unsafe",
            ),
            (
                edit(
                    "\"class\": \"unsafe\"\n      }",
                    "\"class\": \"success\"\n      }",
                ),
                "taxonomy.outcomes",
                "no outcome has class unsafe; a taxonomy needs at least one success and one unsafe outcome",
            ),
            (
                edit("\"name\": \"bad\"", "\"name\": \"ok\""),
                "taxonomy.outcomes[1].name",
                "outcome \"ok\" is declared twice",
            ),
            (
                edit("\"name\": \"casework\"", "\"name\": \"\""),
                "taxonomy.name",
                "the taxonomy has no name",
            ),
            (
                edit("agent-runtime/bench/v1", "agent-runtime/bench/v0"),
                "format",
                "is \"agent-runtime/bench/v0\", want \"agent-runtime/bench/v1\"",
            ),
            (
                edit("  \"format\": \"agent-runtime/bench/v1\",\n", ""),
                "format",
                "is \"\", want \"agent-runtime/bench/v1\"",
            ),
            (
                edit("2026-09-25T20:00:00Z", "2026-09-25 20:00"),
                "started_at",
                "\"2026-09-25 20:00\": not an RFC 3339 time like 2026-09-25T20:04:11.413822Z",
            ),
            (
                edit("2026-09-25T20:00:00Z", "0001-01-01T00:00:00Z"),
                "started_at",
                "is required",
            ),
            (
                edit("  \"started_at\": \"2026-09-25T20:00:00Z\",\n", ""),
                "started_at",
                "is required",
            ),
            (
                edit("\"trials\": [", "\"trials\": {\"a\": [").replacen(
                    "\n  ],\n  \"summaries\"",
                    "\n  ]},\n  \"summaries\"",
                    1,
                ),
                "trials",
                "expected an array, found an object",
            ),
            (
                edit("\"taxonomy\": {", "\"taxonomy\": [{").replacen(
                    "  },\n  \"trials\"",
                    "  }],\n  \"trials\"",
                    1,
                ),
                "taxonomy",
                "expected an object, found an array",
            ),
            (
                edit("\"n\": 1,", "\"n\": 2,"),
                "summaries[0].counts[0].n",
                "does not follow from the trials: the file records 2, the trials give 1",
            ),
            (
                edit("\"n\": 1,", "\"n\": -1,"),
                "summaries[0].counts[0].n",
                "expected a non-negative integer, found -1",
            ),
            (
                edit(
                    "\"mode\": \"m\",\n      \"trials\"",
                    "\"mode\": \"m\",\n      \"model\": \"x\",\n      \"trials\"",
                ),
                "summaries[0].model",
                "does not follow from the trials: the file records \"x\", the trials give (absent)",
            ),
            (
                edit(
                    "\"wall_ns\": 0\n    }\n  ]\n}",
                    "\"wall_ns\": 0,\n      \"totals\": {\"k\": 1}\n    }\n  ]\n}",
                ),
                "summaries[0].totals.k",
                "does not follow from the trials: the file records 1, the trials give (absent)",
            ),
            (
                edit("\"summaries\": [", "\"summaries\": [{\"mode\": \"m\"},"),
                "summaries",
                "the file records 2 summaries but its trials give 1",
            ),
            (
                edit("\"summaries\": [", "\"nope\": null, \"summaries\": ["),
                "nope",
                "unknown field",
            ),
            (
                edit(",\n  \"summaries\": [", ",\n  \"old\": [").replacen(
                    "\n  ]\n}",
                    "\n  ], \"summaries\": null\n}",
                    1,
                ),
                "old",
                "unknown field",
            ),
        ];
        for (text, field, problem) in cases {
            let err = err_of(&text);
            assert_eq!(err.field_path(), Some(field), "{err}");
            assert_eq!(
                err.to_string(),
                format!("invalid result file: {field}: {problem}")
            );
        }
    }

    #[test]
    fn missing_or_null_summaries_are_refused() {
        let start = MINIMAL.find(",\n  \"summaries\"").unwrap();
        let without = format!("{}\n}}\n", &MINIMAL[..start]);
        let with_null = format!("{},\n  \"summaries\": null\n}}\n", &MINIMAL[..start]);
        for text in [without, with_null] {
            assert_eq!(
                err_of(&text).to_string(),
                "invalid result file: summaries: is required"
            );
        }
    }

    #[test]
    fn refuses_non_objects_trailing_data_and_bad_json() {
        assert!(matches!(
            err_of("[]"),
            FileError::NotAnObject { found: "an array" }
        ));
        assert!(matches!(
            err_of("12"),
            FileError::NotAnObject { found: "a number" }
        ));
        assert!(matches!(err_of("{\"a\": "), FileError::Syntax(_)));
        let twice = format!("{MINIMAL}{MINIMAL}");
        let err = err_of(&twice);
        assert!(
            matches!(
                err,
                FileError::TrailingData {
                    line: 67,
                    column: 1
                }
            ),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "invalid result file: data after the file's object at line 67 column 1"
        );
        assert!(decode(&format!("{MINIMAL}\n \t\n")).is_ok());
        assert!(matches!(
            ResultFile::from_slice(b"{\"a\": \"\xff\"}"),
            Err(FileError::NotUtf8 { valid_up_to: 7 })
        ));
    }

    #[test]
    fn null_and_absent_fields_take_their_zero_value() {
        let text = edit(
            "\"steps\": 2,",
            "\"steps\": null, \"model\": null, \"extra\": null, \"notes\": null,",
        )
        .replacen("\"steps\": 2,", "\"steps\": 0,", 1);
        let f = decode(&text).unwrap();
        assert_eq!(f.trials[0].steps, 0);
        let text = edit(
            "\"tool_calls\": 0,\n      \"policy_denials\"",
            "\"policy_denials\"",
        );
        assert!(decode(&text).is_ok());
    }

    #[test]
    fn raw_values_keep_their_literals() {
        let text = edit(
            "\"wall_ns\": 0\n    }\n  ],\n  \"summaries\"",
            "\"wall_ns\": 0,\n      \"extra\": {\"b\": [1.50, {\"z\": 1, \"a\": \"\\u00e9<\"}], \"a\": 1}\n    }\n  ],\n  \"summaries\"",
        )
        .replacen("\"wall_ns\": 0\n    }\n  ]\n}", "\"wall_ns\": 0,\n      \"totals\": {\n        \"a\": 1\n      }\n    }\n  ]\n}", 1);
        let f = decode(&text).unwrap();
        let extra = &f.trials[0].extra;
        assert_eq!(extra["b"].as_str(), r#"[1.50,{"z":1,"a":"\u00e9<"}]"#);
        let out = f.to_json().unwrap();
        assert!(out.contains("\"b\": [\n          1.50,\n          {\n            \"z\": 1,\n            \"a\": \"\\u00e9\\u003c\"\n          }\n        ]"), "{out}");
    }
}
