//! Event payloads, as stored. Canonical values are embedded as raw JSON.

use serde::Serialize;

use crate::json::Canonical;
use crate::model::{
    Labels, Limits, ModelCall, Observation, Outcome, PolicyDecision, Run, RunStatus, TerminalReason,
};

fn encode<T: Serialize>(value: &T) -> String {
    // Every payload type here serialises: strings, integers and canonical
    // JSON only. An empty object stands in if that ever stops being true.
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

pub(crate) fn empty() -> String {
    "{}".to_owned()
}

#[derive(Serialize)]
struct RunCreated<'a> {
    goal: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<Canonical>,
    limits: &'a Limits,
    tools: Vec<&'a str>,
}

/// `{goal, labels?, limits, tools}`: `labels` (the canonical object
/// `run_labels` holds) only for a run begun with labels, so a run without
/// any records the same bytes as before labels existed.
pub(crate) fn run_created(
    goal: &str,
    labels: &Labels,
    limits: &Limits,
    tools: Vec<&str>,
) -> String {
    encode(&RunCreated {
        goal,
        labels: (!labels.is_empty()).then(|| labels.to_canonical()),
        limits,
        tools,
    })
}

pub(crate) fn step_started(index: u64) -> String {
    format!("{{\"index\":{index}}}")
}

/// What the policy was handed of the run (counts of steps and approvals).
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ViewCounts {
    pub status: RunStatus,
    pub step_count: u64,
    pub model_calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub estimated_cost_micros: i64,
    pub active_ms: u64,
    pub steps: u64,
    pub approvals: u64,
}

impl ViewCounts {
    pub fn of(run: &Run, steps: usize, approvals: usize) -> ViewCounts {
        ViewCounts {
            status: run.status,
            step_count: run.step_count,
            model_calls: run.model_calls,
            input_tokens: run.usage.input_tokens,
            output_tokens: run.usage.output_tokens,
            cached_input_tokens: run.usage.cached_input_tokens,
            estimated_cost_micros: run.estimated_cost_micros,
            active_ms: run.active_ms,
            steps: steps as u64,
            approvals: approvals as u64,
        }
    }
}

#[derive(Serialize)]
struct StepPolicy<'a> {
    outcome: Outcome,
    #[serde(skip_serializing_if = "str::is_empty")]
    reason: &'a str,
    #[serde(skip_serializing_if = "str::is_empty")]
    kind: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    capability: Option<&'a Canonical>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presentation: Option<&'a Canonical>,
    #[serde(skip_serializing_if = "one")]
    approvers: u8,
    #[serde(skip_serializing_if = "str::is_empty")]
    policy_id: &'a str,
    spec_hash: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    view: Option<ViewCounts>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn one(n: &u8) -> bool {
    *n == 1
}

pub(crate) fn step_policy(
    decision: &PolicyDecision,
    policy_id: &str,
    spec_hash: &str,
    view: Option<ViewCounts>,
) -> String {
    encode(&StepPolicy {
        outcome: decision.outcome,
        reason: &decision.reason,
        kind: &decision.kind,
        capability: decision.capability.as_ref(),
        presentation: decision.presentation.as_ref(),
        approvers: decision.approvers,
        policy_id,
        spec_hash,
        view,
    })
}

#[derive(Serialize)]
struct ToolStarted<'a> {
    tool: &'a str,
    args: &'a Canonical,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
}

pub(crate) fn tool_started(tool: &str, args: &Canonical, approval_id: Option<&str>) -> String {
    encode(&ToolStarted {
        tool,
        args,
        approval_id,
    })
}

#[derive(Serialize)]
struct ToolFinished<'a> {
    tool: &'a str,
    duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_hash: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    late: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    observation: Option<&'a Observation>,
}

/// `{tool, duration_ms, summary, content_hash}` for a result,
/// `{tool, duration_ms, error}` for a failure; a late one (after an
/// operator's cancel) adds `late` and the observation.
pub(crate) fn tool_finished(
    tool: &str,
    duration_ms: u64,
    observation: &Observation,
    late: bool,
) -> String {
    let failed = observation.is_failure();
    encode(&ToolFinished {
        tool,
        duration_ms,
        summary: (!failed).then_some(observation.summary.as_str()),
        content_hash: (!failed).then_some(observation.content_hash.as_str()),
        error: failed.then_some(observation.summary.as_str()),
        late,
        observation: late.then_some(observation),
    })
}

#[derive(Serialize)]
struct StepFailed<'a> {
    detail: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    observation: Option<&'a Observation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_hash: Option<&'a str>,
}

pub(crate) fn step_failed(detail: &str, observation: Option<&Observation>) -> String {
    encode(&StepFailed {
        detail,
        observation,
        content_hash: observation
            .map(|o| o.content_hash.as_str())
            .filter(|h| !h.is_empty()),
    })
}

#[derive(Serialize)]
struct ApprovalRequested<'a> {
    approval_id: &'a str,
    kind: &'a str,
    reason: &'a str,
    capability: &'a Canonical,
    presentation: &'a Canonical,
    hash: &'a str,
}

