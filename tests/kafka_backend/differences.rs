//! Where the backends differ by design: each `difference_*` test asserts both sides, the
//! embedded broker's behaviour and the Kafka backend's, so that the README's table of
//! differences points at a test that keeps it true.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records::{
    Compression, Record as KRecord, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use nanokafka::{Backend, Backpressure, Error, TopicConfig};

use crate::target::{on_every_target, Target};
use crate::wait::{self, STEP};

/// The flat `poll`: on the embedded broker it reads at the group's committed offset, so it
/// returns the same record until a commit; on Kafka the member's position advances with
/// every poll, and an uncommitted record comes back only after the member rejoins. On both,
/// a rejoin resumes at the commit, and a commit moves past the record.
fn difference_poll_redelivers_until_commit(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("redelivery", 1);
    broker.join_group(&topic, "g", "m").unwrap();
    for v in 0..3u64 {
        broker.produce(&topic, &v).unwrap();
    }
    let poll = || {
        wait::until("a record", || {
            broker.poll_timeout::<u64>(&topic, "g", "m", STEP).unwrap()
        })
    };
    assert_eq!(poll().offset, 0);
    let again = poll().offset;
    match t.is_kafka() {
        false => assert_eq!(again, 0, "embedded: the same record until a commit"),
        true => assert_eq!(again, 1, "Kafka: the member's position moved on"),
    }
    broker.leave_group(&topic, "g", "m").unwrap();
    broker.join_group(&topic, "g", "m").unwrap();
    assert_eq!(
        poll().offset,
        0,
        "after a rejoin: from the commit (none yet)"
    );
    broker.commit(&topic, "g", 0, 0).unwrap();
    assert_eq!(poll().offset, 1, "after the commit: the next record");
}

/// Records without a key: round-robin over the partitions on the embedded broker; on Kafka
/// wherever librdkafka's partitioner puts them (sticky batches, random partitions), only
/// ever a partition of the topic.
fn difference_keyless_partitioning(t: &Target) {
    let topic = t.new_topic("keyless", 3);
    let partitions: Vec<u32> = (0..12u64)
        .map(|v| t.broker().produce(&topic, &v).unwrap().partition)
        .collect();
    assert!(partitions.iter().all(|&p| p < 3), "{partitions:?}");
    if !t.is_kafka() {
        let round_robin = partitions.windows(2).all(|w| w[1] == (w[0] + 1) % 3);
        assert!(
            round_robin,
            "embedded: each partition in turn: {partitions:?}"
        );
    }
}

/// `retention_size` (a record count) has no Kafka equivalent: the embedded broker keeps the
/// last N records, Kafka creates the topic (with a warning) and keeps everything.
fn difference_retention_size(t: &Target) {
    let topic = t.topic("retention-count");
    let config = TopicConfig::default().retention_size(3);
    t.broker().create_topic(&topic, config).unwrap();
    for v in 0..10u64 {
        t.broker().produce(&topic, &v).unwrap();
    }
    let kept = match t.is_kafka() {
        false => 7..10,
        true => 0..10,
    };
    let mut consumer = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    let read: Vec<u64> = wait::read(&mut consumer, kept.clone().count())
        .iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(read, kept.collect::<Vec<_>>());
}

/// `max_size` (backpressure at a backlog of N records) has no Kafka equivalent either: the
/// embedded broker refuses the produce past it under `Backpressure::Reject`; Kafka creates
/// the topic (with a warning) and accepts every record.
fn difference_max_size(t: &Target) {
    let topic = t.topic("max-size");
    let config = TopicConfig::default()
        .max_size(2)
        .backpressure(Backpressure::Reject);
    t.broker().create_topic(&topic, config).unwrap();
    for v in 0..2u64 {
        t.broker().produce(&topic, &v).unwrap();
    }
    let third = t.broker().produce(&topic, &2u64);
    match t.is_kafka() {
        false => assert!(
            matches!(third, Err(Error::PartitionFull { .. })),
            "embedded: {third:?}"
        ),
        true => assert_eq!(third.unwrap().offset, 2, "Kafka: no record-count limit"),
    }
}

