//! SQLite only: a write lock held from another connection.

/// Holds the write lock of the database file `db` from another connection
/// until the returned sender is dropped or sent to; returns once the lock
/// is held.
pub fn hold_write_lock(db: &std::path::Path) -> std::sync::mpsc::Sender<()> {
    let (locked_tx, locked_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let db = db.to_owned();
    std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        let _ = release_rx.recv();
        conn.execute_batch("ROLLBACK").unwrap();
    });
    locked_rx.recv().unwrap();
    release_tx
}
