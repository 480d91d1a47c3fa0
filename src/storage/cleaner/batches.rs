//! The batches of a segment being cleaned: read in bounded chunks, and each rewritten with
//! only the records the cleaner keeps.

use std::path::Path;

use super::offset_map::OffsetMap;
use crate::storage::compression::{self, Compression};
use crate::storage::error::{Result, StorageError};
use crate::storage::format::{
    self, BatchHeader, Decoded, RecordView, ATTR_DELETE_HORIZON, HEADER_LEN, MAX_DECOMPRESSED_BYTES,
};
use crate::storage::fs::StorageFile;

/// Bytes of a segment read at a time: a batch larger than this is read alone, whole (a batch
/// is at most `format::MAX_BATCH_LEN`; appends keep them far smaller).
pub const READ_CHUNK: usize = 1 << 20;

/// Attributes bits 0-2: the codec.
const CODEC_BITS: i16 = 0b111;

/// Calls `visit(position, header, bytes)` with each batch of the segment file `file` (`size`
/// bytes at `path`), in order, until it returns `false`. At most [`READ_CHUNK`] bytes (or
/// one larger batch) are in memory at once.
///
/// # Errors
/// `Corrupt` at the first batch that does not verify, or a torn one: the cleaner never
/// rewrites a segment over damage (it would have to choose what the damaged bytes held).
/// `Io` when the file cannot be read. Whatever `visit` fails with.
pub fn for_each_batch(
    file: &dyn StorageFile,
    path: &Path,
    size: u64,
    mut visit: impl FnMut(u64, &BatchHeader, &[u8]) -> Result<bool>,
) -> Result<()> {
    let mut buf = Vec::new();
    let (mut position, mut want) = (0u64, READ_CHUNK);
    while position < size {
        buf.resize(want.min((size - position) as usize), 0);
        file.read_exact_at(&mut buf, position)
            .map_err(|e| StorageError::io("read a segment to clean", path, e))?;
        let mut at = 0usize;
        while at < buf.len() {
            match format::decode(&buf[at..]) {
                Decoded::Batch(header) => {
                    let here = position + at as u64;
                    if !visit(here, &header, &buf[at..at + header.batch_len])? {
                        return Ok(());
                    }
                    at += header.batch_len;
                }
                Decoded::Incomplete { batch_len } => {
                    let needed = batch_len.unwrap_or(HEADER_LEN);
                    let here = position + at as u64;
                    if here + needed as u64 > size {
                        return Err(StorageError::corrupt(
                            path,
                            here,
                            format!("torn batch: needs {needed} bytes, the segment ends first"),
                        ));
                    }
                    want = want.max(needed);
                    break;
                }
                Decoded::Invalid { reason } => {
                    return Err(StorageError::corrupt(path, position + at as u64, reason))
                }
            }
        }
        if at > 0 {
            want = READ_CHUNK;
        }
        position += at as u64;
    }
    Ok(())
}

/// What decides which records of a batch stay.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// The latest offset of each key of the dirty section.
    pub map: &'a OffsetMap,
    pub now_ms: u64,
    pub delete_retention_ms: u64,
    /// The batch stays even if no record does: the last batch of an idempotent producer
    /// (its sequence numbers), or the last of a cleaned segment (its offsets).
    pub keep_empty: bool,
}

/// What the cleaner does with one batch.
#[derive(Debug, PartialEq, Eq)]
pub enum Cleaned {
    /// Every record stays and nothing in the header changes: the bytes are copied.
    Unchanged,
    /// No record stays and the batch need not: it is left out.
    Dropped,
    /// The batch rewritten with the records that stay.
    Rebuilt(Vec<u8>),
}

/// How many records and tombstones a batch lost, and when those it kept may go.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    pub records: u64,
    pub tombstones: u64,
    /// The batch's delete horizon when it keeps a tombstone (set by this cleaning or an
    /// earlier one): a pass at or after it drops them.
    pub kept_tombstones_horizon_ms: Option<u64>,
}

