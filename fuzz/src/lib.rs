//! The invariants every byte NanoKafka reads back from disk must satisfy, as plain functions.
//!
//! Two drivers feed them: the `cargo fuzz` targets in `fuzz_targets/` (coverage-guided, run by
//! hand) and the proptest fallback `tests/storage/fuzz_storage.rs` (run in CI), which includes this
//! file with `#[path]` so both check exactly the same things. It depends on nothing but
//! `nanokafka`'s public API, `std` and `tempfile`.
//!
//! The invariants:
//! * `format::decode` never panics. A batch it accepts has a CRC-32C that verifies, magic 2, a
//!   length within bounds and a record count that matches its last offset delta, checked by
//!   `layout.rs` (the documented layout, written again from the docs), not by the crate's
//!   code. Its records section is accepted by `format::validate_records` exactly when
//!   `layout.rs` accepts it, and both see the same records. An uncompressed batch laid out as
//!   this crate writes it re-encodes byte for byte from its parsed records and header fields
//!   (nothing in it is ignored or reinterpreted).
//! * `PartitionLog::open` of any directory never panics; it succeeds or returns a `StorageError`.
//!   Every record `read` then serves is verified data: offsets contiguous within a read, and
//!   (offset, timestamp, key, value, headers) those of a record written at that offset, or for
//!   arbitrary segment bytes, of a record of a valid batch in the file at that offset. A read
//!   that cannot serve verified data fails with `StorageError::Corrupt`. The log accepts an
//!   append afterwards and serves it, also after a clean close and reopen.
//! * `OffsetStore::open` of any journal never panics, keeps exactly the entries before the
//!   first bad one, and a commit made afterwards survives a reopen.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use nanokafka::internals::storage::checkpoint::{
    Checkpoint, LogStartFile, CHECKPOINT_FILE, LOG_START_FILE,
};
use nanokafka::internals::storage::fetch::RecordRef;
use nanokafka::internals::storage::format::{
    self, BatchHeader, Decoded, NativeSeal, TimestampType, HEADER_LEN, MAX_BATCH_LEN,
    MAX_DECOMPRESSED_BYTES,
};
use nanokafka::internals::storage::fs::OsFs;
use nanokafka::internals::storage::offsets::JOURNAL_FILE;
use nanokafka::internals::storage::StorageError;
use nanokafka::internals::storage::{LogConfig, OffsetStore, PartitionLog, RecordBatch};
use nanokafka::FsyncPolicy;

mod layout;

use layout::{crc32c, encode_section, header_fields, parse_section, Parsed};

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

