//! The messages behind the Kafka listener's data path (Fetch, ListOffsets, InitProducerId),
//! usable by any actor. Produce uses [`super::ProduceKafkaBatch`].

use std::time::Duration;

use actix::Message;

use crate::error::Result;
pub use crate::storage::BatchRead;

/// Whole record batches of `partition`, as stored, from the batch holding `offset` on, up to
/// `max_bytes` (with `min_one`, the first batch even if it is larger: Kafka's KIP-74), from
/// one segment: Kafka's Fetch read, a copy of bytes (nothing is decoded). The first batch may
/// hold records below `offset`. Reply: the bytes and the log's bounds as of the read (the
/// high watermark is the log end: every record appended is readable). Errors:
/// `OffsetOutOfRange` (below the log start or past the log end), `UnknownTopic`,
/// `UnknownPartition`, `Corrupt`, `Io`, `PartitionRestarted`, `PartitionFailed`.
/// Route: broker → topic → partition `ReadBatches`, which reads the segment straight into
/// the buffer the listener sends.
#[derive(Debug, Clone)]
pub struct FetchKafkaBatches {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub max_bytes: usize,
    pub min_one: bool,
}
topic_message!(FetchKafkaBatches => BatchRead);

/// Resolves once `partition`'s log end is past `offset` (at once if it already is), or
/// after `wait`, whichever comes first; also when the partition restarts or the broker
/// stops (the caller reads again and meets the error then). A parked long poll of a Kafka
/// Fetch: woken by the append itself, never by polling. Route: broker → topic → partition
/// `WaitForAppend`, parked with the group polls' waits (`WaitForData`) and woken by the same
/// write. Errors: `UnknownTopic`, `UnknownPartition`, `BrokerStopped`.
#[derive(Debug, Clone)]
pub struct WaitForKafkaAppend {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub wait: Duration,
}
topic_message!(WaitForKafkaAppend => ());

/// Which offset [`ListKafkaOffset`] asks for (Kafka's ListOffsets timestamps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// The log start offset (Kafka's -2).
    Earliest,
    /// The log end offset, the high watermark (Kafka's -1).
    Latest,
    /// The first record with the largest timestamp in the log (Kafka's -3).
    MaxTimestamp,
    /// The first record whose timestamp is at least this many ms since the epoch.
    Timestamp(u64),
}

/// An offset of `partition` by [`OffsetSpec`]. Reply: `None` when no record matches a
/// timestamp. Route: broker → topic → partition `FindKafkaOffset`. Errors: `UnknownTopic`,
/// `UnknownPartition`, `Corrupt`, `Io`, `PartitionRestarted`, `PartitionFailed`.
#[derive(Debug, Clone)]
pub struct ListKafkaOffset {
    pub topic: String,
    pub partition: u32,
    pub spec: OffsetSpec,
}
topic_message!(ListKafkaOffset => Option<ListedOffset>);

/// The reply to [`ListKafkaOffset`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    pub offset: u64,
    /// The record's timestamp, for the lookups by timestamp; `None` for the log start and
    /// end.
    pub timestamp_ms: Option<u64>,
}

/// A producer id for a Kafka idempotent producer (InitProducerId), never handed out before
/// from this data directory, also across restarts (see `storage::producer_ids`). Answered by
/// the broker, which persists a block of 1000 ids before handing out the first of them.
/// Errors: `Io`, `Corrupt` (the id file), `BrokerStopped`.
#[derive(Debug, Clone, Copy)]
pub struct AllocateProducerId;
impl Message for AllocateProducerId {
    type Result = Result<i64>;
}

/// The idempotent producers `partition` remembers (Kafka's DescribeProducers): each one's
/// id, epoch, last sequence and last write, by id. Route: broker → topic → partition
/// `GetProducers`. Errors: `UnknownTopic`, `UnknownPartition`, `PartitionRestarted`,
/// `PartitionFailed`.
#[derive(Debug, Clone)]
pub struct DescribeProducers {
    pub topic: String,
    pub partition: u32,
}
topic_message!(DescribeProducers => Vec<crate::storage::producer_state::ActiveProducer>);
