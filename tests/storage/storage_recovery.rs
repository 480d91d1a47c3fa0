//! Reopen and corruption tests: a partition log is crashed (dropped without `close`) or
//! closed cleanly, its files are damaged by hand, and `PartitionLog::open` must report what
//! it found and did, and read back exactly the records that survive.

use crate::common::{self, base_of, batch_starts, batches, log_end, record_len, segment_files};

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use nanokafka::internals::storage::format::{self, HEADER_LEN};
use nanokafka::internals::storage::recovery::{Gap, RecoveryReport};
use nanokafka::internals::storage::{
    AppendRecord, LogConfig, OffsetStore, PartitionLog, RetentionPolicy, StorageError,
};
use nanokafka::{Error, FsyncPolicy, NanoKafka, ProduceRecord, TopicConfig};

const NOW: u64 = 1_700_000_000_000;
/// A byte of the batch length field (big-endian, bytes 8..12): flipped, the next batch is no
/// longer where the length says, and must be searched for.
const LENGTH_BYTE: u64 = 10;

/// Small segments: a few hundred records make a dozen of them, none with an index entry.
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        ..LogConfig::default()
    }
}

/// Segments of 32 KiB: each gets several index entries (one every 4 KiB of batches).
fn big_segments() -> LogConfig {
    LogConfig {
        segment_bytes: 32 << 10,
        ..LogConfig::default()
    }
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i:06}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

fn expected(range: impl IntoIterator<Item = u64>) -> Vec<(u64, Vec<u8>)> {
    range.into_iter().map(|i| (i, value(i))).collect()
}

fn reopen(dir: &Path, config: LogConfig) -> (PartitionLog, RecoveryReport) {
    PartitionLog::open(dir, config, NOW).unwrap()
}

/// A log in a fresh directory holding records `0..n`.
fn log_with(n: u64, config: LogConfig) -> (tempfile::TempDir, PartitionLog) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = reopen(dir.path(), config).0;
    append_n(&mut log, 0, n);
    (dir, log)
}

