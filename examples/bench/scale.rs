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

use crate::report::{self, Figure, Row, Target};
use crate::rss::status_bytes;

const MB: f64 = 1e6;

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

/// The scale rows of the report.
pub fn rows(scaled: &Scale) -> Vec<Row> {
    let n = scaled.partitions;
    let mut rows = Vec::new();
    rows.push(Row::Section(
        "scale: one topic of many partitions, one record each (FsyncPolicy::Never)",
    ));
    rows.push(Row::Figure(Figure::new(
        "scale_create",
        format!(
            "create a topic of {n} partitions ({:.0} ms in all)",
            scaled.create.as_secs_f64() * 1e3
        ),
        scaled.create.as_secs_f64() * 1e3 / f64::from(n),
        "ms/partition",
    )));
    rows.push(Row::Figure(
        Figure::new(
            "scale_reopen",
            format!("reopen after a clean shutdown until stats() shows all {n} open"),
            scaled.reopen.as_secs_f64() * 1e3,
            "ms",
        )
        .target(Target::AtMost(1000.0)),
    ));
    rows.push(Row::Figure(Figure::new(
        "scale_rss_per_partition",
        format!(
            "RSS per idle partition after the reopen ({:.0} MB; empty broker {:.0} MB)",
            scaled.reopened_rss as f64 / MB,
            scaled.empty_rss as f64 / MB
        ),
        scaled.reopened_rss.saturating_sub(scaled.empty_rss) as f64 / 1e3 / f64::from(n),
        "kB",
    )));
    rows.push(Row::Figure(
        Figure::new(
            "scale_open_fds",
            format!("open file descriptors after the reopen ({n} partitions)"),
            scaled.fds_reopened as f64,
            "fds",
        )
        .vs("before the broker started", scaled.fds_before as f64),
    ));
    rows
}

/// `NANOKAFKA_BENCH_ONLY=scale`: measures and prints only the scale rows.
pub fn only(partitions: u32) {
    let rows = rows(&many_partitions(partitions));
    report::print_table(&rows);
    let settings = serde_json::json!({ "scale_partitions": partitions });
    println!("{}", report::json_line(&rows, settings));
}