fn assert_unsupported<T: std::fmt::Debug>(result: nanokafka::Result<T>) {
    assert!(
        matches!(
            result,
            Err(Error::Unsupported {
                backend: "kafka",
                ..
            })
        ),
        "Kafka: {result:?}"
    );
}

/// `stats()` reports the embedded broker's partitions, groups and restarts; on Kafka it is
/// `Unsupported` (the cluster's own metrics and tools cover it).
fn difference_stats(t: &Target) {
    let topic = t.new_topic("stats", 2);
    t.broker().produce(&topic, &1u64).unwrap();
    match t.is_kafka() {
        false => {
            let stats = t.broker().stats().unwrap();
            let partitions = &stats.topics[&topic].partitions;
            assert_eq!(partitions.len(), 2);
            let ends: u64 = partitions.iter().map(|p| p.log_end_offset).sum();
            assert_eq!(ends, 1);
        }
        true => assert_unsupported(t.broker().stats()),
    }
}

/// Crash injection (`crash_partition`) restarts a partition actor of the embedded broker,
/// which reloads from disk; on Kafka there is no actor to crash: `Unsupported`, nothing done.
/// Either way the records stay readable.
fn difference_crash_injection(t: &Target) {
    let topic = t.new_topic("crash", 1);
    t.broker().produce(&topic, &7u64).unwrap();
    match t.is_kafka() {
        false => t.broker().crash_partition(&topic, 0).unwrap(),
        true => assert_unsupported(t.broker().crash_partition(&topic, 0)),
    }
    let mut consumer = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    let read: Vec<u64> = wait::read(&mut consumer, 1)
        .iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(read, [7]);
}

/// Two records as a Kafka producer's RecordBatch v2 (kafka-protocol's encoder).
fn kafka_batch() -> Vec<u8> {
    let records: Vec<KRecord> = ["a", "b"]
        .iter()
        .enumerate()
        .map(|(i, value)| KRecord {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            // The encoder starts a new batch wherever `offset - sequence` changes.
            sequence: -1 + i as i32,
            timestamp: wait::now_ms() as i64,
            key: None,
            value: Some(Bytes::from(value.to_string())),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.to_vec()
}

/// `produce_kafka_batch` appends a Kafka producer's batch as sent on the embedded broker; on
/// Kafka it is `Unsupported` (a Kafka client produces there itself) and writes nothing.
fn difference_raw_kafka_batches(t: &Target) {
    let topic = t.new_topic("raw-batches", 1);
    let appended = t.broker().produce_kafka_batch(&topic, 0, kafka_batch());
    let expected: Vec<Vec<u8>> = match t.is_kafka() {
        false => {
            appended.unwrap();
            vec![b"a".to_vec(), b"b".to_vec()]
        }
        true => {
            assert_unsupported(appended);
            t.broker().produce_raw(&topic, None, b"c".to_vec()).unwrap();
            vec![b"c".to_vec()]
        }
    };
    // Raw bytes (not MessagePack): read with the flat raw poll.
    t.broker().join_group(&topic, "g", "m").unwrap();
    let read = wait::until("the records", || {
        let batch = t
            .broker()
            .poll_batch_raw(&topic, "g", "m", 10, STEP)
            .unwrap();
        (!batch.is_empty()).then_some(batch)
    });
    let values: Vec<Vec<u8>> = read.into_iter().map(|r| r.value).collect();
    assert_eq!(values, expected);
}

/// `backend()` says which backend a handle runs: the embedded broker, or Kafka.
fn difference_backend(t: &Target) {
    let expected = match t.is_kafka() {
        false => Backend::Embedded,
        true => Backend::Kafka,
    };
    assert_eq!(t.broker().backend(), expected);
}

on_every_target!(
    difference_poll_redelivers_until_commit,
    difference_keyless_partitioning,
    difference_retention_size,
    difference_max_size,
    difference_stats,
    difference_crash_injection,
    difference_raw_kafka_batches,
    difference_backend,
);
