//! A topic's config in Kafka's names and units, both ways: what CreateTopics accepts and what
//! DescribeConfigs reports.
//!
//! | Kafka config | `TopicConfig` | Kafka's "unlimited" |
//! | --- | --- | --- |
//! | `cleanup.policy` | `cleanup_policy` (`delete`, `compact`, `compact,delete`) | |
//! | `delete.retention.ms` | `delete_retention_ms` | |
//! | `min.compaction.lag.ms` | `min_compaction_lag_ms` | |
//! | `max.compaction.lag.ms` | `max_compaction_lag_ms` | `9223372036854775807` = `None` |
//! | `min.cleanable.dirty.ratio` | `min_cleanable_dirty_ratio` (0 to 1) | |
//! | `retention.ms` | `retention_ms` | `-1` = `None` |
//! | `retention.bytes` | `retention_bytes` | `-1` = `None` |
//! | `segment.bytes` | `segment_bytes` | |
//! | `message.timestamp.type` | `timestamp_type` (`CreateTime`, `LogAppendTime`) | |
//! | `compression.type` | `compression_type` (`producer`, `uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`) | |
//! | `max.message.bytes` | `max_message_bytes` | [`MAX_BATCH_BYTES`] or more = `None` |
//! | `confluent.value.schema.validation` | `value_schema_validation` (`true`, `false`) | |
//! | `confluent.key.schema.validation` | `key_schema_validation` (`true`, `false`) | |
//! | `min.insync.replicas` | (always 1: one broker, so the replication factor is 1) | |
//! | `message.format.version` | (accepted and ignored, as Kafka 3 does: records are always v2) | |
//!
//! `message.format.version` is deprecated in Kafka 3 and removed in 4: a Kafka 3 broker
//! checks that the value is a Kafka version and ignores it (KIP-724), always writing record
//! batches v2, and so does this one. Tools that copy a topic's configs, or librdkafka's tests,
//! still set it. It is not described (Kafka 3 would describe its own version).
//!
//! NanoKafka's own settings without a Kafka name (`max_size`, `retention_size`,
//! `backpressure`) keep their defaults for topics made by Kafka clients.
//!
//! `max.message.bytes` limits a topic's batches; unset (the default), a batch is bounded only
//! by what the log takes at all ([`MAX_BATCH_BYTES`], which is what is described) and a
//! Kafka client's by the listener's request size, while each record stays within the
//! broker-wide `max_record_bytes` (the broker's `message.max.bytes`), as before. Kafka's own
//! default, 1048588, is not imposed: it would refuse a single record the broker-wide limit
//! allows.
//!
//! The two schema validation configs are Confluent Server's names, so a topic's configs move
//! to Confluent Platform unchanged; `true` needs the `schema-registry` feature (without it
//! setting one is INVALID_CONFIG, saying so). They have no broker-wide synonym.
//!
//! The compaction settings drive the log cleaner of a compacted topic (see
//! `partition::cleaning`).

use super::{CleanupPolicy, CompressionType, DirtyRatio, TimestampType, TopicConfig, MAX_KAFKA_MS};
use crate::storage::batch::MAX_BATCH_BYTES;

/// Kafka's config sources (DescribeConfigs `config_source`).
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// Kafka's config types (DescribeConfigs v3+ `config_type`).
pub const TYPE_BOOLEAN: i8 = 1;
pub const TYPE_STRING: i8 = 2;
pub const TYPE_INT: i8 = 3;
pub const TYPE_LONG: i8 = 5;
pub const TYPE_DOUBLE: i8 = 6;
pub const TYPE_LIST: i8 = 7;

/// One config as DescribeConfigs and CreateTopics v5 report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: &'static str,
    pub value: String,
    /// The broker's default, not set for this topic.
    pub is_default: bool,
    pub read_only: bool,
    pub config_type: i8,
    /// The broker config it falls back to (Kafka's synonym), and that default's value.
    pub synonym: Option<(&'static str, String)>,
}

impl Entry {
    pub fn source(&self) -> i8 {
        match self.is_default {
            true => SOURCE_DEFAULT,
            false => SOURCE_TOPIC,
        }
    }
}

