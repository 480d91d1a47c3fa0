//! Values the API hands back: records, deliveries, statistics.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::RecordBatch;

/// A topic's id, Kafka's topic id (see the type's docs for where it is kept).
pub use crate::storage::data_dir::TopicId;

/// A consumed record. `T` is the payload type (`Vec<u8>` on the raw-bytes path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record<T> {
    pub partition: u32,
    pub offset: u64,
    /// Milliseconds since the Unix epoch. Native produces are stamped by the broker's clock
    /// when they are appended; a Kafka client's record keeps the producer's timestamp
    /// (CreateTime), unless the topic is `TimestampType::LogAppendTime`. 0 when a Kafka
    /// producer sent none.
    pub timestamp_ms: u64,
    pub key: Option<Vec<u8>>,
    /// The payload. A Kafka tombstone (a null value) reads as empty bytes.
    pub value: T,
    /// The record's headers, in the order they were produced (keys may repeat).
    #[serde(default)]
    pub headers: Vec<Header>,
}

/// A record header, as Kafka has them: a string key and an optional value (`None` is
/// Kafka's null header value, distinct from an empty one).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

impl Header {
    /// A header with a value.
    pub fn new(key: impl Into<String>, value: impl Into<Vec<u8>>) -> Self {
        Header {
            key: key.into(),
            value: Some(value.into()),
        }
    }

    /// A header with Kafka's null value.
    pub fn null(key: impl Into<String>) -> Self {
        Header {
            key: key.into(),
            value: None,
        }
    }

    /// The headers of a stored record. A key that is not UTF-8 (a Kafka client may send
    /// any bytes) is shown with replacement characters; the stored bytes are unchanged.
    pub(crate) fn from_stored(headers: crate::storage::format::Headers<'_>) -> Vec<Header> {
        if headers.is_empty() {
            return Vec::new();
        }
        headers
            .iter()
            .map(|(key, value)| Header {
                key: String::from_utf8_lossy(key).into_owned(),
                value: value.map(<[u8]>::to_vec),
            })
            .collect()
    }
}

/// The borrowed form the storage layer writes.
fn header_refs(headers: &[Header]) -> Vec<crate::storage::batch::HeaderRef<'_>> {
    headers
        .iter()
        .map(|h| (h.key.as_bytes(), h.value.as_deref()))
        .collect()
}

impl Record<Vec<u8>> {
    /// Decodes the payload (MessagePack, as the typed produce methods write it).
    ///
    /// # Errors
    /// [`Error::Decode`] naming the record when the bytes are not a `T`.
    pub fn decode<T: DeserializeOwned>(self, topic: &str) -> Result<Record<T>> {
        let value = rmp_serde::from_slice(&self.value).map_err(|source| Error::Decode {
            topic: topic.to_owned(),
            partition: self.partition,
            offset: self.offset,
            source: std::sync::Arc::new(source),
        })?;
        Ok(Record {
            partition: self.partition,
            offset: self.offset,
            timestamp_ms: self.timestamp_ms,
            key: self.key,
            value,
            headers: self.headers,
        })
    }
}

/// Encodes a payload the way the typed produce methods do (MessagePack with field names, so
/// structs can gain optional fields without breaking old records).
///
/// # Errors
/// [`Error::Encode`].
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>> {
    rmp_serde::to_vec_named(value).map_err(|e| Error::Encode(std::sync::Arc::new(e)))
}

/// Typed records: the value as MessagePack (`encode`), written straight into the batch.
impl RecordBatch {
    /// Adds a typed record without a key (round-robin over partitions).
    ///
    /// # Errors
    /// `Encode`; the batch is then unchanged.
    pub fn push<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        self.push_typed(None, value)
    }

    /// Adds a typed record with a key (Kafka's partitioner picks the partition).
    ///
    /// # Errors
    /// `Encode`; the batch is then unchanged.
    pub fn push_keyed<T: Serialize + ?Sized>(
        &mut self,
        key: impl AsRef<[u8]>,
        value: &T,
    ) -> Result<()> {
        self.push_typed(Some(key.as_ref()), value)
    }

    /// Adds a typed record with an optional key and headers.
    ///
    /// # Errors
    /// `Encode`; the batch is then unchanged.
    pub fn push_with_headers<T: Serialize + ?Sized>(
        &mut self,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<()> {
        self.push_with(key, &header_refs(headers), |buf| {
            rmp_serde::encode::write_named(buf, value)
        })
        .map_err(|e| Error::Encode(std::sync::Arc::new(e)))
    }

    /// Adds a record of raw bytes with headers. Sizes (key, value and headers together) are
    /// checked when the batch is produced.
    pub fn push_raw_with_headers(&mut self, key: Option<&[u8]>, value: &[u8], headers: &[Header]) {
        self.push_header_refs(key, value, &header_refs(headers));
    }

    fn push_typed<T: Serialize + ?Sized>(&mut self, key: Option<&[u8]>, value: &T) -> Result<()> {
        self.push_with(key, &[], |buf| rmp_serde::encode::write_named(buf, value))
            .map_err(|e| Error::Encode(std::sync::Arc::new(e)))
    }
}

