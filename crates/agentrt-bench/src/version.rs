//! The name of the result file's format, which every file carries.

/// The format name of this version of the file. Reading refuses any other.
pub const FORMAT: &str = "agent-runtime/bench/v1";