/// Confluent Server's topic config: check produced values against the schema registry.
pub const VALUE_SCHEMA_VALIDATION: &str = "confluent.value.schema.validation";
/// Confluent Server's topic config: check produced keys against the schema registry.
pub const KEY_SCHEMA_VALIDATION: &str = "confluent.key.schema.validation";

/// A size or time limit in Kafka's units: `-1` for none.
pub(crate) fn limit(value: Option<u64>) -> String {
    value.map_or_else(|| "-1".to_owned(), |v| v.to_string())
}

/// `max.compaction.lag.ms`'s value: Kafka's `Long.MAX_VALUE` for no bound.
pub(crate) fn max_lag(value: Option<u64>) -> String {
    value.unwrap_or(MAX_KAFKA_MS).to_string()
}

/// `message.timestamp.type`'s value for `t`.
pub(crate) fn timestamp_type(t: TimestampType) -> String {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
    .to_owned()
}

/// `max.message.bytes`'s value: the topic's limit, or the largest batch a log takes.
pub(crate) fn max_message_bytes(value: Option<u32>) -> String {
    value.map_or(MAX_BATCH_BYTES as u64, u64::from).to_string()
}

/// Every Kafka config of a topic with `config`, in Kafka's names and units.
pub fn describe(config: &TopicConfig) -> Vec<Entry> {
    let default = TopicConfig::default();
    let entry = |name, value: String, default_value: String, config_type, broker_name| Entry {
        name,
        is_default: value == default_value,
        value,
        read_only: false,
        config_type,
        synonym: Some((broker_name, default_value)),
    };
    let flag = |name, value: bool, default_value: bool| Entry {
        name,
        is_default: value == default_value,
        value: value.to_string(),
        read_only: false,
        config_type: TYPE_BOOLEAN,
        synonym: None,
    };
    vec![
        entry(
            "cleanup.policy",
            config.cleanup_policy.to_string(),
            default.cleanup_policy.to_string(),
            TYPE_LIST,
            "log.cleanup.policy",
        ),
        entry(
            "compression.type",
            config.compression_type.to_string(),
            default.compression_type.to_string(),
            TYPE_STRING,
            "compression.type",
        ),
        flag(
            KEY_SCHEMA_VALIDATION,
            config.key_schema_validation,
            default.key_schema_validation,
        ),
        flag(
            VALUE_SCHEMA_VALIDATION,
            config.value_schema_validation,
            default.value_schema_validation,
        ),
        entry(
            "delete.retention.ms",
            config.delete_retention_ms.to_string(),
            default.delete_retention_ms.to_string(),
            TYPE_LONG,
            "log.cleaner.delete.retention.ms",
        ),
        entry(
            "max.compaction.lag.ms",
            max_lag(config.max_compaction_lag_ms),
            max_lag(default.max_compaction_lag_ms),
            TYPE_LONG,
            "log.cleaner.max.compaction.lag.ms",
        ),
        entry(
            "max.message.bytes",
            max_message_bytes(config.max_message_bytes),
            max_message_bytes(default.max_message_bytes),
            TYPE_INT,
            "message.max.bytes",
        ),
        entry(
            "message.timestamp.type",
            timestamp_type(config.timestamp_type),
            timestamp_type(default.timestamp_type),
            TYPE_STRING,
            "log.message.timestamp.type",
        ),
        entry(
            "min.cleanable.dirty.ratio",
            config.min_cleanable_dirty_ratio.to_string(),
            default.min_cleanable_dirty_ratio.to_string(),
            TYPE_DOUBLE,
            "log.cleaner.min.cleanable.ratio",
        ),
        entry(
            "min.compaction.lag.ms",
            config.min_compaction_lag_ms.to_string(),
            default.min_compaction_lag_ms.to_string(),
            TYPE_LONG,
            "log.cleaner.min.compaction.lag.ms",
        ),
        entry(
            "min.insync.replicas",
            MIN_INSYNC_REPLICAS.to_string(),
            MIN_INSYNC_REPLICAS.to_string(),
            TYPE_INT,
            "min.insync.replicas",
        ),
        entry(
            "retention.bytes",
            limit(config.retention_bytes),
            limit(default.retention_bytes),
            TYPE_LONG,
            "log.retention.bytes",
        ),
        entry(
            "retention.ms",
            limit(config.retention_ms),
            limit(default.retention_ms),
            TYPE_LONG,
            "log.retention.ms",
        ),
        entry(
            "segment.bytes",
            config.segment_bytes.to_string(),
            default.segment_bytes.to_string(),
            TYPE_INT,
            "log.segment.bytes",
        ),
    ]
}

