//! The README's demo on a real PostgreSQL server (`--db postgres://…`):
//! it pauses at its approval, prints commands that name the database
//! without its password, and on resume runs the approved call once.
//!
//! Needs `AGENTRT_TEST_POSTGRES` (as `cargo xtask postgres -- …` sets it).

#[path = "../scripted/demo.rs"]
#[allow(dead_code)]
mod demo;

#[path = "../../crates/agentrt-postgres/tests/real_postgres/backends.rs"]
mod backends;

use std::path::PathBuf;
use std::sync::Arc;

use agentrt::{DecideOptions, Operator, RunStatus};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_runs_on_a_postgres_url_and_never_prints_its_password() {
    let name = backends::fresh_database_name();
    let url = backends::url(&name);
    let options = demo::Options {
        db: PathBuf::from(&url),
        resume: None,
    };
    let mut out = Vec::new();
    let first = demo::run(&options, &mut out, Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(first.run.status, RunStatus::WaitingForApproval);
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains(backends::PASSWORD), "{text}");
    let shown = agentrt_postgres::redacted(&url);
    assert!(
        text.contains(&format!(
            "cargo run --example scripted -- --db {shown:?} --resume {}",
            first.run.id
        )),
        "{text}"
    );

    let store = agentrt_postgres::open_existing(&url).unwrap();
    Operator::new(store.clone())
        .approve(
            &first.run.id,
            &first.approval.clone().unwrap(),
            &DecideOptions {
                by: "test",
                note: "",
                shown_hash: None,
            },
        )
        .unwrap();
    let resume = demo::Options {
        db: PathBuf::from(&url),
        resume: Some(first.run.id.clone()),
    };
    let second = demo::run(&resume, &mut Vec::new(), Arc::new(|_: &agentrt::Event| {}))
        .await
        .unwrap();
    assert_eq!(second.run.status, RunStatus::Completed);
    let report = agentrt::verify::verify(&store, &Default::default()).unwrap();
    assert!(report.intact(), "the chain verifies: {report:?}");
}
