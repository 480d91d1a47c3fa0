//! [`RecordBatch`]: records to produce, laid out as the Kafka batch they will be on disk.
//!
//! # Layout
//! One buffer: room for the 61-byte batch header, then the records in Kafka's record format
//! ([`super::format`]) with offset deltas `0, 1, ...` and timestamp delta 0. When the
//! partition appends the batch it writes the header in place (`RecordBatch::seal`: base
//! offset, timestamps, counts, CRC) and writes the buffer as it is.
//!
//! # Why
//! A producer pays one copy per record into one buffer, and the partition writes that buffer
//! after filling in 61 bytes: one allocation per batch instead of one or two per record, and
//! no re-encoding on the partition's thread. Two batches coalesced into one append (while a
//! sync is in flight) become one Kafka batch: the second's records are re-encoded with their
//! new offset deltas.

use std::fmt;

use super::error::{Result, StorageError};
use super::format::{self, NativeSeal, TimestampType, HEADER_LEN};

/// The largest batch one append may write: frame positions are `u32` in the index, and a
/// segment rolls before a batch that does not fit, so a segment stays below 2 GiB.
pub const MAX_BATCH_BYTES: usize = format::MAX_BATCH_LEN;
/// The default maximum size of one record (key, value and headers; Kafka's
/// `max.message.bytes`).
pub const DEFAULT_MAX_RECORD_BYTES: usize = 1 << 20;
/// The largest key + value + headers a record may carry, whatever the configuration says.
pub const MAX_RECORD_BYTES_LIMIT: usize = 64 << 20;

/// A header of a record to produce: a key and an optional value, as Kafka has them.
pub type HeaderRef<'a> = (&'a [u8], Option<&'a [u8]>);

/// A record to append. The log assigns its offset and timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendRecord<'a> {
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// Checks a batch against the size limits: each record's key, value and headers at most
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

/// Records to produce, as one unsealed Kafka batch; see the module docs.
///
/// ```
/// use nanokafka::RecordBatch;
/// let mut batch = RecordBatch::new();
/// batch.push_raw(None, b"one");
/// batch.push_raw(Some(b"user-7"), b"two");
/// assert_eq!(batch.len(), 2);
/// ```
pub struct RecordBatch {
    /// Room for the header, then the records.
    buf: Vec<u8>,
    /// Records in `buf`.
    count: usize,
    /// The largest key + value + headers in the batch (checked against `max_record_bytes`).
    max_record_len: usize,
    /// A typed value being serialised, before it is copied into its record (reused).
    scratch: Vec<u8>,
}

impl Default for RecordBatch {
    fn default() -> Self {
        RecordBatch {
            buf: vec![0; HEADER_LEN],
            count: 0,
            max_record_len: 0,
            scratch: Vec::new(),
        }
    }
}

impl Clone for RecordBatch {
    fn clone(&self) -> Self {
        RecordBatch {
            buf: self.buf.clone(),
            count: self.count,
            max_record_len: self.max_record_len,
            scratch: Vec::new(),
        }
    }
}

impl PartialEq for RecordBatch {
    fn eq(&self, other: &Self) -> bool {
        self.buf[HEADER_LEN..] == other.buf[HEADER_LEN..] && self.count == other.count
    }
}

impl Eq for RecordBatch {}

impl RecordBatch {
    pub fn new() -> Self {
        RecordBatch::default()
    }

    /// A batch with room for `records` records of `payload_bytes` key and value bytes in all.
    /// The room reserved is at most 1 GiB, the largest batch any broker takes,
    /// whatever the arguments say.
    ///
    /// The room is enough for records of equal size without headers, so that filling the
    /// batch never grows its buffer: a grown buffer is a copy of all of it, and one past
    /// glibc's mmap threshold (128 KiB) is mapped, faulted in page by page and unmapped with
    /// a TLB shootdown on every batch.
    pub fn with_capacity(records: usize, payload_bytes: usize) -> Self {
        let bytes = records
            .saturating_mul(record_framing(records, payload_bytes))
            .saturating_add(payload_bytes)
            // `encode_record` reserves a longest varint for each record's length.
            .saturating_add(HEADER_LEN + format::MAX_VARINT_LEN)
            .min(MAX_BATCH_BYTES);
        let mut buf = Vec::with_capacity(bytes);
        buf.resize(HEADER_LEN, 0);
        RecordBatch {
            buf,
            ..RecordBatch::default()
        }
    }

    /// Adds a record of raw bytes. Sizes are checked when the batch is produced.
    pub fn push_raw(&mut self, key: Option<&[u8]>, value: &[u8]) {
        self.push_record(key, Some(value), &[]);
    }

    /// Adds a tombstone: `key` with Kafka's null value. On a compacted topic it deletes the
    /// key: the cleaner removes the key's older records, and the tombstone itself once its
    /// delete horizon (`delete_retention_ms` after its segment was cleaned) has passed.
    pub fn push_tombstone(&mut self, key: &[u8]) {
        self.push_record(Some(key), None, &[]);
    }