/// A record as a reader sees it: everything `read` serves besides its offset. A null value
/// (a tombstone) is served as an empty one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub timestamp_ms: u64,
    pub key: Option<Vec<u8>>,
    pub value: Vec<u8>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Record {
    /// What `read` returned.
    pub fn served(r: &RecordRef<'_>) -> Record {
        Record {
            timestamp_ms: r.timestamp_ms,
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.to_vec(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
        }
    }
}

/// The bytes of the uncompressed batch this crate writes for `records` at `base_offset`,
/// stamped `timestamp_ms` (`timestamp_ms` of each record is not used).
pub fn native_batch(base_offset: u64, records: &[Record], timestamp_ms: u64) -> Vec<u8> {
    let mut batch = vec![0; HEADER_LEN];
    for (delta, r) in (0u32..).zip(records) {
        let headers: Vec<(&[u8], Option<&[u8]>)> = r
            .headers
            .iter()
            .map(|(k, v)| (k.as_slice(), v.as_deref()))
            .collect();
        format::encode_record(
            &mut batch,
            delta,
            r.key.as_deref(),
            Some(&r.value),
            &headers,
        );
    }
    format::seal_native(
        &mut batch,
        NativeSeal {
            base_offset,
            records_count: records.len() as u32,
            timestamp_ms: timestamp_ms as i64,
            timestamp_type: TimestampType::CreateTime,
        },
    );
    batch
}

/// Batches of `records`, back to back from offset 0, each stamped [`NOW`]: a segment as the
/// log writes it with one append per batch.
pub fn native_segment(batches: &[Vec<Record>]) -> Vec<u8> {
    let mut log = Vec::new();
    let mut offset = 0;
    for records in batches.iter().filter(|b| !b.is_empty()) {
        log.extend(native_batch(offset, records, NOW));
        offset += records.len() as u64;
    }
    log
}

/// `bytes` made a batch as far as its envelope goes: the length field covering all of them,
/// magic 2 and the CRC recomputed; every field under the CRC stays as it was. `None` when
/// the bytes cannot be a batch's length. Random bytes almost never pass the CRC, so the checks
/// after it are fuzzed through this.
pub fn as_batch(bytes: &[u8]) -> Option<Vec<u8>> {
    if !(HEADER_LEN..=MAX_BATCH_LEN).contains(&bytes.len()) {
        return None;
    }
    let mut batch = bytes.to_vec();
    batch[8..12].copy_from_slice(&((bytes.len() - 12) as i32).to_be_bytes());
    batch[16] = format::MAGIC;
    let crc = crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    Some(batch)
}

/// The records section of a verified batch, decompressed if it is compressed.
fn section_of(batch: &[u8], header: &BatchHeader) -> Option<Vec<u8>> {
    let mut scratch = Vec::new();
    format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, &mut scratch)
        .ok()
        .map(<[u8]>::to_vec)
}

/// `format::decode(bytes)`: see the module docs. Never panics on a rejected input; panics when
/// an accepted batch breaks the documented layout.
pub fn check_batch_decode(bytes: &[u8]) {
    let header = match format::decode(bytes) {
        Decoded::Batch(header) => header,
        Decoded::Incomplete { batch_len: None } => return assert!(bytes.len() < 12),
        Decoded::Incomplete {
            batch_len: Some(len),
        } => return assert!(len > bytes.len() && len >= HEADER_LEN),
        Decoded::Invalid { .. } => return,
    };
    assert!(
        (HEADER_LEN..=MAX_BATCH_LEN.min(bytes.len())).contains(&header.batch_len),
        "batch of {} bytes in {}",
        header.batch_len,
        bytes.len()
    );
    let batch = &bytes[..header.batch_len];
    assert_eq!(header_fields(batch), header, "header fields");
    assert_eq!(batch[16], format::MAGIC, "magic");
    assert_eq!(crc32c(&batch[21..]), header.crc, "accepted with a bad CRC");
    assert!(header.base_offset <= i64::MAX as u64 && header.last_offset_delta <= i32::MAX as u32);
    assert!(
        u64::from(header.records_count) <= u64::from(header.last_offset_delta) + 1,
        "more records than the last offset delta leaves room for"
    );
    assert!(
        header.attributes & 0b111 <= 4,
        "an undefined codec accepted"
    );
    let Some(section) = section_of(batch, &header) else {
        return;
    };
    let mut theirs = Vec::new();
    let validated = format::validate_records(&section, &header, |r| {
        let headers = r
            .headers
            .iter()
            .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect();
        theirs.push((
            r.timestamp_delta,
            r.offset_delta,
            r.key.map(<[u8]>::to_vec),
            r.value.map(<[u8]>::to_vec),
            headers,
        ));
    });
    let ours = parse_section(&section, header.records_count, header.last_offset_delta);
    assert_eq!(
        validated.is_ok(),
        ours.is_some(),
        "validate_records said {validated:?}"
    );
    let Some(ours) = ours else { return };
    let ours_seen: Vec<_> = ours
        .iter()
        .map(|r| {
            let r = r.clone();
            (r.timestamp_delta, r.offset_delta, r.key, r.value, r.headers)
        })
        .collect();
    assert_eq!(theirs, ours_seen, "records parsed differently");
    if is_native(batch, &header, &ours) {
        let records: Vec<Record> = ours
            .into_iter()
            .map(|r| Record {
                timestamp_ms: 0,
                key: r.key,
                value: r.value.unwrap_or_default(),
                headers: r.headers,
            })
            .collect();
        let mut again = native_batch(header.base_offset, &records, header.base_timestamp as u64);
        if header.timestamp_type() == TimestampType::LogAppendTime {
            let (head, records) = again.split_at_mut(format::HEADER_LEN);
            format::set_log_append_time(head, records, header.max_timestamp);
        }
        assert_eq!(again, batch, "a native batch does not re-encode to itself");
    }
}

