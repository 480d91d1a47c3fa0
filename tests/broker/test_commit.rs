//! One of the original three tests: without a commit, a poll returns the same record.

use nanokafka::{NanoKafka, TopicConfig};

#[test]
fn no_commit_reprocess() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("test", TopicConfig::default()).unwrap();
    broker.produce("test", "data").unwrap();
    broker.join_group("test", "g1", "c1").unwrap();

    let first = broker
        .poll::<String>("test", "g1", "c1")
        .unwrap()
        .expect("a record");
    // Do NOT commit.
    let second = broker
        .poll::<String>("test", "g1", "c1")
        .unwrap()
        .expect("the same record");
    assert_eq!(
        (first.partition, first.offset),
        (second.partition, second.offset)
    );
    assert_eq!(second.value, "data");

    // After the commit the group moves on.
    broker
        .commit("test", "g1", first.partition, first.offset)
        .unwrap();
    assert!(broker.poll::<String>("test", "g1", "c1").unwrap().is_none());
}
