//! The crate's error type.
//!
//! Variants are the cases a caller would branch on; each carries the context needed to act on
//! it (a path, a position, the offending value) and keeps its `#[source]`. Sources are held in
//! `Arc`s so an `Error` is `Clone`: one failed group-commit write answers every request that
//! shared it. The storage layer's [`StorageError`] converts into the variants of the same
//! names (`Io`, `Corrupt`, ...), source included.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use crate::group_options::GroupOptions;
use crate::storage::StorageError;

/// The cause an `Encode` or `Decode` error keeps: the payload format's own error.
pub(crate) type ErrorSource = Arc<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong in NanoKafka.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed; `op` names what was being done, `path` to which file.
    /// A partition whose write or sync failed restarts from what is on disk; other calls can
    /// be retried once the cause (a full disk, a permission, the descriptor limit) is fixed.
    #[error("{op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },

    /// Bytes on disk failed validation (checksum, framing, offsets, a topic config that does
    /// not parse). They are never served as data; records before and after the damage stay
    /// readable. Commit past the damaged offsets to skip them, or restore the file.
    #[error("corrupt data in {path} at byte {position}: {reason}")]
    Corrupt {
        path: PathBuf,
        position: u64,
        reason: String,
    },

    /// Another process (or another `NanoKafka` in this one) holds the data directory. Stop
    /// it, or use another directory.
    #[error("data directory {path} is locked by another broker ({holder})")]
    DataDirLocked { path: PathBuf, holder: String },

    /// A data directory written in a format this version does not read: an earlier
    /// NanoKafka's one-frame-per-record segments (no `format` file), or another format.
    /// Nothing was changed; open it with the version that wrote it, or use a new directory.
    #[error("data directory {path} is in an unsupported format: {found}")]
    UnsupportedFormat { path: PathBuf, found: String },

    /// A Kafka record batch the log does not store: a bad CRC, a record that does not
    /// parse, a transactional or control batch, a decompressed size over the limit. Nothing
    /// was written.
    #[error("invalid record batch: {reason}")]
    InvalidBatch { reason: String },

    /// Records without a key produced to a compacted topic (`CleanupPolicy::Compact` or
    /// `CompactDelete`): compaction keeps the latest record of each key, and a keyless
    /// record has none. `indexes` are the keyless records' positions in the batch as it was
    /// produced; `partition` is the partition it was produced to, `None` when it was refused
    /// before it was split over partitions. Nothing of the batch was written: give every
    /// record a key (Kafka's broker refuses these as `INVALID_RECORD`).
    #[error(
        "topic {topic:?} is compacted: every record needs a key, and {} of the batch{} \
         had none; nothing of it was written",
        keyless_text(indexes),
        partition.map_or_else(String::new, |p| format!(" to partition {p}"))
    )]
    KeyRequired {
        topic: String,
        partition: Option<u32>,
        indexes: Vec<u32>,
    },

    /// A Kafka producer's batch with a timestamp more than `max_ahead_ms` (an hour, Kafka's
    /// default) after the broker's clock: fix the producer's clock. Nothing was written.
    #[error("timestamp {timestamp_ms} is more than {max_ahead_ms} ms after the broker's clock ({now_ms})")]
    InvalidTimestamp {
        timestamp_ms: i64,
        now_ms: u64,
        max_ahead_ms: u64,
    },

    /// An idempotent producer's batch from a fenced (older) epoch: a newer instance of the
    /// producer took over. Nothing was written.
    #[error("producer {producer_id} epoch {epoch}: {reason}")]
    ProducerFenced {
        producer_id: i64,
        epoch: i16,
        reason: String,
    },

    /// An idempotent producer's batch out of sequence: a gap after the last batch stored
    /// for its producer id, or a new epoch not starting at 0. Nothing was written.
    #[error("producer {producer_id} epoch {epoch}: {reason}")]
    OutOfOrderSequence {
        producer_id: i64,
        epoch: i16,
        reason: String,
    },

    /// A topic name outside `[A-Za-z0-9._-]{1,249}`, or `.`/`..`. Nothing was created;
    /// choose another name.
    #[error("invalid topic name {name:?}: {reason}")]
    InvalidTopicName { name: String, reason: &'static str },

    /// A group or member id (`kind`) that is empty, longer than 249 bytes or has control
    /// characters. Nothing changed; choose another id.
    #[error("invalid {kind} id {id:?}: {reason}")]
    InvalidId {
        kind: &'static str,
        id: String,
        reason: &'static str,
    },

    /// `create_topic` of a topic that exists. Nothing changed.
    #[error("topic {topic:?} already exists")]
    TopicExists { topic: String },

    /// No topic of that name: create it first.
    #[error("unknown topic {topic:?}")]
    UnknownTopic { topic: String },

    /// The topic has no partition of that number (partitions are `0..partitions`).
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

    /// A blocked produce waited its whole block timeout for room. Nothing was written; retry
    /// later, or let the consumers catch up.
    #[error("timed out after {waited_ms} ms waiting for room in {topic}/{partition}")]
    Timeout {
        topic: String,
        partition: u32,
        waited_ms: u64,
    },

    /// `Backpressure::Reject` and the partition's backlog reached `max_size`. Nothing was
    /// written; retry once the consumers committed.
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

    /// A payload could not be encoded: with rmp-serde, or, on a topic bound to a schema, as an
    /// Avro datum of that schema (a value that does not fit it). Nothing was written.
    #[error("cannot encode payload: {0}")]
    Encode(#[source] ErrorSource),

    /// A stored payload does not decode as the requested type. The record stays where it is:
    /// commit its offset to skip it.
    #[error("record {topic}/{partition}@{offset} does not decode as the requested type: {source}")]
    Decode {
        topic: String,
        partition: u32,
        offset: u64,
        /// rmp-serde's error; on a topic bound to a schema, the wire format's
        /// (`nanokafka::schemas::wire::WireError`: no header, an unknown schema id, a datum
        /// that does not resolve).
        #[source]
        source: ErrorSource,
    },

    /// The schema registry refused or failed a call (the [`crate::Schemas`] handle, or
    /// binding a [`crate::Topic`] to a subject): `code` is Confluent's (`409` incompatible,
    /// with the level and the failed checks in `message`; `42201` invalid schema; `40401`
    /// subject not found; `40403` schema not found; `50001` the store failed). Nothing was
    /// changed.
    #[error("schema registry error {code}: {message}")]
    Schema { code: u32, message: String },

    /// A bug: serving the request panicked. The panic was caught, the actor that panicked
    /// restarted from its persisted state, and the broker serves on. The request may or may
    /// not have taken effect (a produce: check before retrying; a poll or commit: retry).
    #[error("internal error in {actor}: {reason}")]
    Internal { actor: String, reason: String },

    /// The broker was shut down (or its actor system is gone). Nothing more will be served;
    /// open a new one.
    #[error("the broker is stopped")]
    BrokerStopped,

    /// A blocking `NanoKafka` method was called on an actix thread, where it would deadlock
    /// that thread. Use the async handle or the actor messages there.
    #[error(
        "blocking NanoKafka call on an actix/tokio thread (it would stall the runtime); in async \
         code use AsyncNanoKafka: AsyncNanoKafka::open(dir).await or \
         NanoKafka::builder()...build_async().await, then its methods, or the actor messages"
    )]
    BlockingInActorContext,

    /// A `TopicConfig` field (`field`) whose value cannot work: 0 partitions, a retention
    /// of 0, a segment size out of range. Nothing was created; fix the field.
    #[error("invalid topic config: {field} {reason}")]
    InvalidConfig { field: &'static str, reason: String },

    /// A call or builder argument (`name`) whose value cannot work: `max_records` 0, a zero
    /// timeout, a request size below the record size, `idle_spin` too large,
    /// `max_open_files` too small, a subscription's zero `max_in_flight`. Nothing was done;
    /// fix the argument.
    #[error("invalid argument {name}: {reason}")]
    InvalidArgument { name: &'static str, reason: String },

    /// A join (or subscription, or consumer) with other [`GroupOptions`] than the ones the
    /// group was created with by its first member. Nothing changed; join with `existing`, or
    /// use another group.
    #[error(
        "group {group:?} on topic {topic:?} uses {existing:?}, the join asked for {requested:?}"
    )]
    GroupOptionsMismatch {
        topic: String,
        group: String,
        existing: GroupOptions,
        requested: GroupOptions,
    },

    /// [`crate::NanoKafka::reset_offset`], [`crate::NanoKafka::delete_group`] or
    /// [`crate::NanoKafka::delete_group_offsets`] of a group that has live members on the
    /// topic (Kafka refuses a group that is not empty too): they would read on from where
    /// they are and their next commit would undo it. Nothing changed; stop the members first.
    #[error("group {group:?} on topic {topic:?} has live members ({}); stop them first", members.join(", "))]
    GroupNotEmpty {
        topic: String,
        group: String,
        members: Vec<String>,
    },

    /// A record larger than the configured maximum record size (`max_record_bytes`), or a
    /// batch larger than its topic's `max_message_bytes` or than a batch can be. Nothing was
    /// written.
    #[error("record or batch of {size} bytes exceeds the limit of {max} bytes")]
    RecordTooLarge { size: usize, max: usize },

    /// A produce request (a batch of several records) larger than the configured maximum
    /// request size (`NanoKafka::builder().max_request_bytes`). Nothing was written.
    #[error("produce request of {size} bytes exceeds the maximum request size of {max} bytes")]
    RequestTooLarge { size: usize, max: usize },

    /// A committed offset's metadata string longer than
    /// `MAX_OFFSET_METADATA_BYTES` (4096, Kafka's `offset.metadata.max.bytes`), from a Kafka
    /// client's OffsetCommit. Nothing was committed.
    #[error("offset metadata of {size} bytes exceeds the maximum of {max} bytes")]
    OffsetMetadataTooLarge { size: usize, max: usize },

    /// An offset outside `[log_start_offset, log_end_offset)` where one inside is required.
    /// Nothing changed; use an offset in the range.
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset})")]
    OffsetOutOfRange {
        offset: u64,
        log_start_offset: u64,
        log_end_offset: u64,
    },

    /// The Kafka cluster (the `kafka` backend) refused or failed `op`; `reason` is
    /// librdkafka's error. Whether it took effect depends on `op` (a produce that timed out
    /// may have been written: check before retrying).
    #[error("kafka {op} failed: {reason}")]
    Kafka { op: &'static str, reason: String },

    /// `op` exists only on one backend: crash injection, `stats()` and raw Kafka batches
    /// on the embedded broker; nothing was done. `docs/kafka-backend.md` ("Where the
    /// backends differ") lists each.
    #[error("{op} is not available on the {backend} backend")]
    Unsupported {
        op: &'static str,
        backend: &'static str,
    },

    /// `nanokafka export` / `import` (`op`) refused to start or to go on: the target holds
    /// records the export cannot account for, a checkpoint does not match the target, the
    /// source lost records to retention before they were copied, or a delivery landed
    /// where it should not have. `reason` names the topic and partition and says what to do.
    /// A refusal before copying changes nothing.
    #[error("{op} refused: {reason}")]
    Transfer { op: &'static str, reason: String },

    /// A typed subscriber (a [`crate::Topic`]'s `subscribe`, `stream` or `consumer`) asked for
    /// payloads of type `requested`, but the topic records that its payloads are `recorded`
    /// ([`crate::TopicConfig::payload_type`]). Nothing changed: no member joined. Use the
    /// recorded type; or, for a type that reads the same payloads (a struct with a subset of
    /// the fields, an older or newer version), say so with
    /// [`crate::Topic::accept_any_payload_type`]; or, when the type was renamed or moved,
    /// record the new name with `alter_topic` and [`crate::TopicChanges::payload_type`].
    #[error(
        "topic {topic:?} holds {recorded} payloads, the subscriber asked for {requested}; \
         subscribe with {recorded}, or call accept_any_payload_type() on the Topic if \
         {requested} reads the same payloads, or record the new type name with alter_topic"
    )]
    PayloadTypeMismatch {
        topic: String,
        recorded: String,
        requested: String,
    },
}

