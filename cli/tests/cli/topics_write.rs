//! `nanokafka topics create`, `topics alter` and `topics delete`.

use nanokafka::{Backpressure, CompressionType, NanoKafka, TimestampType, TopicConfig};

use crate::{assert_refused_while_locked, fails, fixture, json, ok, run_on, snapshot, usage_error};

fn topics(dir: &std::path::Path) -> std::collections::BTreeMap<String, TopicConfig> {
    let broker = NanoKafka::builder().data_dir(dir).build().expect("open");
    let topics = broker.list_topics().expect("list");
    broker.shutdown().expect("shutdown");
    topics
}

#[test]
fn create_writes_the_topic_with_every_config_flag() {
    let dir = fixture();
    let text = ok(&run_on(
        dir.path(),
        &[
            "topics",
            "create",
            "payments",
            "--partitions",
            "3",
            "--retention-ms",
            "60000",
            "--retention-bytes",
            "1048576",
            "--retention-records",
            "500",
            "--max-size",
            "100",
            "--backpressure",
            "reject",
            "--segment-bytes",
            "65536",
            "--timestamp-type",
            "log-append",
            "--compression-type",
            "zstd",
            "--max-message-bytes",
            "100000",
        ],
    ));
    assert!(
        text.contains("created topic payments (3 partitions"),
        "{text}"
    );
    let expected = TopicConfig::default()
        .partitions(3)
        .retention_ms(60_000)
        .retention_bytes(1_048_576)
        .retention_size(500)
        .max_size(100)
        .backpressure(Backpressure::Reject)
        .segment_bytes(65_536)
        .timestamp_type(TimestampType::LogAppendTime)
        .compression_type(CompressionType::Zstd)
        .max_message_bytes(100_000);
    let all = topics(dir.path());
    assert_eq!(all["payments"], expected);
    // The others are untouched, and the new topic takes records.
    assert_eq!(all.len(), 3);
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    let delivery = broker.produce_raw("payments", None, b"x".to_vec()).unwrap();
    assert_eq!(delivery.offset, 0);
    broker.shutdown().unwrap();
}

#[test]
fn create_json_gives_the_config_and_defaults_apply() {
    let dir = fixture();
    let doc = json(&run_on(
        dir.path(),
        &["topics", "create", "logs", "--partitions", "2", "--json"],
    ));
    assert_eq!(doc["created"], "logs");
    assert_eq!(doc["config"]["partitions"], 2);
    assert!(doc["config"]["retention_ms"].is_null(), "{doc}");
    assert_eq!(
        topics(dir.path())["logs"],
        TopicConfig::default().partitions(2)
    );
}

#[test]
fn create_of_an_existing_topic_fails_and_changes_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let message = fails(&run_on(
        dir.path(),
        &["topics", "create", "orders", "--partitions", "5"],
    ));
    assert!(
        message.contains("topic 'orders' already exists"),
        "{message}"
    );
    assert_eq!(snapshot(dir.path()), before);
    assert_eq!(topics(dir.path())["orders"].partitions, 2);
}

#[test]
fn bad_flag_values_are_usage_errors() {
    let dir = fixture();
    let before = snapshot(dir.path());
    for args in [
        &["topics", "create", "t", "--partitions", "0"][..],
        &["topics", "create", "t", "--partitions", "many"],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--compression-type",
            "none",
        ],
        &["topics", "alter", "orders", "--max-message-bytes", "-1"],
        &["topics", "create", "t"],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--retention-ms",
            "0",
        ],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--retention-ms",
            "-5",
        ],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--segment-bytes",
            "10",
        ],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--max-size",
            "5",
            "--backpressure",
            "drop",
        ],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--backpressure",
            "reject",
        ],
        &[
            "topics",
            "create",
            "t",
            "--partitions",
            "1",
            "--timestamp-type",
            "now",
        ],
    ] {
        usage_error(&run_on(dir.path(), args));
    }
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_bad_topic_name_fails_and_creates_nothing() {
    let dir = fixture();
    let message = fails(&run_on(
        dir.path(),
        &["topics", "create", "a/b", "--partitions", "1"],
    ));
    assert!(message.contains("invalid topic name"), "{message}");
    assert_eq!(topics(dir.path()).len(), 2);
}

#[test]
fn delete_removes_the_topic_with_its_groups() {
    let dir = fixture();
    let text = ok(&run_on(dir.path(), &["topics", "delete", "events"]));
    assert_eq!(text.trim(), "deleted topic events");
    let all = topics(dir.path());
    assert!(!all.contains_key("events"), "{all:?}");
    assert!(all.contains_key("orders"));
    // billing's commits went with the topic; a topic of the same name starts empty.
    let doc = json(&run_on(dir.path(), &["groups", "list", "--json"]));
    assert_eq!(doc["groups"].as_array().unwrap().len(), 1, "{doc}");
    ok(&run_on(
        dir.path(),
        &["topics", "create", "events", "--partitions", "1"],
    ));
    let doc = json(&run_on(
        dir.path(),
        &["topics", "describe", "events", "--json"],
    ));
    assert_eq!(doc["partitions"][0]["log_end_offset"], 0);
}

