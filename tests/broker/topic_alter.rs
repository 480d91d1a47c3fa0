//! Altering a topic through the public API: partitions grow (never shrink) and are served
//! at once, to keyed and keyless produces, cached produce routes and groups; retention
//! changes reach the running partitions; a new segment size applies from the next append;
//! bad changes are refused with nothing changed; a reopen finds the altered config.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use nanokafka::{
    partition_for_key, AsyncNanoKafka, Backpressure, Error, NanoKafka, TopicChanges, TopicConfig,
    MAX_PARTITIONS, MIN_SEGMENT_BYTES,
};

const WATCHDOG: Duration = Duration::from_secs(60);

fn config_file(dir: &Path, topic: &str) -> Vec<u8> {
    std::fs::read(dir.join(format!("{topic}.json"))).unwrap()
}

fn is_invalid_config<T: std::fmt::Debug>(result: &nanokafka::Result<T>, name: &str) -> bool {
    matches!(result, Err(Error::InvalidConfig { field, .. }) if *field == name)
}

/// The sizes of a partition's segment files, in offset order (their names are the base
/// offsets, zero-padded).
fn segment_sizes(dir: &Path, topic: &str, partition: u32) -> Vec<u64> {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join(format!("{topic}_{partition}")))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension() == Some("log".as_ref()))
        .collect();
    logs.sort();
    logs.iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .collect()
}

/// A key that `partition_for_key` puts on `partition` of `partitions`.
fn key_for(partition: u32, partitions: u32) -> String {
    (0..)
        .map(|i| format!("key-{i}"))
        .find(|k| partition_for_key(k.as_bytes(), partitions) == partition)
        .unwrap()
}

#[test]
fn grown_partitions_are_served_at_once_to_produces_routes_and_groups_and_survive_a_reopen() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        broker.create_topic("t", TopicConfig::default()).unwrap();
        // A handle with a route cache of its own, learned while the topic had 1 partition.
        let handle = AsyncNanoKafka::from(broker.addr().unwrap());
        let system = actix_rt::System::new();
        system.block_on(async {
            for value in 0..3u64 {
                handle.produce("t", &value).await.unwrap();
            }
        });
        let a = broker.join_group("t", "g", "a").unwrap();
        let b = broker.join_group("t", "g", "b").unwrap();
        assert_eq!((a.partitions, b.partitions), (vec![0], vec![]));

        let altered = broker
            .alter_topic("t", TopicChanges::default().partitions(4))
            .unwrap();
        assert_eq!(altered, TopicConfig::default().partitions(4));
        assert_eq!(broker.list_topics().unwrap()["t"].partitions, 4);

        // The group rebalanced over the 4 partitions.
        let a = broker.heartbeat("t", "g", "a").unwrap();
        let b = broker.heartbeat("t", "g", "b").unwrap();
        assert!(a.generation > 2, "{a:?}");
        let owned: BTreeSet<u32> = a.partitions.iter().chain(&b.partitions).copied().collect();
        assert_eq!(owned, BTreeSet::from([0, 1, 2, 3]));
        assert!(!b.partitions.is_empty());

        // Keyless records go round all 4, through this handle and the one that cached the
        // old route.
        let through_broker: BTreeSet<u32> = (0..4u64)
            .map(|v| broker.produce("t", &(100 + v)).unwrap().partition)
            .collect();
        assert_eq!(through_broker, BTreeSet::from([0, 1, 2, 3]));
        let through_cached: BTreeSet<u32> = system.block_on(async {
            let mut seen = BTreeSet::new();
            for v in 0..4u64 {
                seen.insert(handle.produce("t", &(200 + v)).await.unwrap().partition);
            }
            seen
        });
        assert_eq!(through_cached, BTreeSet::from([0, 1, 2, 3]));
        // Keyed records follow the new count.
        let key = key_for(3, 4);
        let delivery = broker.produce_keyed("t", &key, &300u64).unwrap();
        assert_eq!(delivery.partition, 3);

        // The group reads every record, the new partitions' included.
        let mut values = Vec::new();
        for member in ["a", "b"] {
            values.extend(
                common::drain(&broker, "t", "g", member)
                    .into_iter()
                    .map(|r| r.2),
            );
        }
        values.sort_unstable();
        let mut expected: Vec<u64> = (0..3).chain(100..104).chain(200..204).collect();
        expected.push(300);
        assert_eq!(values, expected);
        assert!(broker.lag("t", "g").unwrap().values().all(|&l| l == 0));
        let end_of_3 = common::log_end(&broker, "t", 3);
        assert!(end_of_3 >= 2, "{end_of_3}");
        drop(system);
        broker.shutdown().unwrap();
        drop(broker);

        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(broker.list_topics().unwrap()["t"].partitions, 4);
        assert_eq!(common::log_end(&broker, "t", 3), end_of_3);
        assert_eq!(
            broker.produce_keyed("t", &key, &301u64).unwrap().partition,
            3
        );
        assert_eq!(broker.lag("t", "g").unwrap()[&3], 1);
    });
}

