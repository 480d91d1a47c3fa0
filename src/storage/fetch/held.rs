//! The rest of a batch a read stopped in, kept for the next read (see [`Held`]), within a
//! per-partition cap and a process-wide budget (see [`HeldBudget`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::{Collector, FetchedRecords, ReadBytes, RecordLoc, Resume};
use crate::storage::compression::Compression;
use crate::storage::format::{BatchHeader, HEADER_LEN};
use crate::storage::fsutil::AlignedBuf;

/// The rest of a batch a read stopped in, in the buffer the read filled: the next sequential
/// read returns its records from there when they fill it, instead of reading the batch
/// again. A consumer taking 500 records at a time from batches of 1000 otherwise read each
/// batch's second half twice. Kept only while the read's bytes and the held records'
/// locations take at most [`MAX_HELD_BYTES`], and [`HeldBudget`] has room for them: the
/// partition holds them until its next read (or until it is closed), and gives the bytes back
/// to the budget when it drops them.
#[derive(Debug)]
pub(in crate::storage) struct Held {
    pub(super) bytes: Arc<ReadBytes>,
    pub(super) rest: Rest,
    /// The batch, and where its next record not returned starts in it.
    pub(super) resume: Resume,
    /// The length of the batch after it, when the read saw its header.
    pub(super) after_len: Option<usize>,
    /// Its bytes in the budget, given back when it is dropped.
    pub(super) _reserved: Reservation,
}

/// The records of a [`Held`] not returned yet.
#[derive(Debug)]
pub(super) enum Rest {
    /// A compressed batch's, parsed with the records returned (its section is decompressed
    /// whole): in offset order, with their encoded lengths (what `max_bytes` counts), of which
    /// `next` were returned since.
    Parsed {
        records: Vec<RecordLoc>,
        lens: Vec<u32>,
        next: usize,
    },
    /// An uncompressed batch's, which starts at `batch_at` in the read buffer: its CRC was
    /// checked, its records are parsed by the read that serves them. Parsing a batch's records
    /// only as they are served spreads the work over the polls that take them; for a consumer
    /// with a read ahead, it is done while the consumer handles the records before.
    Unparsed { batch_at: usize },
}

/// The most bytes a [`Held`] keeps alive between two reads of a partition. A consumer polling
/// 500 records of 100 B from batches of 1000 holds about 112 KB (the batch read; the rest of
/// a compressed batch adds the locations of its records), within it (checked by the tests);
/// the rest of a larger batch is read again from the file, as before there were holds.
pub(in crate::storage) const MAX_HELD_BYTES: usize = 256 << 10;

/// The default of [`HELD_BUDGET`]: 64 MiB holds the rest of a batch for about 450 partitions
/// consumed at once by loops like the one above (256 at the per-partition cap), far more
/// than a few I/O threads keep busy at once, while 10,000 partitions stopped mid-batch cost at
/// most this, not 10,000 × [`MAX_HELD_BYTES`]. A partition refused a hold loses nothing
/// but speed: its next read resumes from the file (reads and parses the rest of the batch).
pub const DEFAULT_HELD_BUDGET_BYTES: usize = 64 << 20;

/// The bytes all the [`Held`]s of the process keep, at most `limit`. Reserving and releasing
/// are one atomic operation each, once per read that stops inside a batch.
#[derive(Debug)]
pub struct HeldBudget {
    limit: usize,
    used: AtomicUsize,
}

/// The budget every partition log of the process shares (tests give a log its own).
pub static HELD_BUDGET: HeldBudget = HeldBudget::new(DEFAULT_HELD_BUDGET_BYTES);

impl HeldBudget {
    pub const fn new(limit: usize) -> Self {
        HeldBudget {
            limit,
            used: AtomicUsize::new(0),
        }
    }
    /// The bytes held now.
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // read by tests
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }
    #[cfg_attr(not(feature = "internals"), allow(dead_code))] // read by tests
    pub fn limit(&self) -> usize {
        self.limit
    }
    /// Takes `bytes` from the budget until the [`Reservation`] is dropped; `None` (nothing
    /// taken) when that would exceed the limit.
    pub(in crate::storage) fn try_reserve(&'static self, bytes: usize) -> Option<Reservation> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(bytes).filter(|&u| u <= self.limit)
            })
            .ok()
            .map(|_| Reservation {
                budget: self,
                bytes,
            })
    }
}

/// Bytes taken from a [`HeldBudget`], given back on drop.
#[derive(Debug)]
pub(in crate::storage) struct Reservation {
    budget: &'static HeldBudget,
    bytes: usize,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

impl Held {
    /// The uncompressed batch `parts` (its bytes, in order; the first holds its header) just
    /// written at `position` of its segment, from offset
    /// `from`, held whole for the next read (a copy, within [`MAX_HELD_BYTES`] and `budget`;
    /// `None` otherwise, or when the batch does not start at `from`). A reader waiting at the
    /// log end then reads it from memory instead of the file: the write woke it, and it asks
    /// for exactly these records. The batch was sealed by this process (its CRC is the one it
    /// wrote), so it is not verified again.
    pub(in crate::storage) fn appended(
        parts: &[&[u8]],
        (position, from): (u64, u64),
        budget: &'static HeldBudget,
    ) -> Option<Box<Held>> {
        let header = BatchHeader::parse(parts.first()?)?;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        let uncompressed = header.compression() == Ok(Compression::None);
        let whole = header.batch_len == len && header.base_offset == from;
        if !uncompressed || !whole || len > MAX_HELD_BYTES {
            return None;
        }
        let reserved = budget.try_reserve(len)?;
        let mut buf = AlignedBuf::default();
        buf.read(len, |raw| {
            parts.iter().for_each(|part| raw.extend_from_slice(part));
            Ok(())
        })
        .ok()?;
        Some(Box::new(Held {
            bytes: Arc::new(ReadBytes {
                buf,
                sections: Vec::new(),
            }),
            rest: Rest::Unparsed { batch_at: 0 },
            resume: Resume {
                position,
                header,
                record_at: 0,
                index: 0,
            },
            after_len: None,
            _reserved: reserved,
        }))
    }

