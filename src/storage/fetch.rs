//! Reading records out of a segment: the bytes behind `PartitionLog::read`.
//!
//! A read starts at an index entry at or before the wanted offset (or where the previous
//! sequential read stopped), reads a page-aligned chunk sized from the segment's average
//! record, verifies every batch's CRC and offsets, parses its records (decompressing a
//! compressed batch, within [`MAX_DECOMPRESSED_BYTES`]) and returns them in one buffer. A batch
//! that does not verify is `StorageError::Corrupt`, never data; the records before it are
//! still returned. Records below the offset asked for are skipped, also inside a batch (the
//! log start, a committed offset or a count limit can fall inside one). A read of a later
//! offset that must pass damage (damage recovery did not see, before the next index entry)
//! gets `SegmentRead::PastDamage` and resumes after it (`LogSegment::resync`); only reads
//! that meet damage pay for that.
//!
//! An uncompressed batch's records are parsed only up to the first one the read does not take
//! (the rest are parsed by the read that serves them): its CRC already vouches for the bytes,
//! and a consumer taking half a batch per poll then parses each half on the poll that takes
//! it, or ahead of it. So a batch whose CRC holds but whose record does not parse (appends
//! check every record, so only bytes this broker did not write) is served up to the read that
//! reaches that record, which is `Corrupt` with none of the batch's records it would have
//! returned.
//!
//! A read that stops inside a batch leaves the next sequential one a way in: the rest of the
//! batch in the buffer it read (`Held`), or failing that the record to resume at in the file
//! (`Resume`), so that no batch is verified twice. A read that stopped at the log end gets the
//! next batch appended there held the same way, copied from what the append wrote
//! (`Held::appended`, `PartitionLog::hold_for_reader_at_end`): a consumer caught up with its
//! producer then never reads back the records it was woken for.

use std::sync::Arc;

use super::compression::Compression;
use super::error::{Result, StorageError};
use super::format::{self, BatchHeader, Decoded, Headers, HEADER_LEN, MAX_DECOMPRESSED_BYTES};
use super::fsutil::AlignedBuf;
use super::index::INDEX_INTERVAL_BYTES;
use super::segment::{LogSegment, ScannedFrame};

mod held;
mod pool;
use held::Rest;
#[cfg(feature = "internals")]
pub use held::DEFAULT_HELD_BUDGET_BYTES;
pub(super) use held::MAX_HELD_BYTES;
pub(super) use held::{Held, Reservation};
pub use held::{HeldBudget, HELD_BUDGET};
use pool::Locations;

/// Bytes read ahead of the requested ones when a read starts from an index entry.
const READ_SLACK: usize = INDEX_INTERVAL_BYTES as usize + HEADER_LEN;
/// The most one read asks of the disk at once, whatever `max_bytes` says: bounds the memory a
/// single fetch can take (a batch larger than this is still read whole).
const MAX_READ_CHUNK: usize = 16 << 20;

/// A record borrowed from a read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    /// Milliseconds since the Unix epoch; 0 when the producer sent none (Kafka's -1).
    pub timestamp_ms: u64,
    pub key: Option<&'a [u8]>,
    /// The value; empty for a null value (a Kafka tombstone).
    pub value: &'a [u8],
    pub headers: Headers<'a>,
}

/// Where a record of a read lies, parsed once: its fields' byte ranges in the read buffer or
/// in a decompressed section. 48 bytes, written for every record a read returns: the key and
/// value are spans that may be absent rather than `Option`s (which took 56).
#[derive(Debug, Clone, Copy)]
struct RecordLoc {
    offset: u64,
    timestamp_ms: u64,
    key: Span,
    value: Span,
    headers: Span,
    header_count: u32,
    /// 0: the read buffer; `n`: `sections[n - 1]`.
    source: u32,
}

const _: () = assert!(std::mem::size_of::<RecordLoc>() == 48);

/// `(start, len)` of a field in its source buffer; a length of [`Span::ABSENT`] for a null
/// key or value. A read buffer (at most [`MAX_READ_CHUNK`] plus a batch) and a section (at
/// most [`MAX_DECOMPRESSED_BYTES`]) are far below 4 GiB.
#[derive(Debug, Clone, Copy)]
struct Span(u32, u32);

