//! Run labels (issue 10): given at begin, recorded in `run.created` and in
//! a `run_labels` row of the run's first write group, read back with the
//! run, and filterable (every label must match) with the total counting
//! only the matching runs.

mod common;

use std::path::Path;
use std::sync::Arc;

use agentrt::*;
use common::*;

fn labels(texts: &[&str]) -> Labels {
    Labels::parse(texts).unwrap()
}

fn gate(store: &Store) -> Gate {
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    Gate::new(config(
        store,
        DefaultPolicy,
        shared(vec![read]),
        &stepping_clock(),
        &Recorder::default(),
    ))
    .unwrap()
}

/// Begins run `id` with `labels` and closes its session.
async fn begin(gate: &Gate, id: &str, labels: Labels) -> Run {
    let mut session = gate
        .begin_labelled(Some(id), "g", Limits::default(), labels)
        .await
        .unwrap();
    let run = session.run().clone();
    session.close().await.unwrap();
    run
}

fn raw(path: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

/// The `run.created` payload of `run_id`.
fn created_payload(store: &Store, run_id: &str) -> String {
    let events = store.list_events(run_id).unwrap();
    assert_eq!(events[0].event_type, EventType::RunCreated);
    events[0].payload.clone()
}

#[tokio::test]
async fn begin_records_the_labels_in_run_created_and_in_a_row_of_the_same_write_group() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("labels.db");
    let store = Store::open(&path).unwrap();
    let gate = gate(&store);
    let given = labels(&["ticket=OPS-12", "host=build-7", "mcp.session=4f2a"]);
    let mut session = gate
        .begin_labelled(Some("r1"), "g", Limits::default(), given.clone())
        .await
        .unwrap();
    assert_eq!(store.commits(), 1, "one write group: run, labels, step");
    assert_eq!(session.run().labels, given);
    session.close().await.unwrap();
    drop(session);

    // In run.created, as the canonical object, between goal and limits.
    let payload = created_payload(&store, "r1");
    let tools = serde_json::from_str::<serde_json::Value>(&payload).unwrap()["tools"].to_string();
    assert_eq!(
        payload,
        format!(
            r#"{{"goal":"g","labels":{{"host":"build-7","mcp.session":"4f2a","ticket":"OPS-12"}},"limits":{},"tools":{tools}}}"#,
            serde_json::to_string(&Limits::default()).unwrap()
        )
    );

    // In the row, the same canonical object, chained by the last event of
    // the run's first write group (the one that lists the run's row too).
    let (json, written): (String, i64) = raw(&path)
        .query_row(
            "SELECT labels_json, written_seq FROM run_labels WHERE run_id = 'r1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(json, given.to_canonical().as_str());
    let run_written: i64 = raw(&path)
        .query_row("SELECT written_seq FROM runs WHERE id = 'r1'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(written, run_written);
    let rows: String = raw(&path)
        .query_row(
            "SELECT rows_json FROM events WHERE seq = ?1",
            [written],
            |r| r.get(0),
        )
        .unwrap();
    assert!(rows.contains(r#"["run_labels","r1",""#), "{rows}");

    // Read back with the run: plain, capped, listed, and on attach.
    assert_eq!(store.get_run("r1").unwrap().labels, given);
    assert_eq!(store.get_run_capped("r1").unwrap().labels, given);
    assert_eq!(store.list_runs(0, 0).unwrap().items[0].labels, given);
    let (attached, _) = gate.attach("r1").await.unwrap();
    assert_eq!(attached.run().labels, given);
    assert_eq!(view::run_summary(&store, "r1").unwrap().labels, given);
    let verified = verify::verify(&store, &verify::VerifyOptions::default()).unwrap();
    assert!(verified.intact(), "{verified:?}");
}

#[tokio::test]
async fn the_driver_starts_a_labelled_run_to_its_end() {
    let store = Store::open(":memory:").unwrap();
    let read = Arc::new(Counting::new("fs_read", SideEffect::ReadOnly));
    let mut driver = Driver::new(
        config(
            &store,
            DefaultPolicy,
            shared(vec![read]),
            &stepping_clock(),
            &Recorder::default(),
        ),
        ScriptedAgent::new([
            Decision::tool_call("fs_read", "{}"),
            Decision::complete("1"),
        ]),
    )
    .unwrap();
    let given = labels(&["host=build-7"]);
    let run = driver
        .start_labelled(Some("d"), "g", Limits::default(), given.clone())
        .await
        .unwrap();
    assert_eq!(run.status, RunStatus::Completed);
    assert_eq!(run.labels, given);
    assert_eq!(store.get_run("d").unwrap().labels, given);
}

#[tokio::test]
async fn a_run_without_labels_records_no_labels_key_and_no_label_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plain.db");
    let store = Store::open(&path).unwrap();
    let gate = gate(&store);
    let mut session = gate
        .begin(Some("plain"), "g", Limits::default())
        .await
        .unwrap();
    session.close().await.unwrap();
    begin(&gate, "empty", Labels::new()).await;
    let plain = created_payload(&store, "plain");
    assert!(!plain.contains("labels"), "{plain}");
    assert_eq!(created_payload(&store, "empty"), plain);
    let rows: i64 = raw(&path)
        .query_row("SELECT COUNT(*) FROM run_labels", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 0);
    for id in ["plain", "empty"] {
        let run = store.get_run(id).unwrap();
        assert!(
            run.labels.is_empty() && run.decode_error.is_none(),
            "{run:?}"
        );
        assert_eq!(
            serde_json::to_value(view::run_summary(&store, id).unwrap()).unwrap()["labels"],
            serde_json::Value::Null,
            "no labels key in the summary"
        );
    }
}

#[tokio::test]
async fn listing_by_labels_keeps_runs_with_every_label_and_counts_only_them() {
    let store = Store::open(":memory:").unwrap();
    let gate = gate(&store);
    let runs: [(&str, &[&str]); 6] = [
        ("a", &["env=prod", "team=infra"]),
        ("b", &["env=prod"]),
        ("c", &["env=dev", "team=infra"]),
        ("d", &[]),
        ("e", &["env=prod", "team=infra", "n=1"]),
        ("f", &["env=production", "team="]),
    ];
    for (id, given) in runs {
        begin(&gate, id, labels(given)).await;
    }
    let ids = |filter: &[&str], limit: u64, offset: u64| {
        let page = store
            .list_runs_labelled(limit, offset, &labels(filter))
            .unwrap();
        let capped = store
            .runs_page_capped_labelled(limit, offset, &labels(filter))
            .unwrap();
        let summaries = view::runs_page_labelled(&store, limit, offset, &labels(filter)).unwrap();
        let got: Vec<String> = page.items.iter().map(|r| r.id.clone()).collect();
        let capped_ids: Vec<String> = capped.items.iter().map(|r| r.id.clone()).collect();
        let summary_ids: Vec<String> = summaries.runs.iter().map(|r| r.id.clone()).collect();
        assert_eq!(
            (&capped_ids, capped.total),
            (&got, page.total),
            "{filter:?}"
        );
        assert_eq!(
            (&summary_ids, summaries.total),
            (&got, page.total),
            "{filter:?}"
        );
        (got, page.total)
    };
    let want = |list: &[&str], total: u64| {
        (
            list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
            total,
        )
    };
    // No labels: every run, as list_runs.
    assert_eq!(ids(&[], 0, 0), want(&["f", "e", "d", "c", "b", "a"], 6));
    assert_eq!(store.list_runs(0, 0).unwrap().total, 6);
    // One label: the exact value only (not a prefix, not another key).
    assert_eq!(ids(&["env=prod"], 0, 0), want(&["e", "b", "a"], 3));
    assert_eq!(ids(&["team=infra"], 0, 0), want(&["e", "c", "a"], 3));
    // Every label must match.
    assert_eq!(ids(&["env=prod", "team=infra"], 0, 0), want(&["e", "a"], 2));
    assert_eq!(
        ids(&["team=infra", "env=prod", "n=1"], 0, 0),
        want(&["e"], 1)
    );
    assert_eq!(ids(&["env=dev", "env2=x"], 0, 0), want(&[], 0));
    // No match; an empty value matches only an empty value.
    assert_eq!(ids(&["env=staging"], 0, 0), want(&[], 0));
    assert_eq!(ids(&["env=Prod"], 0, 0), want(&[], 0));
    assert_eq!(ids(&["team="], 0, 0), want(&["f"], 1));
    // Pages are cut from the matching runs; the total counts only them.
    assert_eq!(ids(&["env=prod"], 1, 0), want(&["e"], 3));
    assert_eq!(ids(&["env=prod"], 1, 1), want(&["b"], 3));
    assert_eq!(ids(&["env=prod"], 2, 2), want(&["a"], 3));
    assert_eq!(ids(&["env=prod"], 5, 3), want(&[], 3));
    let page = view::runs_page_labelled(&store, 1, 0, &labels(&["env=prod"])).unwrap();
    assert!(page.truncated);
}

#[tokio::test]
async fn a_damaged_label_row_is_reported_with_the_run_and_matches_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.db");
    let store = Store::open(&path).unwrap();
    let gate = gate(&store);
    begin(&gate, "bad-json", labels(&["env=prod"])).await;
    begin(&gate, "bad-key", labels(&["env=prod"])).await;
    begin(&gate, "good", labels(&["env=prod"])).await;
    raw(&path)
        .execute_batch(
            r#"UPDATE run_labels SET labels_json = '{not json' WHERE run_id = 'bad-json';
               UPDATE run_labels SET labels_json = '{"Env":"prod"}' WHERE run_id = 'bad-key';"#,
        )
        .unwrap();
    for id in ["bad-json", "bad-key"] {
        for run in [
            store.get_run(id).unwrap(),
            store.get_run_capped(id).unwrap(),
        ] {
            assert!(run.labels.is_empty(), "{run:?}");
            let problem = run.decode_error.unwrap_or_default();
            assert!(problem.starts_with("labels_json: "), "{problem}");
        }
    }
    assert_eq!(store.list_runs(0, 0).unwrap().total, 3);
    let page = store
        .list_runs_labelled(0, 0, &labels(&["env=prod"]))
        .unwrap();
    assert_eq!(
        (page.items.len(), page.total, page.items[0].id.as_str()),
        (1, 1, "good")
    );
}

#[tokio::test]
async fn labels_are_kept_once_per_run() {
    let store = Store::open(":memory:").unwrap();
    begin(&gate(&store), "r", labels(&["env=prod"])).await;
    let err = store
        .write(|tx| tx.insert_run_labels("r", &labels(&["env=dev"])))
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Database {
                kind: DatabaseErrorKind::Constraint,
                ..
            }
        ),
        "{err:?}"
    );
    // No labels write nothing, so they need no event either.
    store
        .write(|tx| tx.insert_run_labels("r", &Labels::new()))
        .unwrap();
    assert_eq!(store.get_run("r").unwrap().labels, labels(&["env=prod"]));
}
