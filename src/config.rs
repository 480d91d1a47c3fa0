//! Configuration types shared by the storage layer and the broker. Plain data, no actix.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::record::MAX_RECORD_BYTES_LIMIT;

/// When appended bytes are forced to stable storage (spec §5).
///
/// Whatever the policy, an append returns only after its bytes are handed to the operating
/// system in one `write` call, so an acknowledged record survives a process crash (`kill -9`,
/// a panic). The policy decides what survives a power loss or a kernel crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsyncPolicy {
    /// Leave write-back to the OS (Linux: dirty pages usually reach disk within ~30 s).
    Never,
    /// `fdatasync` dirty partitions at this interval: a power loss can cost at most the
    /// last interval of acknowledged records. The default is `Interval(1 s)`.
    Interval(Duration),
    /// `fdatasync` before acknowledging: nothing acknowledged is lost even on power loss.
    Always,
}

impl Default for FsyncPolicy {
    /// `Interval(1 s)`: a process crash loses nothing, a power loss at most ~1 s of records.
    fn default() -> Self {
        FsyncPolicy::Interval(Duration::from_secs(1))
    }
}

/// What a producer meets when a partition's backlog reaches `max_size` (spec §4).
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
/// no retention, [`Backpressure::Block`], 64 MiB segments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TopicConfig {
    /// Number of partitions, fixed at creation.
    pub partitions: u32,
    /// Backlog (records not yet committed by the slowest group) at which producers meet
    /// backpressure; `None`: unbounded.
    pub max_size: Option<u64>,
    /// Keep at most this many records per partition.
    pub retention_size: Option<u64>,
    /// Keep at most this many bytes of record frames per partition.
    pub retention_bytes: Option<u64>,
    /// Keep records for at most this many milliseconds after they were appended.
    pub retention_ms: Option<u64>,
    /// What producers meet at `max_size`.
    pub backpressure: Backpressure,
    /// A segment file is rolled once it reaches this size.
    pub segment_bytes: u64,
}

/// Kafka's default segment size is 1 GiB; 64 MiB keeps deletion by retention fine-grained and
/// a crash scan of the active segment short (~10 ms), at the cost of more files.
pub const DEFAULT_SEGMENT_BYTES: u64 = 64 << 20;
/// Partition directories are named `<topic>_<partition>`: with a 249-byte topic name, four
/// digits are what fit in a 255-byte file name.
pub const MAX_PARTITIONS: u32 = 10_000;
/// Below this a segment would hold a handful of records and every append would roll.
pub const MIN_SEGMENT_BYTES: u64 = 4096;
/// Kafka's maximum `segment.bytes` (`i32::MAX`). Index entries store a frame's byte position
/// in a `u32`, so a segment must stay addressable by one: a segment rolls before a batch that
/// would take it past `segment_bytes` (or holds that one batch alone), so with this cap every
/// frame starts below 2 GiB.
pub const MAX_SEGMENT_BYTES: u64 = i32::MAX as u64;

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

    /// Checks that every value can work.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<()> {
        if self.partitions == 0 || self.partitions > MAX_PARTITIONS {
            return Err(Error::InvalidConfig(format!(
                "partitions must be 1..={MAX_PARTITIONS}, got {}",
                self.partitions
            )));
        }
        for (field, value) in [
            ("max_size", self.max_size),
            ("retention_size", self.retention_size),
            ("retention_bytes", self.retention_bytes),
            ("retention_ms", self.retention_ms),
        ] {
            if value == Some(0) {
                return Err(Error::InvalidConfig(format!(
                    "{field} must be at least 1 when set, got 0"
                )));
            }
        }
        if !(MIN_SEGMENT_BYTES..=MAX_SEGMENT_BYTES).contains(&self.segment_bytes) {
            return Err(Error::InvalidConfig(format!(
                "segment_bytes must be {MIN_SEGMENT_BYTES}..={MAX_SEGMENT_BYTES}, got {}",
                self.segment_bytes
            )));
        }
        Ok(())
    }
}

/// Checks a maximum record size against the format's hard limit.
///
/// # Errors
/// [`Error::InvalidConfig`] when `bytes` is 0 or above [`MAX_RECORD_BYTES_LIMIT`].
pub fn validate_max_record_bytes(bytes: usize) -> Result<()> {
    if bytes == 0 || bytes > MAX_RECORD_BYTES_LIMIT {
        return Err(Error::InvalidConfig(format!(
            "max record size must be 1..={MAX_RECORD_BYTES_LIMIT} bytes, got {bytes}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matches_the_spec() {
        let c = TopicConfig::default();
        assert_eq!(c.partitions, 1);
        assert_eq!(c.max_size, None);
        assert_eq!(c.retention_size, None);
        assert_eq!(c.backpressure, Backpressure::Block);
        assert!(c.validate().is_ok());
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
                matches!(&rejected, Err(Error::InvalidConfig(m)) if m.contains("segment_bytes")),
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
}
