//! [`RecordBatch`]: records to produce, laid out as they will be on disk.
//!
//! # Layout
//! One buffer of [`record`] frames back to back (each starts with its length, so the buffer
//! is its own index). A frame is complete except for three fields the partition fills in
//! when it appends the batch (see `RecordBatch::seal`): the offset, the timestamp and the
//! CRC, all zero until then.
//!
//! # Why
//! A producer pays one copy per record into one buffer, and the partition writes that buffer
//! as it is after sealing the frames in place: one allocation per batch instead of one or two
//! per record, and no re-encoding on the partition's thread.

use std::fmt;

use super::error::{Result, StorageError};
use super::record;

/// The largest batch one append may write: frame positions are `u32` in the index, and a
/// segment rolls before a batch that does not fit, so a segment stays below 2 GiB.
pub const MAX_BATCH_BYTES: usize = 1 << 30;
/// The default maximum key + value size of one record (Kafka's `max.message.bytes`).
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1 << 20;

/// A record to append. The log assigns its offset and timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// Checks a batch against the size limits: each record's key + value at most
/// `max_record_bytes`, the whole batch at most [`MAX_BATCH_BYTES`] on disk.
///
/// # Errors
/// `RecordTooLarge`, naming the largest record (or the batch's size).
pub fn check_batch_limits(batch: &RecordBatch, max_record_bytes: usize) -> Result<()> {
    if batch.max_record_len() > max_record_bytes {
        return Err(StorageError::RecordTooLarge {
            size: batch.max_record_len(),
            max: max_record_bytes,
        });
    }
    if batch.size_bytes() > MAX_BATCH_BYTES {
        return Err(StorageError::RecordTooLarge {
            size: batch.size_bytes(),
            max: MAX_BATCH_BYTES,
        });
    }
    Ok(())
}

/// Records to produce, as unsealed frames; see the module docs.
///
/// ```
/// use nanokafka::RecordBatch;
/// let mut batch = RecordBatch::new();
/// batch.push_raw(None, b"one");
/// batch.push_raw(Some(b"user-7"), b"two");
/// assert_eq!(batch.len(), 2);
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RecordBatch {
    /// Unsealed frames, back to back.
    frames: Vec<u8>,
    /// Frames in `frames`.
    count: usize,
    /// The largest key + value in the batch (checked against `max_record_bytes` on append).
    max_record_len: usize,
}

impl RecordBatch {
    pub fn new() -> Self {
        RecordBatch::default()
    }

    /// A batch with room for `records` records of `payload_bytes` key and value bytes in all.
    /// The room reserved is at most [`MAX_BATCH_BYTES`], the largest batch any broker takes,
    /// whatever the arguments say.
    pub fn with_capacity(records: usize, payload_bytes: usize) -> Self {
        let bytes = records
            .saturating_mul(record::HEADER_LEN)
            .saturating_add(payload_bytes)
            .min(MAX_BATCH_BYTES);
        RecordBatch {
            frames: Vec::with_capacity(bytes),
            count: 0,
            max_record_len: 0,
        }
    }

    /// Adds a record of raw bytes. Sizes are checked when the batch is produced.
    pub fn push_raw(&mut self, key: Option<&[u8]>, value: &[u8]) {
        let start = record::begin_frame(&mut self.frames, key);
        self.frames.extend_from_slice(value);
        self.finish_frame(start);
    }