fn append_n(log: &mut PartitionLog, from: u64, n: u64) {
    for i in from..from + n {
        let v = value(i);
        let record = AppendRecord {
            key: None,
            value: &v,
        };
        assert_eq!(log.append(&[record], NOW).unwrap().base_offset, i);
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

/// The offset of the first record `read(offset, 1, ..)` returns.
fn first_read(log: &mut PartitionLog, offset: u64) -> u64 {
    log.read(offset, 1, 1 << 20)
        .unwrap()
        .iter()
        .next()
        .unwrap()
        .offset
}

fn index_of(segment: &Path) -> PathBuf {
    segment.with_extension("index")
}

/// A byte in the records of the batch that starts at `start`: under its CRC, with its length
/// field intact (so the next batch is where the length says).
fn in_records(start: u64) -> u64 {
    start + HEADER_LEN as u64 + 2
}

/// `(offset, position)` entries of an index file.
fn index_entries(index: &Path, base: u64) -> Vec<(u64, u64)> {
    fs::read(index)
        .unwrap()
        .chunks(8)
        .map(|e| {
            let rel = u32::from_le_bytes(e[0..4].try_into().unwrap());
            let pos = u32::from_le_bytes(e[4..8].try_into().unwrap());
            (base + u64::from(rel), u64::from(pos))
        })
        .collect()
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
}

fn cut(path: &Path, len: u64) {
    OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}

fn flip_byte(path: &Path, position: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[position as usize] ^= 0x5a;
    fs::write(path, bytes).unwrap();
}

/// Inserts `bytes` into the file at `position`: everything after it moves on.
fn insert_bytes(path: &Path, position: u64, bytes: &[u8]) {
    let mut content = fs::read(path).unwrap();
    let at = position as usize;
    content.splice(at..at, bytes.iter().copied());
    fs::write(path, content).unwrap();
}

/// Two bytes inserted into the base offset of the batch at `start` (big-endian, bytes 0..8;
/// the base offset lies outside the CRC): the batch then verifies two bytes on, and its base
/// offset reads `0x555d_0000 + offset`, an offset nothing ever held.
fn damage_base_offset(path: &Path, start: u64) {
    insert_bytes(path, start + 6, &[0x55, 0x5d]);
}

/// Every offset of `0..end` read one at a time: its record, or `None` where the read is
/// `Corrupt`.
fn read_each(log: &mut PartitionLog, end: u64) -> Vec<(u64, Option<Vec<u8>>)> {
    (0..end)
        .map(|offset| match log.read(offset, 1, 1 << 20) {
            Ok(fetched) => {
                let record = fetched.iter().next().expect("a record");
                assert_eq!(record.offset, offset);
                (offset, Some(record.value.to_vec()))
            }
            Err(StorageError::Corrupt { .. }) => (offset, None),
            Err(e) => panic!("read of {offset}: {e}"),
        })
        .collect()
}

/// What [`read_each`] returns for `range` when only `bad` is damaged.
fn expected_but(range: std::ops::Range<u64>, bad: u64) -> Vec<(u64, Option<Vec<u8>>)> {
    expected(range)
        .into_iter()
        .map(|(o, v)| (o, (o != bad).then_some(v)))
        .collect()
}

fn len_of(path: &Path) -> u64 {
    fs::metadata(path).unwrap().len()
}

/// Asserts one truncation of `path` to `position` cutting `bytes_cut` bytes.
fn assert_cut(report: &RecoveryReport, path: &Path, position: u64, bytes_cut: u64) {
    let cuts: Vec<_> = report
        .truncations
        .iter()
        .map(|t| (t.path.as_path(), t.position, t.bytes_cut))
        .collect();
    assert_eq!(cuts, vec![(path, position, bytes_cut)], "{report:?}");
}

#[test]
fn garbage_after_the_active_tail_is_cut_at_the_old_end_and_appends_continue() {
    // A batch header with the next offset, a length that fits and magic 2: only its CRC fails.
    let header = |length: i32| {
        let mut bytes = 300i64.to_be_bytes().to_vec();
        bytes.extend(length.to_be_bytes());
        bytes.extend([0, 0, 0, 0, format::MAGIC]);
        bytes
    };
    let mut plausible_length = header(HEADER_LEN as i32 - 12 + 40);
    plausible_length.extend([0xab; HEADER_LEN - 17 + 40]);
    let mut torn = header(500); // promises more bytes than the file has
    torn.extend([7; 20]);
    let garbages = [
        b"not a batch at all, just noise".to_vec(),
        plausible_length,
        torn,
        vec![0xff; 3],
    ];
    for garbage in garbages {
        let (dir, log) = log_with(300, config());
        drop(log); // a crash: no clean-shutdown marker
        let active = segment_files(dir.path()).pop().unwrap();
        let old_len = len_of(&active);
        append_bytes(&active, &garbage);

        let (mut log, report) = reopen(dir.path(), config());
        assert!(!report.clean_shutdown);
        assert_cut(&report, &active, old_len, garbage.len() as u64);
        assert!(report.indexes_rebuilt.contains(&index_of(&active)));
        assert_eq!(len_of(&active), old_len);
        assert_eq!(log.log_end_offset(), 300);
        append_n(&mut log, 300, 5);
        assert_eq!(read_all(&mut log, 0), expected(0..305));

        // The new records were written at the cut, not behind the garbage.
        drop(log);
        let (mut log, report) = reopen(dir.path(), config());
        assert!(report.truncations.is_empty(), "{report:?}");
        assert_eq!(read_all(&mut log, 295), expected(295..305));
    }
}

#[test]
fn a_torn_last_record_loses_only_that_record() {
    let last_len = (HEADER_LEN + record_len(0, None, value(299).len())) as u64;
    // In the length field, before and after the magic, in the CRC, the header, the record.
    for cut_into_batch in [1, 9, 12, 16, 17, 21, HEADER_LEN as u64, last_len - 1] {
        let (dir, log) = log_with(300, config());
        drop(log);
        let active = segment_files(dir.path()).pop().unwrap();
        let last_start = *batch_starts(&active).last().unwrap();
        assert_eq!(len_of(&active), last_start + last_len);
        cut(&active, last_start + cut_into_batch);

        let (mut log, report) = reopen(dir.path(), config());
        assert_cut(&report, &active, last_start, cut_into_batch);
        assert_eq!(log.log_end_offset(), 299, "cut {cut_into_batch} bytes in");
        assert_eq!(read_all(&mut log, 290), expected(290..299));
        append_n(&mut log, 299, 2);
        assert_eq!(read_all(&mut log, 297), expected(297..301));
    }
}

#[test]
fn zeros_after_the_tail_are_cut() {
    let (dir, log) = log_with(300, config());
    drop(log);
    let active = segment_files(dir.path()).pop().unwrap();
    let old_len = len_of(&active);
    // What ext4 can leave after a power loss: the size grew but the data never landed.
    append_bytes(&active, &[0; 4096]);

    let (mut log, report) = reopen(dir.path(), config());
    assert_cut(&report, &active, old_len, 4096);
    assert_eq!(log.log_end_offset(), 300);
    assert_eq!(read_all(&mut log, 0), expected(0..300));
}

#[test]
fn a_flipped_byte_in_the_active_segment_after_a_crash_truncates_at_that_record() {
    let (dir, log) = log_with(300, config());
    drop(log);
    let active = segment_files(dir.path()).pop().unwrap();
    let base = base_of(&active);
    let starts = batch_starts(&active);
    let bad = starts.len() / 2;
    let old_len = len_of(&active);
    flip_byte(&active, in_records(starts[bad]));

    let (mut log, report) = reopen(dir.path(), config());
    assert_cut(&report, &active, starts[bad], old_len - starts[bad]);
    let bad_offset = base + bad as u64;
    assert_eq!(log.log_end_offset(), bad_offset);
    assert_eq!(read_all(&mut log, 0), expected(0..bad_offset));
    append_n(&mut log, bad_offset, 3);
    assert_eq!(
        read_all(&mut log, bad_offset - 1),
        expected(bad_offset - 1..bad_offset + 3)
    );
}

#[test]
fn a_flipped_byte_in_a_sealed_segment_after_a_clean_shutdown_is_an_error_on_read() {
    let (dir, log) = log_with(1200, big_segments());
    log.close().unwrap();
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 3);
    let sealed = &segments[0];
    // A batch before the segment's last index entry: the open's tail check does not reach it.
    let (last_indexed, _) = *index_entries(&index_of(sealed), 0).last().unwrap();
    let bad = 10u64;
    assert!(bad < last_indexed);
    let position = batch_starts(sealed)[bad as usize];
    flip_byte(sealed, in_records(position));

    let (mut log, report) = reopen(dir.path(), big_segments());
    assert!(report.clean_shutdown);
    assert_eq!(report.segments_scanned, 0);
    assert!(report.truncations.is_empty());
    assert_eq!(log.log_end_offset(), 1200);
    // A read from before the bad record returns the records before it and stops there.
    let fetched = log.read(bad - 5, 100, 1 << 20).unwrap();
    let got: Vec<_> = fetched
        .iter()
        .map(|r| (r.offset, r.value.to_vec()))
        .collect();
    assert_eq!(got, expected(bad - 5..bad));
    assert_eq!(fetched.next_offset(), bad);
    // The bad record is an error naming it.
    assert_corrupt_at(&mut log, bad, sealed, position);
    let fetched = log.read(0, 1000, 1 << 20).unwrap();
    assert_eq!(fetched.next_offset(), bad);
    // A read of a later record steps over the damage (the index, not rebuilt, has no entry
    // after it before the next interval), as do reads in later segments.
    for offset in [bad + 1, bad + 2, last_indexed - 1, last_indexed] {
        assert_eq!(first_read(&mut log, offset), offset);
    }
    assert_eq!(read_all(&mut log, bad + 1), expected(bad + 1..1200));
}

#[test]
fn a_damaged_base_offset_in_the_active_segment_after_a_clean_shutdown_serves_no_record_elsewhere() {
    let (dir, log) = log_with(20, config());
    log.close().unwrap();
    let segments = segment_files(dir.path());
    assert_eq!(segments.len(), 1);
    let bad = 10u64;
    damage_base_offset(&segments[0], batch_starts(&segments[0])[bad as usize]);

    // The active segment changed after the clean shutdown, so it is validated: the frame
    // that verifies two bytes on claims an offset at or past the log end the shutdown
    // recorded, so it is damage like the rest, and the scan resumes at the next batch.
    let (mut log, report) = reopen(dir.path(), config());
    assert_eq!(report.segments_scanned, 1);
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(read_each(&mut log, 20), expected_but(0..20, bad));
    assert_eq!(read_all(&mut log, bad + 1), expected(bad + 1..20));
}

#[test]
fn a_damaged_base_offset_in_the_active_segment_after_a_crash_serves_no_record_elsewhere() {
    let (dir, log) = log_with(20, config());
    log.close().unwrap();
    let mut log = reopen(dir.path(), config()).0;
    append_n(&mut log, 20, 3);
    drop(log); // a crash: the recovery point (20) lies inside the active segment
    let segments = segment_files(dir.path());
    assert_eq!(segments.len(), 1);
    let bad = 10u64;
    let position = batch_starts(&segments[0])[bad as usize];
    damage_base_offset(&segments[0], position);

    // No log end bounds the active segment after a crash (it may hold appends past the
    // recovery point). The frame that verifies two bytes on claims an offset billions on,
    // which two bytes cannot hold the records for: damage like the rest, and the scan
    // resumes at the next batch.
    let (mut log, report) = reopen(dir.path(), config());
    assert!(!report.clean_shutdown);
    assert_eq!(
        kept(&report),
        vec![(segments[0].clone(), position, bad, Some(bad + 1))]
    );
    assert_eq!(log.log_end_offset(), 23);
    assert_eq!(read_each(&mut log, 23), expected_but(0..23, bad));
    assert_eq!(read_all(&mut log, bad + 1), expected(bad + 1..23));
}

#[test]
fn a_damaged_base_offset_in_a_sealed_segment_serves_no_record_elsewhere() {
    let (dir, log) = log_with(300, config());
    log.close().unwrap();
    let segments = segment_files(dir.path());
    assert!(segments.len() >= 3);
    let sealed = &segments[0];
    let next_base = base_of(&segments[1]);
    let bad = 10u64;
    assert!(bad + 1 < next_base);
    damage_base_offset(sealed, batch_starts(sealed)[bad as usize]);

    // Reads step over the damage to the next batch: the frame that verifies two bytes on
    // claims an offset at or past the next segment's base, which no offset of this segment
    // reaches.
    let (mut log, _) = reopen(dir.path(), config());
    assert_eq!(log.log_end_offset(), 300);
    assert_eq!(
        read_each(&mut log, next_base),
        expected_but(0..next_base, bad)
    );
    assert_eq!(read_all(&mut log, bad + 1), expected(bad + 1..300));
}

#[test]
fn a_flipped_byte_in_a_sealed_segments_tail_is_reported_and_kept_not_cut() {
    let (dir, log) = log_with(1200, big_segments());
    log.close().unwrap();
    let segments = segment_files(dir.path());
    let sealed = &segments[0];
    let sealed_len = len_of(sealed);
    let next_base = base_of(&segments[1]);
    // The last batch of the segment: inside the open's tail check.
    let bad = next_base - 1;
    let position = *batch_starts(sealed).last().unwrap();
    flip_byte(sealed, in_records(position));

    let (mut log, report) = reopen(dir.path(), big_segments());
    assert!(
        report.truncations.is_empty(),
        "a synced segment is never cut"
    );
    assert_eq!(report.corrupt_kept.len(), 1);
    assert_eq!(
        (
            report.corrupt_kept[0].path.as_path(),
            report.corrupt_kept[0].position
        ),
        (sealed.as_path(), position)
    );
    assert!(
        report.gaps.is_empty(),
        "the segment still ends where the next begins"
    );
    assert_eq!(len_of(sealed), sealed_len, "the damaged bytes stay on disk");
    assert_eq!(log.log_end_offset(), 1200);
    // Reads return the records before the damage, then refuse it.
    assert_eq!(log.read(0, 100_000, 1 << 20).unwrap().next_offset(), bad);
    assert!(matches!(
        log.read(bad, 1, 1 << 20),
        Err(StorageError::Corrupt { .. })
    ));
    assert_eq!(read_all(&mut log, next_base), expected(next_base..1200));
}

#[test]
fn a_deleted_index_is_rebuilt_identically() {
    for clean in [true, false] {
        let (dir, log) = log_with(1200, big_segments());
        if clean {
            log.close().unwrap();
        } else {
            drop(log);
        }
        let segments = segment_files(dir.path());
        let index = index_of(&segments[0]);
        let original = fs::read(&index).unwrap();
        assert!(original.len() >= 16, "want a few entries");
        fs::remove_file(&index).unwrap();

        let (mut log, report) = reopen(dir.path(), big_segments());
        assert!(report.indexes_rebuilt.contains(&index), "{report:?}");
        assert!(report.truncations.is_empty());
        assert_eq!(fs::read(&index).unwrap(), original);
        for offset in [0, 1, 57, 58, 59, 200, 400, 1199] {
            assert_eq!(first_read(&mut log, offset), offset);
        }
        assert_eq!(read_all(&mut log, 0), expected(0..1200));
    }
}

#[test]
fn a_short_index_after_a_clean_shutdown_is_rebuilt() {
    for keep in [0, 5, 8] {
        let (dir, log) = log_with(1200, big_segments());
        log.close().unwrap();
        let segments = segment_files(dir.path());
        let index = index_of(&segments[0]);
        let original = fs::read(&index).unwrap();
        cut(&index, keep);

        let (mut log, report) = reopen(dir.path(), big_segments());
        assert!(
            report.indexes_rebuilt.contains(&index),
            "kept {keep}: {report:?}"
        );
        assert_eq!(fs::read(&index).unwrap(), original);
        assert_eq!(read_all(&mut log, 0), expected(0..1200));
    }
}

#[test]
fn a_garbage_index_after_a_clean_shutdown_never_breaks_reads() {
    let (dir, log) = log_with(1200, big_segments());
    log.close().unwrap();
    let segment = segment_files(dir.path()).remove(0);
    let index = index_of(&segment);
    let original = fs::read(&index).unwrap();
    let entries = index_entries(&index, 0);
    assert!(entries.len() >= 4);

    // Noise everywhere: the last entry points nowhere, so the open rebuilds the index.
    let noise: Vec<u8> = (0..original.len()).map(|i| (i * 37 + 11) as u8).collect();
    fs::write(&index, noise).unwrap();
    let (mut log, report) = reopen(dir.path(), big_segments());
    assert!(report.indexes_rebuilt.contains(&index));
    assert_eq!(fs::read(&index).unwrap(), original);
    assert_eq!(read_all(&mut log, 0), expected(0..1200));
    log.close().unwrap();

    // One middle entry wrong, the last one intact: the open's tail check passes, so reads
    // meet the bad entry and must fall back to scanning the segment.
    let (offset, position) = entries[1];
    for bad_position in [position + 3, len_of(&segment) + 100, 0x00ff_ffff] {
        let mut bytes = original.clone();
        bytes[12..16].copy_from_slice(&(bad_position as u32).to_le_bytes());
        fs::write(&index, bytes).unwrap();
        let (mut log, report) = reopen(dir.path(), big_segments());
        assert!(report.clean_shutdown);
        for o in [offset, offset + 1, entries[2].0 - 1] {
            assert_eq!(first_read(&mut log, o), o, "bad position {bad_position}");
        }
        assert_eq!(read_all(&mut log, offset), expected(offset..1200));
        log.close().unwrap();
    }
}

#[test]
fn a_sealed_segment_deleted_in_the_middle_is_a_gap_that_reads_skip() {
    for clean in [true, false] {
        let (dir, log) = log_with(600, config());
        if clean {
            log.close().unwrap();
        } else {
            drop(log);
        }
        let segments = segment_files(dir.path());
        assert!(segments.len() > 6);
        let (from, to) = (base_of(&segments[3]), base_of(&segments[4]));
        fs::remove_file(&segments[3]).unwrap();
        fs::remove_file(index_of(&segments[3])).unwrap();

        let (mut log, report) = reopen(dir.path(), config());
        assert_eq!(report.gaps, vec![Gap { from, to }]);
        assert_eq!(report.clean_shutdown, clean);
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 600));
        assert_eq!(first_read(&mut log, from), to);
        assert_eq!(first_read(&mut log, to - 1), to);
        assert_eq!(first_read(&mut log, from - 1), from - 1);
        let present: Vec<u64> = (0..from).chain(to..600).collect();
        assert_eq!(read_all(&mut log, 0), expected(present));
        append_n(&mut log, 600, 1);
    }
}