/// Decides which records of the verified batch `batch` stay (Kafka's `shouldRetainRecord`):
/// a keyed record stays unless the map holds a later offset of its key; a tombstone (a key
/// with a null value) stays besides only until its batch's delete horizon; a keyless record
/// always stays (a compacted topic has none; one that got there is kept rather than lost).
/// A tombstone that stays in a batch without a delete horizon gives the batch one, `now_ms +
/// delete_retention_ms`, as Kafka's cleaner does the first time it cleans it. Control
/// batches stay as they are.
///
/// A rewritten batch keeps its base offset, last offset delta, largest timestamp, producer
/// fields and codec (records recompressed with it, so a compressed topic stays compressed;
/// an empty batch is written uncompressed), and each record its offset and timestamp; its
/// count, length and CRC are new. Setting the horizon moves the base timestamp to it, so the
/// records' timestamp deltas are recomputed against it (Kafka's `deleteHorizonMs()`).
///
/// # Errors
/// The reason, when the records section does not decompress, parse or recompress.
pub fn clean_batch(
    batch: &[u8],
    header: &BatchHeader,
    rules: &Rules<'_>,
    scratch: &mut Vec<u8>,
    removed: &mut Removed,
) -> std::result::Result<Cleaned, String> {
    if header.is_control() {
        return Ok(Cleaned::Unchanged);
    }
    let section = format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, scratch)?;
    let horizon = header.delete_horizon_ms();
    let horizon_passed =
        horizon.is_some_and(|h| i64::try_from(rules.now_ms).unwrap_or(i64::MAX) >= h);
    // Every record and its key's hash first, then the map's latest offset of each key: the
    // lookups, one cache miss each in a large map, then run back to back (`OffsetMap::hash`).
    let mut records: Vec<(RecordView<'_>, Option<[u64; 2]>)> = Vec::new();
    format::validate_records(section, header, |record| {
        records.push((*record, record.key.map(|key| rules.map.hash(key))));
    })?;
    let latest: Vec<Option<u64>> = records
        .iter()
        .map(|(_, hash)| hash.and_then(|hash| rules.map.get_hash(hash)))
        .collect();
    let mut kept: Vec<RecordView<'_>> = Vec::new();
    let mut kept_tombstone = false;
    let mut gone = Removed::default();
    for ((record, _), latest) in records.iter().zip(latest) {
        let offset = header.base_offset + u64::from(record.offset_delta);
        let tombstone = record.key.is_some() && record.value.is_none();
        let keep = match record.key {
            None => true,
            Some(_) if latest.is_some_and(|latest| latest > offset) => false,
            Some(_) => !(tombstone && horizon_passed),
        };
        if keep {
            kept_tombstone |= tombstone;
            kept.push(*record);
        } else {
            gone.records += 1;
            gone.tombstones += u64::from(tombstone);
        }
    }
    removed.records += gone.records;
    removed.tombstones += gone.tombstones;
    let set_horizon = kept_tombstone && horizon.is_none();
    let new_horizon = rules.now_ms.saturating_add(rules.delete_retention_ms);
    if kept_tombstone {
        let kept = horizon.map_or(new_horizon, |h| u64::try_from(h).unwrap_or(0));
        removed.kept_tombstones_horizon_ms = Some(
            removed
                .kept_tombstones_horizon_ms
                .map_or(kept, |earlier| earlier.min(kept)),
        );
    }
    if gone.records == 0 && !set_horizon {
        return Ok(Cleaned::Unchanged);
    }
    if kept.is_empty() && !rules.keep_empty {
        return Ok(Cleaned::Dropped);
    }
    let base_timestamp = if set_horizon {
        i64::try_from(new_horizon).unwrap_or(i64::MAX)
    } else {
        header.base_timestamp
    };
    let mut records = Vec::new();
    for record in &kept {
        let timestamp = header.base_timestamp.wrapping_add(record.timestamp_delta);
        format::encode_kept_record(&mut records, record, timestamp.wrapping_sub(base_timestamp));
    }
    let codec = match kept.is_empty() {
        true => Compression::None,
        false => header.compression()?,
    };
    let records = compression::compress(codec, &records)?;
    let mut attributes = (header.attributes & !CODEC_BITS) | codec.attribute_bits();
    if set_horizon {
        attributes |= ATTR_DELETE_HORIZON;
    }
    let rewritten = BatchHeader {
        attributes,
        base_timestamp,
        records_count: kept.len() as u32,
        ..*header
    };
    Ok(Cleaned::Rebuilt(format::encode_batch(&rewritten, &records)))
}
