//! What every measurement shares: the settings read from the environment, the record shape,
//! the meter (wall-clock and process CPU time of a measured interval), a timed loop, a fresh
//! broker, and progress lines on stderr.
//!
//! CPU time is the whole process's (user + system, every thread: `getrusage(RUSAGE_SELF)`), so
//! a figure's CPU per record includes the broker's threads as well as the caller's.

use std::io::Write;
use std::ops::RangeInclusive;
use std::time::{Duration, Instant};

use nanokafka::{FsyncPolicy, NanoKafka, ProduceRecord, RecordBatch, TopicConfig, MAX_PARTITIONS};
use tempfile::TempDir;

/// Payload bytes of every record: the record size the targets are stated for.
pub const VALUE_LEN: usize = 100;
/// Bytes a keyless record takes on disk in a batch of [`BATCH`]: what the raw baselines write
/// per record. Kafka's record format: length 2, attributes 1, timestamp delta 1, offset delta
/// 2 (1 for the first 64), null key 1, value length 2 and value 100, header count 1; plus a
/// thousandth of the 61-byte batch header (`benches/storage.rs` checks it against a log).
pub const RECORD_LEN: usize = 110;
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
    /// `NANOKAFKA_BENCH_SCALE_PARTITIONS`: partitions of the scale rows' topic (default
    /// [`MAX_PARTITIONS`], 10,000).
    pub scale_partitions: u32,
}

impl Settings {
    pub fn from_env() -> Self {
        Settings {
            measure: Duration::from_secs_f64(env_number(
                "NANOKAFKA_BENCH_SECS",
                3.0,
                0.001..=86_400.0,
            )),
            open_bytes: env_number("NANOKAFKA_BENCH_OPEN_BYTES", GIB as f64, 1.0..=1e12) as u64,
            rss_bytes: env_number("NANOKAFKA_BENCH_RSS_BYTES", 2.0 * GIB as f64, 1.0..=1e12) as u64,
            scale_partitions: env_number(
                "NANOKAFKA_BENCH_SCALE_PARTITIONS",
                MAX_PARTITIONS as f64,
                1.0..=MAX_PARTITIONS as f64,
            ) as u32,
        }
    }

    /// How long the idle row watches a parked broker: 5 s, shorter in a quick run
    /// (twice the throughput budget).
    pub fn idle(&self) -> Duration {
        (self.measure * 2).min(Duration::from_secs(5))
    }
}