#[test]
fn the_first_segment_deleted_moves_the_log_start_to_the_first_present_base() {
    let (dir, log) = log_with(600, config());
    log.close().unwrap();
    let segments = segment_files(dir.path());
    let second = base_of(&segments[1]);
    fs::remove_file(&segments[0]).unwrap(); // its indexes are now orphans

    let (mut log, report) = reopen(dir.path(), config());
    assert_eq!(
        report.leftovers_removed,
        vec![
            index_of(&segments[0]),
            segments[0].with_extension("timeindex")
        ]
    );
    assert!(report.gaps.is_empty());
    assert_eq!(log.log_start_offset(), second);
    assert_eq!(first_read(&mut log, 0), second);
    assert_eq!(read_all(&mut log, 0), expected(second..600));
    drop(log);
    assert_eq!(reopen(dir.path(), config()).0.log_start_offset(), second);
}

#[test]
fn a_deleted_or_corrupt_checkpoint_means_a_full_scan_and_nothing_lost() {
    for damage in ["delete", "flip", "shorten"] {
        let (dir, log) = log_with(600, config());
        log.close().unwrap();
        let checkpoint = dir.path().join("checkpoint");
        match damage {
            "delete" => fs::remove_file(&checkpoint).unwrap(),
            "flip" => flip_byte(&checkpoint, 9),
            _ => cut(&checkpoint, 20),
        }
        let (mut log, report) = reopen(dir.path(), config());
        assert!(!report.clean_shutdown, "{damage}");
        assert_eq!(report.segments_scanned, report.segments, "{damage}");
        assert!(report.segments > 6);
        assert!(report.truncations.is_empty());
        assert_eq!(read_all(&mut log, 0), expected(0..600));
    }
}

