//! Behaviour of the partition log through its public API: order, reads from any offset,
//! segments, reopen, retention, bad input.

use crate::common::record_len;

use std::path::Path;

use nanokafka::internals::storage::format::HEADER_LEN;
use nanokafka::internals::storage::{
    AppendRecord, LogConfig, PartitionLog, RetentionPolicy, StorageError,
};
use nanokafka::FsyncPolicy;

const NOW: u64 = 1_700_000_000_000;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

fn open(dir: &Path, config: LogConfig) -> PartitionLog {
    PartitionLog::open(dir, config, NOW).unwrap().0
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i:06}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn append_n(log: &mut PartitionLog, from: u64, n: u64) {
    for i in from..from + n {
        let v = value(i);
        let info = log
            .append(
                &[AppendRecord {
                    key: None,
                    value: &v,
                }],
                NOW,
            )
            .unwrap();
        assert_eq!(info.base_offset, i);
    }
}

/// Reads every record from `offset` to the log end, in as many reads as it takes.
fn read_all(log: &mut PartitionLog, mut offset: u64) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let fetched = log.read(offset, 7, 1 << 20).unwrap();
        if fetched.is_empty() {
            return out;
        }
        out.extend(fetched.iter().map(|r| (r.offset, r.value.to_vec())));
        offset = fetched.next_offset();
    }
}

#[test]
fn records_come_back_in_order_with_keys_and_timestamps() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    let batch = [
        AppendRecord {
            key: Some(b"k1"),
            value: b"one",
        },
        AppendRecord {
            key: None,
            value: b"two",
        },
        AppendRecord {
            key: Some(b""),
            value: b"",
        },
    ];
    let info = log.append(&batch, NOW + 5).unwrap();
    assert_eq!(
        (info.base_offset, info.count, info.timestamp_ms),
        (0, 3, NOW + 5)
    );
    let fetched = log.read(0, 10, 1 << 20).unwrap();
    let got: Vec<_> = fetched
        .iter()
        .map(|r| (r.offset, r.key, r.value, r.timestamp_ms))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, Some(&b"k1"[..]), &b"one"[..], NOW + 5),
            (1, None, &b"two"[..], NOW + 5),
            (2, Some(&b""[..]), &b""[..], NOW + 5),
        ]
    );
    assert_eq!(fetched.next_offset(), 3);
}

#[test]
fn timestamps_never_go_backwards() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    log.append(
        &[AppendRecord {
            key: None,
            value: b"a",
        }],
        NOW,
    )
    .unwrap();
    let info = log
        .append(
            &[AppendRecord {
                key: None,
                value: b"b",
            }],
            NOW - 1000,
        )
        .unwrap();
    assert_eq!(info.timestamp_ms, NOW);
}

#[test]
fn reads_start_at_any_offset_across_many_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_n(&mut log, 0, 600);
    assert!(
        log.segment_count() > 5,
        "expected rolls, got {} segments",
        log.segment_count()
    );
    for start in [0, 1, 63, 64, 299, 598, 599] {
        let got = read_all(&mut log, start);
        let want: Vec<_> = (start..600).map(|i| (i, value(i))).collect();
        assert_eq!(got, want, "reading from {start}");
    }
    assert!(log.read(600, 10, 1 << 20).unwrap().is_empty());
}

#[test]
fn max_records_and_max_bytes_bound_a_read_but_one_record_always_comes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_n(&mut log, 0, 20);
    assert_eq!(log.read(0, 3, 1 << 20).unwrap().len(), 3);
    assert_eq!(log.read(5, 100, 1).unwrap().len(), 1);
    // `max_bytes` counts the records' bytes (here one per batch, at offset delta 0).
    let record_len = |i| record_len(0, None, value(i).len());
    let two_records = record_len(0) + record_len(1);
    assert_eq!(log.read(0, 100, two_records).unwrap().len(), 2);
    assert_eq!(log.read(0, 100, two_records - 1).unwrap().len(), 1);
}

#[test]
fn a_read_past_the_log_end_is_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_n(&mut log, 0, 3);
    assert!(matches!(
        log.read(4, 1, 100),
        Err(StorageError::OffsetOutOfRange {
            offset: 4,
            log_end_offset: 3,
            ..
        })
    ));
}

