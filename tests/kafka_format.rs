//! The segment files are Kafka log segments: every segment of a data directory decodes with
//! two decoders of Kafka's format that share no code with the crate, `kafka-protocol`'s
//! `RecordBatchDecoder` (Rust) and kafka-python's record reader (a Kafka client library, run
//! through `tests/tools/kafka_segments.py`). Both must see valid CRCs, offsets contiguous
//! from the first segment on, and the keys, values and headers that were produced: records
//! written by this test, and the data directories the examples leave behind.

#[path = "common/client_batch.rs"]
mod client_batch;
#[path = "common/kafka_python.rs"]
mod kafka_python;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use client_batch::{BatchOptions, ClientRecord};
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use nanokafka::{Header, NanoKafka, RecordBatch, TopicConfig};

/// A record as every reader reports it: offset, key, value, headers (value `None` = null).
type Seen = (
    u64,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<(String, Option<Vec<u8>>)>,
);

/// `topic_partition` directory → its records in offset order.
type Partitions = BTreeMap<String, Vec<Seen>>;

fn segments(partition_dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

fn partition_dirs(data_dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Every record of every segment as `kafka-protocol` decodes it (it checks each batch's CRC),
/// with the offsets checked contiguous from the first segment's base offset on.
fn decode_with_kafka_protocol(data_dir: &Path) -> Partitions {
    let mut partitions = Partitions::new();
    for dir in partition_dirs(data_dir) {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut records: Vec<Seen> = Vec::new();
        for segment in segments(&dir) {
            let bytes = std::fs::read(&segment).unwrap();
            let mut buf = Bytes::from(bytes);
            let sets = RecordBatchDecoder::decode_all(&mut buf)
                .unwrap_or_else(|e| panic!("{}: {e}", segment.display()));
            for set in sets {
                for r in set.records {
                    let headers = r
                        .headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
                        .collect();
                    let value = r.value.map(|v| v.to_vec()).unwrap_or_default();
                    records.push((r.offset as u64, r.key.map(|k| k.to_vec()), value, headers));
                }
            }
        }
        assert_contiguous(&name, &records);
        partitions.insert(name, records);
    }
    partitions
}

/// The same from kafka-python's JSON (see `tests/tools/kafka_segments.py`); `None` when no
/// interpreter with kafka-python is available outside CI.
fn decode_with_kafka_python(data_dir: &Path) -> Option<Partitions> {
    let json = kafka_python::decode_data_dir(data_dir)?;
    let b64 = |v: &serde_json::Value| {
        v.as_str()
            .map(|s| base64::engine::general_purpose::STANDARD.decode(s).unwrap())
    };
    let mut partitions = Partitions::new();
    for p in json["partitions"].as_array().unwrap() {
        let name = format!("{}_{}", p["topic"].as_str().unwrap(), p["partition"]);
        let mut records: Vec<Seen> = Vec::new();
        for segment in p["segments"].as_array().unwrap() {
            assert_eq!(segment["trailing_bytes"], 0, "{name} {}", segment["file"]);
            for batch in segment["batches"].as_array().unwrap() {
                assert_eq!(batch["crc_valid"], true, "{name} {}", segment["file"]);
                for r in batch["records"].as_array().unwrap() {
                    let headers = r["headers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|h| (h[0].as_str().unwrap().to_owned(), b64(&h[1])))
                        .collect();
                    records.push((
                        r["offset"].as_u64().unwrap(),
                        b64(&r["key"]),
                        b64(&r["value"]).unwrap_or_default(),
                        headers,
                    ));
                }
            }
        }
        assert_contiguous(&name, &records);
        partitions.insert(name, records);
    }
    Some(partitions)
}

fn assert_contiguous(name: &str, records: &[Seen]) {
    for pair in records.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + 1, "{name}: offsets not contiguous");
    }
}

/// What the broker itself serves from `data_dir`, from each partition's log start on (a new
/// group reads every partition from there, committing as it goes).
fn read_natively(data_dir: &Path) -> Partitions {
    let broker = NanoKafka::open(data_dir).unwrap();
    let mut partitions = Partitions::new();
    for (topic, stats) in broker.stats().unwrap().topics {
        for p in &stats.partitions {
            partitions.insert(format!("{topic}_{}", p.partition), Vec::new());
        }
        broker.join_group(&topic, "format-check", "reader").unwrap();
        loop {
            let batch = broker
                .poll_batch_raw(&topic, "format-check", "reader", 500, Duration::ZERO)
                .unwrap();
            let Some(last) = batch.last() else { break };
            broker
                .commit(&topic, "format-check", last.partition, last.offset)
                .unwrap();
            for r in batch {
                let headers = r.headers.into_iter().map(|h| (h.key, h.value)).collect();
                partitions
                    .get_mut(&format!("{topic}_{}", r.partition))
                    .unwrap()
                    .push((r.offset, r.key, r.value, headers));
            }
        }
    }
    broker.shutdown().unwrap();
    partitions
}

/// A Kafka producer's batch of `values`, each with a header naming the codec.
fn client_batch(values: &[&str], compression: Compression) -> Vec<u8> {
    let records: Vec<ClientRecord> = values
        .iter()
        .map(|v| ClientRecord {
            timestamp: 1_600_000_000_000,
            key: None,
            value: Some(Bytes::from(v.to_string())),
            headers: vec![("codec", Some(Bytes::from(format!("{compression:?}"))))],
        })
        .collect();
    let options = BatchOptions {
        compression,
        producer: None,
    };
    client_batch::encode(&records, options).to_vec()
}

#[test]
fn every_segment_decodes_with_independent_readers_as_the_records_produced() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    // Small segments, so that batches spread over many files.
    let config = TopicConfig::default().partitions(2).segment_bytes(4096);
    broker.create_topic("mixed", config).unwrap();
    let mut expected: BTreeMap<String, Vec<Seen>> = BTreeMap::new();
    let mut expect = |partition: u32, key: Option<&[u8]>, value: Vec<u8>, headers: &[Header]| {
        let records = expected.entry(format!("mixed_{partition}")).or_default();
        let headers = headers
            .iter()
            .map(|h| (h.key.clone(), h.value.clone()))
            .collect();
        records.push((
            records.len() as u64,
            key.map(<[u8]>::to_vec),
            value,
            headers,
        ));
    };
    let trace = [
        Header::new("trace", "0af7651916cd43dd"),
        Header::null("retry"),
    ];
    for i in 0..200u32 {
        let value = format!("record {i} {}", "v".repeat(i as usize % 37));
        broker
            .produce_raw_with_headers("mixed", None, value.as_bytes(), &trace[..(i % 3) as usize])
            .unwrap();
        // Round-robin from partition 0.
        expect(i % 2, None, value.into_bytes(), &trace[..(i % 3) as usize]);
    }
    let mut batch = RecordBatch::new();
    for i in 0..300u32 {
        let key = format!("k{i}");
        batch.push_raw_with_headers(Some(key.as_bytes()), &i.to_be_bytes(), &trace[1..]);
        expect(
            1,
            Some(key.as_bytes()),
            i.to_be_bytes().to_vec(),
            &trace[1..],
        );
    }
    broker.produce_batch("mixed", Some(1), batch).unwrap();
    for codec in [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let values: Vec<String> = (0..40).map(|i| format!("{codec:?} {i}")).collect();
        let refs: Vec<&str> = values.iter().map(String::as_str).collect();
        broker
            .produce_kafka_batch("mixed", 0, client_batch(&refs, codec))
            .unwrap();
        for v in values {
            expect(
                0,
                None,
                v.into_bytes(),
                &[Header::new("codec", format!("{codec:?}"))],
            );
        }
    }
    broker.shutdown().unwrap();
    assert!(
        segments(&dir.path().join("mixed_0")).len() > 3,
        "the test wants several segments"
    );

    assert_eq!(decode_with_kafka_protocol(dir.path()), expected);
    if let Some(python) = decode_with_kafka_python(dir.path()) {
        assert_eq!(python, expected);
    }
    assert_eq!(read_natively(dir.path()), expected);
}

/// The examples' binaries (built by `cargo test` beside the test binaries).
fn example_binary(name: &str) -> PathBuf {
    let deps = std::env::current_exe().unwrap();
    let profile_dir = deps.parent().unwrap().parent().unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds the examples; run it rather than this binary alone",
        path.display()
    );
    path
}

