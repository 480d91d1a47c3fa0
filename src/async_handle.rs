//! `AsyncNanoKafka`: the API for code already inside actix/tokio. Every method is one
//! message to the `BrokerActor` (see [`crate::messages`]); typed methods encode and decode
//! payloads with rmp-serde. Cheap to clone.

mod groups;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::actors::broker::BrokerActor;
use crate::actors::coordinator::{ConsumerPollGroup, FetchedBatch, PollGroup, PollPause};
use crate::actors::lane::{append_routed, Placed};
use crate::actors::partition::CommitOffset;
use crate::actors::topic::{
    check_max_records, ConsumerPollFetched, GetGroupRoute, GetRoute, PollFetched,
};
use crate::config::{TopicChanges, TopicConfig};
use crate::error::{Error, Result};
use crate::group::{Assignment, GroupOptions};
use crate::messages::{
    AlterTopic, BrokerDescription, Commit, ConsumerPoll, CrashBroker, CrashGroupCoordinator,
    CrashPartition, CrashTopic, CreateTopic, DeleteTopic, Delivered, DescribeBroker, FencedCommit,
    GetStats, GetTopicConfig, Heartbeat, JoinGroup, KafkaAppend, Lag, LeaveGroup, ListTopics,
    OffsetForTimestamp, Poll, ProduceBatch, ProduceKafkaBatch, Subscribe, SubscribeOptions,
    Subscription,
};
use crate::metrics::listener::ListenerMetrics;
use crate::partition::{Fetched, ProduceRecord};
use crate::routing::route as route_batch;
use crate::storage::RecordBatch;
use crate::types::{Backend, BrokerStats, ConsumerBatch, Delivery, Header, Record};

mod lifecycle;
mod routes;
mod wire;
pub(crate) use lifecycle::{off_runtime, BrokerLink, RunningBroker};
use routes::{ProducePath, RouteCache};

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
    addr: Addr<BrokerActor>,
    /// Topic → how its produces travel; shared by clones.
    routes: RouteCache,
    /// Each caller of this handle waits for a produce's answer before its next produce (the
    /// blocking handle's): a known route is used at once, as no earlier produce of the same
    /// caller can still be on its way through the broker.
    sequential: bool,
    /// The Kafka listener's counters, for `stats()`, when the broker was built with one.
    listener_metrics: Option<Arc<ListenerMetrics>>,
    /// The Kafka backend, when the handle was built with `kafka_bootstrap`: every call goes
    /// there, and `addr` is a closed mailbox.
    #[cfg(feature = "kafka")]
    kafka: Option<Arc<crate::kafka::KafkaBackend>>,
    /// Whether this handle keeps the broker running, and how `shutdown` reaches it.
    link: BrokerLink,
}

/// On the Kafka backend, answers with `$body` (where `$k` is the backend) instead of the
/// broker actor, or `BrokerStopped` once the handle was shut down; the embedded code after
/// it is never reached there.
macro_rules! on_kafka {
    ($self:ident, |$k:ident| $body:expr) => {
        #[cfg(feature = "kafka")]
        if let Some($k) = $self.kafka.as_deref() {
            $k.check_open()?;
            return $body;
        }
    };
}

impl From<Addr<BrokerActor>> for AsyncNanoKafka {
    fn from(addr: Addr<BrokerActor>) -> Self {
        AsyncNanoKafka {
            addr,
            routes: RouteCache::default(),
            sequential: false,
            listener_metrics: None,
            #[cfg(feature = "kafka")]
            kafka: None,
            link: BrokerLink::default(),
        }
    }
}

impl AsyncNanoKafka {
    /// A handle whose calls go to a Kafka cluster. Its `addr` is the address of a broker
    /// actor that never runs: messages sent there fail with a closed mailbox.
    #[cfg(feature = "kafka")]
    pub(crate) fn kafka(backend: Arc<crate::kafka::KafkaBackend>) -> Self {
        let never_started = Context::<BrokerActor>::new();
        AsyncNanoKafka {
            kafka: Some(backend),
            ..AsyncNanoKafka::from(never_started.address())
        }
    }

    /// The Kafka backend of this handle, if it has one.
    #[cfg(feature = "kafka")]
    pub(crate) fn kafka_backend(&self) -> Option<&Arc<crate::kafka::KafkaBackend>> {
        self.kafka.as_ref()
    }

