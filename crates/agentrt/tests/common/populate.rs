//! Runs driven through the gate to fill a database for `verify`'s tamper
//! tests (the suite's `verify_tamper`, and `verify_sqlite`): reads (one
//! long, some decided after asking a model), invalid decisions, approved
//! and rejected pushes, labelled runs.
#![allow(dead_code)]

use std::sync::Arc;

use agentrt::*;
use agentrt::{ids::sequential_ids, llm::ContentBlock, llm::Message, llm::Role, llm::StopReason};

use crate::common::{Counting, Recorder, config, shared, stepping_clock};

/// What a run does, step by step (see [`populate`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// A read-only tool call.
    Read,
    /// A call of an unknown tool (an invalid decision).
    Invalid,
    /// A remote mutation: paused for approval, then approved and resumed.
    PushApproved,
    /// A remote mutation, rejected: the run ends cancelled.
    PushRejected,
    /// A read whose result is long (over the 4096-byte inline limit).
    LongRead,
    /// A read decided after asking the model (a `model_calls` row).
    AskedRead,
}

pub fn decision(act: Act, i: usize) -> Decision {
    match act {
        Act::Read | Act::AskedRead => {
            Decision::tool_call("fs_read", format!(r#"{{"path":"f{i}"}}"#))
        }
        Act::LongRead => Decision::tool_call(
            "fs_read",
            format!(r#"{{"path":"f{i}","pad":"{}"}}"#, "y".repeat(9000)),
        ),
        Act::Invalid => Decision::tool_call("no_such_tool", "{}"),
        Act::PushApproved | Act::PushRejected => {
            Decision::tool_call("push", format!(r#"{{"ref":"r{i}"}}"#))
        }
    }
}

/// A decision, and whether the agent asks the model before it.
pub type Scripted = (Decision, bool);

/// A model that answers every request with the same usage.
pub struct Answering;

impl Model for Answering {
    fn name(&self) -> &str {
        "answering"
    }
    fn generate<'a>(
        &'a self,
        _: &'a ModelRequest,
    ) -> BoxFuture<'a, Result<ModelResponse, ModelError>> {
        Box::pin(async {
            Ok(ModelResponse {
                text: "read it".into(),
                tool_uses: vec![],
                stop_reason: Some(StopReason::EndTurn),
                usage: Usage {
                    input_tokens: 120,
                    output_tokens: 30,
                    cached_input_tokens: 0,
                },
                raw: Some("{}".into()),
            })
        })
    }
}

/// Plays its decisions in order, asking the model first where marked.
pub struct Asking(pub std::collections::VecDeque<(Decision, bool)>);

impl Agent for Asking {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, std::result::Result<Decision, AgentError>> {
        Box::pin(async move {
            let (decision, ask) = self.0.pop_front().expect("a decision is scripted");
            if ask {
                let model = input.model.clone().expect("a model is configured");
                model
                    .generate(ModelRequest {
                        system: String::new(),
                        messages: vec![Message {
                            role: Role::User,
                            content: vec![ContentBlock::text("which file?")],
                        }],
                        tools: vec![],
                        max_output_tokens: Some(64),
                    })
                    .await
                    .expect("the model answers");
            }
            Ok(decision)
        })
    }
}

pub fn model_config() -> agentrt::budget::ModelConfig {
    agentrt::budget::ModelConfig::new(
        Arc::new(Answering),
        agentrt::budget::PriceTable::new().with(
            "answering",
            agentrt::budget::Price {
                input_per_mtok_micros: 3_000_000,
                output_per_mtok_micros: 15_000_000,
                cached_input_per_mtok_micros: 300_000,
            },
        ),
    )
}

/// The labels of the `r`th run of a fixture: even runs carry two, odd
/// runs none (and so no `run_labels` row).
pub fn run_labels(r: usize) -> Labels {
    if r % 2 == 1 {
        return Labels::new();
    }
    Labels::parse([format!("env=prod-{r}"), "host=build-7".to_owned()]).unwrap()
}

/// Drives one run per script, in order: each step as its act says, then
/// `complete` (a rejected push ends the run; even runs are labelled).
pub async fn populate(store: &Store, scripts: &[Vec<Act>]) {
    populate_as(store, scripts, "").await
}

/// [`populate`] with run and row ids that start with `prefix`.
pub async fn populate_as(store: &Store, scripts: &[Vec<Act>], prefix: &str) {
    let clock = stepping_clock();
    let rec = Recorder::default();
    let ids = sequential_ids(&format!("{prefix}id"));
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let push = Arc::new(Counting::new("push", SideEffect::RemoteMutation));
    let driver = |decisions: Vec<(Decision, bool)>| {
        Driver::new(
            config(
                store,
                DefaultPolicy,
                shared(vec![read.clone(), push.clone()]),
                &clock,
                &rec,
            )
            .with_ids(ids.clone())
            .with_model(model_config()),
            Asking(decisions.into()),
        )
        .unwrap()
    };
    let operator = Operator::new(store.clone()).with_clock(clock.clock());
    for (r, script) in scripts.iter().enumerate() {
        let run_id = format!("{prefix}run{r}");
        let mut segments: Vec<(Vec<Scripted>, Option<Act>)> = vec![(Vec::new(), None)];
        for (i, act) in script.iter().enumerate() {
            let last = segments.last_mut().unwrap();
            last.0.push((decision(*act, i), *act == Act::AskedRead));
            if matches!(act, Act::PushApproved | Act::PushRejected) {
                last.1 = Some(*act);
                segments.push((Vec::new(), None));
            }
        }
        segments
            .last_mut()
            .unwrap()
            .0
            .push((Decision::complete("true"), false));
        for (n, (decisions, pause)) in segments.into_iter().enumerate() {
            let mut d = driver(decisions);
            let run = if n == 0 {
                d.start_labelled(
                    Some(&run_id),
                    &format!("goal {r}"),
                    Limits::default(),
                    run_labels(r),
                )
                .await
                .unwrap()
            } else {
                d.resume(&run_id).await.unwrap()
            };
            let Some(act) = pause else {
                assert!(run.status.is_terminal(), "{run:?}");
                break;
            };
            assert_eq!(run.status, RunStatus::WaitingForApproval);
            let approval = store.list_approvals(&run_id).unwrap().pop().unwrap();
            let options = DecideOptions {
                by: "alice",
                note: "checked",
                shown_hash: None,
            };
            if act == Act::PushApproved {
                operator.approve(&run_id, &approval.id, &options).unwrap();
            } else {
                operator.reject(&run_id, &approval.id, &options).unwrap();
                break;
            }
        }
    }
}

/// The scripts of the fixed database: an approved push, reads (one long,
/// two decided by asking the model), an invalid decision, and a rejected
/// push, over three runs.
pub fn fixed_scripts() -> Vec<Vec<Act>> {
    vec![
        vec![Act::Read, Act::AskedRead, Act::PushApproved, Act::Read],
        vec![Act::Invalid, Act::LongRead, Act::AskedRead],
        vec![Act::Read, Act::PushRejected],
    ]
}
