//! `policy check FILE --tools FILE` and `policy test FILE --tools FILE
//! --cases FILE`: a Cedar policy validated against the tools it decides,
//! and put to a table of requests with the outcomes its authors expect, so
//! a team tests its policy in CI.

use std::io::{Read, Write};
use std::path::Path;

use agentrt::text::sanitize;
use agentrt_cedar::CedarPolicy;
use agentrt_cedar::cases::{
    CaseResult, CasesError, read_cases, read_manifest_tools, read_tools, run_cases,
};
use serde::Serialize;

use crate::args::{PolicyRun, ToolsFile};
use crate::error::CliError;
use crate::output::{self, line};

/// The largest policy, tools or cases file read (they are text an author
/// writes; a larger one is refused, not read in part).
const MAX_FILE_BYTES: u64 = 16 << 20;

#[derive(Serialize)]
struct Checked<'a> {
    file: &'a str,
    tools: usize,
    identity: &'a str,
}

#[derive(Serialize)]
struct CaseReport<'a> {
    name: &'a str,
    passed: bool,
    expected: String,
    outcome: &'a str,
    reason: &'a str,
}

#[derive(Serialize)]
struct Tested<'a> {
    file: &'a str,
    identity: &'a str,
    cases: Vec<CaseReport<'a>>,
    failed: usize,
}

/// A refusal naming the file it is about.
fn failed_at(path: &Path, detail: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!(
        "{}: {detail}",
        sanitize(&path.display().to_string())
    ))
}

/// A file's bytes, at most [`MAX_FILE_BYTES`].
fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    let file = std::fs::File::open(path).map_err(|e| failed_at(path, e))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed_at(path, e))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(failed_at(
            path,
            format!("larger than {MAX_FILE_BYTES} bytes"),
        ));
    }
    Ok(bytes)
}

/// A policy file's text.
fn read_text(path: &Path) -> Result<String, CliError> {
    String::from_utf8(read(path)?).map_err(|_| failed_at(path, "not UTF-8 text"))
}

/// A file read by `parse`, its refusal naming the file.
fn read_as<T>(
    path: &Path,
    parse: impl FnOnce(&[u8]) -> Result<T, CasesError>,
) -> Result<T, CliError> {
    parse(&read(path)?).map_err(|e| failed_at(path, e))
}

pub fn run(args: &PolicyRun, out: &mut dyn Write) -> Result<(), CliError> {
    let shown = args.file.display().to_string();
    let text = read_text(&args.file)?;
    let tools = match &args.tools {
        ToolsFile::Specs(path) => read_as(path, read_tools)?,
        ToolsFile::Manifest(path) => read_as(path, read_manifest_tools)?,
    };
    let policy = CedarPolicy::new(&text, &tools).map_err(|e| failed_at(&args.file, e))?;
    let Some(cases_path) = &args.cases else {
        if args.json {
            return output::json(
                out,
                &Checked {
                    file: &shown,
                    tools: tools.len(),
                    identity: policy.identity(),
                },
            );
        }
        return line(
            out,
            &format!(
                "{}: valid against {} tool(s); identity {}",
                sanitize(&shown),
                tools.len(),
                policy.identity()
            ),
        );
    };
    let cases = read_as(cases_path, read_cases)?;
    let results = run_cases(&policy, cases);
    let failed = results.iter().filter(|r| !r.passed()).count();
    if args.json {
        output::json(
            out,
            &Tested {
                file: &shown,
                identity: policy.identity(),
                cases: results.iter().map(report).collect(),
                failed,
            },
        )?;
    } else {
        for result in &results {
            let r = report(result);
            let text = if r.passed {
                format!("pass  {}: {}", sanitize(r.name), r.outcome)
            } else {
                format!(
                    "FAIL  {}: expected {}, got {} ({})",
                    sanitize(r.name),
                    r.expected,
                    r.outcome,
                    sanitize(r.reason)
                )
            };
            line(out, &text)?;
        }
        line(out, &format!("{} case(s), {failed} failed", results.len()))?;
    }
    if failed > 0 {
        return Err(CliError::Failed(format!(
            "{failed} of {} case(s) did not get the outcome expected",
            results.len()
        )));
    }
    Ok(())
}