#[test]
fn an_oversized_record_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(
        dir.path(),
        LogConfig {
            max_record_bytes: 10,
            ..config()
        },
    );
    let big = [0u8; 11];
    let batch = [
        AppendRecord {
            key: None,
            value: b"fine",
        },
        AppendRecord {
            key: None,
            value: &big,
        },
    ];
    assert!(matches!(
        log.append(&batch, NOW),
        Err(StorageError::RecordTooLarge { size: 11, max: 10 })
    ));
    assert_eq!(log.log_end_offset(), 0);
    assert_eq!(log.size_bytes(), 0);
    // Key bytes count too.
    let key_too = [AppendRecord {
        key: Some(b"123456"),
        value: b"12345",
    }];
    assert!(log.append(&key_too, NOW).is_err());
}

#[test]
fn everything_comes_back_after_a_clean_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_n(&mut log, 0, 300);
    log.close().unwrap();
    let (mut log, report) = PartitionLog::open(dir.path(), config(), NOW).unwrap();
    assert!(report.clean_shutdown);
    assert_eq!(
        report.segments_scanned, 0,
        "a clean shutdown spares the scan"
    );
    assert_eq!(log.log_end_offset(), 300);
    append_n(&mut log, 300, 10);
    assert_eq!(read_all(&mut log, 0).len(), 310);
}

#[test]
fn a_crash_loses_nothing_that_was_appended() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = open(dir.path(), config());
    append_n(&mut log, 0, 300);
    drop(log); // no close: like kill -9, the bytes are in the OS but no marker was written
    let (mut log, report) = PartitionLog::open(dir.path(), config(), NOW).unwrap();
    assert!(!report.clean_shutdown);
    assert!(report.segments_scanned >= 1);
    assert!(report.truncations.is_empty());
    assert_eq!(log.log_end_offset(), 300);
    let want: Vec<_> = (0..300).map(|i| (i, value(i))).collect();
    assert_eq!(read_all(&mut log, 0), want);
}

#[test]
fn fsync_always_appends_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        fsync: FsyncPolicy::Always,
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    append_n(&mut log, 0, 50);
    assert!(!log.is_dirty());
    drop(log);
    assert_eq!(open(dir.path(), cfg).log_end_offset(), 50);
}

#[test]
fn retention_by_records_is_exact_and_deletes_whole_segments() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention: RetentionPolicy {
            records: Some(100),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    append_n(&mut log, 0, 500);
    assert_eq!(log.log_start_offset(), 400);
    assert_eq!(log.log_end_offset(), 500);
    // A read below the log start begins at the log start.
    let got = read_all(&mut log, 0);
    assert_eq!(got.first().unwrap().0, 400);
    assert_eq!(got.len(), 100);
    // Old segments are gone from disk; what is left holds little more than 100 records.
    let segments_on_disk = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count();
    assert_eq!(segments_on_disk, log.segment_count());
    assert!(
        log.size_bytes() < 2 * 4096 + 100 * 100,
        "{} bytes kept",
        log.size_bytes()
    );
    // And the start survives a crash.
    drop(log);
    assert_eq!(open(dir.path(), cfg).log_start_offset(), 400);
}

/// The files of the first segment (`<base>.log` and its indexes), by name and contents.
fn first_segment_files(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    let prefix = format!("{:020}.", 0);
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| (e.file_name(), std::fs::read(e.path()).unwrap()))
        .collect();
    files.sort();
    files
}

/// Retention drops a segment from the log, then its files are deleted (by the broker, on its
/// sync thread, later): a crash in between leaves files wholly below the stored log start. The
/// next open deletes them, and never serves their records.
#[test]
fn segment_files_a_crash_left_below_the_log_start_are_deleted_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention: RetentionPolicy {
            records: Some(100),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    append_n(&mut log, 0, 60);
    assert!(log.segment_count() > 1, "the first segment is sealed");
    let left = first_segment_files(dir.path());
    assert!(left
        .iter()
        .any(|(name, _)| name.to_string_lossy().ends_with(".log")));
    append_n(&mut log, 60, 440);
    assert!(
        first_segment_files(dir.path()).is_empty(),
        "deleted by retention"
    );
    let (segments, expected) = (log.segment_count(), read_all(&mut log, 0));
    // The crash: the first segment's files are back, as if their unlink never ran.
    drop(log);
    for (name, bytes) in &left {
        std::fs::write(dir.path().join(name), bytes).unwrap();
    }
    let mut log = open(dir.path(), cfg);
    assert!(
        first_segment_files(dir.path()).is_empty(),
        "deleted at open"
    );
    assert_eq!(log.log_start_offset(), 400);
    assert_eq!(log.segment_count(), segments);
    assert_eq!(read_all(&mut log, 0), expected);
}

