//! Several hosts, simulated by processes: four worker processes with
//! distinct lease owners race to resume the same approved runs on one
//! PostgreSQL database, while a fifth, killed with SIGKILL in the middle of
//! a side effect, leaves its run to the interruption contract.
//!
//! Afterwards each approved step ran exactly once, across all processes;
//! the killed step did not run again on its own (the run waits for a
//! person's approval instead); `verify` finds the chain intact.
//!
//! A test of its own (`harness = false`): this binary is also the worker,
//! started again with `worker` as its first argument. Needs
//! `AGENTRT_TEST_POSTGRES` (`cargo xtask postgres -- …` sets it).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentrt::verify::{self, VerifyOptions};

// The real-server suite's databases: a fresh one per test.
#[path = "real_postgres/backends.rs"]
mod backends;
use agentrt::*;
use backends::fresh_database;

/// Runs raced for by the workers.
const RUNS: usize = 8;
/// The run whose step the killed process was executing.
const KILLED_RUN: &str = "r-killed";
/// Racing workers.
const WORKERS: usize = 4;
/// Every process's lease time-to-live: a killed holder's lease lapses soon.
const TTL: Duration = Duration::from_secs(1);
/// How long the racers may take to settle every run.
const DEADLINE: Duration = Duration::from_secs(90);

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("worker") {
        worker(&args[2], &args[3], Path::new(&args[4]), &args[5]);
        return;
    }
    four_processes_race_and_a_killed_one_is_taken_over_under_the_interruption_contract();
    println!(
        "test processes::four_processes_race_and_a_killed_one_is_taken_over_under_the_interruption_contract ... ok"
    );
}

fn run_ids() -> Vec<String> {
    (0..RUNS)
        .map(|i| format!("r{i}"))
        .chain([KILLED_RUN.to_owned()])
        .collect()
}

/// The side effect every execution of `push` leaves: a line naming the run
/// and the process, appended to one file all processes share.
fn push_tool(effects: PathBuf, owner: String, hang_on: Option<String>) -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("push", "push a branch", SideEffect::RemoteMutation),
        move |call| {
            let line = format!("{}\t{owner}\n", call.run_id);
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&effects)
                .expect("the effects file opens");
            file.write_all(line.as_bytes())
                .expect("the effect is written");
            let hang = hang_on.as_deref() == Some(call.run_id.as_str());
            async move {
                if hang {
                    // Killed here: the side effect happened, its outcome
                    // was never recorded.
                    std::future::pending::<()>().await;
                }
                Ok(ToolResult::raw("\"pushed\""))
            }
        },
    ))
}

fn config(store: &Store, owner: &str, effects: &Path, hang_on: Option<&str>) -> GateConfig {
    GateConfig::new(
        store.clone(),
        DefaultPolicy,
        vec![push_tool(
            effects.to_owned(),
            owner.to_owned(),
            hang_on.map(str::to_owned),
        )],
    )
    .with_lease_ttl(TTL)
    .with_lease_owner(owner)
}

