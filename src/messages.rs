//! The actor face: typed messages an actix actor sends to `Addr<BrokerActor>`.
//!
//! Every message here is a request with a reply; none is fire-and-forget. The reply is always
//! `Result<_, nanokafka::Error>`; a `MailboxError` from `send` means the broker is stopped.
//! Topic-scoped messages are forwarded by the `BrokerActor` to the topic's `TopicActor`
//! (`Error::UnknownTopic` if there is none). Payloads are bytes on this face; build them with
//! [`crate::types::encode`] and read them back with [`Record::decode`], or use
//! [`crate::AsyncNanoKafka`], which does both. [`crate::BrokerRef::request`] (or
//! [`crate::RequestExt::request`] on the `Addr`) folds the `MailboxError` into
//! `Error::BrokerStopped`, so a request answers one `Result`.
//!
//! # The three faces
//! Every method of the blocking [`crate::NanoKafka`] is on [`crate::AsyncNanoKafka`] with the
//! same name and arguments (async), and is one message here (or, where noted, a few). "same"
//! is the blocking handle's name.
//!
//! | `NanoKafka` | `AsyncNanoKafka` | message |
//! |---|---|---|
//! | `open`, `builder().build()` | `open`, `builder().build_async()` | (starts the broker) |
//! | `shutdown` | same | [`Shutdown`] (the handles also stop the actor system) |
//! | `create_topic` | same | [`CreateTopic`] |
//! | `list_topics` | same | [`ListTopics`] |
//! | `topic_ids` | same | [`TopicIds`] |
//! | `alter_topic` | same | [`AlterTopic`] |
//! | `delete_topic` | same | [`DeleteTopic`] |
//! | `describe_broker` | same | [`DescribeBroker`] |
//! | `produce`, `produce_keyed`, `produce_raw`, `produce_tombstone` | same | [`Produce`] of one record |
//! | `produce_with_headers`, `produce_raw_with_headers` | same | [`ProduceBatch`] of one |
//! | `produce_batch`, `produce_batch_raw` | same | [`ProduceBatch`], [`Produce`] |
//! | `produce_kafka_batch` | same | [`ProduceKafkaBatch`] |
//! | `offset_for_timestamp` | same | [`OffsetForTimestamp`] |
//! | `delete_records` | same | [`DeleteRecords`] |
//! | `delete_group`, `delete_group_offsets` | same | [`DeleteGroupOffsets`] |
//! | `describe_producers` | same | [`DescribeProducers`] |
//! | `join_group`, `join_group_with` | same | [`JoinGroup`] |
//! | `leave_group` | same | [`LeaveGroup`] |
//! | `heartbeat` | same | [`Heartbeat`] |
//! | `poll`, `poll_timeout`, `poll_batch`, `poll_batch_raw` | same | [`Poll`] |
//! | `commit` | same | [`Commit`] |
//! | `reset_offset` | same | [`ResetOffset`] |
//! | `lag` | same | [`Lag`] |
//! | `stats` | same | [`GetStats`] (handles add the listener's counters) |
//! | `consumer`, `consumer_with` ([`crate::Consumer`]) | `consumer_poll`, `fenced_commit` | [`JoinGroup`], [`ConsumerPoll`], [`FencedCommit`] |
//! | (an actor receives the records) | `subscribe` | [`Subscribe`] |
//! | `crash_partition` | same | [`CrashPartition`] |
//! | `crash_topic` | same | [`CrashTopic`] |
//! | `crash_broker` | same | [`CrashBroker`] |
//! | `crash_group_coordinator` | same | [`CrashGroupCoordinator`] |
//! | `listener_addr`, `backend`, `addr`, `broker_ref` | same | (local to the handle) |
//! | `async_handle` | (it is one) | (local) |
//! | (the Kafka listener's data path) | `fetch_kafka_batches`, `wait_for_kafka_append`, `list_kafka_offset`, `allocate_producer_id` | [`FetchKafkaBatches`], [`WaitForKafkaAppend`], [`ListKafkaOffset`], [`AllocateProducerId`] |
//!
//! The handles' produces may skip the broker (each partition's lane, learned with the
//! topic's route); the messages above take the broker's path to the same lanes, with the
//! same answers. On the Kafka backend the handles' methods answer from the cluster, while
//! these messages have no actor to go to and answer `BrokerStopped`.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::Message;

