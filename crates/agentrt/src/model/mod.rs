//! The data model: runs, steps, decisions, tools, observations, policy
//! decisions, approvals, events, limits and labels, as they are stored and
//! handed to agents, policies and observers.

mod approval;
mod call;
mod decision;
mod event;
mod labels;
mod limits;
mod observation;
mod policy;
mod policy_decision;
mod run;
mod step;
mod tool;

pub use approval::{Approval, ApprovalStatus, INTERRUPTED_SIDE_EFFECT};
pub use call::{CallStatus, ModelCall};
pub use decision::{Decision, DecisionKind, DecisionProblems, Origin, RecordedDecision};
pub(crate) use decision::{base64, is_blank};
pub use event::{Event, EventType};
pub use labels::{
    Label, LabelError, Labels, MAX_LABEL_KEY_CHARS, MAX_LABEL_VALUE_CHARS, MAX_LABELS,
};
pub use limits::{Limits, LimitsError};
pub use observation::{Observation, ObservationKind, OperatorEdit, ToolFailure};
pub use policy::{RunView, ToolRequest};
pub use policy_decision::{MAX_APPROVERS, Outcome, PolicyDecision};
pub(crate) use run::NewRunFields;
pub use run::{Run, RunStatus, TerminalReason, Usage};
pub use step::{Step, StepStatus};
pub use tool::{
    BoxFuture, FnTool, SideEffect, Tool, ToolCall, ToolError, ToolResult, ToolSpec, tool_fn,
};

/// Implements `as_str`, `Display`, `FromStr` and string serde for a
/// field-less enum whose variants map to fixed texts.
macro_rules! text_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stored text.
            pub fn as_str(&self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value with this stored text, if any.
            pub fn parse(text: &str) -> Option<$name> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                $name::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        concat!("{:?} is not a ", stringify!($name)), text
                    ))
                })
            }
        }
    };
}
pub(crate) use text_enum;

/// `true` for the default value; used by `skip_serializing_if`.
pub(crate) fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}
