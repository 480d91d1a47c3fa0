//! Walking a segment's batches: [`LogSegment::scan`] and what it finds, and stepping over
//! damage ([`LogSegment::resync`]).
//!
//! # Damage
//! A frame that does not verify is never served. Scans either stop at it (the unsynced tail
//! recovery cuts) or step over it ([`LogSegment::resync`]): first to where the bad frame's
//! own length field says the next frame starts, if a valid frame with an offset at least the
//! expected one starts there, otherwise to the next byte position where such a frame decodes
//! with a valid CRC, with a base offset below what the caller knows the segment never reaches,
//! and no further past the expected one than the bytes stepped over can hold records for (the
//! base offset lies outside the CRC). The offsets in between are damaged; the frame found is
//! indexed (see [`LogSegment::rebuild_index`]), so lookups of later offsets start after the
//! damage.

use std::ops::Range;

use super::{IndexEntry, LogSegment, SCAN_CHUNK};
use crate::storage::error::Result;
use crate::storage::format::{
    self, BatchHeader, Decoded, HEADER_LEN, LOG_OVERHEAD, MAGIC, MAX_BATCH_LEN,
    MAX_DECOMPRESSED_BYTES, MIN_RECORD_LEN,
};
use crate::storage::fsutil::AlignedBuf;

/// Batches [`LogSegment::hop_to_frame`] steps over by their headers before it leaves the
/// search to the scan: the position sought is at most about one index interval past the index
/// entry, so with batches larger than the scan's chunk one step is the rule.
const MAX_HOPS: usize = 4;

/// The most records `bytes` of a segment can hold: none in less than a batch header; else
/// one per [`MIN_RECORD_LEN`] bytes uncompressed, or for compressed batches (at least a
/// header each) as many as [`MAX_DECOMPRESSED_BYTES`] of records can be, per header's worth.
/// Generous, but a base offset that damage made up reads as billions.
pub(super) fn most_records_in(bytes: u64) -> u64 {
    if bytes < HEADER_LEN as u64 {
        return 0;
    }
    let per_compressed_batch = (MAX_DECOMPRESSED_BYTES / MIN_RECORD_LEN) as u64;
    (bytes / MIN_RECORD_LEN as u64).max(bytes / HEADER_LEN as u64 * per_compressed_batch)
}

/// A batch found by [`LogSegment::scan`].
#[derive(Debug, Clone, Copy)]
pub struct ScannedFrame {
    /// The batch's first offset.
    pub offset: u64,
    /// The offset after the batch's last record.
    pub next_offset: u64,
    /// The batch's largest timestamp (0 for none).
    pub timestamp_ms: u64,
    pub position: u64,
    pub frame_len: u64,
    /// The scan stepped over damage right before this batch.
    pub after_damage: bool,
    pub header: BatchHeader,
}

impl ScannedFrame {
    fn new(header: BatchHeader, position: u64, after_damage: bool) -> Self {
        ScannedFrame {
            offset: header.base_offset,
            next_offset: header.next_offset(),
            timestamp_ms: header.max_timestamp.max(0) as u64,
            position,
            frame_len: header.batch_len as u64,
            after_damage,
            header,
        }
    }
}

/// Bytes a scan stepped over: a frame that did not verify, up to the next valid one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DamagedRange {
    /// Where the bad frame starts.
    pub position: u64,
    /// Where the next valid frame starts, or the end of the file when none does.
    pub end: u64,
    /// The offset the bad frame should have held: the first damaged one.
    pub first_offset: u64,
    /// The offset of the valid frame at `end`; `None` when no valid frame follows.
    pub resumed_at: Option<u64>,
    pub reason: String,
}

/// Why a scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanStop {
    pub position: u64,
    pub reason: String,
}

/// What a full scan found.
#[derive(Debug)]
pub struct ScanOutcome {
    /// Offset the next record would get.
    pub next_offset: u64,
    /// Set when invalid or torn bytes follow the last valid frame.
    pub stopped: Option<ScanStop>,
    /// Damage the scan stepped over, in file order (only scans told to step over damage).
    pub damaged: Vec<DamagedRange>,
}

/// Which bad frames a scan steps over instead of stopping at (see
/// [`LogSegment::scan_in_chunks`]).
#[derive(Debug, Clone, Copy)]
pub struct StepOver {
    /// Those that should have held an offset below this one.
    pub below: u64,
    /// No offset of the segment reaches this one: a frame found past the damage at this
    /// offset or above has a damaged base offset (see [`LogSegment::resync`]).
    pub offset_limit: u64,
}

