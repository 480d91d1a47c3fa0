//! Kafka's record format through the native API: headers produced and consumed, Kafka
//! producers' batches (built by an independent encoder, `kafka-protocol`, in every
//! compression) stored as sent and read back decompressed, idempotent retries, timestamps,
//! and the batches refused.

use bytes::Bytes;
use kafka_protocol::records::Compression;
use nanokafka::{Error, Header, NanoKafka, RecordBatch, TopicConfig};

use crate::common::broker_with_topic;
use crate::common::client_batch::{self, BatchOptions, ClientRecord};

const T0: i64 = 1_600_000_000_000;

/// One Kafka batch of `values`, as a producer (`producer_id` ≥ 0: idempotent, from
/// `sequence`) would send it: CreateTime timestamps `T0 + i * 1000` (so not the broker's clock),
/// a key per record, and two headers (one with a null value) on each.
fn kafka_batch(
    values: &[&str],
    compression: Compression,
    producer_id: i64,
    sequence: i32,
) -> Vec<u8> {
    kafka_batch_at(values, compression, producer_id, sequence, T0)
}

/// As [`kafka_batch`], with CreateTime timestamps `t0 + i * 1000`.
fn kafka_batch_at(
    values: &[&str],
    compression: Compression,
    producer_id: i64,
    sequence: i32,
    t0: i64,
) -> Vec<u8> {
    let records: Vec<ClientRecord> = values
        .iter()
        .enumerate()
        .map(|(i, v)| ClientRecord {
            timestamp: t0 + i as i64 * 1000,
            key: Some(Bytes::from(format!("key-{i}"))),
            value: Some(Bytes::from(v.to_string())),
            headers: vec![
                ("trace", Some(Bytes::from(format!("t{i}")))),
                ("empty", None),
            ],
        })
        .collect();
    let options = BatchOptions::producer_id(compression, producer_id, sequence);
    client_batch::encode(&records, options).to_vec()
}

fn values_read(broker: &NanoKafka, topic: &str, max: usize) -> Vec<nanokafka::Record<Vec<u8>>> {
    broker
        .poll_batch_raw(topic, "g", "m", max, std::time::Duration::ZERO)
        .unwrap()
}

#[test]
fn headers_of_typed_and_raw_produces_come_back_in_order_with_null_values() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let headers = [
        Header::new("trace-id", "abc"),
        Header::null("tombstone-reason"),
        Header::new("trace-id", "again"),
    ];
    broker
        .produce_with_headers("t", Some(b"k".as_slice()), &42u64, &headers)
        .unwrap();
    broker
        .produce_raw_with_headers("t", None, b"raw", &headers[..1])
        .unwrap();
    let mut batch = RecordBatch::new();
    batch.push_with_headers(None, &7u64, &headers[1..]).unwrap();
    batch.push_raw_with_headers(Some(b"x"), b"y", &[]);
    broker.produce_batch("t", None, batch).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    let records = broker
        .poll_batch::<u64>("t", "g", "m", 1, std::time::Duration::ZERO)
        .unwrap();
    assert_eq!(records[0].value, 42);
    assert_eq!(records[0].key.as_deref(), Some(b"k".as_slice()));
    assert_eq!(records[0].headers, headers);
    let raw = values_read(&broker, "t", 10);
    assert_eq!(raw.len(), 4);
    assert_eq!(raw[1].headers, headers[..1]);
    assert_eq!(raw[2].headers, headers[1..]);
    assert!(raw[3].headers.is_empty());
    broker.shutdown().unwrap();
    // And after a reopen, from disk.
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    assert_eq!(values_read(&broker, "t", 10)[0].headers, headers);
}

#[test]
fn kafka_batches_in_every_compression_are_stored_as_sent_and_read_decompressed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    let mut sent = Vec::new();
    let mut expected = Vec::new();
    for (n, codec) in codecs.into_iter().enumerate() {
        let values: Vec<String> = (0..5)
            .map(|i| format!("{codec:?} value {i} {}", "x".repeat(50)))
            .collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        let batch = kafka_batch(&refs, codec, -1, -1);
        let appended = broker.produce_kafka_batch("t", 0, batch.clone()).unwrap();
        assert_eq!(
            (appended.base_offset, appended.last_offset),
            (n as u64 * 5, n as u64 * 5 + 4)
        );
        assert!(!appended.duplicate);
        sent.push(batch);
        expected.extend(values);
    }
    broker.join_group("t", "g", "m").unwrap();
    let records = values_read(&broker, "t", 100);
    let values: Vec<String> = records
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    assert_eq!(values, expected);
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.offset, i as u64);
        assert_eq!(
            r.timestamp_ms,
            (T0 + (i % 5) as i64 * 1000) as u64,
            "CreateTime kept"
        );
        assert_eq!(r.key.as_deref(), Some(format!("key-{}", i % 5).as_bytes()));
        assert_eq!(
            r.headers,
            [
                Header::new("trace", format!("t{}", i % 5)),
                Header::null("empty")
            ]
        );
    }
    broker.shutdown().unwrap();
    // The segment holds each batch byte for byte but its base offset and leader epoch.
    let segment = std::fs::read(dir.path().join("t_0/00000000000000000000.log")).unwrap();
    let mut at = 0;
    for (n, batch) in sent.iter().enumerate() {
        let stored = &segment[at..at + batch.len()];
        assert_eq!(
            i64::from_be_bytes(stored[..8].try_into().unwrap()),
            n as i64 * 5
        );
        assert_eq!(&stored[12..16], &[0, 0, 0, 0], "leader epoch 0");
        assert_eq!(stored[8..12], batch[8..12]);
        assert_eq!(stored[16..], batch[16..], "batch {n} changed");
        at += batch.len();
    }
    assert_eq!(at, segment.len());
}

