//! The pieces every transfer test uses: the binary run as an operator runs it, `nanokafka
//! serve` as the Kafka cluster, a source data directory with every kind of record, and a
//! snapshot of a data directory to compare.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use nanokafka::{CleanupPolicy, DirtyRatio, Header, NanoKafka, RecordBatch, TopicConfig};

pub use crate::binary::BIN;
use crate::client_batch::{self, BatchOptions, ClientRecord};
pub use crate::process::Process;

/// How long a run of the binary, or a wait for its output, may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// Runs the binary to its end; its exit and stderr.
pub fn run(args: &[&str]) -> (ExitStatus, String) {
    let (status, lines) = Process::nanokafka(args).wait(DEADLINE);
    (status, lines.join("\n"))
}

/// Runs the binary; panics, with its stderr, unless it exits 0.
pub fn run_ok(args: &[&str]) -> String {
    let (status, stderr) = run(args);
    assert!(status.success(), "{args:?} exited {status}:\n{stderr}");
    stderr
}

/// `nanokafka serve` on `dir`, on a free loopback port: the Kafka cluster of a test; killed
/// when dropped.
pub struct Served {
    process: Process,
    pub bootstrap: String,
}

impl Served {
    pub fn start(dir: &Path) -> Served {
        let dir = dir.to_str().unwrap();
        let mut process = Process::serve(&["--data-dir", dir, "--listen", "127.0.0.1:0"]);
        let bootstrap = process.listening_addr(DEADLINE).to_string();
        Served { process, bootstrap }
    }

    /// SIGTERM, then the clean exit `serve` promises.
    pub fn stop(self) {
        self.process.signal(libc::SIGTERM);
        let (status, log) = self.process.wait(DEADLINE);
        assert!(
            status.success(),
            "serve exited {status}:\n{}",
            log.join("\n")
        );
    }
}

/// `export --data-dir dir --to bootstrap` plus `extra`.
pub fn export_args<'a>(dir: &'a Path, bootstrap: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "export",
        "--data-dir",
        dir.to_str().unwrap(),
        "--to",
        bootstrap,
    ];
    args.extend_from_slice(extra);
    args
}

pub fn import_args<'a>(bootstrap: &'a str, dir: &'a Path) -> Vec<&'a str> {
    vec![
        "import",
        "--from",
        bootstrap,
        "--data-dir",
        dir.to_str().unwrap(),
    ]
}

/// Headers with a null value and a repeated key.
pub fn odd_headers(i: usize) -> Vec<Header> {
    match i % 3 {
        0 => Vec::new(),
        1 => vec![
            Header::new("trace", format!("t{i}")),
            Header::null("nothing"),
            Header::new("trace", ""),
        ],
        _ => vec![Header::new("only", vec![0u8, 255, 10])],
    }
}

/// `count` records to `topic[partition]` in native batches of `per_batch`: keys absent,
/// empty or set, values empty or set, headers of every kind.
pub fn produce_native(
    broker: &NanoKafka,
    topic: &str,
    partition: u32,
    count: usize,
    per_batch: usize,
) {
    let mut batch = RecordBatch::new();
    for i in 0..count {
        let key = match i % 4 {
            0 => None,
            1 => Some(b"".to_vec()),
            _ => Some(format!("key-{i}").into_bytes()),
        };
        let value = match i % 5 {
            0 => Vec::new(),
            _ => format!("{topic}/{partition}/{i}")
                .repeat(1 + i % 7)
                .into_bytes(),
        };
        batch.push_raw_with_headers(key.as_deref(), &value, &odd_headers(i));
        if batch.len() == per_batch || i + 1 == count {
            broker
                .produce_batch(topic, Some(partition), std::mem::take(&mut batch))
                .unwrap();
        }
    }
}

/// A Kafka producer's batch, by an independent encoder: records with their own (old)
/// timestamps, null values (tombstones) and null keys among them.
pub fn client_batch(first: i64, count: usize) -> Vec<u8> {
    let records: Vec<ClientRecord> = (0..count)
        .map(|i| ClientRecord {
            timestamp: first + (i as i64 % 3) * 1000, // not in order
            key: (i % 2 == 0).then(|| Bytes::from(format!("client-{i}"))),
            value: (i % 3 != 1).then(|| Bytes::from(format!("v{i}"))),
            headers: vec![("from", (i % 2 == 1).then(|| Bytes::from_static(b"client")))],
        })
        .collect();
    let options = BatchOptions {
        compression: Compression::Lz4,
        producer: None,
    };
    client_batch::encode(&records, options).to_vec()
}

/// Commits `committed` (the next offset to read) for `group` on `topic[partition]`.
pub fn commit(broker: &NanoKafka, topic: &str, group: &str, partition: u32, committed: u64) {
    broker.join_group(topic, group, "seeder").unwrap();
    broker
        .commit(topic, group, partition, committed - 1)
        .unwrap();
    broker.leave_group(topic, group, "seeder").unwrap();
}

