//! Fuzzing of everything read from disk, as property tests: the CI fallback of the `cargo fuzz`
//! targets in `fuzz/` (`tests/README.md`, "Fuzzing"). Both drive the same checks,
//! `fuzz/src/lib.rs`, included here: decode never panics, accepts only batches that verify by
//! the documented layout and parses their records as an independent parser does;
//! `PartitionLog::open` of any directory returns a log or an `Error`, and the log serves only
//! records written at those offsets (offset, timestamp, key, value, headers), then takes an
//! append; `OffsetStore::open` of any journal keeps the valid entries and takes a commit.
//!
//! Inputs are arbitrary bytes, and valid files damaged at random (bits flipped, bytes inserted,
//! deleted, cut; checkpoint and log start rewritten with valid CRCs but lying values). Segments
//! are batches of one to several records, as appends write them. Named tests at the end pin
//! the checks after a batch's CRC.

#[path = "../../fuzz/src/lib.rs"]
mod oracle;

use std::fs;
use std::path::Path;

use nanokafka::internals::storage::checkpoint::{Checkpoint, LogStartFile, CHECKPOINT_FILE};
use nanokafka::internals::storage::format::{self, Decoded, HEADER_LEN};
use nanokafka::internals::storage::fs::OsFs;
use nanokafka::internals::storage::{LogConfig, PartitionLog, RecordBatch, StorageError};
use nanokafka::FsyncPolicy;
use oracle::{RawPartition, ReadPlan, Record, StateFile, Written, NOW};
use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn state_file<T: std::fmt::Debug + Clone>(
    valid: impl Strategy<Value = T>,
) -> impl Strategy<Value = StateFile<T>> {
    prop_oneof![
        Just(StateFile::Absent),
        bytes(48).prop_map(StateFile::Raw),
        valid.prop_map(StateFile::Valid),
    ]
}

fn read_plan() -> impl Strategy<Value = ReadPlan> {
    (
        prop_oneof![Just(1usize), 1..8usize, Just(1000)],
        0..8192usize,
    )
        .prop_map(|(max_records, max_bytes)| ReadPlan {
            max_records,
            max_bytes,
        })
}

/// A record's key, value and headers: small, so that a few dozen fill several segments.
fn record_strategy() -> impl Strategy<Value = Record> {
    let header = (bytes(6), prop::option::of(bytes(6)));
    (
        prop::option::of(bytes(12)),
        bytes(300),
        prop::collection::vec(header, 0..3),
    )
        .prop_map(|(key, value, headers)| Record {
            timestamp_ms: NOW,
            key,
            value,
            headers,
        })
}

/// Batches of one to several records, as appends write them.
fn batches_strategy(max_batches: usize) -> impl Strategy<Value = Vec<Vec<Record>>> {
    prop::collection::vec(
        prop::collection::vec(record_strategy(), 1..5),
        0..max_batches,
    )
}

