//! Topics and offsets on the Kafka backend: create, delete and list topics; a group's lag;
//! the offset of a timestamp.
//!
//! A topic is created with every setting of its [`TopicConfig`] that Kafka has, stated
//! explicitly (`retention.ms`/`retention.bytes` `-1` for "keep everything", the segment
//! size, the timestamp type), so that it keeps what the application asked for rather than
//! the cluster's defaults (Kafka's own default retention is 7 days). The replication factor
//! is the cluster's default (`-1`). The settings Kafka does not have (`max_size` with its
//! `backpressure`, and `retention_size`, retention by record count) are logged as ignored.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{blocking, kafka_error, topic_error, KafkaBackend};
use crate::config::TopicConfig;
use crate::error::{Error, Result};
use crate::group::GroupOptions;
use crate::listener::topic_configs;

impl KafkaBackend {
    fn admin_options(&self) -> AdminOptions {
        AdminOptions::new().operation_timeout(Some(self.config.request_timeout))
    }

    /// Creates `topic` with `config`'s partitions and Kafka-expressible settings.
    ///
    /// # Errors
    /// `InvalidConfig` (checked as on the embedded broker), `TopicExists`, `Kafka`.
    pub(crate) async fn create_topic(&self, topic: &str, config: &TopicConfig) -> Result<()> {
        config.validate()?;
        crate::storage::data_dir::validate_topic_name(topic)?;
        if config.max_size.is_some() || config.retention_size.is_some() {
            tracing::warn!(
                topic,
                max_size = ?config.max_size,
                retention_size = ?config.retention_size,
                "Kafka has no max_size or retention by record count: ignored for this topic"
            );
        }
        let entries: Vec<(&str, String)> = topic_configs::describe(config)
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect();
        let partitions = i32::try_from(config.partitions).unwrap_or(i32::MAX);
        let new = entries.iter().fold(
            NewTopic::new(topic, partitions, TopicReplication::Fixed(-1)),
            |new, (name, value)| new.set(name, value),
        );
        let results = self
            .admin
            .create_topics([&new], &self.admin_options())
            .await
            .map_err(|e| topic_error("create topic", topic, e))?;
        match results.into_iter().next() {
            Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Err(Error::TopicExists {
                topic: topic.to_owned(),
            }),
            Some(Err((_, code))) => Err(Error::Kafka {
                op: "create topic",
                reason: format!("{topic}: {code}"),
            }),
            _ => Ok(()),
        }
    }

    /// Deletes `topic`.
    ///
    /// # Errors
    /// `UnknownTopic`, `Kafka`.
    pub(crate) async fn delete_topic(&self, topic: &str) -> Result<()> {
        let results = self
            .admin
            .delete_topics(&[topic], &self.admin_options())
            .await
            .map_err(|e| topic_error("delete topic", topic, e))?;
        match results.into_iter().next() {
            Some(Err((_, RDKafkaErrorCode::UnknownTopicOrPartition))) => Err(Error::UnknownTopic {
                topic: topic.to_owned(),
            }),
            Some(Err((_, code))) => Err(Error::Kafka {
                op: "delete topic",
                reason: format!("{topic}: {code}"),
            }),
            _ => Ok(()),
        }
    }

    /// Every topic (Kafka's internal `__` topics left out) with its partition count; the
    /// other fields are `TopicConfig`'s defaults (reading Kafka's configs would need
    /// DescribeConfigs per topic).
    ///
    /// # Errors
    /// `Kafka` when the cluster does not answer within the request timeout.
    pub(crate) async fn list_topics(&self) -> Result<BTreeMap<String, TopicConfig>> {
        let producer = self.producer.clone();
        let timeout = self.config.request_timeout;
        blocking(move || {
            use rdkafka::producer::Producer;
            let metadata = producer
                .client()
                .fetch_metadata(None, timeout)
                .map_err(|e| kafka_error("list topics", e))?;
            Ok(metadata
                .topics()
                .iter()
                .filter(|t| !t.name().starts_with("__") && t.error().is_none())
                .map(|t| {
                    let partitions = u32::try_from(t.partitions().len()).unwrap_or(0);
                    (
                        t.name().to_owned(),
                        TopicConfig::default().partitions(partitions),
                    )
                })
                .collect())
        })
        .await
    }