/// A record as a [`crate::Table`] reads it: its place, key and value (`None`: a tombstone,
/// Kafka's null value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableRecord {
    pub partition: u32,
    pub offset: u64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
}

/// What a `Consumer` poll returns: records and the member's current assignment (a new
/// generation tells the consumer to drop its positions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerBatch {
    pub assignment: crate::group::Assignment,
    pub records: Vec<Record<Vec<u8>>>,
}

/// Which broker serves a handle's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// The broker embedded in this process, on its data directory.
    Embedded,
    /// An Apache Kafka cluster, through librdkafka (`kafka` feature,
    /// `NanoKafka::builder().kafka_bootstrap(..)`).
    Kafka,
}

/// Where a produced record landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub partition: u32,
    pub offset: u64,
}

/// One partition's state, from [`crate::NanoKafka::stats`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartitionStats {
    pub partition: u32,
    pub log_start_offset: u64,
    pub log_end_offset: u64,
    pub size_bytes: u64,
    pub segments: usize,
    /// Committed offset of every group with a commit here.
    pub committed: BTreeMap<String, u64>,
    /// Times the partition's actor was restarted after a crash.
    pub restarts: u64,
    /// `fdatasync`s of the partition's log since the broker opened it (restarts included):
    /// one per group commit under `FsyncPolicy::Always`, one per tick with new records under
    /// `Interval`. Records produced over an interval divided by the change of this count is
    /// how many records each sync covered.
    #[serde(default)]
    pub fsyncs: u64,
    /// Long polls parked here until the next write: group polls (`poll_timeout`, a
    /// `Consumer`'s or a subscription's poll that found nothing) and Kafka fetches with a
    /// wait. Kafka calls its counterpart the fetch purgatory. A group poll answered by
    /// another partition leaves its wait here for its member's next poll, so a caught-up
    /// member between two polls may still count here.
    #[serde(default)]
    pub parked_polls: usize,
    /// Produces parked here by `Backpressure::Block` until there is room (or their block
    /// timeout).
    #[serde(default)]
    pub parked_produces: usize,
    /// Set when the partition cannot serve (why).
    pub failed: Option<String>,
    /// The log cleaner's work on this partition over its life, restarts included (compacted
    /// topics; `None` before the first pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cleaner: Option<CleanerSummary>,
}

/// What the log cleaner did to one partition of a compacted topic over its life: counted
/// since its first pass, across restarts (kept in the partition directory's
/// `cleaner.totals`, written after each pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CleanerSummary {
    /// Passes swapped in.
    pub passes: u64,
    /// Bytes the passes read (the dirty section twice: once to map keys, once to rewrite).
    pub bytes_read: u64,
    /// Bytes the passes wrote (the cleaned segments).
    pub bytes_written: u64,
    /// Records removed: superseded by a later record of their key, or tombstones past their
    /// delete horizon.
    pub records_removed: u64,
    /// When the last pass was swapped in (ms since the epoch, the broker's clock).
    pub last_pass_ms: Option<u64>,
    /// The dirty share of the cleanable bytes after the last pass, in thousandths.
    pub dirty_permille: u32,
}

/// One consumer group's state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GroupStats {
    pub generation: u64,
    /// Member id → its partitions.
    pub assignment: BTreeMap<String, Vec<u32>>,
    /// Partition → lag.
    pub lag: BTreeMap<u32, u64>,
    /// Times the group's coordinator was restarted after a crash.
    pub restarts: u64,
}

/// One topic's state.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TopicStats {
    pub partitions: Vec<PartitionStats>,
    pub groups: BTreeMap<String, GroupStats>,
    /// Times the topic's actor was restarted after a crash.
    pub restarts: u64,
}

/// The whole broker's state, from [`crate::NanoKafka::stats`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BrokerStats {
    pub topics: BTreeMap<String, TopicStats>,
    /// Times the broker actor was restarted after a crash.
    pub restarts: u64,
    /// The Kafka listener's counters, when this handle's broker runs one.
    pub listener: Option<ListenerStats>,
}

/// The Kafka listener's counters since it started, from [`crate::NanoKafka::stats`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ListenerStats {
    /// Connections open now.
    pub connections: u64,
    /// Connections accepted since the start (refused ones included).
    pub connections_accepted: u64,
    /// Connections closed at once because `max_connections` were open.
    pub connections_refused: u64,
    /// Connections closed for a malformed, oversized or unauthorised request, or a failed
    /// TLS handshake.
    pub connections_closed_bad_request: u64,
    /// Connections closed for being idle too long or not authenticating (or completing the
    /// TLS handshake) in time.
    #[serde(default)]
    pub connections_closed_idle: u64,
    /// Bytes reserved now, across all connections, by request frames being read or waiting
    /// to be answered (bounded by `queued_max_request_bytes`).
    #[serde(default)]
    pub request_bytes_held: u64,
    /// Fetch sessions (KIP-227) opened since the start.
    #[serde(default)]
    pub fetch_sessions_opened: u64,
    /// Incremental fetches answered in a session since the start.
    #[serde(default)]
    pub incremental_fetches: u64,
    /// Requests answered (or, for `acks=0` produces, handled), by Kafka API name
    /// (`"Produce"`, `"Fetch"`, ...).
    pub requests: BTreeMap<String, u64>,
}