/// Whether `batch` has the shape of one this crate appends: uncompressed, no producer, leader
/// epoch 0, one timestamp, contiguous offsets, records with attributes 0, timestamp delta 0,
/// a value, and the shortest varints.
fn is_native(batch: &[u8], header: &BatchHeader, records: &[Parsed]) -> bool {
    let log_append_time = 1 << 3;
    header.attributes & !log_append_time == 0
        && u64::from(header.records_count) == u64::from(header.last_offset_delta) + 1
        && header.leader_epoch == 0
        && header.base_timestamp == header.max_timestamp
        && header.base_timestamp >= 0
        && (
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
        ) == (-1, -1, -1)
        && records
            .iter()
            .all(|r| r.attributes == 0 && r.timestamp_delta == 0 && r.value.is_some())
        && encode_section(records) == batch[HEADER_LEN..]
}

/// The records of the valid batch at the start of `bytes`, by offset: `None` when no valid
/// batch starts there, or its records do not parse (reads then fail as `Corrupt`); none for a
/// control batch (reads skip it).
fn batch_records(bytes: &[u8]) -> Option<(BatchHeader, BTreeMap<u64, Record>)> {
    let Decoded::Batch(header) = format::decode(bytes) else {
        return None;
    };
    let section = section_of(&bytes[..header.batch_len], &header)?;
    let records = parse_section(&section, header.records_count, header.last_offset_delta)?;
    let mut by_offset = BTreeMap::new();
    if header.is_control() {
        return Some((header, by_offset));
    }
    for r in records {
        let log_append_time = header.attributes & (1 << 3) != 0;
        let timestamp = if log_append_time {
            header.max_timestamp
        } else {
            header.base_timestamp.wrapping_add(r.timestamp_delta)
        };
        let record = Record {
            timestamp_ms: timestamp.max(0) as u64,
            key: r.key,
            value: r.value.unwrap_or_default(),
            headers: r.headers,
        };
        by_offset.insert(header.base_offset + u64::from(r.offset_delta), record);
    }
    Some((header, by_offset))
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

/// The records of the batches of `log` that chain from byte 0: each decodes, the first at
/// offset 0, each next one at the offset after the one before.
pub fn valid_prefix(log: &[u8]) -> BTreeMap<u64, Record> {
    let mut records = BTreeMap::new();
    let (mut at, mut expected) = (0, 0);
    while let Decoded::Batch(header) = format::decode(&log[at..]) {
        if header.base_offset != expected {
            break;
        }
        if let Some((_, batch)) = batch_records(&log[at..]) {
            records.extend(batch);
        }
        at += header.batch_len;
        expected = header.next_offset();
    }
    records
}

/// Every record of every valid batch found at any byte position of `log`, by offset.
pub fn records_anywhere(log: &[u8]) -> BTreeMap<u64, Vec<Record>> {
    let mut found: BTreeMap<u64, Vec<Record>> = BTreeMap::new();
    for at in 0..log.len() {
        if let Some((_, records)) = batch_records(&log[at..]) {
            for (offset, record) in records {
                found.entry(offset).or_default().push(record);
            }
        }
    }
    found
}

/// What the segments of a directory hold, as far as the check can know.
#[derive(Debug, Clone, Copy)]
pub enum Written<'a> {
    /// Records appended through the log, offset = index (then possibly damaged): a record
    /// served at offset `o` must be `records[o]`.
    Records(&'a [Record]),
    /// One segment of arbitrary bytes: a record served must be a record of a valid batch of
    /// that file, at that offset. When recovery did not trust the file (no clean shutdown),
    /// it was validated from byte 0, so the records of its valid prefix must be served:
    /// exactly those, unless damage below the checkpoint's recovery point was kept (then
    /// records after the damage may be served too).
    RawSegment(&'a [u8]),
}

/// How `read` is called: small reads cross more batch and chunk boundaries.
#[derive(Debug, Clone, Copy)]
pub struct ReadPlan {
    pub max_records: usize,
    pub max_bytes: usize,
}

/// Opens the partition in `dir` and checks every record it serves against `written`, then
/// appends and reads back (also after a clean reopen). Returns the records served by offset,
/// or the error `open` returned.
///
/// # Panics
/// When an invariant of the module docs does not hold.
pub fn check_partition(
    dir: &Path,
    config: LogConfig,
    written: Written<'_>,
    plan: ReadPlan,
) -> Result<BTreeMap<u64, Record>, StorageError> {
    let (mut log, report) = PartitionLog::open(dir, config, NOW)?;
    let served = read_everything(&mut log, plan);
    match written {
        Written::Records(records) => {
            for (&offset, record) in &served {
                assert_eq!(
                    Some(record),
                    records.get(offset as usize),
                    "offset {offset} served a record that was not written there"
                );
            }
        }
        Written::RawSegment(log_bytes) => {
            let anywhere = records_anywhere(log_bytes);
            for (&offset, record) in &served {
                assert!(
                    anywhere.get(&offset).is_some_and(|r| r.contains(record)),
                    "offset {offset} served a record of no valid batch of the file"
                );
            }
            if !report.clean_shutdown {
                let from_start: BTreeMap<u64, Record> = valid_prefix(log_bytes)
                    .into_iter()
                    .filter(|&(offset, _)| offset >= log.log_start_offset())
                    .collect();
                if report.corrupt_kept.is_empty() {
                    assert_eq!(
                        served, from_start,
                        "a validated segment serves its valid prefix"
                    );
                } else {
                    // Damage below the recovery point is kept and stepped over: the valid
                    // prefix is served, and so may be valid batches found after the damage.
                    for (offset, record) in &from_start {
                        assert_eq!(
                            served.get(offset),
                            Some(record),
                            "a validated segment serves its valid prefix"
                        );
                    }
                }
            }
        }
    }
    append_and_read_back(dir, config, log);
    Ok(served)
}

/// Failed reads in a row after which only offsets some batch could hold are tried.
const FAILURES_BEFORE_SKIPPING: u32 = 16;

/// Reads from the log start to the log end; a read that fails must fail with `Corrupt`, and
/// the next offset is tried, or after [`FAILURES_BEFORE_SKIPPING`] failures in a row the next
/// one a batch in the files could hold (a damaged base offset, outside the CRC, can put the
/// log end billions of offsets past the records). The batches a read returns must be valid
/// and hold its records.
fn read_everything(log: &mut PartitionLog, plan: ReadPlan) -> BTreeMap<u64, Record> {
    let (start, end) = (log.log_start_offset(), log.log_end_offset());
    assert!(start <= end, "log start {start} past log end {end}");
    let mut served = BTreeMap::new();
    let mut offset = start;
    let mut failures = 0;
    let mut held = None;
    // The records of every whole batch the reads returned, decoded here. A read that resumes
    // inside a batch an earlier read verified does not return that batch again: its records
    // must then be those of a valid batch in the files (the earlier read may have been
    // another caller's).
    let mut in_batches = BTreeMap::new();
    let mut on_disk = None;
    while offset < end {
        let fetched = match log.read(offset, plan.max_records, plan.max_bytes) {
            Ok(fetched) => fetched,
            Err(StorageError::Corrupt { .. }) => {
                failures += 1;
                offset += 1;
                if failures >= FAILURES_BEFORE_SKIPPING {
                    let held = held.get_or_insert_with(|| offsets_held(log.dir()));
                    offset = next_held(held, offset).unwrap_or(end);
                }
                continue;
            }
            Err(e) => panic!("read({offset}) failed with something other than Corrupt: {e}"),
        };
        failures = 0;
        if fetched.is_empty() {
            assert_eq!(
                fetched.next_offset(),
                end,
                "empty read of {offset} before the end"
            );
            break;
        }
        assert!(fetched.len() <= plan.max_records.max(1));
        for batch in fetched.batches() {
            let (header, records) = batch_records(batch).expect("a read returned a bad batch");
            assert_eq!(header.batch_len, batch.len());
            in_batches.extend(records);
        }
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
            let record = Record::served(&r);
            if in_batches.get(&r.offset) != Some(&record) {
                let on_disk = on_disk.get_or_insert_with(|| records_on_disk(log.dir()));
                assert!(
                    on_disk.get(&r.offset).is_some_and(|c: &Vec<Record>| c.contains(&record)),
                    "a record at {} neither in the batches returned with it nor in a valid batch on disk",
                    r.offset
                );
            }
            assert!(served.insert(r.offset, record).is_none());
        }
        assert_eq!(Some(fetched.next_offset()), expected);
        offset = fetched.next_offset();
    }
    served
}

/// `[base, next)` offsets of every batch that verifies at any byte position of the segments
/// in `dir`: the only offsets a read can serve.
fn offsets_held(dir: &Path) -> Vec<(u64, u64)> {
    let mut held = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let bytes = fs::read(&path).unwrap();
            for at in 0..bytes.len() {
                if let Decoded::Batch(header) = format::decode(&bytes[at..]) {
                    held.push((header.base_offset, header.next_offset()));
                }
            }
        }
    }
    held
}

