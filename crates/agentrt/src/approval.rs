//! Approvals: the hash that binds a decision to the exact request, and the
//! operator's decisions (approve, reject, cancel).

use crate::json::{Canonical, write_string};
use crate::model::{Approval, ApprovalStatus, ToolRequest};

/// The arguments a step's grant approved: those of the step's latest
/// approval when it is approved (an operator's edit may have changed
/// them), `None` when the step has no such grant.
pub(crate) fn granted_args(approvals: &[Approval], step_id: &str) -> Option<Canonical> {
    approvals
        .iter()
        .rev()
        .find(|a| a.step_id == step_id)
        .filter(|a| a.status == ApprovalStatus::Approved)
        .and_then(|a| a.request.get("args"))
}

/// The approval an operator's edit replaced last on a step: its request is
/// the one put back when the policy refuses the edit.
pub(crate) fn last_edited<'a>(approvals: &'a [Approval], step_id: &str) -> Option<&'a Approval> {
    approvals
        .iter()
        .rev()
        .find(|a| a.step_id == step_id && a.status == ApprovalStatus::Edited)
}

/// The canonical request an approval binds: `{"args","run_id","spec","step_id"}`.
pub fn request_json(request: &ToolRequest) -> crate::Result<Canonical> {
    approval_request(request, 1)
}

/// The canonical request of an approval that needs `approvers` distinct
/// people: [`request_json`]'s, with `"approvers"` first when more than
/// one (design §46), so the count is bound into the approval's hash and
/// an approval of one approver hashes as it always did.
///
/// ```
/// use agentrt::approval::approval_request;
/// # use agentrt::{ToolRequest, ToolSpec, SideEffect, Canonical};
/// # let request = ToolRequest { run_id: "r1".into(), step_id: "s1".into(),
/// #     spec: ToolSpec::new("push", "Push", SideEffect::RemoteMutation),
/// #     args: Canonical::parse_str("{}").unwrap() };
/// assert!(approval_request(&request, 2)?.as_str().starts_with(r#"{"approvers":2,"args":{}"#));
/// assert!(approval_request(&request, 1)?.as_str().starts_with(r#"{"args":{}"#));
/// # Ok::<(), agentrt::Error>(())
/// ```
pub fn approval_request(request: &ToolRequest, approvers: u8) -> crate::Result<Canonical> {
    let spec = request.spec.to_canonical()?;
    let mut out = String::with_capacity(
        request.args.as_str().len() + spec.as_str().len() + request.run_id.len() + 80,
    );
    if approvers > 1 {
        out.push_str("{\"approvers\":");
        out.push_str(&approvers.to_string());
        out.push_str(",\"args\":");
    } else {
        out.push_str("{\"args\":");
    }
    out.push_str(request.args.as_str());
    out.push_str(",\"run_id\":");
    write_string(&mut out, &request.run_id);
    out.push_str(",\"spec\":");
    out.push_str(spec.as_str());
    out.push_str(",\"step_id\":");
    write_string(&mut out, &request.step_id);
    out.push('}');
    Ok(Canonical::assume_canonical(out))
}

/// How many distinct people must approve `approval` (its request's
/// `"approvers"`, else 1).
pub fn approvers_needed(approval: &Approval) -> u8 {
    approval
        .request
        .get("approvers")
        .and_then(|n| n.as_str().parse::<u8>().ok())
        .unwrap_or(1)
}

/// Who approved `approval` first, while it waits for a second approver
/// (design §46): the decider recorded on a pending approval.
pub fn first_approver(approval: &Approval) -> Option<&str> {
    (approval.status == ApprovalStatus::Pending && !approval.decided_by.is_empty())
        .then_some(approval.decided_by.as_str())
}

/// The approval hash: BLAKE3 over the canonical
/// `{"capability","kind","presentation","request"}`.
///
/// Every spelling of the same request (whitespace, key order, escapes)
/// shares the hash; the decision's origin is outside it.
pub fn approval_hash(
    kind: &str,
    capability: &Canonical,
    presentation: &Canonical,
    request: &Canonical,
) -> String {
    let mut hasher = blake3::Hasher::new();
    let mut kind_text = String::with_capacity(kind.len() + 2);
    write_string(&mut kind_text, kind);
    for piece in [
        "{\"capability\":",
        capability.as_str(),
        ",\"kind\":",
        &kind_text,
        ",\"presentation\":",
        presentation.as_str(),
        ",\"request\":",
        request.as_str(),
        "}",
    ] {
        hasher.update(piece.as_bytes());
    }
    hasher.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{SideEffect, ToolSpec};

    fn golden_request() -> ToolRequest {
        ToolRequest {
            run_id: "r1".into(),
            step_id: "s1".into(),
            spec: ToolSpec::new("push", "push <main> & tag", SideEffect::RemoteMutation),
            args: Canonical::parse_str(r#"{"ref":"refs/heads/main","n":7}"#).unwrap(),
        }
    }

    #[test]
    fn approval_hash_golden() {
        let req = request_json(&golden_request()).unwrap();
        assert_eq!(
            req.as_str(),
            r#"{"args":{"n":7,"ref":"refs/heads/main"},"run_id":"r1","spec":{"description":"push <main> & tag","input_schema":{"type":"object"},"name":"push","side_effect":"remote_mutation","timeout_ms":30000},"step_id":"s1"}"#
        );
        let cap = Canonical::parse_str(r#"{"tool":"push","args":{"n":7}}"#).unwrap();
        let pres = Canonical::parse_str(r#"{"title":"Publish <PR> & tag","lines":1.0}"#).unwrap();
        let whole = format!(
            r#"{{"capability":{},"kind":"remote_mutation","presentation":{},"request":{}}}"#,
            cap, pres, req
        );
        // The hashed bytes are the canonical form of the whole object.
        assert_eq!(Canonical::parse_str(&whole).unwrap().as_str(), whole);
        let hash = approval_hash("remote_mutation", &cap, &pres, &req);
        assert_eq!(hash, blake3::hash(whole.as_bytes()).to_hex().as_str());
        assert_eq!(
            hash,
            "b8d717650de609d9a5557af714673bc01f717b8f9309118fa8bc7ffd3cb2f2f0"
        );
    }

    #[test]
    fn approval_hash_ignores_argument_spelling() {
        let mut a = golden_request();
        let req_a = request_json(&a).unwrap();
        a.args = Canonical::parse(b"{ \"n\" : 7 , \"ref\" : \"refs\\/heads\\/main\" }").unwrap();
        let req_b = request_json(&a).unwrap();
        let cap = Canonical::empty_object();
        assert_eq!(
            approval_hash("k", &cap, &cap, &req_a),
            approval_hash("k", &cap, &cap, &req_b)
        );
    }
}
