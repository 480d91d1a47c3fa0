//! Topic administration: `create_topic` makes the partitions asked for, and a second create
//! of the name is `TopicExists`, changing nothing.

use nanokafka::{partition_for_key, Error, TopicConfig};

use crate::target::{on_every_target, Target};
use crate::wait;

/// A key that `partition_for_key` sends to `partition` of `partitions`.
fn key_for(partition: u32, partitions: u32) -> String {
    (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_for_key(k.as_bytes(), partitions) == partition)
        .expect("some key lands on every partition")
}

/// A created topic has exactly the partitions asked for: records go to the last one, not
/// past it; creating it again is `TopicExists` and leaves its records and partitions alone.
fn create_topic_makes_the_partitions_and_refuses_a_second_create(t: &Target) {
    let broker = t.broker();
    let topic = t.topic("created");
    broker
        .create_topic(&topic, TopicConfig::default().partitions(3))
        .unwrap();
    let d = broker.produce_keyed(&topic, key_for(2, 3), &1u64).unwrap();
    assert_eq!((d.partition, d.offset), (2, 0));
    let mut batch = nanokafka::RecordBatch::new();
    batch.push(&2u64).unwrap();
    let refused = broker.produce_batch(&topic, Some(3), batch);
    assert!(
        matches!(refused, Err(Error::UnknownPartition { partition: 3, .. })),
        "{refused:?}"
    );

    let again = broker.create_topic(&topic, TopicConfig::default().partitions(5));
    match again {
        Err(Error::TopicExists { topic: named }) => assert_eq!(named, topic),
        other => panic!("a second create gave {other:?}"),
    }
    // Still three partitions, the record still there.
    let d = broker.produce_keyed(&topic, key_for(2, 3), &3u64).unwrap();
    assert_eq!((d.partition, d.offset), (2, 1));
    let mut consumer = broker.consumer::<u64>(&topic, "g", "m").unwrap();
    let values: Vec<u64> = wait::read(&mut consumer, 2)
        .iter()
        .map(|r| r.value)
        .collect();
    assert_eq!(values, [1, 3]);
}

on_every_target!(create_topic_makes_the_partitions_and_refuses_a_second_create);
