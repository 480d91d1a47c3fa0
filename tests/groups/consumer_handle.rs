//! The `Consumer<T>` handle, black-box: in-memory positions (no redelivery inside a generation),
//! where reading resumes (committed offsets after a rebalance, a new consumer, a coordinator
//! restart; the seek offset after a seek), leaving on drop, and commits fenced by generation and
//! ownership. Liveness, assignors, start positions and stats are in the `consumer_groups` module.
//! Each test owns a fresh data directory.

use crate::common;

use std::time::Duration;

use crate::common::{broker_with_topic, produce_to};
use nanokafka::{Consumer, Error, NanoKafka, Record, TopicConfig};

fn committed(broker: &NanoKafka, group: &str, partition: u32) -> Option<u64> {
    broker.stats().unwrap().topics["t"].partitions[partition as usize]
        .committed
        .get(group)
        .copied()
}

fn offsets(records: &[Record<u64>]) -> Vec<(u32, u64)> {
    records.iter().map(|r| (r.partition, r.offset)).collect()
}

/// Polls `consumer` in batches of `max` until a poll comes back empty (no commits).
fn poll_until_empty(consumer: &mut Consumer<u64>, max: usize) -> Vec<Record<u64>> {
    let mut seen = Vec::new();
    loop {
        let batch = consumer.poll_batch(max, Duration::ZERO).unwrap();
        assert!(
            batch.len() <= max,
            "a batch of {} for max {max}",
            batch.len()
        );
        if batch.is_empty() {
            return seen;
        }
        seen.extend(batch);
    }
}

// ---- positions ----

#[test]
fn consecutive_polls_never_redeliver_inside_a_generation() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    for value in 0..20u64 {
        broker.produce("t", &value).unwrap();
    }
    let mut consumer = broker.consumer::<u64>("t", "g", "c").unwrap();
    let generation = consumer.assignment().generation;

    let seen = poll_until_empty(&mut consumer, 3);
    let mut values: Vec<u64> = seen.iter().map(|r| r.value).collect();
    values.sort_unstable();
    assert_eq!(
        values,
        (0..20).collect::<Vec<_>>(),
        "every record exactly once"
    );
    assert_eq!(consumer.assignment().generation, generation);
    assert_eq!(
        (consumer.position(0), consumer.position(1)),
        (Some(10), Some(10))
    );
    // Positions are the consumer's own: nothing was committed.
    assert_eq!(broker.lag("t", "g").unwrap().values().sum::<u64>(), 20);
    assert_eq!(committed(&broker, "g", 0), None);
}

#[test]
fn a_new_consumer_after_the_first_is_dropped_resumes_from_the_committed_offset() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    produce_to(&broker, "t", 0, &(0..10).collect::<Vec<_>>());
    let mut first = broker.consumer::<u64>("t", "g", "first").unwrap();
    let read = first.poll_batch(6, Duration::ZERO).unwrap();
    assert_eq!(read.len(), 6);
    first.commit(&read[3]).unwrap(); // committed 4; 4 and 5 read but not committed
    drop(first);

    let mut second = broker.consumer::<u64>("t", "g", "second").unwrap();
    let resumed = poll_until_empty(&mut second, 100);
    assert_eq!(
        offsets(&resumed),
        (4..10).map(|o| (0, o)).collect::<Vec<_>>()
    );
}

#[test]
fn dropping_a_consumer_rebalances_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(4));
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    let b = broker.consumer::<u64>("t", "g", "b").unwrap();
    let shared = a.heartbeat().unwrap().clone();
    assert_eq!(shared.partitions, vec![0, 2]);
    assert_eq!(b.assignment().partitions, vec![1, 3]);

    drop(b);
    let alone = a.heartbeat().unwrap().clone();
    assert_eq!(alone.generation, shared.generation + 1);
    assert_eq!(alone.partitions, vec![0, 1, 2, 3]);
    let stats = broker.stats().unwrap().topics["t"].groups["g"].clone();
    assert_eq!(stats.assignment.keys().collect::<Vec<_>>(), ["a"]);
    // b's partitions are a's now.
    produce_to(&broker, "t", 3, &[33]);
    let got = a.poll_batch(10, Duration::ZERO).unwrap();
    assert_eq!(
        got.iter()
            .map(|r| (r.partition, r.value))
            .collect::<Vec<_>>(),
        [(3, 33)]
    );
}