/// "record 3" or "records 1, 3 and 4" (at most the first ten listed).
fn keyless_text(indexes: &[u32]) -> String {
    const LISTED: usize = 10;
    let listed: Vec<String> = indexes.iter().take(LISTED).map(u32::to_string).collect();
    match (indexes.len(), listed.split_last()) {
        (_, None) => "no record".to_owned(),
        (1, Some((only, _))) => format!("record {only}"),
        (n, Some((last, rest))) if n <= LISTED => format!("records {} and {last}", rest.join(", ")),
        (n, _) => format!("{n} records ({}, ...)", listed.join(", ")),
    }
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
}

/// Each storage error becomes the variant of the same name with the same fields, its source
/// kept. The table names each variant's fields once, and the compiler checks it against both
/// enums: a storage variant or field added without its twin here does not build.
impl From<StorageError> for Error {
    fn from(e: StorageError) -> Self {
        macro_rules! same_name {
            ($($variant:ident { $($field:ident),+ }),+ $(,)?) => {
                match e {
                    $(StorageError::$variant { $($field),+ } => Error::$variant { $($field),+ },)+
                }
            };
        }
        same_name! {
            Io { op, path, source },
            Corrupt { path, position, reason },
            DataDirLocked { path, holder },
            UnsupportedFormat { path, found },
            InvalidBatch { reason },
            InvalidTimestamp { timestamp_ms, now_ms, max_ahead_ms },
            ProducerFenced { producer_id, epoch, reason },
            OutOfOrderSequence { producer_id, epoch, reason },
            InvalidTopicName { name, reason },
            TopicExists { topic },
            RecordTooLarge { size, max },
            OffsetMetadataTooLarge { size, max },
            OffsetOutOfRange { offset, log_start_offset, log_end_offset },
        }
    }
}

