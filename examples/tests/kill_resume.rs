//! Proof with real processes (issue 3): a consumer binary is killed with
//! SIGKILL at each crash point, resumed in a new process, and its side
//! effects are counted in an external file that no crash can roll back.
//!
//! The consumer (`crash/main.rs`) runs a plan of two `effect` calls,
//! `{"n":1}` then `{"n":2}`, then completes; each real execution of the
//! tool appends `<step_id> <args>` to the effects file and fsyncs it. Its
//! policy allows every class, so the only approvals are the runtime's
//! `interrupted_side_effect` pauses. The invariant checked after every
//! scenario: a step's effect lines never exceed one plus the number of
//! approved `interrupted_side_effect` approvals of that step (an operator
//! who approves one was told the first attempt may have taken effect), so
//! a step without such an approval ran at most once; and, stronger, each
//! call ran exactly as often as the interruption contract says (design §13).

#![cfg(unix)]

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentrt::{
    Approval, ApprovalStatus, EventType, RunStatus, Store, model::INTERRUPTED_SIDE_EFFECT,
    model::Step,
};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_crash-consumer");
const RUN: &str = "r";
/// The lease TTL of every process that may be killed or is resumed in
/// sequence (passed as `--lease-ttl-ms`).
const TTL_MS: &str = "500";
/// How long to wait after a kill before resuming: past the dead lease.
const AFTER_TTL: Duration = Duration::from_millis(700);
/// How long a consumer may take to reach its crash point.
const PARK_TIMEOUT: Duration = Duration::from_secs(30);
/// Resume rounds before a scenario counts as stuck.
const ROUNDS: usize = 8;
/// Scenarios run at once (each is a sequence of child processes).
const PARALLEL: usize = 4;

