//! Helpers of the broker tests.

use nanokafka::NanoKafka;

#[path = "../common/client_batch.rs"]
pub mod client_batch;
#[path = "../common/compacted.rs"]
pub mod compacted;
#[path = "../common/read.rs"]
mod read;
#[path = "../common/setup.rs"]
mod setup;
#[path = "../common/stats.rs"]
mod stats;
#[path = "../common/watchdog.rs"]
mod watchdog;

pub use read::read_topic;
pub use setup::{broker_with_topic, produce_to};
pub use stats::{log_end, partition_stats};
pub use watchdog::within;

/// Polls and commits until `member` sees nothing more; returns (partition, offset, value).
pub fn drain(broker: &NanoKafka, topic: &str, group: &str, member: &str) -> Vec<(u32, u64, u64)> {
    let mut seen = Vec::new();
    while let Some(r) = broker.poll::<u64>(topic, group, member).unwrap() {
        broker.commit(topic, group, r.partition, r.offset).unwrap();
        seen.push((r.partition, r.offset, r.value));
    }
    seen
}