#[test]
fn a_reading_from_inside_a_compressed_batch_skips_the_records_below() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let batch = kafka_batch(&["a", "b", "c", "d"], Compression::Zstd, -1, -1);
    broker.produce_kafka_batch("t", 0, batch).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    broker.commit("t", "g", 0, 1).unwrap();
    let values: Vec<Vec<u8>> = values_read(&broker, "t", 10)
        .into_iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values, [b"c".to_vec(), b"d".to_vec()]);
}

#[test]
fn an_idempotent_producers_retry_is_answered_with_the_stored_offsets_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let first = kafka_batch(&["a", "b"], Compression::None, 7, 0);
    let second = kafka_batch(&["c"], Compression::Gzip, 7, 2);
    broker.produce_kafka_batch("t", 0, first.clone()).unwrap();
    broker.produce_kafka_batch("t", 0, second.clone()).unwrap();
    let retry = broker.produce_kafka_batch("t", 0, first.clone()).unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.base_offset, retry.last_offset), (0, 1));
    // A gap in the sequence is refused and writes nothing.
    let gap = kafka_batch(&["z"], Compression::None, 7, 9);
    assert!(matches!(
        broker.produce_kafka_batch("t", 0, gap),
        Err(Error::OutOfOrderSequence { producer_id: 7, .. })
    ));
    broker.crash_partition("t", 0).unwrap();
    // After a crash the state is rebuilt from the batches in the log.
    let retry = broker.produce_kafka_batch("t", 0, second.clone()).unwrap();
    assert!(retry.duplicate);
    assert_eq!(retry.base_offset, 2);
    broker.shutdown().unwrap();
    // After a clean shutdown, from the snapshot written at close.
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert!(broker.produce_kafka_batch("t", 0, first).unwrap().duplicate);
    let next = kafka_batch(&["d"], Compression::None, 7, 3);
    assert_eq!(
        broker
            .produce_kafka_batch("t", 0, next)
            .unwrap()
            .base_offset,
        3
    );
    assert_eq!(crate::common::log_end(&broker, "t", 0), 4);
}

#[test]
fn log_append_time_replaces_the_producers_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let config = TopicConfig::default().timestamp_type(nanokafka::TimestampType::LogAppendTime);
    let broker = broker_with_topic(dir.path(), "t", config);
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let appended = broker
        .produce_kafka_batch(
            "t",
            0,
            kafka_batch(&["a", "b"], Compression::Snappy, -1, -1),
        )
        .unwrap();
    let append_time = appended.log_append_time_ms.expect("LogAppendTime");
    assert!(append_time >= before);
    broker.join_group("t", "g", "m").unwrap();
    let records = values_read(&broker, "t", 10);
    assert!(records.iter().all(|r| r.timestamp_ms == append_time));
}

#[test]
fn bad_batches_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let good = kafka_batch(&["a", "b"], Compression::Lz4, -1, -1);
    let mut flipped = good.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let mut two = good.clone();
    two.extend_from_slice(&good);
    for bad in [
        Vec::new(),
        good[..good.len() - 1].to_vec(),
        flipped,
        two,
        b"not a batch at all, clearly".to_vec(),
    ] {
        assert!(matches!(
            broker.produce_kafka_batch("t", 0, bad),
            Err(Error::InvalidBatch { .. })
        ),);
    }
    assert!(matches!(
        broker.produce_kafka_batch("t", 7, good.clone()),
        Err(Error::UnknownPartition { .. })
    ));
    assert_eq!(crate::common::log_end(&broker, "t", 0), 0);
    let big = "v".repeat(2 << 20);
    assert!(matches!(
        broker.produce_kafka_batch("t", 0, kafka_batch(&[&big], Compression::Gzip, -1, -1)),
        Err(Error::RecordTooLarge { .. })
    ));
    assert_eq!(
        broker
            .produce_kafka_batch("t", 0, good)
            .unwrap()
            .base_offset,
        0
    );
}

