//! Re-check assertions (design §18): a run re-checks clean under a policy,
//! differs at exactly the named steps, or re-checks clean as far as the
//! record allows.
//!
//! Under the policy a run ran with, [`recheck`] is a determinism check: a
//! policy that decides from what it is handed alone decides the same again.

use crate::error::Error;
use crate::policy::Policy;
use crate::recheck::{Evaluation, RecheckOptions, RecheckReport, RecheckResult};
use crate::store::Store;

/// Why a re-check assertion failed. Each variant's text lists the
/// evaluations (the report's text).
#[derive(Debug, thiserror::Error)]
pub enum RecheckError {
    /// The re-check itself failed (unknown run, store error, bad policy id).
    #[error("testkit: recheck run {run}: {source}")]
    Runtime {
        /// The run.
        run: String,
        /// What failed.
        source: Error,
    },
    /// The steps that differ are not the ones expected.
    #[error(
        "testkit: recheck run {run}: steps {} differ, want {}:\n{report}",
        steps(got),
        steps(want)
    )]
    Differs {
        /// The run.
        run: String,
        /// The step indexes that differ.
        got: Vec<u64>,
        /// The step indexes expected to differ.
        want: Vec<u64>,
        /// The report.
        report: Box<RecheckReport>,
    },
    /// Some evaluations could not be rebuilt, so the re-check is not whole.
    #[error(
        "testkit: recheck run {run}: {count} evaluation(s) not re-checkable, so the re-check is not whole (recheck_partial accepts that):\n{report}"
    )]
    NotRecheckable {
        /// The run.
        run: String,
        /// How many.
        count: usize,
        /// The report.
        report: Box<RecheckReport>,
    },
    /// No evaluation was re-checked, so the re-check shows nothing.
    #[error(
        "testkit: recheck run {run}: no evaluation was re-checked, so the re-check shows nothing (recheck_partial accepts that):\n{report}"
    )]
    NothingRechecked {
        /// The run.
        run: String,
        /// The report.
        report: Box<RecheckReport>,
    },
}

impl RecheckError {
    /// The report, when the re-check ran.
    pub fn report(&self) -> Option<&RecheckReport> {
        match self {
            RecheckError::Runtime { .. } => None,
            RecheckError::Differs { report, .. }
            | RecheckError::NotRecheckable { report, .. }
            | RecheckError::NothingRechecked { report, .. } => Some(report),
        }
    }
}

fn steps(list: &[u64]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A re-check that passed although some evaluations could not be rebuilt:
/// the report and the evaluations left out. Its text names them.
#[derive(Debug, Clone)]
pub struct PartialRecheck {
    /// The report.
    pub report: RecheckReport,
    /// The evaluations that are `not_recheckable`.
    pub skipped: Vec<Evaluation>,
}

impl std::fmt::Display for PartialRecheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "recheck run {}: {} re-checked the same, {} not re-checkable",
            self.report.run_id,
            self.report.rechecked(),
            self.skipped.len()
        )?;
        for e in &self.skipped {
            let step = e
                .step_index
                .map_or_else(|| "?".to_owned(), |i| i.to_string());
            writeln!(
                f,
                "  step {step} seq {}: {}",
                e.seq,
                crate::text::clip(&e.detail, 240)
            )?;
        }
        Ok(())
    }
}

/// Re-checks `run_id` under `policy` (recorded specs) and passes when every
/// evaluation is `same`. Fails when any differs, when nothing was
/// re-checked, or when any evaluation is not re-checkable.
///
/// ```
/// # async fn demo(store: agentrt::Store) {
/// use agentrt::{DefaultPolicy, testkit};
/// let report = testkit::recheck(&store, "run-1", &DefaultPolicy).unwrap();
/// assert!(report.same());
/// # }
/// ```
pub fn recheck(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
) -> Result<RecheckReport, RecheckError> {
    recheck_differs(store, run_id, policy, &[])
}

/// Re-checks `run_id` under `policy` and passes when the steps whose
/// evaluations differ are exactly `steps` (by index; a step evaluated twice
/// is named once). Like [`recheck`], fails when nothing was re-checked or
/// any evaluation is not re-checkable.
///
/// ```
/// # async fn demo(store: agentrt::Store, strict: agentrt::SideEffectPolicy) {
/// // The stricter policy would have stopped step 2 only.
/// agentrt::testkit::recheck_differs(&store, "run-1", &strict, &[2]).unwrap();
/// # }
/// ```
pub fn recheck_differs(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
    steps: &[u64],
) -> Result<RecheckReport, RecheckError> {
    let report = differing(store, run_id, policy, steps)?;
    let count = report.not_recheckable();
    if count > 0 {
        return Err(RecheckError::NotRecheckable {
            run: run_id.to_owned(),
            count,
            report: Box::new(report),
        });
    }
    if report.rechecked() == 0 {
        return Err(RecheckError::NothingRechecked {
            run: run_id.to_owned(),
            report: Box::new(report),
        });
    }
    Ok(report)
}

/// Like [`recheck`], but evaluations the record cannot rebuild are passed
/// over (and named in the result), and a run with none re-checked passes.
///
/// ```
/// # async fn demo(store: agentrt::Store) {
/// let partial = agentrt::testkit::recheck_partial(&store, "run-1", &agentrt::DefaultPolicy).unwrap();
/// for skipped in &partial.skipped {
///     println!("not re-checked: {}", skipped.detail);
/// }
/// # }
/// ```
pub fn recheck_partial(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
) -> Result<PartialRecheck, RecheckError> {
    let report = differing(store, run_id, policy, &[])?;
    let skipped = report
        .evaluations
        .iter()
        .filter(|e| e.result == RecheckResult::NotRecheckable)
        .cloned()
        .collect();
    Ok(PartialRecheck { report, skipped })
}

/// Re-checks and fails unless exactly `want` differ.
fn differing(
    store: &Store,
    run_id: &str,
    policy: &dyn Policy,
    want: &[u64],
) -> Result<RecheckReport, RecheckError> {
    let report = crate::recheck::recheck(store, run_id, policy, &RecheckOptions::default())
        .map_err(|source| RecheckError::Runtime {
            run: run_id.to_owned(),
            source,
        })?;
    let got = report.differing_steps();
    let mut want = want.to_vec();
    want.sort_unstable();
    want.dedup();
    if got != want {
        return Err(RecheckError::Differs {
            run: run_id.to_owned(),
            got,
            want,
            report: Box::new(report),
        });
    }
    Ok(report)
}
