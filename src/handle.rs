//! `NanoKafka`: the blocking, thread-safe handle, for plain threads.
//!
//! Each call runs one request of its [`AsyncNanoKafka`] to completion on the calling thread
//! (see `wait` for how it waits). Called on an actix thread, where blocking would deadlock,
//! a call returns `Error::BlockingInActorContext` instead. The handle holds the running
//! broker through the [`RunningBroker`] trait; dropping the last clone (and the last owning
//! `AsyncNanoKafka`, see `async_handle::lifecycle`) shuts it down. The builder and what it
//! starts are the composition root's (`root`).

#[cfg(feature = "schema-registry")]
mod schemas;
#[cfg(feature = "schema-registry")]
pub use schemas::BlockingSchemas;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::actors::broker::BrokerActor;
use crate::async_handle::{AsyncNanoKafka, BrokerLink, RunningBroker};
use crate::broker_ref::BrokerRef;
use crate::config::{TopicChanges, TopicConfig};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::messages::KafkaAppend;
use crate::partition::ProduceRecord;
use crate::storage::RecordBatch;
use crate::types::{BrokerStats, Delivery, Header, Record};
use crate::wait::Patience;

/// The blocking broker handle. `Clone + Send + Sync`; clones share one broker.
#[derive(Debug, Clone)]
pub struct NanoKafka {
    /// The async handle every call runs, for sequential callers; it reaches the broker only
    /// weakly.
    handle: AsyncNanoKafka,
    /// Keeps the broker running.
    broker: Arc<dyn RunningBroker>,
}

impl NanoKafka {
    /// The blocking handle of a broker just started (by the composition root).
    pub(crate) fn new(handle: AsyncNanoKafka, broker: Arc<dyn RunningBroker>) -> Self {
        NanoKafka { handle, broker }
    }
}

impl NanoKafka {
    /// The address the Kafka listener is bound to (with the port it picked, when asked for
    /// port 0), or `None` without a listener.
    pub fn listener_addr(&self) -> Option<std::net::SocketAddr> {
        self.broker.listener_addr()
    }

    /// The address the web console is bound to (with the port it picked, when asked for
    /// port 0), or `None` without one. See [`crate::NanoKafkaBuilder::console`].
    #[cfg(feature = "console")]
    pub fn console_addr(&self) -> Option<std::net::SocketAddr> {
        self.broker.console_addr()
    }

    /// The address the schema registry is bound to (with the port it picked, when asked for
    /// port 0), or `None` without one. See [`crate::NanoKafkaBuilder::schema_registry`].
    #[cfg(feature = "schema-registry")]
    pub fn schema_registry_addr(&self) -> Option<std::net::SocketAddr> {
        self.broker.schema_registry_addr()
    }

    /// Which backend serves this handle: the embedded broker, or a Kafka cluster.
    pub fn backend(&self) -> crate::types::Backend {
        self.handle.backend()
    }

    /// The async face of this broker, for code on actix/tokio threads. It does not keep the
    /// broker running: once the last `NanoKafka` (and owning async handle) is dropped, its
    /// calls answer `BrokerStopped`. Its [`AsyncNanoKafka::shutdown`] shuts this broker down
    /// as [`NanoKafka::shutdown`] does (this handle then answers `BrokerStopped`). To open a
    /// broker that async code owns, use [`AsyncNanoKafka::open`].
    pub fn async_handle(&self) -> AsyncNanoKafka {
        self.handle.for_any_caller()
    }

    /// The broker actor, for actors that send [`crate::messages`]: the actor face, which only
    /// the embedded broker has.
    ///
    /// # Errors
    /// `Unsupported` on the Kafka backend.
    pub fn addr(&self) -> Result<Addr<BrokerActor>> {
        self.handle.addr().cloned()
    }

    /// The broker actor behind [`BrokerRef`], whose `request` answers one flat `Result`.
    ///
    /// # Errors
    /// `Unsupported` on the Kafka backend, as [`NanoKafka::addr`].
    pub fn broker_ref(&self) -> Result<BrokerRef> {
        self.handle.broker_ref()
    }

    /// An async handle that keeps this broker running as a `NanoKafka` clone does.
    pub(crate) fn owning_async_handle(&self) -> AsyncNanoKafka {
        self.handle
            .for_any_caller()
            .with_link(BrokerLink::owning(self.broker.clone()))
    }