#[test]
fn offsets_for_times_find_the_first_record_at_or_after_a_timestamp_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    // Records at T0, T0 + 1 s, T0 + 2 s (offsets 0-2), then a batch stamped T0 + 0..2 s again
    // (CreateTime need not grow), then one at T0 + 1..3 s.
    for _ in 0..2 {
        broker
            .produce_kafka_batch(
                "t",
                0,
                kafka_batch(&["a", "b", "c"], Compression::Gzip, -1, -1),
            )
            .unwrap();
    }
    let check = |broker: &NanoKafka| {
        let at = |ms: i64| broker.offset_for_timestamp("t", 0, ms as u64).unwrap();
        assert_eq!(at(0), Some(0));
        assert_eq!(at(T0), Some(0));
        assert_eq!(at(T0 + 1), Some(1));
        assert_eq!(at(T0 + 2_000), Some(2));
        assert_eq!(at(T0 + 2_001), None);
        assert_eq!(broker.offset_for_timestamp("t", 0, u64::MAX).unwrap(), None);
    };
    check(&broker);
    assert!(matches!(
        broker.offset_for_timestamp("t", 3, 0),
        Err(Error::UnknownPartition { .. })
    ));
    broker.shutdown().unwrap();
    check(&NanoKafka::open(dir.path()).unwrap());
}

#[test]
fn a_producer_timestamp_over_an_hour_ahead_is_refused_and_one_within_it_is_never_undercut() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let hour = 3_600_000;
    let late = kafka_batch_at(&["x"], Compression::None, -1, -1, now + 2 * hour);
    assert!(matches!(
        broker.produce_kafka_batch("t", 0, late),
        Err(Error::InvalidTimestamp { .. })
    ));
    let ahead = now + hour / 2;
    let soon = kafka_batch_at(&["y"], Compression::None, -1, -1, ahead);
    assert_eq!(
        broker
            .produce_kafka_batch("t", 0, soon)
            .unwrap()
            .base_offset,
        0
    );
    // Timestamps in the log never go backwards for native produces, also across a restart.
    broker.produce_raw("t", None, b"z".to_vec()).unwrap();
    broker.shutdown().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.produce_raw("t", None, b"w".to_vec()).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    let stamps: Vec<u64> = values_read(&broker, "t", 10)
        .iter()
        .map(|r| r.timestamp_ms)
        .collect();
    assert_eq!(stamps, [ahead as u64; 3]);
}

#[test]
fn a_batch_decompressing_past_the_configured_cap_is_refused_whole_and_one_within_it_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let cap = 2 << 20;
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .max_decompressed_batch_bytes(cap)
        .build()
        .unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    // Three records of 900 KiB each: each under max_record_bytes, together past the cap, and
    // a few KiB once compressed.
    let value = "z".repeat(900 << 10);
    let over = kafka_batch(&[&value, &value, &value], Compression::Gzip, -1, -1);
    assert!(over.len() < cap / 100, "the batch compresses well");
    assert!(matches!(
        broker.produce_kafka_batch("t", 0, over.clone()),
        Err(Error::InvalidBatch { .. })
    ));
    assert_eq!(crate::common::log_end(&broker, "t", 0), 0);
    let within = kafka_batch(&[&value, &value], Compression::Gzip, -1, -1);
    assert_eq!(
        broker
            .produce_kafka_batch("t", 0, within)
            .unwrap()
            .base_offset,
        0
    );
    broker.shutdown().unwrap();

    // The default cap (128 MiB) takes the first batch.
    let broker = NanoKafka::open(dir.path()).unwrap();
    let appended = broker.produce_kafka_batch("t", 0, over).unwrap();
    assert_eq!(appended.base_offset, 2);
    assert_eq!(crate::common::log_end(&broker, "t", 0), 5);
    broker.join_group("t", "g", "m").unwrap();
    let read = values_read(&broker, "t", 10);
    assert!(!read.is_empty() && read.iter().all(|r| r.value.len() == 900 << 10));
}

#[test]
fn a_decompressed_batch_cap_outside_its_range_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    for bytes in [1000, nanokafka::MAX_DECOMPRESSED_BATCH_BYTES + 1] {
        let built = NanoKafka::builder()
            .data_dir(dir.path())
            .max_decompressed_batch_bytes(bytes)
            .build();
        assert!(
            matches!(
                built,
                Err(Error::InvalidArgument {
                    name: "max_decompressed_batch_bytes",
                    ..
                })
            ),
            "{bytes}"
        );
    }
}
