//! `delete_group` and `delete_group_offsets` (Kafka's DeleteGroups, OffsetDelete): refused
//! while the group has members, then its commits, registrations and coordinator go; a
//! forgotten group no longer holds producers back, and a new group of the name starts over.

use std::time::Duration;

use nanokafka::{Backpressure, Error, NanoKafka, TopicConfig};

#[test]
fn a_group_is_deleted_once_its_members_left_and_then_holds_no_producer_back() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .block_timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let full = TopicConfig::default()
        .max_size(2)
        .backpressure(Backpressure::Block);
    broker.create_topic("t", full).unwrap();
    broker.create_topic("u", TopicConfig::default()).unwrap();
    broker.join_group("t", "abandoned", "m").unwrap();
    broker.join_group("u", "abandoned", "m").unwrap();
    broker.produce("t", &0u64).unwrap();
    broker.produce("t", &1u64).unwrap();
    broker.produce("u", &0u64).unwrap();
    // Another group has read and committed everything on `t`.
    broker.join_group("t", "live", "l").unwrap();
    broker.commit("t", "live", 0, 1).unwrap();
    let r = broker.poll::<u64>("u", "abandoned", "m").unwrap().unwrap();
    broker
        .commit("u", "abandoned", r.partition, r.offset)
        .unwrap();
    // The abandoned group's backlog on `t` is full: producers wait, then time out.
    assert!(matches!(
        broker.produce("t", &2u64),
        Err(Error::Timeout { .. })
    ));

    let refused = broker.delete_group("abandoned");
    assert!(
        matches!(refused, Err(Error::GroupNotEmpty { ref members, .. }) if members == &["m"]),
        "{refused:?}"
    );
    assert_eq!(
        broker.lag("u", "abandoned").unwrap().values().sum::<u64>(),
        0
    );
    broker.leave_group("t", "abandoned", "m").unwrap();
    broker.leave_group("u", "abandoned", "m").unwrap();

    assert!(broker.delete_group("abandoned").unwrap());
    assert!(!broker.delete_group("abandoned").unwrap(), "nothing left");
    broker
        .produce("t", &2u64)
        .expect("no group holds the topic back now");
    assert!(matches!(
        broker.lag("u", "abandoned"),
        Err(Error::UnknownGroup { .. })
    ));
    // Across a restart too; a new group of the name starts from the beginning.
    broker.shutdown().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert!(broker.stats().unwrap().topics["u"].partitions[0]
        .committed
        .is_empty());
    broker.join_group("u", "abandoned", "m2").unwrap();
    let again = broker.poll::<u64>("u", "abandoned", "m2").unwrap().unwrap();
    assert_eq!(again.offset, 0);
}

#[test]
fn a_groups_offsets_are_deleted_on_the_partitions_named_only() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    for p in 0..2 {
        broker
            .produce_batch_raw(
                "t",
                Some(p),
                vec![nanokafka::ProduceRecord {
                    key: None,
                    value: vec![1],
                }],
            )
            .unwrap();
    }
    broker.join_group("t", "g", "m").unwrap();
    broker.commit("t", "g", 0, 0).unwrap();
    broker.commit("t", "g", 1, 0).unwrap();
    assert!(matches!(
        broker.delete_group_offsets("t", "g", &[0]),
        Err(Error::GroupNotEmpty { .. })
    ));
    broker.leave_group("t", "g", "m").unwrap();
    assert!(matches!(
        broker.delete_group_offsets("t", "g", &[5]),
        Err(Error::UnknownPartition { partition: 5, .. })
    ));
    assert!(broker.delete_group_offsets("t", "g", &[0]).unwrap());
    assert!(!broker.delete_group_offsets("t", "g", &[0]).unwrap());
    let committed: Vec<bool> = broker.stats().unwrap().topics["t"]
        .partitions
        .iter()
        .map(|p| p.committed.contains_key("g"))
        .collect();
    assert_eq!(committed, [false, true]);
}
