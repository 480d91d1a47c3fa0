//! `AsyncNanoKafka`: the API for code already inside actix/tokio; typed methods encode and
//! decode payloads with rmp-serde. Cheap to clone.
//!
//! One seam for the two backends: the handle holds an [`Engine`], `Embedded` (the broker
//! actor's address and the direct routes, `embedded.rs`) or `Kafka` (the `kafka` backend),
//! and each method is one `match` on it. On the embedded broker every call is one message
//! to the `BrokerActor` (see [`crate::messages`]) or, for produces, polls and commits on a
//! learned route, to the partition or group coordinator itself. A call only the embedded
//! broker serves answers `Unsupported` on the Kafka backend.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::actors::broker::BrokerActor;
use crate::actors::coordinator::FetchedBatch;
use crate::actors::lane::Placed;
use crate::config::{TopicChanges, TopicConfig};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::messages::{
    AlterTopic, BrokerDescription, ConsumerPoll, CrashBroker, CrashGroupCoordinator,
    CrashPartition, CrashTopic, CreateTopic, DeleteTopic, Delivered, DescribeBroker, FencedCommit,
    GetStats, GetTopicConfig, Heartbeat, JoinGroup, KafkaAppend, Lag, LeaveGroup, ListTopics,
    OffsetForTimestamp, ProduceKafkaBatch, Subscribe, SubscribeOptions, Subscription,
};
use crate::metrics::listener::ListenerMetrics;
use crate::partition::ProduceRecord;
use crate::storage::RecordBatch;
use crate::types::{Backend, BrokerStats, ConsumerBatch, Delivery, Header, Record};
use crate::wait::Patience;

mod embedded;
mod groups;
mod lifecycle;
mod routes;
#[cfg(feature = "schema-registry")]
mod schema_store;
#[cfg(feature = "schema-registry")]
mod schemas;
mod value_codec;
mod wire;
pub(crate) use embedded::Embedded;
pub(crate) use lifecycle::{off_runtime, BrokerLink, RunningBroker};
#[cfg(feature = "schema-registry")]
pub(crate) use schema_store::SchemaStore;
#[cfg(feature = "schema-registry")]
pub(crate) use schemas::AvroBinding;
#[cfg(feature = "schema-registry")]
pub use schemas::Schemas;
pub(crate) use value_codec::ValueCodec;

/// The async face of a broker. Open one with [`AsyncNanoKafka::open`] or
/// [`crate::NanoKafkaBuilder::build_async`] (the handle then owns the broker: see
/// [`AsyncNanoKafka::shutdown`]), take one from [`crate::NanoKafka::async_handle`] (the
/// blocking handle keeps owning it), or wrap an `Addr<BrokerActor>`.
///
/// Produces take a direct route: the handle learns a topic's partition actors' addresses
/// (they survive restarts; a deleted topic's route is dropped and learned again if the
/// name is re-created), runs Kafka's partitioner itself and
/// sends each partition its records, instead of passing every produce through the broker's
/// thread. It learns the route of each topic it creates (and the blocking handle, of every
/// topic there when the broker opens). Until it knows a route, produces go through the
/// broker, and it switches the topic to the direct route only when none of its produces
/// through the broker is in flight, so a caller's produces are appended in the order of its
/// calls, pipelined or not. (The blocking handle's callers never have two in flight, so it
/// switches at once.) Every other request goes through the broker.
#[derive(Debug, Clone)]
pub struct AsyncNanoKafka {
    /// Which backend serves the calls.
    engine: Engine,
    /// Whether this handle keeps the broker running, and how `shutdown` reaches it.
    link: BrokerLink,
}

/// The backend behind an [`AsyncNanoKafka`]: every public method is one `match` on it.
#[derive(Debug, Clone)]
pub(crate) enum Engine {
    /// The embedded broker: its actor's address and the handle's routes.
    Embedded(Embedded),
    /// A Kafka cluster, through librdkafka (`kafka` feature).
    #[cfg(feature = "kafka")]
    Kafka(Arc<crate::kafka::KafkaBackend>),
}

impl From<Addr<BrokerActor>> for AsyncNanoKafka {
    fn from(addr: Addr<BrokerActor>) -> Self {
        AsyncNanoKafka::new(Engine::Embedded(Embedded::new(addr)))
    }
}

