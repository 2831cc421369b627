//! The schema on PostgreSQL: created once, migrated under a lock, a newer
//! one refused; and a connection string's password kept out of messages.

use agentrt::Error;

use crate::backends::{self, Backend};

#[test]
fn reopening_applies_no_migration_again() {
    let backend = Backend::postgres();
    drop(backend.open());
    drop(backend.open());
    let mut client = backends::client(&backend.location);
    let versions: Vec<i64> = client
        .query("SELECT version FROM schema_migrations", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [agentrt_postgres::schema::SCHEMA_VERSION]);
    let meta: i64 = client
        .query_one("SELECT COUNT(*) FROM agentrt_meta", &[])
        .unwrap()
        .get(0);
    assert_eq!(meta, 3);
}

#[test]
fn hosts_opening_a_new_database_at_once_migrate_it_once() {
    let backend = Backend::postgres();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| drop(backend.open()));
        }
    });
    let count: i64 = backends::client(&backend.location)
        .query_one("SELECT COUNT(*) FROM schema_migrations", &[])
        .unwrap()
        .get(0);
    assert_eq!(count, 1);
}

#[test]
fn a_database_at_a_newer_schema_is_refused() {
    let backend = Backend::postgres();
    drop(backend.open());
    backends::client(&backend.location)
        .execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (99, 'later')",
            &[],
        )
        .unwrap();
    match agentrt_postgres::open(&backend.location) {
        Err(Error::SchemaVersion {
            database, build, ..
        }) => assert_eq!(
            (database, build),
            (99, agentrt_postgres::schema::SCHEMA_VERSION)
        ),
        other => panic!("expected a schema version error, got {other:?}"),
    }
}

#[test]
fn a_password_never_shows_in_errors_or_in_the_store() {
    const SECRET: &str = "sekrit-pw-4711";
    let refused = [
        // Nobody listens on port 1.
        format!("host=127.0.0.1 port=1 user=agentrt password={SECRET} dbname=agentrt"),
        format!("postgres://agentrt:{SECRET}@127.0.0.1:1/agentrt"),
        // Not a connection string at all.
        format!("postgres://agentrt:{SECRET}@[not-a-host/agentrt?sslmode=nonsense"),
    ];
    for location in &refused {
        let err = agentrt_postgres::open(location).unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains(SECRET), "{shown}");
    }
    // The test server trusts local connections, so a password is accepted
    // and ignored: the store's description still leaves it out.
    let location = format!("{} password={SECRET}", backends::fresh_database());
    let store = agentrt_postgres::open(&location).unwrap();
    let shown = format!("{store:?}");
    assert!(shown.contains("PostgreSQL database"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}
