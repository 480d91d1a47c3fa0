//! The log cleaner of compacted topics: its throughput, its memory, and what it does to the
//! produce latency of the partition it cleans. `NANOKAFKA_BENCH_ONLY=cleaner` runs these rows
//! alone (about two minutes); the full run has them too.
//!
//! Every log is built directly (no broker; [`build_log`]) from 100-byte values under keys
//! `key-NNNNNNNNN`: the first `keys` records take each key once, the rest draw a key
//! uniformly at random (a fixed seed), so a log holds exactly `keys` distinct keys whatever
//! its length, and a cleaning keeps about one record in ten of a log of ten records per key.
//!
//! - **Throughput** ([`throughput`]): `Cleaner::prepare` over every sealed segment of the
//!   larger log (it maps the keys of the dirty section, then rewrites each segment without
//!   the superseded records and syncs it), in MB of source segments per second, against
//!   reading the same segment files and writing them whole to new files in 1 MiB calls,
//!   each file synced as the cleaner syncs each of its own: the I/O of a rewrite, without
//!   the cleaner's work. Beside it, for context, the same copy not synced (memory to memory
//!   through the page cache). Measured in turns, the order alternating, page cache hot; the
//!   figures are the turns' medians, with the pass's CPU time.
//! - **Memory** (`cleaner_memory`): peak RSS of a child process per case while it cleans a log
//!   to its end, two log sizes by two key-map budgets.
//! - **Produce latency** (`cleaner_latency`): the p99 of `NanoKafka::produce_raw` to a
//!   compacted topic while the broker's cleaner runs a pass over it, against the same
//!   producer while no pass runs.
//!
//! `NANOKAFKA_BENCH_CLEANER_RECORDS` (default 10,000,000: 1 M keys, a 1.2 GB log; at least
//! 100,000) sets the larger log; keys are a tenth of it, the smaller log a fifth.
//! `NANOKAFKA_BENCH_CLEANER_TURNS` (default 3) sets the turns of the throughput and latency
//! rows.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nanokafka::internals::storage::cleaner::{Cleaner, CleanerPolicy, CleanerStats};
use nanokafka::internals::storage::log::DEFAULT_SEGMENT_BYTES;
use nanokafka::internals::storage::{AppendRecord, LogConfig, PartitionLog};
use nanokafka::{FsyncPolicy, DEFAULT_CLEANER_KEY_MAP_BYTES};

use crate::cleaner_latency::ProduceLatency;
use crate::cleaner_memory::MemoryCase;
use crate::harness::{self, Meter, Progress, BATCH, VALUE_LEN};
use crate::report::{self, Figure, Row, Target};

/// A fixed clock for the logs built here: no segment is too young to clean.
pub const NOW_MS: u64 = 1_700_000_000_000;
/// Records per distinct key in every log of these rows.
pub const RECORDS_PER_KEY: u64 = 10;
/// Bytes of a key: `key-` and nine digits.
pub const KEY_LEN: usize = 13;
/// Bytes a record takes on disk, about: 13-byte key, 100-byte value, 10 bytes of framing
/// (10 M records make 1.23 GB).
const RECORD_BYTES: u64 = 123;
/// What the key map takes per key at most: a 24-byte slot, filled to 90 % at most
/// (`storage::cleaner::OffsetMap`).
pub const MAP_BYTES_PER_KEY: f64 = 24.0 / 0.9;
const MB: f64 = 1e6;
/// Progress steps of [`measure`].
pub const STEPS: usize = 3;

/// The rows' sizes, from the environment.
#[derive(Debug, Clone, Copy)]
pub struct CleanerSettings {
    /// Records of the larger log (`NANOKAFKA_BENCH_CLEANER_RECORDS`).
    pub records: u64,
    /// Distinct keys of every log: `records / RECORDS_PER_KEY`.
    pub keys: u64,
    /// Turns of the throughput and latency rows (`NANOKAFKA_BENCH_CLEANER_TURNS`).
    pub turns: usize,
}

impl CleanerSettings {
    pub fn from_env() -> Self {
        let records = harness::env_number("NANOKAFKA_BENCH_CLEANER_RECORDS", 1e7, 1e5..=1e9) as u64;
        let turns = harness::env_number("NANOKAFKA_BENCH_CLEANER_TURNS", 3.0, 1.0..=100.0);
        CleanerSettings {
            records,
            keys: records / RECORDS_PER_KEY,
            turns: turns as usize,
        }
    }

