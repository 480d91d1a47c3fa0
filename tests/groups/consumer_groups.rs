//! Consumer groups in depth, black-box through the blocking API: liveness (heartbeats, session
//! timeouts on an injected clock, eviction and rejoin), the sticky assignor, where a new group
//! starts (`StartFrom`), and what `stats()` reports. The `Consumer<T>` handle's positions, seeks
//! and fenced commits are in the `consumer_handle` module. Each test owns a fresh data directory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::common::{broker_with_topic, produce_to};
use nanokafka::clock::ManualClock;
use nanokafka::{
    Assignor, Consumer, Error, GroupOptions, GroupStats, NanoKafka, Record, StartFrom, TopicConfig,
};

/// The session timeout of the brokers on a manual clock. Long in real time, so the
/// coordinator's eviction timer (which reads the manual clock) can only evict what the test
/// made silent by advancing that clock.
const SESSION: Duration = Duration::from_secs(30);
const SESSION_MS: u64 = 30_000;

/// A broker on `clock` with [`SESSION`] and one topic of `partitions` partitions.
fn broker_on_clock(dir: &tempfile::TempDir, clock: &ManualClock, partitions: u32) -> NanoKafka {
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .clock(Arc::new(clock.clone()))
        .session_timeout(SESSION)
        .build()
        .unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(partitions))
        .unwrap();
    broker
}

fn group_stats(broker: &NanoKafka, group: &str) -> GroupStats {
    broker.stats().unwrap().topics["t"].groups[group].clone()
}

fn committed(broker: &NanoKafka, group: &str, partition: u32) -> Option<u64> {
    broker.stats().unwrap().topics["t"].partitions[partition as usize]
        .committed
        .get(group)
        .copied()
}

/// Polls `consumer` in batches of `max` until a poll comes back empty (no commits).
fn poll_until_empty(consumer: &mut Consumer<u64>, max: usize) -> Vec<Record<u64>> {
    let mut seen = Vec::new();
    loop {
        let batch = consumer.poll_batch(max, Duration::ZERO).unwrap();
        if batch.is_empty() {
            return seen;
        }
        seen.extend(batch);
    }
}

fn values(records: &[Record<u64>]) -> Vec<u64> {
    let mut values: Vec<u64> = records.iter().map(|r| r.value).collect();
    values.sort_unstable();
    values
}

fn is_unknown_member<T: std::fmt::Debug>(result: Result<T, Error>, who: &str) -> bool {
    matches!(result, Err(Error::UnknownMember { ref member, .. }) if member == who)
}

// ---- liveness ----

#[test]
fn heartbeats_keep_a_member_alive_while_a_silent_one_is_evicted() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let broker = broker_on_clock(&dir, &clock, 2);
    broker.join_group("t", "g", "alive").unwrap();
    let silent = broker.join_group("t", "g", "silent").unwrap();
    let alive = broker.heartbeat("t", "g", "alive").unwrap();
    assert_eq!(
        (alive.generation, alive.partitions),
        (silent.generation, vec![0])
    );

    // "alive" speaks at 20 s and 40 s; "silent" never does. At 40 s only "silent" has been
    // quiet for longer than 30 s.
    clock.advance(20_000);
    let still = broker.heartbeat("t", "g", "alive").unwrap();
    assert_eq!(still.generation, silent.generation, "nobody evicted yet");
    clock.advance(20_000);
    let alone = broker.heartbeat("t", "g", "alive").unwrap();
    assert_eq!(alone.generation, silent.generation + 1);
    assert_eq!(alone.partitions, vec![0, 1]);
    assert_eq!(
        group_stats(&broker, "g").assignment,
        BTreeMap::from([("alive".to_owned(), vec![0, 1])])
    );

    assert!(is_unknown_member(
        broker.heartbeat("t", "g", "silent"),
        "silent"
    ));
    assert!(is_unknown_member(
        broker.poll::<u64>("t", "g", "silent"),
        "silent"
    ));
    assert!(is_unknown_member(
        broker.poll_batch::<u64>("t", "g", "silent", 10, Duration::ZERO),
        "silent"
    ));
    assert!(is_unknown_member(
        broker.leave_group("t", "g", "silent"),
        "silent"
    ));

    let back = broker.join_group("t", "g", "silent").unwrap();
    assert_eq!(back.generation, alone.generation + 1);
    assert_eq!(back.partitions, vec![1]);
    assert_eq!(
        broker.heartbeat("t", "g", "alive").unwrap(),
        nanokafka::Assignment {
            generation: back.generation,
            partitions: vec![0]
        }
    );
}

