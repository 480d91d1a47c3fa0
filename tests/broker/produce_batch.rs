//! `RecordBatch` and `produce_batch`: typed and raw records in one buffer, routed like single
//! produces (pinned, by key, round-robin), answered with one delivery per record in order, and
//! read back as they were written. Also the actor face's `ProduceBatch` message.

use std::time::Duration;

use actix::System;
use nanokafka::messages::ProduceBatch;
use nanokafka::partition_for_key;
use nanokafka::{NanoKafka, RecordBatch, TopicConfig};
use serde::{Deserialize, Serialize};

use crate::common::{broker_with_topic, log_end};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    symbol: String,
}

fn order(id: u64) -> Order {
    Order {
        id,
        symbol: format!("SYM{id}"),
    }
}

#[test]
fn typed_and_raw_records_go_by_key_and_read_back_in_batch_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    let mut batch = RecordBatch::new();
    let keys: Vec<String> = (0..12).map(|i| format!("user-{}", i % 4)).collect();
    for (i, key) in keys.iter().enumerate() {
        batch.push_keyed(key, &order(i as u64)).unwrap();
    }
    batch.push_raw(Some(b"raw-key"), b"raw bytes");
    assert_eq!(batch.len(), 13);

    let deliveries = broker.produce_batch("t", None, batch).unwrap();
    assert_eq!(deliveries.len(), 13);
    for (delivery, key) in deliveries.iter().zip(&keys) {
        assert_eq!(delivery.partition, partition_for_key(key.as_bytes(), 3));
    }
    assert_eq!(deliveries[12].partition, partition_for_key(b"raw-key", 3));

    // Each partition holds its records in batch order, at the offsets the deliveries gave.
    broker.join_group("t", "g", "m").unwrap();
    let mut read = Vec::new();
    while read.len() < 13 {
        let records = broker
            .poll_batch_raw("t", "g", "m", 100, Duration::from_secs(5))
            .unwrap();
        let last = records.last().expect("records within the wait");
        broker
            .commit("t", "g", last.partition, last.offset)
            .unwrap();
        read.extend(records);
    }
    for (i, delivery) in deliveries.iter().enumerate() {
        let record = read
            .iter()
            .find(|r| (r.partition, r.offset) == (delivery.partition, delivery.offset))
            .expect("every delivery is readable");
        if i < 12 {
            assert_eq!(record.key.as_deref(), Some(keys[i].as_bytes()));
            assert_eq!(
                record.clone().decode::<Order>("t").unwrap().value,
                order(i as u64)
            );
        } else {
            assert_eq!(record.value, b"raw bytes");
        }
    }
}

#[test]
fn a_pinned_batch_takes_consecutive_offsets_after_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    broker
        .produce_batch("t", Some(1), {
            let mut first = RecordBatch::new();
            first.push(&u64::MAX).unwrap();
            first
        })
        .unwrap();
    let before = log_end(&broker, "t", 1);
    let mut batch = RecordBatch::with_capacity(500, 500 * 8);
    for i in 0..500u64 {
        batch.push(&i).unwrap();
    }
    let deliveries = broker.produce_batch("t", Some(1), batch).unwrap();
    let offsets: Vec<u64> = deliveries.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (before..before + 500).collect::<Vec<_>>());
    assert!(deliveries.iter().all(|d| d.partition == 1));
    assert_eq!(log_end(&broker, "t", 1), before + 500);
    broker.join_group("t", "g", "m").unwrap();
    let values: Vec<u64> = broker
        .poll_batch::<u64>("t", "g", "m", 1000, Duration::from_secs(5))
        .unwrap()
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values[0], u64::MAX);
    assert_eq!(values[1..], (0..500).collect::<Vec<_>>());
}

#[test]
fn an_empty_batch_is_answered_with_no_deliveries_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    assert!(broker
        .produce_batch("t", None, RecordBatch::new())
        .unwrap()
        .is_empty());
    assert_eq!(log_end(&broker, "t", 0), 0);
}

#[test]
fn the_actor_face_takes_a_record_batch_through_the_broker_actor() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    let addr = broker.addr().unwrap();
    let deliveries = System::new().block_on(async move {
        let mut batch = RecordBatch::new();
        for i in 0..4u64 {
            batch.push(&i).unwrap();
        }
        let produce = ProduceBatch {
            topic: "t".into(),
            partition: None,
            batch,
        };
        addr.send(produce).await.unwrap().unwrap()
    });
    // Keyless records are dealt round-robin over the two partitions.
    let partitions: Vec<u32> = deliveries.iter().map(|d| d.partition).collect();
    assert_eq!(partitions, [0, 1, 0, 1]);
    assert_eq!((log_end(&broker, "t", 0), log_end(&broker, "t", 1)), (2, 2));
}

/// A topic's `compression_type` and `max_message_bytes` apply to native batches too: stored
/// compressed and read back as produced; a batch over the limit refused whole.
#[test]
fn a_topics_codec_and_batch_limit_apply_to_produce_batch() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::default()
        .compression_type(nanokafka::CompressionType::Zstd)
        .max_message_bytes(2_000);
    let broker = broker_with_topic(dir.path(), "t", config);
    let batch = |n: u64| {
        let mut batch = RecordBatch::new();
        for i in 0..n {
            batch.push(&order(i)).unwrap();
        }
        batch
    };
    assert_eq!(
        broker.produce_batch("t", Some(0), batch(20)).unwrap().len(),
        20
    );
    let refused = broker.produce_batch("t", Some(0), batch(200));
    assert!(
        matches!(
            refused,
            Err(nanokafka::Error::RecordTooLarge { max: 2_000, .. })
        ),
        "{refused:?}"
    );
    assert_eq!(log_end(&broker, "t", 0), 20, "nothing of it was written");
    broker.join_group("t", "g", "m").unwrap();
    let read = broker
        .poll_batch::<Order>("t", "g", "m", 100, Duration::from_secs(5))
        .unwrap();
    let ids: Vec<u64> = read.iter().map(|r| r.value.id).collect();
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
    let segment = std::fs::read(dir.path().join("t_0/00000000000000000000.log")).unwrap();
    let (batches, damage) = nanokafka::internals::inspect::scan_segment("t_0".as_ref(), &segment);
    assert!(damage.is_empty());
    assert_eq!(
        batches.iter().map(|b| b.codec.as_str()).collect::<Vec<_>>(),
        ["zstd"]
    );
}