#[test]
fn a_corrupt_log_start_file_is_recomputed_exactly_from_retention() {
    let cfg = LogConfig {
        retention: RetentionPolicy {
            records: Some(100),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    for (damage, clean) in [("flip", true), ("flip", false), ("delete", false)] {
        let (dir, log) = log_with(500, cfg);
        assert_eq!(log.log_start_offset(), 400);
        if clean {
            log.close().unwrap();
        } else {
            drop(log);
        }
        // The start is not a segment base, so only retention can re-derive it.
        assert!(base_of(&segment_files(dir.path())[0]) < 400);
        let file = dir.path().join("log_start_offset");
        match damage {
            "flip" => flip_byte(&file, 1),
            _ => fs::remove_file(&file).unwrap(),
        }
        let mut log = reopen(dir.path(), cfg).0;
        assert_eq!(log.log_start_offset(), 400, "{damage}, clean: {clean}");
        assert_eq!(read_all(&mut log, 0), expected(400..500));
    }
}

#[test]
fn bytes_appended_after_a_clean_shutdown_are_validated_not_trusted() {
    let last_batch = |active: &Path| {
        let start = *batch_starts(active).last().unwrap() as usize;
        fs::read(active).unwrap()[start..].to_vec()
    };
    // Noise, and a valid batch copied again (its offsets repeat, so it must not be kept).
    for kind in ["noise", "repeated batch"] {
        let (dir, log) = log_with(300, config());
        log.close().unwrap();
        let active = segment_files(dir.path()).pop().unwrap();
        let old_len = len_of(&active);
        let extra = match kind {
            "noise" => b"appended by hand after the marker".to_vec(),
            _ => last_batch(&active),
        };
        append_bytes(&active, &extra);

        let (mut log, report) = reopen(dir.path(), config());
        assert!(!report.clean_shutdown, "{kind}");
        assert_eq!(
            report.segments_scanned, 1,
            "{kind}: only the active segment"
        );
        assert_cut(&report, &active, old_len, extra.len() as u64);
        assert_eq!(read_all(&mut log, 0), expected(0..300));
    }
}

#[test]
fn the_offset_store_cuts_a_garbage_tail_after_a_crash() {
    for garbage in [
        &b"\x05\x00\x00\x00noise"[..],
        &[0u8; 64][..],
        &[0xffu8; 2][..],
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        store.commit("g1", 10).unwrap();
        store.commit("g2", 20).unwrap();
        store.commit("g1", 11).unwrap();
        drop(store);
        let journal = dir.path().join("offsets.journal");
        let valid_len = len_of(&journal);
        append_bytes(&journal, garbage);

        let mut store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!((store.get("g1"), store.get("g2")), (Some(11), Some(20)));
        assert_eq!(len_of(&journal), valid_len);
        store.commit("g2", 21).unwrap();
        drop(store);
        // The new entry landed at the cut, so it replays.
        let store = OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
        assert_eq!((store.get("g1"), store.get("g2")), (Some(11), Some(21)));
    }
}

#[test]
fn a_segment_named_beyond_the_largest_offset_is_ignored_not_a_panic() {
    let (dir, log) = log_with(10, config());
    log.close().unwrap();
    std::fs::write(dir.path().join(format!("{}.log", u64::MAX)), b"garbage").unwrap();
    std::fs::write(
        dir.path().join(format!("{}.index", u64::MAX - 1)),
        [0xff; 8],
    )
    .unwrap();
    let (mut log, _) = reopen(dir.path(), config());
    assert_eq!(read_all(&mut log, 0), expected(0..10));
    append_n(&mut log, 10, 1);
}

fn always() -> LogConfig {
    LogConfig {
        fsync: FsyncPolicy::Always,
        ..LogConfig::default()
    }
}

/// Appends records `range` as one batch (one sync under `Always`), stamped `now_ms`.
fn append_batch(log: &mut PartitionLog, range: std::ops::Range<u64>, now_ms: u64) {
    let values: Vec<Vec<u8>> = range.clone().map(value).collect();
    let records: Vec<AppendRecord<'_>> = values
        .iter()
        .map(|v| AppendRecord {
            key: None,
            value: v,
        })
        .collect();
    assert_eq!(
        log.append(&records, now_ms).unwrap().base_offset,
        range.start
    );
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

/// `(path, position, first damaged offset, offset recovery resumed at)` of kept damage.
fn kept(report: &RecoveryReport) -> Vec<(PathBuf, u64, u64, Option<u64>)> {
    report
        .corrupt_kept
        .iter()
        .map(|d| (d.path.clone(), d.position, d.first_offset, d.resumed_at))
        .collect()
}

#[test]
fn damage_below_the_recovery_point_is_kept_reported_and_later_records_stay_readable() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = reopen(dir.path(), always()).0;
    append_batch(&mut log, 0..1, NOW);
    append_batch(&mut log, 1..1000, NOW);
    log.close().unwrap();
    let segment = segment_files(dir.path()).remove(0);
    flip_byte(&segment, in_records(0)); // record 0, alone in the first batch
                                        // The clean-shutdown marker spares the scan: the damage goes unnoticed here.
    let mut log = reopen(dir.path(), always()).0;
    append_batch(&mut log, 1000..1100, NOW); // acknowledged and synced
    drop(log); // a crash

    let (mut log, report) = reopen(dir.path(), always());
    assert!(report.truncations.is_empty(), "{report:?}");
    assert_eq!(kept(&report), vec![(segment.clone(), 0, 0, Some(1))]);
    assert_eq!(log.log_end_offset(), 1100);
    assert_corrupt_at(&mut log, 0, &segment, 0);
    assert_eq!(read_all(&mut log, 1), expected(1..1100));
    for offset in [1, 2, 500, 1099] {
        assert_eq!(first_read(&mut log, offset), offset);
    }
}

#[test]
fn damage_in_a_sealed_segment_leaves_the_records_after_it_readable() {
    // A flipped record byte (the batch's length still leads to the next batch) and a flipped
    // length byte (the next batch must be searched for).
    for (what, flip_at) in [("record", in_records(0)), ("length", LENGTH_BYTE)] {
        let (dir, log) = log_with(1200, big_segments());
        log.close().unwrap();
        let segments = segment_files(dir.path());
        let sealed = &segments[0];
        let next_base = base_of(&segments[1]);
        let bad = 10u64;
        let position = batch_starts(sealed)[bad as usize];
        flip_byte(sealed, position + flip_at);
        fs::remove_file(index_of(sealed)).unwrap(); // the open rebuilds the index

        let (mut log, report) = reopen(dir.path(), big_segments());
        assert!(report.truncations.is_empty(), "{what}: {report:?}");
        assert_eq!(
            kept(&report),
            vec![(sealed.clone(), position, bad, Some(bad + 1))],
            "{what}"
        );
        assert!(report.gaps.is_empty(), "{what}");
        assert_eq!(log.log_end_offset(), 1200);
        assert_eq!(log.read(0, 1000, 1 << 20).unwrap().next_offset(), bad);
        assert_corrupt_at(&mut log, bad, sealed, position);
        for offset in [bad + 1, bad + 2, next_base - 1] {
            assert_eq!(first_read(&mut log, offset), offset, "{what}");
        }
        assert_eq!(
            read_all(&mut log, bad + 1),
            expected(bad + 1..1200),
            "{what}"
        );
    }
}

#[test]
fn damage_at_the_end_of_the_active_segment_below_the_recovery_point_is_kept_and_appends_follow_it()
{
    let (dir, log) = log_with(300, big_segments());
    log.close().unwrap();
    let active = segment_files(dir.path()).pop().unwrap();
    assert_eq!(
        segment_files(dir.path()).len(),
        1,
        "appends must not roll here"
    );
    let old_len = len_of(&active);
    let last = *batch_starts(&active).last().unwrap();
    flip_byte(&active, in_records(last)); // the last record, synced before the shutdown

    let (mut log, report) = reopen(dir.path(), big_segments());
    assert!(report.truncations.is_empty(), "{report:?}");
    assert_eq!(kept(&report), vec![(active.clone(), last, 299, None)]);
    assert_eq!(len_of(&active), old_len, "the damaged bytes stay on disk");
    assert_eq!(
        log.log_end_offset(),
        300,
        "the recovery point is the log end"
    );
    assert_corrupt_at(&mut log, 299, &active, last);
    append_n(&mut log, 300, 3);
    assert_eq!(read_all(&mut log, 300), expected(300..303));
    drop(log);

    // After a crash the appends behind the damage are found again.
    let (mut log, report) = reopen(dir.path(), big_segments());
    assert!(report.truncations.is_empty(), "{report:?}");
    assert_eq!(kept(&report), vec![(active.clone(), last, 299, Some(300))]);
    assert_eq!(log.log_end_offset(), 303);
    assert_eq!(read_all(&mut log, 300), expected(300..303));
    assert_eq!(log.read(290, 100, 1 << 20).unwrap().next_offset(), 299);
}

#[test]
fn time_retention_steps_over_a_damaged_record_and_the_partition_opens() {
    let retention_ms = 5_000;
    let cfg = LogConfig {
        retention: RetentionPolicy {
            ms: Some(retention_ms),
            ..RetentionPolicy::default()
        },
        ..big_segments()
    };
    let dir = tempfile::tempdir().unwrap();
    let mut log = PartitionLog::open(dir.path(), cfg, NOW).unwrap().0;
    append_n(&mut log, 0, 600);
    append_batch(&mut log, 600..700, NOW + 1_000);
    log.close().unwrap();
    let first = segment_files(dir.path()).remove(0);
    let position = batch_starts(&first)[10];
    flip_byte(&first, in_records(position));

    // Records 0..600 are expired, 600.. are not: retention must pass the damaged record 10.
    let (mut log, _) = PartitionLog::open(dir.path(), cfg, NOW + 5_500).unwrap();
    assert_eq!(log.log_start_offset(), 600);
    assert_eq!(read_all(&mut log, 0), expected(600..700));
}

/// Produces records `range` (values as in `value`) to partition 0 of `topic` in one request.
fn produce_range(broker: &NanoKafka, topic: &str, range: std::ops::Range<u64>) {
    let records = range
        .map(|i| ProduceRecord {
            key: None,
            value: value(i),
        })
        .collect();
    broker.produce_batch_raw(topic, Some(0), records).unwrap();
}

#[test]
fn a_broker_keeps_synced_records_around_damage_found_after_a_clean_open() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        NanoKafka::builder()
            .data_dir(dir.path())
            .fsync(FsyncPolicy::Always)
            .build()
            .unwrap()
    };
    let broker = open();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    produce_range(&broker, "t", 0..1); // record 0 alone in the first batch
    produce_range(&broker, "t", 1..1000);
    broker.shutdown().unwrap();
    drop(broker);
    flip_byte(
        &dir.path().join("t_0").join("00000000000000000000.log"),
        in_records(0),
    );
    let broker = open();
    produce_range(&broker, "t", 1000..1100);
    broker.crash_partition("t", 0).unwrap();

    assert_eq!(log_end(&broker, "t", 0), 1100);
    broker.join_group("t", "g", "m").unwrap();
    let zero = std::time::Duration::ZERO;
    match broker.poll_batch_raw("t", "g", "m", 10, zero) {
        Err(Error::Corrupt { position: 0, .. }) => {}
        other => panic!("offset 0: expected Corrupt, got {other:?}"),
    }
    broker.commit("t", "g", 0, 0).unwrap(); // skip the damaged record
    let mut got = Vec::new();
    loop {
        let batch = broker.poll_batch_raw("t", "g", "m", 500, zero).unwrap();
        let Some(last) = batch.last() else { break };
        broker.commit("t", "g", 0, last.offset).unwrap();
        got.extend(batch.into_iter().map(|r| (r.offset, r.value)));
    }
    assert_eq!(got, expected(1..1100));
}

