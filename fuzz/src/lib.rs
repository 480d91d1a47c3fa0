//! The invariants every byte NanoKafka reads back from disk must satisfy, as plain functions.
//!
//! Two drivers feed them: the `cargo fuzz` targets in `fuzz_targets/` (coverage-guided, run by
//! hand) and the proptest fallback `tests/storage/fuzz_storage.rs` (run in CI), which includes this
//! file with `#[path]` so both check exactly the same things. It depends on nothing but
//! `nanokafka`'s public API, `std` and `tempfile`.
//!
//! The invariants:
//! * `record::decode` never panics, and a frame it accepts re-encodes to the very bytes it
//!   was decoded from (nothing in a frame is ignored or reinterpreted).
//! * `PartitionLog::open` of any directory never panics; it succeeds or returns a `StorageError`.
//!   Every record `read` then serves is verified data: offsets contiguous within a read, and
//!   the record is one that was written there (byte-identical), never bytes whose CRC fails.
//!   A read that cannot serve verified data fails with `StorageError::Corrupt`. The log accepts an
//!   append afterwards and serves it, also after a clean close and reopen.
//! * `OffsetStore::open` of any journal never panics, keeps exactly the entries before the
//!   first bad one, and a commit made afterwards survives a reopen.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use nanokafka::storage::checkpoint::{Checkpoint, LogStartFile, CHECKPOINT_FILE, LOG_START_FILE};
use nanokafka::storage::fs::OsFs;
use nanokafka::storage::offsets::JOURNAL_FILE;
use nanokafka::storage::record::{self, Decoded, RecordRef};
use nanokafka::storage::StorageError;
use nanokafka::storage::{AppendRecord, LogConfig, OffsetStore, PartitionLog};
use nanokafka::FsyncPolicy;

/// The clock every open and append of these checks uses.
pub const NOW: u64 = 1_700_000_000_000;
/// The file name of the segment with base offset 0.
pub const FIRST_SEGMENT: &str = "00000000000000000000.log";
/// Its index.
pub const FIRST_INDEX: &str = "00000000000000000000.index";

/// A fresh directory, in RAM when the machine has `/dev/shm`: every open and close fsyncs.
pub fn scratch_dir() -> tempfile::TempDir {
    tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap())
}

/// The frame `record::encode_into` writes for `record`.
pub fn encode(record: &RecordRef<'_>) -> Vec<u8> {
    let mut frame = Vec::new();
    record::encode_into(
        &mut frame,
        record.offset,
        record.timestamp_ms,
        record.key,
        record.value,
    );
    frame
}

/// `record::decode(bytes)`: no panic; a `Record` re-encodes to the bytes it came from and
/// `view_verified` sees the same fields; `Incomplete` only when the frame does not fit.
pub fn check_record_decode(bytes: &[u8]) {
    match record::decode(bytes) {
        Decoded::Record { record, frame_len } => {
            assert!(
                frame_len <= bytes.len(),
                "frame of {frame_len} bytes in {}",
                bytes.len()
            );
            let frame = &bytes[..frame_len];
            assert_eq!(
                encode(&record),
                frame,
                "accepted frame does not re-encode to itself"
            );
            assert_eq!(record::view_verified(frame), record);
        }
        Decoded::Incomplete { frame_len: None } => assert!(bytes.len() < 4),
        Decoded::Incomplete {
            frame_len: Some(frame_len),
        } => assert!(frame_len > bytes.len()),
        Decoded::Invalid { .. } => {}
    }
}

/// `bytes` with the CRC field recomputed over what its `length` field covers (`None` when the
/// bytes are too short for it): random bytes almost never pass the CRC, so the checks after
/// it are fuzzed through this.
pub fn with_valid_crc(bytes: &[u8]) -> Option<Vec<u8>> {
    let length = u32::from_le_bytes(bytes.get(..4)?.try_into().unwrap()) as usize;
    let covered = bytes.get(8..(4 + length).max(8))?;
    let mut fixed = bytes.to_vec();
    fixed[4..8].copy_from_slice(&crc32c(covered).to_le_bytes());
    Some(fixed)
}

/// The content given to one of the partition's small state files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFile<T> {
    Absent,
    /// Arbitrary bytes: almost always fails its CRC and must then be ignored.
    Raw(Vec<u8>),
    /// A well-formed file (valid CRC) holding values that may lie about the log.
    Valid(T),
}