    /// Which backend serves this handle's calls.
    pub fn backend(&self) -> Backend {
        #[cfg(feature = "kafka")]
        if self.kafka.is_some() {
            return Backend::Kafka;
        }
        Backend::Embedded
    }

    /// The same handle for callers that never have two produces in flight (see `sequential`).
    pub(crate) fn for_sequential_callers(&self) -> AsyncNanoKafka {
        AsyncNanoKafka {
            sequential: true,
            ..self.clone()
        }
    }

    /// The same handle, reporting the listener's counters in `stats()`.
    pub(crate) fn with_listener_metrics(self, metrics: Option<Arc<ListenerMetrics>>) -> Self {
        AsyncNanoKafka {
            listener_metrics: metrics,
            ..self
        }
    }

    /// The same handle for any caller (pipelined produces keep their order).
    pub(crate) fn for_any_caller(&self) -> AsyncNanoKafka {
        AsyncNanoKafka {
            sequential: false,
            ..self.clone()
        }
    }

    /// Learns `topic`'s direct route now, so that its first produces need not go through the
    /// broker (used once a topic is known to exist). A no-op when the route is known or a
    /// produce of this handle is on its way through the broker.
    pub(crate) async fn learn_route(&self, topic: &str) {
        let Ok(route) = self
            .ask(GetRoute {
                topic: topic.to_owned(),
            })
            .await
        else {
            return;
        };
        self.routes.learn(topic, route);
    }

    /// The broker actor, for sending [`crate::messages`] directly. Embedded backend only: on
    /// the Kafka backend no broker actor runs, and every message sent here fails with a
    /// closed mailbox (use this handle's methods, which both backends serve).
    pub fn addr(&self) -> &Addr<BrokerActor> {
        &self.addr
    }

    async fn ask<M, T>(&self, msg: M) -> Result<T>
    where
        M: Message<Result = Result<T>> + Send + 'static,
        T: Send + 'static,
        BrokerActor: Handler<M>,
    {
        self.addr
            .send(msg)
            .await
            .map_err(|_| Error::BrokerStopped)?
    }

    /// Creates a topic with `config`; it exists on disk when this returns.
    ///
    /// # Errors
    /// `TopicExists`, `InvalidTopicName`, `InvalidConfig`, `Io`, `BrokerStopped`.
    pub async fn create_topic(&self, topic: &str, config: TopicConfig) -> Result<()> {
        on_kafka!(self, |k| k.create_topic(topic, &config).await);
        self.ask(CreateTopic {
            topic: topic.to_owned(),
            config,
        })
        .await?;
        self.learn_route(topic).await;
        Ok(())
    }

    /// Deletes a topic with its records, committed offsets and groups: see
    /// [`DeleteTopic`](crate::messages::DeleteTopic). A topic of the same name can then be
    /// created, empty; this handle (and every other) produces to that one.
    ///
    /// # Errors
    /// As [`DeleteTopic`](crate::messages::DeleteTopic): `UnknownTopic`, `Io`,
    /// `BrokerStopped`.
    pub async fn delete_topic(&self, topic: &str) -> Result<()> {
        on_kafka!(self, |k| k.delete_topic(topic).await);
        self.ask(DeleteTopic {
            topic: topic.to_owned(),
        })
        .await?;
        self.routes.forget(topic);
        Ok(())
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
        on_kafka!(self, |k| k.alter_topic(topic, &changes).await);
        self.alter_embedded(topic, changes, false).await
    }

    /// [`AsyncNanoKafka::alter_topic`] on the embedded broker, or with `validate_only` only
    /// checked (for the listener's CreatePartitions and IncrementalAlterConfigs).
    pub(crate) async fn alter_embedded(
        &self,
        topic: &str,
        changes: TopicChanges,
        validate_only: bool,
    ) -> Result<TopicConfig> {
        let config = self
            .ask(AlterTopic {
                topic: topic.to_owned(),
                changes,
                validate_only,
            })
            .await?;
        self.routes.forget(topic);
        Ok(config)
    }