#[test]
fn a_broker_partition_with_time_retention_and_a_damaged_record_opens_and_retention_passes_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = nanokafka::clock::ManualClock::new(NOW);
    let open = || {
        NanoKafka::builder()
            .data_dir(dir.path())
            .clock(std::sync::Arc::new(clock.clone()))
            .build()
            .unwrap()
    };
    let broker = open();
    let topic = TopicConfig::default().retention_ms(5_000);
    broker.create_topic("t", topic).unwrap();
    for from in (0..600).step_by(10) {
        produce_range(&broker, "t", from..from + 10);
    }
    clock.advance(1_000);
    produce_range(&broker, "t", 600..700);
    broker.shutdown().unwrap();
    drop(broker);
    let segment = dir.path().join("t_0").join("00000000000000000000.log");
    let (position, header) = batches(&segment)[10];
    assert_eq!(header.base_offset, 100);
    flip_byte(&segment, in_records(position));

    // Records 0..600 are now expired, 600.. are not; records 100..110 are damaged.
    clock.set(NOW + 5_500);
    let broker = open();
    let stats = common::partition_stats(&broker, "t", 0);
    assert_eq!(stats.failed, None, "{stats:?}");
    assert_eq!(stats.restarts, 0);
    assert_eq!((stats.log_start_offset, stats.log_end_offset), (600, 700));
}

