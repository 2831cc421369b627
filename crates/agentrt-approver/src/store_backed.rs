//! [`Approver`] over the run's own database, through the core's operator.

use std::path::Path;
use std::sync::Arc;

use agentrt::view::{RunSummary, run_summary};
use agentrt::{
    Approval, Clock, DecideOptions, Observer, Operator, Run, RunStatus, Store, StoreOptions,
    gate::SatelliteRows, system_clock,
};

use crate::extension::EXTENSION;
use crate::signatures::record;
use crate::{Approver, ApproverError, Cancellation, Decision, Pending, SignIn};

/// The database at `path` opened to read only: a SQLite file that must
/// exist at this build's schema (opened read-only), or with the
/// `postgres` feature a `postgres://` URL (its schema must be there).
pub(crate) fn open_read_only(path: &Path) -> Result<Store, ApproverError> {
    #[cfg(feature = "postgres")]
    if let Some(url) = path
        .to_str()
        .filter(|p| agentrt_postgres::is_postgres_url(p))
    {
        return Ok(agentrt_postgres::open_existing(url)?);
    }
    Ok(Store::open_existing(path, true)?)
}

/// Steps read at a time while looking for an approval's step.
const STEP_PAGE: u64 = 128;

/// An [`Approver`] on a store: decisions are the core operator's (one
/// transaction each, its checks inside it), reads are capped page reads
/// (an oversized row reads back with a decode error instead of failing).
#[derive(Clone)]
pub struct StoreApprover {
    store: Store,
    operator: Operator,
    clock: Clock,
}

impl std::fmt::Debug for StoreApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreApprover")
            .field("store", &self.store.path())
            .finish_non_exhaustive()
    }
}

impl StoreApprover {
    /// An approver on a store the caller owns; `observer` is told every
    /// event a decision commits. Decisions that carry a request signature,
    /// and sign-ins, need the store opened with
    /// [`EXTENSION`](crate::EXTENSION) among its options (their signature
    /// or nonce is recorded in its tables).
    pub fn new(store: Store, observer: Option<Arc<dyn Observer>>) -> StoreApprover {
        let mut operator = Operator::new(store.clone());
        if let Some(observer) = observer {
            operator = operator.with_observer(observer);
        }
        StoreApprover {
            store,
            operator,
            clock: system_clock(),
        }
    }

    /// An approver on the database at `path`, which must exist, be at this
    /// build's schema and not be a symbolic link (the core's
    /// `open_existing`); nothing is created, and the only things migrated
    /// are the approver's own tables (used signatures, used login-link
    /// nonces), added if missing.
    ///
    /// With the `postgres` feature (on by default), a `postgres://` URL
    /// names a PostgreSQL database instead, held to the same rules (its
    /// schema must be there; the approver's tables are added if missing);
    /// its password never appears in an error.
    pub fn open(
        path: impl AsRef<Path>,
        observer: Option<Arc<dyn Observer>>,
    ) -> Result<StoreApprover, ApproverError> {
        let path = path.as_ref();
        let options = StoreOptions {
            extensions: vec![EXTENSION],
            ..StoreOptions::default()
        };
        #[cfg(feature = "postgres")]
        if let Some(url) = path
            .to_str()
            .filter(|p| agentrt_postgres::is_postgres_url(p))
        {
            // Refuses a database without the schema before the opener
            // that may add the extension's table.
            drop(agentrt_postgres::open_existing(url)?);
            let store = agentrt_postgres::open_with(
                url,
                agentrt_postgres::PgOptions {
                    store: options,
                    ..agentrt_postgres::PgOptions::default()
                },
            )?;
            return Ok(StoreApprover::new(store, observer));
        }
        // Refuses what open_existing refuses (missing, a link, another
        // schema) before the opener that may add the extension's table.
        drop(Store::open_existing(path, true)?);
        let store = Store::open_with(path, options)?;
        Ok(StoreApprover::new(store, observer))
    }

    /// Judges expiry and stamps decisions with `clock` instead of the
    /// wall clock. For tests: a deployed approver keeps the wall clock.
    #[doc(hidden)]
    pub fn with_clock(mut self, clock: Clock) -> StoreApprover {
        self.operator = self.operator.with_clock(clock.clone());
        self.clock = clock;
        self
    }