fn report(result: &CaseResult) -> CaseReport<'_> {
    let mut expected = result.case.expect.as_str().to_owned();
    if let Some(want) = &result.case.reason_contains {
        expected.push_str(&format!(" with a reason containing {want:?}"));
    }
    CaseReport {
        name: &result.case.name,
        passed: result.passed(),
        expected,
        outcome: result.outcome.as_str(),
        reason: &result.reason,
    }
}

/// The tool specs run `run_id` recorded with its evaluations.
fn recorded_specs(
    store: &agentrt::Store,
    run_id: &str,
) -> Result<Vec<agentrt::ToolSpec>, CliError> {
    let mut hashes: Vec<String> = store
        .list_steps(run_id)?
        .into_iter()
        .map(|s| s.spec_hash)
        .filter(|h| !h.is_empty())
        .collect();
    hashes.sort();
    hashes.dedup();
    let mut specs: Vec<agentrt::ToolSpec> = Vec::with_capacity(hashes.len());
    for hash in hashes {
        let spec = store.tool_spec(&hash)?;
        // Two recorded versions of one tool: the schema takes the newest
        // name once; a request is judged with its own recorded spec.
        if !specs.iter().any(|s| s.name == spec.name) {
            specs.push(spec);
        }
    }
    Ok(specs)
}

/// `policy recheck FILE`: the newest runs (or one) re-checked under the
/// Cedar policy in `file`; fails (exit 1) if any run would be decided
/// otherwise, or nothing could be re-checked.
pub fn recheck(
    store: &agentrt::Store,
    file: &Path,
    run: Option<&str>,
    limit: u64,
    tools: Option<&Path>,
    json: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    use agentrt::recheck::{RecheckOptions, RecheckReport, write_recheck};
    let shown = file.display().to_string();
    let text = read_text(file)?;
    let current = tools.map(|path| read_as(path, read_tools)).transpose()?;
    let ids: Vec<String> = match run {
        Some(id) => vec![id.to_owned()],
        None => store
            .list_runs(limit, 0)?
            .items
            .into_iter()
            .map(|r| r.id)
            .collect(),
    };
    let options = RecheckOptions {
        tools: current.clone(),
    };
    // One policy per set of tools: every run with --tools, each distinct
    // set the runs recorded otherwise (parsing and validating is the
    // costly part).
    let mut policies: Vec<(Vec<agentrt::ToolSpec>, CedarPolicy)> = Vec::new();
    let mut reports: Vec<RecheckReport> = Vec::with_capacity(ids.len());
    for id in &ids {
        let specs = match &current {
            Some(specs) => specs.clone(),
            None => recorded_specs(store, id)?,
        };
        let at = match policies.iter().position(|(made_for, _)| *made_for == specs) {
            Some(at) => at,
            None => {
                let policy = CedarPolicy::new(&text, &specs).map_err(|e| {
                    failed_at(
                        file,
                        format!("against the tools run {} recorded: {e}", sanitize(id)),
                    )
                })?;
                policies.push((specs, policy));
                policies.len() - 1
            }
        };
        reports.push(agentrt::recheck::recheck(
            store,
            id,
            &policies[at].1,
            &options,
        )?);
    }
    let decided: usize = reports.iter().map(RecheckReport::rechecked).sum();
    let differ = reports.iter().filter(|r| !r.same()).count();
    if json {
        output::json(out, &reports)?;
    } else {
        for report in &reports {
            write_recheck(report, out).map_err(CliError::Output)?;
            line(out, "")?;
        }
        line(
            out,
            &format!(
                "{} run(s) re-checked under {}: {decided} decision(s) re-checked; {differ} run(s) differ",
                reports.len(),
                sanitize(&shown)
            ),
        )?;
    }
    if reports.is_empty() || decided == 0 {
        return Err(CliError::Failed("nothing was re-checked".into()));
    }
    if differ > 0 {
        return Err(CliError::Failed(format!(
            "{differ} run(s) would be decided otherwise under {}",
            sanitize(&shown)
        )));
    }
    Ok(())
}