/// A partition directory with one segment, `00000000000000000000.log`, made of given bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawPartition {
    pub log: Vec<u8>,
    /// The `.index` (absent: recovery must rebuild it).
    pub index: Option<Vec<u8>>,
    pub checkpoint: StateFile<Checkpoint>,
    pub log_start: StateFile<u64>,
}

impl RawPartition {
    /// Writes the files into `dir`.
    pub fn write_to(&self, dir: &Path) {
        fs::write(dir.join(FIRST_SEGMENT), &self.log).unwrap();
        if let Some(index) = &self.index {
            fs::write(dir.join(FIRST_INDEX), index).unwrap();
        }
        match &self.checkpoint {
            StateFile::Absent => {}
            StateFile::Raw(bytes) => fs::write(dir.join(CHECKPOINT_FILE), bytes).unwrap(),
            StateFile::Valid(checkpoint) => checkpoint.write(&OsFs, dir).unwrap(),
        }
        match &self.log_start {
            StateFile::Absent => {}
            StateFile::Raw(bytes) => fs::write(dir.join(LOG_START_FILE), bytes).unwrap(),
            StateFile::Valid(start) => LogStartFile::open(&OsFs, dir)
                .unwrap()
                .0
                .store(*start)
                .unwrap(),
        }
    }
}

/// The frames of `log` that chain from byte 0: each decodes, offsets 0, 1, 2, ...
pub fn valid_prefix(log: &[u8]) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Decoded::Record { record, frame_len } = record::decode(&log[at..]) {
        if record.offset != frames.len() as u64 {
            break;
        }
        frames.push(log[at..at + frame_len].to_vec());
        at += frame_len;
    }
    frames
}