impl StepOver {
    /// Stop at every bad frame.
    pub const NEVER: StepOver = StepOver {
        below: 0,
        offset_limit: u64::MAX,
    };
    /// Step over every bad frame.
    pub const ALWAYS: StepOver = StepOver {
        below: u64::MAX,
        offset_limit: u64::MAX,
    };
}

impl LogSegment {
    /// Walks every frame from `position` (which must start a frame holding `expected_offset`)
    /// to the end of the file, verifying checksums and offset contiguity, calling `visit` for
    /// each valid frame until it returns `false`. Stops at the first invalid or torn frame and
    /// says where and why; never returns data past it.
    pub fn scan(
        &self,
        position: u64,
        expected_offset: u64,
        visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        self.scan_in_chunks(
            position,
            expected_offset,
            SCAN_CHUNK,
            StepOver::NEVER,
            visit,
        )
    }

    /// As [`LogSegment::scan`], but steps over every damaged range (see the module docs)
    /// instead of stopping at it; `ScanOutcome::damaged` lists them. For scans that must reach
    /// the batches after damage (rebuilding the producer state).
    pub fn scan_over_damage(
        &self,
        position: u64,
        expected_offset: u64,
        visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        self.scan_in_chunks(
            position,
            expected_offset,
            SCAN_CHUNK,
            // Past damage, only to a frame this segment can hold.
            StepOver {
                offset_limit: self.next_offset,
                ..StepOver::ALWAYS
            },
            visit,
        )
    }

    /// Whether `offset` can be a record of this segment: at or above its base, and within
    /// what the index's `u32` relative offsets can hold.
    fn holds_offset(&self, offset: u64) -> bool {
        offset
            .checked_sub(self.base_offset)
            .is_some_and(|relative| relative <= u64::from(u32::MAX))
    }

    /// The length of the batch whose header starts `bytes`, when that header could be one of
    /// this segment holding an offset of at least `min_offset` (its CRC not yet checked). A
    /// cheap filter, so that searching damaged bytes rarely computes a CRC.
    fn plausible_frame(&self, bytes: &[u8], min_offset: u64) -> Option<usize> {
        let header = BatchHeader::parse(bytes)?;
        let plausible = (HEADER_LEN..=MAX_BATCH_LEN).contains(&header.batch_len)
            && bytes[16] == MAGIC
            && header.base_offset >= min_offset
            && self.holds_offset(header.base_offset);
        plausible.then_some(header.batch_len)
    }

    /// The header of the valid batch at `position`, if one with an offset of at least
    /// `min_offset` starts there.
    fn valid_frame_at(&self, position: u64, min_offset: u64) -> Result<Option<BatchHeader>> {
        let mut buf = AlignedBuf::default();
        let header = self.read_into(&mut buf, position, HEADER_LEN)?;
        let Some(frame_len) = self.plausible_frame(header, min_offset) else {
            return Ok(None);
        };
        if position + frame_len as u64 > self.size {
            return Ok(None);
        }
        let frame = self.read_into(&mut buf, position, frame_len)?;
        Ok(match format::decode(frame) {
            Decoded::Batch(header) if header.base_offset >= min_offset => Some(header),
            _ => None,
        })
    }

