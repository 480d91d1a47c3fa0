//! Time to open a large partition with `PartitionLog::open`, after a crash and after a clean
//! shutdown. The log is built directly (no broker) in a temp dir: 100-byte records appended
//! in batches of 1000 until it holds the requested bytes. The "crash" is dropping the log
//! without `close()`: what a `kill -9` leaves (the bytes are in the OS, no clean checkpoint).
//! Both opens run with the files hot in the page cache, as after a process restart.
//!
//! Baseline: reading every segment file once, sequentially (1 MiB reads), which is the least
//! a recovery that scanned the whole log would cost.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use nanokafka::internals::storage::{AppendRecord, LogConfig, PartitionLog};
use nanokafka::FsyncPolicy;

use crate::harness::{BATCH, VALUE_LEN};

/// A fixed clock: timestamps only matter to time retention, which is off.
const NOW_MS: u64 = 1_700_000_000_000;

/// What the measurement found.
#[derive(Debug, Clone, Copy)]
pub struct OpenTimes {
    pub log_bytes: u64,
    pub segments: usize,
    pub crash_open: Duration,
    /// Segments the crash open validated record by record.
    pub crash_segments_scanned: usize,
    pub clean_open: Duration,
    pub full_read: Duration,
}

fn config() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    }
}

fn open(dir: &Path) -> (PartitionLog, Duration, usize) {
    let start = Instant::now();
    let (log, report) = PartitionLog::open(dir, config(), NOW_MS).expect("open partition log");
    (log, start.elapsed(), report.segments_scanned)
}

/// Builds a log of at least `bytes` bytes, then times a crash open and a clean open.
pub fn open_times(bytes: u64) -> OpenTimes {
    let root = tempfile::tempdir().expect("temp dir");
    let dir = root.path().join("bench_0");
    let value = [0xa5u8; VALUE_LEN];
    let records = vec![
        AppendRecord {
            key: None,
            value: &value,
        };
        BATCH
    ];
    let (mut log, _, _) = open(&dir);
    while log.size_bytes() < bytes {
        log.append(&records, NOW_MS).expect("append");
    }
    let log_bytes = log.size_bytes();
    let segments = log.segment_count();
    let log_end = log.log_end_offset();
    drop(log); // The crash: no close, no clean checkpoint.

    let (log, crash_open, crash_segments_scanned) = open(&dir);
    assert_eq!(log.log_end_offset(), log_end, "nothing lost in the crash");
    log.close().expect("close");

    let (log, clean_open, _) = open(&dir);
    assert_eq!(log.log_end_offset(), log_end);
    log.close().expect("close");

    OpenTimes {
        log_bytes,
        segments,
        crash_open,
        crash_segments_scanned,
        clean_open,
        full_read: read_all_segments(&dir),
    }
}

/// Reads every `.log` file of `dir` once, front to back.
fn read_all_segments(dir: &Path) -> Duration {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("list partition dir")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    paths.sort();
    let mut buf = vec![0u8; 1 << 20];
    let start = Instant::now();
    let mut total = 0usize;
    for path in paths {
        let mut file = File::open(&path).expect("open segment");
        loop {
            let n = file.read(&mut buf).expect("read segment");
            if n == 0 {
                break;
            }
            total += n;
        }
    }
    std::hint::black_box(total);
    start.elapsed()
}
