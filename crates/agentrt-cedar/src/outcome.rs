//! Cedar's two answers as agentrt's four outcomes.
//!
//! Cedar says permit or forbid, and which policies determined it. agentrt
//! reads two annotations on the determining policies:
//!
//! - a `forbid` annotated `@abort("why")` ends the run;
//! - a `permit` annotated `@approval("why")` asks an operator.
//!
//! Precedence: abort > deny > approval > allow. Cedar already makes any
//! satisfied `forbid` win over every `permit`, and denies when nothing
//! permits (default deny); among the determining forbids one with
//! `@abort` ends the run, and among the determining permits one with
//! `@approval` asks. A policy that could not be evaluated denies: Cedar
//! would skip it, and a skipped `forbid` could let through what it was
//! written to stop.
//!
//! The reason the model and the operator see names the policies that
//! decided (their `@id`, or Cedar's `policyN`):
//!
//! | outcome | reason |
//! |---|---|
//! | allow | `permitted by cedar policy p1, p2` |
//! | approval | `<why> (cedar policy p1)`; several: the whys joined by `; ` |
//! | deny | `forbidden by cedar policy p3` |
//! | abort | `<why> (cedar policy p4)` |
//! | default deny | `no cedar policy permits <tool>` |
//! | error | `cedar policy p5 could not be evaluated: <error>` |

use agentrt::Outcome;

/// One determining policy, as [`decide`] reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Determining {
    /// Its id.
    pub id: String,
    /// Its `@approval` text, if any.
    pub approval: Option<String>,
    /// Its `@abort` text, if any.
    pub abort: Option<String>,
}

/// What Cedar answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// Whether Cedar permitted.
    pub permitted: bool,
    /// The policies that determined it (satisfied permits when
    /// permitted, satisfied forbids when not; none for a default deny).
    pub determining: Vec<Determining>,
    /// Policies that could not be evaluated, and why.
    pub errors: Vec<(String, String)>,
}

/// agentrt's outcome for an answer, and its reason.
///
/// ```
/// use agentrt::Outcome;
/// use agentrt_cedar::outcome::{Answer, Determining, decide};
/// let answer = Answer {
///     permitted: true,
///     determining: vec![Determining {
///         id: "writes-need-me".into(),
///         approval: Some("a write outside drafts".into()),
///         abort: None,
///     }],
///     errors: vec![],
/// };
/// assert_eq!(
///     decide(&answer, "write_file"),
///     (Outcome::RequireApproval, "a write outside drafts (cedar policy writes-need-me)".into())
/// );
/// ```
pub fn decide(answer: &Answer, tool: &str) -> (Outcome, String) {
    if let Some((id, error)) = answer.errors.first() {
        return (
            Outcome::Deny,
            format!("cedar policy {id} could not be evaluated: {error}"),
        );
    }
    let ids = |policies: &[&Determining]| {
        policies
            .iter()
            .map(|p| p.id.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let whys = |policies: &[&Determining], why: fn(&Determining) -> Option<&str>| {
        policies
            .iter()
            .map(|p| format!("{} (cedar policy {})", why(p).unwrap_or_default(), p.id))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let all: Vec<&Determining> = answer.determining.iter().collect();
    if !answer.permitted {
        if all.is_empty() {
            return (Outcome::Deny, format!("no cedar policy permits {tool}"));
        }
        let aborting: Vec<&Determining> =
            all.iter().copied().filter(|p| p.abort.is_some()).collect();
        if !aborting.is_empty() {
            return (Outcome::Abort, whys(&aborting, |p| p.abort.as_deref()));
        }
        return (
            Outcome::Deny,
            format!("forbidden by cedar policy {}", ids(&all)),
        );
    }
    let asking: Vec<&Determining> = all
        .iter()
        .copied()
        .filter(|p| p.approval.is_some())
        .collect();
    if !asking.is_empty() {
        return (
            Outcome::RequireApproval,
            whys(&asking, |p| p.approval.as_deref()),
        );
    }
    (
        Outcome::Allow,
        format!("permitted by cedar policy {}", ids(&all)),
    )
}
