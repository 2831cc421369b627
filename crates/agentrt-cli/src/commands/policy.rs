//! `policy check FILE --tools FILE` and `policy test FILE --tools FILE
//! --cases FILE`: a Cedar policy validated against the tools it decides,
//! and put to a table of requests with the outcomes its authors expect, so
//! a team tests its policy in CI.

use std::io::{Read, Write};
use std::path::Path;

use agentrt::text::sanitize;
use agentrt_cedar::CedarPolicy;
use agentrt_cedar::cases::{CaseResult, read_cases, read_tools, run_cases};
use serde::Serialize;

use crate::args::PolicyRun;
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

/// A file's bytes, at most [`MAX_FILE_BYTES`].
fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    let failed = |detail: String| {
        CliError::Failed(format!(
            "{}: {detail}",
            sanitize(&path.display().to_string())
        ))
    };
    let file = std::fs::File::open(path).map_err(|e| failed(e.to_string()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| failed(e.to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(failed(format!("larger than {MAX_FILE_BYTES} bytes")));
    }
    Ok(bytes)
}

pub fn run(args: &PolicyRun, out: &mut dyn Write) -> Result<(), CliError> {
    let shown = args.file.display().to_string();
    let text = String::from_utf8(read(&args.file)?)
        .map_err(|_| CliError::Failed(format!("{}: not UTF-8 text", sanitize(&shown))))?;
    let tools = read_tools(&read(&args.tools)?).map_err(|e| {
        CliError::Failed(format!(
            "{}: {e}",
            sanitize(&args.tools.display().to_string())
        ))
    })?;
    let policy = CedarPolicy::new(&text, &tools)
        .map_err(|e| CliError::Failed(format!("{}: {e}", sanitize(&shown))))?;
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
    let cases = read_cases(&read(cases_path)?).map_err(|e| {
        CliError::Failed(format!(
            "{}: {e}",
            sanitize(&cases_path.display().to_string())
        ))
    })?;
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
    let (outcome, reason) = match &result.got {
        Ok((outcome, reason)) => (outcome.as_str(), reason.as_str()),
        // `evaluate` denies a request Cedar cannot be asked.
        Err(reason) => ("deny", reason.as_str()),
    };
    let mut expected = result.case.expect.as_str().to_owned();
    if let Some(want) = &result.case.reason_contains {
        expected.push_str(&format!(" with a reason containing {want:?}"));
    }
    CaseReport {
        name: &result.case.name,
        passed: result.passed(),
        expected,
        outcome,
        reason,
    }
}
