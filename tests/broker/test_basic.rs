//! One of the original three tests: produce, join, poll, commit, lag.

use nanokafka::{NanoKafka, TopicConfig};

#[test]
fn basic_produce_consume() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path().join("data")).unwrap();
    broker
        .create_topic("test", TopicConfig::default().partitions(1))
        .unwrap();

    broker.produce("test", "hello").unwrap();
    broker.join_group("test", "group1", "consumer1").unwrap();

    let record = broker
        .poll::<String>("test", "group1", "consumer1")
        .unwrap()
        .expect("a record");
    assert_eq!(record.value, "hello");

    broker
        .commit("test", "group1", record.partition, record.offset)
        .unwrap();
    assert_eq!(broker.lag("test", "group1").unwrap()[&0], 0);
    broker.shutdown().unwrap();
}
