//! A broker with very many partitions: one topic of [`MAX_PARTITIONS`] (10,000; override with
//! `NANOKAFKA_BENCH_SCALE_PARTITIONS`), one record in each. Measured: creating the topic (per
//! partition), reopening the broker after a clean shutdown until `stats()` shows every
//! partition open with its record, the resident memory each idle partition keeps after the
//! reopen (RSS then, minus the RSS with an empty broker, over the partitions), and the
//! process's open file descriptors then (`/proc/self/fd`), beside their count before the
//! broker started. Everything lives in a temp dir removed at the end.
//!
//! [`MAX_PARTITIONS`]: nanokafka::MAX_PARTITIONS

use std::time::{Duration, Instant};

use nanokafka::{FsyncPolicy, NanoKafka, RecordBatch, TopicConfig};

use crate::rss::status_bytes;

/// What the measurement found.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub partitions: u32,
    pub create: Duration,
    /// From `build()` until `stats()` shows every partition open with its one record.
    pub reopen: Duration,
    /// `VmRSS` with an empty broker, and after the reopen, in bytes.
    pub empty_rss: u64,
    pub reopened_rss: u64,
    /// Entries of `/proc/self/fd` before the first broker started, and after the reopen.
    pub fds_before: usize,
    pub fds_reopened: usize,
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("read /proc/self/fd")
        .count()
}

fn start(dir: &std::path::Path) -> NanoKafka {
    NanoKafka::builder()
        .data_dir(dir)
        .fsync(FsyncPolicy::Never)
        .build()
        .expect("start broker")
}

/// Whether every one of `partitions` of `topic` is open and holds its one record.
fn all_open(broker: &NanoKafka, topic: &str, partitions: u32) -> bool {
    let stats = broker.stats().expect("stats");
    stats.topics.get(topic).is_some_and(|t| {
        t.partitions.len() == partitions as usize
            && t.partitions
                .iter()
                .all(|p| p.failed.is_none() && p.log_end_offset == 1)
    })
}

pub fn many_partitions(partitions: u32) -> Scale {
    let topic = "scale";
    let dir = tempfile::tempdir().expect("temp dir");
    let fds_before = open_fds();
    let broker = start(dir.path());
    let empty_rss = status_bytes("VmRSS");
    let started = Instant::now();
    broker
        .create_topic(topic, TopicConfig::default().partitions(partitions))
        .expect("create topic");
    let create = started.elapsed();
    for partition in 0..partitions {
        let mut batch = RecordBatch::with_capacity(1, 1);
        batch.push_raw(None, b"x");
        broker
            .produce_batch(topic, Some(partition), batch)
            .expect("produce_batch");
    }
    broker.shutdown().expect("shutdown");
    drop(broker);

    let started = Instant::now();
    let broker = start(dir.path());
    while !all_open(&broker, topic, partitions) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let reopen = started.elapsed();
    let scale = Scale {
        partitions,
        create,
        reopen,
        empty_rss,
        reopened_rss: status_bytes("VmRSS"),
        fds_before,
        fds_reopened: open_fds(),
    };
    drop(broker);
    scale
}
