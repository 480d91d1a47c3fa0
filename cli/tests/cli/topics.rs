//! `nanokafka topics list` and `topics describe`.

use std::any::type_name;

use nanokafka::{NanoKafka, TopicConfig};

use crate::{assert_refused_while_locked, fails, fixture, json, ok, run, run_on, snapshot};

#[test]
fn list_shows_every_topic_with_records_and_retention() {
    let dir = fixture();
    let table = ok(&run_on(dir.path(), &["topics", "list"]));
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("TOPIC"), "{table}");
    assert!(lines[0].contains("RETENTION"), "{table}");
    let events: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(events, ["events", "1", "4", "4", "none"], "{table}");
    let orders: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!(&orders[..3], ["orders", "2", "5"], "{table}");
    assert_eq!(orders[4], "ms=3600000", "{table}");
    assert_eq!(lines.len(), 3, "{table}");
}

#[test]
fn list_json_gives_counts_and_retention() {
    let dir = fixture();
    let doc = json(&run_on(dir.path(), &["topics", "list", "--json"]));
    let topics = doc["topics"].as_array().expect("topics array");
    assert_eq!(topics.len(), 2);
    assert_eq!(topics[0]["name"], "events");
    assert_eq!(topics[0]["records"], 4);
    assert_eq!(topics[0]["records_per_partition"]["min"], 4);
    assert!(topics[0]["retention"]["ms"].is_null());
    assert_eq!(topics[1]["name"], "orders");
    assert_eq!(topics[1]["partitions"], 2);
    assert_eq!(topics[1]["records"], 5);
    let min = topics[1]["records_per_partition"]["min"].as_u64().unwrap();
    let max = topics[1]["records_per_partition"]["max"].as_u64().unwrap();
    assert!(min <= max && max <= 5);
    assert_eq!(topics[1]["retention"]["ms"], 3_600_000);
}

#[test]
fn describe_shows_config_and_partition_bounds() {
    let dir = fixture();
    let text = ok(&run_on(dir.path(), &["topics", "describe", "events"]));
    assert!(text.contains("topic: events"), "{text}");
    assert!(text.contains("topic id: "), "{text}");
    assert!(text.contains("retention: none"), "{text}");
    let header = text
        .lines()
        .position(|l| l.starts_with("PARTITION"))
        .expect("a table");
    let row: Vec<&str> = text
        .lines()
        .nth(header + 1)
        .unwrap()
        .split_whitespace()
        .collect();
    // partition, log start, log end, records, segments, bytes
    assert_eq!(&row[..5], ["0", "0", "4", "4", "1"], "{text}");
    assert!(row[5].parse::<u64>().unwrap() > 0, "{text}");
}

#[test]
fn describe_json_gives_config_and_offsets() {
    let dir = fixture();
    let doc = json(&run_on(
        dir.path(),
        &["topics", "describe", "orders", "--json"],
    ));
    assert_eq!(doc["name"], "orders");
    // The id Kafka's own file in the partition directory holds.
    let kept = std::fs::read_to_string(dir.path().join("orders_0/partition.metadata")).unwrap();
    let id = kept.lines().find_map(|l| l.strip_prefix("topic_id: "));
    assert_eq!(doc["topic_id"].as_str(), id, "{kept}");
    assert_eq!(doc["config"]["partitions"], 2);
    assert_eq!(doc["config"]["retention_ms"], 3_600_000);
    let partitions = doc["partitions"].as_array().unwrap();
    assert_eq!(partitions.len(), 2);
    let records: u64 = partitions
        .iter()
        .map(|p| {
            assert_eq!(p["log_start_offset"], 0);
            assert_eq!(p["segments"], 1);
            assert_eq!(p["records"], p["log_end_offset"]);
            p["log_end_offset"].as_u64().unwrap()
        })
        .sum();
    assert_eq!(records, 5);
}

/// A payload type for a typed topic, which records the type's name at creation.
#[derive(serde::Serialize, serde::Deserialize)]
struct Order {
    id: u64,
}

#[test]
fn describe_shows_the_payload_type_a_typed_topic_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let orders = broker.topic::<Order>("orders");
    orders.create(TopicConfig::default().partitions(2)).unwrap();
    broker.shutdown().unwrap();
    drop(broker);
    let text = ok(&run_on(dir.path(), &["topics", "describe", "orders"]));
    assert!(
        text.contains(&format!("payload type: {}", type_name::<Order>())),
        "{text}"
    );
}

#[test]
fn an_unknown_topic_is_an_error_naming_the_known_ones() {
    let dir = fixture();
    let before = snapshot(dir.path());
    let message = fails(&run_on(dir.path(), &["topics", "describe", "nope"]));
    assert!(message.contains("no topic 'nope'"), "{message}");
    assert!(message.contains("events, orders"), "{message}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn a_path_that_is_no_data_directory_is_refused_and_not_created() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("typo");
    let message = fails(&run_on(&missing, &["topics", "list"]));
    assert!(
        message.contains("not a NanoKafka data directory"),
        "{message}"
    );
    assert!(!missing.exists());
}

#[test]
fn a_locked_data_directory_is_refused_at_once() {
    let dir = fixture();
    assert_refused_while_locked(dir.path(), &["topics", "list"]);
    assert_refused_while_locked(dir.path(), &["topics", "describe", "events", "--json"]);
}

#[test]
fn help_lists_the_subcommands() {
    let help = ok(&run(&["topics", "--help"]));
    assert!(help.contains("list") && help.contains("describe"), "{help}");
}

#[test]
fn inspecting_a_closed_directory_leaves_its_data_as_it_was() {
    let dir = fixture();
    let before = crate::snapshot(dir.path());
    ok(&run_on(dir.path(), &["topics", "list"]));
    ok(&run_on(
        dir.path(),
        &["topics", "describe", "orders", "--json"],
    ));
    ok(&run_on(dir.path(), &["groups", "lag", "billing"]));
    assert_eq!(crate::snapshot(dir.path()), before);
}
