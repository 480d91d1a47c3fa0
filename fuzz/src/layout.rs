//! Batches and records read by the layout `nanokafka::internals::storage::format` documents, written
//! from that documentation alone: what the oracle holds the crate's own parser against.

use nanokafka::internals::storage::format::BatchHeader;

/// A batch header read by the documented layout (big-endian fields at fixed positions).
pub fn header_fields(batch: &[u8]) -> BatchHeader {
    let i16_at = |at: usize| i16::from_be_bytes(batch[at..at + 2].try_into().unwrap());
    let i32_at = |at: usize| i32::from_be_bytes(batch[at..at + 4].try_into().unwrap());
    let i64_at = |at: usize| i64::from_be_bytes(batch[at..at + 8].try_into().unwrap());
    BatchHeader {
        base_offset: i64_at(0) as u64,
        batch_len: 12 + i32_at(8) as usize,
        leader_epoch: i32_at(12),
        crc: u32::from_be_bytes(batch[17..21].try_into().unwrap()),
        attributes: i16_at(21),
        last_offset_delta: i32_at(23) as u32,
        base_timestamp: i64_at(27),
        max_timestamp: i64_at(35),
        producer_id: i64_at(43),
        producer_epoch: i16_at(51),
        base_sequence: i32_at(53),
        records_count: i32_at(57) as u32,
    }
}

/// A record of a records section, as this file's own parser reads the documented layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: u32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Reads the fields of one record from the front of a byte slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    /// A zigzag varint of at most `max_bytes` bytes, bits past 64 dropped (as protobuf does).
    fn zigzag(&mut self, max_bytes: usize) -> Option<i64> {
        let mut z = 0u64;
        for i in 0..max_bytes {
            let b = self.take(1)?[0];
            z |= u64::from(b & 0x7f).checked_shl(7 * i as u32).unwrap_or(0);
            if b & 0x80 == 0 {
                return Some((z >> 1) as i64 ^ -((z & 1) as i64));
            }
        }
        None
    }

    /// A varint: 5 bytes at most, an `i32` value.
    fn varint(&mut self) -> Option<i32> {
        i32::try_from(self.zigzag(5)?).ok()
    }

    /// A length-prefixed field; length -1 is null.
    fn bytes(&mut self) -> Option<Option<Vec<u8>>> {
        match self.varint()? {
            -1 => Some(None),
            n => Some(Some(self.take(usize::try_from(n).ok()?)?.to_vec())),
        }
    }

    fn record(&mut self) -> Option<Parsed> {
        let length = usize::try_from(self.varint()?).ok()?;
        let mut body = Reader(self.take(length)?);
        let attributes = body.take(1)?[0];
        let timestamp_delta = body.zigzag(10)?;
        let offset_delta = u32::try_from(body.varint()?).ok()?;
        let key = body.bytes()?;
        let value = body.bytes()?;
        let count = usize::try_from(body.varint()?).ok()?;
        let mut headers = Vec::new();
        for _ in 0..count {
            headers.push((body.bytes()??, body.bytes()?));
        }
        body.0.is_empty().then_some(Parsed {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers,
        })
    }
}

/// The records of a records section: exactly `count` of them, offset deltas rising strictly
/// from at least 0 to at most `last_offset_delta` (`0, 1, ...` when `count` is
/// `last_offset_delta + 1`; the log cleaner leaves gaps), no byte left over; `None`
/// otherwise.
pub fn parse_section(section: &[u8], count: u32, last_offset_delta: u32) -> Option<Vec<Parsed>> {
    let mut reader = Reader(section);
    let mut records: Vec<Parsed> = Vec::new();
    for _ in 0..count {
        let record = reader.record()?;
        let rises = records
            .last()
            .is_none_or(|before| record.offset_delta > before.offset_delta);
        if !rises || record.offset_delta > last_offset_delta {
            return None;
        }
        records.push(record);
    }
    reader.0.is_empty().then_some(records)
}

/// The canonical bytes of `records` (shortest varints).
pub fn encode_section(records: &[Parsed]) -> Vec<u8> {
    fn varint(buf: &mut Vec<u8>, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            buf.push(z as u8 | 0x80);
            z >>= 7;
        }
        buf.push(z as u8);
    }
    fn bytes(buf: &mut Vec<u8>, b: Option<&[u8]>) {
        match b {
            None => varint(buf, -1),
            Some(b) => {
                varint(buf, b.len() as i64);
                buf.extend_from_slice(b);
            }
        }
    }
    let mut section = Vec::new();
    for r in records {
        let mut body = vec![r.attributes];
        varint(&mut body, r.timestamp_delta);
        varint(&mut body, i64::from(r.offset_delta));
        bytes(&mut body, r.key.as_deref());
        bytes(&mut body, r.value.as_deref());
        varint(&mut body, r.headers.len() as i64);
        for (k, v) in &r.headers {
            bytes(&mut body, Some(k));
            bytes(&mut body, v.as_deref());
        }
        varint(&mut section, body.len() as i64);
        section.extend(body);
    }
    section
}

/// CRC32C, bit by bit: slow, but independent of the code under test.
pub fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
