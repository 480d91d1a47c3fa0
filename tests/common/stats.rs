//! A partition's numbers, read through `stats()`.

use nanokafka::{NanoKafka, PartitionStats};

/// One partition's numbers, from `stats()`.
pub fn partition_stats(broker: &NanoKafka, topic: &str, partition: u32) -> PartitionStats {
    broker.stats().unwrap().topics[topic].partitions[partition as usize].clone()
}

pub fn log_end(broker: &NanoKafka, topic: &str, partition: u32) -> u64 {
    partition_stats(broker, topic, partition).log_end_offset
}
