//! Edit, then approve: an operator replaces a paused request's arguments;
//! the edited request is checked, bound by hash, judged by the policy on
//! resume, run once, and the model is told.

use crate::engine;

use std::sync::Arc;

use crate::common::*;
use agentrt::model::{OperatorEdit, StepStatus};
use agentrt::render::{self, RenderOptions};
use agentrt::*;
use agentrt::{clock::ManualClock, ids::IdSource, ids::sequential_ids};

const MODEL_ARGS: &str = r#"{"branch":"fix-typo","title":"Fix the typo"}"#;

/// A push whose arguments must name a branch and a title.
fn push_tool() -> Arc<Counting> {
    let mut push = Counting::new("push", SideEffect::RemoteMutation);
    push.spec = push
        .spec
        .clone()
        .with_schema_str(
            r#"{"type":"object","properties":{"branch":{"type":"string"},"title":{"type":"string"}},"required":["branch","title"],"additionalProperties":false}"#,
        )
        .unwrap();
    Arc::new(push)
}

/// Remote pushes wait for an operator; a push to `main` is denied; a push
/// to `prod` waits for another kind of approval.
struct Branches;

impl Policy for Branches {
    fn evaluate(
        &self,
        request: &ToolRequest,
        _view: &RunView,
    ) -> std::result::Result<PolicyDecision, PolicyError> {
        let args = request.args.to_value();
        let branch = args["branch"].as_str().unwrap_or_default();
        let both = agentrt::policy::tool_and_args(request);
        Ok(match branch {
            "main" => PolicyDecision::deny("nobody pushes to main"),
            "prod" => PolicyDecision::need_approval(
                "production",
                "production needs its own approval",
                Some(both.clone()),
                Some(both),
            ),
            _ => PolicyDecision::need_approval(
                "remote_mutation",
                "pushes need an operator",
                Some(both.clone()),
                Some(both),
            ),
        })
    }

    fn policy_id(&self) -> Option<String> {
        Some("branches-v1".into())
    }
}

struct Fixture {
    ids: IdSource,
    store: Store,
    clock: ManualClock,
    rec: Recorder,
    push: Arc<Counting>,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            ids: sequential_ids("id"),
            store: engine::store(),
            clock: stepping_clock(),
            rec: Recorder::default(),
            push: push_tool(),
        }
    }

    fn driver(&self, decisions: Vec<Decision>) -> Driver<ScriptedAgent> {
        Driver::new(
            config(
                &self.store,
                Branches,
                shared(vec![self.push.clone()]),
                &self.clock,
                &self.rec,
            )
            .with_ids(self.ids.clone()),
            ScriptedAgent::new(decisions),
        )
        .unwrap()
    }

    async fn paused(&self) -> Approval {
        let mut d = self.driver(vec![Decision::tool_call("push", MODEL_ARGS)]);
        let run = d
            .start(Some("r"), "publish", Limits::default())
            .await
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval);
        self.store.list_approvals("r").unwrap().pop().unwrap()
    }

    fn operator(&self) -> Operator {
        Operator::new(self.store.clone())
            .with_clock(self.clock.clock())
            .with_ids(self.ids.clone())
    }

    fn edit(&self, approval: &Approval, args: &str) -> Result<Approval> {
        self.operator().approve_edited(
            "r",
            &approval.id,
            args,
            &DecideOptions {
                by: "alice",
                note: "a branch of our naming",
                shown_hash: Some(&approval.hash),
            },
        )
    }

    async fn resume(&self) -> Run {
        let mut d = self.driver(vec![Decision::complete("\"pushed\"")]);
        d.resume("r").await.unwrap()
    }

    /// The text of the edited step's result as a model agent renders it
    /// for the step after it, from the run's record.
    fn rendered_after_resume(&self) -> String {
        let steps = self.store.list_steps("r").unwrap();
        let run = self.store.get_run("r").unwrap();
        let input = agent::StepInput {
            run,
            steps: Arc::new(steps.into_iter().map(Arc::new).collect()),
            approvals: Arc::new(self.store.list_approvals("r").unwrap()),
            tools: Arc::new(vec![self.push.spec.clone()]),
            model: None,
        };
        let request = render::request(&input, &RenderOptions::new(|_| "publish".into()));
        let result = request
            .messages
            .iter()
            .flat_map(|m| m.content.iter())
            .find(|block| block.kind == llm::BlockKind::ToolResult)
            .map(|block| block.content.clone());
        result.expect("the edited call's result is rendered")
    }

    fn ran(&self) -> Vec<String> {
        let seen = self.push.seen.lock().unwrap();
        seen.iter().map(|c| c.args.as_str().to_owned()).collect()
    }

    fn events(&self) -> Vec<Event> {
        self.store.list_events("r").unwrap()
    }

    fn payload(&self, kind: EventType) -> serde_json::Value {
        let event = self
            .events()
            .into_iter()
            .rev()
            .find(|e| e.event_type == kind)
            .unwrap_or_else(|| panic!("no {kind} event"));
        serde_json::from_str(&event.payload).unwrap()
    }

    fn intact(&self) -> bool {
        verify::verify(&self.store, &Default::default())
            .unwrap()
            .intact()
    }
}

