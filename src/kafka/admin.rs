//! Topics and offsets on the Kafka backend: create, alter, delete and list topics; a group's
//! lag; the offset of a timestamp.
//!
//! A topic is created with every setting of its [`TopicConfig`] that Kafka has, stated
//! explicitly (`retention.ms`/`retention.bytes` `-1` for "keep everything", the segment
//! size, the timestamp type, the cleanup policy; the compaction settings only when they are
//! not Kafka's defaults), so that it keeps what the application asked for rather than
//! the cluster's defaults (Kafka's own default retention is 7 days). The replication factor
//! is the cluster's default (`-1`). The settings Kafka does not have (`max_size` with its
//! `backpressure`, and `retention_size`, retention by record count) are logged as ignored; so
//! is an altered `payload_type` (a typed topic's; `Topic::create` sets one on every topic it
//! creates, so a create does not log it: Kafka has nowhere to keep it).
//!
//! An alter grows the partitions with CreatePartitions and changes the configs with
//! AlterConfigs. AlterConfigs (the one librdkafka's Rust binding offers) replaces every
//! config of the topic, so the topic's own configs are read first (DescribeConfigs) and
//! sent again with the changed ones; the cluster's defaults stay defaults.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::admin::{
    AdminOptions, AlterConfig, ConfigSource, NewPartitions, NewTopic, ResourceSpecifier,
    TopicReplication,
};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};