#[test]
fn the_examples_leave_kafka_log_segments_that_independent_readers_agree_on() {
    for example in ["basic_usage", "actor_bus", "supervision"] {
        let dir = tempfile::tempdir().unwrap();
        let status = std::process::Command::new(example_binary(example))
            .env("NANOKAFKA_DATA_DIR", dir.path())
            // The embedded broker's segments are checked, whatever the caller's environment.
            .env_remove("NANOKAFKA_BOOTSTRAP")
            .env("RUST_LOG", "off")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{example}: {status}");
        let by_protocol = decode_with_kafka_protocol(dir.path());
        assert!(
            by_protocol.values().map(Vec::len).sum::<usize>() > 0,
            "{example} wrote no records"
        );
        if let Some(python) = decode_with_kafka_python(dir.path()) {
            assert_eq!(
                python, by_protocol,
                "{example}: kafka-python and kafka-protocol differ"
            );
        }
        // The broker serves from each log start: the same records from there on.
        let native = read_natively(dir.path());
        for (name, records) in &by_protocol {
            let served = &native[name];
            let from = served.first().map_or(u64::MAX, |r| r.0);
            let stored: Vec<&Seen> = records.iter().filter(|r| r.0 >= from).collect();
            let served: Vec<&Seen> = served.iter().collect();
            assert_eq!(served, stored, "{example} {name}");
        }
    }
}