impl Span {
    const ABSENT: u32 = u32::MAX;

    /// Where `inner`, a slice of `outer`, lies in it, shifted by `base`; absent for `None`.
    fn of(outer: &[u8], inner: Option<&[u8]>, base: usize) -> Span {
        match inner {
            Some(inner) => {
                let start = inner.as_ptr() as usize - outer.as_ptr() as usize + base;
                Span(start as u32, inner.len() as u32)
            }
            None => Span(0, Span::ABSENT),
        }
    }

    fn get(self, bytes: &[u8]) -> Option<&[u8]> {
        (self.1 != Span::ABSENT).then(|| &bytes[self.0 as usize..(self.0 + self.1) as usize])
    }
}

/// Where a read stopped inside an uncompressed batch whose CRC it verified, at a record it
/// parsed: a sequential read that starts at that batch next resumes at the record, without
/// verifying the batch and parsing its first records again. A consumer taking 500 records at
/// a time from batches of 1000 would otherwise pay for each batch twice.
#[derive(Debug, Clone, Copy)]
pub(super) struct Resume {
    /// Where the batch starts in its segment.
    pub position: u64,
    pub header: BatchHeader,
    /// Where the next record starts, in bytes after the batch header.
    pub record_at: usize,
    /// That record's index in the batch (its offset delta).
    pub index: u32,
}

/// The bytes one read verified: shared by the records it returned and by the [`Held`] rest of
/// the batch it stopped in.
#[derive(Debug, Default)]
struct ReadBytes {
    buf: AlignedBuf,
    /// The records sections of compressed batches, decompressed.
    sections: Vec<Vec<u8>>,
}

impl Drop for ReadBytes {
    fn drop(&mut self) {
        pool::give_buffer(std::mem::take(&mut self.buf));
    }
}

/// Records returned by [`super::PartitionLog::read`]: verified batches in one buffer, and
/// where each record returned lies.
#[derive(Debug, Default)]
pub struct FetchedRecords {
    bytes: Arc<ReadBytes>,
    records: Locations,
    /// `(start, len)` in `buf` of each batch the records came from.
    batches: Vec<(usize, usize)>,
    pub(super) next_offset: u64,
    /// Set when the read stopped inside an uncompressed batch (see [`Resume`]); its position
    /// is relative to the read's start until `read_segment` makes it absolute.
    pub(super) resume: Option<Resume>,
    /// The length of the batch where the next sequential read starts, when this read saw its
    /// header: that read then asks the disk for at least that much at once, instead of
    /// finding the batch cut short by its estimate and reading again.
    pub(super) next_batch_len: Option<usize>,
    /// The rest of the batch the read stopped in, for the partition's next read (boxed: most
    /// reads have none).
    pub(super) held: Option<Box<Held>>,
}

impl FetchedRecords {
    /// A read that found nothing: the next one starts at `next_offset`.
    pub(super) fn empty(next_offset: u64) -> Self {
        FetchedRecords {
            next_offset,
            ..FetchedRecords::default()
        }
    }
    pub fn len(&self) -> usize {
        self.records.len()
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
    /// The offset to read next: after the last record returned (or where an empty read
    /// stopped).
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }
    /// The memory these records keep alive: the bytes read, decompressed sections, and the
    /// records' locations.
    pub(in crate::storage) fn footprint(&self) -> usize {
        // Allocations, not the bytes used of them: a buffer a read took from the pool may be
        // larger than what it read.
        let sections: usize = self.bytes.sections.iter().map(Vec::capacity).sum();
        self.bytes.buf.capacity()
            + sections
            + self.records.capacity() * std::mem::size_of::<RecordLoc>()
    }
    /// The offset of the last record returned, if any.
    pub fn last_offset(&self) -> Option<u64> {
        self.records.last().map(|loc| loc.offset)
    }
    /// The records, in offset order.
    pub fn iter(&self) -> impl Iterator<Item = RecordRef<'_>> + '_ {
        self.records.iter().map(move |loc| {
            let source = match loc.source {
                0 => self.bytes.buf.as_slice(),
                n => self.bytes.sections[n as usize - 1].as_slice(),
            };
            RecordRef {
                offset: loc.offset,
                timestamp_ms: loc.timestamp_ms,
                key: loc.key.get(source),
                value: loc.value.get(source).unwrap_or_default(),
                headers: Headers::verified(
                    loc.header_count as usize,
                    loc.headers.get(source).unwrap_or_default(),
                ),
            }
        })
    }
    /// The whole batches the records came from, as stored (what a Kafka fetch returns: the
    /// first may hold records below the offset asked for, the last records after the last
    /// one returned).
    pub fn batches(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let bytes = self.bytes.buf.as_slice();
        self.batches
            .iter()
            .map(move |&(start, len)| &bytes[start..start + len])
    }
}