/// Every config [`describe`] lists back to its default in `config`: what AlterConfigs' whole
/// set leaves out. NanoKafka's own settings (partitions, `max_size`, `retention_size`,
/// backpressure, payload type) have no Kafka name and are kept.
pub fn reset(config: &mut TopicConfig) {
    for entry in describe(config) {
        // Every described name has a default: `apply` of `None` cannot refuse it.
        let reset = apply(config, entry.name, None);
        debug_assert!(reset.is_ok(), "{}: {reset:?}", entry.name);
    }
}

/// Sets the Kafka config `name` to `value` (`None`: the default) in `config`. The values'
/// ranges are checked afterwards by `TopicConfig::validate`.
///
/// # Errors
/// Why the config cannot be set (Kafka's INVALID_CONFIG, with this as its message).
pub fn apply(config: &mut TopicConfig, name: &str, value: Option<&str>) -> Result<(), String> {
    let Some(value) = value else {
        let default = TopicConfig::default();
        match name {
            "min.insync.replicas" | MESSAGE_FORMAT_VERSION => {}
            "cleanup.policy" => config.cleanup_policy = default.cleanup_policy,
            "delete.retention.ms" => config.delete_retention_ms = default.delete_retention_ms,
            "min.compaction.lag.ms" => config.min_compaction_lag_ms = default.min_compaction_lag_ms,
            "max.compaction.lag.ms" => config.max_compaction_lag_ms = default.max_compaction_lag_ms,
            "min.cleanable.dirty.ratio" => {
                config.min_cleanable_dirty_ratio = default.min_cleanable_dirty_ratio
            }
            "retention.ms" => config.retention_ms = default.retention_ms,
            "retention.bytes" => config.retention_bytes = default.retention_bytes,
            "segment.bytes" => config.segment_bytes = default.segment_bytes,
            "message.timestamp.type" => config.timestamp_type = default.timestamp_type,
            "compression.type" => config.compression_type = default.compression_type,
            "max.message.bytes" => config.max_message_bytes = default.max_message_bytes,
            VALUE_SCHEMA_VALIDATION => {
                config.value_schema_validation = default.value_schema_validation
            }
            KEY_SCHEMA_VALIDATION => config.key_schema_validation = default.key_schema_validation,
            _ => return Err(unknown(name)),
        }
        return Ok(());
    };
    match name {
        "cleanup.policy" => config.cleanup_policy = value.parse::<CleanupPolicy>()?,
        "delete.retention.ms" => config.delete_retention_ms = parse_ms(name, value)?,
        "min.compaction.lag.ms" => config.min_compaction_lag_ms = parse_ms(name, value)?,
        "max.compaction.lag.ms" => {
            config.max_compaction_lag_ms = match parse_ms(name, value)? {
                0 => return Err(format!("{name} must be at least 1, got {value:?}")),
                MAX_KAFKA_MS => None,
                ms => Some(ms),
            }
        }
        "min.cleanable.dirty.ratio" => {
            config.min_cleanable_dirty_ratio = value.parse::<DirtyRatio>()?
        }
        "min.insync.replicas" => check_min_insync_replicas(value)?,
        MESSAGE_FORMAT_VERSION => check_message_format_version(value)?,
        "retention.ms" => config.retention_ms = parse_limit(name, value)?,
        "retention.bytes" => config.retention_bytes = parse_limit(name, value)?,
        "segment.bytes" => {
            config.segment_bytes = value
                .trim()
                .parse()
                .map_err(|_| format!("segment.bytes must be a positive integer, got {value:?}"))?
        }
        "message.timestamp.type" => {
            config.timestamp_type = match value.trim() {
                "CreateTime" => TimestampType::CreateTime,
                "LogAppendTime" => TimestampType::LogAppendTime,
                _ => {
                    return Err(format!(
                        "message.timestamp.type must be CreateTime or LogAppendTime, got {value:?}"
                    ))
                }
            }
        }
        "compression.type" => config.compression_type = value.parse::<CompressionType>()?,
        VALUE_SCHEMA_VALIDATION => config.value_schema_validation = parse_flag(name, value)?,
        KEY_SCHEMA_VALIDATION => config.key_schema_validation = parse_flag(name, value)?,
        "max.message.bytes" => {
            config.max_message_bytes = match value.trim().parse::<i32>() {
                // No batch is larger than a log takes: the same as no limit of the topic's
                // own, which is how that value is described (so a described set sent back
                // whole, as librdkafka's tools do, changes nothing).
                Ok(bytes) if bytes >= 0 && bytes as usize >= MAX_BATCH_BYTES => None,
                Ok(bytes) if bytes >= 0 => Some(bytes as u32),
                _ => {
                    return Err(format!(
                        "max.message.bytes must be a number of bytes from 0 to {}, got {value:?}",
                        i32::MAX
                    ))
                }
            }
        }
        _ => return Err(unknown(name)),
    }
    Ok(())
}

