//! The rest of a batch a read stopped in, kept for the next read (see [`Held`]).

use std::sync::Arc;

use super::{FetchedRecords, ReadBytes, RecordLoc, Resume};
use crate::storage::compression::Compression;

/// The records of a batch that a read verified whole (CRC and every record), parsed, and
/// stopped in before returning: the next sequential read returns them from the same buffer
/// when they fill it, instead of reading and parsing them again. A consumer taking 500
/// records at a time from batches of 1000 otherwise read and parsed each batch's second half
/// twice. Kept only while the read's bytes and the held records' locations take at most
/// [`MAX_HELD_BYTES`]: the partition holds them until its next read.
#[derive(Debug)]
pub(in crate::storage) struct Held {
    pub(super) bytes: Arc<ReadBytes>,
    /// The records not returned yet, in offset order, and their encoded lengths (what
    /// `max_bytes` counts).
    pub(super) records: Vec<RecordLoc>,
    pub(super) lens: Vec<u32>,
    /// How many of them were returned since.
    pub(super) next: usize,
    /// The batch, and where `records[next]` starts in it.
    pub(super) resume: Resume,
    /// The length of the batch after it, when the read saw its header.
    pub(super) after_len: Option<usize>,
}

/// The most bytes a [`Held`] keeps alive between two reads of a partition.
pub(super) const MAX_HELD_BYTES: usize = 1 << 20;

impl Held {
    /// The read of up to `max_records` / `max_bytes` from the next held record, with the byte
    /// position the next sequential read starts at, when the held records alone end it
    /// exactly as a read of the file would (it is full before they run out, or they are
    /// exactly `max_records`); `None` when it would go on into the next batch.
    pub(in crate::storage) fn serve(
        mut self: Box<Self>,
        max_records: usize,
        max_bytes: usize,
    ) -> Option<(FetchedRecords, u64)> {
        let (records, lens) = (&self.records[self.next..], &self.lens[self.next..]);
        let (mut n, mut bytes) = (0, 0);
        while n < records.len() {
            let len = lens[n] as usize;
            if n >= max_records || (n > 0 && bytes + len > max_bytes) {
                break;
            }
            bytes += len;
            n += 1;
        }
        let inside = n < records.len();
        if n == 0 || !(inside || n >= max_records) {
            return None;
        }
        let header = self.resume.header;
        let mut fetched = FetchedRecords {
            bytes: Arc::clone(&self.bytes),
            records: records[..n].to_vec(),
            next_offset: records[n - 1].offset + 1,
            ..FetchedRecords::default()
        };
        if !inside {
            fetched.next_batch_len = self.after_len;
            return Some((fetched, self.resume.position + header.batch_len as u64));
        }
        self.resume.record_at += bytes;
        self.resume.index += n as u32;
        self.next += n;
        // Disk resumption (`Resume`) is for uncompressed batches only.
        fetched.resume = (header.compression() == Ok(Compression::None)).then_some(self.resume);
        fetched.next_batch_len = Some(header.batch_len);
        let position = self.resume.position;
        fetched.held = Some(self);
        Some((fetched, position))
    }
}
