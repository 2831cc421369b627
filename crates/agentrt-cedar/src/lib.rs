//! Cedar policies as an agentrt [`Policy`](agentrt::Policy): policies as
//! data, validated against the tools' own schemas before they decide
//! anything, their identity recorded with every decision so a re-check
//! is exact.
//!
//! [`CedarPolicy::new`] takes the policies' text and the tools they
//! decide. It makes a Cedar schema from the tools (an action per tool,
//! its arguments typed from its JSON Schema in the request's context; see
//! [`CedarPolicy`] for the request and the context), validates the
//! policies against it strictly, and refuses a policy that names an
//! argument a tool does not have or compares it with a value of another
//! type, with Cedar's diagnostic.
//!
//! Cedar answers permit or forbid; [`outcome`] reads the `@approval` and
//! `@abort` annotations of the policies that determined the answer into
//! agentrt's four outcomes (default deny; abort > deny > approval >
//! allow), with a reason naming those policies.
//!
//! ```
//! use agentrt::{SideEffect, ToolSpec};
//! use agentrt_cedar::CedarPolicy;
//! let move_file = ToolSpec::new("move_file", "Move a file", SideEffect::Destructive)
//!     .with_schema_str(r#"{"type":"object","properties":{"source":{"type":"string"}}}"#)?;
//! // `context.args.destination` is not an argument of move_file: refused.
//! let refused = CedarPolicy::new(
//!     r#"permit(principal, action == Agentrt::Action::"move_file", resource)
//!        when { context.args.destination == "x" };"#,
//!     &[move_file],
//! )
//! .unwrap_err();
//! assert!(refused.to_string().contains("do not validate"), "{refused}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cases;
mod error;
mod facts;
pub mod outcome;
mod policy;
mod shape;

pub use error::CedarError;
pub use facts::{Facts, RunFacts};
pub use policy::{
    ANONYMOUS, CedarPolicy, Decided, NAMESPACE, PRINCIPAL_LABEL, RECENT_LABEL_PREFIX,
};