#[test]
fn a_read_steps_over_damage_at_the_start_of_a_segment_that_the_open_did_not_see() {
    let (dir, log) = log_with(1200, big_segments());
    log.close().unwrap();
    let first = segment_files(dir.path()).remove(0);
    flip_byte(&first, in_records(0)); // record 0, before the first index entry

    let (mut log, report) = reopen(dir.path(), big_segments());
    assert_eq!(
        report.segments_scanned, 0,
        "the clean open does not look there"
    );
    assert_corrupt_at(&mut log, 0, &first, 0);
    assert_eq!(first_read(&mut log, 1), 1);
    assert_eq!(read_all(&mut log, 1), expected(1..1200));
}

#[test]
fn bytes_retention_steps_over_a_damaged_record() {
    // Bytes retention alone, and with count retention putting the log start on the damaged
    // record (so that finding where the log start is means stepping over the damage too).
    for records in [None, Some(1190)] {
        let (dir, log) = log_with(1200, big_segments());
        log.close().unwrap();
        let segments = segment_files(dir.path());
        let first = &segments[0];
        let total: u64 = segments.iter().map(|s| len_of(s)).sum();
        let starts = batch_starts(first);
        flip_byte(first, in_records(starts[10]));
        // The cut falls after the damaged record 10, before the segment's first index entry,
        // so finding it means scanning past the damage.
        let cut_at = 2000;
        let keep = starts.iter().position(|&s| s >= cut_at).unwrap() as u64;
        assert!(keep > 11 && starts[keep as usize] < 4096);
        let cfg = LogConfig {
            retention: RetentionPolicy {
                records,
                bytes: Some(total - cut_at),
                ..RetentionPolicy::default()
            },
            ..big_segments()
        };
        let (mut log, _) = reopen(dir.path(), cfg);
        assert_eq!(log.log_start_offset(), keep, "records: {records:?}");
        assert_eq!(read_all(&mut log, 0), expected(keep..1200));
    }
}