#[test]
fn polls_and_fenced_commits_count_as_signs_of_life() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let broker = broker_on_clock(&dir, &clock, 3);
    produce_to(&broker, "t", 1, &[7]);
    broker.join_group("t", "g", "poller").unwrap();
    let mut committer = broker.consumer::<u64>("t", "g", "committer").unwrap();
    broker.join_group("t", "g", "silent").unwrap();
    assert_eq!(committer.heartbeat().unwrap().partitions, vec![0]);
    // RoundRobin over (committer, poller, silent): the poller owns partition 1.
    assert_eq!(
        broker.heartbeat("t", "g", "poller").unwrap().partitions,
        vec![1]
    );
    let generation = committer.assignment().generation;

    clock.advance(SESSION_MS * 2 / 3);
    assert!(broker.poll::<u64>("t", "g", "poller").unwrap().is_some());
    produce_to(&broker, "t", 0, &[1]);
    let record = committer.poll_batch(1, Duration::ZERO).unwrap().remove(0);
    committer.commit(&record).unwrap();

    // Another two thirds: "silent" is past the timeout, the other two are not, because
    // their poll and commit (not heartbeats) counted.
    clock.advance(SESSION_MS * 2 / 3);
    assert!(broker.poll::<u64>("t", "g", "poller").unwrap().is_some());
    let after = committer.heartbeat().unwrap().clone();
    assert_eq!(after.generation, generation + 1, "only silent's eviction");
    let stats = group_stats(&broker, "g");
    assert_eq!(
        stats.assignment.keys().collect::<Vec<_>>(),
        ["committer", "poller"]
    );
}

#[test]
fn an_evicted_consumer_rejoins_on_its_next_poll_and_resumes_at_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let broker = broker_on_clock(&dir, &clock, 1);
    produce_to(&broker, "t", 0, &(0..10).collect::<Vec<_>>());
    let mut consumer = broker.consumer::<u64>("t", "g", "c").unwrap();
    let joined = consumer.assignment().generation;
    let batch = consumer.poll_batch(4, Duration::ZERO).unwrap();
    assert_eq!(values(&batch), [0, 1, 2, 3]);
    consumer.commit(&batch[1]).unwrap(); // committed 2; 2 and 3 read but not committed

    clock.advance(SESSION_MS + 1);
    assert!(is_unknown_member(broker.heartbeat("t", "g", "c"), "c"));
    assert!(is_unknown_member(consumer.heartbeat(), "c"));
    assert!(is_unknown_member(consumer.commit(&batch[3]), "c"));
    assert_eq!(committed(&broker, "g", 0), Some(2), "a refused commit");
    assert_eq!(broker.lag("t", "g").unwrap()[&0], 8);
    assert!(group_stats(&broker, "g").assignment.is_empty());

    // The next poll joins again (eviction and rejoin: two generations) and reads from the
    // committed offset, not from the position it had before the eviction.
    let resumed = consumer.poll_batch(3, Duration::ZERO).unwrap();
    assert_eq!(
        resumed.iter().map(|r| r.offset).collect::<Vec<_>>(),
        [2, 3, 4]
    );
    assert_eq!(consumer.assignment().generation, joined + 2);
    assert_eq!(consumer.assignment().partitions, vec![0]);
    assert_eq!(group_stats(&broker, "g").generation, joined + 2);
    consumer.commit(&resumed[2]).unwrap();
    assert_eq!(committed(&broker, "g", 0), Some(5));
    assert_eq!(
        consumer
            .poll_batch(1, Duration::ZERO)
            .unwrap()
            .iter()
            .map(|r| r.offset)
            .collect::<Vec<_>>(),
        [5]
    );
}

// ---- assignors ----

#[test]
fn the_sticky_assignor_lets_two_members_keep_two_partitions_each_when_a_third_joins() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(6));
    // An `Assignor` alone converts into `GroupOptions`; the second join spells it out.
    broker
        .join_group_with("t", "g", "a", Assignor::Sticky)
        .unwrap();
    broker
        .join_group_with(
            "t",
            "g",
            "b",
            GroupOptions::default().assignor(Assignor::Sticky),
        )
        .unwrap();
    let before = group_stats(&broker, "g");
    assert_eq!(before.assignment["a"].len(), 3);
    assert_eq!(before.assignment["b"].len(), 3);

    let c = broker
        .join_group_with("t", "g", "c", Assignor::Sticky)
        .unwrap();
    let after = group_stats(&broker, "g");
    assert_eq!(after.generation, before.generation + 1);
    assert_eq!(c.partitions, after.assignment["c"]);
    for member in ["a", "b"] {
        let now = broker.heartbeat("t", "g", member).unwrap().partitions;
        assert_eq!(now, after.assignment[member]);
        let kept = now
            .iter()
            .filter(|p| before.assignment[member].contains(p))
            .count();
        assert_eq!(
            (now.len(), kept),
            (2, 2),
            "{member}: {:?} -> {now:?}",
            before.assignment[member]
        );
    }
    let mut all: Vec<u32> = after.assignment.values().flatten().copied().collect();
    all.sort_unstable();
    assert_eq!(all, (0..6).collect::<Vec<_>>(), "one owner per partition");
}