/// What reading one segment gave.
pub(super) enum SegmentRead {
    /// Records, and the byte position where the next sequential read starts (after the last
    /// batch read whole, or at the batch a read stopped inside).
    Done {
        records: FetchedRecords,
        end_position: u64,
    },
    /// The scan's first batch did not verify or was past the offset: the index entry it came
    /// from is wrong. The caller scans the segment from byte 0 instead.
    BadIndexEntry(String),
    /// No record collected: the batch at `position`, which should have held `expected` (an
    /// offset below the one asked for), does not verify. The caller may resume after it.
    PastDamage {
        position: u64,
        expected: u64,
        reason: String,
    },
}

/// Gathers the records of one read, batch by batch.
struct Collector {
    max_records: usize,
    max_bytes: usize,
    bytes: usize,
    out: FetchedRecords,
    sections: Vec<Vec<u8>>,
    /// The records after the one the read stopped at, with it, and their encoded lengths:
    /// what a [`Held`] keeps.
    rest: Vec<RecordLoc>,
    rest_lens: Vec<u32>,
    /// Where `rest` starts: its batch (position relative to the read's start) and record.
    rest_at: Option<Resume>,
}

impl Collector {
    /// A read of up to `max_records` / `max_bytes` from `offset`.
    fn new(max_records: usize, max_bytes: usize, offset: u64) -> Self {
        Collector {
            max_records,
            max_bytes,
            bytes: 0,
            out: FetchedRecords {
                records: Locations(pool::locations(max_records)),
                ..FetchedRecords::empty(offset)
            },
            sections: Vec::new(),
            rest: Vec::new(),
            rest_lens: Vec::new(),
            rest_at: None,
        }
    }

    fn is_full(&self) -> bool {
        self.out.records.len() >= self.max_records
    }

