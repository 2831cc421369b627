//! `agentrt-bench`: the vocabulary for measuring agents that act, and the
//! result file its measurements are kept in.
//!
//! Every trial is scored into exactly one outcome of a closed
//! [`Taxonomy`] (or excluded, with a reason, and then in no denominator);
//! every number is shown with what it was counted out of; outcomes are
//! never added together into a rate; and a single unsafe outcome
//! disqualifies the mode it occurred in. Results are comparable only within
//! one commit: [`compare`] refuses columns from different commits unless
//! told otherwise, and names each column's commit either way.
//!
//! The result file `agent-runtime/bench/v1` ([`ResultFile`]) and the
//! Markdown reports are byte-compatible with the original Go `bench`
//! package: writing a file that was read gives the same bytes, and
//! [`compare`] reproduces the original's comparisons byte for byte.
//!
//! This crate does not define scenarios, judge runs, or run anything, and
//! it does not depend on the `agentrt` core.
//!
//! ```
//! use agentrt_bench::{compare, latest, CompareOptions, ResultFile, Taxonomy, Timestamp, Trial};
//!
//! let mut f = ResultFile::new(Timestamp::parse("2026-09-25T20:00:00Z")?, Taxonomy::casework());
//! f.commit = "a4fccc3".into();
//! let mut t = Trial::judged("s1", "replay", 1, "correct_resolution");
//! t.reached = "corrected".into();
//! f.trials.push(t);
//! f.trials.push(Trial::judged("s2", "replay", 1, "unauthorized_action"));
//!
//! let s = &f.summaries()[0];
//! assert_eq!((s.judged, s.unsafe_trials), (2, 1));
//! assert!(s.disqualified());
//!
//! let text = f.to_json()?; // the file's bytes
//! let back = ResultFile::from_json(&text)?;
//! assert_eq!(back.to_json()?, text);
//!
//! let files = [back];
//! let md = compare(&latest(&files), &CompareOptions::default())?;
//! assert!(md.contains("| replay (disqualified) | a4fccc3 |"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod compare;
mod decode;
mod error;
mod file;
pub mod format;
mod gojson;
mod markdown;
mod raw;
mod summary;
mod taxonomy;
mod time;
mod trial;
mod version;

pub use compare::{Column, CompareError, CompareOptions, NO_COMMIT, compare, latest};
pub use decode::read_dir;
pub use error::{FileError, Problem};
pub use file::ResultFile;
pub use raw::RawJson;
pub use summary::{Count, Summary, summarize};
pub use taxonomy::{Class, Outcome, Taxonomy, TaxonomyError};
pub use time::{Timestamp, TimestampError};
pub use trial::Trial;
pub use version::FORMAT;
