//! The recheck example: runs recorded under a lenient policy, re-checked
//! under a stricter one, name exactly the old steps it would have stopped.

#[path = "../recheck/demo.rs"]
#[allow(dead_code)]
mod demo;

use agentrt::Store;
use agentrt::testkit;

#[tokio::test]
async fn the_stricter_policy_names_exactly_the_publishing_steps() {
    let store = Store::open(":memory:").unwrap();
    let mut out = Vec::new();
    let found = demo::run(&store, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    let differing: Vec<(&str, &[u64])> = found
        .iter()
        .map(|r| (r.run_id.as_str(), r.differing.as_slice()))
        .collect();
    assert_eq!(
        differing,
        [
            ("notes-1", &[2][..]),
            ("notes-2", &[][..]),
            ("notes-3", &[0, 2][..])
        ]
    );
    assert_eq!(found[0].stopped, [(2, "publish".to_owned())]);
    for line in [
        "run notes-1 COMPLETED: 1 of 3 re-checked evaluations differ; policy changed: recorded \"rules v1: mutations allowed\", given \"rules v2: nothing leaves the machine\"; recorded specs\n",
        "would have been stopped: step 2, publish\n",
        "run notes-2 COMPLETED: 0 of 2 re-checked evaluations differ;",
        "would have been stopped: step 0, publish\n",
        "3 run(s) re-checked: 2 would have been decided otherwise\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in:\n{text}");
    }
    assert!(
        text.contains("DIFFERENT step 2 seq "),
        "differences are marked: {text}"
    );

    // The testkit says the same, and the lenient policy re-checks clean.
    testkit::recheck_differs(&store, "notes-1", &demo::strict(), &[2]).unwrap();
    testkit::recheck_differs(&store, "notes-3", &demo::strict(), &[0, 2]).unwrap();
    for (id, _, _) in demo::runs() {
        testkit::recheck(&store, id, &demo::lenient()).unwrap();
    }
}
