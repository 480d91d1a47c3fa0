//! Read-only views of the on-disk format, for the `nanokafka` command line's inspection
//! subcommands (`consume`, `dump`, `verify`): the batches of a segment file with their
//! header fields and whether each verifies, the records of stored batches as owned values,
//! and a scan of a whole data directory for damage.
//!
//! Nothing here takes a lock or writes: a segment is read as a file, and a damaged byte is
//! reported, never repaired (repair is the broker's recovery, on open). `partition.rs` sorts
//! out a partition directory's files as its next open will have them (the log cleaner's
//! interrupted swaps included) and checks the offsets of its batches across segments.

mod partition;

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::storage::format::MAX_DECOMPRESSED_BYTES;
use crate::storage::format::{self, BatchHeader, Decoded, HEADER_LEN};
pub use partition::{
    partition_dirs, partition_files, CleanerFile, OffsetCheck, PartitionFiles, PlannedSegment,
    ScannedSegment,
};

/// The file that marks a directory as a NanoKafka data directory.
pub use crate::storage::data_dir::FORMAT_FILE;

/// One batch of a segment file, as `nanokafka dump` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchSummary {
    /// Byte position of the batch in the file.
    pub position: u64,
    /// Bytes of the whole batch (its 12-byte offset and length prefix included).
    pub size: u64,
    pub base_offset: u64,
    pub last_offset: u64,
    pub count: u32,
    /// The batch's base timestamp and max timestamp (ms since the Unix epoch).
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// `none`, `gzip`, `snappy`, `lz4`, `zstd`, or the unknown id's description.
    pub codec: String,
    /// A transaction marker (takes offsets, holds no records).
    pub control: bool,
    /// The stored CRC-32C matches the bytes, and the header's rules hold.
    pub crc_valid: bool,
    /// Why the batch does not verify (CRC, header or records), when it does not.
    pub error: Option<String>,
}

/// Bytes of a segment file that are not valid batches, a batch at offsets where it cannot
/// be, or an index entry that points at the wrong bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    pub file: PathBuf,
    /// First damaged byte.
    pub position: u64,
    /// Bytes from `position` that are damaged (a whole batch, or the rest of the file when
    /// no batch boundary can be trusted after it; 0 for offsets missing between segments).
    pub length: u64,
    /// The first offset concerned, when known: the batch's base offset as stored (outside
    /// its CRC, so it may be the damaged part), the index entry's offset, or the first
    /// offset missing.
    pub offset: Option<u64>,
    pub reason: String,
}

/// One stored record, owned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredRecord {
    pub offset: u64,
    /// As stored: the producer's (or the broker's) milliseconds, -1 for none.
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    /// `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Walks the batches of a segment file's bytes. A batch whose length and magic are sane is
/// listed even when its CRC or records fail (with `crc_valid: false`), and the walk goes on
/// after it, as kafka-dump-log does; bytes that are not a batch at all end the walk, and the
/// damage says where.
pub fn scan_segment(file: &Path, bytes: &[u8]) -> (Vec<BatchSummary>, Vec<Damage>) {
    let mut batches = Vec::new();
    let mut damage = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let damaged = |length: usize, offset: Option<u64>, reason: String| Damage {
            file: file.to_owned(),
            position: at as u64,
            length: length as u64,
            offset,
            reason,
        };
        let (header, error) = match format::decode(rest) {
            Decoded::Batch(header) => {
                let error = check_records(rest, &header).err();
                (header, error)
            }
            Decoded::Incomplete { batch_len } => {
                let reason = match batch_len {
                    Some(len) => format!(
                        "torn tail: a batch of {len} bytes, {} in the file",
                        rest.len()
                    ),
                    None => format!("torn tail: {} bytes, less than a batch header", rest.len()),
                };
                damage.push(damaged(rest.len(), None, reason));
                break;
            }
            Decoded::Invalid { reason } => match framed_header(rest) {
                Some(header) => (header, Some(reason)),
                None => {
                    damage.push(damaged(rest.len(), None, reason));
                    break;
                }
            },
        };
        if let Some(reason) = &error {
            damage.push(damaged(
                header.batch_len,
                Some(header.base_offset),
                reason.clone(),
            ));
        }
        batches.push(summary(at, &header, error));
        at += header.batch_len;
    }
    (batches, damage)
}

/// The header of a batch that failed verification but whose frame (length, magic, fields)
/// can be trusted enough to skip it and read on.
fn framed_header(bytes: &[u8]) -> Option<BatchHeader> {
    let header = BatchHeader::parse(bytes)?;
    let framed = bytes[16] == format::MAGIC
        && header.batch_len >= HEADER_LEN
        && header.batch_len <= bytes.len()
        && header.batch_len <= format::MAX_BATCH_LEN;
    framed.then_some(header)
}

