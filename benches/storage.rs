//! Storage hot paths, each measured beside a raw-`std` baseline in the same run, because this
//! machine is shared and noisy: only the ratio of a pair means anything.
//!
//! | group    | ours                                     | baseline(s)                             |
//! | -------- | ---------------------------------------- | --------------------------------------- |
//! | `append` | `PartitionLog::append`, 1000 × 100 B     | 64 KiB `BufWriter<File>`, same bytes,   |
//! |          |                                          | flushed per batch (bytes in the OS)     |
//! | `read`   | `PartitionLog::read`, 1000 records/call  | the raw `BufWriter` append rate; raw    |
//! |          |                                          | `read_exact_at` of the same bytes into  |
//! |          |                                          | a page-aligned buffer                   |
//! | `commit` | `OffsetStore::commit` (journal, 1 write) | write temp + fsync + rename + dir fsync |
//! |          | `OffsetStore::commit` under `Always`     | `write` + `fdatasync`                   |
//! | `encode` | `RecordBatch::push_raw`, 1000 × 100 B;   | copying the same records into a `Vec`;  |
//! |          | `RecordBatch::push` of a small struct    | one `Vec` per record (`ProduceRecord`); |
//! |          |                                          | `rmp_serde::to_vec_named` per record    |
//!
//! Targets: append ≥ 0.5× raw `BufWriter`; read ≥ 0.5× raw `BufWriter`.
//!
//! Run `cargo bench --bench storage` (or `-- commit` for one group); medians are in
//! `target/criterion/<group>/<bench>/new/estimates.json`. `cargo test --bench storage` runs
//! every routine once, as a quick check that the bench still works.

use std::fs::{self, File, OpenOptions};
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use nanokafka::internals::storage::fs::StorageFile;
use nanokafka::internals::storage::fsutil::AlignedBuf;
use nanokafka::internals::storage::{
    AppendRecord, LogConfig, OffsetStore, PartitionLog, RecordBatch,
};
use nanokafka::{FsyncPolicy, ProduceRecord};
use tempfile::TempDir;

/// Records per `append` / `read` call.
const BATCH: usize = 1000;
const VALUE_LEN: usize = 100;
/// Bytes one record takes on disk (no key) in a batch of [`BATCH`]: what the raw baselines
/// write and read per record. Kafka's record format: length 2, attributes 1, timestamp delta
/// 1, offset delta 2 (1 for the first 64), null key 1, value length 2 and value 100, header
/// count 1; plus a thousandth of the 61-byte batch header. `read` checks it against the log.
const RECORD_LEN: usize = 110;
/// A fixed clock: timestamps only matter to time retention, which is off.
const NOW_MS: u64 = 1_700_000_000_000;
/// Batches written to one file before it is deleted and a fresh one made, outside the timed
/// part: 256 × 110 kB ≈ 28 MB keeps the disk from filling and stays below the default 64 MiB
/// segment, so no roll (a full-segment `fsync`, once per 64 MiB) lands in the timed part.
const BATCHES_PER_FILE: u64 = 256;
/// Records in the log the read benches walk (≈ 28 MB, one segment, hot in the page cache).
const READ_LOG_RECORDS: u64 = BATCHES_PER_FILE * BATCH as u64;
/// What a consumer asks for per fetch: Kafka's default `max.partition.fetch.bytes` (1 MiB).
const FETCH_MAX_BYTES: usize = 1 << 20;
const GROUP_ID: &str = "bench-group";

fn log_config() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    }
}

/// Times `iters` calls of `batch`, on state made by `setup` afresh every [`BATCHES_PER_FILE`]
/// calls; making and dropping the state (files included) is not timed.
fn timed_in_fresh_files<S>(
    iters: u64,
    mut setup: impl FnMut() -> S,
    mut batch: impl FnMut(&mut S),
) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(BATCHES_PER_FILE);
        let mut state = setup();
        let start = Instant::now();
        for _ in 0..n {
            batch(&mut state);
        }
        total += start.elapsed();
        drop(state);
        left -= n;
    }
    total
}

/// A fresh `PartitionLog` in its own temp dir (the log is dropped before the dir).
fn fresh_log() -> (PartitionLog, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (log, _) = PartitionLog::open(&dir.path().join("bench_0"), log_config(), NOW_MS)
        .expect("open partition log");
    (log, dir)
}

