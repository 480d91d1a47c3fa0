//! Helpers shared by the broker's black-box tests.
#![allow(dead_code)] // each test crate uses its own subset

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use nanokafka::{NanoKafka, PartitionStats, TopicConfig};

/// A broker in `dir` with the default settings and one topic.
pub fn broker_with_topic(dir: &Path, topic: &str, config: TopicConfig) -> NanoKafka {
    let broker = NanoKafka::open(dir).unwrap();
    broker.create_topic(topic, config).unwrap();
    broker
}

/// One partition's numbers, from `stats()`.
pub fn partition_stats(broker: &NanoKafka, topic: &str, partition: u32) -> PartitionStats {
    broker.stats().unwrap().topics[topic].partitions[partition as usize].clone()
}

pub fn log_end(broker: &NanoKafka, topic: &str, partition: u32) -> u64 {
    partition_stats(broker, topic, partition).log_end_offset
}

/// Produces `values` to one partition (the raw batch path pins the partition).
pub fn produce_to(broker: &NanoKafka, topic: &str, partition: u32, values: &[u64]) {
    for value in values {
        let record = nanokafka::ProduceRecord {
            key: None,
            value: nanokafka::types::encode(value).unwrap(),
        };
        broker
            .produce_batch_raw(topic, Some(partition), vec![record])
            .unwrap();
    }
}

/// Polls and commits until `member` sees nothing more; returns (partition, offset, value).
pub fn drain(broker: &NanoKafka, topic: &str, group: &str, member: &str) -> Vec<(u32, u64, u64)> {
    let mut seen = Vec::new();
    while let Some(r) = broker.poll::<u64>(topic, group, member).unwrap() {
        broker.commit(topic, group, r.partition, r.offset).unwrap();
        seen.push((r.partition, r.offset, r.value));
    }
    seen
}

/// Runs `body` on its own thread and fails the test if it has not finished within `limit`
/// (a hang); a panic in `body` is passed on as it is.
pub fn within<T: Send + 'static>(limit: Duration, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (done_tx, done_rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let value = body();
        let _ = done_tx.send(());
        value
    });
    match done_rx.recv_timeout(limit) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Ok(value) => value,
            Err(panic) => std::panic::resume_unwind(panic),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("test body still running after {limit:?}"),
    }
}

/// The `.log` files of a partition directory, by base offset.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    logs.sort();
    logs
}

/// The base offset a segment file is named by.
pub fn base_of(segment: &Path) -> u64 {
    segment
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap()
}
