//! Edit, then approve: an operator replaces a pending request's arguments
//! and approves the edited request in one transaction. The approval the
//! edit replaced becomes `edited`; a new approval of the same step binds
//! the edited request by hash; `approval.edited` records both the model's
//! and the operator's arguments. On resume the policy is asked again about
//! the edited request (design §44).

use std::sync::Arc;

use super::{Decidable, DecideOptions, Operator, decidable, set_decided, write_rows};
use crate::approval::{approval_hash, request_json};
use crate::error::{Error, Result};
use crate::gate::SatelliteRows;
use crate::json::Canonical;
use crate::model::{
    Approval, ApprovalStatus, EventType, INTERRUPTED_SIDE_EFFECT, Outcome, Run, RunView, Step,
    StepStatus, ToolRequest, ToolSpec,
};
use crate::payload::{self, ApprovalEditedFields};
use crate::registry::ToolSchema;

/// What an edit binds when the operator asks no policy, or the policy
/// allows the edited request: the kind, capability and presentation of
/// the approval it replaced.
struct Binding {
    kind: String,
    capability: Canonical,
    presentation: Canonical,
}

enum Edited {
    Done(Box<Approval>),
    Expired(String),
}

impl Operator {
    /// Replaces the arguments of a pending approval's request with `args`
    /// (a JSON object) and approves the edited request. Returns the new
    /// approval, approved, that binds the edited request; the one it
    /// replaced is [`ApprovalStatus::Edited`].
    ///
    /// Refused with [`Error::EditRefused`], nothing written, when `args`
    /// is not a JSON object, equals the request's own arguments, fails the
    /// schema of the tool the request recorded, or belongs to an
    /// interrupted call (those are approved or rejected as they ran); and,
    /// with [`Operator::with_policy`], when that policy denies the edited
    /// request, ends the run on it, or fails. Every check of
    /// [`Operator::approve`] applies first.
    ///
    /// The run stays waiting: on resume the gate asks its policy about the
    /// edited request. It runs the edited call once if the policy allows
    /// it or asks for an approval of the same kind; pauses again for the
    /// approval the policy asks if it is of another kind; and refuses the
    /// edit if the policy denies it, putting back the request the edit
    /// replaced (`approval.edit_refused`). The step's observation then
    /// carries [`OperatorEdit`](crate::model::OperatorEdit).
    ///
    /// ```
    /// # use agentrt::{Operator, DecideOptions, Store};
    /// # let store = Store::open(":memory:")?;
    /// let operator = Operator::new(store);
    /// let options = DecideOptions { by: "alice", note: "one branch only", ..DecideOptions::default() };
    /// let refused = operator.approve_edited("no-run", "a1", r#"{"branch":"fix"}"#, &options);
    /// assert!(matches!(refused, Err(agentrt::Error::NotFound { .. })));
    /// # Ok::<(), agentrt::Error>(())
    /// ```
    pub fn approve_edited(
        &self,
        run_id: &str,
        approval_id: &str,
        args: &str,
        options: &DecideOptions<'_>,
    ) -> Result<Approval> {
        self.edit(run_id, approval_id, args, options, None)
    }

    /// [`Operator::approve_edited`] with a satellite's rows, as
    /// [`Operator::approve_with_rows`].
    pub fn approve_edited_with_rows(
        &self,
        run_id: &str,
        approval_id: &str,
        args: &str,
        options: &DecideOptions<'_>,
        rows: SatelliteRows,
    ) -> Result<Approval> {
        self.edit(run_id, approval_id, args, options, Some(rows))
    }

