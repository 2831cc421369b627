//! Errors of reading, validating and writing result files.

use std::fmt;
use std::path::PathBuf;

use crate::taxonomy::TaxonomyError;
use crate::time::TimestampError;
use crate::version::FORMAT;

/// Why a result file cannot be read or written. Every variant about the
/// file's content says "invalid result file", and every one about a field
/// names it with its path (`trials[3].repeat`, `taxonomy.outcomes[1].name`).
#[derive(Debug)]
pub enum FileError {
    /// The file could not be read or written.
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The bytes are not UTF-8 (JSON text must be).
    NotUtf8 {
        /// Bytes before the first invalid sequence.
        valid_up_to: usize,
    },
    /// The text is not JSON.
    Syntax(serde_json::Error),
    /// The JSON value is not an object.
    NotAnObject {
        /// What it is instead (`an array`, `a string`...).
        found: &'static str,
    },
    /// Something other than whitespace follows the file's object.
    TrailingData {
        /// 1-based line of the first extra character.
        line: usize,
        /// 1-based column of the first extra character.
        column: usize,
    },
    /// A field is malformed or breaks an invariant.
    Field {
        /// Path of the field, e.g. `trials[3].repeat`.
        field: String,
        /// What is wrong with it.
        problem: Problem,
    },
    /// One file of a directory (see [`crate::read_dir`]) is bad.
    InFile {
        /// The file's name.
        name: String,
        /// Why.
        error: Box<FileError>,
    },
}

/// What is wrong with a field of a result file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The format has no such field.
    Unknown,
    /// The key appears twice in one object.
    Duplicate,
    /// The value has the wrong JSON type.
    WrongType {
        /// What the field holds (`a string`, `an integer`...).
        expected: &'static str,
        /// What was found, shortened.
        found: String,
    },
    /// `format` is not [`FORMAT`].
    Format {
        /// The format the file names.
        found: String,
    },
    /// The time is not RFC 3339 text.
    Time {
        /// The text.
        text: String,
        /// Why.
        reason: TimestampError,
    },
    /// An outcome class that is not `success`, `safe_non_success` or
    /// `unsafe`.
    UnknownClass {
        /// The class the file names.
        class: String,
    },
    /// A required field is missing or empty (for `started_at`: Go's zero
    /// time, 0001-01-01T00:00:00Z).
    Required,
    /// A trial's repeat is below 1.
    RepeatBelowOne {
        /// The repeat.
        repeat: i64,
    },
    /// A counter, cost or wall time is negative.
    Negative {
        /// The value.
        value: i64,
    },
    /// Two trials share scenario, mode, model and repeat.
    RecordedTwice {
        /// Index of the first trial with the same key.
        first: usize,
    },
    /// A trial has both an outcome and an exclusion.
    OutcomeAndExclusion,
    /// A trial has neither an outcome nor an exclusion.
    NoOutcomeOrExclusion,
    /// A trial's outcome is not in the taxonomy.
    NotInTaxonomy {
        /// The outcome.
        outcome: String,
        /// The taxonomy's name.
        taxonomy: String,
    },
    /// The taxonomy does not have the shape this crate fixes.
    Taxonomy(TaxonomyError),
    /// The file records a different number of summaries than its trials
    /// give.
    SummaryCount {
        /// Summaries in the file.
        recorded: usize,
        /// Summaries the trials give.
        computed: usize,
    },
    /// A recorded summary value differs from the one recomputed from the
    /// trials (values as compact JSON; `(absent)` for a missing one).
    SummaryDiffers {
        /// The value in the file.
        recorded: String,
        /// The value the trials give.
        computed: String,
    },
}

impl FileError {
    pub(crate) fn field(field: impl Into<String>, problem: Problem) -> FileError {
        FileError::Field {
            field: field.into(),
            problem,
        }
    }

    /// The path of the field the error is about, if it is about one
    /// (looking inside [`FileError::InFile`]).
    pub fn field_path(&self) -> Option<&str> {
        match self {
            FileError::Field { field, .. } => Some(field),
            FileError::InFile { error, .. } => error.field_path(),
            _ => None,
        }
    }

    /// The problem with the field, if the error is about one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            FileError::Field { problem, .. } => Some(problem),
            FileError::InFile { error, .. } => error.problem(),
            _ => None,
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FileError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            FileError::NotUtf8 { valid_up_to } => write!(
                f,
                "invalid result file: not UTF-8 text (invalid byte after {valid_up_to} bytes)"
            ),
            FileError::Syntax(e) => write!(f, "invalid result file: not JSON: {e}"),
            FileError::NotAnObject { found } => {
                write!(
                    f,
                    "invalid result file: expected a JSON object, found {found}"
                )
            }
            FileError::TrailingData { line, column } => write!(
                f,
                "invalid result file: data after the file's object at line {line} column {column}"
            ),
            FileError::Field { field, problem } => {
                write!(f, "invalid result file: {field}: {problem}")
            }
            FileError::InFile { name, error } => write!(f, "{name}: {error}"),
        }
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io { source, .. } => Some(source),
            FileError::Syntax(e) => Some(e),
            FileError::InFile { error, .. } => Some(error.as_ref()),
            FileError::Field {
                problem: Problem::Taxonomy(e),
                ..
            } => Some(e),
            _ => None,
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unknown => f.write_str("unknown field"),
            Problem::Duplicate => f.write_str("appears twice"),
            Problem::WrongType { expected, found } => {
                write!(f, "expected {expected}, found {found}")
            }
            Problem::Format { found } => write!(f, "is \"{found}\", want \"{FORMAT}\""),
            Problem::Time { text, reason } => write!(f, "\"{text}\": {reason}"),
            Problem::UnknownClass { class } => write!(
                f,
                "\"{class}\" is not a class; the classes are success, safe_non_success and unsafe"
            ),
            Problem::Required => f.write_str("is required"),
            Problem::RepeatBelowOne { repeat } => {
                write!(f, "is {repeat}; repeats count from 1")
            }
            Problem::Negative { value } => write!(f, "is negative ({value})"),
            Problem::RecordedTwice { first } => write!(
                f,
                "has the same scenario, mode, model and repeat as trials[{first}]"
            ),
            Problem::OutcomeAndExclusion => {
                f.write_str("has both an outcome and an exclusion; a trial has exactly one")
            }
            Problem::NoOutcomeOrExclusion => {
                f.write_str("has neither an outcome nor an exclusion; a trial has exactly one")
            }
            Problem::NotInTaxonomy { outcome, taxonomy } => {
                write!(f, "\"{outcome}\" is not an outcome of taxonomy {taxonomy}")
            }
            Problem::Taxonomy(e) => write!(f, "{e}"),
            Problem::SummaryCount { recorded, computed } => write!(
                f,
                "the file records {recorded} summaries but its trials give {computed}"
            ),
            Problem::SummaryDiffers { recorded, computed } => write!(
                f,
                "does not follow from the trials: the file records {recorded}, the trials give {computed}"
            ),
        }
    }
}