    /// Takes the records at or above `self.out.next_offset` from the verified batch at `at` of
    /// `chunk`, until the read is full. Returns whether every record of the batch from there
    /// on was taken.
    ///
    /// # Errors
    /// The reason, when the records section does not parse or decompress.
    fn take(
        &mut self,
        (chunk, origin): (&[u8], u64),
        at: usize,
        header: &BatchHeader,
        rest_of: Option<&Resume>,
    ) -> std::result::Result<bool, String> {
        let mut section = Vec::new();
        let compressed = header.compression()? != Compression::None;
        let (records, source, base) = if let Some(r) = rest_of {
            // Only the records from `r.record_at` on are in the chunk, from `at`.
            let len = header.batch_len - HEADER_LEN - r.record_at;
            (&chunk[at..at + len], 0, at)
        } else if compressed {
            let batch = &chunk[at..at + header.batch_len];
            format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, &mut section)?;
            let source = self.sections.len() as u32 + 1;
            (section.as_slice(), source, 0)
        } else {
            (
                &chunk[at + HEADER_LEN..at + header.batch_len],
                0,
                at + HEADER_LEN,
            )
        };
        let before = self.out.records.len();
        let before_next = (self.out.next_offset, self.bytes);
        let wanted = self.max_records.saturating_sub(before);
        self.out
            .records
            .reserve(wanted.min(header.records_count as usize));
        // Only a compressed batch read here has its rest parsed and held with it (its section
        // is decompressed whole anyway); an uncompressed batch's rest is parsed when a later
        // read serves it, and a resumed batch's rest is not held at all.
        // A batch the cleaner left gaps in is read again from its start by the next read
        // (`Resume` and `Held` count a record's index as its offset delta).
        let contiguous = header.is_contiguous();
        let hold = rest_of.is_none() && compressed && contiguous;
        if hold {
            // The records after the read is full, held for the next read: reserved once, not
            // grown record by record.
            let left = (header.records_count as usize).saturating_sub(wanted);
            self.rest.reserve(left);
            self.rest_lens.reserve(left);
        }
        let mut taking = true;
        // Where the first record not taken starts, and its index.
        let mut stopped_at = None;
        let (max_records, max_bytes) = (self.max_records, self.max_bytes);
        let (out, bytes) = (&mut self.out, &mut self.bytes);
        let (rest, rest_lens) = (&mut self.rest, &mut self.rest_lens);
        // Takes `record` if it is wanted and fits; false once the read is full.
        let mut consider = |record: &format::RecordView<'_>, record_at: usize| {
            let len = record.encoded_len;
            let offset = header.base_offset + u64::from(record.offset_delta);
            let loc = || RecordLoc {
                source,
                offset,
                timestamp_ms: header.record_timestamp(record.timestamp_delta).max(0) as u64,
                key: Span::of(records, record.key, base),
                value: Span::of(records, record.value, base),
                headers: Span::of(records, Some(record.headers.bytes()), base),
                header_count: record.headers.len() as u32,
            };
            if !taking {
                if hold {
                    rest.push(loc());
                    rest_lens.push(len as u32);
                }
                return false;
            }
            if offset < out.next_offset {
                return true;
            }
            if out.records.len() >= max_records
                || (!out.records.is_empty() && *bytes + len > max_bytes)
            {
                taking = false;
                stopped_at = Some((record_at, record.offset_delta));
                if hold {
                    rest.push(loc());
                    rest_lens.push(len as u32);
                }
                return false;
            }
            out.records.push(loc());
            *bytes += len;
            out.next_offset = offset + 1;
            true
        };
        // The CRC verified the batch's bytes; its records are parsed as they are taken, from
        // `first` on, and the walk stops at the first one not taken unless the rest is held
        // parsed (a compressed batch's).
        let first = rest_of.map_or(0, |r| r.index);
        let walked = format::walk_records(
            records,
            header,
            first..header.records_count,
            |record, at| consider(record, at) || hold,
        );
        if let Err(reason) = walked {
            // None of a batch that does not parse is returned, also when records before it
            // are.
            self.out.records.truncate(before);
            (self.out.next_offset, self.bytes) = before_next;
            self.rest.clear();
            self.rest_lens.clear();
            self.rest_at = None;
            return Err(reason);
        }
        let whole = stopped_at.is_none();
        let stopped_at = stopped_at.filter(|_| contiguous);
        if let (Some((record_at, index)), None) = (stopped_at, rest_of) {
            self.rest_at = Some(Resume {
                position: origin + at as u64,
                header: *header,
                record_at,
                index,
            });
        }
        if let Some((record_at, index)) = stopped_at.filter(|_| !compressed) {
            self.out.resume = Some(match rest_of {
                Some(r) => Resume {
                    record_at: r.record_at + record_at,
                    index,
                    ..*r
                },
                None => Resume {
                    position: origin + at as u64,
                    header: *header,
                    record_at,
                    index,
                },
            });
        }
        // A batch only partly in the chunk is not listed among the whole batches read.
        if self.out.records.len() > before && rest_of.is_none() {
            self.out.batches.push((at, header.batch_len));
            if compressed {
                self.sections.push(section);
            }
        } else {
            // Nothing taken from the batch: its section (if any) is not kept for a Held.
            self.rest.clear();
            self.rest_lens.clear();
            self.rest_at = None;
        }
        if whole {
            self.out.next_offset = header.next_offset();
        }
        Ok(whole)
    }
}