/// Every record of every valid batch that starts at any byte of the segment files in `dir`, by
/// offset (arbitrary bytes may hold several batches claiming one offset).
fn records_on_disk(dir: &Path) -> BTreeMap<u64, Vec<Record>> {
    let mut on_disk: BTreeMap<u64, Vec<Record>> = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            let bytes = fs::read(&path).unwrap();
            for at in 0..bytes.len() {
                if let Some((_, records)) = batch_records(&bytes[at..]) {
                    for (offset, record) in records {
                        on_disk.entry(offset).or_default().push(record);
                    }
                }
            }
        }
    }
    on_disk
}

/// The first offset at or after `offset` that one of `held` holds.
fn next_held(held: &[(u64, u64)], offset: u64) -> Option<u64> {
    held.iter()
        .filter(|&&(_, next)| next > offset)
        .map(|&(base, _)| base.max(offset))
        .min()
}

/// Appends one record with headers, reads it back, closes cleanly, reopens and reads it again.
fn append_and_read_back(dir: &Path, config: LogConfig, mut log: PartitionLog) {
    let headers: [(&[u8], Option<&[u8]>); 2] = [(b"trace", Some(b"t-1")), (b"null", None)];
    let mut batch = RecordBatch::new();
    batch.push_header_refs(Some(b"after-recovery"), b"appended after open", &headers);
    let end = log.log_end_offset();
    let info = log
        .append_batch(&mut batch, NOW)
        .expect("append after open");
    assert_eq!(info.base_offset, end);
    let record = Record {
        timestamp_ms: info.timestamp_ms,
        key: Some(b"after-recovery".to_vec()),
        value: b"appended after open".to_vec(),
        headers: vec![
            (b"trace".to_vec(), Some(b"t-1".to_vec())),
            (b"null".to_vec(), None),
        ],
    };
    let read_back = |log: &mut PartitionLog| {
        let fetched = log
            .read(end, 10, 1 << 20)
            .expect("read of the appended record");
        let got: Vec<_> = fetched
            .iter()
            .map(|r| (r.offset, Record::served(&r)))
            .collect();
        assert_eq!(got, [(end, record.clone())]);
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