/// A segment whose records all expired while it was the active one cannot go then; once a roll
/// has made it an older segment, the next retention deletes it, although the log start does
/// not move.
#[test]
fn a_segment_that_expired_while_active_is_deleted_after_the_roll() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        segment_bytes: 1024,
        retention: RetentionPolicy {
            bytes: Some(600),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    let big = |n: usize| vec![b'v'; n];
    let append = |log: &mut PartitionLog, value: &[u8]| {
        log.append(&[AppendRecord { key: None, value }], NOW)
            .unwrap()
    };
    // Larger than the retention: it expires at once, but its segment is the active one.
    append(&mut log, &big(700));
    assert_eq!(log.log_start_offset(), 1);
    assert!(
        !first_segment_files(dir.path()).is_empty(),
        "the active segment stays"
    );
    // This one rolls (700 + 500 > 1024) and is kept (within 600 bytes): the start stays at 1.
    append(&mut log, &big(500));
    assert_eq!(log.log_start_offset(), 1);
    assert_eq!(log.segment_count(), 1);
    assert!(
        first_segment_files(dir.path()).is_empty(),
        "the expired segment is deleted once it is no longer the active one"
    );
    assert_eq!(read_all(&mut log, 0), vec![(1, big(500))]);
}

#[test]
fn retention_by_bytes_keeps_at_most_that_many_batch_bytes() {
    let dir = tempfile::tempdir().unwrap();
    // One record of a 10-byte value per batch.
    let batch = (HEADER_LEN + record_len(0, None, 10)) as u64;
    let cfg = LogConfig {
        retention: RetentionPolicy {
            bytes: Some(5 * batch + 3),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    for i in 0..200u64 {
        let v = format!("{i:010}");
        log.append(
            &[AppendRecord {
                key: None,
                value: v.as_bytes(),
            }],
            NOW,
        )
        .unwrap();
        let kept = log.log_end_offset() - log.log_start_offset();
        assert_eq!(kept, (i + 1).min(5), "after record {i}");
    }
    assert!(log.segment_count() <= 2);
}

/// Appends one batch of 100 records of 100 bytes (about 11 kB: more than the chunk a scan
/// reads at a time, so bytes retention steps over such batches by their headers).
fn append_large_batch(log: &mut PartitionLog) -> u64 {
    let value = [0x5a; 100];
    let records = [AppendRecord {
        key: None,
        value: &value,
    }; 100];
    let info = log.append(&records, NOW).unwrap();
    info.base_offset
}

/// Flips one byte in the records of the batch at `position` of the first segment (its CRC no
/// longer verifies; its header and length are intact).
fn damage_batch_body(dir: &Path, position: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(format!("{:020}.log", 0)))
        .unwrap();
    let at = position + HEADER_LEN as u64 + 500;
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 0xff], at).unwrap();
}