    /// Adds a record of raw bytes with headers (`(key, value)`; a `None` value is Kafka's
    /// null header value). Sizes are checked when the batch is produced.
    pub fn push_header_refs(
        &mut self,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[HeaderRef<'_>],
    ) {
        self.push_record(key, Some(value), headers);
    }

    /// Adds a record whose value `write_value` appends to the buffer it is given. When it
    /// fails, the batch is as it was.
    pub(crate) fn push_with<E>(
        &mut self,
        key: Option<&[u8]>,
        headers: &[HeaderRef<'_>],
        write_value: impl FnOnce(&mut Vec<u8>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut value = std::mem::take(&mut self.scratch);
        value.clear();
        let written = write_value(&mut value);
        if written.is_ok() {
            self.push_record(key, Some(&value), headers);
        }
        self.scratch = value;
        written
    }

    fn push_record(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, headers: &[HeaderRef<'_>]) {
        let payload_len = key.map_or(0, <[u8]>::len)
            + value.map_or(0, <[u8]>::len)
            + headers
                .iter()
                .map(|(k, v)| k.len() + v.map_or(0, <[u8]>::len))
                .sum::<usize>();
        self.max_record_len = self.max_record_len.max(payload_len);
        if payload_len > MAX_RECORD_BYTES_LIMIT {
            // No broker takes it (the batch is refused as `RecordTooLarge`), so it is not kept.
            return;
        }
        format::encode_record(&mut self.buf, self.count as u32, key, value, headers);
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

    /// Bytes the batch takes on disk, header included.
    pub fn size_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The largest key + value + headers of one record in the batch.
    pub fn max_record_len(&self) -> usize {
        self.max_record_len
    }

    /// Bytes the batch holds room for without growing.
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Empties the batch, keeping its buffers.
    pub fn clear(&mut self) {
        self.buf.truncate(HEADER_LEN);
        self.count = 0;
        self.max_record_len = 0;
    }

    /// The records, in order.
    pub fn records(&self) -> impl Iterator<Item = AppendRecord<'_>> + '_ {
        self.views().map(|view| AppendRecord {
            key: view.key,
            value: view.value.unwrap_or_default(),
        })
    }

    /// Each record as parsed from the buffer (every record in it was encoded by this type).
    pub(crate) fn views(&self) -> impl Iterator<Item = format::RecordView<'_>> + '_ {
        let mut at = HEADER_LEN;
        // `count` records and no further: a parse past the last would fail, and a failed
        // parse allocates its reason.
        (0..self.count).map_while(move |_| {
            let view = format::parse_record(self.buf.get(at..)?).ok()?;
            at += view.encoded_len;
            Some(view)
        })
    }

    /// Makes room for the batch to grow to `bytes` on disk, header included, without
    /// growing its buffer again (at most [`MAX_BATCH_BYTES`]).
    pub(crate) fn reserve_to(&mut self, bytes: usize) {
        let bytes = bytes.min(MAX_BATCH_BYTES);
        self.buf.reserve(bytes.saturating_sub(self.buf.len()));
    }

    /// Moves `other`'s records to the end of this batch (re-encoded with their new offset
    /// deltas).
    pub fn append(&mut self, other: &RecordBatch) {
        self.buf.reserve(other.buf.len() - HEADER_LEN);
        for view in other.views() {
            format::reencode_record(&mut self.buf, &view, self.count as u32);
            self.count += 1;
        }
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
        for (i, (view, &route)) in self.views().zip(routes).enumerate() {
            let (part, indexes) = parts.entry(route).or_default();
            format::reencode_record(&mut part.buf, &view, part.count as u32);
            part.count += 1;
            part.max_record_len = part.max_record_len.max(view.payload_len());
            indexes.push(i);
        }
        parts
            .into_iter()
            .map(|(route, (part, indexes))| (route, part, indexes))
            .collect()
    }

    /// Writes the batch header: the records get offsets `base_offset, base_offset + 1, ...`
    /// and `timestamp_ms`; the batch is then ready to be written.
    pub(crate) fn seal(
        &mut self,
        base_offset: u64,
        timestamp_ms: u64,
        timestamp_type: TimestampType,
    ) {
        format::seal_native(
            &mut self.buf,
            NativeSeal {
                base_offset,
                records_count: self.count as u32,
                timestamp_ms: i64::try_from(timestamp_ms).unwrap_or(i64::MAX),
                timestamp_type,
            },
        );
    }

    /// The batch's bytes: the header (once sealed) and the records.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.buf
    }
}

/// The bytes a record takes besides its key and value, for `records` records sharing
/// `payload_bytes` equally and without headers: the length, offset delta, key length and value
/// length varints, and the attributes, timestamp delta and header count bytes (one each).
fn record_framing(records: usize, payload_bytes: usize) -> usize {
    let per_record = payload_bytes / records.max(1);
    let varint = |n: usize| format::varint_len(i64::try_from(n).unwrap_or(i64::MAX));
    // The body (framing included) is below per_record + 32 for any size a batch can hold.
    varint(per_record + 32) + 3 + varint(records) + 2 * varint(per_record)
}

impl fmt::Debug for RecordBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordBatch")
            .field("records", &self.len())
            .field("bytes", &self.buf.len())
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
    use crate::storage::format::{decode, records_section, validate_records, Decoded};

    fn sample() -> RecordBatch {
        let mut batch = RecordBatch::new();
        batch.push_raw(None, b"first");
        batch.push_raw(Some(b""), b"");
        batch.push_raw(Some(b"key"), b"third value");
        batch
    }

    #[test]
    fn a_batch_filled_as_sized_never_grows_its_buffer() {
        for (records, value_len, key) in [
            (1000, 100, None),
            (1000, 100, Some(&b"k"[..])),
            (1, 0, None),
            (10, 5000, None),
            (100_000, 10, Some(&b"key-0001"[..])),
            (200, 20_000, None),
        ] {
            let key_len = key.map_or(0, <[u8]>::len);
            let mut batch = RecordBatch::with_capacity(records, records * (key_len + value_len));
            let room = batch.buf.capacity();
            let value = vec![7u8; value_len];
            for _ in 0..records {
                batch.push_raw(key, &value);
            }
            assert_eq!(
                batch.buf.capacity(),
                room,
                "{records} records of {key_len} + {value_len} B grew the buffer to {} B",
                batch.buf.len()
            );
        }
    }

    #[test]
    fn a_sealed_batch_decodes_to_the_pushed_records_with_their_offsets() {
        let mut batch = sample();
        batch.seal(40, 1_700_000_000_000, TimestampType::CreateTime);
        let bytes = batch.bytes();
        let Decoded::Batch(header) = decode(bytes) else {
            panic!("{:?}", decode(bytes))
        };
        assert_eq!((header.base_offset, header.last_offset()), (40, 42));
        assert_eq!(header.batch_len, bytes.len());
        assert_eq!(header.record_timestamp(0), 1_700_000_000_000);
        let mut scratch = Vec::new();
        let section = records_section(bytes, &header, 1 << 20, &mut scratch).unwrap();
        let mut seen = Vec::new();
        validate_records(section, &header, |r| seen.push((r.key, r.value.unwrap()))).unwrap();
        let expected: [(Option<&[u8]>, &[u8]); 3] = [
            (None, b"first"),
            (Some(b""), b""),
            (Some(b"key"), b"third value"),
        ];
        assert_eq!(seen, expected);
    }

    #[test]
    fn an_unsealed_batch_does_not_pass_as_one() {
        let batch = sample();
        assert!(matches!(decode(batch.bytes()), Decoded::Invalid { .. }));
    }

    #[test]
    fn headers_are_kept_through_append_and_split() {
        let mut batch = RecordBatch::new();
        batch.push_header_refs(Some(b"k"), b"v", &[(b"trace", Some(b"t1")), (b"n", None)]);
        let mut both = sample();
        both.append(&batch);
        let last = both.views().last().unwrap();
        assert_eq!(last.offset_delta, 3);
        let headers: Vec<_> = last.headers.iter().collect();
        assert_eq!(headers, [(&b"trace"[..], Some(&b"t1"[..])), (b"n", None)]);
        let (_, part, _) = both.split(&[0, 0, 0, 1]).pop().unwrap();
        assert_eq!(part.views().next().unwrap().headers.len(), 2);
        assert_eq!(part.max_record_len(), 1 + 1 + 5 + 2 + 1);
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
        let failed: std::result::Result<(), &str> = batch.push_with(Some(b"k"), &[], |buf| {
            buf.extend_from_slice(b"half");
            Err("encoder failed")
        });
        assert_eq!(failed, Err("encoder failed"));
        assert_eq!(batch, before);
    }

    #[test]
    fn a_record_over_the_hard_limit_is_not_kept_but_refuses_the_batch() {
        let mut batch = sample();
        let before = batch.bytes().len();
        batch.push_raw(None, &vec![0; MAX_RECORD_BYTES_LIMIT + 1]);
        assert_eq!((batch.len(), batch.bytes().len()), (3, before));
        assert_eq!(batch.max_record_len(), MAX_RECORD_BYTES_LIMIT + 1);
        let limits = check_batch_limits(&batch, MAX_RECORD_BYTES_LIMIT);
        assert!(matches!(limits, Err(StorageError::RecordTooLarge { .. })));
    }

    #[test]
    fn an_absurd_capacity_is_a_bounded_reservation_not_a_panic() {
        let batch = RecordBatch::with_capacity(usize::MAX, usize::MAX);
        assert!(batch.is_empty());
        assert!(batch.buf.capacity() <= MAX_BATCH_BYTES);
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
