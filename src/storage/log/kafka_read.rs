//! Reads for Kafka's Fetch: whole batches as stored, copied once from the segment into the
//! buffer that is sent, never decoded past their header (a fetch is a copy of bytes).

use super::*;
use crate::storage::format::{decode, Decoded};

/// The most one batch read takes from the disk at once, whatever the caller allows (the
/// first batch is still read whole, however large: see [`PartitionLog::read_batches`]).
const MAX_BATCH_READ: usize = 64 << 20;

/// Whole batches read by `PartitionLog::read_batches`, as stored, and the log's bounds when
/// they were read.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BatchRead {
    /// Consecutive whole batches (RecordBatch v2), exactly as on disk; empty when there was
    /// nothing to read or the first batch did not fit.
    pub bytes: Vec<u8>,
    /// The offset after the last batch read (the offset asked for when none was).
    pub next_offset: u64,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
}

impl PartitionLog {
    /// `(offset, timestamp_ms)` of the record with the largest timestamp from the log start
    /// on, the first one when several share it; `None` for an empty log. What Kafka's
    /// ListOffsets answers for the "max timestamp" spec (KIP-734).
    ///
    /// Each segment wholly at or above the log start answers from its largest timestamp,
    /// unread; only the segment holding the log start is scanned from it (its records below
    /// the start do not count), and the batch holding the start read record by record. The
    /// record is then [`PartitionLog::record_for_timestamp`] of the largest. Damaged batches
    /// are stepped over, as the other timestamp searches do.
    ///
    /// # Errors
    /// `Io` when a segment or an index cannot be read.
    pub fn record_with_max_timestamp(&mut self) -> Result<Option<(u64, u64)>> {
        let start = self.log_start_offset;
        let mut max = None;
        for (&base, segment) in &self.segments {
            if segment.next_offset() <= start {
                continue;
            }
            let largest = if base >= start {
                segment.last_timestamp_ms()
            } else {
                largest_timestamp_from(segment, start)?
            };
            max = max.max(largest);
        }
        match max {
            Some(max) => self.record_for_timestamp(max),
            None => Ok(None),
        }
    }

    /// Whole batches from the one holding `offset` on, up to `max_bytes` in all; when
    /// `min_one`, the first batch even if it is larger (Kafka's KIP-74, so a consumer always
    /// progresses). Batches come from one segment per call, as Kafka's reads do; a fetch at
    /// a gap between segments starts at the next segment. The first batch may hold records
    /// below `offset` (clients skip them, as they do with Kafka). Every batch returned
    /// verifies (CRC, header, offsets following each other); the read stops before the first
    /// one that does not. Records are never past the log end.
    ///
    /// A sequential reader (the next read at the `next_offset` of the last) starts where the
    /// last read ended, without the index.
    ///
    /// # Errors
    /// `OffsetOutOfRange` when `offset` is below the log start or beyond the log end;
    /// `Corrupt` when the batch holding `offset` does not verify; `Io`.
    pub fn read_batches(
        &mut self,
        offset: u64,
        max_bytes: usize,
        min_one: bool,
    ) -> Result<BatchRead> {
        let (log_start, log_end) = (self.log_start_offset, self.log_end_offset());
        if offset < log_start || offset > log_end {
            return Err(StorageError::OffsetOutOfRange {
                offset,
                log_start_offset: log_start,
                log_end_offset: log_end,
            });
        }
        let mut read = BatchRead {
            bytes: Vec::new(),
            next_offset: offset,
            log_start_offset: log_start,
            log_end_offset: log_end,
        };
        let mut offset = offset;
        while offset < log_end {
            let (&base, segment) = self
                .segments
                .range(..=offset)
                .next_back()
                .expect("the log start is at or above the first segment's base");
            let position = match self.batch_hint {
                Some((o, b, position)) if o == offset && b == base => Some(position),
                _ if offset >= segment.next_offset() => None,
                _ => segment.position_of(offset)?,
            };
            let Some(position) = position else {
                // A gap, or nothing valid left in this segment: the next segment.
                offset = self
                    .segments
                    .range(offset + 1..)
                    .next()
                    .map_or(log_end, |(&b, _)| b);
                continue;
            };
            let (bytes, next) = read_from(segment, position, offset, max_bytes, min_one)?;
            if !bytes.is_empty() {
                self.batch_hint = Some((next, base, position + bytes.len() as u64));
                read.next_offset = next;
            }
            read.bytes = bytes;
            break;
        }
        Ok(read)
    }
}