/// IncrementalAlterConfigs' operations on a list config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListOp {
    Append,
    Subtract,
}

/// Adds the items of `value` to, or removes them from, the list config `name` of `config`.
/// `cleanup.policy` is the only list config a topic has here.
///
/// # Errors
/// Why not (Kafka's INVALID_CONFIG): another config, an item that is not a policy, or a
/// subtraction that would leave no policy.
pub fn change_list(
    config: &mut TopicConfig,
    name: &str,
    op: ListOp,
    value: &str,
) -> Result<(), String> {
    if name != "cleanup.policy" {
        return Err(format!(
            "APPEND and SUBTRACT apply to list configs; {name:?} cannot take them"
        ));
    }
    let given = value.parse::<CleanupPolicy>()?;
    let items = |p: CleanupPolicy| (p.compacts(), p.deletes());
    let ((compact, delete), (given_compact, given_delete)) =
        (items(config.cleanup_policy), items(given));
    let (compact, delete) = match op {
        ListOp::Append => (compact || given_compact, delete || given_delete),
        ListOp::Subtract => (compact && !given_compact, delete && !given_delete),
    };
    config.cleanup_policy = match (compact, delete) {
        (true, true) => CleanupPolicy::CompactDelete,
        (true, false) => CleanupPolicy::Compact,
        (false, true) => CleanupPolicy::Delete,
        (false, false) => {
            return Err(format!(
                "cleanup.policy cannot be left empty (subtracting {value:?} from {:?})",
                config.cleanup_policy.kafka_name()
            ))
        }
    };
    Ok(())
}

fn unknown(name: &str) -> String {
    format!(
        "unknown or unsupported topic config {name:?} (supported: cleanup.policy, \
         delete.retention.ms, min.compaction.lag.ms, max.compaction.lag.ms, \
         min.cleanable.dirty.ratio, retention.ms, retention.bytes, segment.bytes, \
         message.timestamp.type, compression.type, max.message.bytes, min.insync.replicas=1, \
         confluent.value.schema.validation, confluent.key.schema.validation, \
         message.format.version (ignored))"
    )
}

const MESSAGE_FORMAT_VERSION: &str = "message.format.version";