use crate::config::{TopicChanges, TopicConfig};
use crate::error::Result;
use crate::group::{Assignment, GroupOptions};
use crate::partition::ProduceRecord;
pub use crate::storage::KafkaAppend;
use crate::storage::RecordBatch;
use crate::types::{BrokerStats, ConsumerBatch, Delivery, Record};

/// A message about one topic. The broker routes it by [`TopicMessage::topic`].
pub trait TopicMessage: Message<Result = Result<Self::Reply>> + Send + 'static {
    type Reply: Send + 'static;
    fn topic(&self) -> &str;
}

/// Makes `$name` (a struct with a `topic` field) an actix message answering
/// `Result<$reply>` that the broker routes to its topic.
macro_rules! topic_message {
    ($name:ident => $reply:ty) => {
        impl ::actix::Message for $name {
            type Result = $crate::Result<$reply>;
        }
        impl $crate::messages::TopicMessage for $name {
            type Reply = $reply;
            fn topic(&self) -> &str {
                &self.topic
            }
        }
    };
}
pub(crate) use topic_message;

/// Fault injection, for tests and demos: the coordinator actor of `group` on `topic` panics
/// inside its handler and is restarted by its supervisor. Memberships are reset (members get
/// `UnknownMember` and join again; a `Consumer` rejoins by itself); committed offsets stay.
/// Reply: `()` once the crash was triggered. Route: broker → topic `CrashCoordinator` →
/// coordinator `CrashGroup`. Errors: `UnknownTopic`, `UnknownGroup`, `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct CrashGroupCoordinator {
    pub topic: String,
    pub group: String,
}
impl Message for CrashGroupCoordinator {
    type Result = Result<()>;
}

/// Fault injection: the broker actor panics inside its handler and is restarted with the
/// same state (topics, lock, arbiters). Errors: `BrokerStopped` only.
#[derive(Debug, Clone, Copy)]
pub struct CrashBroker;
impl Message for CrashBroker {
    type Result = Result<()>;
}

/// Fault injection, for tests and demos: the topic's actor panics inside its handler and is
/// restarted with its state (partitions and groups keep running). Reply: `()` once the crash
/// was triggered. Errors: `UnknownTopic` (from the broker), `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct CrashTopic {
    pub topic: String,
}
impl Message for CrashTopic {
    type Result = Result<()>;
}
impl TopicMessage for CrashTopic {
    type Reply = ();
    fn topic(&self) -> &str {
        &self.topic
    }
}

mod subscription;
mod wire;
pub use subscription::{
    Ack, DecodeAction, Delivered, OnDecodeError, Subscribe, SubscribeOptions, Subscription,
    SubscriptionEnd, SubscriptionEvent, SubscriptionRequest, Unsubscribe,
};
pub use wire::{
    AllocateProducerId, BatchRead, DescribeProducers, FetchKafkaBatches, ListKafkaOffset,
    ListedOffset, OffsetSpec, WaitForKafkaAppend,
};

/// Create a topic. Sender: any actor or handle; handled by the broker, which writes the
/// config and the partitions' directories, then starts the topic's actors. Reply: `()` once
/// its partitions exist on disk.
/// Errors: `InvalidTopicName`, `InvalidConfig`, `TopicExists`, `Io`, `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct CreateTopic {
    pub topic: String,
    pub config: TopicConfig,
}

impl Message for CreateTopic {
    type Result = Result<()>;
}

/// Delete a topic: its records, committed offsets, groups and config. Sender: any actor or
/// handle; answered by the broker. Reply: `()` once the topic is gone from the registry and
/// its files from the data directory; a topic of the same name can then be created, empty.
///
/// The broker handles nothing else meanwhile: its partitions close (produces accepted
/// before the delete are written and acknowledged first), every parked produce and long
/// poll of the topic is answered `Error::UnknownTopic`, as is every later request for it
/// (also a produce through an `AsyncNanoKafka`'s cached route to it: the handle then asks
/// the broker again, and reaches a re-created topic of that name). Push subscriptions to it
/// end. On disk the delete is crash-safe: after a crash midway, the next open finds the
/// topic whole or gone (see `storage::data_dir::delete`).
///
/// Errors: `UnknownTopic` (nothing changed), `Io` when the config cannot be moved aside (the
/// topic is then whole on disk and starts again, empty of parked requests), `BrokerStopped`.
///
/// Route: handled atomically by the broker (`AtomicResponse`: it serves nothing else
/// meanwhile): it forgets the topic, sends `DeleteTopicActors` to the topic and waits for it,
/// then deletes the files (`DataDir::delete_topic`). An `Io` error after the commit point
/// (the config moved into `.deleted/`) is logged, not returned: the topic is deleted and its
/// leftovers are removed by the next open, create or delete.
#[derive(Debug, Clone)]
pub struct DeleteTopic {
    pub topic: String,
}