/// The whole, verified batches of `segment` from `position` (the batch holding `offset`),
/// up to `max_bytes` (the first one whatever its size when `min_one`), and the offset after
/// the last.
fn read_from(
    segment: &LogSegment,
    position: u64,
    offset: u64,
    max_bytes: usize,
    min_one: bool,
) -> Result<(Vec<u8>, u64)> {
    let available = segment.size().saturating_sub(position) as usize;
    let mut want = max_bytes.min(available).min(MAX_BATCH_READ);
    if min_one {
        // At least a header, to learn the first batch's length.
        want = want.max(crate::storage::format::HEADER_LEN.min(available));
    }
    let mut bytes = vec![0u8; want];
    loop {
        segment.read_exact_at(&mut bytes, position)?;
        let (mut at, mut next) = (0usize, offset);
        let mut grow_to = None;
        while at < bytes.len() {
            match decode(&bytes[at..]) {
                Decoded::Batch(header) => {
                    // A sealed segment may hold gaps the cleaner left: the first batch is
                    // then the first one after `offset`, and the next may start further on.
                    let gaps =
                        segment.may_have_gaps() && header.next_offset() <= segment.next_offset();
                    let follows = match at {
                        0 => {
                            (header.base_offset <= offset || gaps) && header.next_offset() > offset
                        }
                        _ => header.base_offset == next || (gaps && header.base_offset > next),
                    };
                    if !follows && at == 0 {
                        return Err(StorageError::corrupt(
                            segment.log_path(),
                            position,
                            format!(
                                "batch at offsets {}..{} where offset {offset} was expected",
                                header.base_offset,
                                header.next_offset()
                            ),
                        ));
                    }
                    if !follows {
                        break;
                    }
                    at += header.batch_len;
                    next = header.next_offset();
                }
                Decoded::Incomplete { batch_len } => {
                    // Only the first batch is read again whole: the others wait for the
                    // next fetch.
                    let len = batch_len.unwrap_or(0);
                    if at == 0 && min_one && len > bytes.len() && len <= available {
                        grow_to = Some(len);
                    }
                    break;
                }
                Decoded::Invalid { reason } if at == 0 => {
                    return Err(StorageError::corrupt(segment.log_path(), position, reason))
                }
                Decoded::Invalid { .. } => break,
            }
        }
        match grow_to {
            Some(len) => bytes.resize(len, 0),
            None => {
                bytes.truncate(at);
                return Ok((bytes, next));
            }
        }
    }
}

/// The largest timestamp among `segment`'s records at or after `from`; `None` when it holds
/// none (or only damaged ones). Whole batches from `from` on answer by their headers; the
/// batch holding `from` is read for its records at or after it.
fn largest_timestamp_from(segment: &LogSegment, from: u64) -> Result<Option<u64>> {
    let entry = segment.lookup(from)?;
    let mut largest = None;
    let mut straddling = None;
    let outcome = segment.scan_over_damage(entry.position, entry.offset, |frame| {
        if frame.offset >= from {
            largest = largest.max(Some(frame.timestamp_ms));
        } else if frame.next_offset > from {
            straddling = Some(*frame);
        }
        true
    })?;
    for damage in &outcome.damaged {
        tracing::warn!(
            path = %segment.log_path().display(), position = damage.position,
            first_offset = damage.first_offset, cause = %damage.reason,
            "stepped over damaged records looking for the largest timestamp"
        );
    }
    if let Some(frame) = straddling {
        crate::storage::fetch::visit_record_timestamps(segment, &frame, |offset, timestamp| {
            if offset >= from {
                largest = largest.max(Some(timestamp));
            }
        })?;
    }
    Ok(largest)
}