/// A Kafka version up to 3.x, as Kafka 3 parses `message.format.version`: up to four
/// numbers (`0.10.0`, `0.10.0.1`, `2.8`) with an optional `-IVn` suffix (`3.0-IV1`).
fn check_message_format_version(value: &str) -> Result<(), String> {
    let trimmed = value.trim();
    let numbers = match trimmed.split_once("-IV") {
        Some((numbers, iv)) if !iv.is_empty() && iv.bytes().all(|b| b.is_ascii_digit()) => numbers,
        Some(_) => "",
        None => trimmed,
    };
    let parts: Vec<&str> = numbers.split('.').collect();
    let numeric = parts
        .iter()
        .all(|p| !p.is_empty() && p.len() <= 4 && p.bytes().all(|b| b.is_ascii_digit()));
    // Kafka names 0.x versions by three numbers (0.10.0), later ones by two (2.8).
    let known = match parts.first().and_then(|m| m.parse::<u32>().ok()) {
        Some(0) => (3..=4).contains(&parts.len()),
        Some(1..=3) => (2..=4).contains(&parts.len()),
        _ => false,
    };
    match numeric && known {
        true => Ok(()),
        false => Err(format!(
            "{MESSAGE_FORMAT_VERSION} must be a Kafka version up to 3.x such as 0.10.0 or \
             3.0-IV1, got {value:?} (it is accepted and ignored: records are always written \
             in format v2)"
        )),
    }
}

/// Every topic's replication factor, and so the only `min.insync.replicas` it can meet.
const MIN_INSYNC_REPLICAS: u32 = 1;

/// A single-broker Kafka accepts `min.insync.replicas` up to the replication factor, which
/// is 1 here; more could never be met, and is refused.
fn check_min_insync_replicas(value: &str) -> Result<(), String> {
    match value.trim().parse::<i64>() {
        Ok(1) => Ok(()),
        Ok(n) if n > 1 => Err(format!(
            "min.insync.replicas {n} is more than the replication factor \
             {MIN_INSYNC_REPLICAS}: this is a single broker"
        )),
        _ => Err(format!(
            "min.insync.replicas must be a positive integer, got {value:?}"
        )),
    }
}

/// A boolean config, as Kafka reads one (`true` or `false`, in any case); `true` only in a
/// build with the schema registry, the only booleans here being the validation switches.
fn parse_flag(name: &str, value: &str) -> Result<bool, String> {
    let on = match value.trim() {
        v if v.eq_ignore_ascii_case("true") => true,
        v if v.eq_ignore_ascii_case("false") => false,
        _ => return Err(format!("{name} must be true or false, got {value:?}")),
    };
    if on && !cfg!(feature = "schema-registry") {
        return Err(format!("{name}: {}", super::SCHEMA_VALIDATION_UNAVAILABLE));
    }
    Ok(on)
}

/// A time in Kafka's range: 0 to `Long.MAX_VALUE` ms.
fn parse_ms(name: &str, value: &str) -> Result<u64, String> {
    match value.trim().parse::<i64>() {
        Ok(v) if v >= 0 => Ok(v as u64),
        _ => Err(format!(
            "{name} must be a number of milliseconds from 0 to {MAX_KAFKA_MS}, got {value:?}"
        )),
    }
}

