//! The time index seen from the log: lookups by timestamp, time retention, and the index's
//! crash story. Client batches with CreateTime timestamps out of order are written straight
//! into the active segment (`append_client_batch`), as a Kafka produce would store them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::storage::batch::AppendRecord;
use crate::storage::checkpoint::CHECKPOINT_FILE;
use crate::storage::format::{self, put_varint, seal_native, Decoded, NativeSeal, HEADER_LEN};
use crate::storage::fs::FileSystem;
use crate::storage::segment::time_index_name;
use crate::storage::sim::SimFs;

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

/// Every record from the log start on, as `(offset, timestamp)`, read the ordinary way.
fn read_all(log: &mut PartitionLog) -> Vec<(u64, u64)> {
    let mut offset = log.log_start_offset();
    let mut records = Vec::new();
    while offset < log.log_end_offset() {
        let fetched = log.read(offset, usize::MAX, usize::MAX).unwrap();
        records.extend(fetched.iter().map(|r| (r.offset, r.timestamp_ms)));
        offset = fetched.next_offset();
    }
    records
}

/// What `offset_for_timestamp` must answer: the first record at or after the log start
/// with a timestamp of at least `timestamp_ms`.
fn first_at_or_after(records: &[(u64, u64)], from: u64, timestamp_ms: u64) -> Option<u64> {
    records
        .iter()
        .find(|&&(offset, timestamp)| offset >= from && timestamp >= timestamp_ms)
        .map(|&(offset, _)| offset)
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
fn offset_for_timestamp_finds_the_first_record_at_or_after_it_across_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    let records = fill_with_client_batches(&mut log, 300);
    assert!(log.segment_count() > 5, "{} segments", log.segment_count());
    assert_eq!(
        read_all(&mut log),
        records,
        "the batches read back as written"
    );
    let check = |log: &mut PartitionLog, from: u64| {
        for timestamp_ms in (9_000..45_000).step_by(37).chain([0, 10_000, u64::MAX]) {
            assert_eq!(
                log.offset_for_timestamp(timestamp_ms).unwrap(),
                first_at_or_after(&records, from, timestamp_ms),
                "timestamp {timestamp_ms}, log start {from}"
            );
        }
    };
    check(&mut log, 0);
    // A log start inside a batch: its earlier records are not answers any more.
    let start = records[records.len() / 3].0 + 1;
    log.config.retention.records = Some(log.log_end_offset() - start);
    log.enforce_retention(0).unwrap();
    assert_eq!(log.log_start_offset(), start);
    check(&mut log, start);
    // The same answers from indexes trusted after a clean shutdown, and from rebuilt ones.
    log.close().unwrap();
    let (mut log, report) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    assert!(report.clean_shutdown && report.segments_scanned == 0);
    check(&mut log, start);
    drop(log);
    std::fs::remove_file(dir.path().join(CHECKPOINT_FILE)).unwrap();
    let (mut log, report) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    assert_eq!(report.segments_scanned, log.segment_count());
    check(&mut log, start);
}

#[test]
fn offset_for_timestamp_finds_a_record_inside_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    append_client_batch(&mut log, &[100, 900, 200], 10);
    append_client_batch(&mut log, &[500, 300, 700, 400], 10);
    let lookup = |log: &mut PartitionLog, timestamp_ms| log.offset_for_timestamp(timestamp_ms);
    assert_eq!(lookup(&mut log, 0).unwrap(), Some(0));
    assert_eq!(lookup(&mut log, 150).unwrap(), Some(1));
    assert_eq!(lookup(&mut log, 900).unwrap(), Some(1));
    assert_eq!(lookup(&mut log, 901).unwrap(), None);
    // From the third record on: only the second batch has a record at 300 or later.
    log.config.retention.records = Some(5);
    log.enforce_retention(0).unwrap();
    assert_eq!(lookup(&mut log, 300).unwrap(), Some(3));
    assert_eq!(lookup(&mut log, 600).unwrap(), Some(5));
    assert_eq!(lookup(&mut log, 800).unwrap(), None);
}