/// The `clean` byte of the partition's checkpoint (its format: `storage::checkpoint`).
fn checkpoint_says_clean(dir: &Path) -> bool {
    fs::read(dir.join("checkpoint")).unwrap()[5] == 1
}

#[test]
fn a_partition_reopened_cleanly_and_never_written_stays_clean_after_a_crash() {
    let (dir, log) = log_with(300, config());
    log.close().unwrap();
    let checkpoint = fs::read(dir.path().join("checkpoint")).unwrap();
    let (mut log, report) = reopen(dir.path(), config());
    assert!(report.clean_shutdown);
    assert!(log.is_clean_on_disk());
    assert_eq!(read_all(&mut log, 0), expected(0..300));
    drop(log); // a crash: no close
    assert_eq!(fs::read(dir.path().join("checkpoint")).unwrap(), checkpoint);

    let (mut log, report) = reopen(dir.path(), config());
    assert!(report.clean_shutdown, "nothing changed: still clean");
    assert_eq!(report.segments_scanned, 0);
    assert_eq!(read_all(&mut log, 0), expected(0..300));
    log.close().unwrap();
    assert_eq!(
        fs::read(dir.path().join("checkpoint")).unwrap(),
        checkpoint,
        "a close with nothing changed rewrites nothing"
    );
}

