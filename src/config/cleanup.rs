//! How a topic's old records go (Kafka's `cleanup.policy`) and the settings of compaction:
//! [`CleanupPolicy`] and [`DirtyRatio`].
//!
//! What each policy does today: `Delete` applies the topic's retention (time, bytes, record
//! count). `Compact` applies none of it, and refuses records without a key (a compacted
//! topic keeps the latest record of each key, which a keyless record has none of).
//! `CompactDelete` does both. A compacted topic's partitions run the log cleaner, which
//! removes the records a later record of the same key supersedes, by the compaction settings
//! (`delete_retention_ms`, the lags, the dirty ratio): see `partition::cleaning`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What happens to a topic's old records (Kafka's `cleanup.policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CleanupPolicy {
    /// Kafka's `delete`: retention removes whole segments past the topic's limits.
    #[default]
    Delete,
    /// Kafka's `compact`: every record needs a key; retention removes nothing.
    Compact,
    /// Kafka's `compact,delete`: every record needs a key, and retention applies.
    CompactDelete,
}

impl CleanupPolicy {
    /// Whether the topic is compacted, and so refuses records without a key.
    pub fn compacts(self) -> bool {
        matches!(self, CleanupPolicy::Compact | CleanupPolicy::CompactDelete)
    }

    /// Whether retention (time, bytes, record count) removes records: Kafka applies it only
    /// with `delete` in the policy.
    pub fn deletes(self) -> bool {
        matches!(self, CleanupPolicy::Delete | CleanupPolicy::CompactDelete)
    }

    /// Kafka's value for the policy: `delete`, `compact` or `compact,delete`.
    pub fn kafka_name(self) -> &'static str {
        match self {
            CleanupPolicy::Delete => "delete",
            CleanupPolicy::Compact => "compact",
            CleanupPolicy::CompactDelete => "compact,delete",
        }
    }
}

impl fmt::Display for CleanupPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

/// Parses Kafka's list: `delete`, `compact`, and both in either order (`compact,delete`,
/// `delete, compact`); spaces around each item are ignored, a repeated item counts once.
impl FromStr for CleanupPolicy {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let (mut compact, mut delete) = (false, false);
        for item in value.split(',').map(str::trim) {
            match item {
                "compact" => compact = true,
                "delete" => delete = true,
                _ => {
                    return Err(format!(
                        "cleanup.policy must be delete, compact or compact,delete, got {value:?}"
                    ))
                }
            }
        }
        Ok(match (compact, delete) {
            (true, true) => CleanupPolicy::CompactDelete,
            (true, false) => CleanupPolicy::Compact,
            _ => CleanupPolicy::Delete,
        })
    }
}

/// Kafka's `min.cleanable.dirty.ratio`: the share of a compacted log not yet cleaned at
/// which the cleaner takes it on, 0 to 1.
///
/// Kept in basis points (1/10 000), not as an `f64`: [`crate::TopicConfig`] is `Eq` and is
/// compared to tell whether an alter changes anything, which a float would not allow (and
/// `0.1 + 0.2` style rounding would make unreliable). Four decimals are finer than any
/// ratio set in practice (Kafka's default is 0.5, common settings 0.01 to 0.9); a value
/// with more is rounded to the nearest basis point. The JSON of a topic config holds it as
/// the decimal number (`0.5`), as Kafka users write it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirtyRatio(u16);

impl DirtyRatio {
    /// Basis points in the whole (a ratio of 1).
    pub const SCALE: u16 = 10_000;
    /// Kafka's default, 0.5.
    pub const KAFKA_DEFAULT: DirtyRatio = DirtyRatio(Self::SCALE / 2);

    /// The ratio of `basis_points` / 10 000.
    ///
    /// # Errors
    /// The reason, when `basis_points` is above 10 000 (a ratio above 1).
    pub fn from_basis_points(basis_points: u16) -> Result<Self, String> {
        match basis_points <= Self::SCALE {
            true => Ok(DirtyRatio(basis_points)),
            false => Err(format!(
                "min.cleanable.dirty.ratio must be 0..=1, got {basis_points} basis points"
            )),
        }
    }

