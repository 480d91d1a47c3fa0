//! Peak memory of the log cleaner: a child process per case opens a log built by
//! `cleaner::build_log`, resets its peak RSS (`echo 5 > /proc/self/clear_refs`), runs passes
//! (`cleaning_snapshot`, `Cleaner::prepare`, `swap_in`) until the log is cleaned to its end,
//! as a partition's actor does on the cleaner thread, and reports `VmHWM`. A process per case,
//! so no case inherits another's heap.
//!
//! The cases: the larger and the smaller log (`cleaner::CleanerSettings`, the same keys), each
//! with a key map that holds every key (one pass) and with one that holds 60 % of them (the
//! cleaner stops each pass where the map fills and runs the next, as Kafka's does). The
//! figure is the peak less the RSS of the child with the log open, before the first pass;
//! its target is the key-map budget plus [`OVERHEAD_BYTES`]. The records live on disk, so
//! the same budget gives the same peak for both sizes.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use nanokafka::internals::storage::cleaner::{Cleaner, CleanerPolicy};
use nanokafka::internals::storage::PartitionLog;

use crate::cleaner::{self, BuiltLog, CleanerSettings, MAP_BYTES_PER_KEY, NOW_MS};
use crate::report::{self, Figure, Row, Target};
use crate::rss::status_bytes;

/// The child's variable: `<key map bytes> <segment bytes> <log dir>`.
const CHILD_VAR: &str = "NANOKAFKA_BENCH_CLEANER_CHILD";
/// What a pass holds besides its key map (`storage::cleaner`'s memory): a 1 MiB read buffer
/// (`batches::READ_CHUNK`), one batch decompressed, its records kept and its rewrite (here
/// about 130 kB each: 1000 records), the cleaned segment's handles, and the allocator's
/// slack. 4 MiB bounds them for batches up to ~500 kB.
pub const OVERHEAD_BYTES: u64 = 4 << 20;
/// The share of the keys the smaller key map holds.
const SPLIT_SHARE: f64 = 0.6;
const MB: f64 = 1e6;

/// One case: a log, a budget, and what the child saw.
#[derive(Debug, Clone, Copy)]
pub struct MemoryCase {
    pub log: BuiltLog,
    pub key_map_bytes: usize,
    /// RSS with the log open, before the first pass.
    pub before: u64,
    /// `VmHWM` after the last pass.
    pub peak: u64,
    pub passes: u64,
    pub bytes_read: u64,
    pub secs: f64,
    /// Whether the high-water mark could be reset (else `peak` is the child's whole life).
    pub reset: bool,
}

impl MemoryCase {
    /// What the passes added to the child's RSS.
    pub fn added(&self) -> u64 {
        self.peak.saturating_sub(self.before)
    }
}