impl AsyncNanoKafka {
    /// A handle served by `engine`, tied to no running broker (see [`BrokerLink`]).
    pub(crate) fn new(engine: Engine) -> Self {
        AsyncNanoKafka {
            engine,
            link: BrokerLink::default(),
        }
    }

    /// The backend, once the handle is known to be open: on the Kafka backend, a shut-down
    /// handle answers `BrokerStopped` here (the embedded broker's actor answers that itself).
    pub(crate) fn engine(&self) -> Result<&Engine> {
        match &self.engine {
            Engine::Embedded(_) => {}
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.check_open()?,
        }
        Ok(&self.engine)
    }

    /// The embedded broker, for a call only it serves: `Unsupported` naming `op` on the
    /// Kafka backend.
    fn embedded(&self, _op: &'static str) -> Result<&Embedded> {
        match self.engine()? {
            Engine::Embedded(e) => Ok(e),
            #[cfg(feature = "kafka")]
            Engine::Kafka(_) => Err(crate::kafka::unsupported(_op)),
        }
    }

    /// Runs `request` to completion on this (plain) thread: the blocking handle's calls.
    /// The embedded broker's wait spins or parks by `patience`; the Kafka backend's runs on
    /// its own runtime.
    pub(crate) fn block_on<T>(
        &self,
        request: impl std::future::Future<Output = Result<T>>,
        patience: Patience,
    ) -> Result<T> {
        match &self.engine {
            Engine::Embedded(_) => crate::wait::block_on_with(request, patience),
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.block_on(request),
        }
    }

    /// Runs `task` in the background until it ends: on the broker's thread (embedded), or
    /// on the Kafka backend's runtime.
    ///
    /// # Errors
    /// `BrokerStopped` when the broker is gone.
    pub(crate) async fn spawn_task(
        &self,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        match self.engine()? {
            Engine::Embedded(e) => e
                .addr
                .send(crate::actors::broker::RunTask(Box::pin(task)))
                .await
                .map_err(|_| Error::BrokerStopped),
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => {
                k.spawn(task);
                Ok(())
            }
        }
    }

    /// A handle to the same broker that keeps nothing running: for a background task of
    /// this handle's, which must not keep the broker open by itself.
    pub(crate) fn detached(&self) -> AsyncNanoKafka {
        AsyncNanoKafka::new(self.engine.clone())
    }

    /// Which backend serves this handle's calls.
    pub fn backend(&self) -> Backend {
        match &self.engine {
            Engine::Embedded(_) => Backend::Embedded,
            #[cfg(feature = "kafka")]
            Engine::Kafka(_) => Backend::Kafka,
        }
    }

    /// The same handle with its embedded engine changed by `change` (nothing changes on the
    /// Kafka backend).
    fn with_embedded(&self, change: impl FnOnce(&mut Embedded)) -> AsyncNanoKafka {
        let mut handle = self.clone();
        match &mut handle.engine {
            Engine::Embedded(e) => change(e),
            #[cfg(feature = "kafka")]
            Engine::Kafka(_) => {}
        }
        handle
    }

    /// The same handle for callers that never have two produces in flight (see `sequential`).
    pub(crate) fn for_sequential_callers(&self) -> AsyncNanoKafka {
        self.with_embedded(|e| e.sequential = true)
    }

    /// The same handle, reporting the listener's counters in `stats()`.
    pub(crate) fn with_listener_metrics(self, metrics: Option<Arc<ListenerMetrics>>) -> Self {
        self.with_embedded(|e| e.listener_metrics = metrics)
    }

    /// The same handle for any caller (pipelined produces keep their order).
    pub(crate) fn for_any_caller(&self) -> AsyncNanoKafka {
        self.with_embedded(|e| e.sequential = false)
    }

    /// Which parts of `topic`'s records the Kafka listener checks against the schema
    /// registry: from the cached route on the embedded broker (no message while it is live),
    /// from the topic's config on the Kafka backend.
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    #[cfg_attr(not(feature = "schema-registry"), allow(dead_code))]
    pub(crate) async fn schema_validation(
        &self,
        topic: &str,
    ) -> Result<crate::config::SchemaValidation> {
        match &self.engine {
            Engine::Embedded(e) => e.schema_validation(topic).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(_) => {
                let config = self.describe_topic(topic).await?;
                Ok(crate::config::SchemaValidation::of(&config))
            }
        }
    }

