//! A compacted topic through a real client (confluent-kafka, librdkafka): created with
//! `cleanup.policy=compact` and described so by DescribeConfigs; a record without a key is
//! refused with Kafka's INVALID_RECORD and not written; keyed records and a tombstone (a
//! null value) are written and read back, the tombstone still null.

use serde_json::Value;

use crate::clients;
use crate::common::{unbase64, Broker, RUN};

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