    /// The store it decides on.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// A capped summary of the run, for a channel that shows what it is
    /// about to cancel.
    pub fn run(&self, run_id: &str) -> Result<RunSummary, ApproverError> {
        Ok(run_summary(&self.store, run_id)?)
    }

    /// The policy's reason in the decision that paused `step_id`; empty
    /// when the step or its decision is not found (nothing to show is not
    /// an error). Looks from the run's last step back, a page at a time.
    fn reason(&self, run: &Run, step_id: &str) -> Result<String, ApproverError> {
        let mut end = run.step_count;
        while end > 0 {
            let offset = end.saturating_sub(STEP_PAGE);
            let page = self
                .store
                .steps_page_capped(&run.id, end - offset, offset)?;
            if let Some(step) = page.items.iter().find(|s| s.id == step_id) {
                return Ok(step
                    .policy
                    .as_ref()
                    .map(|p| p.reason.clone())
                    .unwrap_or_default());
            }
            end = offset;
        }
        Ok(String::new())
    }

    fn shown(&self, run: &Run, approval: &Approval) -> Result<Pending, ApproverError> {
        let reason = self.reason(run, &approval.step_id)?;
        Ok(Pending::new(approval, &reason, (self.clock)()))
    }

    /// The rows that record a request's signature (nothing without one).
    fn signature_rows(&self, signature: Option<&String>, run_id: &str) -> SatelliteRows {
        record(signature.cloned(), run_id.to_owned(), (self.clock)())
    }

    fn options<'a>(decision: &'a Decision) -> DecideOptions<'a> {
        DecideOptions {
            by: &decision.by,
            note: &decision.note,
            // An empty hash is refused as a changed approval.
            shown_hash: Some(&decision.hash),
        }
    }
}

impl Approver for StoreApprover {
    fn pending(&self, run_id: &str, limit: u64) -> Result<Vec<Pending>, ApproverError> {
        let run = self.store.get_run_capped(run_id)?;
        if run.status != RunStatus::WaitingForApproval {
            return Ok(Vec::new());
        }
        let page = self.store.pending_approvals_page_capped(run_id, limit, 0)?;
        page.items.iter().map(|a| self.shown(&run, a)).collect()
    }

    fn show(&self, run_id: &str, approval_id: &str) -> Result<Pending, ApproverError> {
        let run = self.store.get_run_capped(run_id)?;
        let approval = self.store.get_approval_capped(run_id, approval_id)?;
        self.shown(&run, &approval)
    }

    fn approve(&self, decision: &Decision) -> Result<Approval, ApproverError> {
        decision.check()?;
        let rows = self.signature_rows(decision.request_signature.as_ref(), &decision.run_id);
        let options = StoreApprover::options(decision);
        let (run, approval) = (&decision.run_id, &decision.approval_id);
        Ok(match &decision.args {
            Some(args) => self.operator.approve_edited_with_rows(
                run,
                approval,
                args.as_str(),
                &options,
                rows,
            )?,
            None => self
                .operator
                .approve_with_rows(run, approval, &options, rows)?,
        })
    }

    fn reject(&self, decision: &Decision) -> Result<Approval, ApproverError> {
        decision.check()?;
        if decision.args.is_some() {
            return Err(ApproverError::ArgsOnReject);
        }
        let rows = self.signature_rows(decision.request_signature.as_ref(), &decision.run_id);
        let options = StoreApprover::options(decision);
        Ok(self.operator.reject_with_rows(
            &decision.run_id,
            &decision.approval_id,
            &options,
            rows,
        )?)
    }

    fn cancel(&self, cancellation: &Cancellation) -> Result<Run, ApproverError> {
        cancellation.check()?;
        let Cancellation {
            run_id, by, note, ..
        } = cancellation;
        let rows = self.signature_rows(cancellation.request_signature.as_ref(), run_id);
        Ok(self.operator.cancel_with_rows(run_id, by, note, rows)?)
    }

    fn sign_in(&self, sign_in: &SignIn) -> Result<(), ApproverError> {
        sign_in.check()?;
        Ok(crate::login_nonces::take(
            &self.store,
            sign_in,
            (self.clock)(),
        )?)
    }
}