#[test]
fn a_partition_written_after_a_clean_reopen_is_recovered_as_unclean_after_a_crash() {
    // One record; enough records to roll segments (the active segment is then another file,
    // which the clean checkpoint's size check alone cannot vouch for).
    for appended in [1, 200] {
        let (dir, log) = log_with(300, config());
        let segments = log.segment_count();
        log.close().unwrap();
        let (mut log, _) = reopen(dir.path(), config());
        assert!(checkpoint_says_clean(dir.path()));
        append_n(&mut log, 300, appended);
        assert!(
            !checkpoint_says_clean(dir.path()),
            "{appended}: marked unclean by the first append"
        );
        assert!(!log.is_clean_on_disk());
        if appended > 1 {
            assert!(log.segment_count() > segments, "the appends rolled");
        }
        drop(log); // a crash

        let (mut log, report) = reopen(dir.path(), config());
        assert!(!report.clean_shutdown, "{appended}");
        assert!(report.segments_scanned >= 1, "{appended}");
        assert_eq!(read_all(&mut log, 0), expected(0..300 + appended));
    }
}

#[test]
fn retention_at_a_clean_reopen_marks_the_partition_unclean() {
    let (dir, log) = log_with(300, config());
    log.close().unwrap();
    let keep_ten = LogConfig {
        retention: RetentionPolicy {
            records: Some(10),
            ..RetentionPolicy::default()
        },
        ..config()
    };
    let (log, report) = reopen(dir.path(), keep_ten);
    assert!(report.clean_shutdown);
    assert_eq!(log.log_start_offset(), 290);
    assert!(!checkpoint_says_clean(dir.path()));
    drop(log);
    let (mut log, report) = reopen(dir.path(), keep_ten);
    assert!(!report.clean_shutdown);
    assert_eq!(read_all(&mut log, 0), expected(290..300));
}
