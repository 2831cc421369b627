//! The event follower (design §36): every event in seq order, one
//! run's or all, a cursor that makes clean stops exactly-once, a sink
//! error that stops it where it failed, and a wait that wakes on another
//! connection's commit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentrt::follow::{Cursor, FileCursor, FollowError, Follower, MemoryCursor};
use agentrt::store::NewRun;
use agentrt::{Cancel, EventType, Store, Timestamp, cancel_pair};

fn at() -> Timestamp {
    Timestamp::parse("2026-10-01T09:00:00Z").unwrap()
}

/// Run `id` created and started: two events.
fn write_run(store: &Store, id: &str) {
    store
        .write(|tx| {
            tx.insert_run(&NewRun {
                id,
                goal: "follow me",
                limits_json: "{}",
                created_at: at(),
                lease_owner: "me",
                lease_expires_at: at(),
            })?;
            tx.append_event(id, "", &at(), EventType::RunCreated, "{}")?;
            tx.append_event(id, "", &at(), EventType::RunStarted, "{}")
        })
        .unwrap();
}

/// Follows until caught up: the `(seq, run)` delivered.
async fn drain<C: Cursor>(follower: &mut Follower<C>) -> Vec<(i64, String)> {
    let mut seen = Vec::new();
    follower
        .follow(
            |e| {
                seen.push((e.seq, e.run_id.clone()));
                Ok::<(), std::io::Error>(())
            },
            &Cancel::never(),
            true,
        )
        .await
        .unwrap();
    seen
}

#[tokio::test]
async fn every_event_in_seq_order_or_one_runs_across_small_pages() {
    let store = Store::open(":memory:").unwrap();
    for id in ["a", "b", "c"] {
        write_run(&store, id);
    }
    let mut all = Follower::new(store.clone(), MemoryCursor::default()).page_size(2);
    let seen = drain(&mut all).await;
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    assert_eq!(all.cursor().seq, 6);
    let mut one = Follower::new(store.clone(), MemoryCursor::default()).run("b");
    assert_eq!(drain(&mut one).await, [(3, "b".into()), (4, "b".into())]);
    assert!(drain(&mut all).await.is_empty(), "caught up: nothing twice");
}

#[tokio::test]
async fn a_file_cursor_makes_clean_stops_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("runs.db")).unwrap();
    let cursor = dir.path().join("cursor");
    write_run(&store, "a");
    let mut first = Follower::new(store.clone(), FileCursor::new(&cursor));
    let mut seen = drain(&mut first).await;
    assert_eq!(std::fs::read_to_string(&cursor).unwrap(), "2\n");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&cursor).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    write_run(&store, "b");
    write_run(&store, "c");
    let mut second = Follower::new(store.clone(), FileCursor::new(&cursor));
    seen.extend(drain(&mut second).await);
    assert_eq!(
        seen.iter().map(|s| s.0).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5, 6]
    );
    let head = second.head().unwrap().unwrap();
    assert_eq!(head.seq, 6);
    assert_eq!(
        Some(head.hash),
        agentrt::verify::event_hash(&store, 6).unwrap()
    );
}

#[tokio::test]
async fn a_sink_error_stops_at_the_event_it_refused_and_is_delivered_again() {
    let store = Store::open(":memory:").unwrap();
    write_run(&store, "a");
    write_run(&store, "b");
    let mut follower = Follower::new(store.clone(), MemoryCursor::default());
    let mut seen = Vec::new();
    let failed = follower
        .follow(
            |e| {
                if e.seq == 3 {
                    return Err("disk full");
                }
                seen.push(e.seq);
                Ok(())
            },
            &Cancel::never(),
            true,
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            failed,
            FollowError::Sink {
                seq: 3,
                source: "disk full"
            }
        ),
        "{failed:?}"
    );
    assert_eq!(seen, [1, 2]);
    assert_eq!(follower.cursor().seq, 2, "saved at the last event accepted");
    let again = drain(&mut follower).await;
    assert_eq!(again.iter().map(|s| s.0).collect::<Vec<_>>(), [3, 4]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_follower_wakes_on_another_connections_commit_and_stops_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("runs.db");
    let writer = Store::open(&path).unwrap();
    write_run(&writer, "a");
    let reader = Store::open_existing(&path, true).unwrap();
    let seen: Arc<Mutex<Vec<i64>>> = Arc::default();
    let (handle, stop) = cancel_pair();
    let sink = Arc::clone(&seen);
    let following = tokio::spawn(async move {
        let mut follower = Follower::new(reader, MemoryCursor::default());
        follower
            .follow(
                move |e| {
                    sink.lock().unwrap().push(e.seq);
                    Ok::<(), std::io::Error>(())
                },
                &stop,
                false,
            )
            .await
            .map(|()| follower.cursor().seq)
    });
    let until = |n: usize| {
        let seen = Arc::clone(&seen);
        async move {
            for _ in 0..500 {
                if seen.lock().unwrap().len() >= n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            panic!("never saw {n} events: {:?}", seen.lock().unwrap());
        }
    };
    until(2).await;
    // Another store on the same file: another connection commits.
    let other = Store::open(&path).unwrap();
    write_run(&other, "b");
    until(4).await;
    handle.cancel();
    let cursor = following.await.unwrap().unwrap();
    assert_eq!(cursor, 4);
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3, 4]);
}

#[test]
fn a_cursor_file_holds_a_seq_or_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cursor");
    let mut cursor = FileCursor::new(&path);
    assert_eq!(cursor.load().unwrap(), 0, "missing: from the start");
    cursor.save(41).unwrap();
    assert_eq!(cursor.load().unwrap(), 41);
    for junk in [
        "",
        "x\n",
        "-3\n",
        "12 \n",
        "1\n2\n",
        "99999999999999999999\n",
    ] {
        std::fs::write(&path, junk).unwrap();
        let e = cursor.load().unwrap_err();
        assert!(e.to_string().contains("cursor file"), "{junk:?}: {e}");
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left behind");
}

/// A cursor file that never ends (a pipe whose writer stays open, a
/// device, a link a user swapped in) is refused after the few bytes a seq
/// can take, not read to its end. The writer here holds its end open until
/// the load returned: a load that reads to the end never returns (the
/// 30 s wait is a guard, not a timing check).
#[cfg(unix)]
#[test]
fn a_cursor_file_is_read_no_further_than_a_seq_can_reach() {
    use std::io::Write;
    use std::sync::mpsc::channel;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cursor");
    let made = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success());
    let (loaded, done) = channel();
    let (release, held) = channel::<()>();
    let writer_path = path.clone();
    let writer = std::thread::spawn(move || {
        let mut pipe = std::fs::OpenOptions::new()
            .write(true)
            .open(&writer_path)
            .unwrap();
        // More than a seq can be, then the end held open.
        let _ = pipe.write_all(b"123456789012345678901234567890\n");
        let _ = held.recv();
    });
    let reader_path = path.clone();
    std::thread::spawn(move || {
        let _ = loaded.send(FileCursor::new(reader_path).load());
    });
    let result = done.recv_timeout(Duration::from_secs(30));
    let _ = release.send(());
    writer.join().unwrap();
    let e = result
        .expect("the load returned while the pipe was still open")
        .unwrap_err();
    assert!(e.to_string().contains("longer than a seq"), "{e}");
}