pub(crate) fn approval_requested(approval: &crate::model::Approval, reason: &str) -> String {
    encode(&ApprovalRequested {
        approval_id: &approval.id,
        kind: &approval.kind,
        reason,
        capability: &approval.capability,
        presentation: &approval.presentation,
        hash: &approval.hash,
    })
}

#[derive(Serialize)]
struct ApprovalDecided<'a> {
    approval_id: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    /// The first approver, when the approval needed two (design §46).
    #[serde(skip_serializing_if = "Option::is_none")]
    first_by: Option<&'a str>,
}

pub(crate) fn approval_decided(approval_id: &str, status: &str, by: &str, note: &str) -> String {
    approval_decided_after(approval_id, status, by, note, None)
}

/// `approval.decided` of an approval whose first approver was `first_by`.
pub(crate) fn approval_decided_after(
    approval_id: &str,
    status: &str,
    by: &str,
    note: &str,
    first_by: Option<&str>,
) -> String {
    encode(&ApprovalDecided {
        approval_id,
        status,
        by: Some(by),
        note: Some(note),
        first_by,
    })
}

#[derive(Serialize)]
struct ApprovalEndorsed<'a> {
    approval_id: &'a str,
    by: &'a str,
    note: &'a str,
    hash: &'a str,
    approvers: u8,
}

/// `approval.endorsed`: the first of the approvers a request needs.
pub(crate) fn approval_endorsed(
    approval: &crate::model::Approval,
    by: &str,
    note: &str,
    approvers: u8,
) -> String {
    encode(&ApprovalEndorsed {
        approval_id: &approval.id,
        by,
        note,
        hash: &approval.hash,
        approvers,
    })
}

pub(crate) fn approval_expired(approval_id: &str) -> String {
    encode(&ApprovalDecided {
        approval_id,
        status: "expired",
        by: None,
        note: None,
        first_by: None,
    })
}

/// What `approval.edited` records: the approval the edit replaced, the
/// approval of the edited request, and both sets of arguments.
pub(crate) struct ApprovalEditedFields<'a> {
    pub(crate) replaced: &'a str,
    pub(crate) edited: &'a crate::model::Approval,
    pub(crate) model_args: &'a Canonical,
    pub(crate) args: &'a Canonical,
}

#[derive(Serialize)]
struct ApprovalEdited<'a> {
    approval_id: &'a str,
    edited_approval_id: &'a str,
    by: &'a str,
    note: &'a str,
    model_args: &'a Canonical,
    args: &'a Canonical,
    kind: &'a str,
    hash: &'a str,
}

pub(crate) fn approval_edited(fields: &ApprovalEditedFields<'_>) -> String {
    encode(&ApprovalEdited {
        approval_id: fields.replaced,
        edited_approval_id: &fields.edited.id,
        by: &fields.edited.decided_by,
        note: &fields.edited.note,
        model_args: fields.model_args,
        args: fields.args,
        kind: &fields.edited.kind,
        hash: &fields.edited.hash,
    })
}

#[derive(Serialize)]
struct ApprovalEditRefused<'a> {
    approval_id: &'a str,
    reason: &'a str,
    restored_approval_id: &'a str,
}

pub(crate) fn approval_edit_refused(approval_id: &str, reason: &str, restored: &str) -> String {
    encode(&ApprovalEditRefused {
        approval_id,
        reason,
        restored_approval_id: restored,
    })
}

#[derive(Serialize)]
struct RunFinished<'a> {
    status: RunStatus,
    reason: TerminalReason,
    detail: &'a str,
    steps: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    by: Option<&'a str>,
}

pub(crate) fn run_finished(
    status: RunStatus,
    reason: TerminalReason,
    detail: &str,
    steps: u64,
    by: Option<&str>,
) -> String {
    encode(&RunFinished {
        status,
        reason,
        detail,
        steps,
        by,
    })
}

#[derive(Serialize)]
struct LimitExceeded<'a> {
    reason: TerminalReason,
    detail: &'a str,
}

pub(crate) fn limit_exceeded(reason: TerminalReason, detail: &str) -> String {
    encode(&LimitExceeded { reason, detail })
}

#[derive(Serialize)]
struct LoopDetected<'a> {
    repeats: u64,
    tool: &'a str,
    args_hash: &'a str,
    observation_hash: &'a str,
}

pub(crate) fn loop_detected(
    repeats: u64,
    tool: &str,
    args_hash: &str,
    observation_hash: &str,
) -> String {
    encode(&LoopDetected {
        repeats,
        tool,
        args_hash,
        observation_hash,
    })
}

#[derive(Serialize)]
struct RunResumed<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<&'a str>,
}

pub(crate) fn run_resumed_approval(approval_id: &str) -> String {
    encode(&RunResumed {
        approval_id: Some(approval_id),
        after: None,
    })
}

#[derive(Serialize)]
struct ApprovalSuperseded<'a> {
    approval_id: &'a str,
    latest_approval_id: &'a str,
    owner: &'a str,
}

