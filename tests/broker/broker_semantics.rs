//! The broker's semantics through the blocking API: partitioning, poll and commit, long polls,
//! groups and rebalances, session timeouts, lag. Backpressure, retention and payloads are in the
//! `broker_semantics_flow` module. Each test owns a fresh data directory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{broker_with_topic, drain, log_end, partition_stats, produce_to};
use nanokafka::clock::ManualClock;
use nanokafka::partition_for_key;
use nanokafka::{Assignor, Error, NanoKafka, TopicConfig};

// ---- produce: where records land ----

#[test]
fn keyed_records_land_on_kafkas_murmur2_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(7));

    // Hard value: murmur2("21") = -973932308; toPositive = 1173551340; % 7 = 3.
    let expected_21 = ((-973_932_308i32 & 0x7fff_ffff) as u32) % 7;
    assert_eq!(expected_21, 3);
    assert_eq!(broker.produce_keyed("t", "21", &0u64).unwrap().partition, 3);

    for key in [
        "foobar",
        "abc",
        "user1",
        "user2",
        "",
        "a-little-bit-long-string",
    ] {
        let delivery = broker.produce_keyed("t", key, &1u64).unwrap();
        assert_eq!(
            delivery.partition,
            partition_for_key(key.as_bytes(), 7),
            "key {key:?}"
        );
    }
}

#[test]
fn same_key_goes_to_one_partition_in_produce_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(4));
    let deliveries: Vec<_> = (0..10u64)
        .map(|i| broker.produce_keyed("t", "user1", &i).unwrap())
        .collect();
    let partition = partition_for_key(b"user1", 4);
    assert!(deliveries.iter().all(|d| d.partition == partition));
    let offsets: Vec<u64> = deliveries.iter().map(|d| d.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());

    broker.join_group("t", "g", "m").unwrap();
    let batch = broker
        .poll_batch::<u64>("t", "g", "m", 100, Duration::ZERO)
        .unwrap();
    assert_eq!(
        batch.iter().map(|r| r.value).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    assert!(batch
        .iter()
        .all(|r| r.key.as_deref() == Some(&b"user1"[..])));
}

#[test]
fn keyless_records_round_robin_over_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    let deliveries: Vec<_> = (0..9u64)
        .map(|i| broker.produce("t", &i).unwrap())
        .collect();
    let first = deliveries[0].partition;
    for (i, d) in deliveries.iter().enumerate() {
        assert_eq!(d.partition, (first + i as u32) % 3, "record {i}");
        assert_eq!(d.offset, i as u64 / 3, "record {i}");
    }
    for p in 0..3 {
        assert_eq!(log_end(&broker, "t", p), 3);
    }
}

// ---- poll and commit ----

#[test]
fn poll_redelivers_the_same_record_until_it_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    broker.produce("t", &10u64).unwrap();
    broker.produce("t", &11u64).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    for _ in 0..3 {
        let r = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
        assert_eq!((r.offset, r.value), (0, 10));
    }
    broker.commit("t", "g", 0, 0).unwrap();
    let r = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((r.offset, r.value), (1, 11));
}

#[test]
fn commit_of_offset_o_makes_the_next_poll_return_o_plus_one() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    for i in 0..5u64 {
        broker.produce("t", &i).unwrap();
    }
    broker.join_group("t", "g", "m").unwrap();
    // Committing skips ahead: offset 2 and everything before it are processed.
    broker.commit("t", "g", 0, 2).unwrap();
    assert_eq!(partition_stats(&broker, "t", 0).committed["g"], 3);
    let r = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((r.offset, r.value), (3, 3));
    assert_eq!(broker.lag("t", "g").unwrap()[&0], 2);
}

#[test]
fn poll_batch_returns_consecutive_records_of_one_partition_from_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &[0, 1, 2, 3, 4]);
    produce_to(&broker, "t", 1, &[10, 11, 12]);
    broker.join_group("t", "g", "m").unwrap();

    let first = broker
        .poll_batch::<u64>("t", "g", "m", 3, Duration::ZERO)
        .unwrap();
    assert_eq!(first.len(), 3);
    let p = first[0].partition;
    assert!(first.iter().all(|r| r.partition == p), "one partition only");
    assert_eq!(
        first.iter().map(|r| r.offset).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );

    // From the committed offset: after committing offset 1 of p, p's next batch starts at 2.
    broker.commit("t", "g", p, 1).unwrap();
    let mut from_p = None;
    for _ in 0..2 {
        let batch = broker
            .poll_batch::<u64>("t", "g", "m", 100, Duration::ZERO)
            .unwrap();
        assert!(batch.iter().all(|r| r.partition == batch[0].partition));
        if batch[0].partition == p {
            from_p = Some(batch);
        }
    }
    let from_p = from_p.expect("two polls visit both partitions");
    let end = log_end(&broker, "t", p);
    assert_eq!(
        from_p.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (2..end).collect::<Vec<_>>()
    );
}

