//! Typed topics, [`Topic<T>`] and [`BlockingTopic<T>`]: a topic's name and its payload type
//! named once, and the payload type check that keeps a subscriber of the wrong type from
//! joining. The user-facing docs (an example, what the check catches) are on [`Topic`],
//! where rustdoc shows them.

use std::any::type_name;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::time::Duration;

use actix::Recipient;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::async_handle::{AsyncNanoKafka, ValueCodec};
use crate::config::TopicConfig;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::group::GroupOptions;
use crate::handle::NanoKafka;
use crate::messages::{Delivered, SubscribeOptions, Subscription};
use crate::stream::{RecordStream, StreamOptions};

#[cfg(feature = "schema-registry")]
mod bound;
use crate::types::{Delivery, Header, Record};

/// Typed topics: [`Topic<T>`] names a topic and the type of its payloads once, and every call
/// through it produces and consumes `T`. It is the first thing to reach for in an actix
/// service: [`AsyncNanoKafka::topic`] gives one (cheap, no I/O, `Clone`), and the untyped
/// calls of the handle stay for raw bytes and the cases below. [`BlockingTopic<T>`] is the
/// same for plain threads ([`NanoKafka::topic`]).
///
/// ```no_run
/// use actix::prelude::*;
/// use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
/// use nanokafka::{AsyncNanoKafka, Topic, TopicConfig};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Debug, Serialize, Deserialize)]
/// struct OrderPlaced {
///     id: u64,
///     total_cents: u64,
/// }
///
/// struct Billing;
///
/// impl Actor for Billing {
///     type Context = Context<Self>;
/// }
///
/// impl Handler<Delivered<OrderPlaced>> for Billing {
///     type Result = Ack;
///
///     fn handle(&mut self, batch: Delivered<OrderPlaced>, _: &mut Context<Self>) -> Ack {
///         for record in &batch.records {
///             println!("bill order {} for {}", record.value.id, record.value.total_cents);
///         }
///         Ack::Commit
///     }
/// }
///
/// # async fn run(bus: AsyncNanoKafka) -> nanokafka::Result<()> {
/// let orders: Topic<OrderPlaced> = bus.topic("orders");
/// orders.create(TopicConfig::default().partitions(4)).await?; // records OrderPlaced's name
/// orders.produce_keyed("customer-7", &OrderPlaced { id: 1, total_cents: 1250 }).await?;
///
/// let billing = Billing.start();
/// orders
///     .subscribe("billing", "billing-1", billing.recipient(), SubscribeOptions::default())
///     .await?;
///
/// // Or, without an actor: a Stream of records.
/// use futures::StreamExt;
/// let mut audit = orders.stream("audit", "audit-1").await?;
/// if let Some(record) = audit.next().await {
///     let record = record?;
///     audit.commit(&record).await?;
/// }
/// # Ok(())
/// # }
/// ```
///
/// # The payload type check
/// [`Topic::create`] records `std::any::type_name::<T>()` in the topic's config
/// ([`TopicConfig::payload_type`], persisted with it). The typed subscribers of a `Topic<T>`
/// ([`Topic::subscribe`], [`Topic::stream`], [`BlockingTopic::consumer`]) read the config
/// first, and when the topic records a type name other than `T`'s they fail with
/// [`Error::PayloadTypeMismatch`] and change nothing: no member joins. Without the check a
/// subscriber of the wrong type would join, take its partitions, and fail to decode every
/// record it is given.
///
/// What it does and does not catch:
/// * It compares **names only**, not fields: two types of the same path with different
///   fields pass, and a type renamed or moved to another module fails even when its fields
///   are the same. `type_name` is not guaranteed stable across compiler versions either.
///   When the name of the payload type changes (a rename, a move, a new version of the
///   type), record the new one: `alter_topic(name,
///   TopicChanges::default().payload_type(Some(type_name::<New>().into())))`, or clear it
///   with `payload_type(None)`.
/// * A subscriber that deliberately reads the payloads as another type says so with
///   [`Topic::accept_any_payload_type`]: a struct with a subset of the fields is legal
///   (payloads are MessagePack with field names, and fields the struct does not name are
///   ignored), as is an older or newer version of the type whose new fields are optional.
/// * Producers are not checked (producing is the same call whatever the topic records).
/// * The handle's own calls that take a topic name ([`AsyncNanoKafka::subscribe`],
///   [`AsyncNanoKafka::stream`], [`NanoKafka::consumer`], the polls) are not checked: they
///   are the way to read with any type. Raw access ([`AsyncNanoKafka::produce_raw`],
///   [`AsyncNanoKafka::poll_batch_raw`], the Kafka listener) never is.
/// * A topic created without a `Topic` (or before the check existed) records nothing, and
///   nothing is checked until its type is recorded with `alter_topic`.
/// * On the Kafka backend there is nowhere to record the type (Kafka's topic configs accept
///   its own keys only): nothing is recorded and nothing checked there.
pub struct Topic<T> {
    handle: AsyncNanoKafka,
    name: String,
    /// Whether typed subscribers check the topic's recorded payload type.
    check_payload_type: bool,
    /// The values' format: MessagePack, or the Avro schema the topic is bound to.
    codec: ValueCodec,
    payload: PhantomData<fn() -> T>,
}