impl Message for DeleteTopic {
    type Result = Result<()>;
}

/// Alter a topic's config: grow its partitions, change its retention, backlog bound,
/// backpressure or timestamp type (the rules are on [`TopicChanges`]). Sender: any actor
/// or handle; answered by the broker. Reply: the topic's config after the change.
///
/// The changed config is checked first (nothing is written when it is refused), then
/// persisted in `<topic>.json` (replaced atomically: a reopen finds the old config or the
/// new one, and the new partitions' directories exist before the config names them), then
/// applied to the running topic: new partitions are served, and the groups rebalance over
/// them, before the reply; every partition has taken the new settings (a lowered retention
/// has dropped what it no longer keeps). Cached produce routes of every `AsyncNanoKafka`
/// learn the new partition count on their next produce. With `validate_only` the change
/// is checked and the would-be config returned, and nothing else happens.
///
/// Errors: `UnknownTopic`, `InvalidConfig` (the partition count does not grow, or a value
/// cannot work; nothing changed), `Io` (the config on disk and the running topic are
/// unchanged), `BrokerStopped`.
///
/// Route: the broker checks the change (`TopicChanges::apply_to`) and persists it
/// (`config::alter_topic`) in its own handler, so alters of a topic apply one after another,
/// then sends `AlterTopicActors` to the topic and replies once the topic has applied it. A
/// change to the same values sends nothing.
#[derive(Debug, Clone)]
pub struct AlterTopic {
    pub topic: String,
    pub changes: TopicChanges,
    pub validate_only: bool,
}

impl Message for AlterTopic {
    type Result = Result<TopicConfig>;
}

/// The broker-wide settings a client may be told about (Kafka's broker configs; the Kafka
/// listener's DescribeConfigs of broker `0`). Answered by the broker from its settings.
/// Errors: `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct DescribeBroker;

/// The reply to [`DescribeBroker`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerDescription {
    /// The data directory (Kafka's `log.dirs`).
    pub data_dir: std::path::PathBuf,
    /// The largest record's key + value (`builder().max_record_bytes`).
    pub max_record_bytes: usize,
    /// The most record bytes one produce request may carry (`builder().max_request_bytes`).
    pub max_request_bytes: usize,
}

impl Message for DescribeBroker {
    type Result = Result<BrokerDescription>;
}

/// Every topic and its config. Answered by the broker from its registry, without asking the
/// topics. Errors: `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct ListTopics;

impl Message for ListTopics {
    type Result = Result<BTreeMap<String, TopicConfig>>;
}

/// Every topic's id (Kafka's topic id, made when the topic was created), by name. Answered
/// by the broker; a topic whose id cannot be read (a damaged `partition.metadata`) is left
/// out, with a warning. Errors: `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct TopicIds;

impl Message for TopicIds {
    type Result = Result<BTreeMap<String, crate::types::TopicId>>;
}

/// One topic's config. Answered by the broker from its registry, without asking the topic
/// (typed topics read the payload type recorded at creation here).
/// Errors: `UnknownTopic`, `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct GetTopicConfig {
    pub topic: String,
}

impl Message for GetTopicConfig {
    type Result = Result<TopicConfig>;
}

