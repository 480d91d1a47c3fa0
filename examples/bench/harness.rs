//! What every measurement shares: the settings read from the environment, the record shape,
//! a timed loop, a fresh broker, and progress lines on stderr.

use std::io::Write;
use std::time::{Duration, Instant};

use nanokafka::storage::record::HEADER_LEN;
use nanokafka::{FsyncPolicy, NanoKafka, ProduceRecord, RecordBatch, TopicConfig};
use tempfile::TempDir;

/// Payload bytes of every record: the record size the targets are stated for.
pub const VALUE_LEN: usize = 100;
/// Bytes a keyless record takes on disk: what the raw baselines write per record.
pub const FRAME_LEN: usize = HEADER_LEN + VALUE_LEN;
/// Records per call of the batch APIs (`produce_batch_raw`, `PartitionLog::append`) and per
/// `flush` / `fdatasync` of the raw baselines.
pub const BATCH: usize = 1000;
/// Records per `poll_batch_raw` / `Consumer::poll_batch` call.
pub const POLL_BATCH: usize = 500;
/// Segment files roll at the broker's default (64 MiB); retention keeps four of them, so a
/// measurement that writes gigabytes leaves at most ~320 MB on disk.
pub const RETENTION_BYTES: u64 = 256 << 20;

const GIB: u64 = 1 << 30;

/// Knobs, from the environment, so a quick run is possible.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// `NANOKAFKA_BENCH_SECS`: how long each throughput measurement runs (default 3).
    pub measure: Duration,
    /// `NANOKAFKA_BENCH_OPEN_BYTES`: size of the partition whose open is timed (default 1 GiB).
    pub open_bytes: u64,
    /// `NANOKAFKA_BENCH_RSS_BYTES`: payload bytes produced while peak RSS is watched
    /// (default 2 GiB).
    pub rss_bytes: u64,
}

impl Settings {
    pub fn from_env() -> Self {
        Settings {
            measure: Duration::from_secs_f64(env_f64("NANOKAFKA_BENCH_SECS", 3.0)),
            open_bytes: env_f64("NANOKAFKA_BENCH_OPEN_BYTES", GIB as f64) as u64,
            rss_bytes: env_f64("NANOKAFKA_BENCH_RSS_BYTES", 2.0 * GIB as f64) as u64,
        }
    }
}

/// A number from the environment (`1e9` and `1073741824` both work), else `default`.
fn env_f64(name: &str, default: f64) -> f64 {
    match std::env::var(name) {
        Ok(text) => text
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={text:?} is not a number")),
        Err(_) => default,
    }
}

/// Numbered progress lines on stderr, so stdout holds only the table and the JSON line.
#[derive(Debug)]
pub struct Progress {
    step: usize,
    steps: usize,
    started: Instant,
}

impl Progress {
    pub fn new(steps: usize) -> Self {
        Progress {
            step: 0,
            steps,
            started: Instant::now(),
        }
    }

    pub fn step(&mut self, what: &str) {
        self.step += 1;
        eprintln!(
            "[{:>2}/{}] {:>6.1} s  {what}",
            self.step,
            self.steps,
            self.started.elapsed().as_secs_f64()
        );
        let _ = std::io::stderr().flush();
    }

    pub fn note(&self, what: &str) {
        eprintln!("              {what}");
    }
}

/// Calls `round` until `budget` has passed; each call returns the records it handled.
/// Returns records per second over the whole run.
pub fn rate_for(budget: Duration, mut round: impl FnMut() -> u64) -> f64 {
    let start = Instant::now();
    let mut records = 0u64;
    while start.elapsed() < budget {
        records += round();
    }
    records as f64 / start.elapsed().as_secs_f64()
}

/// A 100-byte payload.
pub fn payload() -> Vec<u8> {
    vec![0xa5; VALUE_LEN]
}

/// One `produce_batch` batch: [`BATCH`] keyless 100-byte records in one `RecordBatch`.
pub fn record_batch() -> RecordBatch {
    let value = [0xa5; VALUE_LEN];
    let mut batch = RecordBatch::with_capacity(BATCH, BATCH * VALUE_LEN);
    for _ in 0..BATCH {
        batch.push_raw(None, &value);
    }
    batch
}

/// One `produce_batch_raw` batch: [`BATCH`] keyless 100-byte records, a `Vec` each.
pub fn produce_batch() -> Vec<ProduceRecord> {
    (0..BATCH)
        .map(|_| ProduceRecord {
            key: None,
            value: payload(),
        })
        .collect()
}

/// A broker in its own temp dir (the broker is dropped before the dir: field order).
pub struct TempBroker {
    pub broker: NanoKafka,
    _dir: TempDir,
}

impl TempBroker {
    pub fn start(fsync: FsyncPolicy) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .fsync(fsync)
            .build()
            .expect("start broker");
        TempBroker { broker, _dir: dir }
    }

    /// Creates a one-partition topic whose disk use is bounded by [`RETENTION_BYTES`].
    pub fn topic<'a>(&self, name: &'a str) -> &'a str {
        let config = TopicConfig::default().retention_bytes(RETENTION_BYTES);
        self.broker
            .create_topic(name, config)
            .expect("create topic");
        name
    }
}