    /// The ratio `ratio` (0 to 1), rounded to the nearest basis point.
    ///
    /// # Errors
    /// The reason, when `ratio` is not a number from 0 to 1.
    pub fn from_f64(ratio: f64) -> Result<Self, String> {
        if !(0.0..=1.0).contains(&ratio) {
            return Err(format!(
                "min.cleanable.dirty.ratio must be 0..=1, got {ratio}"
            ));
        }
        // In range, so the product is 0..=10 000 and fits.
        Ok(DirtyRatio((ratio * f64::from(Self::SCALE)).round() as u16))
    }

    pub fn basis_points(self) -> u16 {
        self.0
    }

    pub fn as_f64(self) -> f64 {
        f64::from(self.0) / f64::from(Self::SCALE)
    }
}

impl Default for DirtyRatio {
    fn default() -> Self {
        DirtyRatio::KAFKA_DEFAULT
    }
}

/// As Kafka reports it: `0.5`, `0.01`, `1`, `0`.
impl fmt::Display for DirtyRatio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.as_f64())
    }
}

impl FromStr for DirtyRatio {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, String> {
        let ratio: f64 = value.trim().parse().map_err(|_| {
            format!("min.cleanable.dirty.ratio must be a number from 0 to 1, got {value:?}")
        })?;
        DirtyRatio::from_f64(ratio)
    }
}

impl Serialize for DirtyRatio {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(self.as_f64())
    }
}

impl<'de> Deserialize<'de> for DirtyRatio {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        DirtyRatio::from_f64(f64::deserialize(deserializer)?).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{TopicChanges, TopicConfig};
    use crate::error::Error;
    use crate::storage::RetentionPolicy;
    use crate::FsyncPolicy;

    #[test]
    fn kafkas_policy_lists_parse_in_any_order_with_spaces() {
        for (value, policy) in [
            ("delete", CleanupPolicy::Delete),
            ("compact", CleanupPolicy::Compact),
            ("compact,delete", CleanupPolicy::CompactDelete),
            ("delete,compact", CleanupPolicy::CompactDelete),
            (" compact , delete ", CleanupPolicy::CompactDelete),
            ("compact,compact", CleanupPolicy::Compact),
        ] {
            assert_eq!(value.parse::<CleanupPolicy>(), Ok(policy), "{value:?}");
        }
        for bad in ["", "compacted", "delete,", "compact;delete"] {
            let reason = bad.parse::<CleanupPolicy>().unwrap_err();
            assert!(reason.contains("cleanup.policy"), "{reason}");
        }
        assert_eq!(CleanupPolicy::CompactDelete.to_string(), "compact,delete");
        assert!(CleanupPolicy::Compact.compacts() && !CleanupPolicy::Compact.deletes());
        assert!(!CleanupPolicy::Delete.compacts() && CleanupPolicy::Delete.deletes());
    }

    #[test]
    fn a_dirty_ratio_is_zero_to_one_rounded_to_a_basis_point() {
        assert_eq!(DirtyRatio::default().to_string(), "0.5");
        assert_eq!("0.01".parse::<DirtyRatio>().unwrap().basis_points(), 100);
        assert_eq!("1".parse::<DirtyRatio>().unwrap().basis_points(), 10_000);
        assert_eq!("0".parse::<DirtyRatio>().unwrap().to_string(), "0");
        assert_eq!(
            "0.12345".parse::<DirtyRatio>().unwrap().basis_points(),
            1235
        );
        for bad in ["-0.1", "1.5", "NaN", "half"] {
            let reason = bad.parse::<DirtyRatio>().unwrap_err();
            assert!(reason.contains("min.cleanable.dirty.ratio"), "{reason}");
        }
        assert!(DirtyRatio::from_basis_points(10_001).is_err());
        assert!(serde_json::from_str::<DirtyRatio>("1.01").is_err());
        assert_eq!(
            serde_json::to_string(&DirtyRatio::default()).unwrap(),
            "0.5"
        );
    }

    #[test]
    fn the_defaults_are_kafkas() {
        let c = TopicConfig::default();
        assert_eq!(c.cleanup_policy, CleanupPolicy::Delete);
        assert_eq!(c.delete_retention_ms, 86_400_000);
        assert_eq!(c.min_compaction_lag_ms, 0);
        assert_eq!(c.max_compaction_lag_ms, None);
        assert_eq!(c.min_cleanable_dirty_ratio.to_string(), "0.5");
    }

