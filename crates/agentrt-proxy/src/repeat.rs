//! Rules 4 and 5 (design §30): within the repeat window, measured from
//! the earlier run's finish, an identical request that an operator
//! rejected or cancelled is refused, one whose approval expired is
//! refused, and a change that already ran with a known outcome is a
//! duplicate. The runs are read newest first; the first that decides
//! anything decides. Pure over facts gathered from the store.

use std::time::Duration;

use agentrt::Timestamp;

/// How an earlier run of the same request ended, as these rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// An operator rejected its approval, with this note.
    Rejected {
        /// The operator's note.
        note: String,
    },
    /// An operator cancelled it.
    Cancelled,
    /// Its approval expired; `interruption` when the approval asked about
    /// an unknown outcome (such an expiry refuses nothing).
    Expired {
        /// The approval.
        approval_id: String,
        /// Whether it asked about an attempt cut off.
        interruption: bool,
    },
    /// It ended otherwise: what its tool did decides ([`ToolRan`]).
    Other,
}

/// What an earlier run's tool did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolRan {
    /// It ran with a known outcome.
    Known(Known),
    /// It was called and what it did is not known (rule 6).
    Unknown(Attempt),
    /// It never ran (denied, invalid, never asked).
    No,
}

/// An attempt whose outcome is unknown: what an operator is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The run.
    pub run_id: String,
    /// The step that called the tool.
    pub step_id: String,
    /// When the step started (the stored text).
    pub started_at: String,
    /// How it ended: `cut_off`, `timed_out` or `no_answer`.
    pub ended: &'static str,
}

/// Rule 6: the key's last attempt (newest first), if its outcome is
/// unknown and no run of the key has executed with a known outcome since.
/// Runs that only asked about it (rejected, expired) do not resolve it.
pub fn unknown_attempt(newest_first: &[PastRun]) -> Option<Attempt> {
    for past in newest_first {
        match &past.tool {
            ToolRan::Known(_) => return None,
            ToolRan::Unknown(attempt) => return Some(attempt.clone()),
            ToolRan::No => {}
        }
    }
    None
}

/// A known outcome of a tool that ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// It returned a result.
    Succeeded,
    /// The server reported an error.
    ServerError,
    /// The server answered, but the answer could not be recorded.
    Unrecorded,
}

impl Known {
    /// How the answer words it.
    pub fn words(self) -> &'static str {
        match self {
            Known::Succeeded => "succeeded",
            Known::ServerError => "the server reported an error",
            Known::Unrecorded => "the server answered but the answer could not be recorded",
        }
    }
}

/// An earlier run of the same request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PastRun {
    /// When it finished.
    pub finished_at: Timestamp,
    /// How.
    pub ending: Ending,
    /// What its tool did.
    pub tool: ToolRan,
}

/// What refuses the new call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Rule 4: rejected, with the note.
    Rejected { note: String, until: Timestamp },
    /// Rule 4: cancelled by an operator.
    Cancelled { until: Timestamp },
    /// Rule 4: the approval expired.
    Expired { approval_id: String },
    /// Rule 5: the change already ran.
    Duplicate {
        at: Timestamp,
        outcome: Known,
        until: Timestamp,
    },
}