/// When this process is a cleaner child (see the module docs): cleans, prints one line, and
/// returns true; the caller then exits.
pub fn child() -> bool {
    let Some(arg) = std::env::var_os(CHILD_VAR) else {
        return false;
    };
    let arg = arg.to_string_lossy().into_owned();
    let mut fields = arg.splitn(3, ' ');
    let mut number = || -> u64 {
        let field = fields
            .next()
            .expect("<key map bytes> <segment bytes> <dir>");
        field.parse().expect("a number")
    };
    let (budget, segment_bytes) = (number(), number());
    let dir = fields.next().expect("<dir>");
    let policy = CleanerPolicy {
        key_map_bytes: budget as usize,
        ..CleanerPolicy::default()
    };
    let config = cleaner::log_config(segment_bytes);
    let (mut log, _) = PartitionLog::open(Path::new(dir), config, NOW_MS).expect("open the log");
    let before = status_bytes("VmRSS");
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let start = Instant::now();
    let (mut passes, mut bytes_read) = (0u64, 0u64);
    loop {
        let snapshot = log
            .cleaning_snapshot(log.log_end_offset(), &policy, NOW_MS)
            .expect("snapshot")
            .expect("sealed segments to clean");
        let prepared = Cleaner::new(policy)
            .prepare(&snapshot, NOW_MS)
            .expect("a cleaning pass");
        drop(snapshot);
        let stats = log.swap_in(prepared).expect("swap in");
        passes += 1;
        bytes_read += stats.bytes_read;
        if stats.done {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let peak = status_bytes("VmHWM");
    println!("{before} {peak} {passes} {bytes_read} {secs} {reset}");
    true
}

/// Builds a log of `records`, has a child clean it with `key_map_bytes`, deletes it.
fn case(settings: &CleanerSettings, records: u64, key_map_bytes: usize) -> MemoryCase {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("compacted_0");
    let segment_bytes = settings.segment_bytes();
    let log = cleaner::build_log(&dir, records, settings.keys, segment_bytes);
    crate::harness::settle_disk();
    let exe = std::env::current_exe().expect("the bench's own path");
    let output = Command::new(exe)
        .env(
            CHILD_VAR,
            format!("{key_map_bytes} {segment_bytes} {}", dir.display()),
        )
        .output()
        .expect("run a cleaner child");
    assert!(
        output.status.success(),
        "cleaner child failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let line = String::from_utf8(output.stdout).expect("utf-8");
    let fields: Vec<&str> = line.split_whitespace().collect();
    let number = |i: usize| -> u64 { fields[i].parse().expect("a number") };
    MemoryCase {
        log,
        key_map_bytes,
        before: number(0),
        peak: number(1),
        passes: number(2),
        bytes_read: number(3),
        secs: fields[4].parse().expect("seconds"),
        reset: fields[5] == "true",
    }
}

/// The four cases: (larger, smaller log) × (every key fits, 60 % fit).
pub fn cases(settings: &CleanerSettings) -> Vec<MemoryCase> {
    let fits = settings.fitting_budget();
    let split = (settings.keys as f64 * SPLIT_SHARE * MAP_BYTES_PER_KEY) as usize;
    let mut cases = Vec::new();
    for records in [settings.records, settings.small_records()] {
        for budget in [fits, split] {
            cases.push(case(settings, records, budget));
        }
    }
    cases
}

/// A row per case, then the larger log's peaks against the smaller's.
pub fn rows(cases: &[MemoryCase]) -> Vec<Row> {
    const KEYS: [&str; 4] = [
        "cleaner_peak_rss_large_fits",
        "cleaner_peak_rss_large_split",
        "cleaner_peak_rss_small_fits",
        "cleaner_peak_rss_small_split",
    ];
    let mut rows = Vec::new();
    for (case, key) in cases.iter().zip(KEYS) {
        let budget_mb = case.key_map_bytes as f64 / MB;
        rows.push(Row::Figure(
            Figure::new(
                key,
                format!(
                    "peak RSS added cleaning {} records ({:.0} MB) to the end: {} pass(es), \
                     {:.0} MB read, {:.1} s{}",
                    report::human(case.log.records as f64),
                    case.log.bytes as f64 / MB,
                    case.passes,
                    case.bytes_read as f64 / MB,
                    case.secs,
                    if case.reset { "" } else { " (VmHWM not reset)" }
                ),
                case.added() as f64 / MB,
                "MB",
            )
            .vs("key-map budget", budget_mb)
            .target(Target::AtMost(
                (case.key_map_bytes as u64 + OVERHEAD_BYTES) as f64 / MB,
            )),
        ));
    }
    const GROWTH: [&str; 2] = [
        "cleaner_peak_rss_growth_fits",
        "cleaner_peak_rss_growth_split",
    ];
    for (i, key) in GROWTH.into_iter().enumerate() {
        let (Some(large), Some(small)) = (cases.get(i), cases.get(i + 2)) else {
            continue;
        };
        rows.push(Row::Figure(
            Figure::new(
                key,
                format!(
                    "peak RSS added, {:.0} MB log / {:.0} MB log, same budget",
                    large.log.bytes as f64 / MB,
                    small.log.bytes as f64 / MB
                ),
                large.added() as f64 / MB,
                "MB",
            )
            .vs("the smaller log's", small.added() as f64 / MB)
            .target(Target::AtMost((small.added() + OVERHEAD_BYTES) as f64 / MB)),
        ));
    }
    rows
}
