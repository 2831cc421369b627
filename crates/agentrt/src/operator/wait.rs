//! Waiting for an operator's decision, made by this process or another
//! one (`agentrt approve`), without polling the row.

use std::time::Duration;

use super::Operator;
use crate::error::{Error, Result};
use crate::expiry::write_expiry;
use crate::model::{Approval, ApprovalStatus, Run};

/// How a wait for a decision ended.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Awaited {
    /// Approved: the run resumes when its consumer attaches.
    Approved(Approval),
    /// Rejected: the run was cancelled.
    Rejected(Approval),
    /// The approval lapsed (this wait applied the expiry at its deadline,
    /// or someone else did); the run was cancelled.
    Expired(Approval),
    /// A newer approval of the same step replaced this one (the policy
    /// asked again, or an operator edited the request and approved the
    /// edit): wait for that one instead.
    Superseded {
        /// The approval waited for.
        approval: Box<Approval>,
        /// The step's latest approval.
        latest: Box<Approval>,
    },
    /// The run ended without a decision (an operator cancelled it).
    RunEnded(Box<Run>),
    /// Nothing was decided within the timeout.
    TimedOut,
}

impl Operator {
    /// Waits until approval `approval_id` of run `run_id` is decided, is
    /// superseded, expires, or the run ends, or `timeout` passes.
    ///
    /// Wakes on any commit to the run, by this process or another. A
    /// pending approval whose `expires_at` passes by the operator's clock
    /// is expired by the wait itself (the run cancelled, as any toucher
    /// would), so a deadline holds even if nobody else touches the row.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use agentrt::operator::Operator;
    /// let operator = Operator::new(agentrt::Store::open(":memory:").unwrap());
    /// let waited = operator.wait_for_decision("r1", "a1", Duration::from_millis(10)).await;
    /// assert!(matches!(waited, Err(agentrt::Error::NotFound { what: "run", .. })));
    /// # });
    /// ```
    pub async fn wait_for_decision(
        &self,
        run_id: &str,
        approval_id: &str,
        timeout: Duration,
    ) -> Result<Awaited> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let (run_key, approval_key) = (run_id.to_owned(), approval_id.to_owned());
            let (run, approvals, head) = self
                .store
                .off_executor(move |store| {
                    let run = store.get_run(&run_key)?;
                    let head = store.run_head(&run_key)?;
                    Ok((run, store.list_approvals(&run_key)?, head))
                })
                .await?;
            let Some(approval) = approvals.iter().find(|a| a.id == approval_key).cloned() else {
                return Err(Error::NotFound {
                    what: "approval",
                    id: approval_key,
                });
            };
            match approval.status {
                ApprovalStatus::Approved => return Ok(Awaited::Approved(approval)),
                ApprovalStatus::Rejected => return Ok(Awaited::Rejected(approval)),
                ApprovalStatus::Expired => return Ok(Awaited::Expired(approval)),
                // An edit's approval follows it on the step: superseded.
                ApprovalStatus::Pending | ApprovalStatus::Edited => {}
            }
            let latest = approvals
                .iter()
                .rev()
                .find(|a| a.step_id == approval.step_id);
            if let Some(latest) = latest
                && latest.id != approval.id
            {
                return Ok(Awaited::Superseded {
                    latest: Box::new(latest.clone()),
                    approval: Box::new(approval),
                });
            }
            if run.status.is_terminal() {
                return Ok(Awaited::RunEnded(Box::new(run)));
            }
            let now = (self.clock)();
            let mut wake = deadline;
            if let Some(expires) = approval.expires_at {
                if now >= expires {
                    if let Some(expired) = self.expire(approval).await? {
                        return Ok(Awaited::Expired(expired));
                    }
                    // Awaited meanwhile: read it again.
                    continue;
                }
                let left = Duration::from_millis(expires.millis_since(&now));
                wake = wake.min(tokio::time::Instant::now() + left);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Ok(Awaited::TimedOut);
            }
            self.store.wait_for_run(run_id, head, wake - now).await?;
        }
    }

    /// Applies `approval`'s expiry now; `None` when it is no longer
    /// pending or its run no longer waits (someone acted first).
    async fn expire(&self, approval: Approval) -> Result<Option<Approval>> {
        let at = (self.clock)();
        let (run_id, id) = (approval.run_id.clone(), approval.id.clone());
        // A refusal rolls the group back whole: the expiry writes several
        // rows and must not stand half done.
        let written = self
            .store
            .write_async(move |tx| write_expiry(tx, &approval, at))
            .await;
        match written {
            Ok(((), events)) => self.deliver(&events),
            Err(Error::NotPending { .. } | Error::RunState { .. }) => return Ok(None),
            Err(e) => return Err(e),
        }
        let approval = self
            .store
            .off_executor(move |store| store.get_approval(&run_id, &id))
            .await?;
        Ok(Some(approval))
    }
}