/// The source of the round trip: topics of several partitions, native and client batches,
/// an empty compacted topic, a topic whose log no longer starts at 0, and two groups.
pub fn seed_source(dir: &Path) {
    let broker = NanoKafka::open(dir).unwrap();
    let orders = TopicConfig::default()
        .partitions(3)
        .retention_ms(30 * 24 * 3600 * 1000)
        .segment_bytes(1 << 20);
    broker.create_topic("orders", orders).unwrap();
    for (partition, count) in [(0, 40), (1, 0), (2, 75)] {
        produce_native(&broker, "orders", partition, count, 16);
    }
    broker
        .create_topic("events", TopicConfig::default())
        .unwrap();
    for first in [1_600_000_000_000, 1_600_000_100_000] {
        broker
            .produce_kafka_batch("events", 0, client_batch(first, 9))
            .unwrap();
    }
    produce_native(&broker, "events", 0, 5, 5);
    // Compacted, with compaction settings of its own: they go to Kafka and come back.
    let compacted = TopicConfig::default()
        .partitions(2)
        .cleanup_policy(CleanupPolicy::Compact)
        .min_compaction_lag_ms(60_000)
        .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(2500).unwrap());
    broker.create_topic("empty", compacted).unwrap();
    broker
        .create_topic("retained", TopicConfig::default().retention_size(5))
        .unwrap();
    produce_native(&broker, "retained", 0, 12, 1);

    commit(&broker, "orders", "billing", 0, 3);
    commit(&broker, "orders", "billing", 2, 75);
    commit(&broker, "events", "audit", 0, 10);
    commit(&broker, "retained", "audit", 0, 10);
    broker.shutdown().unwrap();
}

/// A record as a test compares it: offset, timestamp, key, value (`None`: null), headers.
pub type Rec = (
    u64,
    u64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

/// What a data directory holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// topic → partition count.
    pub topics: BTreeMap<String, u32>,
    /// (topic, partition) → records in offset order.
    pub records: BTreeMap<(String, u32), Vec<Rec>>,
    /// (topic, partition, group) → committed offset.
    pub committed: BTreeMap<(String, u32, String), u64>,
}

impl Snapshot {
    pub fn count(&self) -> usize {
        self.records.values().map(Vec::len).sum()
    }
}

/// The groups a snapshot reads with: one per snapshot (a group reads from its own commits,
/// so a second snapshot with the first one's group would see nothing), never compared.
const READER: &str = "snapshot-reader";
static READERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Every record (through the broker, and the nullness of values from the segment files with
/// an independent decoder) and committed offset of `dir`.
pub fn snapshot(dir: &Path) -> Snapshot {
    let n = READERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let reader = format!("{READER}-{n}");
    let reader = reader.as_str();
    let broker = NanoKafka::open(dir).unwrap();
    let mut snapshot = Snapshot::default();
    for (topic, stats) in broker.stats().unwrap().topics {
        snapshot
            .topics
            .insert(topic.clone(), stats.partitions.len() as u32);
        for p in &stats.partitions {
            snapshot
                .records
                .insert((topic.clone(), p.partition), Vec::new());
            for (group, &offset) in p.committed.iter().filter(|(g, _)| !g.starts_with(READER)) {
                snapshot
                    .committed
                    .insert((topic.clone(), p.partition, group.clone()), offset);
            }
        }
    }
    for topic in snapshot.topics.keys() {
        broker.join_group(topic, reader, "reader").unwrap();
        loop {
            let batch = broker
                .poll_batch_raw(topic, reader, "reader", 500, Duration::ZERO)
                .unwrap();
            let Some(last) = batch.last() else { break };
            broker
                .commit(topic, reader, last.partition, last.offset)
                .unwrap();
            for r in batch {
                let headers = r.headers.into_iter().map(|h| (h.key, h.value)).collect();
                let at = (topic.clone(), r.partition);
                let rec = (r.offset, r.timestamp_ms, r.key, Some(r.value), headers);
                snapshot.records.get_mut(&at).unwrap().push(rec);
            }
        }
    }
    broker.shutdown().unwrap();
    let nulls = null_values(dir);
    for ((topic, partition), records) in &mut snapshot.records {
        for rec in records {
            if nulls.contains(&(topic.clone(), *partition, rec.0)) {
                assert_eq!(rec.3.as_deref(), Some(&b""[..]), "a null reads as empty");
                rec.3 = None;
            }
        }
    }
    snapshot
}

/// `(topic, partition, offset)` of every record with a null value, from the segment files.
fn null_values(dir: &Path) -> std::collections::BTreeSet<(String, u32, u64)> {
    let mut nulls = std::collections::BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let Some((topic, partition)) = name.rsplit_once('_') else {
            continue;
        };
        let Ok(partition) = partition.parse::<u32>() else {
            continue;
        };
        if !path.is_dir() {
            continue;
        }
        for segment in segments(&path) {
            let mut buf = Bytes::from(std::fs::read(&segment).unwrap());
            for set in RecordBatchDecoder::decode_all(&mut buf).unwrap() {
                for r in set.records.iter().filter(|r| r.value.is_none()) {
                    nulls.insert((topic.to_owned(), partition, r.offset as u64));
                }
            }
        }
    }
    nulls
}

fn segments(partition_dir: &Path) -> Vec<PathBuf> {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(partition_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs
}

/// What `source` becomes after an export to new topics and an import back: the same, but
/// each partition numbered from 0 (the documented offset mapping: a log that started at `s`
/// shifts every offset and committed offset by `-s`), without the snapshot's own reader.
pub fn after_round_trip(source: &Snapshot) -> Snapshot {
    let mut expected = source.clone();
    let mut starts = BTreeMap::new();
    for (at, records) in &mut expected.records {
        let start = records.first().map_or(0, |r| r.0);
        starts.insert(at.clone(), start);
        for rec in records {
            rec.0 -= start;
        }
    }
    expected.committed = source
        .committed
        .iter()
        .filter(|((_, _, group), _)| !group.starts_with(READER))
        .map(|((topic, partition, group), &c)| {
            let start = starts[&(topic.clone(), *partition)];
            (
                (topic.clone(), *partition, group.clone()),
                c.saturating_sub(start),
            )
        })
        .collect();
    expected
}