/// Append records to a topic. With `partition: None` each record goes by its key (Kafka's
/// murmur2 partitioner) or, keyless, round-robin; a batch whose records would land on
/// several partitions is split. Reply: one [`Delivery`] per record, in order, once every
/// record is in the OS (synced under `FsyncPolicy::Always`).
/// Errors: `UnknownPartition`, `RecordTooLarge` (nothing written), `KeyRequired` (a
/// record without a key on a compacted topic: nothing of the batch written), `PartitionFull`
/// (`Backpressure::Reject`), `Timeout` (`Backpressure::Block` waited the block timeout),
/// `PartitionRestarted` (nothing acknowledged; retry), `PartitionFailed`, `Io`.
///
/// Route: broker → topic, which routes the records (`routing.rs`: size limits, explicit
/// partition, key or round-robin), copies them into a [`RecordBatch`] and hands it to each
/// partition's produce lane (`Append`); the partition checks the size limits and the key
/// rule again before it queues the batch. The handles' produces skip the broker and the topic
/// (they learn the lanes with `GetRoute`) and get the same answers.
#[derive(Debug, Clone)]
pub struct Produce {
    pub topic: String,
    pub partition: Option<u32>,
    pub records: Vec<ProduceRecord>,
}
topic_message!(Produce => Vec<Delivery>);

/// As [`Produce`], for records already in a [`RecordBatch`] (one buffer for the whole batch,
/// written as it is: the fast path for many records). The batch is split by partition only
/// when its records go to several; a record over `max_record_bytes` (`RecordTooLarge`), or
/// without a key on a compacted topic (`KeyRequired`), refuses the whole batch before any
/// part is sent.
#[derive(Debug, Clone)]
pub struct ProduceBatch {
    pub topic: String,
    pub partition: Option<u32>,
    pub batch: RecordBatch,
}
topic_message!(ProduceBatch => Vec<Delivery>);

/// Append one Kafka record batch (RecordBatch v2, magic 2, as a Kafka producer sends it:
/// compressed or not, with headers, CreateTime timestamps and an idempotent producer's id and
/// sequence) to `partition`, stored byte for byte but for its base offset and leader epoch.
/// Through the same group commit and backpressure as [`Produce`]. Reply: where it went; a
/// retry of an idempotent producer's stored batch answers with the stored offsets and
/// writes nothing. Errors: `InvalidBatch` (not one valid batch, or transactional),
/// `RecordTooLarge`, `KeyRequired` (a compacted topic; the whole batch refused), `ProducerFenced`, `OutOfOrderSequence`, `UnknownTopic`, `UnknownPartition`, and as [`Produce`].
/// Route: broker → topic → partition `AppendKafka` (the Kafka listener's Produce).
#[derive(Debug, Clone)]
pub struct ProduceKafkaBatch {
    pub topic: String,
    pub partition: u32,
    /// The batch's bytes, shared, not copied: the Kafka listener passes the request's buffer
    /// (a `Vec<u8>` converts without a copy, `bytes::Bytes::from`).
    pub batch: bytes::Bytes,
}
topic_message!(ProduceKafkaBatch => KafkaAppend);

/// The first offset of `partition` (from its log start) whose record's timestamp is at least
/// `timestamp_ms`, found through the segments' time indexes: Kafka's offsets-for-times. Reply:
/// `None` when no record is that recent. Errors: `UnknownTopic`, `UnknownPartition`,
/// `Corrupt`, `Io`. Route: broker → topic → partition `FindOffset`.
#[derive(Debug, Clone)]
pub struct OffsetForTimestamp {
    pub topic: String,
    pub partition: u32,
    pub timestamp_ms: u64,
}
topic_message!(OffsetForTimestamp => Option<u64>);

/// Deletes the records of `partition` below `before` (Kafka's DeleteRecords): the log start
/// moves there, reads start there, groups whose commit lies below read from it (their lag
/// shrinks), and the segments wholly below it are deleted. An offset at or below the log
/// start changes nothing. Reply: the log start after (Kafka's low watermark). Errors:
/// `OffsetOutOfRange` (past the log end; nothing changes), `UnknownTopic`,
/// `UnknownPartition`, `Io`, `PartitionRestarted`, `PartitionFailed`. Route: broker → topic →
/// partition `DeleteRecordsBefore`.
#[derive(Debug, Clone)]
pub struct DeleteRecords {
    pub topic: String,
    pub partition: u32,
    pub before: u64,
}
topic_message!(DeleteRecords => u64);

