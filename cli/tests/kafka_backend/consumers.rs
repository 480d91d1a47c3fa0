//! The `Consumer<T>` handle: commits that a later member of the group resumes after, `seek`,
//! and `lag` before and after commits.

use std::collections::BTreeMap;

use nanokafka::{Error, RecordBatch};

use crate::target::{on_every_target, Target};
use crate::wait;

/// Produces `values` to `partition` in one pinned batch.
fn produce_to(t: &Target, topic: &str, partition: u32, values: std::ops::Range<u64>) {
    let mut batch = RecordBatch::new();
    for v in values {
        batch.push(&v).unwrap();
    }
    t.broker()
        .produce_batch(topic, Some(partition), batch)
        .unwrap();
}

/// A member reads, commits a record and leaves; the next member of the group starts right
/// after that commit (not at the start, not where the first one stopped reading).
fn a_new_member_resumes_after_the_groups_commit(t: &Target) {
    let topic = t.new_topic("resume", 1);
    produce_to(t, &topic, 0, 0..10);
    let mut first = t.broker().consumer::<u64>(&topic, "g", "first").unwrap();
    let read = wait::read(&mut first, 6);
    let fourth = read.iter().find(|r| r.offset == 3).expect("offset 3 read");
    first.commit(fourth).unwrap();
    drop(first);
    assert_eq!(
        t.broker().lag(&topic, "g").unwrap(),
        BTreeMap::from([(0, 6)])
    );

    let mut second = t.broker().consumer::<u64>(&topic, "g", "second").unwrap();
    let read = wait::read(&mut second, 6);
    let offsets: Vec<u64> = read.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (4..10).collect::<Vec<_>>());
    let values: Vec<u64> = read.iter().map(|r| r.value).collect();
    assert_eq!(values, (4..10).collect::<Vec<_>>());
}

/// The same resumption from another client (on Kafka another connection, as another process
/// would be): the commit is the group's, kept by the broker.
fn a_commit_is_seen_by_another_client(t: &Target) {
    let topic = t.new_topic("resume-elsewhere", 1);
    produce_to(t, &topic, 0, 0..5);
    let mut first = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    let read = wait::read(&mut first, 5);
    first.commit(&read[1]).unwrap();
    drop(first);

    let other = t.another_client();
    assert_eq!(other.lag(&topic, "g").unwrap(), BTreeMap::from([(0, 3)]));
    let mut second = other.consumer::<u64>(&topic, "g", "m").unwrap();
    let offsets: Vec<u64> = wait::read(&mut second, 3)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [2, 3, 4]);
}

/// `seek` moves the next read of a partition backwards or forwards; a partition the member
/// does not own is refused.
fn seek_moves_the_next_read(t: &Target) {
    let topic = t.new_topic("seek", 1);
    produce_to(t, &topic, 0, 0..10);
    let mut consumer = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    assert_eq!(wait::read(&mut consumer, 10).len(), 10);
    assert_eq!(consumer.position(0), Some(10));

    consumer.seek(0, 3).unwrap();
    let offsets: Vec<u64> = wait::read(&mut consumer, 7)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, (3..10).collect::<Vec<_>>());

    consumer.seek(0, 8).unwrap();
    let offsets: Vec<u64> = wait::read(&mut consumer, 2)
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [8, 9]);

    let refused = consumer.seek(7, 0);
    assert!(
        matches!(
            refused,
            Err(Error::PartitionNotAssigned { partition: 7, .. })
        ),
        "{refused:?}"
    );
}

/// `lag` is per partition the records after the group's commit: all of them before any
/// commit, fewer after each, 0 once everything is committed.
fn lag_before_and_after_commits(t: &Target) {
    let topic = t.new_topic("lag", 2);
    let mut consumer = t.broker().consumer::<u64>(&topic, "g", "m").unwrap();
    produce_to(t, &topic, 0, 0..3);
    produce_to(t, &topic, 1, 0..5);
    let lag = |t: &Target| t.broker().lag(&topic, "g").unwrap();
    assert_eq!(lag(t), BTreeMap::from([(0, 3), (1, 5)]));

    let read = wait::read(&mut consumer, 8);
    assert_eq!(
        lag(t),
        BTreeMap::from([(0, 3), (1, 5)]),
        "reading commits nothing"
    );
    consumer.commit_offset(0, 1).unwrap();
    assert_eq!(lag(t), BTreeMap::from([(0, 1), (1, 5)]));
    let last_of_1 = read
        .iter()
        .filter(|r| r.partition == 1)
        .max_by_key(|r| r.offset);
    consumer.commit(last_of_1.unwrap()).unwrap();
    assert_eq!(lag(t), BTreeMap::from([(0, 1), (1, 0)]));
    consumer.commit_offset(0, 2).unwrap();
    assert_eq!(lag(t), BTreeMap::from([(0, 0), (1, 0)]));

    produce_to(t, &topic, 1, 5..7);
    assert_eq!(
        lag(t),
        BTreeMap::from([(0, 0), (1, 2)]),
        "new records count"
    );
}

on_every_target!(
    a_new_member_resumes_after_the_groups_commit,
    a_commit_is_seen_by_another_client,
    seek_moves_the_next_read,
    lag_before_and_after_commits,
);