/// The plan's calls, in order (canonical arguments, as the file shows them).
const CALLS: [&str; 2] = [r#"{"n":1}"#, r#"{"n":2}"#];
const CLASSES: [&str; 4] = [
    "read_only",
    "local_mutation",
    "remote_mutation",
    "destructive",
];
/// Every crash point a start passes through, in the order it does for an
/// allowed call (its decision, verdict and tool start are one commit, so
/// `step.decided` comes after `policy.allowed`, right before
/// `step.tool_started`).
const START_POINTS: [&str; 6] = [
    "step.started",
    "policy.allowed",
    "step.decided",
    "step.tool_started",
    "tool.effect",
    "step.tool_finished",
];

/// A child that is killed (SIGKILL) if the test drops it, so no consumer
/// outlives a failing test.
struct Guard(Option<Child>);

impl Guard {
    fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child is still owned")
    }

    fn take(&mut self) -> Child {
        self.0.take().expect("the child is still owned")
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What one consumer process ended with.
#[derive(Debug)]
struct Exit {
    code: Option<i32>,
    json: Value,
    stdout: String,
    stderr: String,
}

impl Exit {
    fn from_output(output: std::process::Output) -> Exit {
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        let json = stdout
            .lines()
            .last()
            .and_then(|l| serde_json::from_str(l).ok())
            .unwrap_or(Value::Null);
        Exit {
            code: output.status.code(),
            json,
            stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    fn status(&self) -> &str {
        self.json["status"].as_str().unwrap_or("")
    }

    fn line(&self) -> String {
        format!(
            "exit {:?} {} {}",
            self.code,
            self.stdout.trim(),
            self.stderr.trim()
        )
    }
}

/// One scenario: its own directory, database and effects file, and a log
/// of what each process did (printed with the evidence on failure).
struct Case {
    dir: tempfile::TempDir,
    class: &'static str,
    label: String,
    log: Mutex<Vec<String>>,
    markers: AtomicUsize,
    /// A resumer lost its lease (heartbeat starved on a loaded machine).
    lease_lost: AtomicBool,
}

impl Case {
    fn new(class: &'static str, label: String) -> Case {
        Case {
            dir: tempfile::tempdir().expect("a temporary directory"),
            class,
            label,
            log: Mutex::new(Vec::new()),
            markers: AtomicUsize::new(0),
            lease_lost: AtomicBool::new(false),
        }
    }

    fn db(&self) -> PathBuf {
        self.dir.path().join("run.db")
    }

    fn effects(&self) -> PathBuf {
        self.dir.path().join("effects")
    }

    fn note(&self, line: String) {
        self.log.lock().expect("log lock").push(line);
    }

    fn command(&self, command: &str) -> Command {
        let mut c = Command::new(BIN);
        c.arg("--db")
            .arg(self.db())
            .arg("--effects")
            .arg(self.effects())
            .args(["--class", self.class, "--run", RUN, command])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Runs `command` to its end.
    fn invoke(&self, command: &str, extra: &[&str]) -> Exit {
        let output = self
            .command(command)
            .args(extra)
            .output()
            .expect("the consumer runs");
        let exit = Exit::from_output(output);
        self.note(format!("{command} {extra:?}: {}", exit.line()));
        exit
    }

    /// Runs `command` until it parks at the `nth` `point`, kills it with
    /// SIGKILL, and waits out its lease.
    fn kill_at(&self, command: &str, point: &str, nth: usize) {
        let marker = self.dir.path().join(format!(
            "parked-{}",
            self.markers.fetch_add(1, Ordering::SeqCst)
        ));
        let nth_text = nth.to_string();
        let child = self
            .command(command)
            .args(["--crash-at", point, "--crash-nth", &nth_text, "--marker"])
            .arg(&marker)
            .args(["--lease-ttl-ms", TTL_MS])
            .spawn()
            .expect("the consumer starts");
        let mut guard = Guard(Some(child));
        let deadline = Instant::now() + PARK_TIMEOUT;
        while !marker.exists() {
            if let Ok(Some(_)) = guard.child().try_wait() {
                let exit = Exit::from_output(
                    guard
                        .take()
                        .wait_with_output()
                        .expect("the consumer's output"),
                );
                self.fail(&format!(
                    "{command} exited instead of parking at {point} #{nth}: {}",
                    exit.line()
                ));
            }
            if Instant::now() > deadline {
                self.fail(&format!(
                    "{command} did not park at {point} #{nth} within {PARK_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let parked = std::fs::read_to_string(&marker).expect("the marker reads");
        assert_eq!(
            parked.trim(),
            point,
            "{}: the marker names the point",
            self.label
        );
        let mut child = guard.take();
        child.kill().expect("SIGKILL");
        let status = child.wait().expect("the killed consumer is reaped");
        self.note(format!(
            "{command}: parked at {point} #{nth}, killed ({status})"
        ));
        std::thread::sleep(AFTER_TTL);
    }

    /// One `resume` in a new process, repeated while a lease is in the way
    /// (the killed process's lease on a slow machine, or a resumer that
    /// lost its own lease to a starved heartbeat).
    fn resume(&self) -> Exit {
        for _ in 0..ROUNDS {
            let exit = self.invoke("resume", &["--lease-ttl-ms", TTL_MS]);
            match exit.code {
                Some(3) => std::thread::sleep(AFTER_TTL),
                Some(1) if exit.json["error"] == "lease_lost" => {
                    // A legitimate takeover follows; the exact counts no
                    // longer apply (the invariant still does).
                    self.lease_lost.store(true, Ordering::SeqCst);
                    std::thread::sleep(AFTER_TTL);
                }
                _ => return exit,
            }
        }
        self.fail(&format!("resume was refused {ROUNDS} times"));
    }

    /// Resumes in new processes until the run ends, approving each
    /// pending approval in between (as an operator would); returns the
    /// last resume's status line.
    fn finish(&self) -> Exit {
        for _ in 0..ROUNDS {
            let exit = self.resume();
            let waiting = match exit.code {
                Some(0) => exit.status() == "WAITING_FOR_APPROVAL",
                // Refused while its approval is pending (the process that
                // paused the run was killed before it could say so).
                Some(4) => exit.json["run_state"] == "WAITING_FOR_APPROVAL",
                _ => false,
            };
            match (exit.code, exit.status()) {
                _ if waiting => {
                    let approved = self.invoke("approve-pending", &[]);
                    if approved.code != Some(0) || approved.json["approved"].is_null() {
                        self.fail("approve-pending approved nothing for a waiting run");
                    }
                }
                (Some(0), "COMPLETED" | "FAILED" | "CANCELLED") => return exit,
                _ => self.fail("resume ended unexpectedly"),
            }
        }
        self.fail(&format!("the run did not finish in {ROUNDS} resume rounds"));
    }

    /// `(step_id, args)` for each line of the effects file, in order.
    fn effect_lines(&self) -> Vec<(String, String)> {
        let text = match std::fs::read_to_string(self.effects()) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => panic!("{}: the effects file: {e}", self.label),
        };
        text.lines()
            .map(|l| match l.split_once(' ') {
                Some((step, args)) => (step.to_owned(), args.to_owned()),
                None => panic!("{}: a malformed effect line {l:?}", self.label),
            })
            .collect()
    }

    fn store(&self) -> Store {
        Store::open_existing(self.db(), true).expect("the database opens read-only")
    }

    /// The log, the effects file and the run's rows and events.
    fn evidence(&self) -> String {
        let mut out = format!("--- process log of {}\n", self.label);
        for line in self.log.lock().map(|l| l.clone()).unwrap_or_default() {
            out.push_str(&line);
            out.push('\n');
        }
        out.push_str("--- effects file\n");
        out.push_str(&std::fs::read_to_string(self.effects()).unwrap_or_default());
        match Store::open_existing(self.db(), true) {
            Err(e) => out.push_str(&format!("--- database: {e}\n")),
            Ok(store) => {
                out.push_str("--- steps\n");
                for s in store.list_steps(RUN).unwrap_or_default() {
                    let args = s
                        .decision
                        .as_ref()
                        .and_then(|d| d.args.as_ref())
                        .map(|a| a.as_str().to_owned());
                    out.push_str(&format!(
                        "{} #{} {} args={args:?}\n",
                        s.id, s.index, s.status
                    ));
                }
                out.push_str("--- approvals\n");
                for a in store.list_approvals(RUN).unwrap_or_default() {
                    out.push_str(&format!(
                        "{} step={} kind={} status={}\n",
                        a.id, a.step_id, a.kind, a.status
                    ));
                }
                out.push_str("--- events\n");
                for e in store.list_events(RUN).unwrap_or_default() {
                    out.push_str(&serde_json::to_string(&e).unwrap_or_default());
                    out.push('\n');
                }
            }
        }
        out
    }

    fn fail(&self, what: &str) -> ! {
        panic!("{}: {what}\n{}", self.label, self.evidence())
    }

    fn check(&self, ok: bool, what: &str) {
        if !ok {
            self.fail(what);
        }
    }

    /// The invariant, then the exact count of each call (`expected[i]`
    /// lines with `CALLS[i]`), then a COMPLETED run.
    fn verify(&self, expected: [usize; 2]) {
        let store = self.store();
        let lines = self.effect_lines();
        let steps: BTreeMap<String, Step> = store
            .list_steps(RUN)
            .expect("steps")
            .into_iter()
            .map(|s| (s.id.clone(), s))
            .collect();
        let approvals: Vec<Approval> = store.list_approvals(RUN).expect("approvals");
        let events = store.list_events(RUN).expect("events");

        let mut per_step: BTreeMap<&str, usize> = BTreeMap::new();
        for (step, args) in &lines {
            *per_step.entry(step).or_default() += 1;
            // Every effect belongs to a recorded step whose decision named these arguments.
            let recorded = steps
                .get(step)
                .and_then(|s| s.decision.as_ref())
                .and_then(|d| d.args.as_ref())
                .map(|a| a.as_str());
            self.check(
                recorded == Some(args.as_str()),
                &format!("effect {step} {args} has no step recording these arguments"),
            );
        }
        for (step, count) in &per_step {
            let granted = approvals
                .iter()
                .filter(|a| {
                    a.step_id == *step
                        && a.kind == INTERRUPTED_SIDE_EFFECT
                        && a.status == ApprovalStatus::Approved
                })
                .count();
            self.check(
                *count <= 1 + granted,
                &format!(
                    "CORE BUG? step {step} ran {count} times with {granted} approved \
                     interrupted_side_effect approvals (at most {} allowed)",
                    1 + granted
                ),
            );
            // Nothing runs without a committed tool start first.
            let started = events
                .iter()
                .filter(|e| e.step_id == *step && e.event_type == EventType::StepToolStarted)
                .count();
            self.check(
                *count <= started,
                &format!("CORE BUG? step {step} ran {count} times after {started} tool starts"),
            );
        }
        // The policy allows everything: every approval is an interruption's.
        self.check(
            approvals.iter().all(|a| a.kind == INTERRUPTED_SIDE_EFFECT),
            "an approval that is not interrupted_side_effect",
        );
        let counts = CALLS.map(|call| lines.iter().filter(|(_, a)| a == call).count());
        self.check(
            counts == expected || self.exact_counts_void(),
            &format!("CORE BUG? calls ran {counts:?} times, expected {expected:?}"),
        );
        let run = store.get_run(RUN).expect("the run");
        self.check(
            run.status == RunStatus::Completed,
            &format!("the run ended {} ({:?})", run.status, run.reason),
        );
    }

    /// `true` when a resumer lost its lease: the run was then taken over
    /// once more than the scenario planned, so exact counts do not apply.
    fn exact_counts_void(&self) -> bool {
        let void = self.lease_lost.load(Ordering::SeqCst);
        if void {
            eprintln!(
                "{}: a resumer lost its lease; only the invariant is checked",
                self.label
            );
        }
        void
    }

    /// Checks the number of approved `interrupted_side_effect` approvals.
    fn check_granted(&self, expected: usize) {
        let granted = self.granted_interruptions();
        self.check(
            granted == expected || self.exact_counts_void(),
            &format!("{granted} approved interrupted_side_effect approvals, expected {expected}"),
        );
    }

    /// How many approved `interrupted_side_effect` approvals the run has.
    fn granted_interruptions(&self) -> usize {
        self.store()
            .list_approvals(RUN)
            .expect("approvals")
            .iter()
            .filter(|a| a.kind == INTERRUPTED_SIDE_EFFECT && a.status == ApprovalStatus::Approved)
            .count()
    }
}

/// What the contract (design §13) says each call's count is after a kill at
/// the `nth` `point` of a start, with the plan continuing from its
/// recorded decisions:
/// * before the decision is recorded (`step.started`, `policy.allowed`) or
///   after the outcome is (`step.tool_finished`, with the next step open):
///   the step in flight was only deciding, so the run continues, the plan
///   asks for the same call again, and both calls run once;
/// * after the tool start committed, before the tool ran (`step.decided`,
///   `step.tool_started`): a read-only call is interrupted and never runs;
///   another pauses, is approved, and runs once;
/// * after the tool ran (`tool.effect`): a read-only call continues (it ran
///   once); another pauses, is approved, and runs a second time.
fn expected(point: &str, nth: usize, class: &str) -> [usize; 2] {
    let mut counts = [1, 1];
    // The occurrence of a point that fires once per call (the first step
    // opens at start, so `step.started` #n is call n's step too).
    let call = nth - 1;
    let read_only = class == "read_only";
    match point {
        "step.decided" | "step.tool_started" => counts[call] = usize::from(!read_only),
        "tool.effect" => counts[call] = if read_only { 1 } else { 2 },
        _ => {}
    }
    counts
}

/// Runs every case (at most `PARALLEL` at once) and reports every failure.
fn run_all<T: Sync>(cases: &[T], run: impl Fn(&T) + Sync) {
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..PARALLEL.min(cases.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(case) = cases.get(i) else { break };
                    if let Err(panic) = catch_unwind(AssertUnwindSafe(|| run(case))) {
                        let message = panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                            .unwrap_or_else(|| "a panic without a message".into());
                        failures.lock().expect("failures lock").push(message);
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().expect("failures lock");
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n\n")
    );
}

/// Every crash point of a start, at the first and the second call, for
/// every side-effect class: killed there, resumed in new processes (with
/// the operator approving each interrupted side effect), the run completes
/// and no call ran more often than the contract allows.
#[test]
fn a_kill_at_any_start_crash_point_never_runs_a_side_effect_twice_by_accident() {
    let mut cases = Vec::new();
    for class in CLASSES {
        for point in START_POINTS {
            for nth in [1, 2] {
                cases.push((class, point, nth));
            }
        }
    }
    run_all(&cases, |&(class, point, nth)| {
        let case = Case::new(class, format!("{class} killed at {point} #{nth}"));
        case.kill_at("start", point, nth);
        let last = case.finish();
        case.check(
            last.json["status"] == "COMPLETED",
            "the last resume completed",
        );
        case.verify(expected(point, nth, class));
        // Read-only calls continue without an operator; others need one
        // approval exactly when their tool start was committed.
        let tool_started = matches!(point, "step.decided" | "step.tool_started" | "tool.effect");
        case.check_granted(usize::from(tool_started && class != "read_only"));
    });
}

/// The crash points of the resume path. A non-read-only call is killed
/// while its tool runs (`tool.effect`), so the first resume pauses it as
/// an interrupted side effect; then the resuming process is killed too:
/// * `run.resumed`: after the approved re-run's tool start committed,
///   before the tool ran: the next resume pauses it again (a second
///   approval), and it runs once more in all;
/// * `attach.allowed`: the grant was accepted but nothing was written: the
///   next resume runs it once;
/// * `step.interrupted`: the takeover's marks and pause committed: the
///   approval is there to decide, and the call runs once more.
///
/// A read-only call killed at `tool.effect`, whose takeover is killed at
/// `step.interrupted`, simply continues.
#[test]
fn a_kill_on_the_resume_path_never_runs_a_side_effect_twice_by_accident() {
    let mut cases = vec![("read_only", "step.interrupted")];
    for class in &CLASSES[1..] {
        for point in ["run.resumed", "attach.allowed", "step.interrupted"] {
            cases.push((class, point));
        }
    }
    run_all(&cases, |&(class, point)| {
        let case = Case::new(
            class,
            format!("{class} killed at tool.effect, then at {point}"),
        );
        case.kill_at("start", "tool.effect", 1);
        if point != "step.interrupted" {
            let paused = case.resume();
            case.check(
                paused.code == Some(0) && paused.status() == "WAITING_FOR_APPROVAL",
                "the first resume pauses the interrupted side effect",
            );
            let approved = case.invoke("approve-pending", &[]);
            case.check(
                approved.json["kind"] == INTERRUPTED_SIDE_EFFECT,
                "the operator approves the interrupted side effect",
            );
        }
        case.kill_at("resume", point, 1);
        case.finish();
        let read_only = class == "read_only";
        case.verify([if read_only { 1 } else { 2 }, 1]);
        let approvals = match (read_only, point) {
            (true, _) => 0,
            (false, "run.resumed") => 2,
            (false, _) => 1,
        };
        case.check_granted(approvals);
        if point == "run.resumed" && !case.exact_counts_void() {
            // Three tool starts for the first call (the crashed start, the
            // killed resumed grant, the last one), two effects.
            let started = case
                .store()
                .list_events(RUN)
                .expect("events")
                .iter()
                .filter(|e| e.event_type == EventType::StepToolStarted)
                .count();
            case.check(started == 4, &format!("{started} tool starts, expected 4"));
        }
    });
}

/// How many resumers race.
const RACERS: usize = 8;

/// Spawns `RACERS` resumers that wait at a barrier (`--go`), releases them
/// together once all are ready, and returns how each ended.
fn race(case: &Case) -> Vec<Exit> {
    let go = case.dir.path().join("go");
    let mut guards = Vec::new();
    let mut ready = Vec::new();
    for i in 0..RACERS {
        let flag = case.dir.path().join(format!("ready-{i}"));
        // A long lease: the winner must not lose it while eight processes
        // share two cores (that would be a legitimate takeover, not a race).
        let child = case
            .command("resume")
            .args(["--lease-ttl-ms", "20000", "--go"])
            .arg(&go)
            .arg("--ready")
            .arg(&flag)
            .spawn()
            .expect("a racer starts");
        guards.push(Guard(Some(child)));
        ready.push(flag);
    }
    let deadline = Instant::now() + PARK_TIMEOUT;
    while !ready.iter().all(|f| f.exists()) {
        for guard in &mut guards {
            if let Ok(Some(status)) = guard.child().try_wait() {
                case.fail(&format!(
                    "a racer exited ({status}) before the start signal"
                ));
            }
        }
        if Instant::now() > deadline {
            case.fail("the racers were not ready in time");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::File::create(&go).expect("the start signal");
    let exits: Vec<Exit> = guards
        .iter_mut()
        .map(|g| Exit::from_output(g.take().wait_with_output().expect("a racer's output")))
        .collect();
    for exit in &exits {
        case.note(format!("racer: {}", exit.line()));
    }
    let mut tally = BTreeMap::new();
    for exit in &exits {
        let what = match exit.code {
            Some(4) => format!("exit 4, {}", exit.json["run_state"]),
            code => format!("exit {code:?}"),
        };
        *tally.entry(what).or_insert(0) += 1;
    }
    eprintln!("{}: {tally:?}", case.label);
    exits
}

/// Checks a race's outcome: exactly one racer exits 0 having executed
/// `executed` calls and finished the run; every other one is refused.
///
/// "The run's new state", for a loser: a racer that reads the run while
/// the winner holds it gets `RunLeased` (exit 3, naming the owner); one
/// that reads it after the winner finished, or loses the compare-and-set
/// on a waiting run, gets a run-state refusal (exit 4) naming the status
/// it found (`COMPLETED`, or `RUNNING` / `WAITING_FOR_APPROVAL` for a
/// waiting run another resumer took first). The core refuses to resume a
/// finished run instead of returning it, so exit 0 belongs to the winner
/// alone; a loser that exited 0 would have to report `executed: 0` and a
/// terminal status, and is counted as a failure here because the core
/// never does that.
fn check_race(case: &Case, exits: &[Exit], executed: u64) {
    let winners: Vec<&Exit> = exits.iter().filter(|e| e.code == Some(0)).collect();
    case.check(
        winners.len() == 1,
        &format!(
            "CORE BUG? {} racers exited 0, expected exactly one",
            winners.len()
        ),
    );
    let winner = winners[0];
    case.check(
        winner.status() == "COMPLETED" && winner.json["executed"] == executed,
        &format!("the winner completed the run after executing {executed} calls"),
    );
    let total: u64 = exits
        .iter()
        .map(|e| e.json["executed"].as_u64().unwrap_or(0))
        .sum();
    case.check(
        total == executed,
        &format!("CORE BUG? {total} calls executed by all racers, expected {executed}"),
    );
    let owner = winner.json["owner"].as_str().unwrap_or("");
    for exit in exits.iter().filter(|e| e.code != Some(0)) {
        match exit.code {
            Some(3) => {
                let leased_to = exit.json["owner"].as_str().unwrap_or("");
                case.check(
                    leased_to == owner,
                    &format!("a loser was told the run is leased to {leased_to:?}, not the winner {owner:?}"),
                );
            }
            Some(4) => case.check(
                ["COMPLETED", "RUNNING", "WAITING_FOR_APPROVAL"]
                    .contains(&exit.json["run_state"].as_str().unwrap_or("")),
                "a loser's run-state refusal names the run's status",
            ),
            _ => case.fail(&format!("a loser ended {}", exit.line())),
        }
    }
}

/// Eight processes take over the same interrupted run at the same moment
/// (a read-only call killed while it ran, its lease expired): exactly one
/// takes the lease, marks the step and runs the rest of the plan; the
/// others are refused. The killed call is not run again, the second call
/// runs once, and the run records exactly one takeover.
#[test]
fn eight_processes_taking_over_one_interrupted_run_execute_it_once() {
    let case = Case::new("read_only", "race: eight takeovers".into());
    case.kill_at("start", "tool.effect", 1);
    let exits = race(&case);
    check_race(&case, &exits, 1);
    case.verify([1, 1]);
    let takeovers = case
        .store()
        .list_events(RUN)
        .expect("events")
        .iter()
        .filter(|e| e.event_type == EventType::LeaseTakenOver)
        .count();
    case.check(
        takeovers == 1,
        &format!("CORE BUG? {takeovers} lease.taken_over events, expected 1"),
    );
}

/// A racer that loses the takeover's compare-and-set after the winner has
/// already finished the run is told the run's new state (a run-state
/// refusal naming COMPLETED), never `RunLeased` with an empty owner: core
/// design §13 keeps `RunLeased` for a live lease of another owner.
#[test]
fn a_takeover_loser_is_told_the_run_state_not_an_empty_lease() {
    let case = Case::new("read_only", "race: what the losers are told".into());
    case.kill_at("start", "tool.effect", 1);
    let exits = race(&case);
    check_race(&case, &exits, 1);
    let empty = exits
        .iter()
        .filter(|e| e.code == Some(3) && e.json["owner"] == "")
        .count();
    case.check(
        empty == 0,
        &format!("{empty} racers were refused RunLeased with an empty owner"),
    );
}

/// Eight processes resume the same run whose interrupted side effect was
/// just approved: exactly one runs the approved call again (once) and the
/// rest of the plan; the others are refused (design §21 control 37, with
/// processes).
#[test]
fn eight_processes_resuming_one_approved_interrupted_side_effect_run_it_once() {
    let case = Case::new("local_mutation", "race: eight resumes of a grant".into());
    case.kill_at("start", "tool.effect", 1);
    let paused = case.resume();
    case.check(
        paused.status() == "WAITING_FOR_APPROVAL",
        "the takeover pauses the interrupted side effect",
    );
    let approved = case.invoke("approve-pending", &[]);
    case.check(approved.code == Some(0), "the operator approves");
    let exits = race(&case);
    check_race(&case, &exits, 2);
    case.verify([2, 1]);
}

/// The consumer's command line: usage errors exit 2 without touching
/// anything.
#[test]
fn the_consumer_refuses_a_bad_command_line_with_exit_2() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = dir.path().join("run.db");
    let db = db.to_str().expect("a UTF-8 path");
    for args in [
        vec!["--db", db, "--run", RUN],
        vec!["--db", db, "--run", RUN, "start"],
        vec![
            "--db",
            db,
            "--run",
            RUN,
            "--effects",
            "fx",
            "--class",
            "reckless",
            "start",
        ],
        vec![
            "--db",
            db,
            "--run",
            RUN,
            "--effects",
            "fx",
            "--class",
            "read_only",
            "--crash-at",
            "nowhere",
            "--marker",
            "m",
            "start",
        ],
        vec![
            "--db",
            db,
            "--run",
            RUN,
            "--effects",
            "fx",
            "--class",
            "read_only",
            "--crash-at",
            "tool.effect",
            "start",
        ],
        vec!["--db", db, "--run", RUN, "--lease-ttl-ms", "0", "resume"],
        vec!["--bogus"],
    ] {
        let out = Command::new(BIN).args(&args).output().expect("runs");
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    assert!(!Path::new(db).exists(), "nothing was created");
}