#[test]
fn retention_by_bytes_with_large_batches_keeps_at_most_that_many_batch_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let batch = (HEADER_LEN + (0..100).map(|d| record_len(d, None, 100)).sum::<usize>()) as u64;
    assert!(
        batch > 8192,
        "a batch of {batch} B is not larger than the scan's chunk"
    );
    let cfg = LogConfig {
        segment_bytes: 64 * batch,
        retention: RetentionPolicy {
            bytes: Some(5 * batch + 3),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    for i in 0..30u64 {
        assert_eq!(append_large_batch(&mut log), i * 100);
        let kept = log.log_end_offset() - log.log_start_offset();
        assert_eq!(kept, (i + 1).min(5) * 100, "after batch {i}");
    }
    // Batches on disk at the open are verified where retention cuts; those appended since
    // are not (see `damaged_batches_appended_in_this_open_are_not_read_back_by_retention`).
    drop(log);
    let mut log = open(dir.path(), cfg);
    // The batch at the log start is stepped over at the next append: damage in its records
    // changes nothing, as it changes nothing for a scan that steps over it.
    damage_batch_body(dir.path(), 25 * batch);
    append_large_batch(&mut log);
    assert_eq!(log.log_start_offset(), 2_600);
    // The batch that would become the log start does not verify: the start moves past it,
    // to the first valid batch, and a read from there returns its records.
    damage_batch_body(dir.path(), 27 * batch);
    append_large_batch(&mut log);
    assert_eq!(log.log_start_offset(), 2_800);
    assert_eq!(read_all(&mut log, 0).len(), 400);
    for _ in 0..3 {
        append_large_batch(&mut log);
    }
    assert_eq!(log.log_start_offset(), 3_000);
    assert_eq!(read_all(&mut log, 0).len(), 500);
}

/// Bytes retention does not read back a batch this open appended to verify it (its CRC was
/// computed here): the cut falls where the headers say, damage or not, and the read of the
/// damaged batch reports it.
#[test]
fn damaged_batches_appended_in_this_open_are_not_read_back_by_retention() {
    let dir = tempfile::tempdir().unwrap();
    let batch = (HEADER_LEN + (0..100).map(|d| record_len(d, None, 100)).sum::<usize>()) as u64;
    let cfg = LogConfig {
        segment_bytes: 64 * batch,
        retention: RetentionPolicy {
            bytes: Some(5 * batch + 3),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    for _ in 0..10 {
        append_large_batch(&mut log);
    }
    damage_batch_body(dir.path(), 6 * batch);
    append_large_batch(&mut log);
    assert_eq!(log.log_start_offset(), 600, "the cut at the damaged batch");
    assert!(matches!(
        log.read(600, 1, 1 << 20),
        Err(StorageError::Corrupt { .. })
    ));
    append_large_batch(&mut log);
    assert_eq!(log.log_start_offset(), 700);
    // Damage in a batch found on disk by the next open is stepped over at the cut.
    log.close().unwrap();
    let mut log = open(dir.path(), cfg);
    damage_batch_body(dir.path(), 8 * batch);
    append_large_batch(&mut log);
    assert_eq!(
        log.log_start_offset(),
        900,
        "stepped over the damaged batch"
    );
    assert_eq!(read_all(&mut log, 0).len(), 400);
}

#[test]
fn retention_by_time_uses_the_injected_clock() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention: RetentionPolicy {
            ms: Some(1000),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    for i in 0..10u64 {
        log.append(
            &[AppendRecord {
                key: None,
                value: b"v",
            }],
            NOW + i * 100,
        )
        .unwrap();
    }
    // At NOW + 1450, records stamped before NOW + 450 (offsets 0..=4) are older than 1 s.
    log.enforce_retention(NOW + 1450).unwrap();
    assert_eq!(log.log_start_offset(), 5);
    log.enforce_retention(NOW + 10_000).unwrap();
    assert_eq!(log.log_start_offset(), 10);
    assert!(log.read(0, 10, 1 << 20).unwrap().is_empty());
    // Appends continue after everything expired.
    append_n_at(&mut log, 10, NOW + 10_000);
    assert_eq!(log.log_start_offset(), 10);
    assert_eq!(log.read(0, 10, 1 << 20).unwrap().len(), 1);
}

fn append_n_at(log: &mut PartitionLog, expect_offset: u64, now: u64) {
    let info = log
        .append(
            &[AppendRecord {
                key: None,
                value: b"late",
            }],
            now,
        )
        .unwrap();
    assert_eq!(info.base_offset, expect_offset);
}

#[test]
fn offsets_are_never_reused_after_everything_is_retained_away() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = LogConfig {
        retention: RetentionPolicy {
            records: Some(1),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let mut log = open(dir.path(), cfg);
    append_n(&mut log, 0, 400);
    log.close().unwrap();
    let mut log = open(dir.path(), cfg);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (399, 400));
    append_n(&mut log, 400, 1);
}
