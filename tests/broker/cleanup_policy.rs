//! A topic's cleanup policy as a producer and a reader meet it: a compacted topic refuses
//! records without a key (every produce path, nothing of the batch written, an alter
//! followed by the next produce and by those it finds parked), and retention applies only
//! with `delete` in the policy.

use std::sync::Arc;
use std::time::Duration;

use nanokafka::clock::ManualClock;
use nanokafka::{
    Backpressure, CleanupPolicy, Error, NanoKafka, ProduceRecord, RecordBatch, TopicChanges,
    TopicConfig,
};

use crate::common::{partition_stats, within};

fn log_ends(broker: &NanoKafka, topic: &str) -> Vec<u64> {
    let stats = broker.stats().unwrap();
    stats.topics[topic]
        .partitions
        .iter()
        .map(|p| p.log_end_offset)
        .collect()
}

fn log_start(broker: &NanoKafka, topic: &str) -> u64 {
    broker.stats().unwrap().topics[topic].partitions[0].log_start_offset
}

/// The keyless records' indexes a `KeyRequired` names.
fn keyless_indexes<T: std::fmt::Debug>(result: nanokafka::Result<T>) -> Vec<u32> {
    match result {
        Err(Error::KeyRequired { topic, indexes, .. }) => {
            assert_eq!(topic, "c");
            indexes
        }
        other => panic!("expected KeyRequired, got {other:?}"),
    }
}

#[test]
fn a_compacted_topic_refuses_keyless_records_on_every_produce_path_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let config = TopicConfig::default()
        .partitions(3)
        .cleanup_policy(CleanupPolicy::Compact);
    broker.create_topic("c", config).unwrap();

    assert_eq!(keyless_indexes(broker.produce("c", &1u32)), [0]);
    assert_eq!(
        keyless_indexes(broker.produce_raw("c", None, b"v".to_vec())),
        [0]
    );
    let typed = broker.topic::<u32>("c");
    assert_eq!(keyless_indexes(typed.produce(&7)), [0]);
    // A batch spread over the three partitions is refused whole, before it is split.
    let mixed = vec![
        ProduceRecord {
            key: Some(b"a".to_vec()),
            value: b"1".to_vec(),
        },
        ProduceRecord {
            key: None,
            value: b"2".to_vec(),
        },
        ProduceRecord {
            key: Some(b"b".to_vec()),
            value: b"3".to_vec(),
        },
        ProduceRecord {
            key: None,
            value: b"4".to_vec(),
        },
    ];
    assert_eq!(
        keyless_indexes(broker.produce_batch_raw("c", None, mixed.clone())),
        [1, 3]
    );
    assert_eq!(
        keyless_indexes(broker.produce_batch_raw("c", Some(2), mixed.clone())),
        [1, 3]
    );
    let mut batch = RecordBatch::new();
    batch.push_raw(None, b"x");
    match broker.produce_batch("c", Some(1), batch) {
        Err(e @ Error::KeyRequired { .. }) => {
            let message = e.to_string();
            assert!(message.contains("compacted"), "{message}");
            assert!(message.contains("nothing of it was written"), "{message}");
        }
        other => panic!("expected KeyRequired, got {other:?}"),
    }
    assert_eq!(log_ends(&broker, "c"), [0, 0, 0], "nothing was written");

    // Keyed records go through, typed or raw.
    typed.produce_keyed("k", &1).unwrap();
    broker.produce_raw("c", Some(b"k"), b"v".to_vec()).unwrap();
    let keyed: Vec<ProduceRecord> = mixed.into_iter().filter(|r| r.key.is_some()).collect();
    broker.produce_batch_raw("c", None, keyed).unwrap();
    assert_eq!(log_ends(&broker, "c").iter().sum::<u64>(), 4);
}

#[test]
fn the_produce_after_an_alter_of_the_policy_follows_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("c", TopicConfig::default()).unwrap();
    // A produce first, so the handle has the topic's route cached when the policy changes.
    broker.produce("c", &1u32).unwrap();
    let compact = TopicChanges::default().cleanup_policy(CleanupPolicy::CompactDelete);
    let altered = broker.alter_topic("c", compact).unwrap();
    assert_eq!(altered.cleanup_policy, CleanupPolicy::CompactDelete);
    // Refused before it is routed (no partition named): the handle's cached route was
    // dropped by the alter, not just caught by the partition.
    assert!(matches!(
        broker.produce("c", &2u32),
        Err(Error::KeyRequired {
            partition: None,
            ..
        })
    ));
    // Another handle of the same broker, and the policy after a reopen.
    assert_eq!(keyless_indexes(broker.clone().produce("c", &2u32)), [0]);
    broker.shutdown().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert_eq!(keyless_indexes(broker.produce("c", &2u32)), [0]);
    assert_eq!(log_ends(&broker, "c"), [1]);
    broker
        .alter_topic(
            "c",
            TopicChanges::default().cleanup_policy(CleanupPolicy::Delete),
        )
        .unwrap();
    broker.produce("c", &3u32).unwrap();
    assert_eq!(log_ends(&broker, "c"), [2]);
}

