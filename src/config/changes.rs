//! [`TopicChanges`]: what an alter changes in a topic's config, and the rules it follows.

use super::{Backpressure, CleanupPolicy, CompressionType, DirtyRatio, TimestampType, TopicConfig};
use crate::error::{Error, Result};

/// What [`crate::AsyncNanoKafka::alter_topic`] changes in a topic's [`TopicConfig`]: each
/// field left `None` keeps its value. Built with chained setters from
/// [`TopicChanges::default`] (which changes nothing).
///
/// The rules are Kafka's:
/// * `partitions` can only grow: a count equal to or below the current one is
///   `InvalidConfig` and changes nothing. The new partitions start empty and are served at
///   once; groups rebalance to include them. Keyed records produced afterwards may land on
///   a different partition than before ([`crate::partition_for_key`] depends on the count),
///   so per-key order holds only among records produced after the change.
/// * The retention fields take `Some(None)` to remove the limit and `Some(Some(v))` to set
///   it; the running partitions apply a lowered limit at once (records beyond it go).
/// * `max_size`, `backpressure` and `timestamp_type` apply to the next produce.
/// * `segment_bytes` applies from the next append on, as Kafka's `segment.bytes`: the active
///   segment rolls once the next batch would take it past the new size (at once when it is
///   already larger), sealed segments keep their size, and the cleaner's passes group their
///   output up to it.
/// * `cleanup_policy` applies to the next produce (records without a key are refused once
///   it compacts) and to retention at once (a policy without `delete` stops it; one with
///   it applies the limits now). The compaction settings are stored for the cleaner.
/// * `compression_type` and `max_message_bytes` apply to the next append; stored batches
///   keep their codec and size.
/// * `value_schema_validation` and `key_schema_validation` apply to the next produce
///   through the Kafka listener.
///
/// The changed config is checked with [`TopicConfig::validate`] before anything is written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TopicChanges {
    pub partitions: Option<u32>,
    pub max_size: Option<Option<u64>>,
    pub retention_size: Option<Option<u64>>,
    pub retention_bytes: Option<Option<u64>>,
    pub retention_ms: Option<Option<u64>>,
    pub backpressure: Option<Backpressure>,
    pub timestamp_type: Option<TimestampType>,
    pub segment_bytes: Option<u64>,
    /// `Some(Some(name))` records a payload type name, `Some(None)` clears it.
    pub payload_type: Option<Option<String>>,
    pub cleanup_policy: Option<CleanupPolicy>,
    pub delete_retention_ms: Option<u64>,
    pub min_compaction_lag_ms: Option<u64>,
    /// `Some(None)` removes the bound.
    pub max_compaction_lag_ms: Option<Option<u64>>,
    pub min_cleanable_dirty_ratio: Option<DirtyRatio>,
    pub compression_type: Option<CompressionType>,
    /// `Some(None)` removes the topic's own limit.
    pub max_message_bytes: Option<Option<u32>>,
    pub value_schema_validation: Option<bool>,
    pub key_schema_validation: Option<bool>,
}

impl TopicChanges {
    /// Grows the topic to `partitions` partitions.
    pub fn partitions(mut self, partitions: u32) -> Self {
        self.partitions = Some(partitions);
        self
    }

    /// Sets (`Some`) or removes (`None`) the backlog bound.
    pub fn max_size(mut self, records: Option<u64>) -> Self {
        self.max_size = Some(records);
        self
    }

    /// Sets (`Some`) or removes (`None`) the record-count retention.
    pub fn retention_size(mut self, records: Option<u64>) -> Self {
        self.retention_size = Some(records);
        self
    }

    /// Sets (`Some`) or removes (`None`) the byte retention.
    pub fn retention_bytes(mut self, bytes: Option<u64>) -> Self {
        self.retention_bytes = Some(bytes);
        self
    }

    /// Sets (`Some`) or removes (`None`) the time retention.
    pub fn retention_ms(mut self, ms: Option<u64>) -> Self {
        self.retention_ms = Some(ms);
        self
    }

    /// Sets what producers meet at `max_size`.
    pub fn backpressure(mut self, backpressure: Backpressure) -> Self {
        self.backpressure = Some(backpressure);
        self
    }

    /// Sets whose clock record timestamps come from.
    pub fn timestamp_type(mut self, timestamp_type: TimestampType) -> Self {
        self.timestamp_type = Some(timestamp_type);
        self
    }

    /// Sets the size at which the partitions' segments roll, from their next append on
    /// ([`crate::MIN_SEGMENT_BYTES`] to [`crate::MAX_SEGMENT_BYTES`]).
    pub fn segment_bytes(mut self, bytes: u64) -> Self {
        self.segment_bytes = Some(bytes);
        self
    }

    /// Records `name` as the topic's payload type (`Some`), or clears it (`None`: typed
    /// subscribers of any type are accepted again). For a payload type that was renamed or
    /// moved to another module, or evolved into a new type: record the name of the type the
    /// subscribers now use, e.g. `Some(std::any::type_name::<OrderV2>().to_owned())`.
    pub fn payload_type(mut self, name: Option<String>) -> Self {
        self.payload_type = Some(name);
        self
    }

