//! [`StorageError`]: what the storage layer can fail with.
//!
//! Every variant carries what a caller needs to act on it (a path, a position, the offending
//! value) and keeps its `#[source]`. Sources are held in `Arc`s so the error is `Clone`: one
//! failed group-commit write answers every request that shared it. The crate's
//! `nanokafka::Error` converts from it variant by variant (`Io` to `Io`, `Corrupt` to
//! `Corrupt`, ...), keeping the source chain.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything that can go wrong in the storage layer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// An operating-system call failed; `op` names what was being done, `path` to which
    /// file. After a failed write or sync the log or offsets store must be reopened (its
    /// page-cache state is unknown); other failures can be retried once the cause (a full
    /// disk, a permission) is fixed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },

    /// Bytes on disk failed validation (checksum, framing, offsets, a topic config that does
    /// not parse). They are never served as data; records before and after the damage stay
    /// readable. Restore the file from a replica or backup, or skip past `position`.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// `DataDir::open` of a directory whose lock another process (or another open in this
    /// one) holds. Stop the other broker, or use another directory.
    #[error("data directory {path} is locked by another broker ({holder})")]
    DataDirLocked { path: PathBuf, holder: String },

    /// A topic name that cannot be one safe path component: outside `[A-Za-z0-9._-]{1,249}`,
    /// or `.`/`..`. Nothing was created; choose another name.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },

    /// `DataDir::create_topic` of a topic whose config file exists. Nothing changed.
    #[error("topic {topic:?} already exists")]
    TopicExists { topic: String },

    /// An append of a record whose key + value exceeds the log's maximum record size, or of
    /// a batch larger than the log's batch limit (`LogConfig::max_batch_bytes`) or than
    /// [`MAX_BATCH_BYTES`](super::batch::MAX_BATCH_BYTES). Nothing was written; split or
    /// shrink the records.
    #[error("record or batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },

    /// `DataDir::open` of a directory written in a format this version does not read (an
    /// earlier NanoKafka's one-frame-per-record segments, or a newer format). Nothing was
    /// changed; open it with the version that wrote it, or start from an empty directory.
    #[error("data directory {path} is in an unsupported format: {found}")]
    UnsupportedFormat { path: PathBuf, found: String },

    /// An append of a Kafka record batch that is not one this log stores (bad CRC, a record
    /// that does not parse, a transactional or control batch, a decompressed size over the
    /// limit). Nothing was written.
    #[error("invalid record batch: {reason}")]
    InvalidBatch { reason: String },

    /// A Kafka producer's batch with a CreateTime too far after the broker's clock (Kafka's
    /// `INVALID_TIMESTAMP`). Nothing was written.
    #[error("timestamp {timestamp_ms} is more than {max_ahead_ms} ms after the broker's clock ({now_ms})")]
    InvalidTimestamp {
        timestamp_ms: i64,
        now_ms: u64,
        max_ahead_ms: u64,
    },

    /// An idempotent producer's batch whose epoch is older than the one stored for its
    /// producer id (Kafka's `INVALID_PRODUCER_EPOCH`). Nothing was written.
    #[error("producer {producer_id} epoch {epoch}: {reason}")]
    ProducerFenced {
        producer_id: i64,
        epoch: i16,
        reason: String,
    },

    /// An idempotent producer's batch whose sequence does not follow the last one stored for
    /// its producer id, or a new epoch not starting at sequence 0 (Kafka's
    /// `OUT_OF_ORDER_SEQUENCE_NUMBER`). Nothing was written.
    #[error("producer {producer_id} epoch {epoch}: {reason}")]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        reason: String,
    },

    /// A committed offset's metadata longer than the offsets journal keeps (Kafka's
    /// `offset.metadata.max.bytes`). Nothing was committed.
    #[error("offset metadata of {size} bytes exceeds the maximum of {max} bytes")]
    OffsetMetadataTooLarge { size: usize, max: usize },

    /// A read from an offset beyond the log end. Read from `log_end_offset` or below.
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset})")]
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
}

/// The storage layer's result type.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

impl StorageError {
    /// Wraps an `io::Error` with what was being done and to which file.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        StorageError::Io {
            op,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Bytes at `position` of `path` that failed validation, and why.
    pub fn corrupt(path: impl Into<PathBuf>, position: u64, reason: impl Into<String>) -> Self {
        StorageError::Corrupt {
            path: path.into(),
            position,
            reason: reason.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_keeps_its_source() {
        let e = StorageError::io("read", "/x", io::Error::other("disk on fire"));
        let source = std::error::Error::source(&e).expect("a source");
        assert_eq!(source.to_string(), "disk on fire");
        assert_eq!(e.to_string(), "read /x: disk on fire");
    }
}