/// A topic whose payloads are `T`, on a blocking [`NanoKafka`]: [`Topic`]'s twin for plain
/// threads, with a [`Consumer`] instead of a subscription or stream. The same payload type
/// check applies (see the docs of [`Topic`]).
pub struct BlockingTopic<T> {
    handle: NanoKafka,
    name: String,
    check_payload_type: bool,
    codec: ValueCodec,
    payload: PhantomData<fn() -> T>,
}

impl AsyncNanoKafka {
    /// The topic `name` with payloads of type `T`. No I/O: the topic need not exist yet
    /// (create it with [`Topic::create`]).
    pub fn topic<T>(&self, name: impl Into<String>) -> Topic<T> {
        Topic {
            handle: self.clone(),
            name: name.into(),
            check_payload_type: true,
            codec: ValueCodec::MessagePack,
            payload: PhantomData,
        }
    }
}

impl NanoKafka {
    /// The topic `name` with payloads of type `T`, with blocking calls. No I/O: the topic
    /// need not exist yet (create it with [`BlockingTopic::create`]).
    pub fn topic<T>(&self, name: impl Into<String>) -> BlockingTopic<T> {
        BlockingTopic {
            handle: self.clone(),
            name: name.into(),
            check_payload_type: true,
            codec: ValueCodec::MessagePack,
            payload: PhantomData,
        }
    }
}

/// `Ok` when `config` records no payload type, or `T`'s.
///
/// # Errors
/// `PayloadTypeMismatch` when it records another.
fn check_payload_type<T>(topic: &str, config: &TopicConfig) -> Result<()> {
    let requested = type_name::<T>();
    match config.payload_type.as_deref() {
        Some(recorded) if recorded != requested => Err(Error::PayloadTypeMismatch {
            topic: topic.to_owned(),
            recorded: recorded.to_owned(),
            requested: requested.to_owned(),
        }),
        _ => Ok(()),
    }
}

impl<T> Clone for Topic<T> {
    fn clone(&self) -> Self {
        Topic {
            handle: self.handle.clone(),
            name: self.name.clone(),
            check_payload_type: self.check_payload_type,
            codec: self.codec.clone(),
            payload: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for Topic<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topic")
            .field("name", &self.name)
            .field("payload", &type_name::<T>())
            .field("check_payload_type", &self.check_payload_type)
            .field("codec", &self.codec)
            .finish()
    }
}

impl<T> Topic<T> {
    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The handle the topic's calls go through.
    pub(crate) fn handle(&self) -> &AsyncNanoKafka {
        &self.handle
    }

    /// The same topic, whose subscribers read the payloads as `T` whatever type the topic
    /// records: for a struct with a subset of the fields, or another version of the type.
    pub fn accept_any_payload_type(self) -> Self {
        Topic {
            check_payload_type: false,
            ..self
        }
    }

    /// Creates the topic with `config`, recording `T`'s type name as its payload type
    /// (whatever `config.payload_type` says).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::create_topic`]: `TopicExists`, `InvalidTopicName`,
    /// `InvalidConfig`, `Io`, `BrokerStopped`.
    pub async fn create(&self, config: TopicConfig) -> Result<()> {
        let config = config.payload_type(type_name::<T>());
        self.handle.create_topic(&self.name, config).await
    }

    /// Per-partition lag of `group` on this topic.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::lag`].
    pub async fn lag(&self, group: &str) -> Result<BTreeMap<u32, u64>> {
        self.handle.lag(&self.name, group).await
    }

