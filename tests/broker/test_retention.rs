//! One of the original three tests, with every assertion made explicit: retention keeps exactly
//! `retention_size` records and a group behind it continues from the start.

use nanokafka::{NanoKafka, TopicConfig};

#[test]
fn retention() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("test", TopicConfig::default().retention_size(2))
        .unwrap();

    broker.produce("test", &1).unwrap();
    broker.produce("test", &2).unwrap();
    broker.produce("test", &3).unwrap();

    broker.join_group("test", "g1", "c1").unwrap();
    let record = broker
        .poll::<i32>("test", "g1", "c1")
        .unwrap()
        .expect("a record");
    assert_eq!(
        (record.offset, record.value),
        (1, 2),
        "offset 0 fell out of retention"
    );

    broker
        .commit("test", "g1", record.partition, record.offset)
        .unwrap();
    let lag = broker.lag("test", "g1").unwrap();
    assert_eq!(lag.into_iter().collect::<Vec<_>>(), vec![(0, 1)]);
}