/// What the segments of a directory hold, as far as the check can know.
#[derive(Debug, Clone, Copy)]
pub enum Written<'a> {
    /// Frames encoded for these records, offset = index (then possibly damaged): a record
    /// served at offset `o` must be exactly the frame of `records[o]`.
    Records(&'a [Vec<u8>]),
    /// One segment of arbitrary bytes: a record served must be a frame of that file. When
    /// recovery did not trust the file (no clean shutdown), it was validated from byte 0, so
    /// its valid prefix must be served: exactly that, unless damage below the checkpoint's
    /// recovery point was kept (then frames after the damage may be served too).
    RawSegment(&'a [u8]),
}

/// How `read` is called: small reads cross more frame and chunk boundaries.
#[derive(Debug, Clone, Copy)]
pub struct ReadPlan {
    pub max_records: usize,
    pub max_bytes: usize,
}

/// Opens the partition in `dir` and checks every record it serves against `written`, then
/// appends and reads back (also after a clean reopen). Returns the frames served by offset,
/// or the error `open` returned.
///
/// # Panics
/// When an invariant of the module docs does not hold.
pub fn check_partition(
    dir: &Path,
    config: LogConfig,
    written: Written<'_>,
    plan: ReadPlan,
) -> Result<BTreeMap<u64, Vec<u8>>, StorageError> {
    let (mut log, report) = PartitionLog::open(dir, config, NOW)?;
    let served = read_everything(&mut log, plan);
    for (&offset, frame) in &served {
        match written {
            Written::Records(frames) => assert_eq!(
                Some(frame),
                frames.get(offset as usize),
                "offset {offset} served a frame that was not written there"
            ),
            Written::RawSegment(log_bytes) => assert!(
                log_bytes
                    .windows(frame.len())
                    .any(|w| w == frame.as_slice()),
                "offset {offset} served a frame that is not in the file"
            ),
        }
    }
    if let Written::RawSegment(log_bytes) = written {
        if !report.clean_shutdown {
            let prefix: BTreeMap<u64, Vec<u8>> = (0u64..).zip(valid_prefix(log_bytes)).collect();
            let from_start: BTreeMap<u64, Vec<u8>> = prefix
                .into_iter()
                .filter(|&(offset, _)| offset >= log.log_start_offset())
                .collect();
            if report.corrupt_kept.is_empty() {
                assert_eq!(
                    served, from_start,
                    "a validated segment serves its valid prefix"
                );
            } else {
                // Damage below the recovery point is kept and stepped over: the valid prefix
                // is served, and so may be valid frames found after the damage.
                for (offset, frame) in &from_start {
                    assert_eq!(
                        served.get(offset),
                        Some(frame),
                        "a validated segment serves its valid prefix"
                    );
                }
            }
        }
    }
    append_and_read_back(dir, config, log);
    Ok(served)
}

/// Reads from the log start to the log end; a read that fails must fail with `Corrupt`, and
/// the next offset is tried.
fn read_everything(log: &mut PartitionLog, plan: ReadPlan) -> BTreeMap<u64, Vec<u8>> {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start {start} past log end {end}");
    let mut served = BTreeMap::new();
    let mut offset = start;
    while offset < end {
        let fetched = match log.read(offset, plan.max_records, plan.max_bytes) {
            Ok(fetched) => fetched,
            Err(StorageError::Corrupt { .. }) => {
                offset += 1;
                continue;
            }
            Err(e) => panic!("read({offset}) failed with something other than Corrupt: {e}"),
        };
        if fetched.is_empty() {
            assert_eq!(
                fetched.next_offset(),
                end,
                "empty read of {offset} before the end"
            );
            break;
        }
        assert!(fetched.len() <= plan.max_records.max(1));
        let mut expected = None;
        for r in fetched.iter() {
            assert!(
                r.offset >= offset && r.offset < end,
                "offset {} out of range",
                r.offset
            );
            if let Some(expected) = expected {
                assert_eq!(r.offset, expected, "offsets not contiguous within a read");
            }
            expected = Some(r.offset + 1);
            let frame = encode(&r);
            assert_eq!(
                record::decode(&frame),
                Decoded::Record {
                    record: r,
                    frame_len: frame.len()
                }
            );
            assert!(served.insert(r.offset, frame).is_none());
        }
        assert_eq!(Some(fetched.next_offset()), expected);
        offset = fetched.next_offset();
    }
    served
}

/// Appends one record, reads it back, closes cleanly, reopens and reads it again.
fn append_and_read_back(dir: &Path, config: LogConfig, mut log: PartitionLog) {
    let record = AppendRecord {
        key: Some(b"after-recovery"),
        value: b"appended after open",
    };
    let end = log.log_end_offset();
    let info = log.append(&[record], NOW).expect("append after open");
    assert_eq!(info.base_offset, end);
    let read_back = |log: &mut PartitionLog| {
        let fetched = log
            .read(end, 10, 1 << 20)
            .expect("read of the appended record");
        let got: Vec<_> = fetched.iter().map(|r| (r.offset, r.key, r.value)).collect();
        assert_eq!(got, [(end, record.key, record.value)]);
    };
    read_back(&mut log);
    log.close().expect("close");
    let (mut log, _) = PartitionLog::open(dir, config, NOW).expect("reopen after close");
    read_back(&mut log);
}

/// The entries of an offsets journal, replayed by the documented format (`offsets.rs`), up
/// to the first that does not verify.
pub fn replay_journal(bytes: &[u8]) -> BTreeMap<String, u64> {
    let mut committed = BTreeMap::new();
    let mut rest = bytes;
    loop {
        let Some(header) = rest.get(..8) else {
            return committed;
        };
        let length = u32::from_le_bytes(header[..4].try_into().unwrap()) as usize;
        let crc = u32::from_le_bytes(header[4..].try_into().unwrap());
        let Some(body) = rest.get(8..8 + length) else {
            return committed;
        };
        if length < 10 || crc != crc32c(body) {
            return committed;
        }
        let group_len = u16::from_le_bytes(body[..2].try_into().unwrap()) as usize;
        if 2 + group_len + 8 != length {
            return committed;
        }
        let Ok(group) = std::str::from_utf8(&body[2..2 + group_len]) else {
            return committed;
        };
        let offset = u64::from_le_bytes(body[2 + group_len..].try_into().unwrap());
        committed.insert(group.to_owned(), offset);
        rest = &rest[8 + length..];
    }
}

/// CRC32C, bit by bit: slow, but independent of the code under test.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// `bytes` as `dir/offsets.journal`: `OffsetStore::open` keeps the entries before the first
/// bad one; `commit(group, offset)` afterwards survives a reopen, next to every other group.
pub fn check_offsets_journal(dir: &Path, bytes: &[u8], group: &str, offset: u64) {
    fs::write(dir.join(JOURNAL_FILE), bytes).unwrap();
    let mut expected = replay_journal(bytes);
    let mut store = OffsetStore::open(dir, FsyncPolicy::Never).expect("open offsets journal");
    let all = |store: &OffsetStore| -> BTreeMap<String, u64> {
        store.all().map(|(g, o)| (g.to_owned(), o)).collect()
    };
    assert_eq!(all(&store), expected, "replayed commits");
    store.commit(group, offset).expect("commit");
    expected.insert(group.to_owned(), offset);
    drop(store);
    let store = OffsetStore::open(dir, FsyncPolicy::Never).expect("reopen offsets journal");
    assert_eq!(all(&store), expected, "commits after reopen");
}
