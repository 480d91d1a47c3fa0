//! The on-disk record format: one self-describing, checksummed frame per record.
//!
//! # Bytes (all integers little-endian)
//!
//! ```text
//! offset  size  field
//!      0     4  length        bytes that follow this field: 26 + key_len + value_len
//!      4     4  crc           CRC32C (Castagnoli) of bytes [8, 4 + length)
//!      8     1  magic         format version, currently 1
//!      9     1  attributes    bit 0: a key is present (distinguishes "no key" from an empty key);
//!                             other bits are zero in version 1 (a frame with one set is invalid)
//!     10     8  offset        the record's offset in its partition
//!     18     8  timestamp_ms  append time, milliseconds since the Unix epoch
//!     26     4  key_len       0 when there is no key (anything else is invalid)
//!     30     -  key, then value (value_len = length - 26 - key_len)
//! ```
//!
//! # Invariants
//! * Frames are laid back to back in a segment, offsets strictly contiguous (+1 each).
//! * The CRC covers everything after itself, so a flipped bit anywhere in the magic, offset,
//!   timestamp, key or value is detected. A corrupted `length` sends the CRC over the wrong
//!   bytes, which fails just the same (or runs past the end of the file: a torn tail).
//! * `length` never exceeds [`MAX_FRAME_LEN`]: appends refuse larger records, so a larger value
//!   on disk is corruption, not a big record.
//!
//! # Crash story
//! A frame is written with a single `write` together with the rest of its batch. After a crash
//! the last frame may be cut anywhere (a torn tail: `length` promises more bytes than the file
//! holds), or the file may end in zeros or garbage (a zero `length` is below the minimum and
//! fails). Recovery cuts that unsynced tail at its first frame that does not decode; a bad
//! frame below the recovery point (synced, so media damage) is kept and stepped over, and
//! reads of it fail (see `recovery`).

/// Bytes before the key: length, crc, magic, attributes, offset, timestamp, key_len.
pub const HEADER_LEN: usize = 30;
/// The frame format version this code writes and reads.
pub const MAGIC: u8 = 1;
/// Bytes of the header counted by `length` (everything after the length field).
const LENGTH_COVERED_HEADER: usize = HEADER_LEN - 4;
/// Attribute bit: a key is present.
const ATTR_HAS_KEY: u8 = 0b1;
/// The largest key + value a record may carry, whatever the configuration says. It bounds
/// the read buffer recovery may allocate for one frame when `length` is garbage.
pub const MAX_RECORD_BYTES_LIMIT: usize = 64 << 20;
/// The largest `length` a valid frame can have.
pub const MAX_FRAME_LEN: usize = LENGTH_COVERED_HEADER + MAX_RECORD_BYTES_LIMIT;

/// A record borrowed from a read buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordRef<'a> {
    pub offset: u64,
    pub timestamp_ms: u64,
    pub key: Option<&'a [u8]>,
    pub value: &'a [u8],
}

/// What [`decode`] found at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid frame of `frame_len` bytes.
    Record {
        record: RecordRef<'a>,
        frame_len: usize,
    },
    /// The buffer ends inside a frame; `frame_len` is known once the length field is in the
    /// buffer (`None` before that). At the end of a file this is a torn tail.
    Incomplete { frame_len: Option<usize> },
    /// The bytes are not a valid frame.
    Invalid { reason: String },
}

#[cfg(any(test, feature = "test-support"))]
/// The size of the frame for a record with these key and value lengths.
pub fn frame_len(key_len: usize, value_len: usize) -> usize {
    HEADER_LEN + key_len + value_len
}

#[cfg(any(test, feature = "test-support"))]
/// Appends one frame to `buf`.
///
/// The caller has checked `key.len() + value.len() <= MAX_RECORD_BYTES_LIMIT`.
pub fn encode_into(
    buf: &mut Vec<u8>,
    offset: u64,
    timestamp_ms: u64,
    key: Option<&[u8]>,
    value: &[u8],
) {
    let start = begin_frame(buf, key);
    buf.extend_from_slice(value);
    end_frame(buf, start);
    seal(&mut buf[start..], offset, timestamp_ms);
}

