//! Consumer groups through `Consumer<T>`: members split a topic's partitions, a member
//! joining or leaving rebalances them, and no record goes to two members of one generation.

use std::collections::BTreeSet;

use nanokafka::{Assignor, Consumer, GroupOptions, Record};

use crate::target::{on_every_target, Target};
use crate::wait::{self, each_partition_once};

const PARTITIONS: u32 = 4;

/// Produces `values`, each keyed by itself (so they spread over the partitions).
fn produce(t: &Target, topic: &str, values: std::ops::Range<u64>) {
    for v in values {
        t.broker().produce_keyed(topic, v.to_string(), &v).unwrap();
    }
}

/// Members read `values` between them, each only from its own partitions, and commit what
/// they read, so a later rebalance hands over no uncommitted record.
fn read_and_commit(
    members: &mut [&mut Consumer<u64>],
    assignments: &[Vec<u32>],
    values: std::ops::Range<u64>,
) {
    let read = wait::read_all(members, values.clone().count());
    let mut all = BTreeSet::new();
    for ((member, mine), owned) in members.iter_mut().zip(&read).zip(assignments) {
        for record in mine {
            assert!(
                owned.contains(&record.partition),
                "{record:?} outside {owned:?}"
            );
            assert!(all.insert(record.value), "{} read twice", record.value);
        }
        commit_last_per_partition(member, mine);
    }
    assert_eq!(all, values.collect::<BTreeSet<_>>());
}

fn commit_last_per_partition(member: &mut Consumer<u64>, read: &[Record<u64>]) {
    let mut last = std::collections::BTreeMap::new();
    for record in read {
        last.insert(record.partition, record);
    }
    for record in last.values() {
        member.commit(record).unwrap();
    }
}

/// Two members split four partitions two and two; a third joining takes some of them (2, 1,
/// 1); when it leaves, the two share all four again. Records produced in each phase are read
/// once, by the owner of their partition. Members join while the others poll, as each would
/// on its own thread (see `difference_join_waits_for_the_group`).
fn consumers_of_one_group_split_the_partitions(t: &Target) {
    let topic = t.new_topic("split", PARTITIONS);
    let broker = t.broker();
    let mut a = broker.consumer::<u64>(&topic, "g", "a").unwrap();
    let mut b = wait::join_while_polling(broker, (&topic, "g", "b"), &mut [&mut a]);
    let two = wait::settle(
        &mut [&mut a, &mut b],
        "two members with two partitions each",
        |s| each_partition_once(s, PARTITIONS) && s.iter().all(|p| p.len() == 2),
    );
    produce(t, &topic, 0..40);
    read_and_commit(&mut [&mut a, &mut b], &two, 0..40);

    let mut c = wait::join_while_polling(broker, (&topic, "g", "c"), &mut [&mut a, &mut b]);
    let three = wait::settle(
        &mut [&mut a, &mut b, &mut c],
        "three members: 2, 1, 1",
        |s| {
            let mut sizes: Vec<usize> = s.iter().map(Vec::len).collect();
            sizes.sort_unstable();
            each_partition_once(s, PARTITIONS) && sizes == [1, 1, 2]
        },
    );
    produce(t, &topic, 40..80);
    read_and_commit(&mut [&mut a, &mut b, &mut c], &three, 40..80);

    drop(c);
    let two_again = wait::settle(&mut [&mut a, &mut b], "two members after the leave", |s| {
        each_partition_once(s, PARTITIONS) && s.iter().all(|p| p.len() == 2)
    });
    produce(t, &topic, 80..120);
    read_and_commit(&mut [&mut a, &mut b], &two_again, 80..120);
    assert_eq!(
        broker.lag(&topic, "g").unwrap().values().sum::<u64>(),
        0,
        "everything read was committed"
    );
}

/// Two groups on one topic each read every record (pub/sub), independently of each other's
/// commits.
fn every_group_reads_every_record(t: &Target) {
    let topic = t.new_topic("pubsub", 2);
    produce(t, &topic, 0..20);
    let broker = t.broker();
    for group in ["audit", "billing"] {
        let mut member = broker.consumer::<u64>(&topic, group, "m").unwrap();
        let read = wait::read(&mut member, 20);
        let values: BTreeSet<u64> = read.iter().map(|r| r.value).collect();
        assert_eq!(values, (0..20).collect(), "{group}");
        commit_last_per_partition(&mut member, &read);
    }
    assert_eq!(
        broker.lag(&topic, "audit").unwrap().values().sum::<u64>(),
        0
    );
}

/// `Assignor::Sticky` (librdkafka's `cooperative-sticky` on Kafka): a member joining takes
/// partitions only from the members above their fair share, so each first member keeps at
/// least one of the two partitions it had.
fn sticky_members_keep_their_partitions_when_one_joins(t: &Target) {
    let options = GroupOptions::default().assignor(Assignor::Sticky);
    let topic = t.new_topic("sticky", PARTITIONS);
    let broker = t.broker();
    let mut a = broker
        .consumer_with::<u64>(&topic, "g", "a", options)
        .unwrap();
    let mut b = wait::join_with_while_polling(broker, (&topic, "g", "b"), options, &mut [&mut a]);
    let two = wait::settle(&mut [&mut a, &mut b], "two members, two each", |s| {
        each_partition_once(s, PARTITIONS) && s.iter().all(|p| p.len() == 2)
    });
    let mut c =
        wait::join_with_while_polling(broker, (&topic, "g", "c"), options, &mut [&mut a, &mut b]);
    let three = wait::settle(
        &mut [&mut a, &mut b, &mut c],
        "three members: 2, 1, 1",
        |s| {
            let mut sizes: Vec<usize> = s.iter().map(Vec::len).collect();
            sizes.sort_unstable();
            each_partition_once(s, PARTITIONS) && sizes == [1, 1, 2]
        },
    );
    for (before, after) in two.iter().zip(&three) {
        assert!(
            after.iter().all(|p| before.contains(p)),
            "a first member got a partition it did not have: {two:?} -> {three:?}"
        );
    }
}

on_every_target!(
    sticky_members_keep_their_partitions_when_one_joins,
    consumers_of_one_group_split_the_partitions,
    every_group_reads_every_record,
);