use super::{blocking, kafka_error, topic_error, KafkaBackend};
use crate::config::kafka_names;
use crate::config::{TopicChanges, TopicConfig};
use crate::error::{Error, Result};
use crate::group::GroupOptions;

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
        let entries = for_cluster(config);
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

    /// Alters `topic` (the rules are on [`TopicChanges`]): grows its partitions, then sets
    /// the configs Kafka has. Returns the topic's partition count with the changed values
    /// (the other fields are `TopicConfig`'s defaults, as `list_topics` reports them).
    ///
    /// # Errors
    /// `UnknownTopic`; `InvalidConfig` (nothing changed) when the partition count does not
    /// grow or a value cannot work; `Kafka`.
    pub(crate) async fn alter_topic(
        &self,
        topic: &str,
        changes: &TopicChanges,
    ) -> Result<TopicConfig> {
        let current =
            self.list_topics()
                .await?
                .remove(topic)
                .ok_or_else(|| Error::UnknownTopic {
                    topic: topic.to_owned(),
                })?;
        let mut next = changes.apply_to(&current)?;
        // Nothing keeps it on Kafka: the config returned says what the cluster has.
        next.payload_type = None;
        if changes.max_size.is_some()
            || changes.retention_size.is_some()
            || changes.backpressure.is_some()
            || changes.payload_type.is_some()
        {
            tracing::warn!(
                topic,
                ?changes,
                "Kafka has no max_size, backpressure, retention by record count or payload type: \
                 ignored"
            );
        }
        if next.partitions > current.partitions {
            self.create_partitions(topic, next.partitions).await?;
            self.await_partitions(topic, next.partitions).await?;
        }
        let set = changed(changes);
        if !set.is_empty() {
            self.alter_configs(topic, &set).await?;
        }
        Ok(next)
    }

    async fn create_partitions(&self, topic: &str, partitions: u32) -> Result<()> {
        let new = NewPartitions::new(topic, partitions as usize);
        let results = self
            .admin
            .create_partitions([&new], &self.admin_options())
            .await
            .map_err(|e| topic_error("create partitions", topic, e))?;
        match results.into_iter().next() {
            Some(Err((_, RDKafkaErrorCode::UnknownTopicOrPartition))) => Err(Error::UnknownTopic {
                topic: topic.to_owned(),
            }),
            Some(Err((_, code))) => Err(Error::Kafka {
                op: "create partitions",
                reason: format!("{topic}: {code}"),
            }),
            _ => Ok(()),
        }
    }

    /// Waits until the producer's metadata shows `topic` with `partitions` partitions: a
    /// metadata request refreshes librdkafka's cache, which would otherwise keep routing
    /// keyed records by the old count until its periodic refresh (minutes).
    ///
    /// # Errors
    /// `Kafka` when the count is not seen within the request timeout.
    async fn await_partitions(&self, topic: &str, partitions: u32) -> Result<()> {
        let producer = self.producer.clone();
        let (topic, timeout) = (topic.to_owned(), self.config.request_timeout);
        blocking(move || {
            use rdkafka::producer::Producer;
            let deadline = std::time::Instant::now() + timeout;
            loop {
                let metadata = producer
                    .client()
                    .fetch_metadata(Some(&topic), timeout)
                    .map_err(|e| topic_error("metadata", &topic, e))?;
                let seen = metadata
                    .topics()
                    .iter()
                    .find(|t| t.name() == topic)
                    .map_or(0, |t| t.partitions().len());
                if seen >= partitions as usize {
                    return Ok(());
                }
                if std::time::Instant::now() >= deadline {
                    return Err(Error::Kafka {
                        op: "create partitions",
                        reason: format!(
                            "{topic}: the cluster still reports {seen} partitions, not \
                             {partitions}, after {timeout:?}"
                        ),
                    });
                }
                // The controller propagates the new count to the brokers asynchronously.
                std::thread::sleep(Duration::from_millis(50));
            }
        })
        .await
    }

    /// Sets `set` on `topic`, keeping its other topic-level configs (see the module docs).
    async fn alter_configs(&self, topic: &str, set: &[(&'static str, String)]) -> Result<()> {
        let resource = ResourceSpecifier::Topic(topic);
        let described = self
            .admin
            .describe_configs([&resource], &self.admin_options())
            .await
            .map_err(|e| topic_error("describe configs", topic, e))?;
        let own = match described.into_iter().next() {
            Some(Ok(resource)) => resource.entries,
            Some(Err(code)) => {
                return Err(Error::Kafka {
                    op: "describe configs",
                    reason: format!("{topic}: {code}"),
                })
            }
            None => Vec::new(),
        };
        let mut configs: BTreeMap<String, String> = own
            .into_iter()
            .filter(|e| e.source == ConfigSource::DynamicTopic && !e.is_read_only)
            .filter_map(|e| Some((e.name, e.value?)))
            .collect();
        for (name, value) in set {
            configs.insert((*name).to_owned(), value.clone());
        }
        let alter = configs
            .iter()
            .fold(AlterConfig::new(resource), |alter, (name, value)| {
                alter.set(name, value)
            });
        let results = self
            .admin
            .alter_configs([&alter], &self.admin_options())
            .await
            .map_err(|e| topic_error("alter configs", topic, e))?;
        match results.into_iter().next() {
            Some(Err((_, code))) => Err(Error::Kafka {
                op: "alter configs",
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

impl KafkaBackend {
    /// Kafka's DeleteGroups of `group`: `false` when the cluster did not know it.
    ///
    /// # Errors
    /// `Kafka` for another refusal (a group with members: NON_EMPTY_GROUP).
    pub(crate) async fn delete_group(&self, group: &str) -> Result<bool> {
        let results = self
            .admin
            .delete_groups(&[group], &self.admin_options())
            .await
            .map_err(|e| kafka_error("delete group", e))?;
        match results.into_iter().next() {
            Some(Ok(_)) => Ok(true),
            Some(Err((_, RDKafkaErrorCode::GroupIdNotFound))) => Ok(false),
            Some(Err((_, code))) => Err(kafka_error(
                "delete group",
                rdkafka::error::KafkaError::AdminOp(code),
            )),
            None => Ok(false),
        }
    }
}

impl KafkaBackend {
    /// Kafka's DeleteRecords of `partition` below `before`: the low watermark after.
    ///
    /// # Errors
    /// `UnknownTopic`; `Kafka` for another refusal (an offset past the high watermark
    /// included: the cluster does not say where the log ends).
    pub(crate) async fn delete_records(
        &self,
        topic: &str,
        partition: u32,
        before: u64,
    ) -> Result<u64> {
        let mut list = TopicPartitionList::new();
        let at = Offset::Offset(i64::try_from(before).unwrap_or(i64::MAX));
        list.add_partition_offset(topic, partition_id(partition), at)
            .map_err(|e| kafka_error("delete records", e))?;
        let done = self
            .admin
            .delete_records(&list, &self.admin_options())
            .await
            .map_err(|e| topic_error("delete records", topic, e))?;
        let element = done.elements().into_iter().next();
        let Some(element) = element else {
            return Err(kafka_error(
                "delete records",
                rdkafka::error::KafkaError::NoMessageReceived,
            ));
        };
        match (element.error(), element.offset()) {
            (Err(e), _) => Err(topic_error("delete records", topic, e)),
            (Ok(()), Offset::Offset(low)) => Ok(u64::try_from(low).unwrap_or(0)),
            (Ok(()), other) => Err(kafka_error(
                "delete records",
                rdkafka::error::KafkaError::AdminOpCreation(format!("low watermark {other:?}")),
            )),
        }
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

/// The Kafka configs `changes` sets, in Kafka's names and units (the changes Kafka has no
/// name for are left out: see `config::kafka_names`).
fn changed(changes: &TopicChanges) -> Vec<(&'static str, String)> {
    let mut set = Vec::new();
    if let Some(ms) = changes.retention_ms {
        set.push(("retention.ms", kafka_names::limit(ms)));
    }
    if let Some(bytes) = changes.retention_bytes {
        set.push(("retention.bytes", kafka_names::limit(bytes)));
    }
    if let Some(t) = changes.timestamp_type {
        set.push(("message.timestamp.type", kafka_names::timestamp_type(t)));
    }
    if let Some(bytes) = changes.segment_bytes {
        set.push(("segment.bytes", bytes.to_string()));
    }
    if let Some(policy) = changes.cleanup_policy {
        set.push(("cleanup.policy", policy.kafka_name().to_owned()));
    }
    if let Some(ms) = changes.delete_retention_ms {
        set.push(("delete.retention.ms", ms.to_string()));
    }
    if let Some(ms) = changes.min_compaction_lag_ms {
        set.push(("min.compaction.lag.ms", ms.to_string()));
    }
    if let Some(ms) = changes.max_compaction_lag_ms {
        set.push(("max.compaction.lag.ms", kafka_names::max_lag(ms)));
    }
    if let Some(ratio) = changes.min_cleanable_dirty_ratio {
        set.push(("min.cleanable.dirty.ratio", ratio.to_string()));
    }
    if let Some(compression) = changes.compression_type {
        set.push(("compression.type", compression.to_string()));
    }
    for (name, enabled) in [
        (
            kafka_names::VALUE_SCHEMA_VALIDATION,
            changes.value_schema_validation,
        ),
        (
            kafka_names::KEY_SCHEMA_VALIDATION,
            changes.key_schema_validation,
        ),
    ] {
        if let Some(enabled) = enabled {
            set.push((name, enabled.to_string()));
        }
    }
    if let Some(bytes) = changes.max_message_bytes {
        // Removing the topic's limit gives it Kafka's default, the one a cluster knows.
        let bytes = bytes.map_or(KAFKA_MAX_MESSAGE_BYTES.to_owned(), |b| b.to_string());
        set.push(("max.message.bytes", bytes));
    }
    set
}

/// Kafka's default `max.message.bytes`: 1 MiB and the 12 bytes of a batch's offset and length.
const KAFKA_MAX_MESSAGE_BYTES: &str = "1048588";

/// The settings whose defaults are left to the cluster: the compaction settings (their
/// defaults here are Kafka's own), the codec (`producer`, Kafka's default) and the batch
/// limit (unset here; the cluster has its own).
const CLUSTER_DEFAULTS: [&str; 8] = [
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "max.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "compression.type",
    "max.message.bytes",
    // Confluent Server's: an Apache Kafka cluster refuses them, so they are sent only on.
    kafka_names::VALUE_SCHEMA_VALIDATION,
    kafka_names::KEY_SCHEMA_VALIDATION,
];

/// The configs a topic with `config` is created with on a Kafka cluster, in Kafka's names
/// and units: every one [`kafka_names::describe`] reports, except those of
/// [`CLUSTER_DEFAULTS`] left at their defaults (so the cluster's own broker-wide settings
/// apply, as they would to a topic created by Kafka's tools).
pub(crate) fn for_cluster(config: &TopicConfig) -> Vec<(&'static str, String)> {
    kafka_names::describe(config)
        .into_iter()
        .filter(|e| !(e.is_default && CLUSTER_DEFAULTS.contains(&e.name)))
        .map(|e| (e.name, e.value))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CleanupPolicy;

    #[test]
    fn a_cluster_gets_the_policy_always_and_the_compaction_settings_when_set() {
        let names = |config: &TopicConfig| -> Vec<&'static str> {
            for_cluster(config)
                .into_iter()
                .map(|(name, _)| name)
                .collect()
        };
        let default = names(&TopicConfig::default());
        assert!(default.contains(&"cleanup.policy"), "{default:?}");
        for setting in CLUSTER_DEFAULTS {
            assert!(!default.contains(&setting), "{default:?}");
        }
        let compacted = TopicConfig::default()
            .cleanup_policy(CleanupPolicy::Compact)
            .max_compaction_lag_ms(60_000);
        let sent = for_cluster(&compacted);
        assert!(
            sent.contains(&("cleanup.policy", "compact".to_owned())),
            "{sent:?}"
        );
        assert!(
            sent.contains(&("max.compaction.lag.ms", "60000".to_owned())),
            "{sent:?}"
        );
        assert!(
            !sent.iter().any(|(name, _)| *name == "delete.retention.ms"),
            "{sent:?}"
        );
        let capped = TopicConfig::default()
            .compression_type(crate::config::CompressionType::Zstd)
            .max_message_bytes(10_000);
        let sent = for_cluster(&capped);
        for set in [("compression.type", "zstd"), ("max.message.bytes", "10000")] {
            assert!(sent.contains(&(set.0, set.1.to_owned())), "{sent:?}");
        }
    }
}
