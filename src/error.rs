//! The crate's one error type (spec §7).
//!
//! Variants are the cases a caller would branch on; each carries the context needed to act on
//! it (a path, a position, the offending value) and keeps its `#[source]`. Sources are held in
//! `Arc`s so an `Error` is `Clone`: one failed group-commit write answers every request that
//! shared it.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Everything that can go wrong in NanoKafka.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// An operating-system call failed. `op` names what was being done.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
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

    /// No topic of that name.
    #[error("unknown topic {topic:?}")]
    UnknownTopic { topic: String },

    /// The topic has no partition of that number.
    #[error("topic {topic:?} has no partition {partition}")]
    UnknownPartition { topic: String, partition: u32 },

    /// No consumer group of that name on the topic (no member joined since the broker
    /// started, and no committed offsets).
    #[error("unknown group {group:?} on topic {topic:?}")]
    UnknownGroup { topic: String, group: String },

    /// The consumer is not a member of the group: it never joined, left, or was evicted
    /// after its session timeout (it must join again).
    #[error("{member:?} is not a member of group {group:?} on topic {topic:?}")]
    UnknownMember {
        topic: String,
        group: String,
        member: String,
    },

    /// A fenced commit or fetch from an older generation: the group rebalanced since the
    /// member last saw its assignment (Kafka's ILLEGAL_GENERATION). Nothing changed; poll
    /// again (which refreshes the assignment) and re-process from the committed offset.
    #[error("{member:?} of group {group:?} on {topic:?} used generation {generation}, the group is at {current}")]
    IllegalGeneration {
        topic: String,
        group: String,
        member: String,
        generation: u64,
        current: u64,
    },

    /// A fenced commit for a partition the member does not own in the current generation
    /// (Kafka's REBALANCE_IN_PROGRESS). Nothing changed.
    #[error(
        "{member:?} of group {group:?} does not own {topic}/{partition} in generation {generation}"
    )]
    PartitionNotAssigned {
        topic: String,
        group: String,
        member: String,
        partition: u32,
        generation: u64,
    },

    /// A blocked produce waited its whole block timeout for room.
    #[error("timed out after {waited_ms} ms waiting for room in {topic}/{partition}")]
    Timeout {
        topic: String,
        partition: u32,
        waited_ms: u64,
    },

    /// `Backpressure::Reject` and the partition's backlog reached `max_size`.
    #[error("partition {topic}/{partition} is full: backlog {backlog} >= max_size {max_size}")]
    PartitionFull {
        topic: String,
        partition: u32,
        backlog: u64,
        max_size: u64,
    },

    /// The partition's actor restarted (a crash) while the request was in flight or parked.
    /// Nothing of the request was acknowledged; it is safe to retry.
    #[error("partition {topic}/{partition} restarted while the request was in flight; retry")]
    PartitionRestarted { topic: String, partition: u32 },

    /// The partition's actor cannot recover (its files cannot be opened, or it crashed too
    /// often); see the reason and the logs.
    #[error("partition {topic}/{partition} failed: {reason}")]
    PartitionFailed {
        topic: String,
        partition: u32,
        reason: String,
    },

    /// A payload could not be encoded with rmp-serde.
    #[error("cannot encode payload: {0}")]
    Encode(#[source] Arc<rmp_serde::encode::Error>),

    /// A stored payload does not decode as the requested type. The record stays where it is:
    /// commit its offset to skip it.
    #[error("record {topic}/{partition}@{offset} does not decode as the requested type: {source}")]
    Decode {
        topic: String,
        partition: u32,
        offset: u64,
        #[source]
        source: Arc<rmp_serde::decode::Error>,
    },

    /// A bug: serving the request panicked. The panic was caught, the actor that panicked
    /// restarted from its persisted state, and the broker serves on. The request may or may
    /// not have taken effect (a produce: check before retrying; a poll or commit: retry).
    #[error("internal error in {actor}: {reason}")]
    Internal { actor: String, reason: String },

    /// The broker was shut down (or its actor system is gone).
    #[error("the broker is stopped")]
    BrokerStopped,

    /// A blocking `NanoKafka` method was called on an actix thread, where it would deadlock
    /// that thread. Use the async handle or the actor messages there.
    #[error("blocking NanoKafka call on an actix thread; use AsyncNanoKafka or messages instead")]
    BlockingInActorContext,

    /// A configuration value that cannot work (0 partitions, 0 retention, ...).
    #[error("invalid config: {0}")]
    InvalidConfig(String),

    /// A record larger than the configured maximum record size.
    #[error("record of {size} bytes exceeds the maximum record size of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },

    /// A produce request (a batch of several records) larger than the configured maximum
    /// request size (`NanoKafka::builder().max_request_bytes`). Nothing was written.
    #[error("produce request of {size} bytes exceeds the maximum request size of {max} bytes")]
    RequestTooLarge { size: usize, max: usize },

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
            source: Arc::new(source),
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