    /// Records of the smaller log: a fifth of the larger, the same keys.
    pub fn small_records(&self) -> u64 {
        self.records / 5
    }

    /// The logs' segment size: the broker's default (64 MiB), smaller when the smaller log
    /// would not fill three segments (a quick run), so that every log has sealed segments to
    /// clean and more than one to group.
    pub fn segment_bytes(&self) -> u64 {
        (self.small_records() * RECORD_BYTES / 3).clamp(1 << 20, DEFAULT_SEGMENT_BYTES)
    }

    /// A key map that holds every key: the broker's default budget, or more when the keys
    /// need it.
    pub fn fitting_budget(&self) -> usize {
        DEFAULT_CLEANER_KEY_MAP_BYTES.max((self.keys as f64 * MAP_BYTES_PER_KEY * 1.05) as usize)
    }
}

/// A log as [`build_log`] left it.
#[derive(Debug, Clone, Copy)]
pub struct BuiltLog {
    pub records: u64,
    pub bytes: u64,
    pub segments: usize,
}

/// The log of every row: synced by nobody (the rows time their own syncs).
pub fn log_config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Never,
        segment_bytes,
        ..LogConfig::default()
    }
}

/// `key-` and `k` in nine digits.
pub fn key_bytes(k: u64) -> [u8; KEY_LEN] {
    let mut key = *b"key-000000000";
    let mut k = k;
    for digit in key[4..].iter_mut().rev() {
        *digit = b'0' + (k % 10) as u8;
        k /= 10;
    }
    key
}

/// SplitMix64: a fixed, reproducible stream of keys (no `rand` in the tree for one line).
#[derive(Debug, Clone)]
pub struct Keys {
    state: u64,
    keys: u64,
    drawn: u64,
}

impl Keys {
    /// The keys of a log of `keys` distinct keys: `0..keys` once each, then uniform draws.
    pub fn new(keys: u64) -> Self {
        Keys {
            state: 0x9e37_79b9_7f4a_7c15,
            keys,
            drawn: 0,
        }
    }

    pub fn next_key(&mut self) -> u64 {
        self.drawn += 1;
        if self.drawn <= self.keys {
            return self.drawn - 1;
        }
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % self.keys
    }
}

/// Appends `records` keyed 100-byte records (see the module docs) in batches of [`BATCH`] to
/// a new log in `dir`, and closes it cleanly.
pub fn build_log(dir: &Path, records: u64, keys: u64, segment_bytes: u64) -> BuiltLog {
    let config = log_config(segment_bytes);
    let (mut log, _) = PartitionLog::open(dir, config, NOW_MS).expect("open a new log");
    let value = [0xa5u8; VALUE_LEN];
    let mut stream = Keys::new(keys);
    let mut batch_keys = vec![[0u8; KEY_LEN]; BATCH];
    let mut left = records;
    while left > 0 {
        let n = left.min(BATCH as u64) as usize;
        for key in &mut batch_keys[..n] {
            *key = key_bytes(stream.next_key());
        }
        let batch: Vec<AppendRecord<'_>> = batch_keys[..n]
            .iter()
            .map(|key| AppendRecord {
                key: Some(key),
                value: &value,
            })
            .collect();
        log.append(&batch, NOW_MS).expect("append");
        left -= n as u64;
    }
    let built = BuiltLog {
        records,
        bytes: log.size_bytes(),
        segments: log.segment_count(),
    };
    log.close().expect("close the built log");
    built
}

/// What [`throughput`] measured.
#[derive(Debug, Clone)]
pub struct CleanThroughput {
    pub log: BuiltLog,
    /// Bytes of the sealed segments a pass cleans (the active one is never cleaned).
    pub source_bytes: u64,
    /// Each turn's pass.
    pub clean: Vec<Duration>,
    /// The process's CPU time in each pass (the pass runs on this thread alone).
    pub clean_cpu: Vec<Duration>,
    /// Each turn's read and rewrite of the same files, each synced.
    pub rewrite: Vec<Duration>,
    /// The same, not synced: the copy into the page cache alone (context).
    pub copy: Vec<Duration>,
    /// The last pass's stats (every pass does the same work).
    pub stats: CleanerStats,
}