    /// A topic config file written before the policy existed: no compaction fields at all.
    const OLD_FILE: &str = r#"{
  "partitions": 2,
  "max_size": null,
  "retention_size": null,
  "retention_bytes": null,
  "retention_ms": 5000,
  "backpressure": "Block",
  "segment_bytes": 67108864,
  "timestamp_type": "CreateTime"
}"#;

    #[test]
    fn an_old_config_file_reads_as_delete_with_kafkas_defaults_and_is_written_back_unchanged() {
        let path = std::path::Path::new("t.json");
        let old = TopicConfig::from_json(path, OLD_FILE.as_bytes()).unwrap();
        assert_eq!(old, TopicConfig::default().partitions(2).retention_ms(5000));
        assert_eq!(old.cleanup_policy, CleanupPolicy::Delete);
        assert_eq!(String::from_utf8(old.to_json()).unwrap(), OLD_FILE);
    }

    #[test]
    fn a_compacted_config_survives_its_file() {
        let config = TopicConfig::default()
            .cleanup_policy(CleanupPolicy::CompactDelete)
            .delete_retention_ms(1000)
            .min_compaction_lag_ms(10)
            .max_compaction_lag_ms(20)
            .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(100).unwrap());
        let json = String::from_utf8(config.to_json()).unwrap();
        assert!(
            json.contains(r#""cleanup_policy": "CompactDelete""#),
            "{json}"
        );
        assert!(
            json.contains(r#""min_cleanable_dirty_ratio": 0.01"#),
            "{json}"
        );
        let path = std::path::Path::new("t.json");
        assert_eq!(
            TopicConfig::from_json(path, json.as_bytes()).unwrap(),
            config
        );
    }

    #[test]
    fn validate_refuses_lags_that_cross_and_values_kafka_cannot_hold() {
        let field_of = |config: TopicConfig| match config.validate() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        let crossed = TopicConfig::default()
            .min_compaction_lag_ms(100)
            .max_compaction_lag_ms(99);
        assert_eq!(field_of(crossed), "min_compaction_lag_ms");
        let zero = TopicConfig::default().max_compaction_lag_ms(0);
        assert_eq!(field_of(zero), "max_compaction_lag_ms");
        let huge = TopicConfig::default().delete_retention_ms(u64::MAX);
        assert_eq!(field_of(huge), "delete_retention_ms");
        assert!(TopicConfig::default()
            .min_compaction_lag_ms(100)
            .max_compaction_lag_ms(100)
            .validate()
            .is_ok());
    }

    #[test]
    fn changes_set_the_policy_and_its_settings_and_keep_them_otherwise() {
        let current = TopicConfig::default().max_compaction_lag_ms(500);
        let next = TopicChanges::default()
            .cleanup_policy(CleanupPolicy::Compact)
            .delete_retention_ms(1)
            .min_compaction_lag_ms(2)
            .max_compaction_lag_ms(None)
            .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(0).unwrap())
            .apply_to(&current)
            .unwrap();
        assert_eq!(next.cleanup_policy, CleanupPolicy::Compact);
        assert_eq!(
            (next.delete_retention_ms, next.min_compaction_lag_ms),
            (1, 2)
        );
        assert_eq!(next.max_compaction_lag_ms, None);
        assert_eq!(next.min_cleanable_dirty_ratio.basis_points(), 0);
        let kept = TopicChanges::default()
            .retention_ms(Some(5))
            .apply_to(&next)
            .unwrap();
        assert_eq!(kept.cleanup_policy, CleanupPolicy::Compact);
        let crossed = TopicChanges::default()
            .min_compaction_lag_ms(600)
            .apply_to(&current);
        assert!(matches!(crossed, Err(Error::InvalidConfig { .. })));
    }

    #[test]
    fn retention_applies_only_with_delete_in_the_policy() {
        let limited = TopicConfig::default()
            .retention_ms(5000)
            .retention_bytes(4096)
            .retention_size(10);
        let limits = RetentionPolicy {
            records: Some(10),
            bytes: Some(4096),
            ms: Some(5000),
        };
        for (policy, retention) in [
            (CleanupPolicy::Delete, limits),
            (CleanupPolicy::Compact, RetentionPolicy::default()),
            (CleanupPolicy::CompactDelete, limits),
        ] {
            let log = limited
                .clone()
                .cleanup_policy(policy)
                .log_config(FsyncPolicy::Never, 100);
            assert_eq!(log.retention, retention, "{policy}");
        }
    }
}