    /// The broker-wide settings (data directory, size limits).
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub async fn describe_broker(&self) -> Result<BrokerDescription> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("describe_broker")));
        self.ask(DescribeBroker).await
    }

    /// Every topic and its config, by name.
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub async fn list_topics(&self) -> Result<BTreeMap<String, TopicConfig>> {
        on_kafka!(self, |k| k.list_topics().await);
        self.ask(ListTopics).await
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
    /// As [`ProduceKafkaBatch`](crate::messages::ProduceKafkaBatch).
    pub async fn produce_kafka_batch(
        &self,
        topic: &str,
        partition: u32,
        batch: Vec<u8>,
    ) -> Result<KafkaAppend> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported(
            "produce_kafka_batch"
        )));
        self.ask(ProduceKafkaBatch {
            topic: topic.to_owned(),
            partition,
            batch,
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
        on_kafka!(self, |k| k
            .offset_for_timestamp(topic, partition, timestamp_ms)
            .await);
        self.ask(OffsetForTimestamp {
            topic: topic.to_owned(),
            partition,
            timestamp_ms,
        })
        .await
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

    /// [`AsyncNanoKafka::produce_batch`], answered with where the records went.
    ///
    /// Its future is small, and the direct route allocates nothing past the batch and the
    /// lane's answer: a caller with hundreds of produces in flight moves and keeps each of
    /// them. So the rare paths (the Kafka backend, a route not learned yet) are boxed.
    async fn produce_placed(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
    ) -> Result<Placed> {
        on_kafka!(self, |k| Box::pin(
            k.produce_batch(topic, partition, &batch)
        )
        .await
        .map(Placed::Each));
        // Nothing is awaited before the records are enqueued: that keeps the call order.
        match self.routes.path(topic, self.sequential) {
            ProducePath::Direct(route) => {
                let limits = (route.lanes.len() as u32, route.limits);
                let next = || route.next_keyless.fetch_add(1, Ordering::Relaxed);
                let routes = route_batch(topic, limits, partition, &batch, next)?;
                let appended = append_routed(&route.lanes, batch, routes);
                // The blocking handle spins in its own wait; an async caller's task is kept
                // awake for a quick answer (see `Hurry`).
                match self.sequential {
                    true => appended.await,
                    false => crate::spin::Hurry::new(appended).await,
                }
            }
            ProducePath::ViaBroker { ask_route } => {
                let via_broker = self.produce_via_broker(topic, partition, batch, ask_route);
                Box::pin(via_broker).await.map(Placed::Each)
            }
        }
    }

    /// A produce sent to the broker's actor, for a topic whose route this handle has not
    /// learned yet (it asks for it afterwards when `ask_route`).
    async fn produce_via_broker(
        &self,
        topic: &str,
        partition: Option<u32>,
        batch: RecordBatch,
        ask_route: bool,
    ) -> Result<Vec<Delivery>> {
        let produce = ProduceBatch {
            topic: topic.to_owned(),
            partition,
            batch,
        };
        let result = self
            .addr
            .send(produce)
            .await
            .map_err(|_| Error::BrokerStopped)
            .and_then(|r| r);
        let learned = match ask_route {
            true => self
                .ask(GetRoute {
                    topic: topic.to_owned(),
                })
                .await
                .ok(),
            false => None,
        };
        self.routes.finish_via_broker(topic, ask_route, learned);
        result
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
        on_kafka!(self, |k| k
            .join_group(topic, group, member, options.into())
            .await);
        self.ask(JoinGroup {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            options: options.into(),
        })
        .await
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
        // As `on_kafka!`, with the backend itself: the subscription keeps it for dead letters.
        #[cfg(feature = "kafka")]
        if let Some(k) = self.kafka.clone() {
            k.check_open()?;
            let names = (topic, group, member);
            return crate::kafka::subscription::subscribe(k, names, recipient, options).await;
        }
        self.ask(Subscribe {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
            recipient,
            options,
        })
        .await
    }

    /// The `Consumer` handle's poll; see [`crate::messages::ConsumerPoll`].
    ///
    /// # Errors
    /// As [`crate::messages::ConsumerPoll`].
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
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("consumer_poll")));
        if let Some((route, coordinator)) = self.routes.poll_target(&poll.topic, &poll.group) {
            check_max_records(poll.max_records)?;
            let request = coordinator.send(ConsumerPollGroup {
                member: poll.member.clone(),
                generation: poll.generation,
                positions: poll.positions.clone(),
                max_records: poll.max_records,
                wait: poll.wait,
                // A blocking `Consumer`'s long poll: woken early, as in `poll_fetched`.
                pause: PollPause {
                    early_wake: poll.wait.and_then(|_| crate::wait::long_poll_waker()),
                    ..PollPause::default()
                },
            });
            match request.await {
                Ok(batch) => return batch,
                // As in `poll_fetched`.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        let (topic, group) = (poll.topic.clone(), poll.group.clone());
        let batch = self.ask(ConsumerPollFetched(poll)).await?;
        self.learn_group(&topic, &group).await;
        Ok(batch)
    }

    /// A commit fenced by generation and ownership; see [`crate::messages::FencedCommit`].
    ///
    /// # Errors
    /// As [`crate::messages::FencedCommit`].
    pub async fn fenced_commit(&self, commit: FencedCommit) -> Result<()> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("fenced_commit")));
        self.ask(commit).await
    }

    /// Leaves `group` (a rebalance).
    ///
    /// # Errors
    /// `UnknownMember`, `UnknownTopic`, `BrokerStopped`.
    pub async fn leave_group(&self, topic: &str, group: &str, member: &str) -> Result<()> {
        on_kafka!(self, |k| k.leave_group(topic, group, member).await);
        self.ask(LeaveGroup {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
        })
        .await
    }

    /// A sign of life; returns the member's current assignment.
    ///
    /// # Errors
    /// `UnknownMember` (evicted or never joined: join again), `UnknownTopic`, `BrokerStopped`.
    pub async fn heartbeat(&self, topic: &str, group: &str, member: &str) -> Result<Assignment> {
        on_kafka!(self, |k| k.heartbeat(topic, group, member).await);
        self.ask(Heartbeat {
            topic: topic.to_owned(),
            group: group.to_owned(),
            member: member.to_owned(),
        })
        .await
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
        on_kafka!(self, |k| k
            .poll_batch_raw((topic, group, member), max_records, timeout)
            .await);
        let wait = (!timeout.is_zero()).then_some(timeout);
        let fetched = self
            .poll_fetched(topic, group, member, max_records, wait)
            .await?;
        Ok(fetched.map_or_else(Vec::new, |f| f.to_raw()))
    }

    /// A group poll answered with the records in their read buffer: the records are copied
    /// or decoded here, on the caller's thread, not on the partition's.
    async fn poll_fetched(
        &self,
        topic: &str,
        group: &str,
        member: &str,
        max_records: usize,
        wait: Option<Duration>,
    ) -> Result<Option<Fetched>> {
        if let Some((route, coordinator)) = self.routes.poll_target(topic, group) {
            check_max_records(max_records)?;
            let poll = coordinator.send(PollGroup {
                member: member.to_owned(),
                max_records,
                wait,
                // A blocking caller's long poll: its thread is woken as soon as an append
                // reaches one of its partitions.
                early_wake: wait.and_then(|_| crate::wait::long_poll_waker()),
            });
            match poll.await {
                Ok(fetched) => return fetched,
                // The coordinator stopped: its topic was deleted (the route is stale now, and
                // the broker answers for the topic's successor) or the broker stopped.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        let fetched = self
            .ask(PollFetched(Poll {
                topic: topic.to_owned(),
                group: group.to_owned(),
                member: member.to_owned(),
                max_records,
                wait,
            }))
            .await?;
        self.learn_group(topic, group).await;
        Ok(fetched)
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
        on_kafka!(self, |k| {
            let records = k
                .poll_batch_raw((topic, group, member), max_records, timeout)
                .await?;
            records.into_iter().map(|r| r.decode(topic)).collect()
        });
        let wait = (!timeout.is_zero()).then_some(timeout);
        let fetched = self
            .poll_fetched(topic, group, member, max_records, wait)
            .await?;
        fetched.map_or_else(|| Ok(Vec::new()), |f| f.decode(topic))
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
        on_kafka!(self, |k| k.commit(topic, group, partition, offset).await);
        if let Some((route, target)) = self.routes.commit_target(topic, group, partition) {
            let commit = target.send(CommitOffset {
                group: group.into(),
                offset,
            });
            match commit.await {
                Ok(result) => return result,
                // The partition closed: the topic was deleted (the route is stale now, and
                // the broker answers `UnknownTopic`) or the broker stopped.
                Err(_) if route.is_live() => return Err(Error::BrokerStopped),
                Err(_) => {}
            }
        }
        self.ask(Commit {
            topic: topic.to_owned(),
            group: group.to_owned(),
            partition,
            offset,
        })
        .await?;
        self.learn_group(topic, group).await;
        Ok(())
    }

    /// Learns `group`'s coordinator on `topic` once the group is known to exist there (a
    /// request for it through the broker succeeded), so that its next polls and commits
    /// take the direct route. A no-op when it is known or the topic's route is not.
    async fn learn_group(&self, topic: &str, group: &str) {
        let Some(route) = self.routes.lacking_group(topic, group) else {
            return;
        };
        let asked = self.ask(GetGroupRoute {
            topic: topic.to_owned(),
            group: group.to_owned(),
        });
        if let Ok(coordinator) = asked.await {
            route.learn_group(group, coordinator);
        }
    }

    /// Per-partition lag of `group`: `log end - max(committed, log start)`.
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownGroup`, `BrokerStopped`.
    pub async fn lag(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        on_kafka!(self, |k| k.lag(topic, group).await);
        self.ask(Lag {
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
        .await
    }

    /// Partitions, groups, lag and restarts of every topic.
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub async fn stats(&self) -> Result<BrokerStats> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("stats")));
        let mut stats = self.ask(GetStats).await?;
        stats.listener = self.listener_metrics.as_ref().map(|m| m.snapshot());
        Ok(stats)
    }

    /// Fault injection: crash a partition's actor (it restarts from disk).
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownPartition`.
    pub async fn crash_partition(&self, topic: &str, partition: u32) -> Result<()> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("crash_partition")));
        self.ask(CrashPartition {
            topic: topic.to_owned(),
            partition,
        })
        .await
    }

    /// Fault injection: crash a topic's actor (it restarts with its state).
    ///
    /// # Errors
    /// `UnknownTopic`.
    pub async fn crash_topic(&self, topic: &str) -> Result<()> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("crash_topic")));
        self.ask(CrashTopic {
            topic: topic.to_owned(),
        })
        .await
    }

    /// Fault injection: crash the broker actor (it restarts with its state).
    ///
    /// # Errors
    /// `BrokerStopped`.
    pub async fn crash_broker(&self) -> Result<()> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported("crash_broker")));
        self.ask(CrashBroker).await
    }

    /// Fault injection: crash a group's coordinator (memberships reset).
    ///
    /// # Errors
    /// `UnknownTopic`, `UnknownGroup`.
    pub async fn crash_group_coordinator(&self, topic: &str, group: &str) -> Result<()> {
        on_kafka!(self, |_k| Err(crate::kafka::unsupported(
            "crash_group_coordinator"
        )));
        self.ask(CrashGroupCoordinator {
            topic: topic.to_owned(),
            group: group.to_owned(),
        })
        .await
    }

    /// The broker actor behind a [`crate::BrokerRef`], whose `request` answers one flat
    /// `Result`. Embedded backend only, as [`AsyncNanoKafka::addr`]: on the Kafka backend
    /// every request answers `BrokerStopped`.
    pub fn broker_ref(&self) -> crate::BrokerRef {
        crate::BrokerRef::new(self.addr.clone())
    }

    /// One topic's config, as [`AsyncNanoKafka::list_topics`] reports it, without copying
    /// every other topic's. On the Kafka backend it is taken from `list_topics` (Kafka keeps
    /// no `payload_type`: it reads `None` there).
    ///
    /// # Errors
    /// `UnknownTopic`, `BrokerStopped`.
    pub async fn describe_topic(&self, topic: &str) -> Result<TopicConfig> {
        on_kafka!(self, |k| k.list_topics().await?.remove(topic).ok_or_else(
            || {
                Error::UnknownTopic {
                    topic: topic.to_owned(),
                }
            }
        ));
        self.ask(GetTopicConfig {
            topic: topic.to_owned(),
        })
        .await
    }
}