impl CleanThroughput {
    fn mb_per_sec(&self, took: Duration) -> f64 {
        self.source_bytes as f64 / MB / took.as_secs_f64()
    }

    /// MB/s of the median pass.
    pub fn clean_mb_per_sec(&self) -> f64 {
        self.mb_per_sec(median(&self.clean))
    }

    /// MB/s of the median rewrite.
    pub fn rewrite_mb_per_sec(&self) -> f64 {
        self.mb_per_sec(median(&self.rewrite))
    }

    /// MB/s of the median unsynced copy.
    pub fn copy_mb_per_sec(&self) -> f64 {
        self.mb_per_sec(median(&self.copy))
    }

    /// The lowest and highest of the turns' ratios (each pass over its turn's rewrite).
    pub fn ratio_spread(&self) -> (f64, f64) {
        let ratios: Vec<f64> = self
            .clean
            .iter()
            .zip(&self.rewrite)
            .map(|(clean, rewrite)| rewrite.as_secs_f64() / clean.as_secs_f64())
            .collect();
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(0.0, f64::max);
        (min, max)
    }
}

pub fn median(durations: &[Duration]) -> Duration {
    let mut sorted = durations.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

/// Builds the larger log, then times a cleaning pass over all of it and a read and rewrite of
/// the same segment files, `turns` times each, in alternating order.
pub fn throughput(settings: &CleanerSettings) -> CleanThroughput {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("compacted_0");
    let segment_bytes = settings.segment_bytes();
    let built = build_log(&dir, settings.records, settings.keys, segment_bytes);
    let config = log_config(segment_bytes);
    let (log, _) = PartitionLog::open(&dir, config, NOW_MS).expect("open the built log");
    let policy = CleanerPolicy {
        key_map_bytes: settings.fitting_budget(),
        ..CleanerPolicy::default()
    };
    let snapshot = log
        .cleaning_snapshot(log.log_end_offset(), &policy, NOW_MS)
        .expect("snapshot")
        .expect("sealed segments to clean");
    let sources: Vec<PathBuf> = snapshot.sources.iter().map(|s| s.path.clone()).collect();
    let mut measured = CleanThroughput {
        log: built,
        source_bytes: snapshot.sources.iter().map(|s| s.size).sum(),
        clean: Vec::new(),
        clean_cpu: Vec::new(),
        rewrite: Vec::new(),
        copy: Vec::new(),
        stats: CleanerStats::default(),
    };
    let cleaner = Cleaner::new(policy);
    let clean = |measured: &mut CleanThroughput| {
        let meter = Meter::start();
        let prepared = cleaner.prepare(&snapshot, NOW_MS).expect("a cleaning pass");
        let usage = meter.usage();
        measured.clean.push(usage.wall);
        measured.clean_cpu.push(usage.cpu);
        measured.stats = *prepared.stats();
        assert!(measured.stats.done, "the key map holds every key");
        // Dropped: its cleaned files are deleted, outside the timed part.
    };
    // Not timed: a first rewrite makes the page cache the turns' files take, and frees it
    // when they are deleted, so no turn pays for taking memory from elsewhere (on a VM whose
    // host takes back free memory, a page's first touch is a fault).
    rewrite(&sources, &dir, Synced::No);
    for turn in 0..settings.turns {
        harness::settle_disk();
        let copy = |measured: &mut CleanThroughput| {
            measured.copy.push(rewrite(&sources, &dir, Synced::No));
            harness::settle_disk();
            measured
                .rewrite
                .push(rewrite(&sources, &dir, Synced::EachFile));
        };
        if turn % 2 == 0 {
            copy(&mut measured);
            harness::settle_disk();
            clean(&mut measured);
        } else {
            clean(&mut measured);
            harness::settle_disk();
            copy(&mut measured);
        }
    }
    drop(snapshot);
    log.close().expect("close");
    measured
}

/// Whether a rewrite syncs its files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Synced {
    /// Each file once written, as the cleaner syncs each cleaned segment.
    EachFile,
    No,
}