/// Deletes `group` from `topic` (`partitions: None`: its committed offsets on every
/// partition, its registration for backpressure, its coordinator), or only its committed
/// offsets on `partitions` (Kafka's OffsetDelete). Refused while the group has members on
/// the topic. Reply: whether the topic knew the group (a commit, a registration or a
/// coordinator). Errors: `GroupNotEmpty` (nothing deleted), `UnknownTopic`,
/// `UnknownPartition`, `Io`, `PartitionRestarted`. Route: broker → topic (checks the
/// coordinator, then every partition `ForgetPartitionGroup`).
#[derive(Debug, Clone)]
pub struct DeleteGroupOffsets {
    pub topic: String,
    pub group: String,
    pub partitions: Option<Vec<u32>>,
}
topic_message!(DeleteGroupOffsets => bool);

/// Join a consumer group as `member` (joining again is a heartbeat). The first join fixes
/// the group's [`GroupOptions`] (assignor, start position); later joins with other options
/// are refused. Reply: the member's [`Assignment`]. Errors: `InvalidId`,
/// `GroupOptionsMismatch`, `UnknownTopic`.
///
/// Route: broker → topic, which starts the group's coordinator on its first join and tells
/// every partition (`RegisterGroup`: backpressure counts the group from then on), then
/// coordinator `Join`.
#[derive(Debug, Clone)]
pub struct JoinGroup {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub options: GroupOptions,
}
topic_message!(JoinGroup => Assignment);

/// Leave a group (a rebalance). Route: broker → topic → coordinator `Leave`.
/// Errors: `UnknownMember` (also for a group that does not exist).
#[derive(Debug, Clone)]
pub struct LeaveGroup {
    pub topic: String,
    pub group: String,
    pub member: String,
}
topic_message!(LeaveGroup => ());

/// A sign of life. Route: broker → topic → coordinator `Beat`. Reply: the member's current
/// assignment. Errors: `UnknownMember` (evicted or never joined: join again).
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub topic: String,
    pub group: String,
    pub member: String,
}
topic_message!(Heartbeat => Assignment);

/// Fetch up to `max_records` consecutive records of one of the member's partitions, from
/// the group's committed offset (round-robin over the partitions that have data). Nothing
/// moves until a [`Commit`]: polling again returns the same records. With `wait`, an empty
/// poll waits up to that long, woken by the next produce. A batch never spans two segment
/// files, so it can hold fewer records than are available; the next poll continues.
/// Errors: `UnknownMember`, `InvalidArgument` (`max_records` is 0), `Corrupt`,
/// `PartitionRestarted` (a partition restarted while the poll waited and no other partition
/// had data), `PartitionFailed`.
///
/// Route: broker → topic → coordinator `PollGroup` → `Fetch` / `WaitForData` to the member's
/// partitions; the records are copied out in the topic actor. The handles send
/// `PollFetched` instead (the caller copies or decodes the records on its own thread) and,
/// for a group they have seen exist, poll the coordinator directly.
#[derive(Debug, Clone)]
pub struct Poll {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub max_records: usize,
    pub wait: Option<Duration>,
}
topic_message!(Poll => Vec<Record<Vec<u8>>>);

/// Mark `offset` and everything before it in `partition` processed by `group`: its
/// committed offset becomes `offset + 1`. Reply once the commit is in the OS. The group
/// must exist on the running broker (a member joined since it started), so a typo cannot
/// create a phantom group that holds back backpressure forever. A commit admits produces
/// parked by `Backpressure::Block` while there is room.
/// Errors: `UnknownGroup`, `UnknownPartition`, `OffsetOutOfRange` (`offset >= log end`),
/// `Io` (the partition then restarts), `PartitionRestarted`, `PartitionFailed`.
///
/// Route: broker → topic (checks the group) → partition `CommitOffset`. The handles send a
/// commit for a group they have seen exist straight to the partition.
#[derive(Debug, Clone)]
pub struct Commit {
    pub topic: String,
    pub group: String,
    pub partition: u32,
    pub offset: u64,
}
topic_message!(Commit => ());

/// The `Consumer` handle's poll: like [`Poll`], but from the member's own `positions`
/// (partition → next offset) when `generation` is current; after a rebalance they are
/// ignored and reading resumes at the committed offsets. Reply: the records and the
/// member's current assignment. Errors: as [`Poll`]. Route: broker → topic → coordinator
/// `ConsumerPollGroup` → `Fetch { from }` / `WaitForData { from }`; the handles send
/// `ConsumerPollFetched`, or poll the coordinator directly.
#[derive(Debug, Clone)]
pub struct ConsumerPoll {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub generation: u64,
    pub positions: BTreeMap<u32, u64>,
    pub max_records: usize,
    pub wait: Option<Duration>,
}
topic_message!(ConsumerPoll => ConsumerBatch);