#[test]
fn a_partition_count_that_does_not_grow_is_refused_and_changes_nothing() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let config = TopicConfig::default().partitions(2);
        let broker = common::broker_with_topic(dir.path(), "t", config.clone());
        let before = config_file(dir.path(), "t");
        for partitions in [2, 1, 0] {
            // Combined with a valid change: that one is not applied either.
            let changes = TopicChanges::default()
                .partitions(partitions)
                .retention_size(Some(1));
            let result = broker.alter_topic("t", changes);
            assert!(is_invalid_config(&result, "partitions"), "{result:?}");
        }
        assert_eq!(broker.list_topics().unwrap()["t"], config);
        assert_eq!(config_file(dir.path(), "t"), before);
        assert!(!dir.path().join("t_2").exists());
    });
}

#[test]
fn lowered_retention_drops_existing_records_at_once_and_a_reopen_keeps_it() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = common::broker_with_topic(dir.path(), "t", TopicConfig::default());
        common::produce_to(&broker, "t", 0, &(0..10).collect::<Vec<u64>>());
        assert_eq!(common::partition_stats(&broker, "t", 0).log_start_offset, 0);

        let altered = broker
            .alter_topic("t", TopicChanges::default().retention_size(Some(3)))
            .unwrap();
        assert_eq!(altered.retention_size, Some(3));
        assert_eq!(common::partition_stats(&broker, "t", 0).log_start_offset, 7);
        broker.join_group("t", "g", "m").unwrap();
        let values: Vec<u64> = common::drain(&broker, "t", "g", "m")
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(values, [7, 8, 9]);
        broker.shutdown().unwrap();
        drop(broker);

        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(broker.list_topics().unwrap()["t"].retention_size, Some(3));
        // Removing the limit: nothing more is dropped.
        broker
            .alter_topic("t", TopicChanges::default().retention_size(None))
            .unwrap();
        common::produce_to(&broker, "t", 0, &(10..20).collect::<Vec<u64>>());
        assert_eq!(common::partition_stats(&broker, "t", 0).log_start_offset, 7);
    });
}

/// Kafka's `segment.bytes` as a topic setting: the segments written keep their size, the
/// active one (already past the new size) rolls at the next append, every later segment
/// rolls by the new size, and a reopen keeps it.
#[test]
fn a_changed_segment_size_rolls_from_the_next_append_on_and_a_reopen_keeps_it() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = common::broker_with_topic(dir.path(), "t", TopicConfig::default());
        common::produce_to(&broker, "t", 0, &(0..100).collect::<Vec<u64>>());
        let before = segment_sizes(dir.path(), "t", 0);
        assert!(
            before.len() == 1 && before[0] > MIN_SEGMENT_BYTES,
            "{before:?}"
        );

        let altered = broker
            .alter_topic(
                "t",
                TopicChanges::default().segment_bytes(MIN_SEGMENT_BYTES),
            )
            .unwrap();
        assert_eq!(altered.segment_bytes, MIN_SEGMENT_BYTES);
        assert_eq!(segment_sizes(dir.path(), "t", 0), before);
        common::produce_to(&broker, "t", 0, &(100..300).collect::<Vec<u64>>());
        let after = segment_sizes(dir.path(), "t", 0);
        assert_eq!(after[0], before[0], "the old segment is kept whole");
        assert!(after.len() >= 4, "{after:?}");
        assert!(
            after[1..].iter().all(|&size| size <= MIN_SEGMENT_BYTES),
            "{after:?}"
        );
        broker.join_group("t", "g", "m").unwrap();
        let values: Vec<u64> = common::drain(&broker, "t", "g", "m")
            .into_iter()
            .map(|r| r.2)
            .collect();
        assert_eq!(values, (0..300).collect::<Vec<u64>>());
        broker.shutdown().unwrap();
        drop(broker);

        let broker = NanoKafka::open(dir.path()).unwrap();
        assert_eq!(
            broker.list_topics().unwrap()["t"].segment_bytes,
            MIN_SEGMENT_BYTES
        );
        common::produce_to(&broker, "t", 0, &(300..400).collect::<Vec<u64>>());
        let reopened = segment_sizes(dir.path(), "t", 0);
        assert!(reopened.len() > after.len(), "{reopened:?}");
        assert!(
            reopened[1..].iter().all(|&size| size <= MIN_SEGMENT_BYTES),
            "{reopened:?}"
        );
    });
}