/// A number from the environment (`1e9` and `1073741824` both work), else `default`. One
/// that does not parse or lies outside `range` ends the run with a message and exit code 2,
/// before anything is measured.
pub fn env_number(name: &str, default: f64, range: RangeInclusive<f64>) -> f64 {
    let Ok(text) = std::env::var(name) else {
        return default;
    };
    match text.trim().parse::<f64>() {
        Ok(n) if range.contains(&n) => n,
        _ => {
            eprintln!(
                "{name}={text:?}: expected a number from {} to {}",
                range.start(),
                range.end()
            );
            std::process::exit(2);
        }
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

/// The process's resource usage so far.
fn rusage() -> libc::rusage {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage only writes the struct it is given, and RUSAGE_SELF is always valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", std::io::Error::last_os_error());
    // SAFETY: zeroed is a valid rusage (plain integers), and getrusage succeeded.
    unsafe { usage.assume_init() }
}

/// How many times the process's threads have gone to sleep so far (voluntary context
/// switches): each sleep is a wake-up to pay for later.
fn sleeps() -> u64 {
    rusage().ru_nvcsw as u64
}

/// Each live thread's sleeps so far (`voluntary_ctxt_switches` in `/proc/self/task/*/status`),
/// named `tid:name`; empty where `/proc` cannot be read. A thread that ended is not listed.
pub fn thread_sleeps() -> Vec<(String, u64)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut threads: Vec<(String, u64)> = tasks
        .flatten()
        .filter_map(|task| {
            let dir = task.path();
            let name = std::fs::read_to_string(dir.join("comm")).ok()?;
            let status = std::fs::read_to_string(dir.join("status")).ok()?;
            let sleeps = status
                .lines()
                .find_map(|line| line.strip_prefix("voluntary_ctxt_switches:"))?
                .trim()
                .parse()
                .ok()?;
            let tid = task.file_name().to_string_lossy().into_owned();
            Some((format!("{tid}:{}", name.trim()), sleeps))
        })
        .collect();
    threads.sort();
    threads
}

/// The process's CPU time so far: user + system, every thread (`getrusage(RUSAGE_SELF)`).
pub fn cpu_time() -> Duration {
    let usage = rusage();
    let time =
        |t: libc::timeval| Duration::from_micros(t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Wall-clock and process CPU time spent over one or more measured intervals.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub wall: Duration,
    pub cpu: Duration,
}

impl Usage {
    /// The process's CPU time as a percentage of one core.
    pub fn core_percent(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.wall.as_secs_f64()
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.wall += other.wall;
        self.cpu += other.cpu;
    }
}

/// A measured interval in progress: started with [`Meter::start`], read with [`Meter::usage`].
#[derive(Debug, Clone, Copy)]
pub struct Meter {
    wall: Instant,
    cpu: Duration,
    sleeps: u64,
}

impl Meter {
    pub fn start() -> Self {
        Meter {
            wall: Instant::now(),
            cpu: cpu_time(),
            sleeps: sleeps(),
        }
    }

    /// The process's sleeps (see [`sleeps`]) since [`Meter::start`].
    pub fn sleeps(&self) -> u64 {
        sleeps() - self.sleeps
    }

    /// Wall-clock time since [`Meter::start`].
    pub fn elapsed(&self) -> Duration {
        self.wall.elapsed()
    }

    /// Wall and CPU time since [`Meter::start`].
    pub fn usage(&self) -> Usage {
        Usage {
            wall: self.wall.elapsed(),
            cpu: cpu_time().saturating_sub(self.cpu),
        }
    }

    /// Records per second and CPU per record since [`Meter::start`].
    pub fn rate(&self, records: u64) -> Rate {
        Rate::of(records, self.usage())
    }
}

/// A throughput figure: records per second, and the process's CPU time per record over the
/// same interval.
#[derive(Debug, Clone, Copy)]
pub struct Rate {
    pub per_sec: f64,
    pub cpu_us_per_record: f64,
}

impl Rate {
    pub fn of(records: u64, usage: Usage) -> Self {
        Rate {
            per_sec: records as f64 / usage.wall.as_secs_f64(),
            cpu_us_per_record: usage.cpu.as_secs_f64() * 1e6 / records.max(1) as f64,
        }
    }
}

/// Records handled and the wall and CPU time they took: the slices of one measurement add up
/// (see `produce::interleaved`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub records: u64,
    pub usage: Usage,
}

impl Tally {
    pub fn rate(&self) -> Rate {
        Rate::of(self.records, self.usage)
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.records += other.records;
        self.usage += other.usage;
    }
}

/// Runs `run`, which returns the records it handled, and meters exactly that call.
pub fn tallied(run: impl FnOnce() -> u64) -> Tally {
    let meter = Meter::start();
    let records = run();
    Tally {
        records,
        usage: meter.usage(),
    }
}

/// [`tallied`], as a rate.
pub fn measured(run: impl FnOnce() -> u64) -> Rate {
    tallied(run).rate()
}

/// Calls `round` until `budget` has passed; each call returns the records it handled.
/// Returns the rate and CPU per record over the whole run.
pub fn rate_for(budget: Duration, mut round: impl FnMut() -> u64) -> Rate {
    measured(|| {
        let start = Instant::now();
        let mut records = 0u64;
        while start.elapsed() < budget {
            records += round();
        }
        records
    })
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
        Self::start_with(fsync, None)
    }

    /// As [`TempBroker::start`], with the I/O threads' `idle_spin` when given.
    pub fn start_with(fsync: FsyncPolicy, idle_spin: Option<std::time::Duration>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut builder = NanoKafka::builder().data_dir(dir.path()).fsync(fsync);
        if let Some(spin) = idle_spin {
            builder = builder.idle_spin(spin);
        }
        let broker = builder.build().expect("start broker");
        TempBroker { broker, _dir: dir }
    }

    /// Creates a one-partition topic whose disk use is bounded by [`RETENTION_BYTES`].
    pub fn topic<'a>(&self, name: &'a str) -> &'a str {
        self.partitioned(name, 1)
    }

    /// Creates a topic of `partitions`, each bounded by [`RETENTION_BYTES`].
    pub fn partitioned<'a>(&self, name: &'a str, partitions: u32) -> &'a str {
        let config = TopicConfig::default()
            .retention_bytes(RETENTION_BYTES)
            .partitions(partitions);
        self.broker
            .create_topic(name, config)
            .expect("create topic");
        name
    }
}

/// Waits until the page cache's dirty data is on disk (`sync(2)`), outside any measurement:
/// what the rows before left to write back does not fall into the next row.
pub fn settle_disk() {
    // SAFETY: `sync` takes no arguments and cannot fail.
    unsafe { libc::sync() };
}