/// A fresh 64 KiB `BufWriter` over a new file in its own temp dir.
fn fresh_buf_writer() -> (BufWriter<File>, TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = File::create(dir.path().join("raw.log")).expect("create raw file");
    (BufWriter::with_capacity(64 << 10, file), dir)
}

/// The baseline both targets are stated against: the same bytes as one encoded batch, one
/// record at a time through a 64 KiB `BufWriter`, flushed so the batch is in the OS.
fn bench_raw_buf_writer(group: &mut BenchmarkGroup<'_, WallTime>) {
    let record = [0x5au8; RECORD_LEN];
    group.bench_function("raw_bufwriter", |b| {
        b.iter_custom(|iters| {
            timed_in_fresh_files(iters, fresh_buf_writer, |(writer, _)| {
                for _ in 0..BATCH {
                    writer.write_all(black_box(&record)).expect("write");
                }
                writer.flush().expect("flush");
            })
        })
    });
}

fn append(c: &mut Criterion) {
    let value = [0xa5u8; VALUE_LEN];
    let records = vec![
        AppendRecord {
            key: None,
            value: &value,
        };
        BATCH
    ];
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("partition_log", |b| {
        b.iter_custom(|iters| {
            timed_in_fresh_files(iters, fresh_log, |(log, _)| {
                black_box(log.append(&records, NOW_MS).expect("append"));
            })
        })
    });
    bench_raw_buf_writer(&mut group);
    group.finish();
}

fn read(c: &mut Criterion) {
    let (mut log, dir) = fresh_log();
    let value = [0xa5u8; VALUE_LEN];
    let records = vec![
        AppendRecord {
            key: None,
            value: &value,
        };
        BATCH
    ];
    for _ in 0..BATCHES_PER_FILE {
        log.append(&records, NOW_MS).expect("fill the log");
    }
    assert_eq!(log.segment_count(), 1, "the read log fits one segment");
    let log_end = log.log_end_offset();
    assert_eq!(log_end, READ_LOG_RECORDS);
    let segment_path = log.dir().join("00000000000000000000.log");
    let segment_len = fs::metadata(&segment_path).expect("stat segment").len();
    assert_eq!(
        segment_len.div_ceil(READ_LOG_RECORDS),
        RECORD_LEN as u64,
        "bytes a record takes on disk"
    );

    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("partition_log", |b| {
        let mut offset = 0;
        b.iter(|| {
            let fetched = log.read(offset, BATCH, FETCH_MAX_BYTES).expect("read");
            let value_bytes: usize = fetched.iter().map(|r| r.value.len()).sum();
            debug_assert_eq!(value_bytes, BATCH * VALUE_LEN);
            offset = fetched.next_offset();
            if offset >= log_end {
                offset = 0;
            }
            black_box(value_bytes)
        })
    });
    group.bench_function("raw_read_exact_at", |b| {
        let file = File::open(&segment_path).expect("open segment");
        let mut buf = AlignedBuf::default();
        let batch_bytes = (BATCH * RECORD_LEN) as u64;
        let mut position = 0;
        b.iter(|| {
            let len = batch_bytes as usize;
            buf.read(len, |raw| file.read_exact_at_appending(raw, len, position))
                .expect("read");
            position += batch_bytes;
            if position + batch_bytes > segment_len {
                position = 0;
            }
            black_box(buf.as_slice()[0])
        })
    });
    bench_raw_buf_writer(&mut group);
    group.finish();
    drop(log);
    drop(dir);
}

/// One journal entry's worth of bytes (length, crc, group_len, group id, offset).
fn entry_bytes(committed_offset: u64) -> Vec<u8> {
    let mut entry = vec![0u8; 4 + 4 + 2 + GROUP_ID.len()];
    entry[10..].copy_from_slice(GROUP_ID.as_bytes());
    entry.extend_from_slice(&committed_offset.to_le_bytes());
    entry
}