// ---- where a new group starts ----

#[test]
fn a_latest_group_reads_only_what_is_produced_after_it_joined() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    for value in 0..5u64 {
        broker.produce("t", &value).unwrap();
    }
    let latest = GroupOptions::default().start(StartFrom::Latest);
    let mut late = broker
        .consumer_with::<u64>("t", "late", "m", latest)
        .unwrap();
    let mut early = broker.consumer::<u64>("t", "early", "m").unwrap();

    assert_eq!(
        broker.lag("t", "late").unwrap(),
        BTreeMap::from([(0, 0), (1, 0)])
    );
    assert_eq!(
        group_stats(&broker, "late").lag,
        BTreeMap::from([(0, 0), (1, 0)])
    );
    assert_eq!(broker.lag("t", "early").unwrap().values().sum::<u64>(), 5);
    assert!(late.poll_batch(100, Duration::ZERO).unwrap().is_empty());

    for value in 100..103u64 {
        broker.produce("t", &value).unwrap();
    }
    assert_eq!(values(&poll_until_empty(&mut late, 100)), [100, 101, 102]);
    assert_eq!(
        values(&poll_until_empty(&mut early, 100)),
        [0, 1, 2, 3, 4, 100, 101, 102]
    );
}

#[test]
fn joining_an_existing_group_with_other_options_is_invalid_config() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    let latest = GroupOptions::default().start(StartFrom::Latest);
    broker.join_group_with("t", "late", "a", latest).unwrap();
    broker.join_group("t", "early", "a").unwrap();

    let mismatches: [(&str, GroupOptions); 4] = [
        ("late", GroupOptions::default()),
        ("late", latest.assignor(Assignor::Range)),
        ("early", latest),
        ("early", Assignor::Sticky.into()),
    ];
    for (group, options) in mismatches {
        let joined = broker.join_group_with("t", group, "b", options);
        assert!(
            matches!(joined, Err(Error::GroupOptionsMismatch { existing, requested, .. })
                if requested == options && existing != options),
            "{group} with {options:?}: {joined:?}"
        );
        let stats = group_stats(&broker, group);
        assert_eq!(
            (stats.generation, stats.assignment.len()),
            (1, 1),
            "{group}"
        );
    }
    assert!(matches!(
        broker.consumer::<u64>("t", "late", "b"),
        Err(Error::GroupOptionsMismatch { .. })
    ));
    // The same options join fine.
    assert_eq!(
        broker
            .join_group_with("t", "late", "b", latest)
            .unwrap()
            .generation,
        2
    );
}

// ---- stats ----

#[test]
fn stats_report_generation_assignment_and_lag_per_partition_after_commits() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    produce_to(&broker, "t", 0, &[0, 1, 2, 3]);
    produce_to(&broker, "t", 1, &[10, 11]);
    broker.join_group("t", "g", "b").unwrap();
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    let stats = group_stats(&broker, "g");
    assert_eq!(stats.generation, 2);
    assert_eq!(
        stats.assignment,
        BTreeMap::from([("a".to_owned(), vec![0, 2]), ("b".to_owned(), vec![1])])
    );
    assert_eq!(stats.lag, BTreeMap::from([(0, 4), (1, 2), (2, 0)]));

    let first = a.poll_batch(2, Duration::ZERO).unwrap();
    assert_eq!(values(&first), [0, 1]);
    a.commit(&first[1]).unwrap();
    broker.commit("t", "g", 1, 0).unwrap();
    let stats = group_stats(&broker, "g");
    assert_eq!(stats.lag, BTreeMap::from([(0, 2), (1, 1), (2, 0)]));
    assert_eq!(stats.lag, broker.lag("t", "g").unwrap());

    drop(a); // leaves: b takes everything
    let stats = group_stats(&broker, "g");
    assert_eq!(stats.generation, 3);
    assert_eq!(
        stats.assignment,
        BTreeMap::from([("b".to_owned(), vec![0, 1, 2])])
    );
    assert_eq!(
        stats.lag,
        BTreeMap::from([(0, 2), (1, 1), (2, 0)]),
        "commits outlive the member"
    );
}

// ---- rebalances and parked polls ----