#[test]
fn an_unknown_topic_is_refused() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        let result = broker.alter_topic("missing", TopicChanges::default().partitions(2));
        assert!(
            matches!(&result, Err(Error::UnknownTopic { topic }) if topic == "missing"),
            "{result:?}"
        );
        assert!(!dir.path().join("missing.json").exists());
    });
}

#[test]
fn values_that_cannot_work_are_refused_with_nothing_changed() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let config = TopicConfig::default().retention_size(5);
        let broker = common::broker_with_topic(dir.path(), "t", config.clone());
        common::produce_to(&broker, "t", 0, &(0..4).collect::<Vec<u64>>());
        let before = config_file(dir.path(), "t");
        let refused = [
            (
                TopicChanges::default().retention_ms(Some(0)),
                "retention_ms",
            ),
            (TopicChanges::default().max_size(Some(0)), "max_size"),
            (
                TopicChanges::default().segment_bytes(MIN_SEGMENT_BYTES - 1),
                "segment_bytes",
            ),
            (
                TopicChanges::default()
                    .retention_size(Some(0))
                    .partitions(3),
                "retention_size",
            ),
            (
                TopicChanges::default()
                    .partitions(MAX_PARTITIONS + 1)
                    .retention_size(Some(1)),
                "partitions",
            ),
        ];
        for (changes, field) in refused {
            let result = broker.alter_topic("t", changes.clone());
            assert!(is_invalid_config(&result, field), "{changes:?}: {result:?}");
        }
        assert_eq!(broker.list_topics().unwrap()["t"], config);
        assert_eq!(config_file(dir.path(), "t"), before);
        assert_eq!(common::partition_stats(&broker, "t", 0).log_start_offset, 0);
        assert!(!dir.path().join("t_1").exists());
    });
}

#[test]
fn a_long_poll_parked_before_the_topic_grows_is_served_from_a_new_partition() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = common::broker_with_topic(dir.path(), "t", TopicConfig::default());
        broker.join_group("t", "g", "a").unwrap();
        let poller = broker.clone();
        let wait = Duration::from_secs(30);
        let parked = std::thread::spawn(move || {
            let started = std::time::Instant::now();
            let record = poller.poll_timeout::<u64>("t", "g", "a", wait).unwrap();
            (record, started.elapsed())
        });
        broker
            .alter_topic("t", TopicChanges::default().partitions(2))
            .unwrap();
        common::produce_to(&broker, "t", 1, &[7]);
        let (record, waited) = parked.join().unwrap();
        let record = record.expect("the record on the new partition");
        assert_eq!((record.partition, record.value), (1, 7));
        assert!(waited < wait, "{waited:?}");
    });
}

#[test]
fn a_raised_or_removed_max_size_applies_to_the_next_produce() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let config = TopicConfig::default()
            .max_size(2)
            .backpressure(Backpressure::Reject);
        let broker = common::broker_with_topic(dir.path(), "t", config);
        for value in 0..2u64 {
            broker.produce("t", &value).unwrap();
        }
        let full = broker.produce("t", &2u64);
        assert!(matches!(full, Err(Error::PartitionFull { .. })), "{full:?}");

        broker
            .alter_topic("t", TopicChanges::default().max_size(Some(3)))
            .unwrap();
        broker.produce("t", &2u64).unwrap();
        let full = broker.produce("t", &3u64);
        assert!(
            matches!(full, Err(Error::PartitionFull { max_size: 3, .. })),
            "{full:?}"
        );
        // Unbounded: nothing is refused any more.
        broker
            .alter_topic("t", TopicChanges::default().max_size(None))
            .unwrap();
        broker.produce("t", &3u64).unwrap();
        assert_eq!(common::log_end(&broker, "t", 0), 4);
    });
}
