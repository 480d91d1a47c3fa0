//! Configuration: a topic's settings and how they are persisted, the checks of values callers
//! choose (the maximum record size, group and member ids), and the translation of a topic's
//! settings into the storage layer's [`LogConfig`]. Plain data, no actix.

mod changes;
mod cleanup;
mod compression_type;
pub(crate) mod kafka_names;

use serde::{Deserialize, Serialize};

pub use changes::TopicChanges;
pub use cleanup::{CleanupPolicy, DirtyRatio};
pub use compression_type::CompressionType;

use crate::error::{Error, Result};
use crate::storage::batch::MAX_RECORD_BYTES_LIMIT;
use crate::storage::data_dir::TopicId;
pub use crate::storage::format::TimestampType;
pub use crate::storage::log::{DEFAULT_SEGMENT_BYTES, MAX_SEGMENT_BYTES};
pub use crate::storage::FsyncPolicy;
use crate::storage::{DataDir, StorageError};
use crate::storage::{LogConfig, RetentionPolicy};

/// What a producer meets when a partition's backlog reaches `max_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Backpressure {
    /// Park the produce until a commit frees room or the block timeout passes.
    #[default]
    Block,
    /// Fail at once with `Error::PartitionFull`.
    Reject,
}

/// A topic's configuration, persisted with the topic (`<data_dir>/<topic>.json`).
///
/// Built with chained setters from [`TopicConfig::default`]: 1 partition, no `max_size`,
/// no retention, [`Backpressure::Block`], 64 MiB segments, [`CleanupPolicy::Delete`] with
/// Kafka's default compaction settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    /// Number of partitions; can only grow (see [`TopicChanges`]).
    pub partitions: u32,
    /// Backlog (records not yet committed by the slowest group) at which producers meet
    /// backpressure; `None`: unbounded.
    pub max_size: Option<u64>,
    /// Keep at most this many records per partition.
    pub retention_size: Option<u64>,
    /// Keep at most this many bytes of record batches per partition (whole batches: the log
    /// start moves to the first batch that fits).
    pub retention_bytes: Option<u64>,
    /// Keep records for at most this many milliseconds after they were appended.
    pub retention_ms: Option<u64>,
    /// What producers meet at `max_size`.
    pub backpressure: Backpressure,
    /// A segment file is rolled once it reaches this size.
    pub segment_bytes: u64,
    /// Whose clock a record's timestamp comes from (Kafka's `message.timestamp.type`):
    /// the producer's (`CreateTime`, the default) or the broker's at the append
    /// (`LogAppendTime`).
    pub timestamp_type: TimestampType,
    /// The name of the Rust type the topic's payloads are (`std::any::type_name`), recorded
    /// by [`crate::Topic::create`] and checked by the typed subscribers of [`crate::Topic`]
    /// (see the `topic` module docs for what the check catches and what it does not).
    /// `None`: not recorded, nothing is checked. Left out of the JSON when `None`, so a
    /// config file without it (every file written before it existed) reads as `None` and
    /// is written back unchanged. The broker itself never reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_type: Option<String>,
    /// What happens to old records (Kafka's `cleanup.policy`): retention applies only with
    /// `Delete` in it, and a compacted topic refuses records without a key (see
    /// [`CleanupPolicy`]). A compacted topic's partitions run the log cleaner, which keeps
    /// the latest record of each key.
    ///
    /// This and the compaction settings below are left out of the JSON at their defaults,
    /// so that the file of a topic that does not use them is the one written before they
    /// existed (and such a file reads as `Delete` with Kafka's defaults).
    #[serde(skip_serializing_if = "is_default")]
    pub cleanup_policy: CleanupPolicy,
    /// How long a compacted topic keeps a tombstone (a keyed record with no value) once
    /// cleaned (Kafka's `delete.retention.ms`, default one day).
    #[serde(skip_serializing_if = "is_default_delete_retention")]
    pub delete_retention_ms: u64,
    /// A record stays uncompacted at least this long after its append (Kafka's
    /// `min.compaction.lag.ms`, default 0).
    #[serde(skip_serializing_if = "is_default")]
    pub min_compaction_lag_ms: u64,
    /// A record is compacted at the latest this long after its append (Kafka's
    /// `max.compaction.lag.ms`); `None`: no bound (Kafka's default, `Long.MAX_VALUE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_compaction_lag_ms: Option<u64>,
    /// The share of the log not yet compacted at which the cleaner takes it on (Kafka's
    /// `min.cleanable.dirty.ratio`, default 0.5).
    #[serde(skip_serializing_if = "is_default")]
    pub min_cleanable_dirty_ratio: DirtyRatio,
    /// The codec batches are stored with (Kafka's `compression.type`): `Producer` (the
    /// default) keeps each as produced, another value recompresses at the append each batch
    /// whose codec differs (see [`CompressionType`]).
    #[serde(skip_serializing_if = "is_default")]
    pub compression_type: CompressionType,
    /// The largest batch an append takes, in bytes (Kafka's `max.message.bytes`), checked on
    /// the batch as produced and as stored (after a recompression): a larger one is refused
    /// whole (`RecordTooLarge`). `None`: no limit of the topic's own; each record stays within
    /// the broker-wide `max_record_bytes`, a Kafka client's batch within the listener's request
    /// size. At most `i32::MAX`, as in Kafka.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u32>,
    /// Whether the Kafka listener checks each produced record's value against the schema
    /// registry (Confluent Server's `confluent.value.schema.validation`, `schema-registry`
    /// feature): Confluent's framing (magic byte 0, a schema id the registry knows) and a
    /// payload that decodes with that schema; a batch with a record that fails is refused
    /// whole (`INVALID_RECORD`). A null value (a tombstone) passes. The embedded API is
    /// trusted: its produces are not checked.
    #[serde(skip_serializing_if = "is_default")]
    pub value_schema_validation: bool,
    /// The same check of each record's key (`confluent.key.schema.validation`); a null key
    /// passes.
    #[serde(skip_serializing_if = "is_default")]
    pub key_schema_validation: bool,
}

