//! A compacted topic for the cleaner's tests: small segments, cleaned whenever anything is
//! dirty once its records are `LAG_MS` old, and 60 rounds of ten keys produced to it.

#![allow(dead_code)] // each test binary uses the part it needs

use std::collections::BTreeMap;

use nanokafka::{CleanupPolicy, DirtyRatio, NanoKafka, TopicConfig, MIN_SEGMENT_BYTES};

/// How long a record stays uncompacted in these tests (`min_compaction_lag_ms`).
pub const LAG_MS: u64 = 1000;

/// A one-partition compacted topic of small segments, cleaned whenever anything is dirty,
/// `LAG_MS` after its records were appended.
pub fn compacted() -> TopicConfig {
    TopicConfig::default()
        .partitions(1)
        .segment_bytes(MIN_SEGMENT_BYTES)
        .cleanup_policy(CleanupPolicy::Compact)
        .min_compaction_lag_ms(LAG_MS)
        .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(1).unwrap())
}

/// A broker on `dir` whose partitions check for a due pass every 10 ms, on `clock`'s time:
/// a pass runs as soon as the test moves the clock past the compaction lag.
pub fn cleaning_broker(dir: &std::path::Path, clock: &nanokafka::clock::ManualClock) -> NanoKafka {
    NanoKafka::builder()
        .data_dir(dir)
        .clock(std::sync::Arc::new(clock.clone()))
        .cleaner_backoff(std::time::Duration::from_millis(10))
        .build()
        .unwrap()
}

/// Produces 60 rounds of the keys `k0`..`k9` (values `v<round>`) natively: key → the
/// (offset, value) of each record written to it, in order.
pub fn produce_rounds(broker: &NanoKafka, topic: &str) -> BTreeMap<String, Vec<(u64, String)>> {
    let mut written: BTreeMap<String, Vec<(u64, String)>> = BTreeMap::new();
    for round in 0..60 {
        for key in 0..10 {
            let (key, value) = (format!("k{key}"), format!("v{round}"));
            let delivery = broker
                .produce_raw(topic, Some(key.as_bytes()), value.clone().into_bytes())
                .unwrap();
            written
                .entry(key)
                .or_default()
                .push((delivery.offset, value));
        }
    }
    written
}

/// Waits (up to 30 s: a hang is a failure) until partition 0 of `topic` has had a cleaning
/// pass that removed records; its cleaner summary then.
pub fn wait_for_cleaning(broker: &NanoKafka, topic: &str) -> nanokafka::CleanerSummary {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let partition = broker.stats().unwrap().topics[topic].partitions[0].clone();
        if let Some(cleaner) = partition.cleaner.filter(|c| c.records_removed > 0) {
            return cleaner;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no cleaning pass removed records within 30 s: {partition:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
