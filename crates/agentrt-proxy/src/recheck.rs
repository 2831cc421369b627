//! `agentrt-proxy recheck` (design §19): the session's recorded calls,
//! from the proxy's index, re-checked under the configuration's policy
//! now. Read-only: the database is opened read-only and nothing is
//! written; no server is reached unless `--current-tools` asks to.
//!
//! The policy's rule-6 facts (which run re-ran which earlier attempt) are
//! rebuilt from the record: the attempt a run's approval named in its
//! capability's `interrupted` member.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;

use agentrt::recheck::RecheckOptions as CoreOptions;
use agentrt::{Store, ToolSpec, recheck::RecheckReport};

use crate::check::load_all;
use crate::config::Config;
use crate::database::Database;
use crate::error::ProxyError;
use crate::index::{session_rows, store_options};
use crate::pin::output_error;
use crate::policy::{ProxyPolicy, Reruns, ToolFacts};
use crate::reach::check_reach;

/// `recheck`'s options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecheckOptions {
    /// One run.
    pub run: Option<String>,
    /// Another session's runs (else the configuration's).
    pub session: Option<String>,
    /// The most runs (default 50).
    pub limit: u32,
    /// Connect to the servers and re-check against the tools as loaded now.
    pub current_tools: bool,
    /// Print the reports as one JSON array.
    pub json: bool,
}

/// The tools' facts from the rules alone (no server reached): the
/// model-visible name each rule gives.
fn facts_from_rules(config: &Config) -> BTreeMap<String, ToolFacts> {
    let mut facts = BTreeMap::new();
    for server in &config.servers {
        for (tool, rule) in &server.rules {
            let name = rule
                .rule
                .rename
                .clone()
                .unwrap_or_else(|| format!("{}_{tool}", server.server.name));
            facts.insert(
                name,
                ToolFacts {
                    server: server.server.name.clone(),
                    upstream: tool.clone(),
                    outcome: rule.outcome,
                    fixed: rule.rule.fixed.clone(),
                    approvers: rule.approvers,
                },
            );
        }
    }
    facts
}

/// Runs `recheck`: prints each report (text, or one JSON array) and the
/// summary; whether every run re-checked the same with at least one
/// decision re-checked.
pub async fn recheck(
    config: &Config,
    options: &RecheckOptions,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<bool, ProxyError> {
    let reruns: Reruns = Arc::default();
    let (facts, current) = if options.current_tools {
        check_reach(config)?;
        let loaded = load_all(config).await?;
        for report in &loaded.reports {
            let _ = err.write_all(report.as_bytes());
        }
        loaded.close().await;
        let mut facts = facts_from_rules(config);
        facts.retain(|name, _| loaded.tools.contains_key(name));
        let specs: Vec<ToolSpec> = loaded
            .tools
            .values()
            .map(|t| {
                let mut spec = t.spec();
                spec.terminal = true;
                spec
            })
            .collect();
        (facts, Some(specs))
    } else {
        (facts_from_rules(config), None)
    };
    // Without the servers, the Cedar policy is validated against the
    // tools as pinned: what the proxy would offer if each server listed
    // what was pinned.
    let cedar = match (&config.cedar, &current) {
        (None, _) => None,
        (Some(_), Some(specs)) => crate::cedar::load_cedar(config, specs)?,
        (Some(_), None) => crate::cedar::load_cedar(config, &crate::cedar::pinned_offer(config)?)?,
    };
    let policy = ProxyPolicy::with_cedar(config, facts, Arc::clone(&reruns), cedar);
    let id = agentrt::Policy::policy_id(&policy).unwrap_or_default();
    let (database, durability) = (config.database.clone(), config.durability);
    let session = options
        .session
        .clone()
        .unwrap_or_else(|| config.session.clone());
    let (run, limit) = (options.run.clone(), options.limit as usize);
    let reports = tokio::task::spawn_blocking(move || -> agentrt::Result<Vec<RecheckReport>> {
        let options = store_options(durability);
        let store = match &database {
            Database::File(path) => Store::open_existing_with(path, true, options)?,
            Database::Postgres(url) => Database::open_postgres(url, options, false)?,
        };
        let rows = session_rows(&store, &session)?;
        // Newest first; one run when asked for one.
        let ids: Vec<String> = rows
            .iter()
            .rev()
            .map(|r| r.run_id.clone())
            .filter(|id| run.as_ref().is_none_or(|wanted| wanted == id))
            .take(limit)
            .collect();
        let core = CoreOptions { tools: current };
        let mut reports = Vec::new();
        for id in ids {
            if let Some(attempt) = crate::policy::named_attempt(&store, &id)?
                && let Ok(mut r) = reruns.lock()
            {
                r.insert(id.clone(), attempt);
            }
            reports.push(agentrt::recheck::recheck(&store, &id, &policy, &core)?);
        }
        Ok(reports)
    })
    .await
    .map_err(|e| config.database.error(e.to_string()))??;
    if options.json {
        let text = serde_json::to_string_pretty(&reports).map_err(|e| ProxyError::Write {
            path: std::path::PathBuf::new(),
            detail: e.to_string(),
        })?;
        writeln!(out, "{text}").map_err(output_error)?;
    } else {
        for report in &reports {
            agentrt::recheck::write_recheck(report, out).map_err(output_error)?;
            writeln!(out).map_err(output_error)?;
        }
        let decided: usize = reports.iter().map(RecheckReport::rechecked).sum();
        let skipped: usize = reports.iter().map(RecheckReport::not_recheckable).sum();
        let differ = reports.iter().filter(|r| !r.same()).count();
        writeln!(
            out,
            "{} run(s) re-checked under {id}: {decided} decision(s) re-checked, {skipped} not re-checkable and skipped; {differ} run(s) differ",
            reports.len()
        )
        .map_err(output_error)?;
        writeln!(
            out,
            "covered: the gate's policy (the class map, each rule's outcome, fixed values, renames); \
             not covered: the duplicate rule, the repeat window, max_pending, rejected or expired approvals, \
             calls refused before the gate{}",
            if options.current_tools {
                ""
            } else {
                ", schema and denied-parameter changes (use --current-tools)"
            }
        )
        .map_err(output_error)?;
    }
    if reports.is_empty() {
        let whose = options.run.as_deref().map_or_else(
            || {
                format!(
                    "session {:?}",
                    options.session.as_deref().unwrap_or(&config.session)
                )
            },
            |r| format!("run {r:?}"),
        );
        let _ = writeln!(
            err,
            "agentrt-proxy: no run of {whose} was found in the index"
        );
        return Ok(false);
    }
    let decided: usize = reports.iter().map(RecheckReport::rechecked).sum();
    if decided == 0 {
        let skipped: usize = reports.iter().map(RecheckReport::not_recheckable).sum();
        let _ = writeln!(
            err,
            "agentrt-proxy: nothing was re-checked ({skipped} decision(s) not re-checkable)"
        );
        return Ok(false);
    }
    Ok(reports.iter().all(RecheckReport::same))
}