/// Why schema validation cannot be turned on in this build.
pub(crate) const SCHEMA_VALIDATION_UNAVAILABLE: &str =
    "schema validation needs the schema registry: build with the `schema-registry` feature";

/// Kafka's `delete.retention.ms` default: one day.
pub const DEFAULT_DELETE_RETENTION_MS: u64 = 24 * 60 * 60 * 1000;

/// The largest time a Kafka config can hold (`Long.MAX_VALUE` ms): beyond it a value could
/// not be reported to, or carried to, a Kafka client or cluster.
pub(crate) const MAX_KAFKA_MS: u64 = i64::MAX as u64;

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

fn is_default_delete_retention(ms: &u64) -> bool {
    *ms == DEFAULT_DELETE_RETENTION_MS
}

/// Partition directories are named `<topic>_<partition>`: with a 249-byte topic name, four
/// digits are what fit in a 255-byte file name.
pub const MAX_PARTITIONS: u32 = 10_000;
/// Below this a segment would hold a handful of records and every append would roll.
pub const MIN_SEGMENT_BYTES: u64 = 4096;
/// Group and member ids are not paths, but they are written into every commit entry: keep
/// them short and printable.
pub const MAX_ID_LEN: usize = 249;

/// Which parts of a topic's records the Kafka listener checks against the schema registry:
/// [`TopicConfig::key_schema_validation`] and [`TopicConfig::value_schema_validation`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchemaValidation {
    pub key: bool,
    pub value: bool,
}

impl SchemaValidation {
    pub fn of(config: &TopicConfig) -> Self {
        SchemaValidation {
            key: config.key_schema_validation,
            value: config.value_schema_validation,
        }
    }
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            partitions: 1,
            max_size: None,
            retention_size: None,
            retention_bytes: None,
            retention_ms: None,
            backpressure: Backpressure::Block,
            segment_bytes: DEFAULT_SEGMENT_BYTES,
            timestamp_type: TimestampType::CreateTime,
            payload_type: None,
            cleanup_policy: CleanupPolicy::Delete,
            delete_retention_ms: DEFAULT_DELETE_RETENTION_MS,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: None,
            min_cleanable_dirty_ratio: DirtyRatio::KAFKA_DEFAULT,
            compression_type: CompressionType::Producer,
            max_message_bytes: None,
            value_schema_validation: false,
            key_schema_validation: false,
        }
    }
}