/// A commit fenced like Kafka's: accepted only from a current member, in the current
/// generation, for a partition it owns. Otherwise nothing changes. Route: broker → topic →
/// coordinator `CommitAsMember` (the fencing) → partition `CommitOffset`; a handle that knows
/// the group's coordinator sends `CommitAsMember` to it straight.
/// Errors: `UnknownMember`, `IllegalGeneration`, `PartitionNotAssigned`,
/// `UnknownPartition`, `OffsetOutOfRange`, `Io`.
#[derive(Debug, Clone)]
pub struct FencedCommit {
    pub topic: String,
    pub group: String,
    pub member: String,
    pub generation: u64,
    pub partition: u32,
    pub offset: u64,
}
topic_message!(FencedCommit => ());

/// Per-partition lag of a group: `log end - max(committed, log start)`. Route: broker →
/// topic → `GroupLag` to every partition. A partition where the group has no commit is left
/// out unless the group has a coordinator on the topic (then it counts from the log start).
/// Errors: `UnknownGroup` (no partition has a lag for it), and a partition's error.
#[derive(Debug, Clone)]
pub struct Lag {
    pub topic: String,
    pub group: String,
}
topic_message!(Lag => BTreeMap<u32, u64>);

/// Move `group`'s committed offset of `partition` to `offset`, the next offset the group
/// reads (Kafka's `kafka-consumer-groups --reset-offsets`; an operator's tool, not a
/// consumer's commit). `offset` must be within the partition's `[log start, log end]` (the
/// log end: nothing left to read). The group need not exist yet. Reply: `()` once the new
/// offset is stored.
///
/// Refused while the group has live members on the topic, as Kafka refuses a group that is
/// not empty: they would read on from their position and their next commit would undo the
/// reset. Membership lives in memory only, so a broker just opened has no live members. The
/// check and the write are two steps: a member that joins between them is not seen.
///
/// Route: broker → topic, which asks itself `DescribeGroups` (live members), then
/// `ListKafkaOffset` for both bounds, then `SetCommittedOffset` (`actors/topic/reset.rs`),
/// serving other requests meanwhile.
///
/// Errors: `GroupNotEmpty`, `InvalidArgument` (offset outside the partition), `InvalidId`,
/// `UnknownTopic`, `UnknownPartition`, `Io`, `PartitionRestarted`, `PartitionFailed`,
/// `BrokerStopped`. Nothing changes on an error.
#[derive(Debug, Clone)]
pub struct ResetOffset {
    pub topic: String,
    pub group: String,
    pub partition: u32,
    pub offset: u64,
}
topic_message!(ResetOffset => ());

/// Fault injection, for tests and demos: the partition's actor panics inside its handler,
/// is restarted by its supervisor and reloads from disk. Route: broker → topic → partition
/// `Crash`. Reply: `()` once the crash was triggered. Errors: `UnknownPartition`.
#[derive(Debug, Clone)]
pub struct CrashPartition {
    pub topic: String,
    pub partition: u32,
}
topic_message!(CrashPartition => ());

/// Everything `stats()` reports. Route: broker → `DescribeTopic` to every topic →
/// `DescribePartition` / `DescribeGroup`; a topic that does not answer is left out. The
/// handles add the listener's counters. Never fails (but for `BrokerStopped` through
/// `BrokerRef::request`).
#[derive(Debug, Clone, Copy)]
pub struct GetStats;

impl Message for GetStats {
    type Result = Result<BrokerStats>;
}

/// Clean shutdown: every partition syncs and writes its clean-shutdown checkpoint, then the
/// data-directory lock is released. Later requests fail with `BrokerStopped`.
///
/// Route: broker → `CloseTopic` to every topic → `ClosePartition` to every partition; once
/// all answered, the broker drops the lock and stops the I/O arbiters. Errors: the first
/// close error (every partition is still closed). A second `Shutdown` finds nothing to close
/// and answers `Ok`.
#[derive(Debug, Clone, Copy)]
pub struct Shutdown;

impl Message for Shutdown {
    type Result = Result<()>;
}
