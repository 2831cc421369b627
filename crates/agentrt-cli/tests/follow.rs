//! `agentrt events --follow`: every run's events as JSON Lines as they
//! commit, from another process than the writer; stopped by SIGTERM with
//! its cursor saved (exactly once across the restart), and killed with
//! SIGKILL without skipping an event.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use support::*;

/// A follower child and the seqs it prints, line by line.
struct Following {
    child: Child,
    seqs: Receiver<i64>,
}

fn follow(db: &Path, args: &[&str]) -> Following {
    let mut command = cli();
    command
        .arg("--db")
        .arg(db)
        .args(["events", "--follow"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = command.spawn().expect("the binary runs");
    let stdout = child.stdout.take().expect("stdout");
    let (send, seqs) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let record = json(&line);
            if send.send(record["seq"].as_i64().expect("a seq")).is_err() {
                return;
            }
        }
    });
    Following { child, seqs }
}

impl Following {
    /// The next `n` seqs printed (a generous guard, not a timing check).
    fn next(&self, n: usize) -> Vec<i64> {
        (0..n)
            .map(|_| {
                self.seqs
                    .recv_timeout(Duration::from_secs(30))
                    .expect("the follower printed the event")
            })
            .collect()
    }

    fn signal(&mut self, signal: i32) -> std::process::ExitStatus {
        // SAFETY: a signal to our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        self.child.wait().expect("the follower exits")
    }
}

fn event_count(db: &Path) -> i64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT MAX(seq) FROM events", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn follow_prints_every_runs_events_as_they_commit_and_a_sigterm_keeps_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = new_db(dir.path(), "follow.db");
    let cursor = dir.path().join("cursor");
    completed_run(&db, "r1", "first");
    let first = event_count(&db);

    let cursor_arg = cursor.to_str().unwrap();
    let mut following = follow(&db, &["--cursor", cursor_arg]);
    assert_eq!(
        following.next(first as usize),
        (1..=first).collect::<Vec<_>>()
    );
    // Another process's commit wakes it.
    completed_run(&db, "r2", "second");
    let second = event_count(&db);
    assert_eq!(
        following.next((second - first) as usize),
        (first + 1..=second).collect::<Vec<_>>()
    );
    let status = following.signal(libc::SIGTERM);
    assert!(status.success(), "{status:?}");
    assert_eq!(
        std::fs::read_to_string(&cursor).unwrap(),
        format!("{second}\n")
    );

    // Restarted on the same cursor: only what came after.
    completed_run(&db, "r3", "third");
    let third = event_count(&db);
    let mut following = follow(&db, &["--cursor", cursor_arg]);
    assert_eq!(
        following.next((third - second) as usize),
        (second + 1..=third).collect::<Vec<_>>()
    );
    assert!(
        following
            .seqs
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "nothing twice"
    );
    assert!(following.signal(libc::SIGTERM).success());
}

#[test]
fn a_follower_killed_and_restarted_skips_no_event() {
    let dir = tempfile::tempdir().unwrap();
    let db = new_db(dir.path(), "kill.db");
    let cursor = dir.path().join("cursor");
    let cursor_arg = cursor.to_str().unwrap();
    completed_run(&db, "r1", "first");
    let mut following = follow(&db, &["--cursor", cursor_arg]);
    let mut seen = following.next(event_count(&db) as usize);
    completed_run(&db, "r2", "second");
    let status = following.signal(libc::SIGKILL);
    assert!(!status.success());
    // What it printed before dying, and whatever it had not.
    while let Ok(seq) = following.seqs.recv_timeout(Duration::from_millis(200)) {
        seen.push(seq);
    }
    completed_run(&db, "r3", "third");
    let last = event_count(&db);
    let mut restarted = follow(&db, &["--cursor", cursor_arg]);
    let saved: i64 = std::fs::read_to_string(&cursor)
        .map(|t| t.trim().parse().unwrap())
        .unwrap_or(0);
    seen.extend(restarted.next((last - saved) as usize));
    assert!(restarted.signal(libc::SIGTERM).success());
    let mut distinct = seen.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct,
        (1..=last).collect::<Vec<_>>(),
        "no event skipped: {seen:?}"
    );
}

#[test]
fn follow_from_a_seq_prints_one_runs_later_events() {
    let dir = tempfile::tempdir().unwrap();
    let db = new_db(dir.path(), "from.db");
    completed_run(&db, "r1", "first");
    completed_run(&db, "r2", "second");
    let mut following = follow(&db, &["--from", "2", "r1"]);
    let store = agentrt::Store::open(&db).unwrap();
    let r1: Vec<i64> = store
        .list_events("r1")
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    let want: Vec<i64> = r1.into_iter().filter(|s| *s > 2).collect();
    assert_eq!(following.next(want.len()), want);
    assert!(
        following
            .seqs
            .recv_timeout(Duration::from_millis(300))
            .is_err(),
        "only r1's"
    );
    assert!(following.signal(libc::SIGTERM).success());
}

#[test]
fn follow_flags_that_do_not_go_together_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = new_db(dir.path(), "usage.db");
    for args in [
        vec!["events"],
        vec!["events", "r1", "--from", "3"],
        vec!["events", "--follow", "--from", "1", "--cursor", "c"],
        vec!["events", "--follow", "--limit", "5"],
    ] {
        let out = agentrt(&db, &args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
    }
}