    /// Where scanning resumes after the bad frame at `position`, which should have held
    /// `offsets.start`: the first valid frame after it whose base offset is in `offsets`, as
    /// `(offset, position)`; `None` when no valid frame follows.
    ///
    /// The bad frame's own length field is tried first (a flipped bit in a key or value
    /// leaves it intact, and the next frame starts where it says); failing that, every later
    /// byte position is tried. Only a frame with a verified CRC and an offset no lower than
    /// the one expected is accepted, so stale or garbage bytes are not taken for records.
    /// The base offset lies outside the CRC: damage inside it (bytes inserted into a batch's
    /// first eight bytes) leaves a frame that verifies one position on, at an offset nothing
    /// ever held. `offsets.end`, what the caller knows no offset of the segment reaches (the
    /// next segment's base, the log end of a clean shutdown), refuses such a frame: a frame
    /// is accepted only when all its offsets lie below it. Where no such limit is known (the
    /// active segment after a crash may hold appends past the recovery point), the bytes
    /// stepped over bound it too: offsets are contiguous within a segment, so the ones
    /// skipped were records in those bytes, and a frame whose base offset needs more records
    /// than they can hold ([`most_records_in`]) was not written there. (In a segment the log
    /// cleaner rewrote, the damaged bytes may have stood for far more offsets than that: the
    /// bound may then refuse a valid frame after the damage, and the offsets up to the next
    /// one it accepts read as damaged, never as other records.)
    ///
    /// # Errors
    /// `Io`.
    pub fn resync(&self, position: u64, offsets: Range<u64>) -> Result<Option<(u64, u64)>> {
        let min_offset = offsets.start;
        // The whole batch below the limit, not only its base: a batch that runs past it
        // contradicts what the caller knows just as much.
        let within = |header: BatchHeader, at: u64| {
            let skipped = header.base_offset.saturating_sub(min_offset);
            (header.next_offset() <= offsets.end && skipped <= most_records_in(at - position))
                .then_some(header.base_offset)
        };
        let mut buf = AlignedBuf::default();
        let header = self.read_into(&mut buf, position, LOG_OVERHEAD)?;
        if header.len() == LOG_OVERHEAD {
            let length = u64::from(u32::from_be_bytes(header[8..12].try_into().expect("4")));
            let next = position + LOG_OVERHEAD as u64 + length;
            if (HEADER_LEN as u64..=MAX_BATCH_LEN as u64).contains(&(length + LOG_OVERHEAD as u64))
                && next < self.size
            {
                let found = self.valid_frame_at(next, min_offset)?;
                if let Some(offset) = found.and_then(|header| within(header, next)) {
                    return Ok(Some((offset, next)));
                }
            }
        }
        let mut from = position + 1;
        while from + HEADER_LEN as u64 <= self.size {
            let chunk = self.read_into(&mut buf, from, SCAN_CHUNK)?;
            let mut i = 0usize;
            while i + HEADER_LEN <= chunk.len() {
                if let Some(frame_len) = self.plausible_frame(&chunk[i..], min_offset) {
                    let at = from + i as u64;
                    let offset = match chunk.get(i..i + frame_len).map(format::decode) {
                        Some(Decoded::Batch(header)) if header.base_offset >= min_offset => {
                            Some(header)
                        }
                        Some(_) => None,
                        // The frame runs past this chunk: read it on its own.
                        None => self.valid_frame_at(at, min_offset)?,
                    };
                    if let Some(offset) = offset.and_then(|header| within(header, at)) {
                        return Ok(Some((offset, at)));
                    }
                }
                i += 1;
            }
            // The next chunk starts at the first position whose header did not fit in this one.
            from += i as u64;
        }
        Ok(None)
    }

    /// The fast path of [`LogSegment::first_frame_from`] for large batches, as
    /// `(offset, position)`: from `entry`, reads only each batch's header to step to the next
    /// by its length, and verifies only the batch found (the first starting at or after
    /// `position`), in full. The batches stepped over lie before `position`, which bytes
    /// retention drops: with batches larger than the scan's chunk, the scan would read each of
    /// them whole and check its CRC, doubling the cost of every append at the retention limit.
    ///
    /// `None` when this does not apply or something on the way does not check out (a batch
    /// smaller than the scan's chunk, a header that is not plausible or holds another offset
    /// than the one expected, more than [`MAX_HOPS`] batches to step over, the batch found not
    /// verifying): the scan then decides, stepping over damage as it does. A damaged length
    /// cannot mislead the hop: the batch it leads to must verify and hold exactly the offset
    /// that follows the batches stepped over.
    ///
    /// A batch found at or after `trusted_from` (written by this process in this open) is
    /// not read whole: its plausible header holding the offset expected, and its length
    /// within the file, are taken as proof enough (see `PartitionLog::trusted_from`).
    pub(super) fn hop_to_frame(
        &self,
        entry: IndexEntry,
        position: u64,
        trusted_from: u64,
    ) -> Result<Option<(u64, u64)>> {
        let scan_chunk = 2 * self.index_interval_bytes;
        let mut buf = AlignedBuf::default();
        let (mut at, mut expected) = (entry.position, entry.offset);
        for _ in 0..=MAX_HOPS {
            if at + HEADER_LEN as u64 > self.size {
                return Ok(None);
            }
            let bytes = self.read_into(&mut buf, at, HEADER_LEN)?;
            let Some(header) = BatchHeader::parse(bytes) else {
                return Ok(None);
            };
            let plausible = self.plausible_frame(bytes, expected).is_some()
                && header.base_offset == expected
                && header.batch_len as u64 >= scan_chunk;
            if !plausible {
                return Ok(None);
            }
            if at >= position && at >= trusted_from {
                let whole = at + header.batch_len as u64 <= self.size;
                return Ok(whole.then_some((expected, at)));
            }
            if at >= position {
                let verified = self.valid_frame_at(at, expected)?.map(|h| h.base_offset);
                return Ok(verified.filter(|&o| o == expected).map(|o| (o, at)));
            }
            at += header.batch_len as u64;
            expected = header.next_offset();
        }
        Ok(None)
    }

