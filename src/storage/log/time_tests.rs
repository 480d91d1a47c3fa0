//! The time index seen from the log: its crash story. Client batches with CreateTime timestamps out of order are written straight
//! into the active segment (`append_client_batch`), as a Kafka produce would store them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::*;
use crate::storage::batch::AppendRecord;
use crate::storage::checkpoint::CHECKPOINT_FILE;
use crate::storage::format::{self, put_varint, seal_native, Decoded, NativeSeal, HEADER_LEN};
use crate::storage::segment::time_index_name;

/// A CreateTime batch as a Kafka client writes it: one record per timestamp (deltas from the
/// first), `value_len` bytes of value each, the largest timestamp in the header.
fn client_batch(base_offset: u64, timestamps: &[u64], value_len: usize) -> Vec<u8> {
    let base_timestamp = timestamps[0] as i64;
    let mut batch = vec![0u8; HEADER_LEN];
    for (i, &timestamp) in timestamps.iter().enumerate() {
        let mut body = vec![0u8]; // attributes
        put_varint(&mut body, timestamp as i64 - base_timestamp);
        put_varint(&mut body, i as i64); // offset delta
        put_varint(&mut body, -1); // no key
        put_varint(&mut body, value_len as i64);
        body.extend(vec![i as u8; value_len]);
        put_varint(&mut body, 0); // no headers
        put_varint(&mut batch, body.len() as i64);
        batch.extend_from_slice(&body);
    }
    seal_native(
        &mut batch,
        NativeSeal {
            base_offset,
            records_count: timestamps.len() as u32,
            timestamp_ms: base_timestamp,
            timestamp_type: TimestampType::CreateTime,
        },
    );
    let max_timestamp = *timestamps.iter().max().expect("a record") as i64;
    batch[35..43].copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    assert!(matches!(format::decode(&batch), Decoded::Batch(_)));
    batch
}

/// Stores a client batch at the log end, rolling first as an append would.
fn append_client_batch(log: &mut PartitionLog, timestamps: &[u64], value_len: usize) {
    let base = log.log_end_offset();
    let batch = client_batch(base, timestamps, value_len);
    let active = log.active();
    if active.size() > 0 && active.size() + batch.len() as u64 > log.config.segment_bytes {
        log.roll().unwrap();
    }
    let max = *timestamps.iter().max().unwrap();
    let next = base + timestamps.len() as u64;
    log.active_mut().append(&batch, next, max).unwrap();
    log.last_timestamp_ms = log.last_timestamp_ms.max(max);
}

/// Small segments, several offset index entries (one per 4 KiB) each.
fn small_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 16 << 10,
        ..LogConfig::default()
    }
}

/// A deterministic spread of numbers (xorshift), so that the tests need no RNG crate.
fn spread(seed: &mut u64, below: u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed % below
}

/// Client batches of 1 to 4 records, timestamps jumping back and forth around a rising
/// trend (CreateTime: producers' clocks differ). Returns each record's `(offset, timestamp)`.
fn fill_with_client_batches(log: &mut PartitionLog, batches: usize) -> Vec<(u64, u64)> {
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let mut records = Vec::new();
    for i in 0..batches as u64 {
        let count = 1 + spread(&mut seed, 4);
        let timestamps: Vec<u64> = (0..count)
            .map(|_| 10_000 + i * 100 + spread(&mut seed, 3_000))
            .collect();
        let base = log.log_end_offset();
        records.extend((base..).zip(timestamps.iter().copied()));
        append_client_batch(log, &timestamps, 300);
    }
    records
}

fn time_index_entries(path: &Path) -> Vec<(i64, u32)> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(12)
        .map(|e| {
            (
                i64::from_be_bytes(e[0..8].try_into().unwrap()),
                u32::from_be_bytes(e[8..12].try_into().unwrap()),
            )
        })
        .collect()
}

fn time_indexes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "timeindex"))
        .map(|p| {
            let bytes = std::fs::read(&p).unwrap();
            (p, bytes)
        })
        .collect()
}

#[test]
fn the_time_index_rebuilt_after_a_crash_equals_the_one_written_live() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    fill_with_client_batches(&mut log, 120);
    for now in 50_000..50_040 {
        let value = [7u8; 200];
        log.append(
            &[AppendRecord {
                key: None,
                value: &value,
            }; 3],
            now,
        )
        .unwrap();
    }
    let live = time_indexes(dir.path());
    assert_eq!(live.len(), log.segment_count());
    let entries: usize = live.values().map(|bytes| bytes.len() / 12).sum();
    assert!(entries >= 2 * live.len(), "{entries} entries");
    // A crash (no close), then an open that trusts nothing: every index is rebuilt.
    drop(log);
    std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap();
    let (log, report) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    assert_eq!(report.segments_scanned, log.segment_count());
    assert_eq!(time_indexes(dir.path()), live);
}

#[test]
fn a_sealed_segment_ends_its_time_index_with_its_largest_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    // The largest timestamp in the third batch, then a segment's worth of older ones: the
    // tail a clean open scans does not hold it.
    for i in 0..15u64 {
        let timestamp = if i == 2 { 90_000 } else { 1_000 + i };
        append_client_batch(&mut log, &[timestamp], 1_000);
    }
    // Another segment whose last batch has its largest timestamp: only the entry added at
    // the roll records it.
    let second = log.log_end_offset();
    for i in 0..15u64 {
        append_client_batch(&mut log, &[2_000 + i], 1_000);
    }
    let last_offset = log.log_end_offset() - 1;
    append_client_batch(&mut log, &[5_000], 1_000);
    assert_eq!(log.segment_count(), 3);
    let entries = time_index_entries(&dir.path().join(time_index_name(0)));
    assert_eq!(entries.last(), Some(&(90_000, 2)), "{entries:?}");
    let entries = time_index_entries(&dir.path().join(time_index_name(second)));
    assert_eq!(
        entries.last(),
        Some(&(2_014, (last_offset - second) as u32)),
        "{entries:?}"
    );
    log.close().unwrap();
    let (log, report) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    assert_eq!(report.segments_scanned, 0);
    let largest: Vec<_> = log
        .segments
        .values()
        .map(|s| s.last_timestamp_ms())
        .collect();
    assert_eq!(largest, [Some(90_000), Some(2_014), Some(5_000)]);
}

#[test]
fn a_time_index_that_does_not_check_out_or_is_missing_is_rebuilt() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    fill_with_client_batches(&mut log, 100);
    log.close().unwrap();
    let live = time_indexes(dir.path());
    let bases: Vec<u64> = log_bases(dir.path());
    // An entry past the first segment's last record; the second segment's index gone.
    let first = dir.path().join(time_index_name(bases[0]));
    let mut bytes = std::fs::read(&first).unwrap();
    bytes.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]);
    std::fs::write(&first, bytes).unwrap();
    std::fs::remove_file(dir.path().join(time_index_name(bases[1]))).unwrap();
    let (_log, report) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    assert!(report.clean_shutdown);
    assert_eq!(report.segments_scanned, 2, "{report:?}");
    assert_eq!(time_indexes(dir.path()), live);
}

#[test]
fn an_orphan_time_index_is_removed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let orphan = dir.path().join(time_index_name(42));
    std::fs::write(&orphan, [0u8; 12]).unwrap();
    let (_log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert_eq!(
        report.leftovers_removed,
        [dir.path().join(time_index_name(42))]
    );
    assert!(!orphan.exists());
}

fn log_bases(dir: &Path) -> Vec<u64> {
    let mut bases: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".log")?.parse().ok()
        })
        .collect();
    bases.sort_unstable();
    bases
}