#[test]
fn poll_returns_none_at_once_when_there_is_nothing_to_read() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    broker.join_group("t", "g", "m").unwrap();
    let start = Instant::now();
    assert!(broker.poll::<u64>("t", "g", "m").unwrap().is_none());
    // Also when everything produced has been committed.
    broker.produce("t", &1u64).unwrap();
    assert_eq!(drain(&broker, "t", "g", "m").len(), 1);
    assert!(broker.poll::<u64>("t", "g", "m").unwrap().is_none());
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "an empty poll does not wait"
    );
}

#[test]
fn poll_round_robins_over_the_members_partitions_that_have_data() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    // Partition 1 stays empty: the two partitions with data must take turns.
    produce_to(&broker, "t", 0, &[0, 1, 2]);
    produce_to(&broker, "t", 2, &[20, 21, 22]);
    assert_eq!(
        broker.join_group("t", "g", "m").unwrap().partitions,
        vec![0, 1, 2]
    );
    let partitions: Vec<u32> = (0..6)
        .map(|_| {
            broker
                .poll::<u64>("t", "g", "m")
                .unwrap()
                .unwrap()
                .partition
        })
        .collect();
    assert!(
        partitions.windows(2).all(|w| w[0] != w[1]),
        "partitions with data alternate: {partitions:?}"
    );
    assert!(partitions.iter().all(|&p| p != 1));
}

// ---- long polls ----

#[test]
fn poll_timeout_is_woken_by_a_produce_from_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    // Three partitions: the poll waits on all of the member's partitions at once, and the
    // record goes to the last one.
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    broker.join_group("t", "g", "m").unwrap();
    let key = (0..)
        .map(|i| format!("k{i}"))
        .find(|k| partition_for_key(k.as_bytes(), 3) == 2)
        .unwrap();
    let producer = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            // Lets the poll park first so the wake-up path is what runs; if the poll has not
            // parked yet it finds the record at once, and the test holds all the same.
            std::thread::sleep(Duration::from_millis(100));
            broker.produce_keyed("t", key, &42u64).unwrap()
        })
    };
    let start = Instant::now();
    let record = broker
        .poll_timeout::<u64>("t", "g", "m", Duration::from_secs(30))
        .unwrap()
        .expect("woken with the record");
    let elapsed = start.elapsed();
    let delivery = producer.join().unwrap();
    assert_eq!(delivery.partition, 2);
    assert_eq!(
        (record.partition, record.offset, record.value),
        (2, delivery.offset, 42)
    );
    assert!(
        elapsed < Duration::from_secs(10),
        "woken by the produce, not by the 30 s timeout ({elapsed:?})"
    );
}

#[test]
fn poll_timeout_on_an_empty_topic_returns_none_after_its_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    broker.join_group("t", "g", "m").unwrap();
    let timeout = Duration::from_millis(200);
    let start = Instant::now();
    assert!(broker
        .poll_timeout::<u64>("t", "g", "m", timeout)
        .unwrap()
        .is_none());
    let elapsed = start.elapsed();
    assert!(elapsed >= timeout, "waited its timeout ({elapsed:?})");
    assert!(
        elapsed < Duration::from_secs(5),
        "not much longer ({elapsed:?})"
    );
}

// ---- groups ----

#[test]
fn every_group_receives_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    broker.join_group("t", "billing", "b1").unwrap();
    broker.join_group("t", "audit", "a1").unwrap();
    for i in 0..6u64 {
        broker.produce("t", &i).unwrap();
    }
    for (group, member) in [("billing", "b1"), ("audit", "a1")] {
        let mut values: Vec<u64> = drain(&broker, "t", group, member)
            .into_iter()
            .map(|(_, _, v)| v)
            .collect();
        values.sort_unstable();
        assert_eq!(values, (0..6).collect::<Vec<_>>(), "group {group}");
    }
}

