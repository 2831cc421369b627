//! The store over TLS to a server on another address: every connection
//! (the pool's and the change signal's) encrypted and the server's
//! certificate verified; an untrusted or misnamed server refused.
//!
//! The test cluster accepts TCP connections on 127.0.0.1 only over TLS
//! (`hostssl`), with a certificate for `localhost` signed by a CA made for
//! it; `AGENTRT_TEST_POSTGRES_TLS` trusts that CA (`sslrootcert`).

use crate::backends::{self, PASSWORD, tls_server};

/// `tls_server()` for database `name`, its pairs changed by `edit` and a
/// password added (the server trusts any; no error may show it).
fn tls_location(name: &str, edit: &[(&str, &str)]) -> String {
    let mut location = format!("{} dbname={name} password={PASSWORD}", tls_server());
    for (from, to) in edit {
        assert!(location.contains(from), "{location} has no {from}");
        location = location.replace(from, to);
    }
    location
}

/// `location` without its `key=…` pair.
fn without(location: &str, key: &str) -> String {
    location
        .split_whitespace()
        .filter(|pair| !pair.starts_with(&format!("{key}=")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// How many of database `name`'s sessions are encrypted and how many are
/// not, as the server sees them (asked over the unix socket).
fn sessions_by_tls(name: &str) -> (i64, i64) {
    let name = name.to_owned();
    backends::on_plain_thread(move || {
        let mut admin = backends::client(&backends::server());
        let row = admin
            .query_one(
                "SELECT count(*) FILTER (WHERE s.ssl), count(*) FILTER (WHERE NOT s.ssl)
                 FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
                 WHERE a.datname = $1",
                &[&name],
            )
            .unwrap();
        (row.get(0), row.get(1))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_verified_tls_writes_wakes_and_verifies_as_over_the_socket() {
    let name = backends::fresh_database_name();
    let location = tls_location(&name, &[]);
    let (waiting, writing) = {
        let location = location.clone();
        backends::on_plain_thread(move || {
            (
                agentrt_postgres::open(&location).unwrap(),
                agentrt_postgres::open(&location).unwrap(),
            )
        })
    };
    // The change signal's connection is TLS too: the waiter wakes on the
    // other handle's notice.
    let woke = crate::hosts::woken_by_a_commit(&waiting, &writing, || {}).await;
    assert_eq!(woke, Some(Some(2)));
    let (encrypted, plain) = sessions_by_tls(&name);
    assert!(encrypted >= 3, "{encrypted} encrypted sessions");
    assert_eq!(plain, 0);
    let report = writing
        .off_executor(|store| agentrt::verify::verify(store, &Default::default()))
        .await
        .unwrap();
    assert!(report.intact(), "{report:?}");
    assert_eq!(report.checked, 2);
}

#[test]
fn an_untrusted_or_misnamed_server_is_refused_and_tls_is_not_dropped_for_it() {
    let name = backends::fresh_database_name();
    let refusals = [
        // The system's roots do not hold the cluster's CA.
        (
            without(&tls_location(&name, &[]), "sslrootcert"),
            "certificate",
        ),
        // The certificate is for localhost, not for this name.
        (
            tls_location(
                &name,
                &[("host=localhost", "host=db.invalid hostaddr=127.0.0.1")],
            ),
            "certificate",
        ),
        // Without TLS, the server refuses the connection (so the store
        // above could only have connected over TLS).
        (
            without(
                &tls_location(&name, &[("sslmode=verify-full", "sslmode=disable")]),
                "sslrootcert",
            ),
            "no encryption",
        ),
    ];
    for (location, expected) in refusals {
        let e = backends::on_plain_thread(|| agentrt_postgres::open(&location))
            .err()
            .unwrap_or_else(|| panic!("{location} was accepted"))
            .to_string();
        assert!(e.contains(expected), "{location}: {e}");
        assert!(!e.contains(PASSWORD), "{e}");
    }
}