/// Judges a new call of a request against its earlier runs (`newest
/// first`), at `now`, with the tool's `window` (zero: off); a read-only
/// tool is never a duplicate.
pub fn judge(
    newest_first: &[PastRun],
    now: Timestamp,
    window: Duration,
    read_only: bool,
) -> Option<Refusal> {
    if window.is_zero() {
        return None;
    }
    for past in newest_first {
        let until = past.finished_at.add(window);
        if until <= now {
            continue;
        }
        match &past.ending {
            Ending::Rejected { note } => {
                return Some(Refusal::Rejected {
                    note: note.clone(),
                    until,
                });
            }
            Ending::Cancelled => return Some(Refusal::Cancelled { until }),
            Ending::Expired {
                approval_id,
                interruption: false,
            } => {
                return Some(Refusal::Expired {
                    approval_id: approval_id.clone(),
                });
            }
            Ending::Other => match past.tool {
                ToolRan::Known(outcome) if !read_only => {
                    return Some(Refusal::Duplicate {
                        at: past.finished_at,
                        outcome,
                        until,
                    });
                }
                ToolRan::Known(_) | ToolRan::Unknown(_) | ToolRan::No => {}
            },
            Ending::Expired { .. } => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> Timestamp {
        Timestamp::parse("2026-12-01T09:00:00Z")
            .expect("time")
            .add(Duration::from_secs(s))
    }

    /// A run ending as `ending`; `Executed`-like endings are written with
    /// [`ran`].
    fn past(s: u64, ending: Ending) -> PastRun {
        PastRun {
            finished_at: at(s),
            ending,
            tool: ToolRan::No,
        }
    }

    fn ran(s: u64, tool: ToolRan) -> PastRun {
        PastRun {
            finished_at: at(s),
            ending: Ending::Other,
            tool,
        }
    }

    const WINDOW: Duration = Duration::from_secs(600);

    #[test]
    fn the_newest_run_inside_the_window_that_decides_anything_decides() {
        let rejected = Ending::Rejected { note: "no".into() };
        let succeeded = ToolRan::Known(Known::Succeeded);
        let expired = |interruption| Ending::Expired {
            approval_id: "a1".into(),
            interruption,
        };
        // (runs newest first, now, read_only, expected)
        let cases: Vec<(Vec<PastRun>, u64, bool, Option<Refusal>)> = vec![
            (vec![], 100, false, None),
            (
                vec![past(0, rejected.clone())],
                100,
                false,
                Some(Refusal::Rejected {
                    note: "no".into(),
                    until: at(600),
                }),
            ),
            // Past the window: nothing.
            (vec![past(0, rejected.clone())], 600, false, None),
            (
                vec![past(0, Ending::Cancelled)],
                1,
                true,
                Some(Refusal::Cancelled { until: at(600) }),
            ),
            (
                vec![past(0, expired(false))],
                1,
                false,
                Some(Refusal::Expired {
                    approval_id: "a1".into(),
                }),
            ),
            // An expired question about an unknown outcome refuses nothing,
            // and the older run decides.
            (
                vec![past(5, expired(true)), ran(0, succeeded.clone())],
                10,
                false,
                Some(Refusal::Duplicate {
                    at: at(0),
                    outcome: Known::Succeeded,
                    until: at(600),
                }),
            ),
            // A read is never a duplicate.
            (vec![ran(0, succeeded.clone())], 10, true, None),
            // Denied, invalid or unknown attempts do not count.
            (vec![past(5, Ending::Other)], 10, false, None),
            (
                vec![
                    past(5, Ending::Other),
                    ran(0, ToolRan::Known(Known::ServerError)),
                ],
                10,
                false,
                Some(Refusal::Duplicate {
                    at: at(0),
                    outcome: Known::ServerError,
                    until: at(600),
                }),
            ),
            // Newest first: a rejection after a run refuses as a rejection.
            (
                vec![past(5, rejected), ran(0, succeeded)],
                10,
                false,
                Some(Refusal::Rejected {
                    note: "no".into(),
                    until: at(605),
                }),
            ),
        ];
        for (i, (runs, now, read_only, want)) in cases.into_iter().enumerate() {
            assert_eq!(judge(&runs, at(now), WINDOW, read_only), want, "case {i}");
        }
        // An unknown outcome is no duplicate.
        let unknown = ToolRan::Unknown(Attempt {
            run_id: "r".into(),
            step_id: "s".into(),
            started_at: "t".into(),
            ended: "no_answer",
        });
        assert_eq!(judge(&[ran(0, unknown)], at(1), WINDOW, false), None);
        // A zero window turns both rules off.
        let runs = [past(0, Ending::Cancelled)];
        assert_eq!(judge(&runs, at(1), Duration::ZERO, false), None);
    }
}

#[cfg(test)]
mod unknown_tests {
    use super::*;

    fn attempt(run: &str) -> Attempt {
        Attempt {
            run_id: run.into(),
            step_id: "s1".into(),
            started_at: "t".into(),
            ended: "timed_out",
        }
    }

    fn past(ending: Ending, tool: ToolRan) -> PastRun {
        PastRun {
            finished_at: Timestamp::parse("2026-12-01T09:00:00Z").expect("time"),
            ending,
            tool,
        }
    }

    #[test]
    fn the_last_attempt_decides_and_questions_about_it_resolve_nothing() {
        let unknown = |run: &str| ToolRan::Unknown(attempt(run));
        let rejected = || Ending::Rejected { note: "no".into() };
        let expired = Ending::Expired {
            approval_id: "a".into(),
            interruption: true,
        };
        let cases: Vec<(Vec<PastRun>, Option<Attempt>)> = vec![
            (vec![], None),
            (
                vec![past(Ending::Other, unknown("r1"))],
                Some(attempt("r1")),
            ),
            // The question about it rejected, in the same run or a later
            // one, or expired: not resolved.
            (vec![past(rejected(), unknown("r1"))], Some(attempt("r1"))),
            (
                vec![
                    past(rejected(), ToolRan::No),
                    past(expired, ToolRan::No),
                    past(Ending::Other, unknown("r1")),
                ],
                Some(attempt("r1")),
            ),
            // A known outcome since resolves it.
            (
                vec![
                    past(Ending::Other, ToolRan::Known(Known::Succeeded)),
                    past(Ending::Other, unknown("r1")),
                ],
                None,
            ),
            // The newest unknown attempt is the one named.
            (
                vec![
                    past(Ending::Other, unknown("r2")),
                    past(Ending::Other, unknown("r1")),
                ],
                Some(attempt("r2")),
            ),
            (vec![past(Ending::Other, ToolRan::No)], None),
        ];
        for (i, (runs, want)) in cases.into_iter().enumerate() {
            assert_eq!(unknown_attempt(&runs), want, "case {i}");
        }
    }
}