#[test]
fn delete_json_and_unknown_topic() {
    let dir = fixture();
    let doc = json(&run_on(
        dir.path(),
        &["topics", "delete", "orders", "--json"],
    ));
    assert_eq!(doc["deleted"], "orders");
    let before = snapshot(dir.path());
    let message = fails(&run_on(dir.path(), &["topics", "delete", "orders"]));
    assert!(message.contains("no topic 'orders'"), "{message}");
    assert!(message.contains("it has: events"), "{message}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(
        dir.path(),
        &["topics", "create", "new", "--partitions", "1"],
    );
    assert_refused_while_locked(dir.path(), &["topics", "delete", "orders", "--json"]);
}

#[test]
fn alter_grows_partitions_and_changes_limits_and_none_removes_one() {
    let dir = fixture();
    let doc = json(&run_on(
        dir.path(),
        &[
            "topics",
            "alter",
            "orders",
            "--partitions",
            "4",
            "--retention-ms",
            "none",
            "--retention-records",
            "100",
            "--max-size",
            "50",
            "--backpressure",
            "reject",
            "--timestamp-type",
            "log-append",
            "--compression-type",
            "lz4",
            "--max-message-bytes",
            "none",
            "--json",
        ],
    ));
    assert_eq!(doc["altered"], "orders");
    assert_eq!(doc["config"]["partitions"], 4);
    let expected = TopicConfig {
        retention_ms: None,
        ..TopicConfig::default()
            .partitions(4)
            .retention_size(100)
            .max_size(50)
            .backpressure(Backpressure::Reject)
            .timestamp_type(TimestampType::LogAppendTime)
            .compression_type(CompressionType::Lz4)
    };
    assert_eq!(topics(dir.path())["orders"], expected);
    // The new partitions take records.
    let broker = NanoKafka::builder().data_dir(dir.path()).build().unwrap();
    let mut batch = nanokafka::RecordBatch::new();
    batch.push_raw(None, b"x");
    let delivered = broker.produce_batch("orders", Some(3), batch).unwrap();
    assert_eq!((delivered[0].partition, delivered[0].offset), (3, 0));
    broker.shutdown().unwrap();
}

#[test]
fn alter_refuses_fewer_partitions_an_unknown_topic_and_no_change_changing_nothing() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let message = fails(&run_on(
        dir.path(),
        &["topics", "alter", "orders", "--partitions", "1"],
    ));
    assert!(message.contains("nothing was changed"), "{message}");
    assert!(message.contains("partitions"), "{message}");
    let message = fails(&run_on(
        dir.path(),
        &["topics", "alter", "nope", "--partitions", "9"],
    ));
    assert!(message.contains("nope"), "{message}");
    let usage = usage_error(&run_on(dir.path(), &["topics", "alter", "orders"]));
    assert!(usage.contains("required"), "{usage}");
    let usage = usage_error(&run_on(
        dir.path(),
        &["topics", "alter", "orders", "--retention-ms", "0"],
    ));
    assert!(usage.contains("keep nothing"), "{usage}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn alter_on_a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(
        dir.path(),
        &["topics", "alter", "orders", "--partitions", "3"],
    );
}

#[test]
fn delete_records_moves_the_log_start_and_refuses_an_offset_past_the_end() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let message = fails(&run_on(
        dir.path(),
        &[
            "topics",
            "delete-records",
            "events",
            "--partition",
            "0",
            "--before",
            "5",
        ],
    ));
    assert!(
        message.contains("below 5") && message.contains("nothing was changed"),
        "{message}"
    );
    assert_eq!(snapshot(dir.path()), before);
    let usage = usage_error(&run_on(
        dir.path(),
        &[
            "topics",
            "delete-records",
            "events",
            "--partition",
            "0",
            "--before",
            "soon",
        ],
    ));
    assert!(usage.contains("neither an offset nor `end`"), "{usage}");

    let moved = json(&run_on(
        dir.path(),
        &[
            "topics",
            "delete-records",
            "events",
            "--partition",
            "0",
            "--before",
            "2",
            "--json",
        ],
    ));
    assert_eq!(moved["log_start_offset"], 2);
    let text = ok(&run_on(
        dir.path(),
        &[
            "topics",
            "delete-records",
            "events",
            "--partition",
            "0",
            "--before",
            "end",
        ],
    ));
    assert_eq!(
        text,
        "events/0: records below offset 4 deleted (its log start)\n"
    );
    let described = json(&run_on(
        dir.path(),
        &["topics", "describe", "events", "--json"],
    ));
    assert_eq!(
        described["partitions"][0]["log_start_offset"], 4,
        "{described}"
    );
}
