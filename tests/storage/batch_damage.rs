//! Damage to batches of several records. A batch verifies (its CRC covers every record) or
//! fails as a whole: one flipped byte makes every offset the batch holds unreadable, as
//! `StorageError::Corrupt`, and leaves the batches around it readable.

use crate::common::{batches, segment_files};

use std::fs;
use std::path::{Path, PathBuf};

use nanokafka::internals::storage::recovery::RecoveryReport;
use nanokafka::internals::storage::{AppendRecord, LogConfig, PartitionLog, StorageError};
use nanokafka::FsyncPolicy;

const NOW: u64 = 1_700_000_000_000;

fn value(i: u64) -> Vec<u8> {
    format!("value-{i:06}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// Appends records `range` as one batch.
fn append_batch(log: &mut PartitionLog, range: std::ops::Range<u64>) {
    let values: Vec<Vec<u8>> = range.clone().map(value).collect();
    let records: Vec<AppendRecord<'_>> = values
        .iter()
        .map(|v| AppendRecord {
            key: None,
            value: v,
        })
        .collect();
    let info = log.append(&records, NOW).unwrap();
    assert_eq!(
        (info.base_offset, info.count),
        (range.start, values.len() as u64)
    );
}

/// Records `from..` as read, in as many reads as it takes.
fn read_from(log: &mut PartitionLog, mut from: u64) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    loop {
        let fetched = log.read(from, 7, 1 << 20).unwrap();
        if fetched.is_empty() {
            return out;
        }
        out.extend(fetched.iter().map(|r| (r.offset, r.value.to_vec())));
        from = fetched.next_offset();
    }
}

fn expected(range: std::ops::Range<u64>) -> Vec<(u64, Vec<u8>)> {
    range.map(|i| (i, value(i))).collect()
}

fn flip_byte(path: &Path, position: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[position as usize] ^= 0x5a;
    fs::write(path, bytes).unwrap();
}

fn assert_corrupt_at(log: &mut PartitionLog, offset: u64, path: &Path, position: u64) {
    match log.read(offset, 1, 1 << 20) {
        Err(StorageError::Corrupt {
            path: p,
            position: at,
            ..
        }) => assert_eq!((p.as_path(), at), (path, position), "read of {offset}"),
        other => panic!("read of {offset}: expected Corrupt, got {other:?}"),
    }
}

/// `(position, first damaged offset, offset recovery resumed at)` of kept damage.
fn kept(report: &RecoveryReport) -> Vec<(u64, u64, Option<u64>)> {
    report
        .corrupt_kept
        .iter()
        .map(|d| (d.position, d.first_offset, d.resumed_at))
        .collect()
}

#[test]
fn a_flipped_byte_in_a_batch_of_ten_makes_all_ten_offsets_corrupt_and_no_other() {
    // Found by a read after a clean open (the index is kept), and by recovery (the index is
    // deleted, so the open scans the segment and keeps the damage it finds).
    for rebuild_index in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::default();
        let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap().0;
        for from in (0..100).step_by(10) {
            append_batch(&mut log, from..from + 10);
        }
        log.close().unwrap();
        let segment = segment_files(dir.path()).remove(0);
        let (position, header) = batches(&segment)[3];
        assert_eq!((header.base_offset, header.records_count), (30, 10));
        // The last record's last value byte: the first nine records are intact bytes.
        flip_byte(&segment, position + header.batch_len as u64 - 2);
        if rebuild_index {
            fs::remove_file(segment.with_extension("index")).unwrap();
        }

        let (mut log, report) = PartitionLog::open(dir.path(), config, NOW).unwrap();
        let found = if rebuild_index {
            vec![(position, 30, Some(40))]
        } else {
            vec![]
        };
        assert_eq!(kept(&report), found, "{report:?}");
        assert!(report.truncations.is_empty(), "{report:?}");
        assert_eq!(log.log_end_offset(), 100);
        for offset in 30..40 {
            assert_corrupt_at(&mut log, offset, &segment, position);
        }
        // A read from before the batch returns the records up to it and stops there.
        let fetched = log.read(25, 100, 1 << 20).unwrap();
        let got: Vec<_> = fetched
            .iter()
            .map(|r| (r.offset, r.value.to_vec()))
            .collect();
        assert_eq!(got, expected(25..30));
        assert_eq!(fetched.next_offset(), 30);
        assert_eq!(log.read(0, 1000, 1 << 20).unwrap().next_offset(), 30);
        // Reads after it step over the damage, from any offset of the next batch on.
        assert_eq!(read_from(&mut log, 40), expected(40..100));
        assert_eq!(read_from(&mut log, 45), expected(45..100));
    }
}