/// A consumer dropped inside an actix/tokio runtime, where the blocking leave is refused,
/// still leaves its group (the leave is sent without waiting).
#[test]
fn dropping_a_consumer_inside_a_runtime_still_leaves_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    let b = broker.consumer::<u64>("t", "g", "b").unwrap();
    let shared = a.heartbeat().unwrap().clone();
    std::thread::spawn(move || actix_rt::System::new().block_on(async move { drop(b) }))
        .join()
        .unwrap();
    let alone = a.heartbeat().unwrap().clone();
    assert_eq!(alone.generation, shared.generation + 1);
    assert_eq!(alone.partitions, vec![0, 1]);
}

#[test]
fn seek_moves_the_position_back_and_forward_and_refuses_unassigned_partitions() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &(0..10).collect::<Vec<_>>());
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    let _b = broker.consumer::<u64>("t", "g", "b").unwrap();
    a.heartbeat().unwrap(); // a owns partition 0 only

    let read = a.poll_batch(4, Duration::ZERO).unwrap();
    assert_eq!(offsets(&read), [(0, 0), (0, 1), (0, 2), (0, 3)]);
    a.seek(0, 1).unwrap();
    assert_eq!(a.position(0), Some(1));
    let back = a.poll_batch(2, Duration::ZERO).unwrap();
    assert_eq!(offsets(&back), [(0, 1), (0, 2)]);
    a.seek(0, 8).unwrap();
    let forward = poll_until_empty(&mut a, 100);
    assert_eq!(offsets(&forward), [(0, 8), (0, 9)]);

    let refused = a.seek(1, 0);
    assert!(
        matches!(refused, Err(Error::PartitionNotAssigned { partition: 1, ref member, .. }) if member == "a"),
        "{refused:?}"
    );
    assert_eq!(a.position(1), None);
    assert_eq!(committed(&broker, "g", 0), None, "seeking commits nothing");

    // A seek before the first poll is where that poll starts.
    let mut fresh = broker.consumer::<u64>("t", "other", "f").unwrap();
    fresh.seek(0, 5).unwrap();
    assert_eq!(
        offsets(&fresh.poll_batch(2, Duration::ZERO).unwrap()),
        [(0, 5), (0, 6)]
    );
}

#[test]
fn after_a_rebalance_a_consumer_resumes_from_the_committed_offsets_of_the_partitions_it_keeps() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &[0, 1, 2, 3, 4]);
    produce_to(&broker, "t", 1, &[10, 11, 12, 13, 14]);
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    assert_eq!(poll_until_empty(&mut a, 100).len(), 10);
    a.commit_offset(0, 1).unwrap(); // committed 2
    a.commit_offset(1, 2).unwrap(); // committed 3
    let before = a.assignment().generation;

    let b = broker.join_group("t", "g", "b").unwrap();
    assert_eq!(b.partitions, vec![1]);
    // a keeps partition 0 and reads its uncommitted records again; partition 1 is b's.
    let again = poll_until_empty(&mut a, 100);
    assert_eq!(offsets(&again), [(0, 2), (0, 3), (0, 4)]);
    assert_eq!(a.assignment().generation, before + 1);
    assert_eq!(a.assignment().partitions, vec![0]);
    let taken_over = broker
        .poll_batch::<u64>("t", "g", "b", 100, Duration::ZERO)
        .unwrap();
    assert_eq!(offsets(&taken_over), [(1, 3), (1, 4)]);
}