/// A worker process. `victim`: resumes the killed run only, and hangs in
/// its tool. `racer`: resumes every run, in an order of its own, until
/// none is left to settle.
fn worker(role: &str, owner: &str, effects: &Path, location: &str) {
    let store = agentrt_postgres::open(location).expect("the worker opens the store");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    if role == "victim" {
        let mut driver = Driver::new(
            config(&store, owner, effects, Some(KILLED_RUN)),
            ScriptedAgent::new([Decision::complete("\"done\"")]),
        )
        .expect("a driver");
        let _ = runtime.block_on(driver.resume(KILLED_RUN));
        unreachable!("the victim's tool never returns");
    }
    // Racers in pairs go the same way (head-on races for every run), the
    // two pairs in opposite directions.
    let mut order = run_ids();
    if owner.ends_with('1') || owner.ends_with('3') {
        order.reverse();
    }
    let deadline = Instant::now() + DEADLINE;
    while !settled(&store) && Instant::now() < deadline {
        for run in &order {
            let mut driver = Driver::new(
                config(&store, owner, effects, None),
                ScriptedAgent::new([Decision::complete("\"done\"")]),
            )
            .expect("a driver");
            // Lost races and settled runs are refused: expected here.
            let _ = runtime.block_on(driver.resume(run));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every run has finished or waits for a person.
fn settled(store: &Store) -> bool {
    run_ids().iter().all(|id| {
        store.get_run(id).is_ok_and(|run| {
            run.status.is_terminal()
                || (run.status == RunStatus::WaitingForApproval
                    && store.list_approvals(id).is_ok_and(|list| {
                        list.last()
                            .is_some_and(|a| a.status == ApprovalStatus::Pending)
                    }))
        })
    })
}

/// Starts `RUNS` runs and the killed one, each paused on a `push`, and
/// approves every one.
fn approved_runs(store: &Store, effects: &Path) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for id in run_ids() {
        let mut driver = Driver::new(
            config(store, "setup", effects, None),
            ScriptedAgent::new([Decision::tool_call("push", format!(r#"{{"ref":"{id}"}}"#))]),
        )
        .unwrap();
        let run = runtime
            .block_on(driver.start(Some(&id), "publish", Limits::default()))
            .unwrap();
        assert_eq!(run.status, RunStatus::WaitingForApproval, "{id}");
        let approval = store.list_approvals(&id).unwrap().remove(0);
        Operator::new(store.clone())
            .approve(&id, &approval.id, &DecideOptions::default())
            .unwrap();
    }
}

fn spawn(role: &str, owner: &str, effects: &Path, location: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["worker", role, owner])
        .arg(effects)
        .arg(location)
        .spawn()
        .unwrap()
}

/// The lines of the effects file, as (run, owner).
fn effects_of(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(run, owner)| (run.to_owned(), owner.to_owned()))
        .collect()
}

fn wait_until(what: &str, reached: impl Fn() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !reached() {
        assert!(Instant::now() < deadline, "never reached: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn four_processes_race_and_a_killed_one_is_taken_over_under_the_interruption_contract() {
    let location = fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let effects = dir.path().join("effects.tsv");
    let store = agentrt_postgres::open(&location).unwrap();
    approved_runs(&store, &effects);

    // The victim takes the killed run's lease and starts its side effect.
    let mut victim = spawn("victim", "victim", &effects, &location);
    wait_until("the victim's side effect starts", || {
        effects_of(&effects)
            .iter()
            .any(|(run, _)| run == KILLED_RUN)
    });
    // Four racers start; the victim dies mid-step while they race.
    let racers: Vec<Child> = (0..WORKERS)
        .map(|n| spawn("racer", &format!("racer-{n}"), &effects, &location))
        .collect();
    victim.kill().unwrap();
    victim.wait().unwrap();
    for mut racer in racers {
        let status = racer.wait().unwrap();
        assert!(status.success(), "a racer failed: {status}");
    }

    let done = effects_of(&effects);
    for id in run_ids() {
        let ran: Vec<&(String, String)> = done.iter().filter(|(run, _)| *run == id).collect();
        assert_eq!(ran.len(), 1, "{id} ran {} times: {ran:?}", ran.len());
    }
    // Each raced run was executed by a racer, once, and completed.
    for i in 0..RUNS {
        let id = format!("r{i}");
        assert_eq!(
            store.get_run(&id).unwrap().status,
            RunStatus::Completed,
            "{id}"
        );
    }
    let racers_that_ran: std::collections::BTreeSet<&str> = done
        .iter()
        .filter(|(run, _)| run != KILLED_RUN)
        .map(|(_, owner)| owner.as_str())
        .collect();
    assert!(
        racers_that_ran.iter().all(|o| o.starts_with("racer-")),
        "{racers_that_ran:?}"
    );
    eprintln!("runs executed by: {done:?}");
    // The killed step ran only in the victim: a racer took the run over
    // once its lease lapsed, and the run now waits for a person.
    assert_eq!(done.iter().filter(|(run, _)| run == KILLED_RUN).count(), 1);
    assert_eq!(
        done.iter().find(|(run, _)| run == KILLED_RUN).unwrap().1,
        "victim"
    );
    let killed = store.get_run(KILLED_RUN).unwrap();
    assert_eq!(killed.status, RunStatus::WaitingForApproval);
    let events = store.list_events(KILLED_RUN).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.event_type == EventType::LeaseTakenOver),
        "{events:?}"
    );
    let approvals = store.list_approvals(KILLED_RUN).unwrap();
    assert_eq!(approvals.last().unwrap().status, ApprovalStatus::Pending);

    let report = verify::verify(&store, &VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.head.unwrap().seq, report.checked as i64);
}