    /// Runs `request` to completion on this thread, waiting with `patience`; refused on an
    /// actix/tokio thread and once the broker stopped.
    fn block_on<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        patience: Patience,
    ) -> Result<T> {
        crate::wait::refuse_actix_thread()?;
        if self.broker.is_stopped() {
            return Err(Error::BrokerStopped);
        }
        self.handle.block_on(request, patience)
    }

    fn call<T>(&self, request: impl Future<Output = Result<T>>) -> Result<T> {
        self.block_on(request, Patience::ROUND_TRIP)
    }

    /// As `call`, for a produce of `bytes`: a large batch's append takes longer than a round
    /// trip, and the caller spins for it accordingly (see `Patience::append`).
    fn call_appending<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        bytes: usize,
    ) -> Result<T> {
        self.block_on(request, Patience::append(bytes))
    }

    /// As `call`, for a request that may wait `timeout` for data (a long poll).
    fn call_waiting<T>(
        &self,
        request: impl Future<Output = Result<T>>,
        timeout: Duration,
    ) -> Result<T> {
        let patience = match timeout.is_zero() {
            true => Patience::ROUND_TRIP,
            false => Patience::Park,
        };
        self.block_on(request, patience)
    }

    /// Runs one async-handle request to completion on this thread.
    pub(crate) fn call_async<'a, T, F>(
        &'a self,
        request: impl FnOnce(&'a AsyncNanoKafka) -> F,
        timeout: Duration,
    ) -> Result<T>
    where
        F: Future<Output = Result<T>> + 'a,
    {
        self.call_waiting(request(&self.handle), timeout)
    }

    /// [`AsyncNanoKafka::create_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::create_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn create_topic(&self, topic: &str, config: TopicConfig) -> Result<()> {
        self.call(self.handle.create_topic(topic, config))
    }

    /// [`AsyncNanoKafka::list_topics`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::list_topics`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn list_topics(&self) -> Result<std::collections::BTreeMap<String, TopicConfig>> {
        self.call(self.handle.list_topics())
    }

    /// [`AsyncNanoKafka::alter_topic`], blocking this thread until it answers: grows the
    /// topic's partitions or changes its settings (see [`TopicChanges`]); returns the
    /// config after the change.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::alter_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn alter_topic(&self, topic: &str, changes: TopicChanges) -> Result<TopicConfig> {
        self.call(self.handle.alter_topic(topic, changes))
    }

    /// [`AsyncNanoKafka::delete_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::delete_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn delete_topic(&self, topic: &str) -> Result<()> {
        self.call(self.handle.delete_topic(topic))
    }

    /// [`AsyncNanoKafka::produce`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce<T: Serialize + ?Sized>(&self, topic: &str, value: &T) -> Result<Delivery> {
        self.call(self.handle.produce(topic, value))
    }

    /// [`AsyncNanoKafka::produce_keyed`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_keyed`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_keyed<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: impl AsRef<[u8]>,
        value: &T,
    ) -> Result<Delivery> {
        self.call(self.handle.produce_keyed(topic, key, value))
    }

    /// [`AsyncNanoKafka::produce_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_raw(&self, topic: &str, key: Option<&[u8]>, value: Vec<u8>) -> Result<Delivery> {
        self.call(self.handle.produce_raw(topic, key, value))
    }

    /// [`AsyncNanoKafka::delete_records`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::delete_records`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn delete_records(&self, topic: &str, partition: u32, before: u64) -> Result<u64> {
        self.call(self.handle.delete_records(topic, partition, before))
    }

    /// [`AsyncNanoKafka::delete_group`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::delete_group`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn delete_group(&self, group: &str) -> Result<bool> {
        self.call(self.handle.delete_group(group))
    }

    /// [`AsyncNanoKafka::delete_group_offsets`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::delete_group_offsets`]; `BlockingInActorContext` on an
    /// actix/tokio thread.
    pub fn delete_group_offsets(
        &self,
        topic: &str,
        group: &str,
        partitions: &[u32],
    ) -> Result<bool> {
        self.call(self.handle.delete_group_offsets(topic, group, partitions))
    }

    /// [`AsyncNanoKafka::describe_producers`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::describe_producers`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn describe_producers(
        &self,
        topic: &str,
        partition: u32,
    ) -> Result<Vec<crate::ActiveProducer>> {
        self.call(self.handle.describe_producers(topic, partition))
    }

    /// [`AsyncNanoKafka::produce_tombstone`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_tombstone`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn produce_tombstone(&self, topic: &str, key: &[u8]) -> Result<Delivery> {
        self.call(self.handle.produce_tombstone(topic, key))
    }

    /// [`AsyncNanoKafka::produce_with_headers`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_with_headers`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn produce_with_headers<T: Serialize + ?Sized>(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        self.call(self.handle.produce_with_headers(topic, key, value, headers))
    }

    /// [`AsyncNanoKafka::produce_raw_with_headers`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_raw_with_headers`]; `BlockingInActorContext` on an
    /// actix/tokio thread.
    pub fn produce_raw_with_headers(
        &self,
        topic: &str,
        key: Option<&[u8]>,
        value: &[u8],
        headers: &[Header],
    ) -> Result<Delivery> {
        self.call(
            self.handle
                .produce_raw_with_headers(topic, key, value, headers),
        )
    }

    /// [`AsyncNanoKafka::offset_for_timestamp`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::offset_for_timestamp`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: u64,
    ) -> Result<Option<u64>> {
        self.call(
            self.handle
                .offset_for_timestamp(topic, partition, timestamp_ms),
        )
    }

    /// [`AsyncNanoKafka::produce_kafka_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_kafka_batch`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn produce_kafka_batch(
        &self,
        topic: &str,
        partition: u32,
        batch: impl Into<bytes::Bytes>,
    ) -> Result<KafkaAppend> {
        self.call(self.handle.produce_kafka_batch(topic, partition, batch))
    }

    /// [`AsyncNanoKafka::produce_batch_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_batch_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_batch_raw(
        &self,
        topic: &str,
        partition: Option<u32>,
        records: Vec<ProduceRecord>,
    ) -> Result<Vec<Delivery>> {
        // As the async handle does: the records become one batch, produced as such.
        self.produce_batch(topic, partition, RecordBatch::from(&records[..]))
    }

    /// [`AsyncNanoKafka::produce_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_batch`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn produce_batch(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Vec<Delivery>> {
        let bytes = batch.size_bytes();
        self.call_appending(self.handle.produce_batch(topic, partition, batch), bytes)
    }

    /// [`AsyncNanoKafka::join_group`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn join_group(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        self.call(self.handle.join_group(topic, group, member))
    }

    /// [`AsyncNanoKafka::join_group_with`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::join_group_with`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn join_group_with(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Assignment> {
        self.call(self.handle.join_group_with(topic, group, member, options))
    }

    /// [`AsyncNanoKafka::leave_group`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::leave_group`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        self.call(self.handle.leave_group(topic, group, member))
    }

    /// [`AsyncNanoKafka::heartbeat`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::heartbeat`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn heartbeat(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        self.call(self.handle.heartbeat(topic, group, member))
    }

    /// [`AsyncNanoKafka::poll`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
    ) -> Result<Option<Record<T>>> {
        self.call(self.handle.poll(topic, group, member))
    }

    /// [`AsyncNanoKafka::poll_timeout`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_timeout`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_timeout<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        timeout: Duration,
    ) -> Result<Option<Record<T>>> {
        self.call_waiting(
            self.handle.poll_timeout(topic, group, member, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::poll_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_batch<T: DeserializeOwned>(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        self.call_waiting(
            self.handle
                .poll_batch(topic, group, member, max_records, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::poll_batch_raw`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch_raw`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn poll_batch_raw(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<Vec<u8>>>> {
        self.call_waiting(
            self.handle
                .poll_batch_raw(topic, group, member, max_records, timeout),
            timeout,
        )
    }

    /// [`AsyncNanoKafka::commit`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::commit`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn commit(&self, topic: &str, group: &str, partition: u32, offset: u64) -> Result<()> {
        self.call(self.handle.commit(topic, group, partition, offset))
    }

    /// [`AsyncNanoKafka::reset_offset`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::reset_offset`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn reset_offset(
        &self,
        topic: &str,
        group: &str,
        partition: u32,
        offset: u64,
    ) -> Result<()> {
        self.call(self.handle.reset_offset(topic, group, partition, offset))
    }

    /// [`AsyncNanoKafka::lag`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::lag`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn lag(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        self.call(self.handle.lag(topic, group))
    }

    /// [`AsyncNanoKafka::stats`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::stats`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn stats(&self) -> Result<BrokerStats> {
        self.call(self.handle.stats())
    }

    /// [`AsyncNanoKafka::crash_partition`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_partition`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_partition(&self, topic: &str, partition: u32) -> Result<()> {
        self.call(self.handle.crash_partition(topic, partition))
    }

    /// Syncs and closes every partition (clean-shutdown checkpoints), stops the actors and
    /// releases the data-directory lock before it returns. Idempotent; later calls fail with
    /// `BrokerStopped`. Dropping the last handle does the same, on any thread.
    ///
    /// # Errors
    /// `Io` when a partition could not be closed cleanly (it is scanned on the next open);
    /// `BlockingInActorContext` on an actix/tokio thread, where nothing is done (drop the
    /// handles there, or shut down from a plain thread).
    pub fn shutdown(&self) -> Result<()> {
        self.broker.shutdown()
    }

    /// [`AsyncNanoKafka::topic_ids`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::topic_ids`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn topic_ids(&self) -> Result<std::collections::BTreeMap<String, crate::types::TopicId>> {
        self.call(self.handle.topic_ids())
    }

    /// [`AsyncNanoKafka::describe_broker`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::describe_broker`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn describe_broker(&self) -> Result<crate::messages::BrokerDescription> {
        self.call(self.handle.describe_broker())
    }

    /// [`AsyncNanoKafka::crash_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_topic`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_topic(&self, topic: &str) -> Result<()> {
        self.call(self.handle.crash_topic(topic))
    }

    /// [`AsyncNanoKafka::crash_broker`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_broker`]; `BlockingInActorContext` on an actix/tokio thread.
    pub fn crash_broker(&self) -> Result<()> {
        self.call(self.handle.crash_broker())
    }

    /// [`AsyncNanoKafka::crash_group_coordinator`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::crash_group_coordinator`]; `BlockingInActorContext` on an
    /// actix/tokio thread.
    pub fn crash_group_coordinator(&self, topic: &str, group: &str) -> Result<()> {
        self.call(self.handle.crash_group_coordinator(topic, group))
    }

    /// [`AsyncNanoKafka::describe_topic`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::describe_topic`]; `BlockingInActorContext` on an actix/tokio
    /// thread.
    pub fn describe_topic(&self, topic: &str) -> Result<TopicConfig> {
        self.call(self.handle.describe_topic(topic))
    }
}