#[test]
fn a_consumer_rejoins_by_itself_after_its_coordinator_restarts() {
    common::within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
        produce_to(&broker, "t", 0, &[0, 1, 2, 3]);
        let mut consumer = broker.consumer::<u64>("t", "g", "c").unwrap();
        let read = consumer.poll_batch(3, Duration::ZERO).unwrap();
        consumer.commit(&read[0]).unwrap(); // committed 1

        futures::executor::block_on(broker.async_handle().crash_group_coordinator("t", "g"))
            .unwrap();
        // The crash answers once the handler panicked; the restart follows it on the
        // coordinator's thread. Asking the coordinator for its stats waits for the restart.
        let stats = broker.stats().unwrap().topics["t"].groups["g"].clone();
        assert_eq!(stats.restarts, 1);
        assert!(stats.assignment.is_empty(), "{stats:?}");

        let resumed = consumer.poll_batch(100, Duration::ZERO).unwrap();
        assert_eq!(offsets(&resumed), [(0, 1), (0, 2), (0, 3)]);
        assert_eq!(consumer.assignment().partitions, vec![0]);
        let stats = broker.stats().unwrap().topics["t"].groups["g"].clone();
        assert_eq!(stats.assignment.keys().collect::<Vec<_>>(), ["c"]);
    });
}

// ---- fencing ----

#[test]
fn a_commit_from_an_older_generation_or_for_a_lost_partition_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &[0, 1, 2, 3]);
    produce_to(&broker, "t", 1, &[10, 11, 12, 13]);
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    let old = poll_until_empty(&mut a, 100);
    assert_eq!(old.len(), 8);
    let (old_p0, old_p1): (Vec<_>, Vec<_>) = old.into_iter().partition(|r| r.partition == 0);
    a.commit(&old_p0[0]).unwrap(); // committed 1 in partition 0
    let stale_generation = a.assignment().generation;

    broker.join_group("t", "g", "b").unwrap(); // a keeps 0, b takes 1
    broker.commit("t", "g", 1, 0).unwrap(); // b's progress: committed 1 in partition 1

    let stale = a.commit(&old_p0[3]);
    assert!(
        matches!(stale, Err(Error::IllegalGeneration { generation, current, .. })
            if generation == stale_generation && current == stale_generation + 1),
        "{stale:?}"
    );
    assert_eq!(committed(&broker, "g", 0), Some(1));
    assert_eq!(broker.lag("t", "g").unwrap()[&0], 3);

    // Polling moves a to the new generation (and back to partition 0's committed offset).
    let fresh = poll_until_empty(&mut a, 100);
    assert_eq!(offsets(&fresh), [(0, 1), (0, 2), (0, 3)]);
    assert_eq!(a.assignment().partitions, vec![0]);
    let lost = a.commit(&old_p1[3]);
    assert!(
        matches!(lost, Err(Error::PartitionNotAssigned { partition: 1, .. })),
        "{lost:?}"
    );
    assert_eq!(committed(&broker, "g", 1), Some(1), "b's progress kept");
    assert_eq!(broker.lag("t", "g").unwrap()[&1], 3);

    a.commit(fresh.last().unwrap()).unwrap();
    assert_eq!(committed(&broker, "g", 0), Some(4));
    assert_eq!(broker.lag("t", "g").unwrap()[&0], 0);
}

// ---- fetch ahead: a poll sent before the caller asks serves it only if nothing moved ----

#[test]
fn records_read_ahead_before_a_rebalance_are_never_handed_out_for_a_partition_lost_in_it() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 1, &[10, 11, 12, 13, 14]);
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    // Only partition 1 has records: this poll reads it, and the one sent ahead reads on there.
    assert_eq!(
        offsets(&a.poll_batch(2, Duration::ZERO).unwrap()),
        [(1, 0), (1, 1)]
    );

    let b = broker.join_group("t", "g", "b").unwrap(); // a keeps 0, b takes 1
    assert_eq!(b.partitions, vec![1]);
    assert!(a.poll_batch(2, Duration::ZERO).unwrap().is_empty());
    assert_eq!(a.assignment().partitions, vec![0]);
    produce_to(&broker, "t", 0, &[0, 1]);
    assert_eq!(
        offsets(&poll_until_empty(&mut a, 100)),
        [(0, 0), (0, 1)],
        "a reads only the partition it kept"
    );
}

#[test]
fn a_smaller_poll_after_a_larger_one_returns_no_more_than_it_asks() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    produce_to(&broker, "t", 0, &(0..10).collect::<Vec<_>>());
    let mut c = broker.consumer::<u64>("t", "g", "c").unwrap();
    assert_eq!(c.poll_batch(4, Duration::ZERO).unwrap().len(), 4);
    assert_eq!(
        offsets(&c.poll_batch(2, Duration::ZERO).unwrap()),
        [(0, 4), (0, 5)]
    );
    assert_eq!(
        offsets(&poll_until_empty(&mut c, 100)),
        [(0, 6), (0, 7), (0, 8), (0, 9)]
    );
}