#[test]
fn offset_for_timestamp_steps_over_a_damaged_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    for i in 0..12 {
        append_client_batch(&mut log, &[1_000 * (i + 1), 1_000 * (i + 1) + 1], 500);
    }
    let batch_len = log.size_bytes() / 12;
    log.close().unwrap();
    // A flipped byte in the records of the third batch (offsets 4 and 5, 3000 and 3001 ms),
    // far from the tail that a clean open checks.
    let path = dir.path().join(crate::storage::segment::file_names(0).0);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(2 * batch_len) as usize + HEADER_LEN + 20] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    let (mut log, report) = PartitionLog::open(dir.path(), LogConfig::default(), 0).unwrap();
    assert!(report.clean_shutdown);
    assert_eq!(log.offset_for_timestamp(2_500).unwrap(), Some(6));
    assert_eq!(log.offset_for_timestamp(2_002).unwrap(), Some(6));
    assert_eq!(log.offset_for_timestamp(2_001).unwrap(), Some(3));
    assert_eq!(log.offset_for_timestamp(2_000).unwrap(), Some(2));
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

/// Native appends of 1 to 4 records, three batches per millisecond step: the stamps the
/// log gives, which never go back.
fn fill_with_native_batches(log: &mut PartitionLog, batches: u64) {
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let value = [1u8; 400];
    for i in 0..batches {
        let count = 1 + spread(&mut seed, 4) as usize;
        log.append(
            &vec![
                AppendRecord {
                    key: None,
                    value: &value
                };
                count
            ],
            1_000 + i / 3 * 10,
        )
        .unwrap();
    }
}

#[test]
fn time_retention_keeps_what_a_scan_of_every_batch_kept_on_native_appends() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    fill_with_native_batches(&mut log, 240);
    assert!(log.segment_count() > 5);
    let records = read_all(&mut log);
    let log_end = log.log_end_offset();
    for from in [0, 1, records[records.len() / 2].0, log_end - 1] {
        for cutoff in (900..1_900).step_by(5) {
            // What the scan from `from` found: native records carry their batch's stamp.
            let expected = first_at_or_after(&records, from, cutoff).unwrap_or(log_end);
            log.start_timestamp = None;
            let found = log.first_offset_not_before(cutoff, from).unwrap();
            assert_eq!(found, expected, "cutoff {cutoff} from {from}");
            // And again from the cache of the log start's timestamp.
            assert_eq!(log.first_offset_not_before(cutoff, from).unwrap(), expected);
        }
    }
}

#[test]
fn time_retention_deletes_whole_old_segments_without_reading_them() {
    let sim = SimFs::new(5);
    let fs: SharedFs = Arc::new(sim.clone());
    let dir = Path::new("/data/t_0");
    let config = LogConfig {
        retention: RetentionPolicy {
            ms: Some(1_000),
            ..RetentionPolicy::default()
        },
        ..small_segments()
    };
    let (mut log, _) = PartitionLog::open_with(&fs, dir, config, 0).unwrap();
    fill_with_native_batches(&mut log, 240);
    let bases: Vec<u64> = log.segments.keys().copied().collect();
    assert!(bases.len() > 5);
    let records = read_all(&mut log);
    let reads = |base: u64| {
        let (log_name, index_name) = crate::storage::segment::file_names(base);
        [log_name, index_name, time_index_name(base)].map(|name| sim.reads(&dir.join(name)))
    };
    let expire = |log: &mut PartitionLog, now_ms: u64| {
        let before: Vec<_> = bases.iter().map(|&b| reads(b)).collect();
        log.enforce_retention(now_ms).unwrap();
        let cutoff = now_ms - 1_000;
        let start = first_at_or_after(&records, 0, cutoff).unwrap();
        assert_eq!(log.log_start_offset(), start, "now {now_ms}");
        let kept = log.segments.keys().next().copied().unwrap();
        for (&base, before) in bases.iter().zip(before) {
            if base < kept {
                assert_eq!(reads(base), before, "expired segment {base} was read");
                let name = time_index_name(base);
                assert!(!sim.exists(&dir.join(name)), "deleted with its segment");
            }
        }
        kept
    };
    // Live: the first segments are expired by their largest timestamps alone.
    let middle_ms = records[records.len() / 2].1;
    assert!(expire(&mut log, middle_ms + 1_000) > bases[2]);
    log.close().unwrap();
    // After a clean shutdown, the largest timestamps of sealed segments come from their time
    // indexes (the open reads only their tails).
    let (mut log, _) = PartitionLog::open_with(&fs, dir, config, 0).unwrap();
    let later_ms = records[records.len() * 3 / 4].1;
    assert!(expire(&mut log, later_ms + 1_000) > bases[4]);
}