/// Kafka's limit: a positive number, or -1 for none.
fn parse_limit(name: &str, value: &str) -> Result<Option<u64>, String> {
    match value.trim().parse::<i64>() {
        Ok(-1) => Ok(None),
        Ok(v) if v > 0 => Ok(Some(v as u64)),
        _ => Err(format!(
            "{name} must be -1 (unlimited) or positive, got {value:?}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_reports_defaults_and_set_values_report_the_topic() {
        let entries = describe(&TopicConfig::default());
        assert!(entries.iter().all(|e| e.is_default && !e.read_only));
        let retention = entries.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(retention.value, "-1");

        let mut config = TopicConfig::default();
        apply(&mut config, "retention.ms", Some("60000")).unwrap();
        apply(&mut config, "message.timestamp.type", Some("LogAppendTime")).unwrap();
        apply(&mut config, "cleanup.policy", Some("delete")).unwrap();
        apply(&mut config, "min.insync.replicas", Some("1")).unwrap();
        assert_eq!(config.retention_ms, Some(60_000));
        assert_eq!(config.timestamp_type, TimestampType::LogAppendTime);
        let entries = describe(&config);
        let retention = entries.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(
            (retention.value.as_str(), retention.source()),
            ("60000", SOURCE_TOPIC)
        );
        apply(&mut config, "retention.ms", Some("-1")).unwrap();
        assert_eq!(config.retention_ms, None);
        apply(&mut config, "message.timestamp.type", None).unwrap();
        assert_eq!(config.timestamp_type, TimestampType::CreateTime);
    }

    #[test]
    fn schema_validation_is_a_boolean_and_on_only_with_the_registry() {
        let mut config = TopicConfig::default();
        assert_eq!(
            apply(&mut config, VALUE_SCHEMA_VALIDATION, Some("False")),
            Ok(())
        );
        assert!(apply(&mut config, KEY_SCHEMA_VALIDATION, Some("yes")).is_err());
        let on = apply(&mut config, VALUE_SCHEMA_VALIDATION, Some("true"));
        if cfg!(feature = "schema-registry") {
            assert_eq!(on, Ok(()));
            assert!(config.value_schema_validation);
            let described = describe(&config);
            let entry = described
                .iter()
                .find(|e| e.name == VALUE_SCHEMA_VALIDATION)
                .unwrap();
            assert_eq!((entry.value.as_str(), entry.is_default), ("true", false));
            apply(&mut config, VALUE_SCHEMA_VALIDATION, None).unwrap();
            assert!(!config.value_schema_validation);
        } else {
            assert!(on.unwrap_err().contains("schema-registry"));
            assert!(!config.value_schema_validation);
        }
    }

    #[test]
    fn message_format_version_is_checked_as_kafka_3_does_then_ignored() {
        let mut config = TopicConfig::default();
        for value in [
            "0.10.0.0",
            "0.10.0",
            "0.8.2",
            "2.8",
            "3.0-IV1",
            " 0.11.0-IV2 ",
        ] {
            apply(&mut config, "message.format.version", Some(value)).unwrap();
        }
        apply(&mut config, "message.format.version", None).unwrap();
        assert_eq!(config, TopicConfig::default(), "nothing changes");
    }

    #[test]
    fn configs_that_cannot_be_honoured_are_refused_with_a_reason() {
        let mut config = TopicConfig::default();
        for (name, value) in [
            ("cleanup.policy", "compacted"),
            ("cleanup.policy", ""),
            ("delete.retention.ms", "-1"),
            ("min.compaction.lag.ms", "soon"),
            ("max.compaction.lag.ms", "0"),
            ("min.cleanable.dirty.ratio", "1.5"),
            ("min.cleanable.dirty.ratio", "half"),
            ("retention.ms", "0"),
            ("retention.bytes", "-2"),
            ("segment.bytes", "lots"),
            ("message.timestamp.type", "Now"),
            ("max.message.bytes", "-1"),
            ("max.message.bytes", "2147483648"),
            ("compression.type", "none"),
            ("min.insync.replicas", "2"),
            ("min.insync.replicas", "0"),
            ("min.insync.replicas", "one"),
            ("message.format.version", "4.0"),
            ("message.format.version", "0.10"),
            ("message.format.version", "latest"),
            ("message.format.version", "3.0-IV"),
            ("message.format.version", "1"),
            ("message.format.version", "0.10.0.0.0"),
        ] {
            let reason = apply(&mut config, name, Some(value)).unwrap_err();
            assert!(reason.contains(name), "{reason}");
        }
        assert_eq!(config, TopicConfig::default());
    }

    #[test]
    fn the_cleanup_policy_and_compaction_settings_are_described_and_applied() {
        let entries = describe(&TopicConfig::default());
        let value = |entries: &[Entry], name: &str| {
            let e = entries.iter().find(|e| e.name == name).unwrap();
            (e.value.clone(), e.source())
        };
        for (name, default) in [
            ("cleanup.policy", "delete"),
            ("delete.retention.ms", "86400000"),
            ("min.compaction.lag.ms", "0"),
            ("max.compaction.lag.ms", "9223372036854775807"),
            ("min.cleanable.dirty.ratio", "0.5"),
        ] {
            assert_eq!(value(&entries, name), (default.to_owned(), SOURCE_DEFAULT));
        }

        let mut config = TopicConfig::default();
        for (name, value) in [
            ("cleanup.policy", "delete, compact"),
            ("delete.retention.ms", "1000"),
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "20"),
            ("min.cleanable.dirty.ratio", "0.25"),
        ] {
            apply(&mut config, name, Some(value)).unwrap();
        }
        assert_eq!(config.cleanup_policy, CleanupPolicy::CompactDelete);
        assert_eq!(config.max_compaction_lag_ms, Some(20));
        let entries = describe(&config);
        for (name, set) in [
            ("cleanup.policy", "compact,delete"),
            ("delete.retention.ms", "1000"),
            ("min.compaction.lag.ms", "10"),
            ("max.compaction.lag.ms", "20"),
            ("min.cleanable.dirty.ratio", "0.25"),
        ] {
            assert_eq!(value(&entries, name), (set.to_owned(), SOURCE_TOPIC));
        }
        // Kafka's "no bound" is the default, and a reset returns every one to its default.
        apply(
            &mut config,
            "max.compaction.lag.ms",
            Some("9223372036854775807"),
        )
        .unwrap();
        assert_eq!(config.max_compaction_lag_ms, None);
        for name in [
            "cleanup.policy",
            "delete.retention.ms",
            "min.compaction.lag.ms",
            "min.cleanable.dirty.ratio",
        ] {
            apply(&mut config, name, None).unwrap();
        }
        assert_eq!(config, TopicConfig::default());
    }

    #[test]
    fn compression_type_and_max_message_bytes_are_described_set_and_reset() {
        let value = |config: &TopicConfig, name: &str| {
            let entries = describe(config);
            let e = entries.iter().find(|e| e.name == name).unwrap().clone();
            (e.value.clone(), e.source(), e.synonym.map(|s| s.0))
        };
        let default = TopicConfig::default();
        assert_eq!(
            value(&default, "compression.type"),
            ("producer".into(), SOURCE_DEFAULT, Some("compression.type"))
        );
        assert_eq!(
            value(&default, "max.message.bytes"),
            (
                (1u64 << 30).to_string(),
                SOURCE_DEFAULT,
                Some("message.max.bytes")
            )
        );
        let mut config = TopicConfig::default();
        apply(&mut config, "compression.type", Some("lz4")).unwrap();
        apply(&mut config, "max.message.bytes", Some("10000")).unwrap();
        assert_eq!(config.compression_type, CompressionType::Lz4);
        assert_eq!(config.max_message_bytes, Some(10_000));
        assert_eq!(value(&config, "compression.type").0, "lz4");
        assert_eq!(
            value(&config, "max.message.bytes"),
            ("10000".into(), SOURCE_TOPIC, Some("message.max.bytes"))
        );
        let log = config.log_config(crate::FsyncPolicy::Never, 100);
        assert_eq!(
            (log.recompress, log.max_batch_bytes),
            (
                Some(crate::storage::compression::Compression::Lz4),
                Some(10_000)
            )
        );
        apply(&mut config, "compression.type", None).unwrap();
        apply(&mut config, "max.message.bytes", None).unwrap();
        assert_eq!(config, TopicConfig::default());
        // The described default sent back leaves the topic without a limit of its own.
        let described = value(&config, "max.message.bytes").0;
        apply(&mut config, "max.message.bytes", Some(&described)).unwrap();
        assert_eq!(config, TopicConfig::default());
    }

    #[test]
    fn cleanup_policy_items_are_appended_and_subtracted_as_a_list() {
        let mut config = TopicConfig::default();
        change_list(&mut config, "cleanup.policy", ListOp::Append, "compact").unwrap();
        assert_eq!(config.cleanup_policy, CleanupPolicy::CompactDelete);
        change_list(&mut config, "cleanup.policy", ListOp::Subtract, "delete").unwrap();
        assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
        let empty = change_list(&mut config, "cleanup.policy", ListOp::Subtract, "compact");
        assert!(empty.unwrap_err().contains("empty"));
        assert!(change_list(&mut config, "retention.ms", ListOp::Append, "1").is_err());
        assert_eq!(config.cleanup_policy, CleanupPolicy::Compact);
    }
}