/// A poll parked before a rebalance must not return a partition its member lost meanwhile:
/// the new owner reads it too, and the record would be processed twice in one generation.
#[test]
fn a_poll_parked_across_a_rebalance_returns_only_partitions_its_member_still_owns() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(4));
    assert_eq!(
        broker.join_group("t", "g", "m1").unwrap().partitions,
        [0, 1, 2, 3]
    );
    let parked = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            broker.poll_batch::<u64>("t", "g", "m1", 10, Duration::from_secs(20))
        })
    };
    let m2 = broker.join_group("t", "g", "m2").unwrap();
    assert_eq!((m2.generation, m2.partitions), (2, vec![1, 3]));
    // m2's partitions get data first; m1's parked poll must not take it.
    produce_to(&broker, "t", 1, &[1]);
    produce_to(&broker, "t", 3, &[3]);
    produce_to(&broker, "t", 2, &[2]);
    let got = parked.join().unwrap().unwrap();
    assert!(!got.is_empty(), "partition 2 is m1's and has data");
    for record in &got {
        assert!(
            [0, 2].contains(&record.partition),
            "m1 was handed partition {} of m2's",
            record.partition
        );
    }
    let m2_read: Vec<u32> = (0..2)
        .map(|_| broker.poll::<u64>("t", "g", "m2").unwrap().unwrap())
        .map(|r| {
            broker.commit("t", "g", r.partition, r.offset).unwrap();
            r.partition
        })
        .collect();
    assert_eq!(
        m2_read
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        [1, 3].into()
    );
}

/// Commits from a handle that has seen its group exist go straight to the partition; the
/// rules stay the broker's: an unknown group, a partition the topic does not have, a deleted
/// topic, and a re-created topic that does not know the group are refused as before, and a
/// grown topic's new partition takes commits.
#[test]
fn commits_keep_their_rules_when_they_take_the_direct_route() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &[1, 2, 3]);
    produce_to(&broker, "t", 1, &[4]);
    broker.join_group("t", "g", "m").unwrap();
    // The first commit asks the broker; the next ones go direct.
    for offset in 0..3 {
        broker.commit("t", "g", 0, offset).unwrap();
        assert_eq!(committed(&broker, "g", 0), Some(offset + 1));
    }
    assert!(matches!(
        broker.commit("t", "g", 0, 3),
        Err(Error::OffsetOutOfRange { offset: 3, .. })
    ));
    assert_eq!(
        committed(&broker, "g", 0),
        Some(3),
        "a refused commit changes nothing"
    );
    assert!(matches!(
        broker.commit("t", "other", 0, 0),
        Err(Error::UnknownGroup { ref group, .. }) if group == "other"
    ));
    assert!(matches!(
        broker.commit("t", "g", 2, 0),
        Err(Error::UnknownPartition { partition: 2, .. })
    ));

    broker
        .alter_topic("t", nanokafka::TopicChanges::default().partitions(3))
        .unwrap();
    produce_to(&broker, "t", 2, &[5]);
    broker.commit("t", "g", 2, 0).unwrap();
    assert_eq!(committed(&broker, "g", 2), Some(1));

    broker.delete_topic("t").unwrap();
    assert!(matches!(
        broker.commit("t", "g", 0, 0),
        Err(Error::UnknownTopic { .. })
    ));
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    produce_to(&broker, "t", 0, &[6]);
    assert!(
        matches!(
            broker.commit("t", "g", 0, 0),
            Err(Error::UnknownGroup { .. })
        ),
        "the re-created topic does not know the group"
    );
    assert_eq!(committed(&broker, "g", 0), None);
}

/// Polls from a handle that has seen its group exist go straight to the group's coordinator;
/// what they answer stays the broker's: records in order, `UnknownMember` for a stranger,
/// `InvalidArgument` for zero records, `UnknownTopic` once the topic is deleted, and
/// `UnknownMember` on a re-created topic that does not know the group.
#[test]
fn polls_keep_their_rules_when_they_take_the_direct_route() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    produce_to(&broker, "t", 0, &[1, 2, 3]);
    broker.join_group("t", "g", "m").unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        let records = broker
            .poll_batch_raw("t", "g", "m", 1, Duration::ZERO)
            .unwrap();
        let record = records[0].clone().decode::<u64>("t").unwrap();
        seen.push(record.value);
        broker.commit("t", "g", 0, record.offset).unwrap();
    }
    assert_eq!(seen, [1, 2, 3]);
    assert!(broker
        .poll_batch_raw("t", "g", "m", 10, Duration::ZERO)
        .unwrap()
        .is_empty());
    assert!(matches!(
        broker.poll_batch_raw("t", "g", "stranger", 1, Duration::ZERO),
        Err(Error::UnknownMember { .. })
    ));
    assert!(matches!(
        broker.poll_batch_raw("t", "g", "m", 0, Duration::ZERO),
        Err(Error::InvalidArgument { .. })
    ));

    broker.delete_topic("t").unwrap();
    assert!(matches!(
        broker.poll_batch_raw("t", "g", "m", 1, Duration::ZERO),
        Err(Error::UnknownTopic { .. })
    ));
    broker.create_topic("t", TopicConfig::default()).unwrap();
    assert!(matches!(
        broker.poll_batch_raw("t", "g", "m", 1, Duration::ZERO),
        Err(Error::UnknownMember { .. })
    ));
}