    /// [`LogSegment::scan`], reading `chunk` bytes at a time (more for a larger frame). A bad
    /// frame that should have held an offset below `step_over.below` is stepped over with
    /// [`LogSegment::resync`] (and listed in `ScanOutcome::damaged`), to a frame below
    /// `step_over.offset_limit`; any other stops the scan.
    pub(super) fn scan_in_chunks(
        &self,
        mut position: u64,
        mut expected_offset: u64,
        chunk_len: usize,
        step_over: StepOver,
        mut visit: impl FnMut(&ScannedFrame) -> bool,
    ) -> Result<ScanOutcome> {
        let StepOver {
            below: step_over_below,
            offset_limit,
        } = step_over;
        let mut buf = AlignedBuf::default();
        let mut want = chunk_len;
        let mut damaged = Vec::new();
        let mut after_damage = false;
        while position < self.size {
            let chunk = self.read_into(&mut buf, position, want)?;
            let mut at = 0usize;
            let mut stop = None;
            while at < chunk.len() {
                match format::decode(&chunk[at..]) {
                    Decoded::Batch(header) => {
                        let here = position + at as u64;
                        let offset = header.base_offset;
                        // The base offset is outside the CRC: a batch that verifies at
                        // another offset than the expected one most likely has a damaged
                        // base offset, so it is a bad batch like any other (stepped over
                        // below the recovery point, cut above it), never a jump of the log;
                        // except where the log cleaner may have removed whole batches (a
                        // sealed segment of a cleaned log), a jump forward within the
                        // segment's offsets (there, damage to a base offset that moves it
                        // forward passes as a gap, as it does in Kafka).
                        let cleaned_gap = self.may_have_gaps()
                            && offset > expected_offset
                            && header.next_offset() <= offset_limit;
                        if offset != expected_offset && !cleaned_gap {
                            stop = Some(format!(
                                "offset {offset} where {expected_offset} was expected"
                            ));
                            break;
                        }
                        let frame = ScannedFrame::new(header, here, after_damage);
                        after_damage = false;
                        at += header.batch_len;
                        expected_offset = frame.next_offset;
                        if !visit(&frame) {
                            return Ok(ScanOutcome {
                                next_offset: expected_offset,
                                stopped: None,
                                damaged,
                            });
                        }
                    }
                    Decoded::Incomplete {
                        batch_len: frame_len,
                    } => {
                        let frame_end = position + (at + frame_len.unwrap_or(HEADER_LEN)) as u64;
                        if frame_end > self.size {
                            stop = Some(format!(
                                "torn frame: needs {} bytes, the file has {}",
                                frame_end - position - at as u64,
                                self.size - position - at as u64
                            ));
                        } else {
                            // The frame straddles the chunk: read again from its start.
                            want = want.max(frame_len.unwrap_or(HEADER_LEN));
                        }
                        break;
                    }
                    Decoded::Invalid { reason } => {
                        stop = Some(reason);
                        break;
                    }
                }
            }
            position += at as u64;
            let Some(reason) = stop else { continue };
            if expected_offset >= step_over_below {
                return Ok(ScanOutcome {
                    next_offset: expected_offset,
                    stopped: Some(ScanStop { position, reason }),
                    damaged,
                });
            }
            let resumed = self.resync(position, expected_offset..offset_limit)?;
            damaged.push(DamagedRange {
                position,
                end: resumed.map_or(self.size, |(_, at)| at),
                first_offset: expected_offset,
                resumed_at: resumed.map(|(offset, _)| offset),
                reason,
            });
            match resumed {
                Some((offset, at)) => {
                    (position, expected_offset) = (at, offset);
                    after_damage = true;
                    want = chunk_len;
                }
                // Nothing valid follows: the rest of the file is the damaged range.
                None => break,
            }
        }
        Ok(ScanOutcome {
            next_offset: expected_offset,
            stopped: None,
            damaged,
        })
    }
}