fn summary(position: usize, header: &BatchHeader, error: Option<String>) -> BatchSummary {
    BatchSummary {
        position: position as u64,
        size: header.batch_len as u64,
        base_offset: header.base_offset,
        last_offset: header.last_offset(),
        count: header.records_count,
        base_timestamp: header.base_timestamp,
        max_timestamp: header.max_timestamp,
        codec: match header.compression() {
            Ok(codec) => codec.name().to_owned(),
            Err(reason) => reason,
        },
        control: header.is_control(),
        crc_valid: error.is_none(),
        error,
    }
}

/// Checks that a verified batch's records decompress and parse.
fn check_records(batch: &[u8], header: &BatchHeader) -> Result<(), String> {
    let mut scratch = Vec::new();
    let section = format::records_section(
        &batch[..header.batch_len],
        header,
        MAX_DECOMPRESSED_BYTES,
        &mut scratch,
    )?;
    format::validate_records(section, header, |_| {})
}

/// The records of whole, valid batches (as a segment holds them, or as the broker's batch
/// reads return them), in offset order; control batches hold none.
///
/// # Errors
/// The position and reason of the first batch that does not verify or decode.
pub fn batch_records(bytes: &[u8]) -> Result<Vec<StoredRecord>, (u64, String)> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let header = match format::decode(&bytes[at..]) {
            Decoded::Batch(header) => header,
            Decoded::Incomplete { .. } => return Err((at as u64, "torn batch".into())),
            Decoded::Invalid { reason } => return Err((at as u64, reason)),
        };
        let batch = &bytes[at..at + header.batch_len];
        if !header.is_control() {
            push_records(batch, &header, &mut records).map_err(|e| (at as u64, e))?;
        }
        at += header.batch_len;
    }
    Ok(records)
}

fn push_records(
    batch: &[u8],
    header: &BatchHeader,
    out: &mut Vec<StoredRecord>,
) -> Result<(), String> {
    let mut scratch = Vec::new();
    let section = format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, &mut scratch)?;
    format::validate_records(section, header, |r| {
        out.push(StoredRecord {
            offset: header.base_offset + u64::from(r.offset_delta),
            timestamp_ms: header.record_timestamp(r.timestamp_delta),
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.map(<[u8]>::to_vec),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
        });
    })
}

/// The entries of a segment's `.index` (see `storage::index` for its bytes) that do not
/// point where they say: past a whole number of entries, out of order, or at a position
/// that is not the start of a valid batch of the right base offset. `batches` are the
/// segment's, from [`scan_segment`]. The index is derived data (recovery rebuilds it), so
/// such damage loses nothing, but a broker trusting it would read the wrong bytes.
pub fn check_index(
    index: &Path,
    bytes: &[u8],
    segment_base: u64,
    batches: &[BatchSummary],
) -> Vec<Damage> {
    const ENTRY: usize = 8;
    let damaged = |position: usize, length: usize, offset: Option<u64>, reason: String| Damage {
        file: index.to_owned(),
        position: position as u64,
        length: length as u64,
        offset,
        reason,
    };
    let mut damage = Vec::new();
    let whole = bytes.len() - bytes.len() % ENTRY;
    if whole != bytes.len() {
        let reason = format!(
            "{} bytes past the last whole 8-byte entry",
            bytes.len() - whole
        );
        damage.push(damaged(whole, bytes.len() - whole, None, reason));
    }
    let mut previous: Option<(u64, u64)> = None;
    for (i, entry) in bytes[..whole].chunks_exact(ENTRY).enumerate() {
        let relative = u32::from_le_bytes(entry[..4].try_into().expect("4 bytes"));
        let position = u32::from_le_bytes(entry[4..].try_into().expect("4 bytes"));
        let (offset, position) = (segment_base + u64::from(relative), u64::from(position));
        let batch = batches.iter().find(|b| b.position == position);
        let reason = match batch {
            _ if previous.is_some_and(|(o, p)| o >= offset || p >= position) => {
                Some("not after the previous entry".to_owned())
            }
            None => Some(format!("position {position} is not the start of a batch")),
            Some(b) if !b.crc_valid => Some(format!("position {position} is a damaged batch")),
            Some(b) if b.base_offset != offset => Some(format!(
                "offset {offset}, but the batch at position {position} starts at {}",
                b.base_offset
            )),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            let reason = format!("entry {i}: {reason}");
            damage.push(damaged(i * ENTRY, ENTRY, Some(offset), reason));
        }
        previous = Some((offset, position));
    }
    damage
}

