//! Setting a broker up: a topic to test against, records pinned to a partition.

use std::path::Path;

use nanokafka::{NanoKafka, TopicConfig};

/// A broker in `dir` with the default settings and one topic.
pub fn broker_with_topic(dir: &Path, topic: &str, config: TopicConfig) -> NanoKafka {
    let broker = NanoKafka::open(dir).unwrap();
    broker.create_topic(topic, config).unwrap();
    broker
}

/// Produces `values` to one partition (the raw batch path pins the partition).
pub fn produce_to(broker: &NanoKafka, topic: &str, partition: u32, values: &[u64]) {
    for value in values {
        let record = nanokafka::ProduceRecord {
            key: None,
            value: nanokafka::encode(value).unwrap(),
        };
        broker
            .produce_batch_raw(topic, Some(partition), vec![record])
            .unwrap();
    }
}