    fn edit(
        &self,
        run_id: &str,
        approval_id: &str,
        args: &str,
        options: &DecideOptions<'_>,
        rows: Option<SatelliteRows>,
    ) -> Result<Approval> {
        let refuse = |detail: String| Error::EditRefused {
            approval: approval_id.to_owned(),
            detail,
        };
        let args = Canonical::parse_str(args)
            .map_err(|e| refuse(format!("the arguments are not acceptable JSON: {e}")))?;
        if !args.is_object() {
            return Err(refuse("the arguments must be a JSON object".into()));
        }
        let edited = self.write(|tx| {
            write_rows(tx, rows)?;
            let now = (self.clock)();
            let (run, approval) = match decidable(tx, run_id, approval_id, options, now)? {
                Decidable::Ready { run, approval } => (run, approval),
                Decidable::Expired(id) => return Ok(Edited::Expired(id)),
            };
            if approval.kind == INTERRUPTED_SIDE_EFFECT {
                return Err(refuse(
                    "an interrupted call is approved or rejected as it ran; it cannot be edited"
                        .into(),
                ));
            }
            if crate::approval::approvers_needed(&approval) > 1 {
                // Two people approve one request (design §46): an edit by
                // one would be a request the other never saw.
                return Err(refuse(
                    "it needs two approvers, who approve or reject the request as asked".into(),
                ));
            }
            let request = edited_request(&approval, &args).map_err(refuse)?;
            let steps = tx.steps(&run.id)?;
            let model_args = model_args(&steps, &run, &approval)?;
            let binding = match &self.policy {
                None => Binding::of(&approval),
                Some(policy) => {
                    let approvals = tx.approvals(&run.id)?;
                    ask(policy.as_ref(), &run, steps, approvals, &approval, &request)
                        .map_err(refuse)?
                }
            };
            let request_text = request_json(&request)?;
            let hash = approval_hash(
                &binding.kind,
                &binding.capability,
                &binding.presentation,
                &request_text,
            );
            let replacement = Approval {
                id: (self.ids)(),
                run_id: run.id.clone(),
                step_id: approval.step_id.clone(),
                kind: binding.kind,
                capability: binding.capability,
                presentation: binding.presentation,
                request: request_text,
                hash,
                status: ApprovalStatus::Approved,
                created_at: now,
                expires_at: None,
                decided_at: Some(now),
                decided_by: options.by.to_owned(),
                note: options.note.to_owned(),
                decode_error: None,
            };
            set_decided(tx, &approval, ApprovalStatus::Edited, options, now, None)?;
            tx.insert_approval(&replacement)?;
            tx.append_event(
                run_id,
                &approval.step_id,
                &now,
                EventType::ApprovalDecided,
                &payload::approval_decided(
                    &approval.id,
                    ApprovalStatus::Edited.as_str(),
                    options.by,
                    options.note,
                ),
            )?;
            tx.append_event(
                run_id,
                &approval.step_id,
                &now,
                EventType::ApprovalEdited,
                &payload::approval_edited(&ApprovalEditedFields {
                    replaced: &approval.id,
                    edited: &replacement,
                    model_args: &model_args,
                    args: &args,
                }),
            )?;
            Ok(Edited::Done(Box::new(replacement)))
        })?;
        match edited {
            Edited::Done(approval) => Ok(*approval),
            Edited::Expired(id) => Err(Error::ApprovalExpired { approval: id }),
        }
    }
}

impl Binding {
    fn of(approval: &Approval) -> Binding {
        Binding {
            kind: approval.kind.clone(),
            capability: approval.capability.clone(),
            presentation: approval.presentation.clone(),
        }
    }
}

/// The approval's request with `args` in place of its own: checked against
/// the schema of the tool spec the request recorded (the one the model
/// was shown and the approval binds).
fn edited_request(
    approval: &Approval,
    args: &Canonical,
) -> std::result::Result<ToolRequest, String> {
    let recorded = |what: &str| format!("the approval's request has no readable {what}");
    let spec_json = approval
        .request
        .get("spec")
        .ok_or_else(|| recorded("spec"))?;
    let spec: ToolSpec =
        serde_json::from_str(spec_json.as_str()).map_err(|_| recorded("tool spec"))?;
    if approval.request.get("args").as_ref() == Some(args) {
        return Err("the arguments are the request's own; approve it instead".into());
    }
    ToolSchema::compile(&spec.input_schema)
        .and_then(|schema| schema.check(args))
        .map_err(|problem| format!("{} refuses them: {problem}", spec.name))?;
    Ok(ToolRequest {
        run_id: approval.run_id.clone(),
        step_id: approval.step_id.clone(),
        spec,
        args: args.clone(),
    })
}

/// The arguments the model proposed: its recorded decision's, `{}` when
/// absent.
fn model_args(steps: &[Step], run: &Run, approval: &Approval) -> Result<Canonical> {
    let step = steps
        .iter()
        .find(|s| s.id == approval.step_id && s.status == StepStatus::AwaitingApproval)
        .ok_or_else(|| Error::RunState {
            run: run.id.clone(),
            status: run.status,
            detail: "the approval's step no longer awaits it; nothing was edited".into(),
        })?;
    Ok(step
        .decision
        .as_ref()
        .map(|d| d.args_or_empty())
        .unwrap_or_else(Canonical::empty_object))
}

/// The policy's answer about the edited request, as the gate will ask it
/// on resume (the run, the steps before the approval's step, every
/// approval): the binding it asks for, or why the edit is refused.
fn ask(
    policy: &dyn crate::policy::Policy,
    run: &Run,
    steps: Vec<Step>,
    approvals: Vec<Approval>,
    approval: &Approval,
    request: &ToolRequest,
) -> std::result::Result<Binding, String> {
    let before: Vec<Arc<Step>> = steps
        .into_iter()
        .take_while(|s| s.id != approval.step_id)
        .map(Arc::new)
        .collect();
    let view = RunView {
        run: run.clone(),
        steps: Arc::new(before),
        approvals: Arc::new(approvals),
    };
    let decision = crate::policy::evaluate_guarded(policy, request, &view)
        .map_err(|e| format!("the policy failed on the edited request: {e}"))?;
    match decision.outcome {
        Outcome::Allow => Ok(Binding::of(approval)),
        Outcome::RequireApproval => Ok(Binding {
            kind: decision.kind,
            capability: decision.capability.unwrap_or_else(Canonical::empty_object),
            presentation: decision
                .presentation
                .unwrap_or_else(Canonical::empty_object),
        }),
        Outcome::Deny | Outcome::Abort => Err(format!(
            "the policy {} the edited request: {}",
            if decision.outcome == Outcome::Deny {
                "denies"
            } else {
                "would end the run on"
            },
            decision.reason
        )),
    }
}
