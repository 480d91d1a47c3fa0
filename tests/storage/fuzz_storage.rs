//! Fuzzing of everything read from disk, as property tests: the CI fallback of the `cargo fuzz`
//! targets in `fuzz/` (README, "Fuzzing"). Both drive the same checks, `fuzz/src/lib.rs`,
//! included here: decode never panics and accepts only frames that re-encode to themselves;
//! `PartitionLog::open` of any directory returns a log or an `Error`, and the log serves only
//! records written at those offsets, byte for byte, then takes an append; `OffsetStore::open` of
//! any journal keeps the valid entries and takes a commit.
//!
//! Inputs are arbitrary bytes, and valid files damaged at random (bits flipped, bytes inserted,
//! deleted, cut; checkpoint and log start rewritten with valid CRCs but lying values). Shrunk
//! failures are frozen below as named tests.

#[path = "../../fuzz/src/lib.rs"]
mod oracle;

use std::fs;
use std::path::Path;

use nanokafka::storage::checkpoint::{Checkpoint, LogStartFile, CHECKPOINT_FILE};
use nanokafka::storage::fs::OsFs;
use nanokafka::storage::record;
use nanokafka::storage::{AppendRecord, LogConfig, PartitionLog};
use nanokafka::FsyncPolicy;
use oracle::{RawPartition, ReadPlan, StateFile, Written, NOW};
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

/// A record's key and value: small, so that a few dozen fill several segments.
fn record_strategy() -> impl Strategy<Value = (Option<Vec<u8>>, Vec<u8>)> {
    (prop::option::of(bytes(12)), bytes(300))
}

