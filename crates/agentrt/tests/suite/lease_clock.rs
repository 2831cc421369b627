//! The gate's lease clock, by which SQLite judges leases: a race injected
//! at the instant the clock is read. PostgreSQL judges leases by its own
//! clock and never reads a host's (see `real_postgres/hosts.rs` in
//! agentrt-postgres), so this module is in SQLite's suite only.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use agentrt::model::StepStatus;
use agentrt::*;

use crate::common::*;
use crate::interruption::{TTL, after_expiry, gate_config, leases};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_that_loses_the_race_is_told_who_holds_the_lease() {
    let store = Store::open(":memory:").unwrap();
    let first = Gate::new(gate_config(
        &store,
        vec![],
        &Recorder::default(),
        "first",
        "a-",
    ))
    .unwrap();
    drop(
        first
            .begin(Some("r"), "g", Limits::default())
            .await
            .unwrap(),
    );
    after_expiry().await;
    // Right after this gate judged the expired lease, and before it writes,
    // another program takes the run over: its lease clock lets it in then.
    let winner = "winner/000000000000";
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (other, once, leases_now) = (store.clone(), fired.clone(), leases());
    let clock: Clock = Arc::new(move || {
        let now = leases_now.peek();
        if !once.swap(true, Ordering::SeqCst) {
            other
                .write(|tx| {
                    tx.update_run(
                        "r",
                        &agentrt::store::RunGuard::default(),
                        &agentrt::store::RunChange {
                            lease: agentrt::store::LeaseChange::Set {
                                owner: winner,
                                expires_at: now.add(TTL),
                            },
                            ..Default::default()
                        },
                    )
                })
                .unwrap();
        }
        now
    });
    let late = Gate::new(
        gate_config(&store, vec![], &Recorder::default(), "late", "b-").with_lease_clock(clock),
    )
    .unwrap();
    let events = store.list_events("r").unwrap().len();
    match late.attach("r").await.unwrap_err() {
        Error::RunLeased {
            owner, expires_at, ..
        } => {
            assert_eq!(owner, winner);
            assert_eq!(expires_at, leases().peek().add(TTL).to_string());
        }
        other => panic!("expected RunLeased, got {other:?}"),
    }
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(
        store.list_events("r").unwrap().len(),
        events,
        "nothing written"
    );
    assert_eq!(store.lease("r").unwrap().0, winner);
    assert_eq!(
        store.list_steps("r").unwrap()[0].status,
        StepStatus::Deciding
    );
}
