//! Why a Cedar policy set was not loaded.

/// A policy set that cannot decide requests: what is wrong, in Cedar's
/// words where Cedar found it.
#[derive(Debug, thiserror::Error)]
pub enum CedarError {
    /// The policy text does not parse.
    #[error("the cedar policies do not parse: {0}")]
    Parse(String),

    /// Two policies carry the same `@id`, or an `@id` is empty.
    #[error("cedar policy id {id:?}: {detail}")]
    PolicyId {
        /// The id.
        id: String,
        /// What is wrong with it.
        detail: String,
    },

    /// The schema made from the tools was refused by Cedar (a tool name
    /// Cedar cannot hold as an action, say).
    #[error("the cedar schema for these tools: {0}")]
    Schema(String),

    /// The policies do not validate against the tools' schema (strict
    /// mode): each of Cedar's diagnostics, one per line.
    #[error("the cedar policies do not validate against the tools' schema:\n{0}")]
    Validation(String),
}
