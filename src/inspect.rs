//! Read-only views of the on-disk format, for the `nanokafka` command line's inspection
//! subcommands (`consume`, `dump`, `verify`): the batches of a segment file with their
//! header fields and whether each verifies, the records of stored batches as owned values,
//! and a scan of a whole data directory for damage.
//!
//! Nothing here takes a lock or writes: a segment is read as a file, and a damaged byte is
//! reported, never repaired (repair is the broker's recovery, on open).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::storage::fetch::MAX_DECOMPRESSED_BYTES;
use crate::storage::format::{self, BatchHeader, Decoded, HEADER_LEN};

/// The file that marks a directory as a NanoKafka data directory.
pub use crate::storage::data_dir::FORMAT_FILE;

/// One batch of a segment file, as `nanokafka dump` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchSummary {
    /// Byte position of the batch in the file.
    pub position: u64,
    /// Bytes of the whole batch (its 12-byte offset and length prefix included).
    pub size: u64,
    pub base_offset: u64,
    pub last_offset: u64,
    pub count: u32,
    /// The batch's base timestamp and max timestamp (ms since the Unix epoch).
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    /// `none`, `gzip`, `snappy`, `lz4`, `zstd`, or the unknown id's description.
    pub codec: String,
    /// A transaction marker (takes offsets, holds no records).
    pub control: bool,
    /// The stored CRC-32C matches the bytes, and the header's rules hold.
    pub crc_valid: bool,
    /// Why the batch does not verify (CRC, header or records), when it does not.
    pub error: Option<String>,
}

/// Bytes of a segment file that are not valid batches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Damage {
    pub file: PathBuf,
    /// First damaged byte.
    pub position: u64,
    /// Bytes from `position` that are damaged (a whole batch, or the rest of the file when
    /// no batch boundary can be trusted after it).
    pub length: u64,
    pub reason: String,
}

/// One stored record, owned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredRecord {
    pub offset: u64,
    /// As stored: the producer's (or the broker's) milliseconds, -1 for none.
    pub timestamp_ms: i64,
    pub key: Option<Vec<u8>>,
    /// `None` for a tombstone.
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Walks the batches of a segment file's bytes. A batch whose length and magic are sane is
/// listed even when its CRC or records fail (with `crc_valid: false`), and the walk goes on
/// after it, as kafka-dump-log does; bytes that are not a batch at all end the walk, and the
/// damage says where.
pub fn scan_segment(file: &Path, bytes: &[u8]) -> (Vec<BatchSummary>, Vec<Damage>) {
    let mut batches = Vec::new();
    let mut damage = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let rest = &bytes[at..];
        let damaged = |length: usize, reason: String| Damage {
            file: file.to_owned(),
            position: at as u64,
            length: length as u64,
            reason,
        };
        let (header, error) = match format::decode(rest) {
            Decoded::Batch(header) => {
                let error = check_records(rest, &header).err();
                (header, error)
            }
            Decoded::Incomplete { batch_len } => {
                let reason = match batch_len {
                    Some(len) => format!(
                        "torn tail: a batch of {len} bytes, {} in the file",
                        rest.len()
                    ),
                    None => format!("torn tail: {} bytes, less than a batch header", rest.len()),
                };
                damage.push(damaged(rest.len(), reason));
                break;
            }
            Decoded::Invalid { reason } => match framed_header(rest) {
                Some(header) => (header, Some(reason)),
                None => {
                    damage.push(damaged(rest.len(), reason));
                    break;
                }
            },
        };
        if let Some(reason) = &error {
            damage.push(damaged(header.batch_len, reason.clone()));
        }
        batches.push(summary(at, &header, error));
        at += header.batch_len;
    }
    (batches, damage)
}

/// The header of a batch that failed verification but whose frame (length, magic, fields)
/// can be trusted enough to skip it and read on.
fn framed_header(bytes: &[u8]) -> Option<BatchHeader> {
    let header = BatchHeader::parse(bytes)?;
    let framed = bytes[16] == format::MAGIC
        && header.batch_len >= HEADER_LEN
        && header.batch_len <= bytes.len()
        && header.batch_len <= format::MAX_BATCH_LEN;
    framed.then_some(header)
}

fn summary(position: usize, header: &BatchHeader, error: Option<String>) -> BatchSummary {
    BatchSummary {
        position: position as u64,
        size: header.batch_len as u64,
        base_offset: header.base_offset,
        last_offset: header.last_offset(),
        count: header.records_count,
        base_timestamp: header.base_timestamp,
        max_timestamp: header.max_timestamp,
        codec: match header.compression() {
            Ok(codec) => codec.name().to_owned(),
            Err(reason) => reason,
        },
        control: header.is_control(),
        crc_valid: error.is_none(),
        error,
    }
}

/// Checks that a verified batch's records decompress and parse.
fn check_records(batch: &[u8], header: &BatchHeader) -> Result<(), String> {
    let mut scratch = Vec::new();
    let section = format::records_section(
        &batch[..header.batch_len],
        header,
        MAX_DECOMPRESSED_BYTES,
        &mut scratch,
    )?;
    format::validate_records(section, header, |_| {})
}

/// The records of whole, valid batches (as a segment holds them, or as the broker's batch
/// reads return them), in offset order; control batches hold none.
///
/// # Errors
/// The position and reason of the first batch that does not verify or decode.
pub fn batch_records(bytes: &[u8]) -> Result<Vec<StoredRecord>, (u64, String)> {
    let mut records = Vec::new();
    let mut at = 0usize;
    while at < bytes.len() {
        let header = match format::decode(&bytes[at..]) {
            Decoded::Batch(header) => header,
            Decoded::Incomplete { .. } => return Err((at as u64, "torn batch".into())),
            Decoded::Invalid { reason } => return Err((at as u64, reason)),
        };
        let batch = &bytes[at..at + header.batch_len];
        if !header.is_control() {
            push_records(batch, &header, &mut records).map_err(|e| (at as u64, e))?;
        }
        at += header.batch_len;
    }
    Ok(records)
}

fn push_records(
    batch: &[u8],
    header: &BatchHeader,
    out: &mut Vec<StoredRecord>,
) -> Result<(), String> {
    let mut scratch = Vec::new();
    let section = format::records_section(batch, header, MAX_DECOMPRESSED_BYTES, &mut scratch)?;
    format::validate_records(section, header, |r| {
        out.push(StoredRecord {
            offset: header.base_offset + u64::from(r.offset_delta),
            timestamp_ms: header.record_timestamp(r.timestamp_delta),
            key: r.key.map(<[u8]>::to_vec),
            value: r.value.map(<[u8]>::to_vec),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
                .collect(),
        });
    })
}

/// The segment files (`*.log`) of every partition directory of the data directory at
/// `data_dir`, sorted by path.
///
/// # Errors
/// The I/O error of a directory that cannot be listed.
pub fn segment_files(data_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(data_dir)? {
        let dir = entry?.path();
        if !dir.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "log") && path.is_file() {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}
