//! Connections that died while they sat in the pool, found out only when
//! used (the server restarted behind a proxy, a network path dropped): the
//! call they were lent for runs on another connection, unless it had
//! already done something that lasts. The test's own relay between the
//! store and the server makes every connection open at the cut dead on its
//! next request, deterministically (a connection the server ends itself
//! may be noticed before it is used), or silent: what it is sent goes
//! nowhere and no answer comes, as over a partitioned network.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backends::{self, created_run, stepped_run};
use crate::hosts::woken_by_a_commit;

/// The port the relay's socket is named for (`.s.PGSQL.5432` in its own
/// directory).
const RELAY_PORT: u16 = 5432;

/// A relay on a unix socket of its own to the test server.
struct Relay {
    dir: tempfile::TempDir,
    /// Bumped by [`Relay::cut`]: a connection accepted before then is dead.
    generation: Arc<AtomicU64>,
    /// Every connection accepted, in order: whether it is silenced.
    silenced: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
}

impl Relay {
    fn start() -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let listener =
            UnixListener::bind(dir.path().join(format!(".s.PGSQL.{RELAY_PORT}"))).unwrap();
        let server = format!(
            "{}/.s.PGSQL.{}",
            backends::setting("host"),
            backends::setting("port")
        );
        let generation = Arc::new(AtomicU64::new(0));
        let silenced = Arc::new(Mutex::new(Vec::new()));
        let (current, accepted) = (Arc::clone(&generation), Arc::clone(&silenced));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(upstream) = UnixStream::connect(&server) else {
                    continue;
                };
                let born = current.load(Ordering::SeqCst);
                let silent = Arc::new(AtomicBool::new(false));
                accepted.lock().unwrap().push(Arc::clone(&silent));
                relay(client, upstream, born, Arc::clone(&current), silent);
            }
        });
        Relay {
            dir,
            generation,
            silenced,
        }
    }

    /// The connection string of database `name` through the relay.
    fn location(&self, name: &str) -> String {
        format!(
            "host={} port={RELAY_PORT} user={} dbname={name}",
            self.dir.path().display(),
            backends::setting("user")
        )
    }

    /// How many connections the relay accepted so far.
    fn accepted(&self) -> usize {
        self.silenced.lock().unwrap().len()
    }

    /// The newest connection goes silent: what either end sends is
    /// dropped, and neither is told.
    fn silence_newest(&self) {
        if let Some(newest) = self.silenced.lock().unwrap().last() {
            newest.store(true, Ordering::SeqCst);
        }
    }

    /// Every connection open now dies on its next request: nothing more
    /// reaches its client, and what it sends next closes it.
    fn cut(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Copies both ways between `client` and `upstream` while the relay's
/// generation is still `born`, dropping everything once `silent`.
fn relay(
    client: UnixStream,
    upstream: UnixStream,
    born: u64,
    current: Arc<AtomicU64>,
    silent: Arc<AtomicBool>,
) {
    let silent_up = Arc::clone(&silent);
    let alive = {
        let current = Arc::clone(&current);
        move || current.load(Ordering::SeqCst) == born
    };
    let (mut from_client, mut to_upstream) =
        (client.try_clone().unwrap(), upstream.try_clone().unwrap());
    let client_alive = alive.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                // Silent: the request goes nowhere, the client waits.
                Ok(_) if silent_up.load(Ordering::SeqCst) => {}
                Ok(n) if client_alive() => {
                    if to_upstream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                Ok(_) => {
                    // Dead: the client finds out now, on its request.
                    let _ = from_client.shutdown(std::net::Shutdown::Both);
                    break;
                }
            }
        }
        let _ = to_upstream.shutdown(std::net::Shutdown::Both);
    });
    let (mut from_upstream, mut to_client) = (upstream, client);
    std::thread::spawn(move || {
        let mut buf = [0u8; 16384];
        loop {
            match from_upstream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) if alive() && !silent.load(Ordering::SeqCst) => {
                    if to_client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                // Dead or silent: nothing more reaches the client, not
                // told either (no end of stream) until it sends.
                Ok(_) => {}
            }
        }
    });
}

#[test]
fn a_read_or_a_write_group_lent_a_dead_connection_runs_on_another() {
    let name = backends::fresh_database_name();
    let relay = Relay::start();
    let store = agentrt_postgres::open(&relay.location(&name)).unwrap();
    store.write(created_run("a")).unwrap();
    assert_eq!(store.get_run("a").unwrap().goal, "g");
    // A read first: it only reads, so it runs again, whole.
    relay.cut();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 1);
    // A write group first: its first request (`BEGIN`, the chain head's
    // lock, the insert) found the connection dead, so nothing of it
    // lasted, and it went again on a new one.
    relay.cut();
    store.write(created_run("b")).unwrap();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 2);
    let report = agentrt::verify::verify(&store, &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 2);
}

#[test]
fn a_group_whose_first_request_carried_a_change_is_sent_again_whole_on_another_connection() {
    let name = backends::fresh_database_name();
    let relay = Relay::start();
    let store = agentrt_postgres::open(&relay.location(&name)).unwrap();
    store.write(created_run("a")).unwrap();
    relay.cut();
    // The guarded update goes with `BEGIN` and the lock, on a connection
    // that is dead: nothing of it ran, and it goes again on a new one.
    let ((), events) = store.write(stepped_run("a", 0)).unwrap();
    assert_eq!(events[0].seq, 2);
    assert_eq!(store.get_run("a").unwrap().step_count, 1, "applied once");
    let report = agentrt::verify::verify(&store, &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 2);
}

/// A store through `relay` on database `name` whose silence limit is one
/// second (its listener asks the server for an answer every half second).
fn impatient_store(relay: &Relay, name: &str) -> agentrt::Store {
    agentrt_postgres::open_with(
        &relay.location(name),
        agentrt_postgres::PgOptions {
            network_timeout: Some(Duration::from_secs(1)),
            ..agentrt_postgres::PgOptions::default()
        },
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_still_wakes_after_the_listeners_path_went_silent() {
    let name = backends::fresh_database_name();
    let relay = Relay::start();
    let waiting = impatient_store(&relay, &name);
    let writing = agentrt_postgres::open(&backends::location(&name)).unwrap();
    let woke = woken_by_a_commit(&waiting, &writing, || {
        // The store's first connection (in its pool) and the listener's.
        assert_eq!(relay.accepted(), 2);
        // The listener's goes silent: the commit's notice never reaches
        // it, and nothing tells it so but its own unanswered question.
        relay.silence_newest();
    })
    .await
    .expect("the waiter was not woken (it would have waited out its 20 s)");
    assert_eq!(woke, Some(2));
    assert!(relay.accepted() >= 3, "the listener connected again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_still_wakes_after_the_listeners_connection_died_unnoticed() {
    let name = backends::fresh_database_name();
    let relay = Relay::start();
    let waiting = impatient_store(&relay, &name);
    let writing = agentrt_postgres::open(&backends::location(&name)).unwrap();
    // Every connection dies, the listener's included; only sending tells
    // a connection so, and a listener sends nothing unless it asks.
    let woke = woken_by_a_commit(&waiting, &writing, || relay.cut())
        .await
        .expect("the waiter was not woken (it would have waited out its 20 s)");
    assert_eq!(woke, Some(2));
}
