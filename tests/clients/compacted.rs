//! A compacted topic through a real client (confluent-kafka, librdkafka): created with
//! `cleanup.policy=compact` and described so by DescribeConfigs; a record without a key is
//! refused with Kafka's INVALID_RECORD and not written; keyed records and a tombstone (a
//! null value) are written and read back, the tombstone still null; once the broker's cleaner
//! has cleaned the topic, a group reads what is left, across its gaps.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use nanokafka::clock::ManualClock;
use serde_json::Value;

#[path = "../common/compacted.rs"]
mod compacted_topic;
use compacted_topic::{compacted, produce_rounds, wait_for_cleaning, LAG_MS};

use crate::clients;
use crate::common::{args, unbase64, Broker, RUN};

/// A record's key and value, `None` for null.
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

#[test]
fn confluent_creates_a_compacted_topic_is_refused_a_keyless_record_and_writes_tombstones() {
    let Some(script) = clients::python("confluent_compacted.py") else {
        return;
    };
    let b = Broker::start();
    let result = script.run_json(&[b.bootstrap.as_str(), "state"], RUN);
    assert_eq!(result["configs"]["cleanup.policy"], "compact", "{result}");
    assert_eq!(result["configs"]["delete.retention.ms"], "86400000");

    let keyless = &result["keyless"];
    assert_eq!(keyless["code"], 87, "{result}");
    assert_eq!(keyless["name"], "INVALID_RECORD", "{result}");
    let topic = &b.broker.stats().unwrap().topics["state"];
    // The keyless record was never written: the two keyed records are offsets 0 and 1.
    assert_eq!(topic.partitions[0].log_end_offset, 2);

    let pairs = |records: &Value| -> Vec<KeyValue> {
        records
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (unbase64(&r["key"]), unbase64(&r["value"])))
            .collect()
    };
    let expected = vec![
        (Some(b"k".to_vec()), Some(b"v1".to_vec())),
        (Some(b"k".to_vec()), None),
    ];
    assert_eq!(pairs(&result["keyed"]), expected);
    let offsets: Vec<&Value> = result["keyed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["offset"])
        .collect();
    assert_eq!(offsets, [0, 1]);
    assert_eq!(pairs(&result["read"]), expected, "{result}");
}

/// A compacted topic the broker's cleaner has cleaned, read from the start by librdkafka in a
/// group: what is left (the latest record of every key at its own offset, with gaps inside
/// and between the batches) arrives in offset order, and the consumer reads past every gap to
/// the end.
#[test]
fn confluent_reads_a_cleaned_compacted_topic_from_the_start_across_its_gaps() {
    let Some(consume) = clients::python("confluent_consume.py") else {
        return;
    };
    let clock = ManualClock::new(1_000_000);
    let b = Broker::start_with(|builder| {
        let builder = builder.clock(Arc::new(clock.clone()));
        builder.cleaner_backoff(Duration::from_millis(10))
    });
    b.broker.create_topic("prices", compacted()).unwrap();
    let written = produce_rounds(&b.broker, "prices");
    // Every sealed segment becomes cleanable at once: one pass cleans them all.
    clock.advance(LAG_MS);
    let removed = wait_for_cleaning(&b.broker, "prices").records_removed;
    assert!(removed > 0);
    let left = (600 - removed).to_string();
    let done = consume.run_json(
        &args(&b.bootstrap, "prices", &["cleaned", "--count", &left]),
        RUN,
    );
    let records = done["records"].as_array().unwrap();
    assert_eq!(records.len().to_string(), left, "{done}");
    let mut by_key: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    let mut last_offset = None;
    for r in records {
        let offset = r["offset"].as_u64().unwrap();
        assert!(last_offset < Some(offset), "offset order: {done}");
        last_offset = Some(offset);
        let key = String::from_utf8(unbase64(&r["key"]).unwrap()).unwrap();
        let value = String::from_utf8(unbase64(&r["value"]).unwrap()).unwrap();
        by_key.entry(key).or_default().push((offset, value));
    }
    for (key, all) in &written {
        let kept = &by_key[key];
        assert!(
            all.ends_with(kept),
            "{key}: {kept:?} is not a suffix of what was written"
        );
        assert_eq!(
            kept.last(),
            all.last(),
            "{key}: its latest value at its offset"
        );
    }
}
