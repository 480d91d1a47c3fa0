//! A compacted topic cleaned by the broker: its partitions' cleaner runs in the background
//! (every `cleaner_backoff`), and a reader from offset 0 then sees at least the latest value
//! of every key, at its own offset, with the records of each key a suffix of those written.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nanokafka::clock::ManualClock;
use nanokafka::{CleanerSummary, NanoKafka, PartitionStats};

use crate::common::compacted::{
    cleaning_broker, compacted, produce_rounds, wait_for_cleaning, LAG_MS,
};

/// Every record of partition 0 of `topic` from offset 0, as (offset, key, value), read by
/// the new group `group`.
fn read_all(broker: &NanoKafka, topic: &str, group: &str) -> Vec<(u64, String, String)> {
    let end = broker.stats().unwrap().topics[topic].partitions[0].log_end_offset;
    broker.join_group(topic, group, "m").unwrap();
    let mut read = Vec::new();
    loop {
        let batch = broker
            .poll_batch_raw(topic, group, "m", 100, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else {
            break;
        };
        broker.commit(topic, group, 0, last.offset).unwrap();
        let done = last.offset + 1 >= end;
        read.extend(batch.into_iter().map(|r| {
            let key = String::from_utf8(r.key.unwrap()).unwrap();
            (r.offset, key, String::from_utf8(r.value).unwrap())
        }));
        if done {
            break;
        }
    }
    read
}

#[test]
fn a_compacted_topic_keeps_the_latest_value_of_every_key_once_the_cleaner_ran() {
    let dir = tempfile::tempdir().unwrap();
    // No segment is cleanable until the clock moves past the compaction lag: then every
    // sealed one is, and one pass cleans them all.
    let clock = ManualClock::new(1_000_000);
    let broker = cleaning_broker(dir.path(), &clock);
    broker.create_topic("prices", compacted()).unwrap();
    let written = produce_rounds(&broker, "prices");
    let log_end = 600;
    clock.advance(LAG_MS);
    let cleaner = wait_for_cleaning(&broker, "prices");
    let partition = broker.stats().unwrap().topics["prices"].partitions[0].clone();
    assert_eq!(partition.log_end_offset, log_end, "offsets never move");
    assert!(cleaner.records_removed > 0, "{cleaner:?}");

    let read = read_all(&broker, "prices", "reader");
    assert_eq!(read.len() as u64, log_end - cleaner.records_removed);
    assert!(read.windows(2).all(|w| w[0].0 < w[1].0), "in offset order");
    let mut by_key: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for (offset, key, value) in read {
        by_key.entry(key).or_default().push((offset, value));
    }
    for (key, records) in &written {
        let kept = &by_key[key];
        assert!(
            records.ends_with(kept),
            "{key}: {kept:?} is not a suffix of what was written"
        );
        assert_eq!(
            kept.last(),
            records.last(),
            "{key}: its latest value at its offset"
        );
    }
    // Records of the first segments were removed.
    assert!(by_key.values().map(Vec::len).sum::<usize>() < 600);
    assert_eq!(cleaner.dirty_permille, 0, "{cleaner:?}");

    // The figures are the partition's, not the open's: a reopen (whose cleaner has not
    // run yet) reports them as they were.
    broker.shutdown().unwrap();
    let reopened = NanoKafka::open(dir.path()).unwrap();
    let after = reopened.stats().unwrap().topics["prices"].partitions[0].cleaner;
    assert_eq!(after, Some(cleaner));
    reopened.shutdown().unwrap();
}

/// Waits (up to 30 s: a hang is a failure) until `passes` cleaning passes of partition 0 of
/// `topic` were swapped in; its stats then.
fn passes(broker: &NanoKafka, topic: &str, passes: u64) -> (PartitionStats, CleanerSummary) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let partition = broker.stats().unwrap().topics[topic].partitions[0].clone();
        if let Some(cleaner) = partition.cleaner.filter(|c| c.passes >= passes) {
            return (partition, cleaner);
        }
        assert!(
            Instant::now() < deadline,
            "not {passes} cleaning passes within 30 s: {partition:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A tombstone of a compacted topic nobody writes to any more goes once
/// `delete_retention_ms` has passed since the pass that kept it: nothing is dirty, but the
/// tombstone's delete horizon makes a pass due.
#[test]
fn a_tombstone_goes_after_delete_retention_on_a_topic_with_no_new_writes() {
    const RETENTION_MS: u64 = 60_000;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let broker = cleaning_broker(dir.path(), &clock);
    let config = compacted().delete_retention_ms(RETENTION_MS);
    broker.create_topic("users", config).unwrap();
    // A value and its tombstone, then enough records of other keys to seal their segment.
    broker
        .produce_raw("users", Some(b"gone"), b"v".to_vec())
        .unwrap();
    broker.produce_tombstone("users", b"gone").unwrap();
    produce_rounds(&broker, "users");
    let has_gone = |broker: &NanoKafka, group| {
        let read = read_all(broker, "users", group);
        assert!(read.len() > 10, "{read:?}");
        read.iter().any(|r| r.1 == "gone")
    };

    clock.advance(LAG_MS);
    let (_, first) = passes(&broker, "users", 1);
    assert!(
        has_gone(&broker, "before"),
        "the tombstone stays within delete_retention_ms"
    );
    assert_eq!(first.dirty_permille, 0, "nothing dirty is left: {first:?}");

    clock.advance(RETENTION_MS);
    let (partition, second) = passes(&broker, "users", 2);
    assert_eq!(
        second.records_removed,
        first.records_removed + 1,
        "{second:?}"
    );
    assert!(!has_gone(&broker, "after"), "the tombstone is gone");
    assert_eq!(partition.log_end_offset, 602, "offsets never move");
}

#[test]
fn cleaner_settings_out_of_range_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |builder: nanokafka::NanoKafkaBuilder| match builder.build() {
        Err(nanokafka::Error::InvalidArgument { name, .. }) => name,
        other => panic!("expected InvalidArgument, got {other:?}"),
    };
    let builder = || NanoKafka::builder().data_dir(dir.path());
    assert_eq!(
        refused(builder().cleaner_backoff(Duration::ZERO)),
        "cleaner_backoff"
    );
    let too_long = nanokafka::MAX_CLEANER_BACKOFF + Duration::from_millis(1);
    assert_eq!(
        refused(builder().cleaner_backoff(too_long)),
        "cleaner_backoff"
    );
    let range = nanokafka::CLEANER_KEY_MAP_BYTES;
    for bytes in [0, range.start() - 1, range.end() + 1, usize::MAX] {
        let name = refused(builder().cleaner_key_map_bytes(bytes));
        assert_eq!(name, "cleaner_key_map_bytes", "{bytes}");
    }
    // Nothing was started: the directory opens at once, at the limits.
    let broker = builder()
        .cleaner_backoff(nanokafka::MAX_CLEANER_BACKOFF)
        .cleaner_key_map_bytes(*range.start())
        .build()
        .unwrap();
    broker.shutdown().unwrap();
}
