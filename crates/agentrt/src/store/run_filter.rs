//! Which runs a listing keeps: those carrying every label given, and of
//! one status when one is given.

use crate::model::{Labels, RunStatus};

/// Which runs a listing keeps ([`Store::runs_page_capped_filtered`](super::Store::runs_page_capped_filtered)).
///
/// ```
/// use agentrt::store::RunFilter;
/// use agentrt::{Labels, RunStatus};
/// let waiting = RunFilter::default().with_status(RunStatus::WaitingForApproval);
/// let tagged = RunFilter::labelled(Labels::parse(["host=build-7"])?);
/// assert!(waiting.labels.is_empty() && tagged.status.is_none());
/// # Ok::<(), agentrt::model::LabelError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Every one of these labels (none: any labels).
    pub labels: Labels,
    /// This status (none: any status).
    pub status: Option<RunStatus>,
}

impl RunFilter {
    /// The runs carrying every label of `labels`, of any status.
    pub fn labelled(labels: Labels) -> RunFilter {
        RunFilter {
            labels,
            status: None,
        }
    }

    /// The same filter, keeping runs of `status` only.
    pub fn with_status(mut self, status: RunStatus) -> RunFilter {
        self.status = Some(status);
        self
    }
}
