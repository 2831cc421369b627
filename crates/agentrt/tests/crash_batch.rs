//! A process killed (SIGKILL) while many runs commit in shared batches
//! leaves no write group half-written and no side effect done twice: the
//! chain verifies, every finished step's effect happened exactly once, and
//! resuming every run afterwards re-runs no effect on its own.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use agentrt::*;
use agentrt::{ids::random_ids, model::DecisionKind, model::StepStatus};

const CHILD_DB: &str = "AGENTRT_TEST_CRASH_DB";
const CHILD_EFFECTS: &str = "AGENTRT_TEST_CRASH_EFFECTS";

const RUNS: usize = 16;
const CALLS: u64 = 400;

/// Calls `touch` until the run has `CALLS` steps, then completes.
struct Toucher;

impl Agent for Toucher {
    fn decide<'a>(
        &'a mut self,
        input: &'a StepInput,
    ) -> BoxFuture<'a, Result<Decision, AgentError>> {
        let i = input.run.step_count;
        let d = if i > CALLS {
            Decision::complete("true")
        } else {
            Decision::tool_call("touch", format!(r#"{{"i":{i}}}"#))
        };
        Box::pin(async move { Ok(d) })
    }
}

/// A local mutation whose effect is a line `run step` appended (and
/// synced) to a file outside the database.
fn touch(effects: PathBuf) -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        ToolSpec::new("touch", "append a line", SideEffect::LocalMutation),
        move |call| {
            let effects = effects.clone();
            async move {
                let mut file = OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&effects)
                    .map_err(ToolError::failed)?;
                // One write of the whole line: concurrent appends stay whole.
                let line = format!("{} {}\n", call.run_id, call.step_id);
                file.write_all(line.as_bytes()).map_err(ToolError::failed)?;
                file.sync_data().map_err(ToolError::failed)?;
                Ok(ToolResult::raw("{}").with_summary("touched"))
            }
        },
    ))
}

/// The child: drives many runs at once until it is killed.
#[test]
#[ignore = "a helper run by the crash test"]
fn run_until_killed() {
    let (Some(db), Some(effects)) = (std::env::var_os(CHILD_DB), std::env::var_os(CHILD_EFFECTS))
    else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = Store::open(Path::new(&db)).unwrap();
        let runs: Vec<_> = (0..RUNS)
            .map(|n| {
                let config = GateConfig::new(
                    store.clone(),
                    DefaultPolicy,
                    vec![touch(PathBuf::from(&effects))],
                )
                .with_ids(random_ids());
                tokio::spawn(async move {
                    let mut driver = Driver::new(config, Toucher).unwrap();
                    driver
                        .start(
                            Some(&format!("run-{n}")),
                            "touch",
                            Limits::default().max_steps(CALLS + 10),
                        )
                        .await
                        .unwrap()
                })
            })
            .collect();
        for run in runs {
            run.await.unwrap();
        }
    });
}

fn effect_lines(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (run, step) = l.split_once(' ')?;
            Some((run.to_owned(), step.to_owned()))
        })
        .collect()
}

fn verify_intact(store: &Store) {
    let report = verify::verify(store, &verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}

/// Kills the child once `after` effects happened; returns whether it was
/// still running then.
fn kill_after(db: &Path, effects: &Path, after: usize) -> bool {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "run_until_killed", "--ignored"])
        .env(CHILD_DB, db)
        .env(CHILD_EFFECTS, effects)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "the child failed before the kill");
            return false;
        }
        if effect_lines(effects).len() >= after {
            child.kill().unwrap();
            child.wait().unwrap();
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn a_kill_mid_batch_leaves_no_half_group_and_no_effect_twice() {
    let mut killed = 0;
    for after in [150, 600, 1500] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("crash.db");
        let effects = dir.path().join("effects.txt");
        drop(Store::open(&db).unwrap());
        killed += usize::from(kill_after(&db, &effects, after));

        let store = Store::open(&db).unwrap();
        verify_intact(&store);
        let done_before = check_effects(&store, &effects);

        // Resume every run left unfinished, under a lease clock past the
        // dead process's leases.
        let later = Timestamp::parse("2099-01-01T00:00:00Z").unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let runs = store.list_runs(100, 0).unwrap().items;
        assert_eq!(runs.len(), RUNS, "every run was created before the kill");
        let mut paused = 0;
        for run in runs.iter().filter(|r| !r.status.is_terminal()) {
            let config =
                GateConfig::new(store.clone(), DefaultPolicy, vec![touch(effects.clone())])
                    .with_ids(random_ids())
                    .with_lease_clock(Arc::new(move || later));
            // Cut off while its tool executed: the outcome is unknown, so
            // the run must wait for a person, never run it again itself.
            let cut_while_executing = store
                .list_steps(&run.id)
                .unwrap()
                .iter()
                .any(|s| s.status == StepStatus::Executing);
            let mut driver = Driver::new(config, Toucher).unwrap();
            let ended = runtime.block_on(driver.resume(&run.id)).unwrap();
            let expected = if cut_while_executing {
                paused += 1;
                RunStatus::WaitingForApproval
            } else {
                RunStatus::Completed
            };
            assert_eq!(ended.status, expected, "run {}", run.id);
        }
        verify_intact(&store);
        let done_after = check_effects(&store, &effects);
        assert!(done_after >= done_before);
        // Only a run cut off while its tool executed waits for a person.
        let waiting = store
            .list_runs(100, 0)
            .unwrap()
            .items
            .iter()
            .filter(|r| r.status == RunStatus::WaitingForApproval)
            .count();
        assert_eq!(waiting, paused);
        eprintln!(
            "killed after {after} effects: {done_before} steps done at the kill, {done_after} after resuming, {paused} runs waiting on an interrupted side effect"
        );
    }
    assert!(killed >= 2, "the child finished before most kills");
}

/// Every step is consistent with the effects file: a done step's effect
/// happened exactly once, no step's effect happened twice, and a step that
/// never reached `executing` has none. Returns the number of done steps.
fn check_effects(store: &Store, effects: &Path) -> usize {
    let mut times: HashMap<(String, String), usize> = HashMap::new();
    for key in effect_lines(effects) {
        *times.entry(key).or_default() += 1;
    }
    if let Some(((run, step), n)) = times.iter().find(|(_, n)| **n > 1) {
        panic!("the effect of {run}/{step} happened {n} times");
    }
    let mut done = 0;
    for run in store.list_runs(100, 0).unwrap().items {
        let events = store.list_events(&run.id).unwrap();
        for step in store.list_steps(&run.id).unwrap() {
            let key = (run.id.clone(), step.id.clone());
            let happened = times.get(&key).copied().unwrap_or(0);
            let started = events
                .iter()
                .any(|e| e.step_id == step.id && e.event_type == EventType::StepToolStarted);
            let is_call = step
                .decision
                .as_ref()
                .is_some_and(|d| d.kind == DecisionKind::ToolCall);
            match step.status {
                StepStatus::Done if is_call => {
                    assert!(started, "{key:?} done without tool_started");
                    assert_eq!(happened, 1, "{key:?} done");
                    done += 1;
                }
                StepStatus::Deciding => assert_eq!(happened, 0, "{key:?} never started"),
                _ => assert!(happened <= 1),
            }
            if happened == 1 {
                assert!(started, "{key:?}: an effect with no durable tool start");
            }
        }
    }
    done
}
