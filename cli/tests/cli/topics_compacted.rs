//! `nanokafka topics create`, `alter` and `describe` with a cleanup policy, and what
//! `describe` shows of the log cleaner's work.

use nanokafka::{CleanupPolicy, Error, NanoKafka};

use crate::{
    cleaned_fixture_with_stats, fixture, json, ok, records, run_on, snapshot, usage_error,
    CLEANED_AT_MS,
};

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

#[test]
fn describe_shows_what_the_cleaner_did_after_the_broker_stopped() {
    let (dir, live) = cleaned_fixture_with_stats();
    assert_eq!(live.passes, 1, "{live:?}");
    assert!(live.records_removed > 0, "{live:?}");
    // The records left, read back: the log end (600) less those the pass removed.
    let kept = records(dir.path(), "prices").len() as u64;
    assert_eq!(live.records_removed, 600 - kept);

    let doc = json(&run_on(
        dir.path(),
        &["topics", "describe", "prices", "--json"],
    ));
    let cleaner = &doc["partitions"][0]["cleaner"];
    assert_eq!(cleaner["passes"], 1, "{doc:#}");
    assert_eq!(cleaner["last_pass_ms"], CLEANED_AT_MS);
    assert_eq!(cleaner["last_pass"], "1970-01-01T00:16:41.000Z");
    assert_eq!(cleaner["records_removed"], live.records_removed);
    assert_eq!(cleaner["bytes_read"], live.bytes_read);
    assert_eq!(cleaner["bytes_written"], live.bytes_written);
    assert!(live.bytes_written > 0 && live.bytes_written < live.bytes_read);
    assert_eq!(cleaner["dirty_ratio"], 0.0);

    let text = ok(&run_on(dir.path(), &["topics", "describe", "prices"]));
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("log cleaner"))
        .collect();
    assert_eq!(table.len(), 3, "{text}");
    let header: Vec<&str> = table[1].split("  ").filter(|c| !c.is_empty()).collect();
    let row: Vec<&str> = table[2].split_whitespace().collect();
    let expected = [
        "0".to_owned(),
        "1".to_owned(),
        "1970-01-01T00:16:41.000Z".to_owned(),
        live.records_removed.to_string(),
        live.bytes_read.to_string(),
        live.bytes_written.to_string(),
        "0.000".to_owned(),
    ];
    assert_eq!(
        header.iter().map(|h| h.trim()).collect::<Vec<_>>(),
        [
            "PARTITION",
            "PASSES",
            "LAST PASS",
            "RECORDS REMOVED",
            "BYTES READ",
            "BYTES WRITTEN",
            "DIRTY RATIO"
        ],
        "{text}"
    );
    assert_eq!(row, expected, "{text}");
}

#[test]
fn describe_says_a_compacted_topic_was_never_cleaned_and_shows_no_cleaner_otherwise() {
    let dir = fixture();
    ok(&run_on(
        dir.path(),
        &[
            "topics",
            "create",
            "state",
            "--partitions",
            "2",
            "--cleanup-policy",
            "compact",
        ],
    ));
    let text = ok(&run_on(dir.path(), &["topics", "describe", "state"]));
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip_while(|l| !l.starts_with("log cleaner"))
        .skip(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        rows,
        [
            ["0", "0", "never", "0", "0", "0", "-"],
            ["1", "0", "never", "0", "0", "0", "-"]
        ],
        "{text}"
    );
    let doc = json(&run_on(
        dir.path(),
        &["topics", "describe", "state", "--json"],
    ));
    assert!(doc["partitions"][0]["cleaner"].is_null(), "{doc:#}");
    let text = ok(&run_on(dir.path(), &["topics", "describe", "orders"]));
    assert!(!text.contains("log cleaner"), "{text}");
}