#[cfg(feature = "schema-registry")]
impl From<crate::schemas::RegistryError> for Error {
    fn from(e: crate::schemas::RegistryError) -> Self {
        Error::Schema {
            code: e.code,
            message: e.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storage_io_error_keeps_its_source_chain() {
        let cause = io::Error::new(io::ErrorKind::StorageFull, "no space left");
        let error = Error::from(StorageError::io("append to segment", "/d/0.log", cause));
        let Error::Io { op, ref path, .. } = error else {
            panic!("expected Io, got {error:?}");
        };
        assert_eq!(
            (op, path.as_path()),
            ("append to segment", "/d/0.log".as_ref())
        );
        let source = std::error::Error::source(&error).expect("the io::Error");
        let source = source
            .downcast_ref::<Arc<io::Error>>()
            .expect("the io::Error, shared");
        assert_eq!(source.kind(), io::ErrorKind::StorageFull);
        assert_eq!(
            error.to_string(),
            "append to segment /d/0.log: no space left"
        );
    }

    #[test]
    fn storage_variants_map_to_the_same_names() {
        let corrupt = Error::from(StorageError::corrupt("/d/0.log", 42, "crc32c mismatch"));
        assert!(matches!(
            corrupt,
            Error::Corrupt { position: 42, ref reason, .. } if reason == "crc32c mismatch"
        ));
        let too_large = Error::from(StorageError::RecordTooLarge { size: 9, max: 8 });
        assert!(matches!(
            too_large,
            Error::RecordTooLarge { size: 9, max: 8 }
        ));
        let range = Error::from(StorageError::OffsetOutOfRange {
            offset: 5,
            log_start_offset: 0,
            log_end_offset: 3,
        });
        assert!(matches!(range, Error::OffsetOutOfRange { offset: 5, .. }));
        let exists = Error::from(StorageError::TopicExists { topic: "t".into() });
        assert!(matches!(exists, Error::TopicExists { ref topic } if topic == "t"));
    }

    #[test]
    fn a_key_required_error_names_the_keyless_records_and_the_partition() {
        let error = |partition, indexes: &[u32]| {
            Error::KeyRequired {
                topic: "t".into(),
                partition,
                indexes: indexes.to_vec(),
            }
            .to_string()
        };
        let one = error(Some(2), &[3]);
        assert!(
            one.contains("record 3 of the batch to partition 2 had none"),
            "{one}"
        );
        assert!(one.contains("nothing of it was written"), "{one}");
        let some = error(None, &[1, 3, 4]);
        assert!(
            some.contains("records 1, 3 and 4 of the batch had none"),
            "{some}"
        );
        let many: Vec<u32> = (0..12).collect();
        let many = error(None, &many);
        assert!(
            many.contains("12 records (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...)"),
            "{many}"
        );
    }
}