impl TopicConfig {
    /// Sets the number of partitions (1 to [`MAX_PARTITIONS`]).
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = partitions;
        self
    }

    /// Sets the backlog at which backpressure applies.
    pub fn max_size(mut self, records: u64) -> Self {
        self.max_size = Some(records);
        self
    }

    /// Keeps at most `records` records per partition.
    pub fn retention_size(mut self, records: u64) -> Self {
        self.retention_size = Some(records);
        self
    }

    /// Keeps at most `bytes` bytes of record frames per partition.
    pub fn retention_bytes(mut self, bytes: u64) -> Self {
        self.retention_bytes = Some(bytes);
        self
    }

    /// Keeps records for at most `ms` milliseconds.
    pub fn retention_ms(mut self, ms: u64) -> Self {
        self.retention_ms = Some(ms);
        self
    }

    /// Sets what producers meet at `max_size`.
    pub fn backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = backpressure;
        self
    }

    /// Sets the size at which segment files roll ([`MIN_SEGMENT_BYTES`] to
    /// [`MAX_SEGMENT_BYTES`]).
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = bytes;
        self
    }

    /// Sets whose clock record timestamps come from (see [`TimestampType`]).
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = timestamp_type;
        self
    }

    /// Records `name` as the payload type (see [`TopicConfig::payload_type`]);
    /// [`crate::Topic::create`] sets it to `std::any::type_name::<T>()`.
    pub fn payload_type(mut self, name: impl Into<String>) -> Self {
        self.payload_type = Some(name.into());
        self
    }

    /// Sets what happens to old records (see [`CleanupPolicy`]).
    pub fn cleanup_policy(mut self, policy: CleanupPolicy) -> Self {
        self.cleanup_policy = policy;
        self
    }

    /// Sets how long a compacted topic keeps a cleaned tombstone.
    pub fn delete_retention_ms(mut self, ms: u64) -> Self {
        self.delete_retention_ms = ms;
        self
    }

    /// Sets how long a record stays uncompacted at least.
    pub fn min_compaction_lag_ms(mut self, ms: u64) -> Self {
        self.min_compaction_lag_ms = ms;
        self
    }

    /// Bounds how long a record stays uncompacted (at least 1 ms, and not below
    /// `min_compaction_lag_ms`).
    pub fn max_compaction_lag_ms(mut self, ms: u64) -> Self {
        self.max_compaction_lag_ms = Some(ms);
        self
    }

    /// [`TopicConfig::delete_retention_ms`] as a `Duration` (whole milliseconds, saturating).
    pub fn delete_retention(self, keep: std::time::Duration) -> Self {
        self.delete_retention_ms(duration_ms(keep))
    }

    /// [`TopicConfig::min_compaction_lag_ms`] as a `Duration`.
    pub fn min_compaction_lag(self, lag: std::time::Duration) -> Self {
        self.min_compaction_lag_ms(duration_ms(lag))
    }

    /// [`TopicConfig::max_compaction_lag_ms`] as a `Duration`.
    pub fn max_compaction_lag(self, lag: std::time::Duration) -> Self {
        self.max_compaction_lag_ms(duration_ms(lag))
    }

    /// Sets the dirty share at which the cleaner takes the log on.
    pub fn min_cleanable_dirty_ratio(mut self, ratio: DirtyRatio) -> Self {
        self.min_cleanable_dirty_ratio = ratio;
        self
    }

    /// Sets the codec batches are stored with (see [`CompressionType`]).
    pub fn compression_type(mut self, compression: CompressionType) -> Self {
        self.compression_type = compression;
        self
    }

    /// Sets the largest batch an append takes, in bytes (at most `i32::MAX`).
    pub fn max_message_bytes(mut self, bytes: u32) -> Self {
        self.max_message_bytes = Some(bytes);
        self
    }

    /// Has the Kafka listener check each produced record's value against the schema
    /// registry (see [`TopicConfig::value_schema_validation`]; `schema-registry` feature).
    pub fn validate_value_schemas(mut self) -> Self {
        self.value_schema_validation = true;
        self
    }

    /// Has the Kafka listener check each produced record's key against the schema registry
    /// (see [`TopicConfig::key_schema_validation`]; `schema-registry` feature).
    pub fn validate_key_schemas(mut self) -> Self {
        self.key_schema_validation = true;
        self
    }

    /// Refuses schema validation in a build without the schema registry, which has nothing
    /// to check records against. Checked when a topic is created or altered, not when a
    /// stored config is read: a data directory written by a build with the registry still
    /// opens (its topics then take records unchecked).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the setting.
    pub(crate) fn check_schema_validation_available(&self) -> Result<()> {
        let asked = [
            ("value_schema_validation", self.value_schema_validation),
            ("key_schema_validation", self.key_schema_validation),
        ];
        match asked.into_iter().find(|&(_, on)| on) {
            Some((field, _)) if !cfg!(feature = "schema-registry") => Err(Error::InvalidConfig {
                field,
                reason: SCHEMA_VALIDATION_UNAVAILABLE.to_owned(),
            }),
            _ => Ok(()),
        }
    }

    /// Checks that every value can work.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        let invalid = |field, reason| Err(Error::InvalidConfig { field, reason });
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return invalid(
                "partitions",
                format!("must be 1..={MAX_PARTITIONS}, got {}", self.partitions),
            );
        }
        for (field, value) in [
            ("max_size", self.max_size),
            ("retention_size", self.retention_size),
            ("retention_bytes", self.retention_bytes),
            ("retention_ms", self.retention_ms),
        ] {
            if value == Some(0) {
                return invalid(field, "must be at least 1 when set, got 0".to_owned());
            }
        }
        for (field, value) in [
            ("delete_retention_ms", Some(self.delete_retention_ms)),
            ("min_compaction_lag_ms", Some(self.min_compaction_lag_ms)),
            ("max_compaction_lag_ms", self.max_compaction_lag_ms),
        ] {
            if value.is_some_and(|ms| ms > MAX_KAFKA_MS) {
                return invalid(field, format!("must be at most {MAX_KAFKA_MS} ms"));
            }
        }
        if let Some(max) = self.max_compaction_lag_ms {
            if max == 0 {
                return invalid(
                    "max_compaction_lag_ms",
                    "must be at least 1 when set, got 0".to_owned(),
                );
            }
            if self.min_compaction_lag_ms > max {
                return invalid(
                    "min_compaction_lag_ms",
                    format!(
                        "must not exceed max_compaction_lag_ms ({max}), got {}",
                        self.min_compaction_lag_ms
                    ),
                );
            }
        }
        if let Some(bytes) = self.max_message_bytes.filter(|&b| b > i32::MAX as u32) {
            return invalid(
                "max_message_bytes",
                format!("must be at most {} (Kafka's int), got {bytes}", i32::MAX),
            );
        }
        // `min_cleanable_dirty_ratio` is 0..=1 by construction (see `DirtyRatio`).
        if self.payload_type.as_deref().is_some_and(str::is_empty) {
            return invalid(
                "payload_type",
                "must be a type name or unset, got an empty name".to_owned(),
            );
        }
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return invalid(
                "segment_bytes",
                format!(
                    "must be {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}, got {}",
                    self.segment_bytes
                ),
            );
        }
        Ok(())
    }

    /// The settings of the log of each of the topic's partitions. Retention is the topic's
    /// only when its policy deletes: under `Compact` alone, as in Kafka, no limit removes
    /// records.
    pub fn log_config(&self, fsync: FsyncPolicy, max_record_bytes: usize) -> LogConfig {
        let retention = match self.cleanup_policy.deletes() {
            true => RetentionPolicy {
                records: self.retention_size,
                bytes: self.retention_bytes,
                ms: self.retention_ms,
            },
            false => RetentionPolicy::default(),
        };
        LogConfig {
            segment_bytes: self.segment_bytes,
            max_record_bytes,
            fsync,
            retention,
            timestamp_type: self.timestamp_type,
            recompress: self.compression_type.target(),
            max_batch_bytes: self.max_message_bytes.map(|b| b as usize),
        }
    }

    /// The bytes persisted in `<data_dir>/<topic>.json`: the config as pretty JSON, field
    /// names as in this struct.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("TopicConfig serializes")
    }

    /// Parses and checks a config persisted by [`TopicConfig::to_json`] (missing fields take
    /// their defaults); `path` is the file it came from.
    ///
    /// # Errors
    /// `Corrupt` when the bytes do not parse or the values cannot work.
    pub fn from_json(path: &std::path::Path, bytes: &[u8]) -> Result<Self> {
        let config: TopicConfig = serde_json::from_slice(bytes).map_err(|e| {
            StorageError::corrupt(path, e.column() as u64, format!("topic config: {e}"))
        })?;
        config
            .validate()
            .map_err(|e| StorageError::corrupt(path, 0, format!("topic config: {e}")))?;
        Ok(config)
    }
}