    /// A consumer of `group` that never joins it: for reading the group's committed
    /// offsets and the partitions' watermarks.
    pub(crate) fn group_reader(&self, group: &str) -> Result<BaseConsumer> {
        self.config
            .consumer(group, "nanokafka-admin", GroupOptions::default())
            .create()
            .map_err(|e| kafka_error("create consumer", e))
    }

    /// `group`'s lag per partition of `topic`: the high watermark minus the committed offset
    /// (or minus the log start offset, before the group's first commit there).
    ///
    /// # Errors
    /// `UnknownTopic`, `Kafka`.
    pub(crate) async fn lag(&self, topic: &str, group: &str) -> Result<BTreeMap<u32, u64>> {
        let reader = self.group_reader(group)?;
        let (topic, timeout) = (topic.to_owned(), self.config.request_timeout);
        blocking(move || group_lag(&reader, &topic, timeout)).await
    }

    /// The first offset of `partition` whose timestamp is at least `timestamp_ms`, or `None`
    /// when every record is older.
    ///
    /// # Errors
    /// `UnknownTopic`, `Kafka`.
    pub(crate) async fn offset_for_timestamp(
        &self,
        topic: &str,
        partition: u32,
        timestamp_ms: u64,
    ) -> Result<Option<u64>> {
        let reader = self.group_reader("nanokafka-admin")?;
        let (topic, timeout) = (topic.to_owned(), self.config.request_timeout);
        blocking(move || {
            let mut list = TopicPartitionList::new();
            let at = Offset::Offset(i64::try_from(timestamp_ms).unwrap_or(i64::MAX));
            list.add_partition_offset(&topic, partition_id(partition), at)
                .map_err(|e| kafka_error("offset for timestamp", e))?;
            let found = reader
                .offsets_for_times(list, timeout)
                .map_err(|e| topic_error("offset for timestamp", &topic, e))?;
            let element = found.elements().into_iter().next();
            Ok(match element.map(|e| e.offset()) {
                Some(Offset::Offset(o)) => u64::try_from(o).ok(),
                _ => None,
            })
        })
        .await
    }
}

/// A partition number as librdkafka's `i32` (partition counts are at most `MAX_PARTITIONS`).
pub(crate) fn partition_id(partition: u32) -> i32 {
    i32::try_from(partition).unwrap_or(i32::MAX)
}

/// The number of partitions of `topic`, from the cluster's metadata.
pub(crate) fn partition_count<C: rdkafka::consumer::ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    timeout: Duration,
) -> Result<u32> {
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| topic_error("metadata", topic, e))?;
    let found = metadata.topics().iter().find(|t| t.name() == topic);
    match found {
        Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
            Ok(u32::try_from(t.partitions().len()).unwrap_or(0))
        }
        _ => Err(Error::UnknownTopic {
            topic: topic.to_owned(),
        }),
    }
}

fn group_lag(reader: &BaseConsumer, topic: &str, timeout: Duration) -> Result<BTreeMap<u32, u64>> {
    let partitions = partition_count(reader, topic, timeout)?;
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition(topic, partition_id(p));
    }
    let committed = reader
        .committed_offsets(list, timeout)
        .map_err(|e| topic_error("committed offsets", topic, e))?;
    let mut lag = BTreeMap::new();
    for element in committed.elements() {
        let (low, high) = reader
            .fetch_watermarks(topic, element.partition(), timeout)
            .map_err(|e| topic_error("watermarks", topic, e))?;
        let position = match element.offset() {
            Offset::Offset(o) => o.clamp(low, high),
            _ => low,
        };
        let partition = u32::try_from(element.partition()).unwrap_or_default();
        lag.insert(partition, u64::try_from(high - position).unwrap_or(0));
    }
    Ok(lag)
}