/// Reads each of `sources` front to back in 1 MiB calls, writes it to a new file in `dir`
/// (synced as `synced` says); returns the time taken (the copies are deleted after).
fn rewrite(sources: &[PathBuf], dir: &Path, synced: Synced) -> Duration {
    let mut buf = vec![0u8; 1 << 20];
    let outputs: Vec<PathBuf> = (0..sources.len())
        .map(|i| dir.join(format!("{i}.rewrite")))
        .collect();
    let start = Instant::now();
    for (source, output) in sources.iter().zip(&outputs) {
        let mut input = File::open(source).expect("open a segment");
        let mut out = File::create(output).expect("create a rewrite");
        loop {
            let n = input.read(&mut buf).expect("read a segment");
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n]).expect("write a rewrite");
        }
        if synced == Synced::EachFile {
            out.sync_all().expect("sync a rewrite");
        }
    }
    let took = start.elapsed();
    for output in outputs {
        std::fs::remove_file(output).expect("delete a rewrite");
    }
    took
}

/// Everything the cleaner rows measured.
#[derive(Debug)]
pub struct Measured {
    pub settings: CleanerSettings,
    pub throughput: CleanThroughput,
    pub memory: Vec<MemoryCase>,
    pub latency: ProduceLatency,
}

/// Runs the three measurements ([`STEPS`] progress steps).
pub fn measure(
    settings: CleanerSettings,
    rate: u32,
    quiet: Duration,
    progress: &mut Progress,
) -> Measured {
    progress.step(&format!(
        "cleaner: throughput over {} records of {} keys, against reading and rewriting the \
         same segments, {} turns",
        report::human(settings.records as f64),
        report::human(settings.keys as f64),
        settings.turns
    ));
    let throughput = throughput(&settings);
    progress.step("cleaner: peak RSS of a child cleaning each log to its end, 4 cases");
    let memory = crate::cleaner_memory::cases(&settings);
    progress.step(&format!(
        "cleaner: produce p99 at {rate} records/s with and without a cleaning pass, {} turns",
        settings.turns
    ));
    let latency = crate::cleaner_latency::measure(&settings, rate, quiet);
    Measured {
        settings,
        throughput,
        memory,
        latency,
    }
}

/// The rows of [`Measured`].
pub fn rows(measured: &Measured) -> Vec<Row> {
    let t = &measured.throughput;
    let mut rows = vec![Row::Section(
        "log cleaner (compacted topic, 100 B values, 10 records per key)",
    )];
    let (low, high) = t.ratio_spread();
    rows.push(Row::Figure(
        Figure::new(
            "cleaner_throughput",
            format!(
                "Cleaner::prepare over {:.0} MB of sealed segments ({} records, {} keys, {} \
                 segments; median of {}, turns {low:.2}-{high:.2}x; CPU {:.2} s per pass; \
                 wrote {:.0} MB, removed {} records)",
                t.source_bytes as f64 / MB,
                report::human(t.log.records as f64),
                report::human(measured.settings.keys as f64),
                t.log.segments,
                t.clean.len(),
                median(&t.clean_cpu).as_secs_f64(),
                t.stats.bytes_written as f64 / MB,
                report::human(t.stats.records_removed as f64),
            ),
            t.clean_mb_per_sec(),
            "MB/s",
        )
        .vs(
            "read + rewrite of the same segment files (1 MiB calls, each synced)",
            t.rewrite_mb_per_sec(),
        )
        .target(Target::RatioAtLeast(0.3)),
    ));
    rows.push(Row::Figure(
        Figure::new(
            "cleaner_throughput_unsynced_copy",
            "the same pass (context)",
            t.clean_mb_per_sec(),
            "MB/s",
        )
        .vs(
            "read + rewrite of the same files, not synced (the copy alone)",
            t.copy_mb_per_sec(),
        ),
    ));
    rows.extend(crate::cleaner_memory::rows(&measured.memory));
    rows.extend(crate::cleaner_latency::rows(&measured.latency));
    rows
}

/// `NANOKAFKA_BENCH_ONLY=cleaner`: these rows alone, as a table and a JSON line.
pub fn only(rate: u32, quiet: Duration) {
    let settings = CleanerSettings::from_env();
    let mut progress = Progress::new(STEPS);
    let measured = measure(settings, rate, quiet, &mut progress);
    let rows = rows(&measured);
    report::print_table(&rows);
    let settings_json = serde_json::json!({
        "cleaner_records": settings.records,
        "cleaner_keys": settings.keys,
        "cleaner_turns": settings.turns,
        "latency_rate": rate,
        "quiet_secs": quiet.as_secs_f64(),
    });
    println!("{}", report::json_line(&rows, settings_json));
}