#[test]
fn inside_a_group_each_partition_is_read_by_one_member() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(4));
    broker.join_group("t", "g", "a").unwrap();
    broker.join_group("t", "g", "b").unwrap();
    for i in 0..12u64 {
        broker.produce("t", &i).unwrap();
    }
    let mut all = Vec::new();
    for member in ["a", "b"] {
        let owned = broker.heartbeat("t", "g", member).unwrap().partitions;
        let seen = drain(&broker, "t", "g", member);
        assert_eq!(seen.len(), 6, "member {member}");
        assert!(seen.iter().all(|(p, _, _)| owned.contains(p)));
        all.extend(seen.into_iter().map(|(_, _, v)| v));
    }
    all.sort_unstable();
    assert_eq!(all, (0..12).collect::<Vec<_>>(), "each record exactly once");
}

#[test]
fn join_and_leave_rebalance_round_robin_over_members_sorted_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(4));
    let b = broker.join_group("t", "g", "b").unwrap();
    assert_eq!(b.partitions, vec![0, 1, 2, 3]);
    // "a" joins second but sorts first: it is dealt partition 0.
    let a = broker.join_group("t", "g", "a").unwrap();
    assert_eq!(a.generation, b.generation + 1);
    assert_eq!(a.partitions, vec![0, 2]);
    let b = broker.heartbeat("t", "g", "b").unwrap();
    assert_eq!((b.generation, b.partitions), (a.generation, vec![1, 3]));
    let group = &broker.stats().unwrap().topics["t"].groups["g"];
    assert_eq!(group.generation, a.generation);
    assert_eq!(group.assignment["a"], vec![0, 2]);

    broker.leave_group("t", "g", "a").unwrap();
    let b = broker.heartbeat("t", "g", "b").unwrap();
    assert_eq!(b.generation, a.generation + 1);
    assert_eq!(b.partitions, vec![0, 1, 2, 3]);
    assert!(matches!(
        broker.poll::<u64>("t", "g", "a"),
        Err(Error::UnknownMember { .. })
    ));
}

#[test]
fn members_beyond_the_partition_count_get_no_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    for member in ["a", "b", "c"] {
        broker.join_group("t", "g", member).unwrap();
    }
    for i in 0..4u64 {
        broker.produce("t", &i).unwrap();
    }
    assert_eq!(broker.heartbeat("t", "g", "a").unwrap().partitions, vec![0]);
    assert_eq!(broker.heartbeat("t", "g", "b").unwrap().partitions, vec![1]);
    assert!(broker
        .heartbeat("t", "g", "c")
        .unwrap()
        .partitions
        .is_empty());
    assert!(broker.poll::<u64>("t", "g", "c").unwrap().is_none());
}

#[test]
fn joining_twice_is_a_heartbeat_not_a_rebalance() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(3));
    broker.join_group("t", "g", "a").unwrap();
    let first = broker.join_group("t", "g", "b").unwrap();
    let again = broker.join_group("t", "g", "b").unwrap();
    assert_eq!(first, again);
    assert_eq!(
        broker.stats().unwrap().topics["t"].groups["g"].generation,
        first.generation
    );
}

#[test]
fn range_assignor_deals_contiguous_blocks_via_join_group_with() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(5));
    broker
        .join_group_with("t", "g", "b", Assignor::Range)
        .unwrap();
    let a = broker
        .join_group_with("t", "g", "a", Assignor::Range)
        .unwrap();
    assert_eq!(a.partitions, vec![0, 1, 2]);
    assert_eq!(
        broker.heartbeat("t", "g", "b").unwrap().partitions,
        vec![3, 4]
    );
}

#[test]
fn a_silent_member_is_evicted_after_the_session_timeout_and_can_rejoin() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .clock(Arc::new(clock.clone()))
        .session_timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    broker.join_group("t", "g", "alive").unwrap();
    let silent = broker.join_group("t", "g", "silent").unwrap();
    assert_eq!(silent.partitions, vec![1]);

    // "alive" speaks at 6 s; "silent" never does. At 12 s only "silent" is past 10 s.
    clock.advance(6_000);
    broker.heartbeat("t", "g", "alive").unwrap();
    clock.advance(6_000);
    let alive = broker.heartbeat("t", "g", "alive").unwrap();
    assert_eq!(alive.generation, silent.generation + 1);
    assert_eq!(alive.partitions, vec![0, 1]);

    assert!(matches!(
        broker.poll::<u64>("t", "g", "silent"),
        Err(Error::UnknownMember { ref member, .. }) if member == "silent"
    ));
    let back = broker.join_group("t", "g", "silent").unwrap();
    assert_eq!(back.generation, alive.generation + 1);
    assert_eq!(back.partitions, vec![1]);
}

// ---- lag ----

