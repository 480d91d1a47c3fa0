//! `nanokafka topics create`, `alter` and `describe` with a cleanup policy.

use nanokafka::{CleanupPolicy, Error, NanoKafka};

use crate::{fixture, json, ok, run_on, snapshot, usage_error};

fn policy_of(dir: &std::path::Path, topic: &str) -> CleanupPolicy {
    let broker = NanoKafka::builder().data_dir(dir).build().expect("open");
    let policy = broker.list_topics().expect("list")[topic].cleanup_policy;
    broker.shutdown().expect("shutdown");
    policy
}

#[test]
fn create_with_cleanup_policy_compact_makes_a_topic_that_refuses_keyless_records() {
    let dir = fixture();
    let text = ok(&run_on(
        dir.path(),
        &[
            "topics",
            "create",
            "state",
            "--partitions",
            "1",
            "--cleanup-policy",
            "compact",
        ],
    ));
    assert!(text.contains("cleanup policy compact"), "{text}");
    assert_eq!(policy_of(dir.path(), "state"), CleanupPolicy::Compact);
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    let keyless = broker.produce_raw("state", None, b"v".to_vec());
    assert!(
        matches!(keyless, Err(Error::KeyRequired { .. })),
        "{keyless:?}"
    );
    broker
        .produce_raw("state", Some(b"k"), b"v".to_vec())
        .unwrap();
    broker.shutdown().unwrap();

    let text = ok(&run_on(dir.path(), &["topics", "describe", "state"]));
    assert!(
        text.contains("cleanup policy: compact (records need a key; delete retention 86400000 ms"),
        "{text}"
    );
    assert!(text.contains("min dirty ratio 0.5)"), "{text}");
    let doc = json(&run_on(
        dir.path(),
        &["topics", "describe", "state", "--json"],
    ));
    assert_eq!(doc["cleanup"]["cleanup.policy"], "compact");
    assert_eq!(doc["cleanup"]["delete.retention.ms"], 86_400_000);
    assert!(doc["cleanup"]["max.compaction.lag.ms"].is_null(), "{doc}");
    assert_eq!(doc["cleanup"]["min.cleanable.dirty.ratio"], 0.5);
}

#[test]
fn alter_changes_the_policy_and_describe_shows_it() {
    let dir = fixture();
    let text = ok(&run_on(dir.path(), &["topics", "describe", "orders"]));
    assert!(text.contains("cleanup policy: delete\n"), "{text}");
    let doc = json(&run_on(
        dir.path(),
        &[
            "topics",
            "alter",
            "orders",
            "--cleanup-policy",
            "delete, compact",
            "--json",
        ],
    ));
    assert_eq!(doc["config"]["cleanup_policy"], "CompactDelete");
    assert_eq!(
        policy_of(dir.path(), "orders"),
        CleanupPolicy::CompactDelete
    );
    let text = ok(&run_on(dir.path(), &["topics", "describe", "orders"]));
    assert!(text.contains("cleanup policy: compact,delete ("), "{text}");
    ok(&run_on(
        dir.path(),
        &["topics", "alter", "orders", "--cleanup-policy", "delete"],
    ));
    assert_eq!(policy_of(dir.path(), "orders"), CleanupPolicy::Delete);
}

#[test]
fn an_unknown_cleanup_policy_is_a_usage_error_changing_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    for args in [
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--cleanup-policy",
            "compacted",
        ][..],
        &["topics", "alter", "orders", "--cleanup-policy", ""],
    ] {
        let message = usage_error(&run_on(dir.path(), args));
        assert!(message.contains("cleanup.policy"), "{args:?}: {message}");
    }
    assert_eq!(snapshot(dir.path()), before);
}
