//! The broker's semantics through the blocking API, continued: backpressure, retention through the
//! broker, and payloads (typed, raw, undecodable). Each test owns a fresh data directory.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::common::{broker_with_topic, drain, log_end, partition_stats};
use nanokafka::{Backpressure, Error, NanoKafka, TopicConfig};
use serde::{Deserialize, Serialize};

// ---- backpressure ----

#[test]
fn reject_fails_with_partition_full_once_retained_records_reach_max_size_without_groups() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::default()
        .max_size(3)
        .backpressure(Backpressure::Reject);
    let broker = broker_with_topic(dir.path(), "t", config);
    for i in 0..3u64 {
        broker.produce("t", &i).unwrap();
    }
    let err = broker.produce("t", &3u64).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PartitionFull { ref topic, partition: 0, backlog: 3, max_size: 3 } if topic == "t"
        ),
        "{err:?}"
    );
    assert_eq!(
        log_end(&broker, "t", 0),
        3,
        "the rejected record was not appended"
    );

    // A group that committed two of them leaves a backlog of 1: room again.
    broker.join_group("t", "g", "m").unwrap();
    broker.commit("t", "g", 0, 1).unwrap();
    assert_eq!(broker.produce("t", &3u64).unwrap().offset, 3);
}

#[test]
fn backlog_follows_the_slowest_group_including_one_that_never_committed() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::default()
        .max_size(2)
        .backpressure(Backpressure::Reject);
    let broker = broker_with_topic(dir.path(), "t", config);
    broker.join_group("t", "fast", "f").unwrap();
    broker.join_group("t", "slow", "s").unwrap();
    broker.produce("t", &0u64).unwrap();
    broker.produce("t", &1u64).unwrap();
    broker.commit("t", "fast", 0, 1).unwrap();
    // "fast" is done, but "slow" has read nothing: its backlog of 2 is what counts.
    assert!(matches!(
        broker.produce("t", &2u64),
        Err(Error::PartitionFull { backlog: 2, .. })
    ));
    broker.commit("t", "slow", 0, 0).unwrap();
    broker.produce("t", &2u64).unwrap();
    assert_eq!(log_end(&broker, "t", 0), 3);
}

/// A full `Block` topic: one record in it, `max_size(1)`, a group that has not committed.
fn full_blocking_topic(broker: &NanoKafka) {
    broker
        .create_topic(
            "t",
            TopicConfig::default()
                .max_size(1)
                .backpressure(Backpressure::Block),
        )
        .unwrap();
    broker.join_group("t", "g", "m").unwrap();
    broker.produce("t", &0u64).unwrap();
}

#[test]
fn block_parks_the_producer_until_a_commit_frees_room() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    full_blocking_topic(&broker);

    let (started_tx, started_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let producer = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            started_tx.send(()).unwrap();
            done_tx.send(broker.produce("t", &1u64)).unwrap();
        })
    };
    started_rx.recv().unwrap();
    // Bounded handshake: a produce that was not blocked would answer well within this.
    // (If the producer has not even sent its request yet, the commit below makes room
    // first and the test still holds.)
    assert_eq!(
        done_rx
            .recv_timeout(Duration::from_millis(300))
            .unwrap_err(),
        RecvTimeoutError::Timeout,
        "the produce returned although the partition is full"
    );
    assert!(done_rx.try_recv().is_err());
    assert_eq!(log_end(&broker, "t", 0), 1, "nothing appended while parked");

    broker.commit("t", "g", 0, 0).unwrap();
    let delivery = done_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("released by the commit")
        .expect("the produce succeeds");
    assert_eq!((delivery.partition, delivery.offset), (0, 1));
    producer.join().unwrap();
    assert_eq!(broker.poll::<u64>("t", "g", "m").unwrap().unwrap().value, 1);
}

#[test]
fn block_times_out_without_a_commit_and_appends_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let block_timeout = Duration::from_millis(200);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .block_timeout(block_timeout)
        .build()
        .unwrap();
    full_blocking_topic(&broker);

    let start = Instant::now();
    let err = broker.produce("t", &1u64).unwrap_err();
    let elapsed = start.elapsed();
    assert!(
        matches!(err, Error::Timeout { ref topic, partition: 0, .. } if topic == "t"),
        "{err:?}"
    );
    assert!(elapsed >= block_timeout, "it waited ({elapsed:?})");
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(
        log_end(&broker, "t", 0),
        1,
        "the timed-out record was not appended"
    );

    // The partition still works once there is room.
    broker.commit("t", "g", 0, 0).unwrap();
    assert_eq!(broker.produce("t", &2u64).unwrap().offset, 1);
    assert_eq!(broker.poll::<u64>("t", "g", "m").unwrap().unwrap().value, 2);
}

/// Produces pipelined behind a parked one wait in the partition's lane; the block timeout
/// still counts from each produce's call, not from when the lane passes it on.
#[test]
fn a_produce_queued_behind_a_parked_one_times_out_after_one_block_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let block_timeout = Duration::from_secs(1);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .block_timeout(block_timeout)
        .build()
        .unwrap();
    full_blocking_topic(&broker);
    let handle = broker.async_handle();
    let waited = std::thread::spawn(move || {
        actix_rt::System::new().block_on(async move {
            let start = Instant::now();
            let timed = |value: u64| {
                let handle = handle.clone();
                async move { (handle.produce("t", &value).await, start.elapsed()) }
            };
            // Polled in order: the first is sent and parks, the second queues behind it.
            let (first, second) = futures::join!(timed(1), timed(2));
            vec![first, second]
        })
    })
    .join()
    .unwrap();
    for (i, (result, elapsed)) in waited.into_iter().enumerate() {
        assert!(
            matches!(result, Err(Error::Timeout { .. })),
            "produce {i}: {result:?}"
        );
        assert!(
            elapsed >= block_timeout,
            "produce {i} waited only {elapsed:?}"
        );
        assert!(
            elapsed < block_timeout * 8 / 5,
            "produce {i} waited {elapsed:?}, well over one block timeout"
        );
    }
    assert_eq!(
        log_end(&broker, "t", 0),
        1,
        "nothing timed out was appended"
    );
}

