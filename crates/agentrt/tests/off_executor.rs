//! The store never blocks the caller's executor: a current-thread runtime
//! keeps a 100 ms ticker on time while another process holds the database's
//! write lock and while 32 runs commit at `synchronous=FULL`.
//!
//! One test per binary: tests of one binary run in parallel, and a
//! neighbour's work would be measured as the ticker's lateness.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentrt::ids::random_ids;
use agentrt::*;
use common::*;
use tokio::time::Instant;

/// The lock holder's instructions, set only for the child process.
const HOLD_DB: &str = "AGENTRT_TEST_HOLD_DB";
const HOLD_MS: &str = "AGENTRT_TEST_HOLD_MS";

const HOLD: Duration = Duration::from_millis(1000);
const RUNS: usize = 32;
const CALLS_PER_RUN: u64 = 4;
const TICK: Duration = Duration::from_millis(100);
const ON_TIME: Duration = Duration::from_millis(20);

/// The child process: takes the write lock, says so, holds it, lets go.
#[test]
#[ignore = "a helper run by the_executor_stays_on_time_…"]
fn hold_the_write_lock() {
    let (Some(db), Some(ms)) = (std::env::var_os(HOLD_DB), std::env::var_os(HOLD_MS)) else {
        return;
    };
    let ms: u64 = ms.to_string_lossy().parse().unwrap();
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    println!("locked");
    std::thread::sleep(Duration::from_millis(ms));
    conn.execute_batch("ROLLBACK").unwrap();
}

async fn governed_run(gate: Arc<Gate>, n: usize) -> Run {
    let mut session = gate
        .begin(Some(&format!("run-{n}")), "tick", Limits::default())
        .await
        .unwrap();
    for i in 0..CALLS_PER_RUN {
        session.step().await.unwrap().unwrap();
        let verdict = session
            .propose(Decision::tool_call("fs_read", format!(r#"{{"i":{i}}}"#)))
            .await
            .unwrap();
        assert_eq!(verdict.outcome, VerdictOutcome::Allowed);
        session.execute().await.unwrap();
    }
    session.step().await.unwrap().unwrap();
    session.propose(Decision::complete("{}")).await.unwrap();
    session.run().clone()
}

#[test]
fn the_executor_stays_on_time_while_the_lock_is_held_and_runs_commit_at_full() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("ticker.db");
    let store = Store::open(&db).unwrap();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let gate = Arc::new(
        Gate::new(
            GateConfig::new(store.clone(), DefaultPolicy, shared(vec![read.clone()]))
                .with_ids(random_ids()),
        )
        .unwrap(),
    );

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let ticker = tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            let (mut worst, mut ticks) = (Duration::ZERO, 0u32);
            while !stopping.load(Ordering::SeqCst) {
                let due = interval.tick().await;
                worst = worst.max(Instant::now() - due);
                ticks += 1;
            }
            (worst, ticks)
        });

        // Another process takes the write lock; wait (off the executor)
        // until it holds it.
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "hold_the_write_lock", "--ignored", "--nocapture"])
            .env(HOLD_DB, &db)
            .env(HOLD_MS, HOLD.as_millis().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (first_line, stdout) = tokio::task::spawn_blocking(move || {
            let mut lines = BufReader::new(stdout);
            let mut line = String::new();
            while !line.contains("locked") {
                line.clear();
                assert!(lines.read_line(&mut line).unwrap() > 0, "the child ended");
            }
            (line, lines)
        })
        .await
        .unwrap();
        assert!(first_line.contains("locked"));
        let locked_at = Instant::now();

        // 32 runs start while the lock is held: they wait for it on the
        // writer thread, then commit together at FULL.
        let runs: Vec<_> = (0..RUNS)
            .map(|n| tokio::spawn(governed_run(Arc::clone(&gate), n)))
            .collect();
        let mut finished = Vec::new();
        for run in runs {
            finished.push(run.await.unwrap());
        }
        let took = locked_at.elapsed();
        tokio::task::spawn_blocking(move || {
            drop(stdout);
            assert!(child.wait().unwrap().success(), "the lock holder failed");
        })
        .await
        .unwrap();
        stop.store(true, Ordering::SeqCst);
        let (worst, ticks) = ticker.await.unwrap();
        eprintln!("worst tick lateness {worst:?} over {ticks} ticks");

        assert!(
            finished.iter().all(|r| r.status == RunStatus::Completed),
            "every run completed"
        );
        assert_eq!(read.count(), RUNS * CALLS_PER_RUN as usize);
        // The runs really waited for the other process's lock.
        assert!(
            took >= HOLD / 2,
            "the runs finished in {took:?}, under the lock"
        );
        assert!(ticks >= 5, "the ticker ticked {ticks} times over {took:?}");
        assert!(
            worst <= ON_TIME,
            "a tick was {worst:?} late: something blocked the executor"
        );
    });
    let report =
        agentrt::verify::verify(&store, &agentrt::verify::VerifyOptions::default()).unwrap();
    assert!(report.intact(), "{report:?}");
}
