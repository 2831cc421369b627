//! Connections that died while they sat in the pool, found out only when
//! used (the server restarted behind a proxy, a network path dropped): the
//! call they were lent for runs on another connection, unless it had
//! already done something that lasts. The test's own relay between the
//! store and the server makes every connection open at the cut dead on its
//! next request, deterministically (a connection the server ends itself
//! may be noticed before it is used).

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::backends::{self, created_run};

/// The port the relay's socket is named for (`.s.PGSQL.5432` in its own
/// directory).
const RELAY_PORT: u16 = 5432;

/// A relay on a unix socket of its own to the test server.
struct Relay {
    dir: tempfile::TempDir,
    /// Bumped by [`Relay::cut`]: a connection accepted before then is dead.
    generation: Arc<AtomicU64>,
}

/// One test server setting (`host`, `port`) of its key=value pairs.
fn server_setting(key: &str) -> String {
    backends::server()
        .split_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_owned())
        .unwrap()
}

impl Relay {
    fn start() -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let listener =
            UnixListener::bind(dir.path().join(format!(".s.PGSQL.{RELAY_PORT}"))).unwrap();
        let server = format!(
            "{}/.s.PGSQL.{}",
            server_setting("host"),
            server_setting("port")
        );
        let generation = Arc::new(AtomicU64::new(0));
        let current = Arc::clone(&generation);
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(upstream) = UnixStream::connect(&server) else {
                    continue;
                };
                let born = current.load(Ordering::SeqCst);
                relay(client, upstream, born, Arc::clone(&current));
            }
        });
        Relay { dir, generation }
    }

    /// The connection string of database `name` through the relay.
    fn location(&self, name: &str) -> String {
        format!(
            "host={} port={RELAY_PORT} user={} dbname={name}",
            self.dir.path().display(),
            server_setting("user")
        )
    }

    /// Every connection open now dies on its next request: nothing more
    /// reaches its client, and what it sends next closes it.
    fn cut(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// Copies both ways between `client` and `upstream` while the relay's
/// generation is still `born`.
fn relay(client: UnixStream, upstream: UnixStream, born: u64, current: Arc<AtomicU64>) {
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
                Ok(n) if alive() => {
                    if to_client.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                // Dead: nothing more reaches the client, which is not
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
    // A write group first: its first request (BEGIN with the chain head's
    // lock) found the connection dead, so nothing of it ran yet.
    relay.cut();
    store.write(created_run("b")).unwrap();
    assert_eq!(store.list_runs(0, 0).unwrap().total, 2);
    let report = agentrt::verify::verify(&store, &Default::default()).unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 2);
}