/// Starts an unsealed frame at the end of `buf`: the header with the key's length and the key.
/// The value follows, written by the caller; [`end_frame`] then sets the length. Returns where
/// the frame starts.
pub fn begin_frame(buf: &mut Vec<u8>, key: Option<&[u8]>) -> usize {
    let key_bytes = key.unwrap_or(&[]);
    let start = buf.len();
    // Length, crc, offset and timestamp stay zero here: see end_frame and seal.
    let mut header = [0u8; HEADER_LEN];
    header[8] = MAGIC;
    header[9] = if key.is_some() { ATTR_HAS_KEY } else { 0 };
    header[26..30].copy_from_slice(&(key_bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(&header);
    buf.extend_from_slice(key_bytes);
    start
}

/// Sets the length of the frame that starts at `start` and runs to the end of `buf`; returns
/// the frame's size. A frame longer than `u32` can describe gets a wrong length: size checks
/// refuse such a record before it is ever sealed.
pub fn end_frame(buf: &mut [u8], start: usize) -> usize {
    let frame_len = buf.len() - start;
    let length = (frame_len - 4) as u32;
    buf[start..start + 4].copy_from_slice(&length.to_le_bytes());
    frame_len
}

/// Gives a complete unsealed frame its offset and timestamp and computes its checksum.
pub fn seal(frame: &mut [u8], offset: u64, timestamp_ms: u64) {
    frame[10..18].copy_from_slice(&offset.to_le_bytes());
    frame[18..26].copy_from_slice(&timestamp_ms.to_le_bytes());
    let crc = crc32c::crc32c(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
}

/// Decodes and verifies the frame at the start of `buf`.
pub fn decode(buf: &[u8]) -> Decoded<'_> {
    if buf.len() < 4 {
        return Decoded::Incomplete { frame_len: None };
    }
    let length = u32_at(buf, 0) as usize;
    if !(LENGTH_COVERED_HEADER..=MAX_FRAME_LEN).contains(&length) {
        return Decoded::Invalid {
            reason: format!(
                "frame length {length} outside [{LENGTH_COVERED_HEADER}, {MAX_FRAME_LEN}]"
            ),
        };
    }
    let frame_len = 4 + length;
    if buf.len() < frame_len {
        return Decoded::Incomplete {
            frame_len: Some(frame_len),
        };
    }
    let frame = &buf[..frame_len];
    let stored_crc = u32_at(frame, 4);
    let actual_crc = crc32c::crc32c(&frame[8..]);
    if stored_crc != actual_crc {
        return Decoded::Invalid {
            reason: format!(
                "crc32c mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}"
            ),
        };
    }
    // The CRC passed, so what follows was written by `encode_into`, unless the version differs.
    if frame[8] != MAGIC {
        return Decoded::Invalid {
            reason: format!("unknown format version {}", frame[8]),
        };
    }
    // Bits and lengths `encode_into` never writes would make the record mean something other
    // than its bytes (a dropped key, an ignored flag): refuse them as any other bad frame.
    let attributes = frame[9];
    if attributes & !ATTR_HAS_KEY != 0 {
        return Decoded::Invalid {
            reason: format!("unknown attribute bits {attributes:#04x}"),
        };
    }
    let key_len = u32_at(frame, 26) as usize;
    if key_len > frame_len - HEADER_LEN {
        return Decoded::Invalid {
            reason: format!("key length {key_len} exceeds frame"),
        };
    }
    if attributes & ATTR_HAS_KEY == 0 && key_len != 0 {
        return Decoded::Invalid {
            reason: format!("key length {key_len} on a record without a key"),
        };
    }
    let key = (attributes & ATTR_HAS_KEY != 0).then(|| &frame[HEADER_LEN..HEADER_LEN + key_len]);
    Decoded::Record {
        record: RecordRef {
            offset: u64_at(frame, 10),
            timestamp_ms: u64_at(frame, 18),
            key,
            value: &frame[HEADER_LEN + key_len..],
        },
        frame_len,
    }
}

/// Splits a frame that [`decode`] already verified into its fields, without checking it again
/// (read results hold verified frames in a private buffer).
pub fn view_verified(frame: &[u8]) -> RecordRef<'_> {
    let key_len = u32_at(frame, 26) as usize;
    RecordRef {
        offset: u64_at(frame, 10),
        timestamp_ms: u64_at(frame, 18),
        key: (frame[9] & ATTR_HAS_KEY != 0).then(|| &frame[HEADER_LEN..HEADER_LEN + key_len]),
        value: &frame[HEADER_LEN + key_len..],
    }
}

/// The little-endian `u32` at `buf[at..at + 4]` (shared by the storage formats).
pub(crate) fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// The little-endian `u64` at `buf[at..at + 8]`.
pub(crate) fn u64_at(buf: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(offset: u64, key: Option<&[u8]>, value: &[u8]) -> Vec<u8> {
        let mut buf = Vec::new();
        encode_into(&mut buf, offset, 1_700_000_000_000, key, value);
        buf
    }

    #[test]
    fn round_trips_key_value_offset_and_timestamp() {
        let buf = encoded(42, Some(b"user1"), b"hello");
        assert_eq!(buf.len(), frame_len(5, 5));
        match decode(&buf) {
            Decoded::Record { record, frame_len } => {
                assert_eq!(frame_len, buf.len());
                assert_eq!(record.offset, 42);
                assert_eq!(record.timestamp_ms, 1_700_000_000_000);
                assert_eq!(record.key, Some(&b"user1"[..]));
                assert_eq!(record.value, b"hello");
            }
            other => panic!("expected a record, got {other:?}"),
        }
    }

    #[test]
    fn distinguishes_no_key_from_empty_key() {
        let none = encoded(0, None, b"v");
        let empty = encoded(0, Some(b""), b"v");
        assert!(matches!(decode(&none), Decoded::Record { record, .. } if record.key.is_none()));
        assert!(
            matches!(decode(&empty), Decoded::Record { record, .. } if record.key == Some(&b""[..]))
        );
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let buf = encoded(7, Some(b"k"), b"some value bytes");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(
                !matches!(decode(&bad), Decoded::Record { .. }),
                "flip at byte {i} went unnoticed"
            );
        }
    }

    #[test]
    fn a_cut_frame_is_incomplete_and_zeros_are_invalid() {
        let buf = encoded(1, None, b"abcdef");
        for cut in 0..buf.len() {
            assert!(
                matches!(decode(&buf[..cut]), Decoded::Incomplete { .. }),
                "cut at {cut}"
            );
        }
        assert!(matches!(decode(&[0u8; 64]), Decoded::Invalid { .. }));
    }
}
