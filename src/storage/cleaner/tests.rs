//! The cleaner's behaviour as a reader of a compacted partition relies on it, through the
//! log's API on a simulated disk: one test per case of Kafka's `LogCleanerTest` that applies
//! here. Crash points are in `crash_tests.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::storage::compression::{self, Compression};
use crate::storage::format::{self, encode_client_batch, BatchHeader, ClientRecord, Decoded};
use crate::storage::log::{LogConfig, PartitionLog};
use crate::storage::sim::SimFs;
use crate::storage::FsyncPolicy;

pub(super) const DIR: &str = "/data/compacted_0";
pub(super) const NOW: u64 = 1_700_000_000_000;
const DAY: u64 = 24 * 60 * 60 * 1000;

/// A record as written and as read back: `(offset, key, value)`; a `None` value is a
/// tombstone.
pub(super) type Stored = (u64, Option<Vec<u8>>, Option<Vec<u8>>);

/// Small segments (about five batches of these records each), synced appends.
pub(super) fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        fsync: FsyncPolicy::Always,
        ..LogConfig::default()
    }
}

pub(super) fn open(fs: &SharedFs) -> PartitionLog {
    PartitionLog::open_with(fs, Path::new(DIR), config(), NOW)
        .unwrap()
        .0
}

pub(super) fn sim(seed: u64) -> (SimFs, SharedFs) {
    let sim = SimFs::new(seed);
    let fs: SharedFs = Arc::new(sim.clone());
    (sim, fs)
}

/// A policy whose key map holds `keys` keys.
pub(super) fn policy(keys: usize) -> CleanerPolicy {
    CleanerPolicy {
        delete_retention_ms: DAY,
        min_compaction_lag_ms: 0,
        key_map_bytes: keys * offset_map::SLOT_BYTES * 10 / 9 + offset_map::SLOT_BYTES,
    }
}

/// A client's batch of `(key, value)` records (value `None`: a tombstone).
pub(super) fn batch(records: &[(&[u8], Option<&[u8]>)]) -> Vec<u8> {
    let records: Vec<ClientRecord<'_>> = records
        .iter()
        .map(|&(key, value)| ClientRecord {
            timestamp_ms: NOW as i64,
            key: Some(key),
            value,
            headers: &[],
        })
        .collect();
    encode_client_batch(&records)
}

/// `batch` with its records section compressed by `codec`.
fn compressed(batch: Vec<u8>, codec: Compression) -> Vec<u8> {
    let mut out = batch[..format::HEADER_LEN].to_vec();
    out.extend(compression::compress(codec, &batch[format::HEADER_LEN..]).unwrap());
    let length = (out.len() - format::LOG_OVERHEAD) as i32;
    out[8..12].copy_from_slice(&length.to_be_bytes());
    out[21..23].copy_from_slice(&codec.attribute_bits().to_be_bytes());
    reseal(&mut out);
    out
}

/// `batch` from idempotent producer `producer_id` (epoch 0) at `sequence`.
fn idempotent(mut batch: Vec<u8>, producer_id: i64, sequence: i32) -> Vec<u8> {
    batch[43..51].copy_from_slice(&producer_id.to_be_bytes());
    batch[51..53].copy_from_slice(&0i16.to_be_bytes());
    batch[53..57].copy_from_slice(&sequence.to_be_bytes());
    reseal(&mut batch);
    batch
}