/// `approval.superseded`: the grant a session held, the approval that
/// superseded it, and the session's lease owner.
pub(crate) fn approval_superseded(approval_id: &str, latest: &str, owner: &str) -> String {
    encode(&ApprovalSuperseded {
        approval_id,
        latest_approval_id: latest,
        owner,
    })
}

// The model and lease payloads below were first written from `json!`
// maps, whose keys serde_json sorted: their fields are declared in that
// order so the bytes stay the same, and stay the same when another crate
// turns on serde_json's `preserve_order` (a `json!` map would then keep
// the order it was written in, and the chained bytes would change).

#[derive(Serialize)]
struct ModelDispatched<'a> {
    attempt: u32,
    call_id: &'a str,
    model: &'a str,
}

/// `model.dispatched`: `{attempt, call_id, model}`.
pub(crate) fn model_dispatched(call_id: &str, attempt: u32, model: &str) -> String {
    encode(&ModelDispatched {
        attempt,
        call_id,
        model,
    })
}

/// Token counts in key order (the order of [`Usage`]'s fields is not).
#[derive(Serialize)]
struct UsageInKeyOrder {
    cached_input_tokens: u64,
    input_tokens: u64,
    output_tokens: u64,
}

#[derive(Serialize)]
struct ModelEnded<'a> {
    attempt: u32,
    call_id: &'a str,
    cost_micros: i64,
    error: &'a str,
    latency_ms: u64,
    model: &'a str,
    status: &'a str,
    usage: UsageInKeyOrder,
}

/// `model.completed` / `model.failed`: the attempt's record as charged,
/// `{attempt, call_id, cost_micros, error, latency_ms, model, status,
/// usage: {cached_input_tokens, input_tokens, output_tokens}}`.
pub(crate) fn model_ended(call: &ModelCall) -> String {
    encode(&ModelEnded {
        attempt: call.attempt,
        call_id: &call.id,
        cost_micros: call.cost_micros,
        error: &call.error,
        latency_ms: call.latency_ms,
        model: &call.model,
        status: call.status.as_str(),
        usage: UsageInKeyOrder {
            cached_input_tokens: call.usage.cached_input_tokens,
            input_tokens: call.usage.input_tokens,
            output_tokens: call.usage.output_tokens,
        },
    })
}

#[derive(Serialize)]
struct LeaseTakenOver<'a> {
    owner: &'a str,
    previous_expires_at: &'a str,
    previous_owner: &'a str,
}

/// `lease.taken_over`: the new owner, and the lease it took over.
pub(crate) fn lease_taken_over(
    owner: &str,
    previous_owner: &str,
    previous_expires: &str,
) -> String {
    encode(&LeaseTakenOver {
        owner,
        previous_expires_at: previous_expires,
        previous_owner,
    })
}

#[derive(Serialize)]
struct PolicyShadow<'a> {
    enforced: &'a str,
    reason: &'a str,
    shadow: &'a str,
    shadow_policy_id: &'a str,
}

/// `policy.shadow`: `{enforced, reason, shadow, shadow_policy_id}`, the
/// outcome the policy gave and the one the shadow policy would have given
/// (`error` when it failed), with the shadow's reason.
pub(crate) fn policy_shadow(
    enforced: Outcome,
    shadow: Option<Outcome>,
    reason: &str,
    shadow_policy_id: &str,
) -> String {
    encode(&PolicyShadow {
        enforced: enforced.as_str(),
        reason,
        shadow: shadow.map_or("error", |o| o.as_str()),
        shadow_policy_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CallStatus, Usage};

    // These bytes are what the `json!` maps wrote before: chained logs
    // already hold them. Run under `preserve_order` too (the workspace
    // build, where agentrt-cedar turns it on).
    #[test]
    fn model_and_lease_payloads_keep_their_key_order_whatever_serde_json_features() {
        assert_eq!(
            model_dispatched("c-1", 2, "m"),
            r#"{"attempt":2,"call_id":"c-1","model":"m"}"#
        );
        let call = ModelCall {
            id: "c-1".into(),
            attempt: 1,
            status: CallStatus::Ok,
            model: "m".into(),
            usage: Usage {
                input_tokens: 7,
                output_tokens: 3,
                cached_input_tokens: 1,
            },
            cost_micros: 12,
            latency_ms: 250,
            error: String::new(),
            run_id: "r".into(),
            step_id: "s".into(),
            dispatched_at: crate::clock::Timestamp::from_unix_nanos(0),
            completed_at: None,
        };
        assert_eq!(
            model_ended(&call),
            r#"{"attempt":1,"call_id":"c-1","cost_micros":12,"error":"","latency_ms":250,"model":"m","status":"ok","usage":{"cached_input_tokens":1,"input_tokens":7,"output_tokens":3}}"#
        );
        assert_eq!(
            lease_taken_over("b", "a", "2026-01-01T00:00:00.000000000Z"),
            r#"{"owner":"b","previous_expires_at":"2026-01-01T00:00:00.000000000Z","previous_owner":"a"}"#
        );
    }
}
