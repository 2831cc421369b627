//! A new run for a call: its index row claimed in the run's first write
//! group, the call proposed in its first step, and what the verdict leads
//! to (execute, end the run refused, or pause).

use agentrt::{
    Decision, Labels, Limits, RunStatus, Timestamp, ToolSpec, VerdictOutcome, gate::Session,
    model::Origin,
};

use super::seen::SETTLE_MAX;
use super::{Claiming, Next, Plan, Proxy, end_run, millis};
use agentrt_cedar::RECENT_LABEL_PREFIX;

use crate::answer;
use crate::caller::Asker;
use crate::index::{self, CallRow};
use crate::key_state::INTERRUPTION;
use crate::repeat::Attempt;

impl Proxy {
    /// Begins a new run for a call, its index row (closing the key's
    /// finished one) in the run's first write group, with the rows seen
    /// settled (`settled`, and those this process saw settle) closed.
    pub(super) async fn begin(
        &self,
        spec: &ToolSpec,
        key: Option<&str>,
        claiming: Claiming,
        asker: Asker<'_>,
        rerun: Option<Attempt>,
        mut settled: Vec<String>,
    ) -> Plan {
        let config = &self.config;
        let run_id = format!("{}.{}", config.session, &agentrt::ids::random_id()[..16]);
        let server = self
            .origins
            .get(&spec.name)
            .map(|o| o.0.clone())
            .unwrap_or_default();
        let mut labels = vec![
            format!("mcp.session={}", config.session),
            format!("mcp.server={server}"),
            format!("mcp.tool={}", spec.name),
        ];
        if let Some(id) = asker.http_session {
            labels.push(format!("mcp.http_session={id}"));
        }
        if let Some(identity) = asker.identity {
            labels.extend(identity.labels());
        }
        // The Cedar policies' windows: this session's earlier calls of the
        // tool, counted before the run begins and recorded as its labels
        // (so a re-check sees the counts the decision saw).
        if !config.windows.is_empty() {
            let (session, tool) = (config.session.clone(), spec.name.clone());
            let windows = config.windows.clone();
            let counted = self
                .off_executor(move |store| {
                    index::recent_counts(store, &session, &tool, Timestamp::now(), &windows)
                })
                .await;
            let Ok(counts) = counted else {
                return Plan::Unavailable;
            };
            for (window, count) in counts {
                labels.push(format!("{RECENT_LABEL_PREFIX}{window}={count}"));
            }
        }
        let labels = Labels::parse(labels);
        let Ok(labels) = labels else {
            return Plan::Unavailable;
        };
        let limits = Limits {
            max_steps: 3,
            max_consecutive_tool_failures: 3,
            loop_threshold: 3,
            approval_ttl_ms: millis(config.approval_ttl),
            grant_ttl_ms: millis(config.grant_ttl),
            ..Limits::default()
        };
        // A call without a key (arguments the canonical form refuses)
        // still gets a row, keyed by its own run, so it matches nothing.
        let row = CallRow {
            run_id: run_id.clone(),
            session: config.session.clone(),
            request_key: key.map_or_else(|| format!("none:{run_id}"), str::to_owned),
            tool: spec.name.clone(),
            side_effect: spec.side_effect.as_str().to_owned(),
            created_at: String::new(),
            open: true,
        };
        let at = Timestamp::now();
        settled.extend(self.settled.take(SETTLE_MAX.saturating_sub(settled.len())));
        settled.truncate(SETTLE_MAX);
        let settling = settled.clone();
        let rows: agentrt::gate::SatelliteRows = Box::new(move |tx| {
            match claiming {
                Claiming::New => index::claim_new(tx, &row, at)?,
                Claiming::After(previous) => index::claim(tx, &row, previous.as_deref(), at)?,
            }
            for run_id in &settling {
                index::settle(tx, run_id, at)?;
            }
            Ok(())
        });
        let goal = format!("call {}", spec.name);
        // Rule 6: the policy asks about the earlier attempt this run
        // re-runs (told before the run's request is proposed).
        if let Some(attempt) = rerun
            && let Ok(mut reruns) = self.reruns.lock()
        {
            reruns.insert(run_id.clone(), attempt);
        }
        // The run's creation and its claim are written with the first
        // step's verdict (the tool's start, a refusal or the approval
        // asked): two commits per call in all. A refused claim shows in
        // `first_step`, nothing written; beginning itself writes nothing.
        match self
            .gate
            .begin_deferred_with_rows(Some(&run_id), &goal, limits, labels, rows)
            .await
        {
            Ok(session) => Plan::Began(Box::new(session), settled),
            Err(_) => {
                // The rows stay open until a later run.
                self.settled.put_back(settled);
                Plan::Unavailable
            }
        }
    }