/// One batch with header fields chosen freely (some breaking the rules after the CRC) and a
/// records section that is encoded records, possibly with their offset deltas shifted and
/// bytes appended, or noise; its length, magic and CRC match: what a buggy or foreign writer
/// could leave, which only the checks after the CRC can refuse.
fn crafted_batch() -> impl Strategy<Value = Vec<u8>> {
    let section = prop_oneof![
        (
            prop::collection::vec(record_strategy(), 1..4),
            0u32..2,
            bytes(3)
        )
            .prop_map(|(records, shift, tail)| {
                let mut batch = oracle::native_batch(0, &records, NOW);
                if shift > 0 {
                    batch.truncate(HEADER_LEN);
                    for (delta, r) in (shift..).zip(&records) {
                        let value = r.value.as_slice();
                        format::encode_record(
                            &mut batch,
                            delta,
                            r.key.as_deref(),
                            Some(value),
                            &[],
                        );
                    }
                }
                batch.extend(tail);
                (records.len() as i32, batch[HEADER_LEN..].to_vec())
            }),
        (0i32..4, bytes(40)),
    ];
    (
        section,
        any::<i64>(),
        prop_oneof![Just(0i16), Just(8), 0i16..64],
        -1i32..2,
        any::<bool>(),
    )
        .prop_map(
            |((count, section), base_offset, attributes, delta_error, count_negative)| {
                let mut header = vec![0u8; HEADER_LEN];
                header[0..8].copy_from_slice(&(base_offset % 1000).abs().to_be_bytes());
                header[21..23].copy_from_slice(&attributes.to_be_bytes());
                let last_delta = count - 1 + delta_error;
                header[23..27].copy_from_slice(&last_delta.to_be_bytes());
                header[27..35].copy_from_slice(&(NOW as i64).to_be_bytes());
                header[35..43].copy_from_slice(&(NOW as i64).to_be_bytes());
                header[43..57].copy_from_slice(&[0xff; 14]); // no producer
                let count = if count_negative { -count } else { count };
                header[57..61].copy_from_slice(&count.to_be_bytes());
                header.extend(section);
                oracle::as_batch(&header).unwrap()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn decode_of_arbitrary_bytes_never_panics(input in bytes(128)) {
        oracle::check_batch_decode(&input);
    }

    #[test]
    fn decode_of_arbitrary_bytes_in_a_valid_envelope_never_panics(input in bytes(160)) {
        if let Some(batch) = oracle::as_batch(&input) {
            oracle::check_batch_decode(&batch);
        }
    }

    #[test]
    fn decode_accepts_only_batches_that_verify_and_parse_as_documented(batch in crafted_batch()) {
        oracle::check_batch_decode(&batch);
    }

    #[test]
    fn decode_of_a_damaged_batch_never_serves_it(
        records in prop::collection::vec(record_strategy(), 1..5),
        at in any::<prop::sample::Index>(),
        mask in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let original = oracle::native_batch(7, &records, NOW);
        oracle::check_batch_decode(&original);
        let Decoded::Batch(header) = format::decode(&original) else {
            panic!("a native batch does not decode: {:?}", format::decode(&original))
        };
        let at = at.index(original.len());
        let mut batch = original.clone();
        batch[at] ^= mask;
        oracle::check_batch_decode(&batch);
        match format::decode(&batch) {
            // Base offset and leader epoch are outside the CRC (a broker patches them):
            // such a batch decodes, with that field changed, and recovery checks offsets.
            Decoded::Batch(flipped) if at < 8 || (12..16).contains(&at) => {
                prop_assert_eq!(flipped.crc, header.crc);
                prop_assert_eq!(flipped.records_count, header.records_count);
            }
            decoded => prop_assert!(
                !matches!(decoded, Decoded::Batch(_)),
                "a batch flipped at byte {} decoded", at
            ),
        }
        let cut = cut.index(original.len());
        let incomplete = matches!(format::decode(&original[..cut]), Decoded::Incomplete { .. });
        prop_assert!(incomplete, "a batch cut at {} is not incomplete", cut);
    }
}

/// An offsets journal of valid entries for a few groups.
fn journal(commits: &[(u8, u64)]) -> Vec<u8> {
    let dir = oracle::scratch_dir();
    let mut store =
        nanokafka::internals::storage::OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
    for &(group, offset) in commits {
        store.commit(&format!("group-{group}"), offset).unwrap();
    }
    drop(store);
    fs::read(
        dir.path()
            .join(nanokafka::internals::storage::offsets::JOURNAL_FILE),
    )
    .unwrap()
}

/// One change to a byte vector.
#[derive(Debug, Clone)]
enum Damage {
    Flip {
        at: prop::sample::Index,
        mask: u8,
    },
    Insert {
        at: prop::sample::Index,
        bytes: Vec<u8>,
    },
    Delete {
        at: prop::sample::Index,
        len: usize,
    },
    Truncate {
        at: prop::sample::Index,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    let at = any::<prop::sample::Index>();
    prop_oneof![
        (at.clone(), 1u8..).prop_map(|(at, mask)| Damage::Flip { at, mask }),
        (at.clone(), bytes(40)).prop_map(|(at, bytes)| Damage::Insert { at, bytes }),
        (at.clone(), 1..64usize).prop_map(|(at, len)| Damage::Delete { at, len }),
        at.prop_map(|at| Damage::Truncate { at }),
    ]
}

impl Damage {
    fn apply(&self, bytes: &mut Vec<u8>) {
        let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
        match self {
            Damage::Flip { at: i, mask } if !bytes.is_empty() => {
                let i = i.index(bytes.len());
                bytes[i] ^= mask;
            }
            Damage::Flip { .. } => {}
            Damage::Insert { at: i, bytes: new } => {
                let i = at(i, bytes.len());
                bytes.splice(i..i, new.iter().copied());
            }
            Damage::Delete { at: i, len } => {
                let i = at(i, bytes.len());
                let end = (i + len).min(bytes.len());
                bytes.drain(i..end);
            }
            Damage::Truncate { at: i } => {
                let i = at(i, bytes.len());
                bytes.truncate(i);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn offsets_journal_of_arbitrary_bytes(
        input in bytes(256),
        group in "[a-z]{1,8}",
        offset in any::<u64>(),
    ) {
        let dir = oracle::scratch_dir();
        oracle::check_offsets_journal(dir.path(), &input, &group, offset);
    }

    #[test]
    fn offsets_journal_damaged(
        commits in prop::collection::vec((0u8..4, any::<u64>()), 0..12),
        damages in prop::collection::vec(damage(), 1..4),
        group in 0u8..6,
        offset in any::<u64>(),
    ) {
        let mut bytes = journal(&commits);
        for d in &damages {
            d.apply(&mut bytes);
        }
        let dir = oracle::scratch_dir();
        oracle::check_offsets_journal(dir.path(), &bytes, &format!("group-{group}"), offset);
    }
}

/// A checkpoint with a valid CRC; `size_matches` makes its `active_size` the real one, so that
/// a clean checkpoint is believed.
fn lying_checkpoint() -> impl Strategy<Value = (bool, u64, bool, u64)> {
    (
        any::<bool>(),
        prop_oneof![0..64u64, any::<u64>()],
        any::<bool>(),
        any::<u64>(),
    )
}

fn checkpoint_from(
    (clean, recovery_point, size_matches, size): (bool, u64, bool, u64),
    real_size: u64,
) -> Checkpoint {
    Checkpoint {
        clean,
        recovery_point,
        log_end_offset: 0,
        active_size: if size_matches { real_size } else { size },
    }
}

/// Raw segment bytes: garbage, or valid batches followed by garbage.
fn raw_log() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        bytes(256),
        (batches_strategy(6), bytes(40)).prop_map(|(batches, tail)| {
            let mut log = oracle::native_segment(&batches);
            log.extend_from_slice(&tail);
            log
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn open_of_an_arbitrary_segment(
        log in raw_log(),
        index in prop::option::of(bytes(64)),
        checkpoint in state_file(lying_checkpoint()),
        log_start in state_file(prop_oneof![0..16u64, any::<u64>()]),
        plan in read_plan(),
    ) {
        let checkpoint = match checkpoint {
            StateFile::Valid(c) => StateFile::Valid(checkpoint_from(c, log.len() as u64)),
            StateFile::Raw(b) => StateFile::Raw(b),
            StateFile::Absent => StateFile::Absent,
        };
        let partition = RawPartition { log, index, checkpoint, log_start };
        let dir = oracle::scratch_dir();
        partition.write_to(dir.path());
        let _ = oracle::check_partition(
            dir.path(),
            LogConfig::default(),
            Written::RawSegment(&partition.log),
            plan,
        );
    }
}

/// How a valid log is damaged before it is opened again.
#[derive(Debug, Clone)]
enum FileDamage {
    /// Damages the `n % files`-th file of the directory (segments, indexes, checkpoint, log start).
    Bytes(prop::sample::Index, Damage),
    /// Rewrites the checkpoint with a valid CRC and these values.
    Checkpoint((bool, u64, bool, u64)),
    /// Rewrites the log start with a valid CRC.
    LogStart(u64),
}

fn file_damage() -> impl Strategy<Value = FileDamage> {
    prop_oneof![
        4 => (any::<prop::sample::Index>(), damage()).prop_map(|(i, d)| FileDamage::Bytes(i, d)),
        1 => lying_checkpoint().prop_map(FileDamage::Checkpoint),
        1 => (0..80u64).prop_map(FileDamage::LogStart),
    ]
}

fn apply_file_damage(dir: &Path, damage: &FileDamage) {
    match damage {
        FileDamage::Bytes(which, d) => {
            let mut files: Vec<_> = fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            files.sort();
            let path = &files[which.index(files.len())];
            let mut bytes = fs::read(path).unwrap();
            d.apply(&mut bytes);
            fs::write(path, bytes).unwrap();
        }
        FileDamage::Checkpoint(values) => {
            let active = fs::read_dir(dir)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.extension().is_some_and(|e| e == "log"))
                .max()
                .unwrap();
            let size = fs::metadata(active).unwrap().len();
            let _ = fs::remove_file(dir.join(CHECKPOINT_FILE));
            checkpoint_from(*values, size).write(&OsFs, dir).unwrap();
        }
        FileDamage::LogStart(start) => LogStartFile::open(&OsFs, dir)
            .unwrap()
            .0
            .store(*start)
            .unwrap(),
    }
}

/// Appends each of `batches` with one `append_batch` (one batch on disk each), then closes
/// cleanly or crashes (drops the log); returns the records as they must be served, by offset.
fn write_log(dir: &Path, config: LogConfig, batches: &[Vec<Record>], clean: bool) -> Vec<Record> {
    let (mut log, _) = PartitionLog::open(dir, config, NOW).unwrap();
    for records in batches {
        let mut batch = RecordBatch::new();
        for r in records {
            let headers: Vec<(&[u8], Option<&[u8]>)> = r
                .headers
                .iter()
                .map(|(k, v)| (k.as_slice(), v.as_deref()))
                .collect();
            batch.push_header_refs(r.key.as_deref(), &r.value, &headers);
        }
        log.append_batch(&mut batch, NOW).unwrap();
    }
    if clean {
        log.close().unwrap();
    } else {
        drop(log);
    }
    batches.concat()
}

fn config(segment_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        fsync: FsyncPolicy::Never,
        ..LogConfig::default()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn open_of_a_damaged_log(
        batches in batches_strategy(20),
        segment_bytes in prop_oneof![Just(1024u64), Just(6000), Just(1 << 20)],
        clean in any::<bool>(),
        damages in prop::collection::vec(file_damage(), 0..4),
        plan in read_plan(),
    ) {
        let dir = oracle::scratch_dir();
        let records = write_log(dir.path(), config(segment_bytes), &batches, clean);
        for d in &damages {
            apply_file_damage(dir.path(), d);
        }
        let written = Written::Records(&records);
        let result = oracle::check_partition(dir.path(), config(segment_bytes), written, plan);
        if damages.is_empty() {
            let served = result.unwrap();
            prop_assert_eq!(served.len(), records.len(), "an undamaged log serves every record");
        }
    }
}

/// A native batch of `values` at offset 0 whose header, records section or both `change`
/// alters; the CRC is then recomputed, so only the checks after it can refuse the batch.
fn batch_with(values: &[&[u8]], change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let records: Vec<Record> = values
        .iter()
        .map(|v| Record {
            timestamp_ms: NOW,
            key: None,
            value: v.to_vec(),
            headers: Vec::new(),
        })
        .collect();
    let mut batch = oracle::native_batch(0, &records, NOW);
    change(&mut batch);
    oracle::as_batch(&batch).unwrap()
}

/// `batch` as the only segment of a crashed partition: what `read` serves from offset 0, or
/// how it fails.
fn read_alone(batch: &[u8]) -> Result<usize, StorageError> {
    let dir = oracle::scratch_dir();
    fs::write(dir.path().join(oracle::FIRST_SEGMENT), batch).unwrap();
    let (mut log, _) = PartitionLog::open(dir.path(), LogConfig::default(), NOW).unwrap();
    log.read(0, 100, 1 << 20).map(|fetched| fetched.len())
}

/// The record count is under the CRC but must still agree with the offsets the batch claims:
/// more records than its offsets hold is invalid; fewer (what the log cleaner leaves) decodes,
/// but a records section holding more records than the count says is never served.
#[test]
fn a_batch_whose_record_count_disagrees_with_its_last_offset_delta_is_invalid() {
    let too_many = batch_with(&[b"a", b"b", b"c"], |b| {
        b[57..61].copy_from_slice(&4i32.to_be_bytes());
    });
    assert!(matches!(format::decode(&too_many), Decoded::Invalid { .. }));
    oracle::check_batch_decode(&too_many);
    let too_few = batch_with(&[b"a", b"b", b"c"], |b| {
        b[57..61].copy_from_slice(&2i32.to_be_bytes());
    });
    assert!(matches!(format::decode(&too_few), Decoded::Batch(_)));
    oracle::check_batch_decode(&too_few);
    assert!(matches!(
        read_alone(&too_few),
        Err(StorageError::Corrupt { .. })
    ));
}

/// Bytes after the last record, under a valid CRC: the batch verifies, but its records
/// section does not parse to exactly its records, so reads refuse it as `Corrupt` rather
/// than serve the records and ignore the rest.
#[test]
fn a_batch_with_bytes_after_its_last_record_is_not_served() {
    let batch = batch_with(&[b"a", b"b"], |b| b.extend_from_slice(&[0, 0, 0]));
    assert!(matches!(format::decode(&batch), Decoded::Batch(_)));
    oracle::check_batch_decode(&batch);
    assert!(matches!(
        read_alone(&batch),
        Err(StorageError::Corrupt { .. })
    ));
}

/// Records out of order under a valid CRC (offset deltas 1, 0): served, they would put the
/// second record at the first one's offset.
#[test]
fn a_batch_whose_offset_deltas_are_not_their_positions_is_not_served() {
    let batch = batch_with(&[b"a", b"b"], |b| {
        b.truncate(HEADER_LEN);
        format::encode_record(b, 1, None, Some(b"a"), &[]);
        format::encode_record(b, 0, None, Some(b"b"), &[]);
    });
    oracle::check_batch_decode(&batch);
    assert!(matches!(
        read_alone(&batch),
        Err(StorageError::Corrupt { .. })
    ));
}

/// A batch that does not parse (bytes after its last record, under a valid CRC) after one
/// that does: a read of both returns the first batch's records and none of the second's,
/// although the second's records parse before its damage is found.
#[test]
fn a_batch_that_does_not_parse_after_a_good_one_serves_none_of_its_records() {
    let good = batch_with(&[b"a", b"b"], |_| {});
    let bad = batch_with(&[b"c", b"d"], |b| {
        b[0..8].copy_from_slice(&2i64.to_be_bytes());
        b.extend_from_slice(&[0, 0, 0]);
    });
    assert!(matches!(format::decode(&bad), Decoded::Batch(_)));
    let segment = [good, bad].concat();
    assert_eq!(read_alone(&segment).unwrap(), 2);
}