#[test]
fn a_damaged_last_batch_below_the_recovery_point_keeps_every_offset_it_held() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        fsync: FsyncPolicy::Always,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap().0;
    append_batch(&mut log, 0..1);
    // About 38 bytes a record: far more records than batch headers fit in the batch's bytes.
    append_batch(&mut log, 1..1001);
    log.close().unwrap();
    let segment = segment_files(dir.path()).remove(0);
    let (position, header) = batches(&segment)[1];
    flip_byte(&segment, position + header.batch_len as u64 - 2);

    // Nothing valid follows the damage; every offset below the recovery point (1001, the log
    // end at the clean shutdown) was acknowledged and must not be handed out again.
    let (mut log, report) = PartitionLog::open(dir.path(), config, NOW).unwrap();
    assert_eq!(kept(&report), vec![(position, 1, None)], "{report:?}");
    assert_eq!(log.log_end_offset(), 1001);
    assert_corrupt_at(&mut log, 1000, &segment, position);
    append_batch(&mut log, 1001..1003);
    assert_eq!(read_from(&mut log, 1001), expected(1001..1003));
    assert_eq!(log.read(0, 100, 1 << 20).unwrap().next_offset(), 1);
}

#[test]
fn a_flipped_base_offset_damages_that_batch_alone_and_cuts_nothing() {
    // The base offset is outside the CRC: the batch still verifies, at offset 1509949940 (a
    // high byte flipped) or 430 (the low byte flipped) where 500 was expected.
    for flip_at in [4, 7] {
        let dir = tempfile::tempdir().unwrap();
        let config = LogConfig::default();
        let mut log = PartitionLog::open(dir.path(), config, NOW).unwrap().0;
        for offset in 0..1000 {
            append_batch(&mut log, offset..offset + 1);
        }
        log.close().unwrap();
        let segment = segment_files(dir.path()).remove(0);
        let (position, _) = batches(&segment)[500];
        flip_byte(&segment, position + flip_at);
        fs::remove_file(segment.with_extension("index")).unwrap(); // the open scans

        let (mut log, report) = PartitionLog::open(dir.path(), config, NOW).unwrap();
        assert!(report.truncations.is_empty(), "{report:?}");
        assert_eq!(kept(&report), vec![(position, 500, Some(501))]);
        assert_eq!(log.log_end_offset(), 1000);
        assert_corrupt_at(&mut log, 500, &segment, position);
        assert_eq!(read_from(&mut log, 501), expected(501..1000));
    }
}

/// A log of 1,000 one-record batches in 64 KiB segments, closed: its first segment (sealed)
/// and the position of the batch at offset 500 in it.
fn sealed_segment_of_1000_batches(dir: &Path) -> (LogConfig, PathBuf, u64) {
    let config = LogConfig {
        segment_bytes: 64 << 10,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir, config, NOW).unwrap().0;
    for offset in 0..1000 {
        append_batch(&mut log, offset..offset + 1);
    }
    log.close().unwrap();
    let segments = segment_files(dir);
    assert!(segments.len() > 1, "the batch is in a sealed segment");
    let segment = segments[0].clone();
    assert!(
        batches(&segment).len() > 600,
        "offset 600 is still in the first segment"
    );
    let (position, _) = batches(&segment)[500];
    (config, segment, position)
}

/// Reopens the log (scanning the segment: its index is removed) and checks that the batch
/// at offset 500 is damage alone: reported, unreadable, the records after it served.
fn assert_batch_500_is_damage(dir: &Path, config: LogConfig, segment: &Path, position: u64) {
    fs::remove_file(segment.with_extension("index")).unwrap(); // the open scans
    let (mut log, report) = PartitionLog::open(dir, config, NOW).unwrap();
    assert!(report.truncations.is_empty(), "{report:?}");
    assert_eq!(kept(&report), vec![(position, 500, Some(501))]);
    assert_corrupt_at(&mut log, 500, segment, position);
    assert_eq!(read_from(&mut log, 501), expected(501..1000));
}

/// In a sealed segment a batch may start past the offset expected (the log cleaner removes
/// whole batches), but never past the next segment's base: a base offset damaged that far
/// is damage, as in the active segment.
#[test]
fn a_base_offset_flipped_past_the_next_segment_in_a_sealed_segment_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (config, segment, position) = sealed_segment_of_1000_batches(dir.path());
    flip_byte(&segment, position + 4);
    assert_batch_500_is_damage(dir.path(), config, &segment, position);
}

/// In a sealed segment of a log the cleaner never cleaned, a batch that starts past the
/// offset expected, still within the segment's offsets, is damage (its base offset, outside
/// the CRC, was changed), as in the active segment: only a cleaned log's sealed segments may
/// hold gaps (`cleaner.marker`).
#[test]
fn a_base_offset_moved_forward_within_a_sealed_segment_of_a_log_never_cleaned_is_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (config, segment, position) = sealed_segment_of_1000_batches(dir.path());
    let mut bytes = fs::read(&segment).unwrap();
    bytes[position as usize..position as usize + 8].copy_from_slice(&600i64.to_be_bytes());
    fs::write(&segment, bytes).unwrap();
    assert_batch_500_is_damage(dir.path(), config, &segment, position);
}
