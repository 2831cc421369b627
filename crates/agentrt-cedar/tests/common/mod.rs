//! What the tests share: a run's view as a policy sees it.

use std::sync::Arc;

use agentrt::RunView;
use agentrt::Timestamp;
use agentrt::model::{Labels, Limits, Run, RunStatus, Usage};

/// A running run `r` with `labels` and nothing done yet, as a view.
pub fn view(labels: &[&str]) -> RunView {
    RunView {
        run: Run {
            id: "r".into(),
            goal: "g".into(),
            status: RunStatus::Running,
            reason: None,
            reason_detail: String::new(),
            limits: Limits::default(),
            labels: Labels::parse(labels.iter().copied()).expect("labels"),
            step_count: 0,
            created_at: Timestamp::from_unix_nanos(0),
            finished_at: None,
            result: None,
            model_calls: 0,
            usage: Usage::default(),
            estimated_cost_micros: 0,
            active_ms: 0,
            decode_error: None,
        },
        steps: Arc::new(Vec::new()),
        approvals: Arc::new(Vec::new()),
    }
}