#[tokio::test]
async fn an_edited_request_runs_once_with_the_operators_arguments_and_the_model_is_told() {
    let f = Fixture::new();
    let original = f.paused().await;
    let edited_args = r#"{"title":"Fix the typo in README.md","branch":"docs/typo"}"#;
    let edited = f.edit(&original, edited_args).unwrap();

    assert_eq!(edited.status, ApprovalStatus::Approved);
    assert_ne!(edited.id, original.id);
    assert_eq!(edited.step_id, original.step_id);
    assert_eq!(
        edited.request.get("args").unwrap().as_str(),
        r#"{"branch":"docs/typo","title":"Fix the typo in README.md"}"#
    );
    assert_ne!(edited.hash, original.hash, "the edit binds its own request");
    let replaced = f.store.get_approval("r", &original.id).unwrap();
    assert_eq!(replaced.status, ApprovalStatus::Edited);
    assert_eq!(replaced.decided_by, "alice");
    let recorded = f.payload(EventType::ApprovalEdited);
    assert_eq!(recorded["approval_id"], original.id.as_str());
    assert_eq!(recorded["edited_approval_id"], edited.id.as_str());
    assert_eq!(
        recorded["model_args"],
        serde_json::json!({"branch":"fix-typo","title":"Fix the typo"})
    );
    assert_eq!(
        recorded["args"],
        serde_json::json!({"branch":"docs/typo","title":"Fix the typo in README.md"})
    );
    assert_eq!(recorded["hash"], edited.hash.as_str());
    assert_eq!(
        f.store.get_run("r").unwrap().status,
        RunStatus::WaitingForApproval,
        "an edit does not resume"
    );
    assert!(f.ran().is_empty());

    // The policy asks an approval of the same kind for the edited request:
    // the operator who wrote it approved it; it runs, once.
    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(
        f.ran(),
        [r#"{"branch":"docs/typo","title":"Fix the typo in README.md"}"#]
    );
    let started = f.payload(EventType::StepToolStarted);
    assert_eq!(started["approval_id"], edited.id.as_str());
    assert_eq!(started["args"]["branch"], "docs/typo");

    // The step keeps the model's decision; its observation says what ran.
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(
        step.decision.as_ref().unwrap().args_or_empty().as_str(),
        MODEL_ARGS
    );
    let observation = step.observation.as_ref().unwrap();
    assert_eq!(
        observation.operator_edit,
        Some(OperatorEdit {
            args: Canonical::parse_str(edited_args).unwrap(),
            by: "alice".into(),
            note: "a branch of our naming".into(),
        })
    );
    // And the model is shown it, with the arguments the call ran with,
    // in the turn after the call.
    let shown = f.rendered_after_resume();
    let expected = format!(
        "{}{}{}a branch of our naming\n",
        render::OPERATOR_EDIT_PREFIX,
        r#"{"branch":"docs/typo","title":"Fix the typo in README.md"}"#,
        render::OPERATOR_EDIT_NOTE
    );
    assert!(shown.starts_with(&expected), "{shown}");
    assert!(f.intact());
}

#[tokio::test]
async fn an_edit_the_schema_refuses_or_that_is_no_edit_is_refused_and_nothing_is_written() {
    let f = Fixture::new();
    let original = f.paused().await;
    let before = f.events().len();
    for (args, says) in [
        (r#"{"branch":5,"title":"t"}"#, "push refuses them"),
        (
            r#"{"branch":"b","title":"t","force":true}"#,
            "push refuses them",
        ),
        (r#"["branch"]"#, "must be a JSON object"),
        (r#"{"branch":"b","#, "not acceptable JSON"),
        (
            r#"{"title":"Fix the typo","branch":"fix-typo"}"#,
            "the request's own",
        ),
    ] {
        let err = f.edit(&original, args).unwrap_err();
        assert!(
            matches!(&err, Error::EditRefused { detail, .. } if detail.contains(says)),
            "{args}: {err}"
        );
    }
    assert_eq!(f.events().len(), before, "nothing was written");
    let still = f.store.get_approval("r", &original.id).unwrap();
    assert_eq!(still.status, ApprovalStatus::Pending);
    // The approval can still be decided as it was.
    f.edit(&original, r#"{"branch":"b","title":"t"}"#).unwrap();
}

#[tokio::test]
async fn an_edit_the_policy_denies_is_refused_on_resume_and_the_replaced_request_waits_again() {
    let f = Fixture::new();
    let original = f.paused().await;
    let edited = f
        .edit(&original, r#"{"branch":"main","title":"Fix the typo"}"#)
        .unwrap();

    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::WaitingForApproval, "nothing decided");
    assert!(f.ran().is_empty(), "the denied edit never ran");
    let refused = f.payload(EventType::ApprovalEditRefused);
    assert_eq!(refused["approval_id"], edited.id.as_str());
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("nobody pushes to main"),
        "{refused}"
    );
    let approvals = f.store.list_approvals("r").unwrap();
    let restored = approvals.last().unwrap();
    assert_eq!(refused["restored_approval_id"], restored.id.as_str());
    assert_eq!(restored.status, ApprovalStatus::Pending);
    assert_eq!(
        restored.hash, original.hash,
        "the model's request, as before"
    );
    assert_eq!(restored.request, original.request);
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(step.status, StepStatus::AwaitingApproval);

    // The operator may now approve the model's request as it was.
    f.operator()
        .approve("r", &restored.id, &DecideOptions::default())
        .unwrap();
    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(f.ran(), [MODEL_ARGS]);
    let step = &f.store.list_steps("r").unwrap()[0];
    assert_eq!(step.observation.as_ref().unwrap().operator_edit, None);
    assert!(f.intact());
}

#[tokio::test]
async fn an_operator_holding_the_policy_refuses_a_denied_edit_at_once() {
    let f = Fixture::new();
    let original = f.paused().await;
    let before = f.events().len();
    let err = f
        .operator()
        .with_policy(Branches)
        .approve_edited(
            "r",
            &original.id,
            r#"{"branch":"main","title":"t"}"#,
            &DecideOptions::default(),
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::EditRefused { detail, .. } if detail.contains("nobody pushes to main")),
        "{err}"
    );
    assert_eq!(f.events().len(), before);
    // An edit it asks an approval for binds that approval exactly.
    let edited = f
        .operator()
        .with_policy(Branches)
        .approve_edited(
            "r",
            &original.id,
            r#"{"branch":"prod","title":"t"}"#,
            &DecideOptions::default(),
        )
        .unwrap();
    assert_eq!(edited.kind, "production");
    assert_eq!(
        edited.presentation.as_str(),
        r#"{"args":{"branch":"prod","title":"t"},"tool":"push"}"#
    );
    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(f.ran(), [r#"{"branch":"prod","title":"t"}"#]);
}

#[tokio::test]
async fn an_edit_the_policy_wants_another_kind_of_approval_for_pauses_again_and_recheck_judges_it()
{
    let f = Fixture::new();
    let original = f.paused().await;
    f.edit(&original, r#"{"branch":"prod","title":"Fix the typo"}"#)
        .unwrap();

    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::WaitingForApproval);
    assert!(f.ran().is_empty());
    let again = f.store.list_approvals("r").unwrap().pop().unwrap();
    assert_eq!(again.status, ApprovalStatus::Pending);
    assert_eq!(again.kind, "production");
    assert_eq!(
        again.request.get("args").unwrap().as_str(),
        r#"{"branch":"prod","title":"Fix the typo"}"#
    );

    f.operator()
        .approve("r", &again.id, &DecideOptions::default())
        .unwrap();
    let run = f.resume().await;
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(f.ran(), [r#"{"branch":"prod","title":"Fix the typo"}"#]);
    let step = &f.store.list_steps("r").unwrap()[0];
    let told = step.observation.as_ref().unwrap().operator_edit.as_ref();
    assert_eq!(told.map(|e| e.by.as_str()), Some("alice"));
    assert!(f.intact());

    // Every evaluation on resume was of the edited request: the policy the
    // run ran with answers each the same.
    let report = recheck::recheck(&f.store, "r", &Branches, &Default::default()).unwrap();
    assert!(report.rechecked() >= 3, "{report:?}");
    assert_eq!(report.differing_steps(), Vec::<u64>::new(), "{report:?}");
}

#[tokio::test]
async fn an_approval_an_edit_replaced_cannot_be_decided_again() {
    let f = Fixture::new();
    let original = f.paused().await;
    let before = f.events().len();
    f.edit(&original, r#"{"branch":"b","title":"t"}"#).unwrap();
    let err = f
        .edit(&original, r#"{"branch":"c","title":"t"}"#)
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotPending {
                status: ApprovalStatus::Edited,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(f.events().len(), before + 2);
}