    /// Sets what happens to old records (see [`CleanupPolicy`]).
    pub fn cleanup_policy(mut self, policy: CleanupPolicy) -> Self {
        self.cleanup_policy = Some(policy);
        self
    }

    /// Sets how long a compacted topic keeps a cleaned tombstone.
    pub fn delete_retention_ms(mut self, ms: u64) -> Self {
        self.delete_retention_ms = Some(ms);
        self
    }

    /// Sets how long a record stays uncompacted at least.
    pub fn min_compaction_lag_ms(mut self, ms: u64) -> Self {
        self.min_compaction_lag_ms = Some(ms);
        self
    }

    /// Sets (`Some`) or removes (`None`) the bound on how long a record stays uncompacted.
    pub fn max_compaction_lag_ms(mut self, ms: Option<u64>) -> Self {
        self.max_compaction_lag_ms = Some(ms);
        self
    }

    /// Sets the dirty share at which the cleaner takes the log on.
    pub fn min_cleanable_dirty_ratio(mut self, ratio: DirtyRatio) -> Self {
        self.min_cleanable_dirty_ratio = Some(ratio);
        self
    }

    /// Sets the codec batches are stored with from the next append on.
    pub fn compression_type(mut self, compression: CompressionType) -> Self {
        self.compression_type = Some(compression);
        self
    }

    /// Sets (`Some`) or removes (`None`) the largest batch an append takes.
    pub fn max_message_bytes(mut self, bytes: Option<u32>) -> Self {
        self.max_message_bytes = Some(bytes);
        self
    }

    /// Turns the check of produced records' values against the schema registry on or off
    /// (see [`TopicConfig::value_schema_validation`]).
    pub fn value_schema_validation(mut self, enabled: bool) -> Self {
        self.value_schema_validation = Some(enabled);
        self
    }

    /// Turns the check of produced records' keys against the schema registry on or off
    /// (see [`TopicConfig::key_schema_validation`]).
    pub fn key_schema_validation(mut self, enabled: bool) -> Self {
        self.key_schema_validation = Some(enabled);
        self
    }

    /// `current` with these changes applied, checked.
    ///
    /// # Errors
    /// `InvalidConfig` when the partition count does not grow or a value cannot work
    /// ([`TopicConfig::validate`]), or schema validation is turned on in a build without
    /// the `schema-registry` feature.
    pub fn apply_to(&self, current: &TopicConfig) -> Result<TopicConfig> {
        let mut next = current.clone();
        if let Some(partitions) = self.partitions {
            if partitions <= current.partitions {
                return Err(Error::InvalidConfig {
                    field: "partitions",
                    reason: format!(
                        "can only grow: the topic has {}, asked for {partitions}",
                        current.partitions
                    ),
                });
            }
            next.partitions = partitions;
        }
        let set = |field: &mut Option<u64>, change: Option<Option<u64>>| {
            if let Some(value) = change {
                *field = value;
            }
        };
        set(&mut next.max_size, self.max_size);
        set(&mut next.retention_size, self.retention_size);
        set(&mut next.retention_bytes, self.retention_bytes);
        set(&mut next.retention_ms, self.retention_ms);
        set(&mut next.max_compaction_lag_ms, self.max_compaction_lag_ms);
        next.cleanup_policy = self.cleanup_policy.unwrap_or(next.cleanup_policy);
        next.delete_retention_ms = self.delete_retention_ms.unwrap_or(next.delete_retention_ms);
        next.min_compaction_lag_ms = self
            .min_compaction_lag_ms
            .unwrap_or(next.min_compaction_lag_ms);
        next.min_cleanable_dirty_ratio = self
            .min_cleanable_dirty_ratio
            .unwrap_or(next.min_cleanable_dirty_ratio);
        next.backpressure = self.backpressure.unwrap_or(next.backpressure);
        next.timestamp_type = self.timestamp_type.unwrap_or(next.timestamp_type);
        next.segment_bytes = self.segment_bytes.unwrap_or(next.segment_bytes);
        next.compression_type = self.compression_type.unwrap_or(next.compression_type);
        if let Some(bytes) = self.max_message_bytes {
            next.max_message_bytes = bytes;
        }
        if let Some(payload_type) = &self.payload_type {
            next.payload_type.clone_from(payload_type);
        }
        next.value_schema_validation = self
            .value_schema_validation
            .unwrap_or(next.value_schema_validation);
        next.key_schema_validation = self
            .key_schema_validation
            .unwrap_or(next.key_schema_validation);
        next.validate()?;
        TopicConfig {
            value_schema_validation: self.value_schema_validation == Some(true),
            key_schema_validation: self.key_schema_validation == Some(true),
            ..TopicConfig::default()
        }
        .check_schema_validation_available()?;
        Ok(next)
    }
}