/// Creates `topic` in the data directory with `config`: checks the name and the config, then
/// creates the partition directories and persists the config. Returns the topic's new id.
///
/// # Errors
/// `InvalidTopicName`, `InvalidConfig` (nothing created), `TopicExists`, `Io`.
pub fn create_topic(data_dir: &DataDir, topic: &str, config: &TopicConfig) -> Result<TopicId> {
    crate::storage::data_dir::validate_topic_name(topic)?;
    config.validate()?;
    config.check_schema_validation_available()?;
    Ok(data_dir.create_topic(topic, config.partitions, &config.to_json())?)
}

/// Persists `topic`'s altered config `next` (checked by [`TopicChanges::apply_to`]),
/// creating the directories of the partitions it adds to `current` first.
///
/// # Errors
/// `Io`; the config on disk is then `current`'s.
pub fn alter_topic(
    data_dir: &DataDir,
    topic: &str,
    current: &TopicConfig,
    next: &TopicConfig,
) -> Result<()> {
    let added = current.partitions..next.partitions.max(current.partitions);
    data_dir.alter_topic(topic, added, &next.to_json())?;
    Ok(())
}

/// Every topic of the data directory with its config, sorted by name.
///
/// # Errors
/// `Io` when the directory or a config cannot be read; `Corrupt` when a config does not parse
/// or holds values that cannot work.
pub fn load_topics(data_dir: &DataDir) -> Result<Vec<(String, TopicConfig)>> {
    data_dir
        .topics()?
        .into_iter()
        .map(|topic| {
            Ok((
                topic.name,
                TopicConfig::from_json(&topic.path, &topic.config)?,
            ))
        })
        .collect()
}