#[test]
fn a_commit_past_the_position_is_where_the_next_poll_starts() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default());
    produce_to(&broker, "t", 0, &(0..10).collect::<Vec<_>>());
    let mut c = broker.consumer::<u64>("t", "g", "c").unwrap();
    assert_eq!(c.poll_batch(2, Duration::ZERO).unwrap().len(), 2);
    c.commit_offset(0, 5).unwrap(); // committed 6: records 2..=5 are never read
    assert_eq!(
        offsets(&poll_until_empty(&mut c, 100)),
        [(0, 6), (0, 7), (0, 8), (0, 9)]
    );
}

/// A broker in `dir` with records 0 and 1 on partition 0 of `t`, and a consumer of group `g`
/// that has polled both (one full batch, up to the log end) and committed nothing.
fn consumer_past_two_records(dir: &std::path::Path) -> (NanoKafka, Consumer<u64>) {
    let broker = broker_with_topic(dir, "t", TopicConfig::default());
    produce_to(&broker, "t", 0, &[0, 1]);
    let mut c = broker.consumer::<u64>("t", "g", "c").unwrap();
    assert_eq!(c.poll_batch(2, Duration::ZERO).unwrap().len(), 2);
    (broker, c)
}

#[test]
fn a_poll_that_may_wait_waits_for_the_next_record_after_an_empty_read_ahead() {
    common::within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // A full batch, up to the log end; the poll sent ahead (almost always answered before
        // the produce below) finds nothing, and must not stand in for the wait of the next
        // call.
        let (broker, mut c) = consumer_past_two_records(dir.path());
        produce_to(&broker, "t", 0, &[2]);
        let waited = c.poll_batch(100, Duration::from_secs(30)).unwrap();
        assert_eq!(offsets(&waited), [(0, 2)]);
    });
}

#[test]
fn a_long_poll_answered_by_a_produce_reads_from_the_consumers_position_and_no_more_than_asked() {
    common::within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        // Read, not committed: the position (2) is ahead of the committed offset (none).
        let (broker, mut c) = consumer_past_two_records(dir.path());
        let producer = broker.clone();
        let produced = std::thread::spawn(move || {
            // Once the poll below is parked: the write's wake-up reads the poll's records.
            while producer.stats().unwrap().topics["t"].partitions[0].parked_polls == 0 {
                std::thread::yield_now();
            }
            // One batch, so one write makes all three readable.
            let batch = [2u64, 3, 4].map(|value| nanokafka::ProduceRecord {
                key: None,
                value: nanokafka::encode(&value).unwrap(),
            });
            producer
                .produce_batch_raw("t", Some(0), batch.to_vec())
                .unwrap();
        });
        let waited = c.poll_batch(2, Duration::from_secs(30)).unwrap();
        produced.join().unwrap();
        assert_eq!(offsets(&waited), [(0, 2), (0, 3)]);
        let stats = broker.stats().unwrap();
        assert_eq!(stats.topics["t"].partitions[0].parked_polls, 0, "answered");
        assert_eq!(offsets(&poll_until_empty(&mut c, 100)), [(0, 4)]);
        assert_eq!(committed(&broker, "g", 0), None, "polling commits nothing");
    });
}

#[test]
fn a_commit_for_a_partition_the_topic_lacks_is_refused_once_the_group_is_known() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), "t", TopicConfig::default().partitions(2));
    produce_to(&broker, "t", 0, &[0, 1]);
    let mut a = broker.consumer::<u64>("t", "g", "a").unwrap();
    // A poll and a commit: the handle knows the group's coordinator and commits straight to it.
    let read = poll_until_empty(&mut a, 100);
    a.commit(&read[0]).unwrap();
    let refused = a.commit_offset(2, 0);
    assert!(
        matches!(refused, Err(Error::UnknownPartition { partition: 2, .. })),
        "{refused:?}"
    );
    assert_eq!(committed(&broker, "g", 0), Some(1), "nothing changed");
    a.commit(&read[1]).unwrap();
    assert_eq!(committed(&broker, "g", 0), Some(2));
}
