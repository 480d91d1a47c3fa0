//! Reading records out of a segment: the bytes behind `PartitionLog::read`.
//!
//! A read starts at an index entry at or before the wanted offset (or where the previous
//! sequential read stopped), reads a page-aligned chunk sized from the segment's average
//! frame, verifies every frame's CRC and offset, and returns the records as one buffer of
//! verified frames. A frame that does not verify is `StorageError::Corrupt`, never data; the records
//! before it are still returned. A read of a later offset that must pass it (damage recovery
//! did not see, before the next index entry) gets `SegmentRead::PastDamage` and resumes
//! after the damage (`LogSegment::resync`); only reads that meet damage pay for that.

use super::error::{Result, StorageError};
use super::fsutil::AlignedBuf;
use super::index::INDEX_INTERVAL_BYTES;
use super::record::{self, Decoded, RecordRef, HEADER_LEN};
use super::segment::LogSegment;

/// Bytes read ahead of the requested ones when a read starts from an index entry.
const READ_SLACK: usize = INDEX_INTERVAL_BYTES as usize + HEADER_LEN;
/// The most one read asks of the disk at once, whatever `max_bytes` says: bounds the memory a
/// single fetch can take.
const MAX_READ_CHUNK: usize = 16 << 20;

/// Records returned by [`super::PartitionLog::read`]: one buffer of verified frames.
#[derive(Debug, Default)]
pub struct FetchedRecords {
    pub(super) buf: AlignedBuf,
    /// `(start, len)` of each frame in `buf`.
    pub(super) frames: Vec<(usize, usize)>,
    pub(super) next_offset: u64,
}

impl FetchedRecords {
    pub fn len(&self) -> usize {
        self.frames.len()
    }
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
    /// The offset to read next: after the last record returned (or where an empty read
    /// stopped).
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    /// The records, in offset order.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        let bytes = self.buf.as_slice();
        // Every frame was verified when the buffer was filled, and the buffer is private.
        self.frames
            .iter()
            .map(move |&(start, len)| record::view_verified(&bytes[start..start + len]))
    }
}

/// What reading one segment gave.
pub(super) enum SegmentRead {
    /// Records, and the byte position after the last one.
    Done {
        records: FetchedRecords,
        end_position: u64,
    },
    /// The scan's first frame did not verify or was past the offset: the index entry it came
    /// from is wrong. The caller scans the segment from byte 0 instead.
    BadIndexEntry(String),
    /// No record collected: the frame at `position`, which should have held `expected` (an
    /// offset below the one asked for), does not verify. The caller may resume after it.
    PastDamage {
        position: u64,
        expected: u64,
        reason: String,
    },
}

