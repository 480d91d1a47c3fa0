//! [`CompressionType`]: the codec a topic stores its batches with (Kafka's `compression.type`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::storage::compression::Compression;

/// The codec a topic's batches are stored with, Kafka's `compression.type`, in Kafka's names.
///
/// `Producer` (the default) keeps each batch as its producer compressed it; any other value
/// recompresses, at the append, every batch whose codec differs (a Kafka client's batch is
/// decompressed and compressed again with the topic's codec, a native batch is compressed),
/// as Kafka's broker does. Consumers read either the same way: the codec is in each batch.
/// Persisted as its Kafka name (`"zstd"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum CompressionType {
    /// Each batch as its producer sent it.
    #[default]
    Producer,
    /// Every batch stored uncompressed.
    Uncompressed,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl CompressionType {
    /// Every value, in Kafka's order of its documentation.
    pub const ALL: [CompressionType; 6] = [
        CompressionType::Uncompressed,
        CompressionType::Zstd,
        CompressionType::Lz4,
        CompressionType::Snappy,
        CompressionType::Gzip,
        CompressionType::Producer,
    ];

    /// Kafka's name of the value.
    pub fn kafka_name(self) -> &'static str {
        match self {
            CompressionType::Producer => "producer",
            CompressionType::Uncompressed => "uncompressed",
            CompressionType::Gzip => "gzip",
            CompressionType::Snappy => "snappy",
            CompressionType::Lz4 => "lz4",
            CompressionType::Zstd => "zstd",
        }
    }

    /// The codec every stored batch gets, `None` for `Producer` (each batch keeps its own).
    pub(crate) fn target(self) -> Option<Compression> {
        match self {
            CompressionType::Producer => None,
            CompressionType::Uncompressed => Some(Compression::None),
            CompressionType::Gzip => Some(Compression::Gzip),
            CompressionType::Snappy => Some(Compression::Snappy),
            CompressionType::Lz4 => Some(Compression::Lz4),
            CompressionType::Zstd => Some(Compression::Zstd),
        }
    }
}

impl fmt::Display for CompressionType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kafka_name())
    }
}

impl FromStr for CompressionType {
    type Err = String;

    /// Parses Kafka's name (`producer`, `uncompressed`, `gzip`, `snappy`, `lz4`, `zstd`).
    fn from_str(s: &str) -> Result<Self, String> {
        let name = s.trim();
        Self::ALL
            .into_iter()
            .find(|c| c.kafka_name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|c| c.kafka_name()).collect();
                format!(
                    "compression.type must be one of {}, got {s:?}",
                    names.join(", ")
                )
            })
    }
}

impl TryFrom<String> for CompressionType {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<CompressionType> for String {
    fn from(c: CompressionType) -> String {
        c.kafka_name().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kafka_name_parses_back_to_its_value_and_others_are_refused() {
        for c in CompressionType::ALL {
            assert_eq!(c.kafka_name().parse::<CompressionType>(), Ok(c));
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.kafka_name()));
            assert_eq!(serde_json::from_str::<CompressionType>(&json).unwrap(), c);
        }
        for bad in ["none", "ZSTD", "", "brotli"] {
            let reason = bad.parse::<CompressionType>().unwrap_err();
            assert!(
                reason.contains("producer, ") && reason.contains("zstd"),
                "{reason}"
            );
        }
        assert_eq!(CompressionType::Producer.target(), None);
        assert_eq!(
            CompressionType::Uncompressed.target(),
            Some(Compression::None)
        );
    }
}