    /// Learns `topic`'s direct route now, so that its first produces need not go through the
    /// broker (used once a topic is known to exist). A no-op when the route is known, a
    /// produce of this handle is on its way through the broker, or on the Kafka backend.
    pub(crate) async fn learn_route(&self, topic: &str) {
        match &self.engine {
            Engine::Embedded(e) => e.learn_route(topic).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(_) => {}
        }
    }

    /// The broker actor, for sending [`crate::messages`] directly: the actor face, which only
    /// the embedded broker has.
    ///
    /// # Errors
    /// `Unsupported` on the Kafka backend (use this handle's methods, which both backends
    /// serve).
    pub fn addr(&self) -> Result<&Addr<BrokerActor>> {
        Ok(&self.embedded("addr")?.addr)
    }

    /// Sends `msg` to the broker actor: the embedded broker's requests that are one message
    /// (`Unsupported`, named after the message, on the Kafka backend).
    async fn ask<M, T>(&self, msg: M) -> Result<T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>,
    {
        let op = std::any::type_name::<M>()
            .rsplit("::")
            .next()
            .unwrap_or("a request");
        self.embedded(op)?.ask(msg).await
    }

    /// Creates a topic with `config`; it exists on disk when this returns.
    ///
    /// # Errors
    /// `TopicExists`, `InvalidTopicName`, `InvalidConfig`, `Io`, `BrokerStopped`.
    pub async fn create_topic(&self, topic: &str, config: TopicConfig) -> Result<()> {
        match self.engine()? {
            Engine::Embedded(e) => {
                let topic = topic.to_owned();
                e.ask(CreateTopic {
                    topic: topic.clone(),
                    config,
                })
                .await?;
                e.learn_route(&topic).await;
                Ok(())
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.create_topic(topic, &config).await,
        }
    }

    /// Deletes a topic with its records, committed offsets and groups: see
    /// [`DeleteTopic`](crate::messages::DeleteTopic). A topic of the same name can then be
    /// created, empty; this handle (and every other) produces to that one.
    ///
    /// # Errors
    /// As [`DeleteTopic`](crate::messages::DeleteTopic): `UnknownTopic`, `Io`,
    /// `BrokerStopped`.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(DeleteTopic {
                    topic: topic.to_owned(),
                })
                .await?;
                e.routes.forget(topic);
                Ok(())
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.delete_topic(topic).await,
        }
    }

    /// Alters a topic's config: grows its partitions, changes its retention, backlog bound,
    /// backpressure or timestamp type (the rules are on [`TopicChanges`]); returns the
    /// config after the change. See [`AlterTopic`](crate::messages::AlterTopic): the change
    /// is checked before anything is written, persisted, and applied to the running topic
    /// before this returns. This handle's next produce uses the new partition count (as
    /// does every other handle's).
    ///
    /// # Errors
    /// As [`AlterTopic`](crate::messages::AlterTopic): `UnknownTopic`, `InvalidConfig`
    /// (nothing changed), `Io`, `BrokerStopped`.
    pub async fn alter_topic(&self, topic: &str, changes: TopicChanges) -> Result<TopicConfig> {
        match self.engine()? {
            Engine::Embedded(_) => self.alter_embedded(topic, changes, false).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.alter_topic(topic, &changes).await,
        }
    }

    /// [`AsyncNanoKafka::alter_topic`] on the embedded broker, or with `validate_only` only
    /// checked (for the listener's CreatePartitions and IncrementalAlterConfigs).
    pub(crate) async fn alter_embedded(
        &self,
        topic: &str,
        changes: TopicChanges,
        validate_only: bool,
    ) -> Result<TopicConfig> {
        let e = self.embedded("alter_topic")?;
        let config = e
            .ask(AlterTopic {
                topic: topic.to_owned(),
                changes,
                validate_only,
            })
            .await?;
        e.routes.forget(topic);
        Ok(config)
    }

    /// The broker-wide settings (data directory, size limits).
    ///
    /// # Errors
    /// `BrokerStopped`; `Unsupported` on the Kafka backend.
    pub async fn describe_broker(&self) -> Result<BrokerDescription> {
        self.ask(DescribeBroker).await
    }

    /// Every topic and its config, by name.
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub async fn list_topics(&self) -> Result<BTreeMap<String, TopicConfig>> {
        match self.engine()? {
            Engine::Embedded(e) => e.ask(ListTopics).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.list_topics().await,
        }
    }

    /// Every topic's id (Kafka's topic id, made when the topic was created: a topic deleted
    /// and created again has a new one), by name.
    ///
    /// # Errors
    /// `BrokerStopped`; `Unsupported` on the Kafka backend (its admin client does not report
    /// topic ids).
    pub async fn topic_ids(&self) -> Result<BTreeMap<String, crate::types::TopicId>> {
        self.ask(crate::messages::TopicIds).await
    }

    /// Produces a typed record without a key (round-robin over partitions).
    ///
    /// Inside a `tracing` span the record also carries that span's context in a header
    /// ([`crate::trace`]).
    ///
    /// # Errors
    /// As [`crate::messages::Produce`], plus `Encode`.
    pub async fn produce<T: Serialize + ?Sized>(&self, topic: &str, value: &T) -> Result<Delivery> {
        let mut batch = RecordBatch::new();
        crate::trace::push_typed(&mut batch, None, value, &[])?;
        self.produce_one(topic, batch).await
    }

    /// Produces a typed record with a key (Kafka's partitioner picks the partition).
    ///
    /// Inside a `tracing` span the record also carries that span's context in a header
    /// ([`crate::trace`]).
    ///
    /// # Errors
    /// As [`crate::messages::Produce`], plus `Encode`.
    pub async fn produce_keyed<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: impl AsRef<[u8]>,
        value: &T,
    ) -> Result<Delivery> {
        let mut batch = RecordBatch::new();
        crate::trace::push_typed(&mut batch, Some(key.as_ref()), value, &[])?;
        self.produce_one(topic, batch).await
    }

    /// Produces payload bytes unchanged (the raw-bytes path, for interop).
    ///
    /// Inside a `tracing` span the record also carries that span's context in a header
    /// ([`crate::trace`]).
    ///
    /// # Errors
    /// As [`crate::messages::Produce`].
    pub async fn produce_raw(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: Vec<u8>,
    ) -> Result<Delivery> {
        let mut batch = RecordBatch::with_capacity(1, key.map_or(0, <[u8]>::len) + value.len());
        crate::trace::push_raw(&mut batch, key, &value, &[]);
        self.produce_one(topic, batch).await
    }

    /// Produces a tombstone: `key` with Kafka's null value, to the partition Kafka's
    /// partitioner picks for the key. On a compacted topic it deletes the key (see
    /// [`crate::CleanupPolicy`]); elsewhere it is a record like any other, whose value reads
    /// as empty bytes. It carries no headers.
    ///
    /// # Errors
    /// As [`crate::messages::Produce`].
    pub async fn produce_tombstone(&self, topic: &str, key: &[u8]) -> Result<Delivery> {
        let mut batch = RecordBatch::with_capacity(1, key.len());
        batch.push_tombstone(key);
        self.produce_one(topic, batch).await
    }

    /// Produces a typed record with headers, and a key when given (Kafka's partitioner then
    /// picks the partition; without one, round-robin).
    ///
    /// Inside a `tracing` span the record also carries that span's context in a header
    /// ([`crate::trace`]).
    ///
    /// # Errors
    /// As [`crate::messages::Produce`], plus `Encode`.
    pub async fn produce_with_headers<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        let mut batch = RecordBatch::new();
        crate::trace::push_typed(&mut batch, key, value, headers)?;
        self.produce_one(topic, batch).await
    }

    /// Produces payload bytes unchanged, with headers.
    ///
    /// Inside a `tracing` span the record also carries that span's context in a header
    /// ([`crate::trace`]).
    ///
    /// # Errors
    /// As [`crate::messages::Produce`].
    pub async fn produce_raw_with_headers(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<Delivery> {
        let mut batch = RecordBatch::new();
        crate::trace::push_raw(&mut batch, key, value, headers);
        self.produce_one(topic, batch).await
    }

    /// Appends one Kafka record batch to `partition` as a Kafka producer sent it: see
    /// [`ProduceKafkaBatch`](crate::messages::ProduceKafkaBatch). Compressed batches are
    /// stored compressed; consumers get their records decompressed.
    ///
    /// # Errors
    /// As [`ProduceKafkaBatch`](crate::messages::ProduceKafkaBatch); `Unsupported` on the
    /// Kafka backend.
    pub async fn produce_kafka_batch(
        &self,
        topic: &str,
        partition: u32,
        batch: impl Into<bytes::Bytes>,
    ) -> Result<KafkaAppend> {
        self.ask(ProduceKafkaBatch {
            topic: topic.to_owned(),
            partition,
            batch: batch.into(),
        })
        .await
    }

    /// The first offset of `partition` whose record's timestamp is at least `timestamp_ms`
    /// (Kafka's offsets-for-times); `None` when no record is that recent. Seek a `Consumer`
    /// there to replay from a point in time.
    ///
    /// # Errors
    /// As [`OffsetForTimestamp`](crate::messages::OffsetForTimestamp).
    pub async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: u64,
    ) -> Result<Option<u64>> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(OffsetForTimestamp {
                    topic: topic.to_owned(),
                    partition,
                    timestamp_ms,
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.offset_for_timestamp(topic, partition, timestamp_ms).await,
        }
    }

    /// Deletes `group` from every topic (Kafka's DeleteGroups): its committed offsets, its
    /// registration for backpressure (a forgotten group no longer holds producers back) and
    /// its coordinators. Refused while it has members on any topic, before anything is
    /// deleted. `false` when no topic knew the group.
    ///
    /// # Errors
    /// `GroupNotEmpty` (nothing deleted), `Io`, `BrokerStopped`; on the Kafka backend,
    /// `Kafka` for what the cluster refused (a group with members among them).
    pub async fn delete_group(&self, group: &str) -> Result<bool> {
        match self.engine()? {
            Engine::Embedded(_) => {
                let stats = self.stats().await?;
                for (topic, t) in &stats.topics {
                    if let Some(live) = t.groups.get(group).filter(|g| !g.assignment.is_empty()) {
                        return Err(Error::GroupNotEmpty {
                            topic: topic.clone(),
                            group: group.to_owned(),
                            members: live.assignment.keys().cloned().collect(),
                        });
                    }
                }
                let mut known = false;
                for topic in stats.topics.keys() {
                    known |= self.delete_group_offsets_of(topic, group, None).await?;
                }
                Ok(known)
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.delete_group(group).await,
        }
    }

    /// Deletes `group`'s committed offsets on `partitions` of `topic` (Kafka's
    /// OffsetDelete): it reads them from where a new group would. Refused while the group has
    /// members on the topic. `false` when it had none there.
    ///
    /// # Errors
    /// As [`DeleteGroupOffsets`](crate::messages::DeleteGroupOffsets); `Unsupported` on the
    /// Kafka backend.
    pub async fn delete_group_offsets(
        &self,
        topic: &str,
        group: &str,
        partitions: &[u32],
    ) -> Result<bool> {
        self.embedded("delete_group_offsets")?;
        self.delete_group_offsets_of(topic, group, Some(partitions.to_vec()))
            .await
    }

    async fn delete_group_offsets_of(
        &self,
        topic: &str,
        group: &str,
        partitions: Option<Vec<u32>>,
    ) -> Result<bool> {
        self.ask(crate::messages::DeleteGroupOffsets {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partitions,
        })
        .await
    }

    /// Deletes the records of `partition` below `before` (Kafka's DeleteRecords); the log
    /// start after. See [`DeleteRecords`](crate::messages::DeleteRecords).
    ///
    /// # Errors
    /// As [`DeleteRecords`](crate::messages::DeleteRecords); on the Kafka backend, `Kafka`
    /// for what the cluster refused.
    pub async fn delete_records(&self, topic: &str, partition: u32, before: u64) -> Result<u64> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(crate::messages::DeleteRecords {
                    topic: topic.to_owned(),
                    partition,
                    before,
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.delete_records(topic, partition, before).await,
        }
    }

    async fn produce_one(&self, topic: &str, batch: RecordBatch) -> Result<Delivery> {
        let placed = self.produce_placed(topic, None, batch).await?;
        placed.first().ok_or_else(|| Error::Internal {
            actor: format!("the produce to {topic}"),
            reason: "one record produced, no delivery answered".to_owned(),
        })
    }

    /// Produces many raw records in one request (one write per partition); `partition`
    /// pins them all to one partition. Replies with one delivery per record, in order.
    /// A batch spread over several partitions is not atomic across them.
    /// [`AsyncNanoKafka::produce_batch`] is faster: the records are copied into one buffer
    /// here.
    ///
    /// # Errors
    /// As [`crate::messages::Produce`].
    pub async fn produce_batch_raw(
        &self,
        topic: &str,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) -> Result<Vec<Delivery>> {
        self.produce_batch(topic, partition, RecordBatch::from(&records[..]))
            .await
    }

    /// Produces a [`RecordBatch`] (typed or raw records, built with its `push` methods):
    /// the records are written as the batch holds them, one write per partition. With
    /// `partition` they all go there; else each goes by its key, or round-robin. Replies
    /// with one delivery per record, in order. A batch spread over several partitions is not
    /// atomic across them.
    ///
    /// # Errors
    /// As [`crate::messages::Produce`].
    pub async fn produce_batch(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Vec<Delivery>> {
        let placed = self.produce_placed(topic, partition, batch).await?;
        Ok(placed.into_deliveries())
    }

    /// [`AsyncNanoKafka::produce_batch`], answered with where the records went. The Kafka
    /// backend's future is boxed, so that the embedded one's stays small (see
    /// `Embedded::produce_placed`).
    async fn produce_placed(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Placed> {
        match self.engine()? {
            Engine::Embedded(e) => e.produce_placed(topic, partition, batch).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => Box::pin(k.produce_batch(topic, partition, &batch))
                .await
                .map(Placed::Each),
        }
    }

    /// Joins `group` with the default round-robin assignor.
    ///
    /// # Errors
    /// `InvalidId`, `UnknownTopic`, `GroupOptionsMismatch` (the group uses other options).
    pub async fn join_group(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        self.join_group_with(topic, group, member, GroupOptions::default())
            .await
    }

    /// Joins `group` with [`GroupOptions`] (or just an [`crate::Assignor`]); the first member's
    /// options are the group's.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group`].
    pub async fn join_group_with(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Assignment> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(JoinGroup {
                    topic: topic.to_owned(),
                    group: group.to_owned(),
                    member: member.to_owned(),
                    options: options.into(),
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.join_group(topic, group, member, options.into()).await,
        }
    }

    /// Subscribes `recipient` (an actor) to `topic` as `member` of `group`: records are
    /// pushed as typed [`Delivered<T>`] batches and committed by its [`crate::messages::Ack`].
    /// The payload type the topic records is not checked here (any `T` may read it):
    /// [`crate::Topic::subscribe`] is the checked way.
    ///
    /// # Errors
    /// As [`crate::messages::Subscribe`].
    pub async fn subscribe<T: DeserializeOwned + Send + 'static>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        recipient: Recipient<Delivered<T>>,
        options: SubscribeOptions,
    ) -> Result<Subscription> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(Subscribe {
                    topic: topic.to_owned(),
                    group: group.to_owned(),
                    member: member.to_owned(),
                    recipient,
                    options,
                })
                .await
            }
            // The subscription keeps the backend, for its dead letters.
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => {
                let names = (topic, group, member);
                crate::kafka::subscription::subscribe(k.clone(), names, recipient, options).await
            }
        }
    }

    /// The `Consumer` handle's poll; see [`crate::messages::ConsumerPoll`].
    ///
    /// # Errors
    /// As [`crate::messages::ConsumerPoll`]; `Unsupported` on the Kafka backend.
    pub async fn consumer_poll(&self, poll: ConsumerPoll) -> Result<ConsumerBatch> {
        let batch = self.consumer_poll_fetched(poll).await?;
        Ok(ConsumerBatch {
            assignment: batch.assignment,
            records: batch.fetched.map_or_else(Vec::new, |f| f.to_raw()),
        })
    }

    /// [`AsyncNanoKafka::consumer_poll`], the records left in their read buffer (a typed
    /// consumer decodes them from it).
    pub(crate) async fn consumer_poll_fetched(&self, poll: ConsumerPoll) -> Result<FetchedBatch> {
        self.consumer_poll_waiting(poll, (false, false)).await
    }

    /// [`AsyncNanoKafka::consumer_poll_fetched`] for a member that is caught up when
    /// `wait_first` (the poll waits at the member's partitions before it fetches any: one
    /// parallel round of waits where a fetch of each partition in turn found nothing), and
    /// whose answer may carry the member's next poll, sent already, when `chain` (see
    /// [`crate::actors::coordinator::Chain`]).
    pub(crate) async fn consumer_poll_waiting(
        &self,
        poll: ConsumerPoll,
        style: (bool, bool),
    ) -> Result<FetchedBatch> {
        let e = self.embedded("consumer_poll")?;
        e.consumer_poll_fetched(poll, style).await
    }

    /// A commit fenced by generation and ownership; see [`crate::messages::FencedCommit`].
    ///
    /// # Errors
    /// As [`crate::messages::FencedCommit`]; `Unsupported` on the Kafka backend.
    pub async fn fenced_commit(&self, commit: FencedCommit) -> Result<()> {
        self.embedded("fenced_commit")?.fenced_commit(commit).await
    }

    /// Leaves `group` (a rebalance).
    ///
    /// # Errors
    /// `UnknownMember`, `UnknownTopic`, `BrokerStopped`.
    pub async fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(LeaveGroup {
                    topic: topic.to_owned(),
                    group: group.to_owned(),
                    member: member.to_owned(),
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.leave_group(topic, group, member).await,
        }
    }

    /// A sign of life; returns the member's current assignment.
    ///
    /// # Errors
    /// `UnknownMember` (evicted or never joined: join again), `UnknownTopic`, `BrokerStopped`.
    pub async fn heartbeat(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(Heartbeat {
                    topic: topic.to_owned(),
                    group: group.to_owned(),
                    member: member.to_owned(),
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.heartbeat(topic, group, member).await,
        }
    }

    /// Up to `max_records` consecutive records of one partition from the committed offset,
    /// payloads as stored (the raw-bytes path), waiting up to `timeout` for the first.
    ///
    /// # Errors
    /// As [`crate::messages::Poll`].
    pub async fn poll_batch_raw(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        let names = (topic, group, member);
        match self.engine()? {
            Engine::Embedded(e) => {
                let fetched = e.poll_fetched(names, max_records, timeout).await?;
                Ok(fetched.map_or_else(Vec::new, |f| f.to_raw()))
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.poll_batch_raw(names, max_records, timeout).await,
        }
    }

    /// The record at the group's committed offset of one of the member's partitions, or
    /// `None` at once. Without a commit, the next poll returns the same record.
    ///
    /// # Errors
    /// As [`crate::messages::Poll`], plus `Decode` (commit its offset to skip it).
    pub async fn poll<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Option<Record<T>>> {
        let mut records = self
            .poll_batch::<T>(topic, group, member, 1, Duration::ZERO)
            .await?;
        Ok(records.pop())
    }

    /// As [`AsyncNanoKafka::poll`], waiting up to `timeout` for a record.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll`].
    pub async fn poll_timeout<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        timeout: Duration,
    ) -> Result<Option<Record<T>>> {
        let mut records = self
            .poll_batch::<T>(topic, group, member, 1, timeout)
            .await?;
        Ok(records.pop())
    }

    /// Up to `max_records` consecutive typed records of one partition from the committed
    /// offset, waiting up to `timeout` for the first.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll`]; `InvalidArgument` when `max_records` is 0.
    pub async fn poll_batch<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        let names = (topic, group, member);
        self.poll_batch_with(names, max_records, timeout, &ValueCodec::MessagePack)
            .await
    }

    /// As [`AsyncNanoKafka::poll_batch`], the values in `codec`'s format (a typed topic's).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch`].
    pub(crate) async fn poll_batch_with<T: DeserializeOwned>(
        &self,
        names: (&str, &str, &str),
        max_records: usize,
        timeout: Duration,
        codec: &ValueCodec,
    ) -> Result<Vec<Record<T>>> {
        let topic = names.0;
        match self.engine()? {
            // Decoded straight from the read buffer, on the caller's thread.
            Engine::Embedded(e) => {
                let fetched = e.poll_fetched(names, max_records, timeout).await?;
                codec.prepare(fetched.as_ref()).await;
                let mut records = Vec::new();
                if let Some(fetched) = &fetched {
                    records.reserve(fetched.records.len());
                    codec.decode_each(fetched, topic, |r| records.push(r))?;
                }
                Ok(records)
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => {
                let records = k.poll_batch_raw(names, max_records, timeout).await?;
                records.into_iter().map(|r| r.decode(topic)).collect()
            }
        }
    }

    /// Commits `offset` of `partition` for `group` (committed offset = `offset + 1`).
    ///
    /// # Errors
    /// `UnknownGroup`, `UnknownPartition`, `OffsetOutOfRange`, `Io`.
    pub async fn commit(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        match self.engine()? {
            Engine::Embedded(e) => e.commit(topic, group, partition, offset).await,
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.commit(topic, group, partition, offset).await,
        }
    }

    /// Per-partition lag of `group`: `log end - max(committed, log start)`.
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownGroup`, `BrokerStopped`.
    pub async fn lag(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(Lag {
                    topic: topic.to_owned(),
                    group: group.to_owned(),
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => k.lag(topic, group).await,
        }
    }

    /// Partitions, groups, lag and restarts of every topic.
    ///
    /// # Errors
    /// `BrokerStopped`; `Unsupported` on the Kafka backend.
    pub async fn stats(&self) -> Result<BrokerStats> {
        let e = self.embedded("stats")?;
        let mut stats = e.ask(GetStats).await?;
        stats.listener = e.listener_metrics.as_ref().map(|m| m.snapshot());
        Ok(stats)
    }

    /// Fault injection: crash a partition's actor (it restarts from disk).
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownPartition`; `Unsupported` on the Kafka backend.
    pub async fn crash_partition(&self, topic: &str, partition: u32) -> Result<()> {
        self.ask(CrashPartition {
            topic: topic.to_owned(),
            partition,
        })
        .await
    }

    /// Fault injection: crash a topic's actor (it restarts with its state).
    ///
    /// # Errors
    /// `UnknownTopic`; `Unsupported` on the Kafka backend.
    pub async fn crash_topic(&self, topic: &str) -> Result<()> {
        self.ask(CrashTopic {
            topic: topic.to_owned(),
        })
        .await
    }

    /// Fault injection: crash the broker actor (it restarts with its state).
    ///
    /// # Errors
    /// `BrokerStopped`; `Unsupported` on the Kafka backend.
    pub async fn crash_broker(&self) -> Result<()> {
        self.ask(CrashBroker).await
    }

    /// Fault injection: crash a group's coordinator (memberships reset).
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownGroup`; `Unsupported` on the Kafka backend.
    pub async fn crash_group_coordinator(&self, topic: &str, group: &str) -> Result<()> {
        self.ask(CrashGroupCoordinator {
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
        .await
    }

    /// The broker actor behind a [`crate::BrokerRef`], whose `request` answers one flat
    /// `Result`.
    ///
    /// # Errors
    /// `Unsupported` on the Kafka backend, as [`AsyncNanoKafka::addr`].
    pub fn broker_ref(&self) -> Result<crate::BrokerRef> {
        Ok(crate::BrokerRef::new(self.addr()?.clone()))
    }

    /// One topic's config, as [`AsyncNanoKafka::list_topics`] reports it, without copying
    /// every other topic's. On the Kafka backend it is taken from `list_topics` (Kafka keeps
    /// no `payload_type`: it reads `None` there).
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    pub async fn describe_topic(&self, topic: &str) -> Result<TopicConfig> {
        match self.engine()? {
            Engine::Embedded(e) => {
                e.ask(GetTopicConfig {
                    topic: topic.to_owned(),
                })
                .await
            }
            #[cfg(feature = "kafka")]
            Engine::Kafka(k) => {
                k.list_topics()
                    .await?
                    .remove(topic)
                    .ok_or_else(|| Error::UnknownTopic {
                        topic: topic.to_owned(),
                    })
            }
        }
    }
}
