//! Compacted topics over the wire: `cleanup.policy` and the compaction settings through
//! CreateTopics, DescribeConfigs, IncrementalAlterConfigs and AlterConfigs, and a keyless
//! record refused as Kafka's broker refuses it (`INVALID_RECORD` with `record_errors`,
//! nothing of the batch written) while keyed records and tombstones go through.

use bytes::Bytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use nanokafka::{CleanupPolicy, TopicConfig};

use crate::admin::{
    alter_configs, code, creatable, create, describe, op, resource, value_of, whole_set,
    with_config, APPEND, SUBTRACT,
};
use crate::client::WireClient;
use crate::client_batch::{self, BatchOptions, ClientRecord};
use crate::common::listening_broker;
use crate::records::{decode, fetch, produce, T0};

fn record(key: Option<&'static str>, value: Option<&'static str>) -> ClientRecord {
    ClientRecord {
        timestamp: T0,
        key: key.map(|k| Bytes::from_static(k.as_bytes())),
        value: value.map(|v| Bytes::from_static(v.as_bytes())),
        headers: Vec::new(),
    }
}

#[test]
fn the_policy_and_compaction_settings_are_created_described_and_altered_in_kafkas_names() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let mut topic = with_config(creatable("c", 1), "cleanup.policy", "compact");
    for (key, value) in [
        ("delete.retention.ms", "1000"),
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "20"),
        ("min.cleanable.dirty.ratio", "0.1"),
    ] {
        topic = with_config(topic, key, value);
    }
    let response = client.call(&create(vec![topic]), 5);
    assert_eq!(response.topics[0].error_code, 0);
    let config = &broker.list_topics().unwrap()["c"];
    assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
    assert_eq!(
        (config.delete_retention_ms, config.min_compaction_lag_ms),
        (1000, 10)
    );
    assert_eq!(config.max_compaction_lag_ms, Some(20));
    assert_eq!(config.min_cleanable_dirty_ratio.to_string(), "0.1");

    let described = |client: &mut WireClient| {
        let response = client.call(&describe(vec![resource(2, "c", None)], false), 4);
        response.results[0].clone()
    };
    let result = described(&mut client);
    for (key, value) in [
        ("cleanup.policy", "compact"),
        ("delete.retention.ms", "1000"),
        ("min.compaction.lag.ms", "10"),
        ("max.compaction.lag.ms", "20"),
        ("min.cleanable.dirty.ratio", "0.1"),
    ] {
        assert_eq!(value_of(&result, key), Some(value), "{key}");
    }

    // APPEND and SUBTRACT treat cleanup.policy as the list it is in Kafka.
    let append = alter_configs("c", vec![op("cleanup.policy", APPEND, Some("delete"))]);
    assert_eq!(client.call(&append, 1).responses[0].error_code, 0);
    let result = described(&mut client);
    assert_eq!(value_of(&result, "cleanup.policy"), Some("compact,delete"));
    let subtract = alter_configs("c", vec![op("cleanup.policy", SUBTRACT, Some("compact"))]);
    assert_eq!(client.call(&subtract, 1).responses[0].error_code, 0);
    assert_eq!(
        broker.list_topics().unwrap()["c"].cleanup_policy,
        CleanupPolicy::Delete
    );
    // AlterConfigs sets the whole set: what it leaves out returns to Kafka's default.
    let whole = whole_set("c", &[("cleanup.policy", "delete, compact")]);
    assert_eq!(client.call(&whole, 1).responses[0].error_code, 0);
    let result = described(&mut client);
    assert_eq!(value_of(&result, "cleanup.policy"), Some("compact,delete"));
    assert_eq!(value_of(&result, "delete.retention.ms"), Some("86400000"));
    assert_eq!(
        value_of(&result, "max.compaction.lag.ms"),
        Some("9223372036854775807")
    );
    assert_eq!(value_of(&result, "min.cleanable.dirty.ratio"), Some("0.5"));
    // Crossed lags and a ratio out of range are INVALID_CONFIG, and change nothing.
    for configs in [
        &[
            ("min.compaction.lag.ms", "30"),
            ("max.compaction.lag.ms", "20"),
        ][..],
        &[("min.cleanable.dirty.ratio", "2")][..],
        &[("cleanup.policy", "compacted")][..],
    ] {
        let response = client.call(&whole_set("c", configs), 1);
        assert_eq!(
            response.responses[0].error_code,
            code(ResponseError::InvalidConfig),
            "{configs:?}"
        );
    }
    assert_eq!(
        broker.list_topics().unwrap()["c"].cleanup_policy,
        CleanupPolicy::CompactDelete
    );
}

#[test]
fn a_keyless_record_on_a_compacted_topic_is_invalid_record_and_nothing_of_its_batch_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let config = TopicConfig::default().cleanup_policy(CleanupPolicy::Compact);
    broker.create_topic("c", config).unwrap();
    let mut client = WireClient::connect(addr);

    let mixed = [
        record(Some("a"), Some("1")),
        record(None, Some("2")),
        record(Some("b"), Some("3")),
        record(None, Some("4")),
    ];
    for compression in [Compression::None, Compression::Gzip] {
        let options = BatchOptions {
            compression,
            ..BatchOptions::default()
        };
        let response = client.call(
            &produce("c", 0, client_batch::encode(&mixed, options), -1),
            9,
        );
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::InvalidRecord.code(), -1),
            "{compression:?}"
        );
        let indexes: Vec<i32> = p.record_errors.iter().map(|e| e.batch_index).collect();
        assert_eq!(indexes, [1, 3]);
        let why = p.record_errors[0].batch_index_error_message.as_deref();
        assert!(why.is_some_and(|m| m.contains("no key")), "{why:?}");
        let message = p.error_message.as_deref().unwrap();
        assert!(message.contains("compacted"), "{message}");
    }
    let stats = broker.stats().unwrap();
    assert_eq!(stats.topics["c"].partitions[0].log_end_offset, 0);

    // Keyed records and a tombstone (a key, a null value) are written and read back.
    let keyed = [record(Some("a"), Some("1")), record(Some("a"), None)];
    let response = client.call(
        &produce(
            "c",
            0,
            client_batch::encode(&keyed, BatchOptions::default()),
            -1,
        ),
        9,
    );
    let p = &response.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0));
    let response = client.call(&fetch("c", &[(0, 0)], 0), 12);
    let records = decode(
        response.responses[0].partitions[0]
            .records
            .as_ref()
            .unwrap(),
    );
    let read: Vec<_> = records
        .iter()
        .map(|r| (r.key.clone(), r.value.clone()))
        .collect();
    assert_eq!(
        read,
        [
            (
                Some(Bytes::from_static(b"a")),
                Some(Bytes::from_static(b"1"))
            ),
            (Some(Bytes::from_static(b"a")), None),
        ]
    );
}