/// Reads records from `offset` out of `segment`, starting the scan at byte `from` (an index
/// entry at or before `offset`, or 0).
pub(super) fn read_segment(
    segment: &LogSegment,
    mut from: u64,
    offset: u64,
    max_records: usize,
    max_bytes: usize,
) -> Result<SegmentRead> {
    let path = segment.log_path();
    let mut buf = AlignedBuf::default();
    let full_want = max_bytes.min(MAX_READ_CHUNK) + READ_SLACK;
    let mut want = likely_read_len(segment, max_records).min(full_want);
    let mut first_frame = true;
    // The offset the next frame should hold, while frames below `offset` are skipped.
    let mut skipped_to: Option<u64> = None;
    loop {
        let asked = want;
        let mut straddles = false;
        let chunk = segment.read_into(&mut buf, from, want)?;
        let chunk_len = chunk.len();
        let mut frames = Vec::new();
        let (mut at, mut bytes) = (0usize, 0usize);
        let mut next_offset = offset;
        while at < chunk_len && frames.len() < max_records {
            let position = from + at as u64;
            let (record, frame_len) = match record::decode(&chunk[at..]) {
                Decoded::Record { record, frame_len } => (record, frame_len),
                Decoded::Incomplete { frame_len } => {
                    let needed = frame_len.unwrap_or(HEADER_LEN);
                    if position + needed as u64 <= segment.size() || !frames.is_empty() {
                        // The frame straddles the chunk (or runs past the end of the segment,
                        // reported by the read that starts at it): read again from it if
                        // nothing was collected, else return what was.
                        want = want.max(needed);
                        straddles = true;
                        break;
                    }
                    let reason =
                        format!("frame of {needed} bytes runs past the end of the segment");
                    if first_frame {
                        return Ok(SegmentRead::BadIndexEntry(reason));
                    }
                    return damage(path, position, skipped_to, offset, reason);
                }
                Decoded::Invalid { reason } if first_frame => {
                    return Ok(SegmentRead::BadIndexEntry(reason))
                }
                // The records before a bad frame are good: return them. The next read starts
                // at the bad frame and reports it.
                Decoded::Invalid { .. } if !frames.is_empty() => break,
                Decoded::Invalid { reason } => {
                    return damage(path, position, skipped_to, offset, reason)
                }
            };
            if first_frame && record.offset > offset {
                return Ok(SegmentRead::BadIndexEntry(format!(
                    "frame holds offset {} but the index promised at most {offset}",
                    record.offset
                )));
            }
            first_frame = false;
            if record.offset < offset {
                skipped_to = Some(record.offset + 1);
                at += frame_len;
                continue;
            }
            if record.offset != next_offset {
                if !frames.is_empty() {
                    break;
                }
                let reason = format!("offset {} where {next_offset} was expected", record.offset);
                return Err(StorageError::corrupt(path, position, reason));
            }
            if !frames.is_empty() && bytes + frame_len > max_bytes {
                break;
            }
            frames.push((at, frame_len));
            bytes += frame_len;
            at += frame_len;
            next_offset += 1;
        }
        if asked < full_want
            && chunk_len == asked
            && frames.len() < max_records
            && (at >= chunk_len || straddles)
        {
            // The estimated read ran out before `max_records` or `max_bytes` did: read again
            // at the full size, so what a read returns never depends on the estimate.
            want = want.max(full_want);
            continue;
        }
        if !frames.is_empty() {
            return Ok(SegmentRead::Done {
                records: FetchedRecords {
                    buf,
                    frames,
                    next_offset,
                },
                end_position: from + at as u64,
            });
        }
        from += at as u64;
        if from >= segment.size() {
            let reason = format!("offset {offset} not found before the end of the segment");
            if first_frame {
                // The start position itself is at or past the end: a bad index entry.
                return Ok(SegmentRead::BadIndexEntry(reason));
            }
            return Err(StorageError::corrupt(path, from, reason));
        }
    }
}

/// A bad frame at `position` met before any record was collected: `PastDamage` when it
/// should have held an offset below `offset` (the frame before it held `skipped_to - 1`), so
/// that the read may resume after it; otherwise `Corrupt`: it is the record asked for.
fn damage(
    path: &std::path::Path,
    position: u64,
    skipped_to: Option<u64>,
    offset: u64,
    reason: String,
) -> Result<SegmentRead> {
    match skipped_to {
        Some(expected) if expected < offset => Ok(SegmentRead::PastDamage {
            position,
            expected,
            reason,
        }),
        _ => Err(StorageError::corrupt(path, position, reason)),
    }
}

/// The bytes a read of `max_records` from `segment` most likely needs: the segment's average
/// frame size (plus 1/8 for records a little larger than average) times `max_records`, plus
/// the slack for starting at an index entry. Reading the full `max_bytes` instead, when it is
/// far more than `max_records` take (1 MiB for 1000 × 130 B), spent most of a read zeroing
/// and copying bytes that were then thrown away. `usize::MAX` when the segment's record count
/// is not known.
fn likely_read_len(segment: &LogSegment, max_records: usize) -> usize {
    let records = segment.next_offset().saturating_sub(segment.base_offset());
    if records == 0 {
        return usize::MAX;
    }
    let average = segment.size().div_ceil(records) as usize;
    max_records
        .saturating_mul(average + average / 8)
        .saturating_add(READ_SLACK)
}