// ---- retention ----

#[test]
fn retention_keeps_exactly_retention_size_records_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::default().retention_size(5).segment_bytes(4096);
    let broker = broker_with_topic(dir.path(), "t", config);
    let payload = vec![7u8; 1000]; // ~4 records per 4 KiB segment
    for i in 0..12u64 {
        broker.produce("t", &(i, &payload)).unwrap();
        let stats = partition_stats(&broker, "t", 0);
        assert_eq!(stats.log_end_offset, i + 1);
        assert_eq!(
            stats.log_start_offset,
            (i + 1).saturating_sub(5),
            "after record {i}"
        );
    }
    assert!(partition_stats(&broker, "t", 0).segments > 1);

    // A new group reads from the log start. (A batch ends at a segment boundary, so the
    // five records may take more than one poll_batch.)
    broker.join_group("t", "g", "m").unwrap();
    let mut offsets = Vec::new();
    loop {
        let batch = broker
            .poll_batch::<(u64, Vec<u8>)>("t", "g", "m", 100, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else { break };
        broker.commit("t", "g", 0, last.offset).unwrap();
        offsets.extend(batch.iter().map(|r| r.offset));
    }
    assert_eq!(offsets, vec![7, 8, 9, 10, 11]);
}

// ---- payloads ----

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Status {
    New,
    Paid { amount_cents: u64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    customer: String,
    items: Vec<(String, u32)>,
    note: Option<String>,
    status: Status,
    discount: f64,
}

#[test]
fn typed_payloads_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "orders", TopicConfig::default());
    let orders = [
        Order {
            id: 1,
            customer: "Zoë".into(),
            items: vec![("apple".into(), 3), ("pear".into(), 1)],
            note: None,
            status: Status::New,
            discount: 0.0,
        },
        Order {
            id: u64::MAX,
            customer: String::new(),
            items: vec![],
            note: Some("leave at the door".into()),
            status: Status::Paid { amount_cents: 1999 },
            discount: 0.125,
        },
    ];
    for order in &orders {
        broker.produce_keyed("orders", "user1", order).unwrap();
    }
    broker.join_group("orders", "g", "m").unwrap();
    let got = broker
        .poll_batch::<Order>("orders", "g", "m", 10, Duration::ZERO)
        .unwrap();
    assert_eq!(
        got.iter().map(|r| r.value.clone()).collect::<Vec<_>>(),
        orders
    );
    assert!(got.iter().all(|r| r.key.as_deref() == Some(&b"user1"[..])));
}

#[test]
fn raw_payloads_come_back_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    // Not MessagePack, and including bytes that are invalid UTF-8 and an empty payload.
    let payloads: Vec<Vec<u8>> = vec![
        vec![0xc1, 0xff, 0x00, 0x80],
        Vec::new(),
        (0..=255).collect(),
    ];
    for (i, payload) in payloads.iter().enumerate() {
        let key = [0u8, 0xfe, i as u8];
        broker
            .produce_raw("t", Some(&key), payload.clone())
            .unwrap();
    }
    broker.produce_raw("t", None, b"no key".to_vec()).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    let got = broker
        .poll_batch_raw("t", "g", "m", 10, Duration::ZERO)
        .unwrap();
    assert_eq!(got.len(), 4);
    for (i, payload) in payloads.iter().enumerate() {
        assert_eq!(&got[i].value, payload);
        assert_eq!(got[i].key.as_deref(), Some(&[0u8, 0xfe, i as u8][..]));
    }
    assert_eq!(
        (got[3].key.as_deref(), &got[3].value[..]),
        (None, &b"no key"[..])
    );
}

#[test]
fn decoding_as_the_wrong_type_names_the_record_and_committing_it_skips_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    let bad = broker.produce("t", "not a number").unwrap();
    broker
        .produce_batch_raw(
            "t",
            Some(bad.partition),
            vec![nanokafka::ProduceRecord {
                key: None,
                value: nanokafka::encode(&42u64).unwrap(),
            }],
        )
        .unwrap();
    broker.join_group("t", "g", "m").unwrap();

    let err = broker.poll::<u64>("t", "g", "m").unwrap_err();
    match &err {
        Error::Decode {
            topic,
            partition,
            offset,
            ..
        } => assert_eq!(
            (topic.as_str(), *partition, *offset),
            ("t", bad.partition, bad.offset)
        ),
        other => panic!("expected Decode, got {other:?}"),
    }
    let message = err.to_string();
    assert!(
        message.contains(&format!("t/{}@{}", bad.partition, bad.offset)),
        "{message}"
    );
    // The record stays until it is committed; committing skips it.
    assert!(matches!(
        broker.poll::<u64>("t", "g", "m"),
        Err(Error::Decode { .. })
    ));
    broker.commit("t", "g", bad.partition, bad.offset).unwrap();
    let next = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((next.offset, next.value), (bad.offset + 1, 42));
    broker
        .commit("t", "g", next.partition, next.offset)
        .unwrap();
    assert!(drain(&broker, "t", "g", "m").is_empty());
}