    /// The read of up to `max_records` / `max_bytes` from the next held record, with the byte
    /// position the next sequential read starts at, when the held records alone end it
    /// exactly as a read of the file would: it is full before they run out, they are exactly
    /// `max_records`, or the batch is the last of the log (`last`); `None` when it would go
    /// on into the next batch.
    ///
    /// # Errors
    /// The reason, when a held record does not parse.
    pub(in crate::storage) fn serve(
        mut self: Box<Self>,
        (max_records, max_bytes): (usize, usize),
        last: bool,
    ) -> Result<Option<(FetchedRecords, u64)>, String> {
        let header = self.resume.header;
        let (mut fetched, bytes) = match &mut self.rest {
            Rest::Parsed {
                records,
                lens,
                next,
            } => {
                let (records, lens) = (&records[*next..], &lens[*next..]);
                let (mut n, mut bytes) = (0, 0);
                while n < records.len() {
                    let len = lens[n] as usize;
                    if n >= max_records || (n > 0 && bytes + len > max_bytes) {
                        break;
                    }
                    bytes += len;
                    n += 1;
                }
                if n == 0 || !(n < records.len() || n >= max_records || last) {
                    return Ok(None);
                }
                let fetched = FetchedRecords {
                    bytes: Arc::clone(&self.bytes),
                    records: super::Locations(records[..n].to_vec()),
                    next_offset: records[n - 1].offset + 1,
                    ..FetchedRecords::default()
                };
                *next += n;
                (fetched, bytes)
            }
            Rest::Unparsed { batch_at } => {
                let offset = header.base_offset + u64::from(self.resume.index);
                let mut collector = Collector::new(max_records, max_bytes, offset);
                let at = *batch_at + HEADER_LEN + self.resume.record_at;
                let chunk = (self.bytes.buf.as_slice(), 0);
                let whole = collector.take(chunk, at, &header, Some(&self.resume))?;
                if whole && !collector.is_full() && !last {
                    return Ok(None);
                }
                let mut fetched = collector.out;
                fetched.bytes = Arc::clone(&self.bytes);
                (fetched, collector.bytes)
            }
        };
        let n = fetched.records.len();
        let inside = self.resume.index as usize + n < header.records_count as usize;
        if !inside {
            fetched.resume = None;
            fetched.next_batch_len = self.after_len;
            return Ok(Some((
                fetched,
                self.resume.position + header.batch_len as u64,
            )));
        }
        self.resume.record_at += bytes;
        self.resume.index += n as u32;
        // Disk resumption (`Resume`) is for uncompressed batches only.
        fetched.resume = (header.compression() == Ok(Compression::None)).then_some(self.resume);
        fetched.next_batch_len = Some(header.batch_len);
        let position = self.resume.position;
        fetched.held = Some(self);
        Ok(Some((fetched, position)))
    }

    /// Another hold of the same whole batch, sharing its bytes, for another reader (its own
    /// reservation in `budget`): `None` for a hold that is not a whole uncompressed batch
    /// from its first record, or when the budget has no room.
    pub(in crate::storage) fn share(&self, budget: &'static HeldBudget) -> Option<Box<Held>> {
        let whole = matches!(self.rest, Rest::Unparsed { batch_at: 0 })
            && self.resume.index == 0
            && self.resume.record_at == 0;
        if !whole {
            return None;
        }
        let reserved = budget.try_reserve(self.resume.header.batch_len)?;
        Some(Box::new(Held {
            bytes: Arc::clone(&self.bytes),
            rest: Rest::Unparsed { batch_at: 0 },
            resume: self.resume,
            after_len: self.after_len,
            _reserved: reserved,
        }))
    }

    /// The offset of the first record of the batch the records are in.
    pub(in crate::storage) fn batch_first_offset(&self) -> u64 {
        self.resume.header.base_offset
    }

    /// Where the batch the records are in starts in its segment.
    pub(in crate::storage) fn batch_position(&self) -> u64 {
        self.resume.position
    }

    /// The offset after the batch the records are in.
    pub(in crate::storage) fn batch_next_offset(&self) -> u64 {
        self.resume.header.next_offset()
    }

    /// Whether serving the held records parses them: a read ahead of them then does that
    /// work before the read that takes them (see `PartitionLog::read_ahead_from`).
    pub(in crate::storage) fn parses_when_served(&self) -> bool {
        matches!(self.rest, Rest::Unparsed { .. })
    }
}

#[cfg(test)]
mod tests;