    /// Adds a record whose value `write_value` appends to the buffer it is given. When it fails,
    /// the partial frame is removed and the batch is as it was.
    pub(crate) fn push_with<E>(
        &mut self,
        key: Option<&[u8]>,
        write_value: impl FnOnce(&mut Vec<u8>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let start = record::begin_frame(&mut self.frames, key);
        if let Err(e) = write_value(&mut self.frames) {
            self.frames.truncate(start);
            return Err(e);
        }
        self.finish_frame(start);
        Ok(())
    }

    fn finish_frame(&mut self, start: usize) {
        let payload_len = self.frames.len() - start - record::HEADER_LEN;
        self.max_record_len = self.max_record_len.max(payload_len);
        if payload_len > record::MAX_RECORD_BYTES_LIMIT {
            // No broker takes it (the batch is refused as `RecordTooLarge`); its length might
            // not even fit the frame's length field, so it is not kept.
            self.frames.truncate(start);
            return;
        }
        record::end_frame(&mut self.frames, start);
        self.count += 1;
    }

    /// Records in the batch (a record too large for any broker is not counted: see
    /// [`RecordBatch::max_record_len`]).
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes the batch takes on disk.
    pub fn size_bytes(&self) -> usize {
        self.frames.len()
    }

    /// The largest key + value of one record in the batch.
    pub fn max_record_len(&self) -> usize {
        self.max_record_len
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.frames.clear();
        self.count = 0;
        self.max_record_len = 0;
    }

    /// The records, in order.
    pub fn records(&self) -> impl Iterator<Item = AppendRecord<'_>> + '_ {
        self.frame_slices().map(|frame| {
            let view = record::view_verified(frame);
            AppendRecord {
                key: view.key,
                value: view.value,
            }
        })
    }

    fn frame_slices(&self) -> impl Iterator<Item = &[u8]> + '_ {
        frame_ranges(&self.frames).map(|range| &self.frames[range])
    }

    /// Moves `other`'s records to the end of this batch.
    pub fn append(&mut self, other: &RecordBatch) {
        self.frames.extend_from_slice(&other.frames);
        self.count += other.count;
        self.max_record_len = self.max_record_len.max(other.max_record_len);
    }

    /// Splits the batch by `routes` (one entry per record): for each route, in route order,
    /// its records as a batch and their indexes in this batch.
    ///
    /// # Panics
    /// If `routes` does not have one entry per record (a bug in the caller).
    pub(crate) fn split(&self, routes: &[u32]) -> Vec<(u32, RecordBatch, Vec<usize>)> {
        assert_eq!(routes.len(), self.len(), "one route per record");
        let mut parts: std::collections::BTreeMap<u32, (RecordBatch, Vec<usize>)> =
            std::collections::BTreeMap::new();
        for (i, (frame, &route)) in self.frame_slices().zip(routes).enumerate() {
            let (part, indexes) = parts.entry(route).or_default();
            part.frames.extend_from_slice(frame);
            part.count += 1;
            part.max_record_len = part.max_record_len.max(frame.len() - record::HEADER_LEN);
            indexes.push(i);
        }
        parts
            .into_iter()
            .map(|(route, (part, indexes))| (route, part, indexes))
            .collect()
    }

    /// Gives the records offsets `base_offset`, `base_offset + 1`, … and `timestamp_ms`, and
    /// computes their checksums: the frames are then ready to be written.
    pub(crate) fn seal(&mut self, base_offset: u64, timestamp_ms: u64) {
        let mut start = 0usize;
        let mut offset = base_offset;
        while start < self.frames.len() {
            let end = start + frame_len_at(&self.frames, start);
            record::seal(&mut self.frames[start..end], offset, timestamp_ms);
            (start, offset) = (end, offset + 1);
        }
    }

    /// The frames, back to back (sealed or not).
    pub(crate) fn frames(&self) -> &[u8] {
        &self.frames
    }
}

/// The size of the frame that starts at `start` of a buffer of whole frames, from its length
/// field.
fn frame_len_at(frames: &[u8], start: usize) -> usize {
    4 + record::u32_at(frames, start) as usize
}

/// The byte range of each frame in a buffer of whole frames (as a `RecordBatch` holds, or a
/// sealed batch about to be written).
pub(crate) fn frame_ranges(frames: &[u8]) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
    let mut start = 0usize;
    std::iter::from_fn(move || {
        (start < frames.len()).then(|| {
            let end = start + frame_len_at(frames, start);
            let range = start..end;
            start = end;
            range
        })
    })
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatch")
            .field("records", &self.len())
            .field("bytes", &self.frames.len())
            .finish()
    }
}

