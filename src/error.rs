//! The crate's one error type (spec §7).
//!
//! Variants are the cases a caller would branch on; each carries the context needed to act on
//! it (a path, a position, the offending value) and keeps its `#[source]`.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in NanoKafka.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system call failed. `op` names what was being done.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// Bytes on disk failed validation (checksum, framing, offsets). Never served as data.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// Another process (or another `NanoKafka` in this one) holds the data directory.
    #[error("data directory {path} is locked by another broker ({holder})")]
    DataDirLocked { path: PathBuf, holder: String },

    /// A topic name outside `[A-Za-z0-9._-]{1,249}`, or `.`/`..`.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },

    /// A group or member id that is empty, too long or has control characters.
    #[error("invalid {kind} id {id:?}: {reason}")]
    InvalidId {
        kind: &'static str,
        id: String,
        reason: &'static str,
    },

    /// `create_topic` of a topic that exists.
    #[error("topic {topic:?} already exists")]
    TopicExists { topic: String },

    /// A configuration value that cannot work (0 partitions, 0 retention, ...).
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// A record larger than the configured maximum record size.
    #[error("record of {size} bytes exceeds the maximum record size of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },

    /// An offset outside `[log_start_offset, log_end_offset)` where one inside is required.
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset})")]
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Wraps an `io::Error` with what was being done and to which file.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(
        path: impl Into<PathBuf>,
        position: u64,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            path: path.into(),
            position,
            reason: reason.into(),
        }
    }
}