/// The exclusive lock of a data directory, held by a reader that must not see it change
/// (`nanokafka verify`): taken without waiting, and without writing (the lock file keeps
/// naming the last broker). Released when dropped.
#[derive(Debug)]
pub struct ReadLock {
    _file: std::fs::File,
}

/// Takes the lock of the data directory at `data_dir`, which must exist.
///
/// # Errors
/// `DataDirLocked` naming the holder when a broker has it open; `Io` when the lock file
/// cannot be opened.
pub fn lock_for_reading(data_dir: &Path) -> crate::Result<ReadLock> {
    use std::io::Read;
    let path = data_dir.join(crate::storage::data_dir::LOCK_FILE);
    let io = |e: std::io::Error| {
        crate::Error::from(crate::storage::error::StorageError::io(
            "open lock file",
            &path,
            e,
        ))
    };
    // Opened for writing only because some systems lock only files opened so; never written.
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(ReadLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = match holder.trim() {
                "" => "unknown holder".to_owned(),
                pid => format!("pid {pid}"),
            };
            Err(crate::Error::DataDirLocked {
                path: data_dir.to_owned(),
                holder,
            })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::format::{assign_base_offset, encode_client_batch, ClientRecord};

    /// Two one-record batches, offsets 0 and 1, back to back; and where the second starts.
    fn two_batches() -> (Vec<u8>, usize) {
        let record = |value: &'static [u8]| ClientRecord {
            timestamp_ms: 1_000,
            key: Some(b"k"),
            value: Some(value),
            headers: &[],
        };
        let mut bytes = encode_client_batch(&[record(b"first")]);
        let second_at = bytes.len();
        let mut second = encode_client_batch(&[record(b"second")]);
        assign_base_offset(&mut second, 1);
        bytes.extend(second);
        (bytes, second_at)
    }

    #[test]
    fn valid_batches_scan_clean_and_decode() {
        let (bytes, second_at) = two_batches();
        let (batches, damage) = scan_segment(Path::new("s.log"), &bytes);
        assert!(damage.is_empty(), "{damage:?}");
        let positions: Vec<u64> = batches.iter().map(|b| b.position).collect();
        assert_eq!(positions, [0, second_at as u64]);
        assert!(batches.iter().all(|b| b.crc_valid && b.codec == "none"));
        let records = batch_records(&bytes).unwrap();
        assert_eq!(records[1].offset, 1);
        assert_eq!(records[1].value.as_deref(), Some(&b"second"[..]));
    }

    #[test]
    fn a_bad_length_ends_the_walk_with_the_rest_of_the_file_damaged() {
        let (mut bytes, second_at) = two_batches();
        bytes[second_at + 8..second_at + 12].copy_from_slice(&i32::MAX.to_be_bytes());
        let (batches, damage) = scan_segment(Path::new("s.log"), &bytes);
        assert_eq!(batches.len(), 1);
        assert_eq!(damage.len(), 1);
        assert_eq!(damage[0].position, second_at as u64);
        assert_eq!(damage[0].length, (bytes.len() - second_at) as u64);
        assert!(batch_records(&bytes).is_err());
    }

    #[test]
    fn a_bad_crc_is_one_damaged_batch_and_the_walk_goes_on() {
        let (mut bytes, second_at) = two_batches();
        bytes[30] ^= 1; // inside the first batch's CRC-covered header
        let (batches, damage) = scan_segment(Path::new("s.log"), &bytes);
        assert_eq!(batches.len(), 2);
        assert!(!batches[0].crc_valid && batches[1].crc_valid);
        assert_eq!(
            (damage[0].position, damage[0].length),
            (0, second_at as u64)
        );
    }

    #[test]
    fn index_entries_must_point_at_their_batches() {
        let (bytes, second_at) = two_batches();
        let (batches, _) = scan_segment(Path::new("s.log"), &bytes);
        let entry = |relative: u32, position: u32| {
            let mut e = relative.to_le_bytes().to_vec();
            e.extend(position.to_le_bytes());
            e
        };
        let good = entry(1, second_at as u32);
        assert!(check_index(Path::new("s.index"), &good, 0, &batches).is_empty());
        let wrong_offset = entry(2, second_at as u32);
        assert_eq!(
            check_index(Path::new("s.index"), &wrong_offset, 0, &batches).len(),
            1
        );
        let mid_batch = entry(1, 5);
        assert_eq!(
            check_index(Path::new("s.index"), &mid_batch, 0, &batches).len(),
            1
        );
        let mut torn = good.clone();
        torn.extend([0, 0, 0]);
        let damage = check_index(Path::new("s.index"), &torn, 0, &batches);
        assert_eq!(
            (damage.len(), damage[0].position, damage[0].length),
            (1, 8, 3)
        );
    }
}