/// Checks a maximum record size against the format's hard limit.
///
/// # Errors
/// [`Error::InvalidArgument`] when `bytes` is 0 or above [`MAX_RECORD_BYTES_LIMIT`].
pub fn validate_max_record_bytes(bytes: usize) -> Result<()> {
    if bytes == 0 || bytes > MAX_RECORD_BYTES_LIMIT {
        return Err(Error::InvalidArgument {
            name: "max_record_bytes",
            reason: format!("must be 1..={MAX_RECORD_BYTES_LIMIT} bytes, got {bytes}"),
        });
    }
    Ok(())
}

/// Checks a group or member id (`kind` says which): 1 to [`MAX_ID_LEN`] bytes, no control
/// characters.
///
/// # Errors
/// [`Error::InvalidId`] saying what is wrong.
pub fn validate_id(kind: &'static str, id: &str) -> Result<()> {
    let reason = if id.is_empty() {
        Some("must not be empty")
    } else if id.len() > MAX_ID_LEN {
        Some("longer than 249 bytes")
    } else if id.chars().any(char::is_control) {
        Some("must not contain control characters")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidId {
            kind,
            id: id.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Whole milliseconds of `d`, `u64::MAX` past it.
fn duration_ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::log::DEFAULT_MAX_RECORD_BYTES;

    #[test]
    fn the_default_is_one_partition_unbounded_and_blocking() {
        let c = TopicConfig::default();
        assert_eq!(c.partitions, 1);
        assert_eq!(c.max_size, None);
        assert_eq!(c.retention_size, None);
        assert_eq!(c.backpressure, Backpressure::Block);
        assert!(c.validate().is_ok());
    }

    #[test]
    fn the_duration_setters_set_the_millisecond_fields() {
        use std::time::Duration;
        let c = TopicConfig::default()
            .delete_retention(Duration::from_secs(60))
            .min_compaction_lag(Duration::from_millis(1500))
            .max_compaction_lag(Duration::MAX);
        assert_eq!(c.delete_retention_ms, 60_000);
        assert_eq!(c.min_compaction_lag_ms, 1500);
        assert_eq!(c.max_compaction_lag_ms, Some(u64::MAX));
    }

    #[test]
    fn rejects_values_that_cannot_work() {
        assert!(TopicConfig::default().partitions(0).validate().is_err());
        assert!(TopicConfig::default()
            .partitions(MAX_PARTITIONS + 1)
            .validate()
            .is_err());
        assert!(TopicConfig::default().retention_size(0).validate().is_err());
        assert!(TopicConfig::default().max_size(0).validate().is_err());
        assert!(TopicConfig::default().segment_bytes(10).validate().is_err());
        assert!(validate_max_record_bytes(0).is_err());
        assert!(validate_max_record_bytes(MAX_RECORD_BYTES_LIMIT + 1).is_err());
    }

    #[test]
    fn segment_bytes_above_what_a_u32_index_position_can_address_is_rejected() {
        assert!(TopicConfig::default()
            .segment_bytes(MAX_SEGMENT_BYTES)
            .validate()
            .is_ok());
        for too_large in [MAX_SEGMENT_BYTES + 1, 1 << 32, u64::MAX] {
            let rejected = TopicConfig::default().segment_bytes(too_large).validate();
            assert!(
                matches!(
                    &rejected,
                    Err(Error::InvalidConfig {
                        field: "segment_bytes",
                        ..
                    })
                ),
                "{too_large}: {rejected:?}"
            );
        }
    }

    #[test]
    fn survives_a_json_round_trip() {
        let c = TopicConfig::default().partitions(3).retention_ms(5000);
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<TopicConfig>(&json).unwrap(), c);
    }

    #[test]
    fn changes_set_remove_or_keep_each_field_and_partitions_only_grow() {
        let current = TopicConfig::default()
            .partitions(2)
            .retention_ms(5000)
            .max_size(10);
        let next = TopicChanges::default()
            .partitions(3)
            .retention_ms(None)
            .retention_bytes(Some(4096))
            .backpressure(Backpressure::Reject)
            .segment_bytes(1 << 20)
            .apply_to(&current)
            .unwrap();
        let expected = TopicConfig::default()
            .partitions(3)
            .retention_bytes(4096)
            .max_size(10)
            .backpressure(Backpressure::Reject)
            .segment_bytes(1 << 20);
        assert_eq!(next, expected);
        assert_eq!(TopicChanges::default().apply_to(&current).unwrap(), current);
        for partitions in [2, 1] {
            let refused = TopicChanges::default()
                .partitions(partitions)
                .apply_to(&current);
            assert!(
                matches!(
                    refused,
                    Err(Error::InvalidConfig {
                        field: "partitions",
                        ..
                    })
                ),
                "{refused:?}"
            );
        }
    }

    #[test]
    fn an_altered_config_replaces_the_file_and_adds_the_partition_directories() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        let current = TopicConfig::default();
        create_topic(&data, "t", &current).unwrap();
        let next = TopicChanges::default()
            .partitions(3)
            .retention_ms(Some(5000))
            .apply_to(&current)
            .unwrap();
        alter_topic(&data, "t", &current, &next).unwrap();
        assert!(data.partition_dir("t", 2).is_dir());
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        assert_eq!(load_topics(&data).unwrap(), vec![("t".to_owned(), next)]);
    }

    #[test]
    fn ids_must_be_printable_and_short() {
        assert!(validate_id("group", "group-1 ü").is_ok());
        for bad in ["", "a\nb"] {
            assert!(matches!(
                validate_id("group", bad),
                Err(Error::InvalidId { kind: "group", .. })
            ));
        }
        assert!(validate_id("member", &"m".repeat(250)).is_err());
    }

    /// The exact bytes this version writes for a topic config: data directories written by
    /// earlier versions hold these, and must keep opening.
    const STORED_JSON: &str = r#"{
  "partitions": 3,
  "max_size": 1000,
  "retention_size": null,
  "retention_bytes": 4096,
  "retention_ms": 5000,
  "backpressure": "Reject",
  "segment_bytes": 1048576,
  "timestamp_type": "CreateTime"
}"#;

    fn stored_config() -> TopicConfig {
        TopicConfig::default()
            .partitions(3)
            .max_size(1000)
            .retention_bytes(4096)
            .retention_ms(5000)
            .backpressure(Backpressure::Reject)
            .segment_bytes(1 << 20)
    }

    #[test]
    fn the_persisted_format_is_unchanged() {
        assert_eq!(
            String::from_utf8(stored_config().to_json()).unwrap(),
            STORED_JSON
        );
        let path = std::path::Path::new("t.json");
        assert_eq!(
            TopicConfig::from_json(path, STORED_JSON.as_bytes()).unwrap(),
            stored_config()
        );
        // Fields added later are missing from older files: they take their defaults.
        let old = TopicConfig::from_json(path, br#"{"partitions": 2}"#).unwrap();
        assert_eq!(old, TopicConfig::default().partitions(2));
    }

    #[test]
    fn a_payload_type_is_persisted_set_and_cleared_and_an_empty_one_refused() {
        let typed = stored_config().payload_type("app::Order");
        let json = String::from_utf8(typed.to_json()).unwrap();
        assert!(json.contains(r#""payload_type": "app::Order""#), "{json}");
        let path = std::path::Path::new("t.json");
        assert_eq!(
            TopicConfig::from_json(path, json.as_bytes()).unwrap(),
            typed
        );
        let renamed = TopicChanges::default()
            .payload_type(Some("app::v2::Order".into()))
            .apply_to(&typed)
            .unwrap();
        assert_eq!(renamed.payload_type.as_deref(), Some("app::v2::Order"));
        let cleared = TopicChanges::default()
            .payload_type(None)
            .apply_to(&renamed)
            .unwrap();
        assert_eq!(cleared, stored_config());
        let kept = TopicChanges::default()
            .partitions(4)
            .apply_to(&typed)
            .unwrap();
        assert_eq!(kept.payload_type, typed.payload_type);
        assert!(matches!(
            TopicChanges::default()
                .payload_type(Some(String::new()))
                .apply_to(&typed),
            Err(Error::InvalidConfig {
                field: "payload_type",
                ..
            })
        ));
    }

    #[test]
    fn a_config_that_does_not_parse_or_cannot_work_is_corrupt() {
        let path = std::path::Path::new("t.json");
        for bad in [&b"{\"partitions\": "[..], br#"{"partitions": 0}"#] {
            assert!(
                matches!(
                    TopicConfig::from_json(path, bad),
                    Err(Error::Corrupt { ref path, .. }) if path.ends_with("t.json")
                ),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn topics_round_trip_through_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        let config = stored_config();
        create_topic(&data, "orders", &config).unwrap();
        assert!(data.partition_dir("orders", 2).is_dir());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("orders.json")).unwrap(),
            STORED_JSON
        );
        assert!(matches!(
            create_topic(&data, "orders", &config),
            Err(Error::TopicExists { .. })
        ));
        assert!(matches!(
            create_topic(&data, "zero", &TopicConfig::default().partitions(0)),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
        assert!(
            !dir.path().join("zero_0").exists(),
            "a refused topic must create nothing"
        );
        drop(data);
        let data = DataDir::open(dir.path()).unwrap();
        assert_eq!(
            load_topics(&data).unwrap(),
            vec![("orders".to_owned(), config)]
        );
    }

    #[test]
    fn a_topic_config_that_does_not_parse_fails_the_load_naming_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let data = DataDir::open(dir.path()).unwrap();
        std::fs::write(dir.path().join("t.json"), b"not json").unwrap();
        match load_topics(&data) {
            Err(Error::Corrupt { path, .. }) => assert_eq!(path, dir.path().join("t.json")),
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn log_config_carries_the_topics_settings() {
        let log = stored_config().log_config(FsyncPolicy::Always, 100);
        assert_eq!(log.segment_bytes, 1 << 20);
        assert_eq!(log.max_record_bytes, 100);
        assert_eq!(log.fsync, FsyncPolicy::Always);
        assert_eq!(
            log.retention,
            RetentionPolicy {
                records: None,
                bytes: Some(4096),
                ms: Some(5000)
            }
        );
        // The log's own default matches a default topic's.
        assert_eq!(
            TopicConfig::default().log_config(FsyncPolicy::default(), DEFAULT_MAX_RECORD_BYTES),
            LogConfig::default()
        );
    }
}