/// Reads records from `offset` out of `segment`, starting the scan at byte `from` (an index
/// entry at or before `offset`, or 0; or where the previous read stopped, with `resume` when
/// it stopped inside a batch).
pub(super) fn read_segment(
    segment: &LogSegment,
    mut from: u64,
    offset: u64,
    (max_records, max_bytes): (usize, usize),
    (resume, batch_len): (Option<Resume>, Option<usize>),
    budget: &'static HeldBudget,
) -> Result<SegmentRead> {
    let path = segment.log_path();
    let full_want = max_bytes.min(MAX_READ_CHUNK) + READ_SLACK;
    // With the next batch's length field too, for the read after it (see `Held`).
    let mut want = likely_read_len(segment, max_records)
        .min(full_want)
        .max(batch_len.map_or(0, |l| l + format::LOG_OVERHEAD));
    // Resuming inside a batch an earlier read verified: read from its next record on, not the
    // batch again (a consumer reading half a batch per poll would copy each batch twice).
    let mut rest_of = resume.filter(|r| {
        r.position == from
            && r.header.base_offset + u64::from(r.index) == offset
            && r.header.compression() == Ok(Compression::None)
    });
    if let Some(r) = &rest_of {
        let rest = r.header.batch_len - HEADER_LEN - r.record_at;
        from = r.position + (HEADER_LEN + r.record_at) as u64;
        want = want.saturating_sub(HEADER_LEN + r.record_at).max(rest);
    }
    let mut first_frame = true;
    // The offset the next batch should start at, while batches below `offset` are skipped.
    let mut skipped_to: Option<u64> = None;
    let mut buf = pool::buffer(want);
    loop {
        let asked = want;
        // What `skipped_to` was at `from`, for a read again from there.
        let skipped_at_from = skipped_to;
        // Bytes from `from` to the end of a whole batch the chunk cut short, if one did.
        let mut straddling_end: Option<usize> = None;
        let chunk_len = segment.read_into(&mut buf, from, want)?.len();
        let mut collector = Collector::new(max_records, max_bytes, offset);
        let (mut at, mut end_at) = (0usize, 0usize);
        if let Some(r) = rest_of {
            let rest = r.header.batch_len - HEADER_LEN - r.record_at;
            if chunk_len < rest {
                // The segment no longer holds it (cut meanwhile): read the batch from its start.
                (from, rest_of) = (r.position, None);
                continue;
            }
            first_frame = false;
            match collector.take((buf.as_slice(), from), 0, &r.header, Some(&r)) {
                Ok(true) => (at, end_at) = (rest, rest),
                Ok(false) => {}
                Err(reason) => {
                    return Err(StorageError::corrupt(path, r.position, reason));
                }
            }
        }
        while at < chunk_len && !collector.is_full() {
            let chunk = buf.as_slice();
            let position = from + at as u64;
            let collected = !collector.out.records.is_empty();
            let header = match format::decode(&chunk[at..]) {
                Decoded::Batch(header) => header,
                Decoded::Incomplete { batch_len } => {
                    let needed = batch_len.unwrap_or(HEADER_LEN);
                    if position + needed as u64 <= segment.size() {
                        // The batch straddles the chunk: read again, up to its end.
                        straddling_end = Some(at + needed);
                        break;
                    }
                    if collected {
                        // It runs past the end of the segment: the read that starts at it
                        // reports it.
                        break;
                    }
                    let reason =
                        format!("batch of {needed} bytes runs past the end of the segment");
                    if first_frame {
                        return Ok(SegmentRead::BadIndexEntry(reason));
                    }
                    return damage(path, position, skipped_to, offset, reason);
                }
                Decoded::Invalid { reason } if first_frame => {
                    return Ok(SegmentRead::BadIndexEntry(reason))
                }
                // The records before a bad batch are good: return them. The next read starts
                // at the bad batch and reports it.
                Decoded::Invalid { .. } if collected => break,
                Decoded::Invalid { reason } => {
                    return damage(path, position, skipped_to, offset, reason)
                }
            };
            // In a sealed segment the cleaner may have removed the batches holding `offset`:
            // a read that starts where the last one ended (not at an index entry), or at the
            // segment's start (no entry at all), may then meet a later batch first.
            let past_a_gap = |from: u64| -> Result<bool> {
                if !segment.may_have_gaps() || header.next_offset() > segment.next_offset() {
                    return Ok(false);
                }
                let entry = segment.lookup(offset)?;
                let no_entry = entry.position == 0 && entry.offset == segment.base_offset();
                Ok(entry.position < from || no_entry)
            };
            if first_frame && header.base_offset > offset && !past_a_gap(position)? {
                return Ok(SegmentRead::BadIndexEntry(format!(
                    "batch starts at offset {} but the index promised at most {offset}",
                    header.base_offset
                )));
            }
            first_frame = false;
            // The base offset is outside the CRC: a batch that does not continue the one
            // before it is damaged even though it verifies, also when it would be skipped.
            let follows = if collected {
                Some(collector.out.next_offset)
            } else {
                skipped_to
            };
            // (In a sealed segment the cleaner leaves gaps: a batch may start further on,
            // within the segment's offsets.)
            let within = segment.may_have_gaps() && header.next_offset() <= segment.next_offset();
            let gap = |follows: u64| within && header.base_offset > follows;
            if let Some(follows) = follows.filter(|&f| f != header.base_offset && !gap(f)) {
                if collected {
                    break;
                }
                let reason = format!(
                    "batch starts at offset {} where {follows} was expected",
                    header.base_offset
                );
                return damage(path, position, skipped_to, offset, reason);
            }
            if header.next_offset() <= offset || header.is_control() {
                // Records below the offset asked for; or a transaction marker, which holds
                // no data.
                skipped_to = Some(header.next_offset());
                at += header.batch_len;
                end_at = at;
                if header.is_control() && !collected {
                    collector.out.next_offset = collector.out.next_offset.max(header.next_offset());
                }
                continue;
            }
            let expected = collector.out.next_offset;
            let misplaced =
                header.base_offset > expected || (collected && header.base_offset != expected);
            if misplaced && !within {
                if collected {
                    break;
                }
                let reason = format!(
                    "batch starts at offset {} where {expected} was expected",
                    header.base_offset
                );
                return Err(StorageError::corrupt(path, position, reason));
            }
            match collector.take((chunk, from), at, &header, None) {
                Ok(true) => {
                    at += header.batch_len;
                    end_at = at;
                }
                Ok(false) => break,
                Err(_) if collected => break,
                Err(reason) => return Err(StorageError::corrupt(path, position, reason)),
            }
        }
        if let Some(end) = straddling_end.filter(|_| !collector.is_full()) {
            // Read again with the whole batch in the chunk: from `from` when records were
            // collected before it (what a read returns never depends on the chunk size),
            // else from the batch itself.
            // With the next batch's length field too, for the read after it (see `Held`).
            if collector.out.records.is_empty() {
                (from, rest_of) = (from + at as u64, None);
                want = want.max(end - at + format::LOG_OVERHEAD);
            } else {
                want = want.max(end + format::LOG_OVERHEAD);
                skipped_to = skipped_at_from;
            }
            continue;
        }
        if asked < full_want && chunk_len == asked && !collector.is_full() && at >= chunk_len {
            // The estimated read ran out at a batch boundary before `max_records` or
            // `max_bytes` did: read again, larger, so what a read returns never depends on
            // the estimate.
            want = asked.saturating_mul(2).min(full_want);
            skipped_to = skipped_at_from;
            continue;
        }
        if !collector.out.records.is_empty() {
            let mut records = collector.out;
            let chunk = buf.as_slice();
            records.next_batch_len = match &records.resume {
                Some(r) => Some(r.header.batch_len),
                None => batch_len_at(&chunk[end_at.min(chunk_len)..]),
            };
            let held_at = collector.rest_at.and_then(|resume| {
                let sections: usize = collector.sections.iter().map(Vec::len).sum();
                // Tiny records take more to locate than to store: their locations count too.
                let locations = collector.rest.len() * (std::mem::size_of::<RecordLoc>() + 4);
                // The whole allocation stays alive, also when it is larger than the chunk.
                let size = buf.capacity() + sections + locations;
                let compressed = resume.header.compression() != Ok(Compression::None);
                if (compressed && collector.rest.is_empty()) || size > MAX_HELD_BYTES {
                    return None;
                }
                // Over the budget: the next read resumes from the file instead.
                Some((resume, budget.try_reserve(size)?, compressed))
            });
            let after_len = held_at.as_ref().and_then(|(r, _, _)| {
                let end = (r.position - from) as usize + r.header.batch_len;
                batch_len_at(&chunk[end.min(chunk_len)..])
            });
            records.bytes = Arc::new(ReadBytes {
                buf,
                sections: collector.sections,
            });
            records.held = held_at.map(|(resume, reserved, compressed)| {
                let rest = if compressed {
                    Rest::Parsed {
                        records: collector.rest,
                        lens: collector.rest_lens,
                        next: 0,
                    }
                } else {
                    Rest::Unparsed {
                        batch_at: (resume.position - from) as usize,
                    }
                };
                Box::new(Held {
                    bytes: Arc::clone(&records.bytes),
                    rest,
                    resume,
                    after_len,
                    _reserved: reserved,
                })
            });
            // A read that stopped inside a batch ends at that batch's start.
            let end_position = records.resume.map_or(from + end_at as u64, |r| r.position);
            return Ok(SegmentRead::Done {
                records,
                end_position,
            });
        }
        (from, rest_of) = (from + at as u64, None);
        if from >= segment.size() && !first_frame && segment.may_have_gaps() {
            // Every batch from `offset` on was removed by the cleaner (or kept empty for its
            // producer's sake): nothing here, the next segment follows.
            return Ok(SegmentRead::Done {
                records: FetchedRecords::empty(segment.next_offset().max(offset)),
                end_position: segment.size(),
            });
        }
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

/// The length of the batch whose header starts `bytes`, when its length field is there and
/// within bounds.
fn batch_len_at(bytes: &[u8]) -> Option<usize> {
    bytes.get(8..12).and_then(|length| {
        let length = i32::from_be_bytes(length.try_into().expect("4 bytes"));
        usize::try_from(length)
            .ok()
            .filter(|&l| l <= format::MAX_BATCH_LEN - format::LOG_OVERHEAD)
            .map(|l| l + format::LOG_OVERHEAD)
    })
}

/// `(offset, timestamp)` of the first record of the valid batch `frame` that is at or after
/// `from` and whose timestamp is at least `timestamp_ms` (the records of a CreateTime batch
/// need not be in timestamp order); `None` when no record of it is.
///
/// # Errors
/// As [`visit_record_timestamps`].
pub(super) fn first_record_not_before(
    segment: &LogSegment,
    frame: &ScannedFrame,
    timestamp_ms: u64,
    from: u64,
) -> Result<Option<(u64, u64)>> {
    let mut found = None;
    visit_record_timestamps(segment, frame, |offset, timestamp| {
        if found.is_none() && offset >= from && timestamp >= timestamp_ms {
            found = Some((offset, timestamp));
        }
    })?;
    Ok(found)
}

/// Calls `visit` with `(offset, timestamp)` of every record of the valid batch `frame`, in
/// offset order: a record's own timestamp under CreateTime, the batch's under LogAppendTime.
///
/// # Errors
/// `Io`; `Corrupt` when the records do not parse, or do not decompress within
/// [`MAX_DECOMPRESSED_BYTES`].
pub(super) fn visit_record_timestamps(
    segment: &LogSegment,
    frame: &ScannedFrame,
    mut visit: impl FnMut(u64, u64),
) -> Result<()> {
    let corrupt = |reason| StorageError::corrupt(segment.log_path(), frame.position, reason);
    let mut buf = AlignedBuf::default();
    let batch = segment.read_into(&mut buf, frame.position, frame.frame_len as usize)?;
    if batch.len() < frame.frame_len as usize {
        return Err(corrupt("batch runs past the end of the segment".into()));
    }
    let header = &frame.header;
    let mut section = Vec::new();
    let records = format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, &mut section)
        .map_err(corrupt)?;
    format::validate_records(records, header, |record| {
        let offset = header.base_offset + u64::from(record.offset_delta);
        visit(
            offset,
            header.record_timestamp(record.timestamp_delta).max(0) as u64,
        );
    })
    .map_err(corrupt)
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
