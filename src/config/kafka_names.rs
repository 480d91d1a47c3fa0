//! A topic's config in Kafka's names and units, both ways: what CreateTopics accepts and what
//! DescribeConfigs reports.
//!
//! | Kafka config | `TopicConfig` | Kafka's "unlimited" |
//! | --- | --- | --- |
//! | `cleanup.policy` | (always `delete`: no compaction) | |
//! | `retention.ms` | `retention_ms` | `-1` = `None` |
//! | `retention.bytes` | `retention_bytes` | `-1` = `None` |
//! | `segment.bytes` | `segment_bytes` | |
//! | `message.timestamp.type` | `timestamp_type` (`CreateTime`, `LogAppendTime`) | |
//! | `min.insync.replicas` | (always 1: one broker, so the replication factor is 1) | |
//!
//! NanoKafka's own settings without a Kafka name (`max_size`, `retention_size`,
//! `backpressure`) keep their defaults for topics made by Kafka clients. `max.message.bytes`
//! is refused: record sizes are limited broker-wide (`builder().max_record_bytes`).

use super::{TimestampType, TopicConfig};

/// Kafka's config sources (DescribeConfigs `config_source`).
pub const SOURCE_TOPIC: i8 = 1;
pub const SOURCE_STATIC_BROKER: i8 = 4;
pub const SOURCE_DEFAULT: i8 = 5;

/// Kafka's config types (DescribeConfigs v3+ `config_type`).
pub const TYPE_BOOLEAN: i8 = 1;
pub const TYPE_STRING: i8 = 2;
pub const TYPE_INT: i8 = 3;
pub const TYPE_LONG: i8 = 5;
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

/// A size or time limit in Kafka's units: `-1` for none.
pub(crate) fn limit(value: Option<u64>) -> String {
    value.map_or_else(|| "-1".to_owned(), |v| v.to_string())
}

/// `message.timestamp.type`'s value for `t`.
pub(crate) fn timestamp_type(t: TimestampType) -> String {
    match t {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    }
    .to_owned()
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
    vec![
        entry(
            "cleanup.policy",
            "delete".into(),
            "delete".into(),
            TYPE_LIST,
            "log.cleanup.policy",
        ),
        entry(
            "message.timestamp.type",
            timestamp_type(config.timestamp_type),
            timestamp_type(default.timestamp_type),
            TYPE_STRING,
            "log.message.timestamp.type",
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

/// Sets the Kafka config `name` to `value` (`None`: the default) in `config`. The values'
/// ranges are checked afterwards by `TopicConfig::validate`.
///
/// # Errors
/// Why the config cannot be set (Kafka's INVALID_CONFIG, with this as its message).
pub fn apply(config: &mut TopicConfig, name: &str, value: Option<&str>) -> Result<(), String> {
    let Some(value) = value else {
        let default = TopicConfig::default();
        match name {
            "cleanup.policy" | "min.insync.replicas" => {}
            "retention.ms" => config.retention_ms = default.retention_ms,
            "retention.bytes" => config.retention_bytes = default.retention_bytes,
            "segment.bytes" => config.segment_bytes = default.segment_bytes,
            "message.timestamp.type" => config.timestamp_type = default.timestamp_type,
            _ => return Err(unknown(name)),
        }
        return Ok(());
    };
    match name {
        "cleanup.policy" if value.trim() == "delete" => {}
        "cleanup.policy" => {
            return Err(format!(
                "cleanup.policy {value:?} is not supported: only \"delete\" (no compaction)"
            ))
        }
        "min.insync.replicas" => check_min_insync_replicas(value)?,
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
        "max.message.bytes" => {
            return Err(
                "max.message.bytes is not a topic config here: record sizes are \
                limited broker-wide (max_record_bytes)"
                    .to_owned(),
            )
        }
        _ => return Err(unknown(name)),
    }
    Ok(())
}

fn unknown(name: &str) -> String {
    format!(
        "unknown or unsupported topic config {name:?} (supported: cleanup.policy=delete, \
         retention.ms, retention.bytes, segment.bytes, message.timestamp.type, \
         min.insync.replicas=1)"
    )
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
    fn configs_that_cannot_be_honoured_are_refused_with_a_reason() {
        let mut config = TopicConfig::default();
        for (name, value) in [
            ("cleanup.policy", "compact"),
            ("retention.ms", "0"),
            ("retention.bytes", "-2"),
            ("segment.bytes", "lots"),
            ("message.timestamp.type", "Now"),
            ("max.message.bytes", "1000"),
            ("min.insync.replicas", "2"),
            ("min.insync.replicas", "0"),
            ("min.insync.replicas", "one"),
        ] {
            let reason = apply(&mut config, name, Some(value)).unwrap_err();
            assert!(reason.contains(name), "{reason}");
        }
        assert_eq!(config, TopicConfig::default());
    }
}