/// The crash-safe alternative to a journal: replace a small file per commit.
fn replace_file(dir: &Path, bytes: &[u8]) {
    let tmp = dir.join("offsets.tmp");
    let mut file = File::create(&tmp).expect("create temp file");
    file.write_all(bytes).expect("write temp file");
    file.sync_all().expect("fsync temp file");
    fs::rename(&tmp, dir.join("offsets")).expect("rename");
    File::open(dir)
        .and_then(|d| d.sync_all())
        .expect("fsync dir");
}

fn commit(c: &mut Criterion) {
    let mut group = c.benchmark_group("commit");
    group.throughput(Throughput::Elements(1));
    // The fsync-bound pairs run back to back: the disk's state (background write-back) drifts
    // within seconds, so a pair measured minutes apart would compare two different disks.
    group.bench_function("write_fdatasync", |b| {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut file = OpenOptions::new()
            .append(true)
            .create(true)
            .open(dir.path().join("raw.journal"))
            .expect("open raw journal");
        let mut committed_offset = 0u64;
        b.iter(|| {
            committed_offset += 1;
            file.write_all(&entry_bytes(committed_offset))
                .expect("write");
            file.sync_data().expect("fdatasync");
        })
    });
    bench_offset_store(&mut group, "journal_fsync_always", FsyncPolicy::Always);
    group.bench_function("tmp_fsync_rename_dirfsync", |b| {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut committed_offset = 0u64;
        b.iter(|| {
            committed_offset += 1;
            replace_file(dir.path(), &entry_bytes(committed_offset));
        })
    });
    bench_offset_store(&mut group, "journal", FsyncPolicy::Never);
    group.finish();
}

/// `OffsetStore::commit` of one group, its offset rising by one per commit.
fn bench_offset_store(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, fsync: FsyncPolicy) {
    group.bench_function(name, |b| {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut store = OffsetStore::open(dir.path(), fsync).expect("open offsets");
        let mut committed_offset = 0u64;
        b.iter(|| {
            committed_offset += 1;
            store
                .commit(GROUP_ID, committed_offset)
                .expect("commit offset");
        })
    });
}

/// A typed payload of about 100 bytes as MessagePack with field names.
#[derive(serde::Serialize)]
struct Order<'a> {
    id: u64,
    symbol: &'a str,
    side: &'a str,
    price: f64,
    quantity: u32,
    note: &'a str,
}

const ORDER: Order<'static> = Order {
    id: 42,
    symbol: "NANO",
    side: "buy",
    price: 101.25,
    quantity: 300,
    note: "a record about a hundred bytes long once encoded",
};

/// What a producer pays to lay out a batch before it is sent.
fn encode(c: &mut Criterion) {
    let value = [0xa5u8; VALUE_LEN];
    let record = [0x5au8; RECORD_LEN];
    let mut group = c.benchmark_group("encode");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("record_batch_raw", |b| {
        b.iter(|| {
            let mut batch = RecordBatch::with_capacity(BATCH, BATCH * VALUE_LEN);
            for _ in 0..BATCH {
                batch.push_raw(None, black_box(&value));
            }
            batch
        })
    });
    group.bench_function("record_batch_typed", |b| {
        b.iter(|| {
            let mut batch = RecordBatch::with_capacity(BATCH, BATCH * VALUE_LEN);
            for _ in 0..BATCH {
                batch.push(black_box(&ORDER)).expect("encode");
            }
            batch
        })
    });
    group.bench_function("raw_vec_copy", |b| {
        b.iter(|| {
            let mut bytes = Vec::with_capacity(BATCH * RECORD_LEN);
            for _ in 0..BATCH {
                bytes.extend_from_slice(black_box(&record));
            }
            bytes
        })
    });
    group.bench_function("vec_per_record", |b| {
        b.iter(|| {
            (0..BATCH)
                .map(|_| ProduceRecord {
                    key: None,
                    value: black_box(&value).to_vec(),
                })
                .collect::<Vec<_>>()
        })
    });
    group.bench_function("rmp_to_vec_named_per_record", |b| {
        b.iter(|| {
            (0..BATCH)
                .map(|_| rmp_serde::to_vec_named(black_box(&ORDER)).expect("encode"))
                .collect::<Vec<_>>()
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // Keeps the whole run near a minute on two shared cores. `commit` goes first: its fsyncs
    // would otherwise wait behind the write-back of the gigabytes the append benches write.
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20);
    targets = commit, append, read, encode
}
criterion_main!(benches);