#[test]
fn lag_is_log_end_minus_the_later_of_committed_and_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(
        dir.path(),
        "t",
        TopicConfig::default().partitions(2).retention_size(3),
    );
    broker.join_group("t", "slow", "s").unwrap();
    broker.join_group("t", "fast", "f").unwrap();
    produce_to(&broker, "t", 0, &[0, 1]);
    broker.commit("t", "slow", 0, 0).unwrap(); // committed 1
    produce_to(&broker, "t", 0, &[2, 3, 4]); // log start 2, log end 5
    broker.commit("t", "fast", 0, 3).unwrap(); // committed 4
    produce_to(&broker, "t", 1, &[10]);

    let p0 = partition_stats(&broker, "t", 0);
    assert_eq!((p0.log_start_offset, p0.log_end_offset), (2, 5));
    let slow = broker.lag("t", "slow").unwrap();
    assert_eq!(slow.into_iter().collect::<Vec<_>>(), vec![(0, 3), (1, 1)]);
    let fast = broker.lag("t", "fast").unwrap();
    assert_eq!(fast.into_iter().collect::<Vec<_>>(), vec![(0, 1), (1, 1)]);
    assert_eq!(
        broker.stats().unwrap().topics["t"].groups["slow"].lag[&0],
        3
    );
}

#[test]
fn lag_of_an_unknown_group_is_unknown_group() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    broker.produce("t", &1u64).unwrap();
    assert!(matches!(
        broker.lag("t", "nobody"),
        Err(Error::UnknownGroup { ref group, .. }) if group == "nobody"
    ));
}

#[test]
fn a_group_behind_retention_continues_from_the_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().retention_size(2));
    broker.join_group("t", "g", "m").unwrap();
    for i in 0..3u64 {
        broker.produce("t", &i).unwrap();
    }
    broker.commit("t", "g", 0, 0).unwrap(); // committed 1, and then retention passes it
    for i in 3..6u64 {
        broker.produce("t", &i).unwrap();
    }
    assert_eq!(partition_stats(&broker, "t", 0).log_start_offset, 4);
    let r = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((r.offset, r.value), (4, 4));
    assert_eq!(drain(&broker, "t", "g", "m").len(), 2);
}

/// A long poll parked on an empty partition does not keep a produce to another member's
/// partition from waking the right consumer.
#[test]
fn poll_timeout_wakes_only_for_the_members_own_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    broker.join_group("t", "g", "a").unwrap(); // owns 0
    broker.join_group("t", "g", "b").unwrap(); // owns 1
    let waiter = {
        let broker = broker.clone();
        std::thread::spawn(move || {
            broker.poll_timeout::<u64>("t", "g", "a", Duration::from_millis(300))
        })
    };
    produce_to(&broker, "t", 1, &[7]);
    assert!(
        waiter.join().unwrap().unwrap().is_none(),
        "b's record is not a's"
    );
    assert_eq!(broker.poll::<u64>("t", "g", "b").unwrap().unwrap().value, 7);
}

#[test]
fn a_record_that_does_not_decode_is_reported_only_when_it_heads_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    for i in 0..10u64 {
        broker.produce("t", &i).unwrap();
    }
    broker.produce_raw("t", None, vec![0xc1]).unwrap(); // 0xc1: never valid MessagePack
    broker.produce("t", &11u64).unwrap();
    broker.join_group("t", "g", "m").unwrap();

    // The good records before the bad one come back; none is hidden behind it.
    let batch = broker
        .poll_batch::<u64>("t", "g", "m", 100, Duration::ZERO)
        .unwrap();
    let offsets: Vec<u64> = batch.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    broker.commit("t", "g", 0, 9).unwrap();

    // Now it heads the batch: reported, naming it. Committing it skips it.
    let err = broker
        .poll_batch::<u64>("t", "g", "m", 100, Duration::ZERO)
        .unwrap_err();
    assert!(matches!(err, Error::Decode { offset: 10, .. }), "{err:?}");
    broker.commit("t", "g", 0, 10).unwrap();
    let after = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!((after.offset, after.value), (11, 11));

    // The same for a Consumer: the good prefix, then the error, then past it by a commit.
    let mut consumer = broker.consumer::<u64>("t", "c", "m").unwrap();
    let offsets: Vec<u64> = consumer
        .poll_batch(100, Duration::ZERO)
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, (0..10).collect::<Vec<_>>());
    let err = consumer.poll_batch(100, Duration::ZERO).unwrap_err();
    assert!(matches!(err, Error::Decode { offset: 10, .. }), "{err:?}");
    consumer.commit_offset(0, 10).unwrap();
    let after = consumer.poll_batch(100, Duration::ZERO).unwrap();
    assert_eq!(after.iter().map(|r| r.offset).collect::<Vec<_>>(), [11]);
}