    /// Closes a run's session, and lists `settling` again when nothing of
    /// the run was written (its first write group carried them); whether
    /// anything was.
    pub(super) async fn close_began(&self, session: &mut Session, settling: Vec<String>) -> bool {
        let _ = session.close().await;
        let stored = session.stored();
        if !stored {
            self.settled.put_back(settling);
        }
        stored
    }

    /// Proposes the model's call in the run's first step: the answer, or
    /// the approval to hold on. `settling`: the runs the run's first write
    /// group settles, listed again when nothing was written.
    pub(super) async fn first_step(
        &self,
        mut session: Session,
        settling: Vec<String>,
        name: &str,
        args: Vec<u8>,
    ) -> Next {
        let next = async {
            session.step().await?;
            let decision = Decision::tool_call(name, args).with_origin(Origin::Model);
            let verdict = session.propose(decision).await?;
            self.after_verdict(&mut session, verdict).await
        }
        .await;
        let stored = self.close_began(&mut session, settling).await;
        // The session holds the run's claim until dropped: a hold that
        // collects the approval attaches to the run anew.
        drop(session);
        match next {
            Ok(next) => next,
            // The run's deferred first write was refused: nothing was
            // stored and nothing ran.
            Err(e) if !stored && (index::is_seen(&e) || index::is_lost_race(&e)) => Next::Again,
            Err(_) => Next::Done(answer::unavailable(true)),
        }
    }

    /// What a verdict leads to: execute, end the run refused, or pause.
    pub(super) async fn after_verdict(
        &self,
        session: &mut Session,
        verdict: agentrt::Verdict,
    ) -> agentrt::Result<Next> {
        let answer = match verdict.outcome {
            VerdictOutcome::Allowed => {
                let observation = session.execute().await?;
                let answer = answer::observed(&observation);
                if session.run().status == RunStatus::WaitingForApproval {
                    // An unknown outcome paused the run on an interruption
                    // (the session holds the approval it wrote: no read).
                    let approval = session.waiting_approval().map(|a| a.id.as_str());
                    return Ok(Next::Done(answer::unknown_outcome(approval)));
                }
                if !session.done() {
                    end_run(session, "one call per run: the tool reported an error").await?;
                }
                // The tool ran with a known outcome (or is a read): the
                // row has settled.
                self.settled.push(&session.run().id);
                answer
            }
            VerdictOutcome::Denied => {
                let answer = verdict
                    .observation
                    .as_ref()
                    .map_or_else(|| answer::denied(""), answer::observed);
                end_run(session, "one call per run: the request was refused").await?;
                // A refused read has settled; a refused change leaves its
                // request's last attempt as it was (rule 7 looks).
                let read = verdict.request.as_ref().map(|r| r.spec.side_effect);
                if read == Some(agentrt::SideEffect::ReadOnly) {
                    self.settled.push(&session.run().id);
                }
                answer
            }
            VerdictOutcome::Pending => {
                let Some(approval) = verdict.approval else {
                    return Ok(Next::Done(answer::unavailable(false)));
                };
                let tool = verdict.request.as_ref().map(|r| r.spec.name.as_str());
                self.notice(
                    &approval.id,
                    &approval.kind,
                    &verdict.run.id,
                    tool.unwrap_or(""),
                );
                return Ok(Next::Hold {
                    run_id: verdict.run.id.clone(),
                    interruption: approval.kind == INTERRUPTION,
                    approval_id: approval.id,
                });
            }
            VerdictOutcome::Ended | VerdictOutcome::Open => answer::unavailable(false),
        };
        Ok(Next::Done(answer))
    }
}