impl<'a> FromIterator<AppendRecord<'a>> for RecordBatch {
    fn from_iter<I: IntoIterator<Item = AppendRecord<'a>>>(records: I) -> Self {
        let mut batch = RecordBatch::new();
        for r in records {
            batch.push_raw(r.key, r.value);
        }
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::record::{decode, Decoded};

    fn sample() -> RecordBatch {
        let mut batch = RecordBatch::new();
        batch.push_raw(None, b"first");
        batch.push_raw(Some(b""), b"");
        batch.push_raw(Some(b"key"), b"third value");
        batch
    }

    #[test]
    fn sealed_frames_decode_to_the_pushed_records_with_their_offsets() {
        let mut batch = sample();
        batch.seal(40, 1_700_000_000_000);
        let frames = batch.frames();
        let mut at = 0;
        let expected: [(Option<&[u8]>, &[u8]); 3] = [
            (None, b"first"),
            (Some(b""), b""),
            (Some(b"key"), b"third value"),
        ];
        for (i, (key, value)) in expected.into_iter().enumerate() {
            match decode(&frames[at..]) {
                Decoded::Record { record, frame_len } => {
                    assert_eq!(record.offset, 40 + i as u64);
                    assert_eq!(record.timestamp_ms, 1_700_000_000_000);
                    assert_eq!((record.key, record.value), (key, value));
                    at += frame_len;
                }
                other => panic!("frame {i}: {other:?}"),
            }
        }
        assert_eq!(at, frames.len());
    }

    #[test]
    fn an_unsealed_frame_does_not_pass_as_a_record() {
        let batch = sample();
        assert!(matches!(decode(batch.frames()), Decoded::Invalid { .. }));
    }

    #[test]
    fn split_keeps_each_routes_records_in_order_with_their_indexes() {
        let batch = sample();
        let parts = batch.split(&[1, 0, 1]);
        assert_eq!(parts.len(), 2);
        let (route, part, indexes) = &parts[1];
        assert_eq!((*route, indexes.as_slice()), (1, &[0, 2][..]));
        let values: Vec<&[u8]> = part.records().map(|r| r.value).collect();
        assert_eq!(values, [&b"first"[..], b"third value"]);
        assert_eq!(part.max_record_len(), 14);
        assert_eq!(
            parts[0].1.records().next().map(|r| r.key),
            Some(Some(&b""[..]))
        );
    }

    #[test]
    fn a_failed_value_writer_leaves_the_batch_unchanged() {
        let mut batch = sample();
        let before = batch.clone();
        let failed: std::result::Result<(), &str> = batch.push_with(Some(b"k"), |buf| {
            buf.extend_from_slice(b"half");
            Err("encoder failed")
        });
        assert_eq!(failed, Err("encoder failed"));
        assert_eq!(batch, before);
    }

    #[test]
    fn a_record_over_the_hard_limit_is_not_kept_but_refuses_the_batch() {
        let mut batch = sample();
        let before = batch.frames().len();
        batch.push_raw(None, &vec![0; record::MAX_RECORD_BYTES_LIMIT + 1]);
        assert_eq!((batch.len(), batch.frames().len()), (3, before));
        assert_eq!(batch.max_record_len(), record::MAX_RECORD_BYTES_LIMIT + 1);
        let limits = check_batch_limits(&batch, record::MAX_RECORD_BYTES_LIMIT);
        assert!(matches!(limits, Err(StorageError::RecordTooLarge { .. })));
    }

    #[test]
    fn an_absurd_capacity_is_a_bounded_reservation_not_a_panic() {
        let batch = RecordBatch::with_capacity(usize::MAX, usize::MAX);
        assert!(batch.is_empty());
        assert!(batch.frames.capacity() <= MAX_BATCH_BYTES);
    }

    #[test]
    fn append_and_records_round_trip() {
        let mut batch = sample();
        batch.append(&sample());
        assert_eq!(batch.len(), 6);
        assert_eq!(batch.records().nth(3).map(|r| r.value), Some(&b"first"[..]));
        assert_eq!(batch.max_record_len(), 14);
    }
}