fn reseal(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

/// Appends `batch`; returns its base offset.
pub(super) fn append(log: &mut PartitionLog, mut batch: Vec<u8>) -> u64 {
    log.append_kafka_batch(&mut batch, NOW).unwrap().base_offset
}

/// Every record a Kafka fetch from offset 0 returns, in order, decoded from the batches
/// (which must verify). Also checks that the native read path returns the same offsets.
pub(super) fn read_all(log: &mut PartitionLog) -> Vec<Stored> {
    let mut out = Vec::new();
    let mut offset = log.log_start_offset();
    while offset < log.log_end_offset() {
        let read = log.read_batches(offset, 1 << 20, true).unwrap();
        assert!(
            read.next_offset > offset,
            "a fetch at {offset} made no progress"
        );
        for_each_record(&read.bytes, |header, o, key, value| {
            if o >= offset {
                out.push((o, key, value));
            }
            assert!(header.is_contiguous() || header.records_count <= header.last_offset_delta);
        });
        offset = read.next_offset;
    }
    let mut native = Vec::new();
    let mut offset = 0;
    loop {
        let fetched = log.read(offset, 7, 1 << 20).unwrap();
        if fetched.is_empty() {
            break;
        }
        native.extend(fetched.iter().map(|r| r.offset));
        offset = fetched.next_offset();
    }
    let fetched: Vec<u64> = out.iter().map(|r| r.0).collect();
    assert_eq!(
        native, fetched,
        "the native read and the Kafka fetch disagree"
    );
    out
}

/// Calls `each(header, offset, key, value)` for every record of the batches in `bytes`.
pub(super) fn for_each_record(
    bytes: &[u8],
    mut each: impl FnMut(&BatchHeader, u64, Option<Vec<u8>>, Option<Vec<u8>>),
) {
    let mut at = 0;
    while at < bytes.len() {
        let Decoded::Batch(header) = format::decode(&bytes[at..]) else {
            panic!("a batch that does not verify at {at}");
        };
        let mut scratch = Vec::new();
        let batch = &bytes[at..at + header.batch_len];
        let section = format::records_section(batch, &header, 1 << 30, &mut scratch).unwrap();
        format::validate_records(section, &header, |r| {
            let offset = header.base_offset + u64::from(r.offset_delta);
            each(
                &header,
                offset,
                r.key.map(<[u8]>::to_vec),
                r.value.map(<[u8]>::to_vec),
            );
        })
        .unwrap();
        at += header.batch_len;
    }
}

/// Runs passes until the dirty section is cleaned; returns the passes' stats.
/// One pass over everything cleanable now, prepared but not swapped in.
fn prepare_pass(log: &PartitionLog, policy: CleanerPolicy) -> Prepared {
    let snapshot = log
        .cleaning_snapshot(log.log_end_offset(), &policy, NOW)
        .unwrap()
        .expect("something to clean");
    Cleaner::new(policy).prepare(&snapshot, NOW).unwrap()
}

pub(super) fn clean(
    log: &mut PartitionLog,
    policy: CleanerPolicy,
    now_ms: u64,
) -> Vec<CleanerStats> {
    let mut passes = Vec::new();
    loop {
        let Some(snapshot) = log
            .cleaning_snapshot(log.log_end_offset(), &policy, now_ms)
            .unwrap()
        else {
            return passes;
        };
        let prepared = Cleaner::new(policy).prepare(&snapshot, now_ms).unwrap();
        let stats = log.swap_in(prepared).unwrap();
        passes.push(stats);
        if stats.done {
            return passes;
        }
        assert!(passes.len() < 1000, "cleaning does not end");
    }
}

/// The latest record of every key among `written`, by offset.
pub(super) fn latest(written: &[Stored]) -> Vec<Stored> {
    let mut by_key = BTreeMap::new();
    for record in written {
        by_key.insert(record.1.clone(), record.clone());
    }
    let mut out: Vec<Stored> = by_key.into_values().collect();
    out.sort_by_key(|r| r.0);
    out
}

/// Appends `rounds` rounds of one batch of values for keys `k0..k{keys}`, with a second,
/// fresh key per batch so the round's batches differ; returns what was written.
fn write_rounds(log: &mut PartitionLog, rounds: usize, keys: usize) -> Vec<Stored> {
    let mut written = Vec::new();
    for round in 0..rounds {
        let value = format!("value {round}");
        let names: Vec<String> = (0..keys).map(|k| format!("k{k}")).collect();
        let records: Vec<(&[u8], Option<&[u8]>)> = names
            .iter()
            .map(|k| (k.as_bytes(), Some(value.as_bytes())))
            .collect();
        let base = append(log, batch(&records));
        for (i, name) in names.iter().enumerate() {
            written.push((
                base + i as u64,
                Some(name.clone().into_bytes()),
                Some(value.clone().into_bytes()),
            ));
        }
    }
    written
}

#[test]
fn the_latest_value_of_every_key_survives_across_segments_at_its_own_offset() {
    let (_sim, fs) = sim(1);
    let mut log = open(&fs);
    let written = write_rounds(&mut log, 40, 4);
    let (log_end, segments, size) = (log.log_end_offset(), log.segment_count(), log.size_bytes());
    assert!(segments > 5, "the rounds span several segments");
    let passes = clean(&mut log, policy(1000), NOW);
    assert_eq!(passes.len(), 1);
    let read = read_all(&mut log);
    // The active segment is left alone, and its records supersede nothing before it (the
    // key map is built from the cleaned range, as Kafka's is from the dirty section).
    let active_base = *log.segment_bases().last().unwrap();
    let (cleaned, active) = written.split_at(active_base as usize);
    let mut expected = latest(cleaned);
    expected.extend_from_slice(active);
    assert_eq!(read, expected);
    assert_eq!(log.log_end_offset(), log_end, "offsets do not move");
    assert!(log.size_bytes() < size / 2);
    let stats = passes[0];
    assert!(stats.records_removed > 100 && stats.bytes_written < stats.bytes_read);
    assert!(stats.dirty_ratio_before == 1.0 && stats.dirty_ratio_after == 0.0);
    assert!(stats.done && stats.segments_replaced > 1);
    drop(log);
    let mut reopened = open(&fs);
    assert_eq!(
        read_all(&mut reopened),
        expected,
        "a reopen reads the cleaned log"
    );
}

#[test]
fn a_tombstone_stays_for_delete_retention_after_its_first_cleaning_then_goes() {
    let (_sim, fs) = sim(2);
    let mut log = open(&fs);
    append(
        &mut log,
        batch(&[(b"gone", Some(b"v1")), (b"kept", Some(b"v1"))]),
    );
    let tombstone = append(&mut log, batch(&[(b"gone", None)]));
    for i in 0..30u8 {
        append(&mut log, batch(&[(b"filler", Some(&[i; 100]))]));
    }
    let first = clean(&mut log, policy(100), NOW);
    let has_tombstone = |log: &mut PartitionLog| {
        let read = read_all(log);
        assert!(
            !read
                .iter()
                .any(|r| r.1.as_deref() == Some(b"gone") && r.2.is_some()),
            "the value the tombstone deleted never comes back"
        );
        read.iter().any(|r| r.0 == tombstone && r.2.is_none())
    };
    assert!(has_tombstone(&mut log));
    assert_eq!(first[0].tombstones_removed, 0);
    // The delete horizon is the first cleaning's time plus the retention.
    clean(&mut log, policy(100), NOW + DAY - 1);
    assert!(has_tombstone(&mut log), "within delete_retention_ms");
    drop(log);
    let mut log = open(&fs);
    let later = clean(&mut log, policy(100), NOW + DAY);
    assert!(!has_tombstone(&mut log), "dropped once the horizon passed");
    assert_eq!(later.iter().map(|s| s.tombstones_removed).sum::<u64>(), 1);
    assert!(read_all(&mut log)
        .iter()
        .any(|r| r.1.as_deref() == Some(b"kept")));
}

/// The check a broker makes before each pass (without opening a file): a sealed segment
/// holds offsets no pass of this open has cleaned.
#[test]
fn a_dirty_sealed_segment_is_seen_until_a_pass_cleans_to_the_active_segment() {
    let (_sim, fs) = sim(1);
    let mut log = open(&fs);
    write_rounds(&mut log, 2, 4);
    assert!(!log.has_dirty_sealed_segment(), "only the active segment");
    write_rounds(&mut log, 40, 4);
    assert!(
        log.has_dirty_sealed_segment(),
        "sealed segments, never cleaned"
    );
    clean(&mut log, policy(1000), NOW);
    assert!(
        !log.has_dirty_sealed_segment(),
        "cleaned up to the active segment"
    );
    let segments = log.segment_count();
    while log.segment_count() == segments {
        write_rounds(&mut log, 1, 4);
    }
    assert!(log.has_dirty_sealed_segment(), "the segment a roll sealed");
}

#[test]
fn the_active_segment_is_never_cleaned() {
    let (sim, fs) = sim(3);
    let mut log = open(&fs);
    write_rounds(&mut log, 12, 3);
    let active = log.segment_bases().last().copied().unwrap();
    let active_path = Path::new(DIR).join(format!("{active:020}.log"));
    append(&mut log, batch(&[(b"k0", Some(b"x")), (b"k0", Some(b"y"))]));
    let before = sim.contents(&active_path).unwrap();
    clean(&mut log, policy(100), NOW);
    assert_eq!(sim.contents(&active_path).unwrap(), before);
    let read = read_all(&mut log);
    let last_two: Vec<_> = read[read.len() - 2..]
        .iter()
        .map(|r| r.2.clone().unwrap())
        .collect();
    assert_eq!(
        last_two,
        [b"x".to_vec(), b"y".to_vec()],
        "both records of the active segment"
    );
}

#[test]
fn a_producers_last_batch_stays_so_a_retry_is_recognised_after_a_reopen() {
    let (sim, fs) = sim(4);
    let mut log = open(&fs);
    let producer = 42;
    append(
        &mut log,
        idempotent(batch(&[(b"p", Some(b"0"))]), producer, 0),
    );
    let mut last = idempotent(batch(&[(b"p", Some(b"1"))]), producer, 1);
    let last_base = append(&mut log, last.clone());
    // Another writer supersedes every record of the producer.
    for i in 0..20u8 {
        append(&mut log, batch(&[(b"p", Some(&[i; 100]))]));
    }
    clean(&mut log, policy(100), NOW);
    let mut kept = None;
    let read = log.read_batches(last_base, 1 << 20, true).unwrap();
    let Decoded::Batch(header) = format::decode(&read.bytes) else {
        panic!()
    };
    if header.base_offset == last_base {
        kept = Some(header);
    }
    let kept = kept.expect("the producer's last batch is still there");
    assert_eq!(
        (kept.records_count, kept.producer_id, kept.base_sequence),
        (0, producer, 1)
    );
    assert!(
        !read_all(&mut log).iter().any(|r| r.0 <= last_base),
        "its records are gone"
    );
    log.close().unwrap();
    // Without snapshots the producer state is rebuilt from the log alone.
    for name in fs.list(Path::new(DIR)).unwrap() {
        if name.ends_with(".producers") {
            fs.remove_file(&Path::new(DIR).join(name)).unwrap();
        }
    }
    drop(sim);
    let mut log = open(&fs);
    let retry = log.append_kafka_batch(&mut last, NOW).unwrap();
    assert!(
        retry.duplicate && retry.base_offset == last_base,
        "{retry:?}"
    );
    let next = log
        .append_kafka_batch(
            &mut idempotent(batch(&[(b"p", Some(b"2"))]), producer, 2),
            NOW,
        )
        .unwrap();
    assert!(!next.duplicate);
}

/// A pass groups source segments up to the log's `segment_bytes`: full segments are cleaned
/// one by one, and the small segments that leaves are grouped by the next pass.
#[test]
fn small_segments_are_grouped_into_one_cleaned_segment() {
    let (_sim, fs) = sim(5);
    let mut log = open(&fs);
    let written = write_rounds(&mut log, 40, 4);
    let before = log.segment_count();
    clean(&mut log, policy(1000), NOW);
    assert_eq!(
        log.segment_count(),
        before,
        "each full segment cleaned on its own"
    );
    let expected = read_all(&mut log);
    drop(log);
    let mut log = open(&fs);
    let stats = clean(&mut log, policy(1000), NOW);
    assert_eq!(
        log.segment_count(),
        2,
        "one cleaned segment and the active one (from {before})"
    );
    assert_eq!(stats[0].segments_replaced, before - 1);
    assert_eq!(read_all(&mut log), expected);
    assert!(latest(&written).iter().all(|r| expected.contains(r)));
}

#[test]
fn a_key_map_smaller_than_the_keys_takes_several_passes_to_the_same_result() {
    let write = |fs: &SharedFs| {
        let mut log = open(fs);
        for round in 0..10u8 {
            for key in 0..12u8 {
                append(&mut log, batch(&[(&[b'k', key], Some(&[round; 20]))]));
            }
        }
        log
    };
    let (_a, fs_a) = sim(6);
    let mut roomy = write(&fs_a);
    assert_eq!(clean(&mut roomy, policy(1000), NOW).len(), 1);
    let (_b, fs_b) = sim(6);
    let mut tight = write(&fs_b);
    let passes = clean(&mut tight, policy(4), NOW);
    assert!(passes.len() > 2, "{} passes", passes.len());
    assert!(passes
        .iter()
        .all(|s| s.key_map_bytes <= policy(4).key_map_bytes));
    assert!(passes.iter().rev().skip(1).all(|s| !s.done));
    assert_eq!(read_all(&mut tight), read_all(&mut roomy));
}

#[test]
fn compressed_batches_are_rewritten_with_their_codec() {
    for codec in [
        Compression::Gzip,
        Compression::Zstd,
        Compression::Lz4,
        Compression::Snappy,
    ] {
        let (_sim, fs) = sim(7);
        let mut log = open(&fs);
        let base = append(
            &mut log,
            compressed(batch(&[(b"a", Some(b"old")), (b"b", Some(b"b1"))]), codec),
        );
        for i in 0..10u8 {
            append(&mut log, batch(&[(b"a", Some(&[i; 150]))]));
        }
        clean(&mut log, policy(100), NOW);
        let read = log.read_batches(base, 1 << 20, true).unwrap();
        let Decoded::Batch(header) = format::decode(&read.bytes) else {
            panic!()
        };
        assert_eq!(header.compression(), Ok(codec));
        assert_eq!(
            (
                header.base_offset,
                header.records_count,
                header.last_offset_delta
            ),
            (base, 1, 1)
        );
        let mut records = Vec::new();
        for_each_record(&read.bytes[..header.batch_len], |_, o, k, v| {
            records.push((o, k, v))
        });
        assert_eq!(
            records,
            [(base + 1, Some(b"b".to_vec()), Some(b"b1".to_vec()))]
        );
    }
}

#[test]
fn a_pass_whose_segment_retention_removed_is_abandoned_and_leaves_no_file() {
    let (_sim, fs) = sim(8);
    let mut log = open(&fs);
    write_rounds(&mut log, 30, 4);
    let prepared = prepare_pass(&log, policy(1000));
    let mut retention = *log.config();
    retention.retention.records = Some(20);
    log.set_retention(retention.retention, retention.timestamp_type);
    log.enforce_retention(NOW).unwrap();
    let before = read_all(&mut log);
    let stats = log.swap_in(prepared).unwrap();
    assert!(stats.abandoned && stats.segments_replaced == 0);
    assert_eq!(read_all(&mut log), before);
    let names = fs.list(Path::new(DIR)).unwrap();
    assert!(
        !names
            .iter()
            .any(|n| n.ends_with(".cleaned") || n.ends_with(".swap")),
        "{names:?}"
    );
}

#[test]
fn a_keyless_record_is_kept() {
    let (_sim, fs) = sim(9);
    let mut log = open(&fs);
    let keyless = ClientRecord {
        timestamp_ms: NOW as i64,
        key: None,
        value: Some(b"no key"),
        headers: &[],
    };
    let base = append(&mut log, encode_client_batch(&[keyless]));
    write_rounds(&mut log, 20, 2);
    clean(&mut log, policy(100), NOW);
    assert_eq!(
        read_all(&mut log)[0],
        (base, None, Some(b"no key".to_vec()))
    );
}

/// A segment holding a record younger than `min_compaction_lag_ms` is not cleaned, nor is
/// any after it; once the lag has passed it is.
#[test]
fn segments_younger_than_the_compaction_lag_wait() {
    let (_sim, fs) = sim(10);
    let mut log = open(&fs);
    let written = write_rounds(&mut log, 30, 4);
    let mut lagging = policy(1000);
    lagging.min_compaction_lag_ms = 60_000;
    assert!(log
        .cleaning_snapshot(log.log_end_offset(), &lagging, NOW + 59_999)
        .unwrap()
        .is_none());
    assert_eq!(read_all(&mut log), written);
    let passes = clean(&mut log, lagging, NOW + 60_000);
    assert!(passes[0].records_removed > 0);
}

/// The pass reads and writes on another thread while the log appends, rolls and serves
/// reads; only the swap needs the log.
#[test]
fn a_pass_runs_on_another_thread_while_the_log_appends() {
    let (_sim, fs) = sim(11);
    let mut log = open(&fs);
    let mut written = write_rounds(&mut log, 30, 4);
    let policy = policy(1000);
    let snapshot = log
        .cleaning_snapshot(log.log_end_offset(), &policy, NOW)
        .unwrap()
        .unwrap();
    let pass = std::thread::spawn(move || Cleaner::new(policy).prepare(&snapshot, NOW));
    written.extend(write_rounds(&mut log, 30, 4));
    let before = read_all(&mut log);
    assert_eq!(before, written);
    let stats = log.swap_in(pass.join().unwrap().unwrap()).unwrap();
    assert!(!stats.abandoned && stats.records_removed > 0);
    let after = read_all(&mut log);
    assert!(after.len() < before.len());
    assert!(latest(&written).iter().all(|r| after.contains(r)));
    assert!(after.iter().all(|r| written.contains(r)));
}

/// A pass prepared for a log that was closed and opened again since (whose recovery deleted
/// the pass's files) is abandoned, not an error; the log stays as it was.
#[test]
fn a_pass_for_a_log_opened_again_since_is_abandoned() {
    let (_sim, fs) = sim(12);
    let mut log = open(&fs);
    write_rounds(&mut log, 30, 4);
    let prepared = prepare_pass(&log, policy(1000));
    let before = read_all(&mut log);
    log.close().unwrap();
    let (mut log, report) = PartitionLog::open_with(&fs, Path::new(DIR), config(), NOW).unwrap();
    assert!(
        !report.cleaner_files.is_empty(),
        "the reopen deleted the .cleaned files"
    );
    let stats = log.swap_in(prepared).unwrap();
    assert!(stats.abandoned);
    assert_eq!(read_all(&mut log), before);
}

/// A pass's key map has room for its dirty section's offsets (one key each at most), not the
/// whole budget: a few hundred new records take kilobytes of a 32 MiB budget.
#[test]
fn the_key_map_is_sized_by_the_dirty_section_within_the_budget() {
    let (_sim, fs) = sim(13);
    let mut log = open(&fs);
    write_rounds(&mut log, 40, 4);
    let mut roomy = policy(0);
    roomy.key_map_bytes = 32 << 20;
    let slots_for = |offsets: u64| (offsets as usize * 10 / 9 + 2) * offset_map::SLOT_BYTES;
    let first = clean(&mut log, roomy, NOW);
    assert_eq!(first.len(), 1);
    let cleaned_to = first[0].cleaned_up_to;
    assert!(cleaned_to > 100, "{first:?}");
    assert!(
        first[0].key_map_bytes <= slots_for(cleaned_to) && first[0].key_map_bytes < 16 << 10,
        "{} bytes for {cleaned_to} offsets",
        first[0].key_map_bytes
    );
    write_rounds(&mut log, 20, 4);
    let second = clean(&mut log, roomy, NOW);
    let dirty = second[0].cleaned_up_to - cleaned_to;
    assert!(
        dirty > 0 && second[0].key_map_bytes <= slots_for(dirty),
        "{second:?}"
    );
}

/// The clean point is kept across a reopen (the cleaner checkpoint): a log cleaned to its
/// active segment has nothing dirty once reopened, and the next pass sees the same dirty
/// section, and ratio, as it would have without the reopen.
#[test]
fn a_reopened_log_keeps_its_clean_point_and_dirty_ratio() {
    let run = |reopen: bool| {
        let (_sim, fs) = sim(14);
        let mut log = open(&fs);
        write_rounds(&mut log, 40, 4);
        let first = clean(&mut log, policy(1000), NOW);
        if reopen {
            log.close().unwrap();
            log = open(&fs);
            assert!(
                !log.has_dirty_sealed_segment(),
                "a clean log is clean once reopened"
            );
        }
        write_rounds(&mut log, 20, 4);
        let snapshot = log
            .cleaning_snapshot(log.log_end_offset(), &policy(1000), NOW)
            .unwrap()
            .unwrap();
        assert_eq!(snapshot.first_dirty_offset, first[0].cleaned_up_to);
        let stats = *Cleaner::new(policy(1000))
            .prepare(&snapshot, NOW)
            .unwrap()
            .stats();
        (stats.dirty_ratio_before, stats.cleaned_up_to)
    };
    let (kept_open, reopened) = (run(false), run(true));
    assert!(kept_open.0 > 0.0 && kept_open.0 < 1.0, "{kept_open:?}");
    assert_eq!(reopened, kept_open);
}

/// The checkpoint is an optimisation: missing, damaged, or naming offsets past the sealed
/// segments, it is ignored and the whole log is cleaned again, to the same result.
#[test]
fn a_missing_or_damaged_cleaner_checkpoint_cleans_the_whole_log_again() {
    use super::checkpoint::{CleanerCheckpoint, CLEANER_CHECKPOINT_FILE};
    let path = Path::new(DIR).join(CLEANER_CHECKPOINT_FILE);
    /// How a test damages the checkpoint at a path.
    type Damage = fn(&SharedFs, &Path);
    let damages: [(&str, Damage); 3] = [
        ("missing", |fs, path| fs.remove_file(path).unwrap()),
        ("a flipped byte", |fs, path| {
            let mut bytes = fs.read(path).unwrap();
            bytes[9] ^= 1;
            crate::storage::fsutil::write_atomically(fs.as_ref(), path, &bytes).unwrap();
        }),
        ("past the sealed segments", |fs, path| {
            let forged = CleanerCheckpoint {
                clean_point: 1 << 40,
                delete_horizon_ms: None,
            };
            forged.write(fs.as_ref(), path.parent().unwrap()).unwrap();
        }),
    ];
    for (damage, apply) in damages {
        let (_sim, fs) = sim(15);
        let mut log = open(&fs);
        write_rounds(&mut log, 40, 4);
        clean(&mut log, policy(1000), NOW);
        let expected = read_all(&mut log);
        log.close().unwrap();
        assert!(fs.exists(&path), "a pass writes the checkpoint");
        apply(&fs, &path);
        let mut log = open(&fs);
        assert!(
            log.has_dirty_sealed_segment(),
            "{damage}: the whole log is dirty"
        );
        let passes = clean(&mut log, policy(1000), NOW);
        assert_eq!(passes.len(), 1, "{damage}");
        assert_eq!(passes[0].dirty_ratio_before, 1.0, "{damage}");
        assert_eq!(read_all(&mut log), expected, "{damage}");
        log.close().unwrap();
        assert!(
            !open(&fs).has_dirty_sealed_segment(),
            "{damage}: checkpointed again"
        );
    }
}

/// A pass reports the earliest delete horizon it left among the tombstones it kept; the log
/// keeps it, across a reopen, until a pass drops them.
#[test]
fn the_earliest_delete_horizon_is_reported_and_kept_across_a_reopen() {
    let (_sim, fs) = sim(16);
    let mut log = open(&fs);
    append(&mut log, batch(&[(b"a", Some(b"v")), (b"a", None)]));
    for i in 0..15u8 {
        append(&mut log, batch(&[(b"filler", Some(&[i; 100]))]));
    }
    let first = clean(&mut log, policy(100), NOW);
    assert_eq!(first[0].delete_horizon_ms, Some(NOW + DAY));
    append(&mut log, batch(&[(b"b", None)]));
    for i in 0..15u8 {
        append(&mut log, batch(&[(b"filler", Some(&[i; 100]))]));
    }
    let second = clean(&mut log, policy(100), NOW + 1000);
    assert_eq!(
        second[0].delete_horizon_ms,
        Some(NOW + DAY),
        "the earlier of the two"
    );
    log.close().unwrap();
    let mut log = open(&fs);
    assert_eq!(log.earliest_delete_horizon_ms(), Some(NOW + DAY));
    let third = clean(&mut log, policy(100), NOW + DAY);
    assert_eq!(third[0].tombstones_removed, 1);
    assert_eq!(log.earliest_delete_horizon_ms(), Some(NOW + 1000 + DAY));
    clean(&mut log, policy(100), NOW + 1000 + DAY);
    assert_eq!(log.earliest_delete_horizon_ms(), None);
    assert!(
        read_all(&mut log).iter().all(|r| r.2.is_some()),
        "no tombstone left"
    );
}

/// A [`FileSystem`] that records which thread removed which file.
#[derive(Debug)]
struct RemovalsFs {
    inner: SharedFs,
    removals: std::sync::Mutex<Vec<(std::thread::ThreadId, std::path::PathBuf)>>,
}

impl crate::storage::fs::FileSystem for RemovalsFs {
    fn open(
        &self,
        path: &Path,
        mode: crate::storage::fs::OpenMode,
    ) -> std::io::Result<Box<dyn StorageFile>> {
        self.inner.open(path, mode)
    }
    fn read(&self, path: &Path) -> std::io::Result<Vec<u8>> {
        self.inner.read(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        let mut removals = self.removals.lock().unwrap();
        removals.push((std::thread::current().id(), path.to_owned()));
        self.inner.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn list(&self, dir: &Path) -> std::io::Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn sync_dir(&self, dir: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(dir)
    }
}

/// The swap unlinks the segments a cleaned one replaced on the log's worker, not on the
/// thread that swaps (the partition's: an unlink frees the file's page cache); the log's
/// close waits for them, and none of their files is left.
#[test]
fn a_swap_unlinks_the_replaced_segments_on_the_worker_not_the_callers_thread() {
    let (_sim, inner) = sim(17);
    let recording = Arc::new(RemovalsFs {
        inner,
        removals: std::sync::Mutex::new(Vec::new()),
    });
    let fs: SharedFs = recording.clone();
    let mut log = open(&fs);
    log.set_worker(Arc::new(crate::storage::sync_worker::SyncWorker::new()));
    write_rounds(&mut log, 40, 4);
    let prepared = prepare_pass(&log, policy(1000));
    let before = read_all(&mut log);
    recording.removals.lock().unwrap().clear();
    let stats = log.swap_in(prepared).unwrap();
    assert!(stats.segments_replaced > 1, "{stats:?}");
    let here = std::thread::current().id();
    let removed_here: Vec<_> = recording
        .removals
        .lock()
        .unwrap()
        .iter()
        .filter(|(thread, _)| *thread == here)
        .map(|(_, path)| path.clone())
        .collect();
    assert_eq!(removed_here, Vec::<std::path::PathBuf>::new());
    let after = read_all(&mut log);
    log.close().unwrap();
    let removed = recording.removals.lock().unwrap().len();
    assert!(
        removed >= 3 * stats.segments_replaced,
        "{removed} files removed on the worker"
    );
    let names = fs.list(Path::new(DIR)).unwrap();
    assert!(!names.iter().any(|n| n.ends_with(".deleted")), "{names:?}");
    assert!(latest(&before).iter().all(|r| after.contains(r)));
    assert_eq!(read_all(&mut open(&fs)), after);
}