/// Produces parked by `Block` before an alter to `compact` follow its key rule: the one
/// without a key is refused (`KeyRequired`, nothing written) when the alter lands, and the
/// keyed one behind it is written as soon as the same alter frees room; neither waits for
/// its block timeout.
#[test]
fn produces_parked_before_an_alter_to_compact_follow_its_key_rule() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .block_timeout(Duration::from_secs(600))
            .build()
            .unwrap();
        let full = TopicConfig::default()
            .max_size(1)
            .backpressure(Backpressure::Block);
        broker.create_topic("t", full).unwrap();
        broker
            .produce_raw("t", Some(b"k"), b"first".to_vec())
            .unwrap();
        let produce = |key: Option<&'static [u8]>, value: &'static [u8]| {
            let broker = broker.clone();
            std::thread::spawn(move || broker.produce_raw("t", key, value.to_vec()))
        };
        let keyless = produce(None, b"keyless");
        while partition_stats(&broker, "t", 0).parked_produces == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // Parked too, or queued in the partition's lane behind the first.
        let keyed = produce(Some(b"k"), b"keyed");
        let changes = TopicChanges::default()
            .cleanup_policy(CleanupPolicy::Compact)
            .max_size(None);
        broker.alter_topic("t", changes).unwrap();
        let refused = keyless.join().unwrap();
        assert!(
            matches!(refused, Err(Error::KeyRequired { partition: Some(0), ref indexes, .. }) if indexes == &[0]),
            "{refused:?}"
        );
        assert_eq!(keyed.join().unwrap().unwrap().offset, 1);
        assert_eq!(
            log_ends(&broker, "t"),
            [2],
            "nothing without a key was written"
        );
        assert_eq!(partition_stats(&broker, "t", 0).parked_produces, 0);
    });
}

/// A broker whose clock the test moves, with topic `t` under `policy` and retention of
/// 5 s and 2 records.
fn retained(dir: &std::path::Path, policy: CleanupPolicy) -> (NanoKafka, ManualClock) {
    let clock = ManualClock::new(1_700_000_000_000);
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .clock(Arc::new(clock.clone()))
        .build()
        .unwrap();
    let config = TopicConfig::default()
        .cleanup_policy(policy)
        .retention_ms(5_000)
        .retention_size(2);
    broker.create_topic("t", config).unwrap();
    (broker, clock)
}

/// Four keyed records, the first three 10 s before the last: past `retention_ms`, and more
/// than `retention_size`.
fn produce_old_and_new(broker: &NanoKafka, clock: &ManualClock) {
    for i in 0..3u32 {
        broker.produce_keyed("t", format!("k{i}"), &i).unwrap();
    }
    clock.advance(10_000);
    broker.produce_keyed("t", "k3", &3u32).unwrap();
}

#[test]
fn a_compact_only_topic_keeps_records_past_its_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, clock) = retained(dir.path(), CleanupPolicy::Compact);
    produce_old_and_new(&broker, &clock);
    clock.advance(60_000);
    broker.produce_keyed("t", "k4", &4u32).unwrap();
    assert_eq!(log_start(&broker, "t"), 0, "retention removed nothing");
    broker.join_group("t", "g", "m").unwrap();
    let read: Vec<u32> = std::iter::from_fn(|| broker.poll::<u32>("t", "g", "m").unwrap())
        .take(5)
        .map(|r| {
            broker.commit("t", "g", r.partition, r.offset).unwrap();
            r.value
        })
        .collect();
    assert_eq!(read, [0, 1, 2, 3, 4]);
}

#[test]
fn compact_delete_and_delete_apply_retention_and_an_alter_adding_delete_applies_it_at_once() {
    for policy in [CleanupPolicy::CompactDelete, CleanupPolicy::Delete] {
        let dir = tempfile::tempdir().unwrap();
        let (broker, clock) = retained(dir.path(), policy);
        produce_old_and_new(&broker, &clock);
        assert_eq!(log_start(&broker, "t"), 3, "{policy}: the old records went");
    }
    let dir = tempfile::tempdir().unwrap();
    let (broker, clock) = retained(dir.path(), CleanupPolicy::Compact);
    produce_old_and_new(&broker, &clock);
    assert_eq!(log_start(&broker, "t"), 0);
    let both = TopicChanges::default().cleanup_policy(CleanupPolicy::CompactDelete);
    broker.alter_topic("t", both).unwrap();
    assert_eq!(log_start(&broker, "t"), 3, "retention applied by the alter");
}