/// One frame with every header field chosen freely and a CRC that matches: what a buggy or
/// foreign writer could leave, which only the checks after the CRC can refuse.
fn crafted_frame() -> impl Strategy<Value = Vec<u8>> {
    (any::<u8>(), any::<u8>(), any::<u64>(), 0u32..40, bytes(32)).prop_map(
        |(magic, attributes, offset, key_len, body)| {
            let mut frame = Vec::new();
            frame.extend_from_slice(&((26 + body.len()) as u32).to_le_bytes());
            frame.extend_from_slice(&[0; 4]);
            frame.push(magic % 3); // mostly the current version, 1
            frame.push(attributes % 4);
            frame.extend_from_slice(&offset.to_le_bytes());
            frame.extend_from_slice(&NOW.to_le_bytes());
            frame.extend_from_slice(&key_len.to_le_bytes());
            frame.extend_from_slice(&body);
            let crc = crc32c::crc32c(&frame[8..]);
            frame[4..8].copy_from_slice(&crc.to_le_bytes());
            frame
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    #[test]
    fn decode_of_arbitrary_bytes_never_panics(input in bytes(128)) {
        oracle::check_record_decode(&input);
    }

    #[test]
    fn decode_of_arbitrary_bytes_with_a_valid_crc_never_panics(input in bytes(128)) {
        if let Some(fixed) = oracle::with_valid_crc(&input) {
            oracle::check_record_decode(&fixed);
        }
    }

    #[test]
    fn decode_accepts_only_frames_that_re_encode_to_themselves(frame in crafted_frame()) {
        oracle::check_record_decode(&frame);
    }

    #[test]
    fn decode_of_a_damaged_frame_never_serves_it(
        (key, value) in record_strategy(),
        at in any::<prop::sample::Index>(),
        mask in 1u8..,
        cut in any::<prop::sample::Index>(),
    ) {
        let mut frame = Vec::new();
        record::encode_into(&mut frame, 7, NOW, key.as_deref(), &value);
        let original = frame.clone();
        frame[at.index(original.len())] ^= mask;
        oracle::check_record_decode(&frame);
        let served = matches!(record::decode(&frame), record::Decoded::Record { .. });
        prop_assert!(!served, "a damaged frame decoded as a record");
        let cut = cut.index(original.len());
        let incomplete = matches!(record::decode(&original[..cut]), record::Decoded::Incomplete { .. });
        prop_assert!(incomplete, "a frame cut at {} is not incomplete", cut);
    }
}

/// An offsets journal of valid entries for a few groups.
fn journal(commits: &[(u8, u64)]) -> Vec<u8> {
    let dir = oracle::scratch_dir();
    let mut store = nanokafka::storage::OffsetStore::open(dir.path(), FsyncPolicy::Never).unwrap();
    for &(group, offset) in commits {
        store.commit(&format!("group-{group}"), offset).unwrap();
    }
    drop(store);
    fs::read(dir.path().join(nanokafka::storage::offsets::JOURNAL_FILE)).unwrap()
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

/// Raw segment bytes: garbage, or valid frames followed by garbage.
fn raw_log() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        bytes(256),
        (prop::collection::vec(record_strategy(), 0..6), bytes(40)).prop_map(|(records, tail)| {
            let mut log = Vec::new();
            for (offset, (key, value)) in (0u64..).zip(&records) {
                record::encode_into(&mut log, offset, NOW, key.as_deref(), value);
            }
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

/// Appends `records` in batches of `batch` through `PartitionLog`, then closes cleanly or
/// crashes (drops it); returns the frames they were written as, by offset.
fn write_log(
    dir: &Path,
    config: LogConfig,
    records: &[(Option<Vec<u8>>, Vec<u8>)],
    batch: usize,
    clean: bool,
) -> Vec<Vec<u8>> {
    let (mut log, _) = PartitionLog::open(dir, config, NOW).unwrap();
    for chunk in records.chunks(batch) {
        let batch: Vec<_> = chunk
            .iter()
            .map(|(key, value)| AppendRecord {
                key: key.as_deref(),
                value,
            })
            .collect();
        log.append(&batch, NOW).unwrap();
    }
    if clean {
        log.close().unwrap();
    } else {
        drop(log);
    }
    (0u64..)
        .zip(records)
        .map(|(offset, (key, value))| {
            let mut frame = Vec::new();
            record::encode_into(&mut frame, offset, NOW, key.as_deref(), value);
            frame
        })
        .collect()
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
        records in prop::collection::vec(record_strategy(), 0..60),
        segment_bytes in prop_oneof![Just(1024u64), Just(6000), Just(1 << 20)],
        batch in 1..8usize,
        clean in any::<bool>(),
        damages in prop::collection::vec(file_damage(), 0..4),
        plan in read_plan(),
    ) {
        let dir = oracle::scratch_dir();
        let frames = write_log(dir.path(), config(segment_bytes), &records, batch, clean);
        for d in &damages {
            apply_file_damage(dir.path(), d);
        }
        let result = oracle::check_partition(dir.path(), config(segment_bytes), Written::Records(&frames), plan);
        if damages.is_empty() {
            let served = result.unwrap();
            prop_assert_eq!(served.len(), frames.len(), "an undamaged log serves every record");
        }
    }
}

/// A frame with a valid CRC and the given attributes and `key_len` (no key bytes, value `v`).
fn frame_with(attributes: u8, key_len: u32) -> Vec<u8> {
    let mut frame = Vec::new();
    record::encode_into(&mut frame, 0, NOW, None, b"v");
    frame[9] = attributes;
    frame[26..30].copy_from_slice(&key_len.to_le_bytes());
    let crc = crc32c::crc32c(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    frame
}

// Shrunk by `decode_accepts_only_frames_that_re_encode_to_themselves`: attribute bit 1 was ignored.
#[test]
fn a_frame_with_unknown_attribute_bits_is_invalid() {
    let frame = frame_with(0b10, 0);
    assert!(matches!(
        record::decode(&frame),
        record::Decoded::Invalid { .. }
    ));
    oracle::check_record_decode(&frame);
}

// Shrunk by the same property once the above was fixed: the `key_len` bytes of a keyless frame
// were silently dropped from its value.
#[test]
fn a_keyless_frame_with_a_key_length_is_invalid() {
    let frame = frame_with(0, 1);
    assert!(matches!(
        record::decode(&frame),
        record::Decoded::Invalid { .. }
    ));
    oracle::check_record_decode(&frame);
}
