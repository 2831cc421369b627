//! Deciding agentrt approvals from outside the process that runs the
//! agent (design §34).
//!
//! [`Approver`] is what every channel (the signed webhook, the approval
//! page) decides through: every method names a run, nothing lists runs,
//! and every decision is bound to the hash of the approval that was shown.
//! [`StoreApprover`] implements it over the run's own database with the
//! core's operator: the checks run inside the decision's transaction, an
//! approval past its expiry takes the core's expiry path, and an approved
//! run stays waiting until its owner resumes it (the policy is asked again
//! then).
//!
//! Two channels decide through it, served together by
//! `agentrt-approver serve` ([`serve`]; its database from `--db` or
//! `$AGENTRT_DB`, where a URL with a password belongs):
//!
//! - the signed webhook ([`webhook`], design §35): every request
//!   HMAC-signed with the shared secret, or with one approver's key
//!   (`--keys`, [`signature::Keys`]: such a request decides as that
//!   approver only); verified requests to a route spend a rate bucket of
//!   their own, everything else (unsigned, forged, replayed, misrouted)
//!   another, so a flood cannot use up the operator's budget;
//! - the approval page ([`page`], beyond the spec): a one-time login link
//!   bound by its MAC to one run and one person, its nonce taken once in
//!   the run's database ([`Approver::sign_in`]), opens a session that sees
//!   and decides that run only; the session cookie is `HttpOnly`,
//!   `SameSite=Strict`, and `Secure` when asked ([`page::SecureCookie`]:
//!   `--cookie-secure`, or `--trust-forwarded-proto HEADER` behind a
//!   TLS-terminating proxy).
//!
//! ```
//! use agentrt::Store;
//! use agentrt_approver::{Approver, Decision, StoreApprover};
//!
//! let approver = StoreApprover::new(Store::open(":memory:")?, None);
//! let err = approver.pending("no-such-run", 10).unwrap_err();
//! assert!(err.is_not_found());
//! let incomplete = Decision { run_id: "r1".into(), ..Decision::default() };
//! assert!(approver.approve(&incomplete).unwrap_err().is_incomplete());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]

mod decision;
mod error;
mod extension;
mod fault;
mod login_nonces;
pub mod notify;
pub mod oidc;
pub mod page;
mod pending;
pub mod serve;
pub mod signature;
mod signatures;
mod store_backed;
pub mod webhook;

pub use decision::{Cancellation, Decision, SignIn};
pub use error::ApproverError;
pub use extension::{EXTENSION, LOGIN_NONCES_TABLE, SIGNATURES_TABLE};
pub use login_nonces::SIGNED_IN_EVENT;
pub use oidc::{OidcConfig, SignedIn};
pub use pending::Pending;
pub use store_backed::StoreApprover;

use agentrt::{Approval, Run};

/// Deciding a run's approvals. Every method names the run.
pub trait Approver: Send + Sync {
    /// The run's pending approvals in creation order, at most `limit`
    /// (0: all), when the run waits for approval; none when it is in any
    /// other state. [`ApproverError::is_not_found`] for a missing run.
    fn pending(&self, run_id: &str, limit: u64) -> Result<Vec<Pending>, ApproverError>;

    /// One approval of the run, whatever its status; not found when it
    /// belongs to another run.
    fn show(&self, run_id: &str, approval_id: &str) -> Result<Pending, ApproverError>;

    /// Approves the approval the decision names, if it still has the hash
    /// the decision carries. The run stays waiting until its owner resumes
    /// it.
    fn approve(&self, decision: &Decision) -> Result<Approval, ApproverError>;

    /// Rejects it on the same terms: the run is cancelled
    /// (`approval_rejected`).
    fn reject(&self, decision: &Decision) -> Result<Approval, ApproverError>;

    /// Ends a run that has not finished (`operator_cancelled`) without
    /// deciding its approvals.
    fn cancel(&self, cancellation: &Cancellation) -> Result<Run, ApproverError>;

    /// Takes a login link for the run it names: its nonce is recorded
    /// once, durably, so a link signs in once, ever (also across a
    /// restart and across processes on one database).
    /// [`ApproverError::LinkUsed`] when it was taken before;
    /// [`ApproverError::is_not_found`] for a missing run.
    fn sign_in(&self, sign_in: &SignIn) -> Result<(), ApproverError>;
}