    /// `Ok` when the check is off, the topic records no payload type, or `T`'s.
    ///
    /// # Errors
    /// `PayloadTypeMismatch`; as [`AsyncNanoKafka::describe_topic`].
    pub async fn check_payload_type(&self) -> Result<()> {
        if !self.check_payload_type {
            return Ok(());
        }
        let config = self.handle.describe_topic(&self.name).await?;
        check_payload_type::<T>(&self.name, &config)
    }
}

impl<T: Serialize> Topic<T> {
    /// Produces `value` without a key (round-robin over partitions).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce`].
    pub async fn produce(&self, value: &T) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(None, value, &[]).await;
        }
        self.handle.produce(&self.name, value).await
    }

    /// Produces `value` with a key (Kafka's partitioner picks the partition).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_keyed`].
    pub async fn produce_keyed(&self, key: impl AsRef<[u8]>, value: &T) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(Some(key.as_ref()), value, &[]).await;
        }
        self.handle.produce_keyed(&self.name, key, value).await
    }

    /// Produces `value` with headers, and a key when given.
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::produce_with_headers`].
    pub async fn produce_with_headers(
        &self,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(key, value, headers).await;
        }
        self.handle
            .produce_with_headers(&self.name, key, value, headers)
            .await
    }

    /// `value` in the topic's format (a bound topic's), produced as bytes.
    async fn produce_encoded(
        &self,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        let bytes = self.codec.encode(value)?;
        self.handle
            .produce_raw_with_headers(&self.name, key, &bytes, headers)
            .await
    }
}

impl<T: DeserializeOwned + Send + 'static> Topic<T> {
    /// Subscribes `recipient` (an actor) as `member` of `group`: records are pushed as
    /// [`Delivered<T>`] batches and committed by its [`crate::messages::Ack`]; see
    /// [`AsyncNanoKafka::subscribe`]. The payload type is checked first.
    ///
    /// # Errors
    /// `PayloadTypeMismatch` (nothing joined), as [`AsyncNanoKafka::describe_topic`] and
    /// [`crate::messages::Subscribe`].
    pub async fn subscribe(
        &self,
        group: &str,
        member: &str,
        recipient: Recipient<Delivered<T>>,
        options: SubscribeOptions,
    ) -> Result<Subscription> {
        if !self.codec.is_message_pack() {
            return Err(Error::Unsupported {
                op: "subscribe (an actor subscription) on a topic bound to a schema: use \
                     stream() or consumer(), which decode by schema id,",
                backend: "embedded",
            });
        }
        self.check_payload_type().await?;
        self.handle
            .subscribe(&self.name, group, member, recipient, options)
            .await
    }

    /// Up to `max_records` consecutive records of one partition from `group`'s committed
    /// offset, waiting up to `timeout` for the first: [`AsyncNanoKafka::poll_batch`] in the
    /// topic's format (MessagePack, or the bound schema's). The payload type is not checked
    /// (a poll joins no group).
    ///
    /// # Errors
    /// As [`AsyncNanoKafka::poll_batch`].
    pub async fn poll_batch(
        &self,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        let names = (self.name.as_str(), group, member);
        self.handle
            .poll_batch_with(names, max_records, timeout, &self.codec)
            .await
    }

    /// Joins `group` as `member` and returns its records as a [`RecordStream`], with the
    /// default [`StreamOptions`]. The payload type is checked first.
    ///
    /// # Errors
    /// `PayloadTypeMismatch` (nothing joined), as [`AsyncNanoKafka::describe_topic`] and
    /// [`AsyncNanoKafka::stream`].
    pub async fn stream(&self, group: &str, member: &str) -> Result<RecordStream<T>> {
        self.stream_with(group, member, StreamOptions::default())
            .await
    }

    /// As [`Topic::stream`], with [`StreamOptions`].
    ///
    /// # Errors
    /// As [`Topic::stream`] and [`AsyncNanoKafka::stream_with`].
    pub async fn stream_with(
        &self,
        group: &str,
        member: &str,
        options: StreamOptions,
    ) -> Result<RecordStream<T>> {
        self.check_payload_type().await?;
        let stream = self
            .handle
            .stream_with(&self.name, group, member, options)
            .await?;
        Ok(stream.with_codec(self.codec.clone()))
    }
}

impl<T> Clone for BlockingTopic<T> {
    fn clone(&self) -> Self {
        BlockingTopic {
            handle: self.handle.clone(),
            name: self.name.clone(),
            check_payload_type: self.check_payload_type,
            codec: self.codec.clone(),
            payload: PhantomData,
        }
    }
}

impl<T> std::fmt::Debug for BlockingTopic<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingTopic")
            .field("name", &self.name)
            .field("payload", &type_name::<T>())
            .field("check_payload_type", &self.check_payload_type)
            .field("codec", &self.codec)
            .finish()
    }
}

impl<T> BlockingTopic<T> {
    /// The topic's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The same topic, whose consumers read the payloads as `T` whatever type the topic
    /// records (see [`Topic::accept_any_payload_type`]).
    pub fn accept_any_payload_type(self) -> Self {
        BlockingTopic {
            check_payload_type: false,
            ..self
        }
    }

    /// Creates the topic with `config`, recording `T`'s type name as its payload type.
    ///
    /// # Errors
    /// As [`NanoKafka::create_topic`].
    pub fn create(&self, config: TopicConfig) -> Result<()> {
        let config = config.payload_type(type_name::<T>());
        self.handle.create_topic(&self.name, config)
    }

    /// Per-partition lag of `group` on this topic.
    ///
    /// # Errors
    /// As [`NanoKafka::lag`].
    pub fn lag(&self, group: &str) -> Result<BTreeMap<u32, u64>> {
        self.handle.lag(&self.name, group)
    }

    /// `Ok` when the check is off, the topic records no payload type, or `T`'s.
    ///
    /// # Errors
    /// `PayloadTypeMismatch`; as [`NanoKafka::describe_topic`].
    pub fn check_payload_type(&self) -> Result<()> {
        if !self.check_payload_type {
            return Ok(());
        }
        let config = self.handle.describe_topic(&self.name)?;
        check_payload_type::<T>(&self.name, &config)
    }
}

impl<T: Serialize> BlockingTopic<T> {
    /// Produces `value` without a key (round-robin over partitions).
    ///
    /// # Errors
    /// As [`NanoKafka::produce`].
    pub fn produce(&self, value: &T) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(None, value, &[]);
        }
        self.handle.produce(&self.name, value)
    }

    /// Produces `value` with a key (Kafka's partitioner picks the partition).
    ///
    /// # Errors
    /// As [`NanoKafka::produce_keyed`].
    pub fn produce_keyed(&self, key: impl AsRef<[u8]>, value: &T) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(Some(key.as_ref()), value, &[]);
        }
        self.handle.produce_keyed(&self.name, key, value)
    }

    /// Produces `value` with headers, and a key when given.
    ///
    /// # Errors
    /// As [`NanoKafka::produce_with_headers`].
    pub fn produce_with_headers(
        &self,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        if !self.codec.is_message_pack() {
            return self.produce_encoded(key, value, headers);
        }
        self.handle
            .produce_with_headers(&self.name, key, value, headers)
    }

    /// `value` in the topic's format (a bound topic's), produced as bytes.
    fn produce_encoded(
        &self,
        key: Option<&[u8]>,
        value: &T,
        headers: &[Header],
    ) -> Result<Delivery> {
        let bytes = self.codec.encode(value)?;
        self.handle
            .produce_raw_with_headers(&self.name, key, &bytes, headers)
    }
}

impl<T: DeserializeOwned> BlockingTopic<T> {
    /// Joins `group` as `member` and returns a [`Consumer`] of `T`. The payload type is
    /// checked first.
    ///
    /// # Errors
    /// `PayloadTypeMismatch` (nothing joined), as [`NanoKafka::describe_topic`] and
    /// [`NanoKafka::consumer`].
    pub fn consumer(&self, group: &str, member: &str) -> Result<Consumer<T>> {
        self.consumer_with(group, member, GroupOptions::default())
    }

    /// As [`BlockingTopic::consumer`], with the group's options.
    ///
    /// # Errors
    /// As [`BlockingTopic::consumer`] and [`NanoKafka::consumer_with`].
    pub fn consumer_with(
        &self,
        group: &str,
        member: &str,
        options: impl Into<GroupOptions>,
    ) -> Result<Consumer<T>> {
        self.check_payload_type()?;
        let consumer = self
            .handle
            .consumer_with(&self.name, group, member, options)?;
        Ok(consumer.with_codec(self.codec.clone()))
    }

    /// [`Topic::poll_batch`], blocking this thread until it answers.
    ///
    /// # Errors
    /// As [`NanoKafka::poll_batch`].
    pub fn poll_batch(
        &self,
        group: &str,
        member: &str,
        max_records: usize,
        timeout: Duration,
    ) -> Result<Vec<Record<T>>> {
        let names = (self.name.as_str(), group, member);
        let codec = &self.codec;
        (self.handle).call_async(
            |h| h.poll_batch_with(names, max_records, timeout, codec),
            timeout,
        )
    }
}
