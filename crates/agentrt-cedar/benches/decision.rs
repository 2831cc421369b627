//! One decision of a `CedarPolicy` (issue 35): `Policy::evaluate` on a
//! request, its run's view turned into Cedar's request and Cedar's answer
//! read into an outcome, with 10, 100 and 1 000 policies over ten tools.
//!
//! Each policy set is made the same way: per tool, `N / 10` policies in
//! turn a permit of a path prefix, an `@approval` permit of another prefix,
//! a forbid of a third, and a cap on `context.run.calls_of_tool`. The
//! request writes a path the first permit of its tool matches (one policy
//! determines it; Cedar still evaluates every policy of the action).
//!
//! Criterion measures each size; then, printed, an interleaved table
//! (`ROUNDS` decisions of each size in turn, after a warm-up) with the
//! median and the 99th percentile. Target: ≤ 20 µs median at 100 policies.
//!
//! `cargo bench -p agentrt-cedar --bench decision`; figures in
//! docs/performance.md. `cargo test -p agentrt-cedar --bench decision`
//! runs each size once and checks the outcome.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use agentrt::{Canonical, Outcome, Policy, SideEffect, ToolRequest, ToolSpec};
use agentrt_cedar::CedarPolicy;
use criterion::{Criterion, criterion_group, criterion_main};

const TOOLS: usize = 10;
const SIZES: [usize; 3] = [10, 100, 1_000];
const WARM: usize = 2_000;
const ROUNDS: usize = 20_000;

fn tools() -> Vec<ToolSpec> {
    (0..TOOLS)
        .map(|t| {
            ToolSpec::new(format!("tool_{t}"), "a tool", SideEffect::LocalMutation)
                .with_schema_str(
                    r#"{"type":"object","properties":{"path":{"type":"string"},"count":{"type":"integer"}},"required":["path"]}"#,
                )
                .expect("schema")
        })
        .collect()
}

/// `n` policies, `n / 10` per tool.
fn policies(n: usize) -> String {
    let mut text = String::new();
    for i in 0..n {
        let tool = i % TOOLS;
        let action = format!(r#"action == Agentrt::Action::"tool_{tool}""#);
        let policy = match (i / TOOLS) % 4 {
            0 => format!(
                r#"@id("p{i}") permit(principal, {action}, resource) when {{ context.args.path like "allowed{i}/*" }};"#
            ),
            1 => format!(
                r#"@id("p{i}") @approval("asks") permit(principal, {action}, resource) when {{ context.args.path like "ask{i}/*" }};"#
            ),
            2 => format!(
                r#"@id("p{i}") forbid(principal, {action}, resource) when {{ context.args.path like "never{i}/*" }};"#
            ),
            _ => format!(
                r#"@id("p{i}") forbid(principal, {action}, resource) when {{ context.run.calls_of_tool > {} }};"#,
                100 + i
            ),
        };
        text.push_str(&policy);
        text.push('\n');
    }
    text
}

struct Case {
    size: usize,
    policy: CedarPolicy,
    request: ToolRequest,
}

fn cases() -> Vec<Case> {
    let specs = tools();
    SIZES
        .iter()
        .map(|&size| {
            let policy = CedarPolicy::new(&policies(size), &specs).expect("policies validate");
            // tool_3's first permit is policy 3: `allowed3/*`.
            let request = ToolRequest {
                run_id: "r".into(),
                step_id: "s".into(),
                spec: specs[3].clone(),
                args: Canonical::parse_str(r#"{"path":"allowed3/notes.md","count":2}"#)
                    .expect("args"),
            };
            Case {
                size,
                policy,
                request,
            }
        })
        .collect()
}

fn decide(case: &Case, view: &agentrt::RunView) -> Outcome {
    case.policy
        .evaluate(&case.request, view)
        .expect("decided")
        .outcome
}

fn bench(c: &mut Criterion) {
    let cases = cases();
    let view = common::view(&["principal=bench"]);
    for case in &cases {
        assert_eq!(
            decide(case, &view),
            Outcome::Allow,
            "{} policies",
            case.size
        );
        c.bench_function(&format!("cedar decision, {} policies", case.size), |b| {
            b.iter(|| decide(case, &view));
        });
    }
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        interleaved(&cases, &view);
    }
}

/// Each size in turn, `ROUNDS` times after `WARM`: medians and 99th
/// percentiles that share the machine's drift.
fn interleaved(cases: &[Case], view: &agentrt::RunView) {
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(ROUNDS); cases.len()];
    for round in 0..WARM + ROUNDS {
        for (i, case) in cases.iter().enumerate() {
            let start = Instant::now();
            std::hint::black_box(decide(case, view));
            if round >= WARM {
                times[i].push(start.elapsed());
            }
        }
    }
    println!("\ncedar decision, interleaved ({ROUNDS} rounds):");
    println!("{:>10} {:>10} {:>10}", "policies", "p50 µs", "p99 µs");
    for (case, t) in cases.iter().zip(&mut times) {
        t.sort();
        let at = |q: f64| t[((t.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e6;
        println!("{:>10} {:>10.1} {:>10.1}", case.size, at(0.5), at(0.99));
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