/// A log with retention by time, whose records' CreateTimes go back across a roll: a fresh
/// record in segment 0, then one two hours older in segment 1 (a backfill, a mirror keeping
/// its source's timestamps, a producer with a skewed clock).
fn fresh_then_old_across_segments(dir: &Path, now_ms: u64) -> PartitionLog {
    const HOUR_MS: u64 = 3_600_000;
    let config = LogConfig {
        retention: RetentionPolicy {
            ms: Some(HOUR_MS),
            ..RetentionPolicy::default()
        },
        ..small_segments()
    };
    let (mut log, _) = PartitionLog::open(dir, config, now_ms).unwrap();
    append_client_batch(&mut log, &[now_ms], 100);
    log.roll().unwrap();
    append_client_batch(&mut log, &[now_ms - 2 * HOUR_MS], 100);
    log.enforce_retention(now_ms).unwrap();
    log
}

#[test]
fn time_retention_after_a_reopen_keeps_a_segment_whose_largest_timestamp_is_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let now_ms = 1_700_000_000_000;
    let log = fresh_then_old_across_segments(dir.path(), now_ms);
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 2));
    let config = log.config;
    log.close().unwrap();
    // The newest segment holds the older record: the log's largest timestamp is segment 0's.
    let (mut log, _) = PartitionLog::open(dir.path(), config, now_ms).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 2));
    assert_eq!(
        read_all(&mut log),
        vec![(0, now_ms), (1, now_ms - 7_200_000)]
    );
}

/// What Kafka's "max timestamp" ListOffsets must answer: the first record from `log_start`
/// on with the largest timestamp among them.
fn first_with_max_timestamp(records: &[(u64, u64)], log_start: u64) -> Option<(u64, u64)> {
    let kept = records.iter().filter(|&&(offset, _)| offset >= log_start);
    let max = kept.clone().map(|&(_, timestamp)| timestamp).max()?;
    kept.copied().find(|&(_, timestamp)| timestamp == max)
}

#[test]
fn the_max_timestamp_record_is_the_largest_of_every_segment_after_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let now_ms = 1_700_000_000_000;
    let minute_ms = 60_000;
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), now_ms).unwrap();
    assert_eq!(log.record_with_max_timestamp().unwrap(), None);
    for (i, minutes) in [10, 20, 5].into_iter().enumerate() {
        if i > 0 {
            log.roll().unwrap();
        }
        append_client_batch(&mut log, &[now_ms + minutes * minute_ms], 100);
    }
    let expected = Some((1, now_ms + 20 * minute_ms));
    assert_eq!(log.record_with_max_timestamp().unwrap(), expected);
    log.close().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), now_ms).unwrap();
    assert_eq!(log.record_with_max_timestamp().unwrap(), expected);
}

#[test]
fn the_max_timestamp_record_is_the_largest_of_those_retention_left() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), small_segments(), 0).unwrap();
    let records = fill_with_client_batches(&mut log, 200);
    assert!(log.segment_count() > 5);
    let log_end = log.log_end_offset();
    // The log start moves forward by records retention, to offsets inside segments and
    // inside batches alike, and the answer is checked live and after a reopen.
    for keep in [log_end, log_end - 1, log_end * 3 / 4, log_end / 2, 7, 3, 1] {
        log.config.retention.records = Some(keep);
        log.enforce_retention(0).unwrap();
        let start = log.log_start_offset();
        assert_eq!(start, log_end - keep);
        let expected = first_with_max_timestamp(&records, start);
        assert_eq!(
            log.record_with_max_timestamp().unwrap(),
            expected,
            "from {start}"
        );
        let config = log.config;
        log.close().unwrap();
        log = PartitionLog::open(dir.path(), config, 0).unwrap().0;
        assert_eq!(
            log.record_with_max_timestamp().unwrap(),
            expected,
            "reopened, from {start}"
        );
    }
}
