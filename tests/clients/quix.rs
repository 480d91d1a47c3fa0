//! A Quix Streams stateful application (confluent-kafka, librdkafka) against the listener:
//! its state store is backed by a changelog topic Quix creates with `cleanup.policy=compact`,
//! and when its local state is wiped it rebuilds the state from that changelog, after the
//! broker's cleaner has removed the superseded records from it.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nanokafka::clock::ManualClock;
use nanokafka::{CleanupPolicy, DirtyRatio, TopicChanges, MIN_SEGMENT_BYTES};
use serde_json::Value;

use crate::clients::{self, Client};
use crate::common::{Broker, RUN, SCRIPT_TIMEOUT};

const INPUT: &str = "words";
const OUTPUT: &str = "counts";
const GROUP: &str = "counter";
/// The changelog's `min_compaction_lag_ms` once the test tunes it.
const LAG_MS: u64 = 1000;

/// Key → how many of its records were produced so far, and the counts the app must output.
#[derive(Default)]
struct Expected {
    produced: BTreeMap<String, u64>,
}

impl Expected {
    /// Produces `rounds` records of every key in `keys` natively, key after key in each
    /// round; the counts the app must output for them, per key in order.
    fn produce(&mut self, b: &Broker, keys: &[&str], rounds: u64) -> BTreeMap<String, Vec<u64>> {
        let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for _ in 0..rounds {
            for &key in keys {
                b.broker
                    .produce_raw(INPUT, Some(key.as_bytes()), b"seen".to_vec())
                    .unwrap();
                let seen = self.produced.entry(key.to_owned()).or_default();
                *seen += 1;
                counts.entry(key.to_owned()).or_default().push(*seen);
            }
        }
        counts
    }
}

/// Runs the app until it has processed `count` records; its counts per key, in order, and the
/// name of its changelog topic.
fn run_app(
    app: &Client,
    b: &Broker,
    state: &Path,
    count: usize,
) -> (BTreeMap<String, Vec<u64>>, String) {
    let count = count.to_string();
    let state = state.to_str().unwrap();
    let args = [
        b.bootstrap.as_str(),
        INPUT,
        OUTPUT,
        GROUP,
        "--state-dir",
        state,
        "--count",
        &count,
        "--timeout",
        SCRIPT_TIMEOUT,
    ];
    let result = app.run_json(&args, RUN);
    let mut counts: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for output in result["counts"].as_array().unwrap() {
        let key = output["key"].as_str().unwrap().to_owned();
        counts
            .entry(key)
            .or_default()
            .push(output["count"].as_u64().unwrap());
    }
    (counts, result["changelog"].as_str().unwrap().to_owned())
}

fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Waits until every partition of `topic` was cleaned once; the records the passes removed.
fn await_cleaned(b: &Broker, topic: &str) -> u64 {
    let deadline = Instant::now() + RUN;
    loop {
        let partitions = b.broker.stats().unwrap().topics[topic].partitions.clone();
        let cleaned = partitions
            .iter()
            .all(|p| p.cleaner.as_ref().is_some_and(|c| c.passes > 0));
        if cleaned {
            return partitions
                .iter()
                .filter_map(|p| p.cleaner.as_ref())
                .map(|c| c.records_removed)
                .sum();
        }
        assert!(Instant::now() < deadline, "not cleaned: {partitions:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Run 1 creates the changelog (compacted); the test gives it small segments and a short
/// compaction lag, as an operator might; run 2 (local state kept) counts on; the broker's
/// cleaner then removes superseded changelog records; the local state is wiped; run 3
/// restores from what the cleaner left, across its gaps, and its counts go on from run 2's.
/// The output topic holds every key's counts 1, 2, ... once each.
#[test]
fn quix_restores_its_counts_from_a_cleaned_changelog_after_its_local_state_is_wiped() {
    let Some(app) = clients::quix("quix_count.py") else {
        return;
    };
    // Quix stamps its records with the wall clock; the broker's clock starts there and moves
    // only when the test moves it, so no record is past the compaction lag until then.
    let clock = ManualClock::new(wall_clock_ms());
    let b = Broker::start_with(|builder| {
        let builder = builder.clock(Arc::new(clock.clone()));
        builder.cleaner_backoff(Duration::from_millis(10))
    });
    b.create(INPUT, 2);
    let state = tempfile::tempdir().unwrap();
    let keys = ["k0", "k1", "k2", "k3", "k4", "k5"];
    let mut expected = Expected::default();

    let first = expected.produce(&b, &keys, 1);
    let (counts, changelog) = run_app(&app, &b, state.path(), keys.len());
    assert_eq!(counts, first);
    let config = &b.broker.list_topics().unwrap()[&changelog];
    assert_eq!(
        config.cleanup_policy,
        CleanupPolicy::Compact,
        "{changelog}: {config:?}"
    );
    assert_eq!(config.partitions, 2, "{changelog}: one per input partition");
    let tuned = TopicChanges::default()
        .segment_bytes(MIN_SEGMENT_BYTES)
        .min_compaction_lag_ms(LAG_MS)
        .min_cleanable_dirty_ratio(DirtyRatio::from_basis_points(1).unwrap());
    b.broker.alter_topic(&changelog, tuned).unwrap();

    let second = expected.produce(&b, &keys, 20);
    let (counts, _) = run_app(&app, &b, state.path(), keys.len() * 20);
    assert_eq!(counts, second, "run 2 goes on from its local state");
    let partitions = b.broker.stats().unwrap().topics[&changelog]
        .partitions
        .clone();
    assert!(
        partitions.iter().all(|p| p.segments > 1),
        "every partition of {changelog} has a sealed segment: {partitions:?}"
    );

    // Every changelog record written so far is now past the lag: one pass per partition.
    clock.set(wall_clock_ms() + LAG_MS);
    let removed = await_cleaned(&b, &changelog);
    assert!(removed > 0, "the cleaner removed nothing from {changelog}");

    std::fs::remove_dir_all(state.path()).unwrap();
    let uneven: Vec<&str> = keys
        .iter()
        .copied()
        .cycle()
        .take(keys.len() * 3 + 2)
        .collect();
    let third = expected.produce(&b, &uneven, 1);
    let (counts, _) = run_app(&app, &b, state.path(), uneven.len());
    assert_eq!(
        counts, third,
        "run 3 restored the counts from the changelog"
    );

    let total: u64 = expected.produced.values().sum();
    let mut written: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for r in b.read_all(OUTPUT, total as usize) {
        let key = String::from_utf8(r.key.unwrap()).unwrap();
        let value: Value = serde_json::from_slice(&r.value).unwrap();
        written
            .entry(key)
            .or_default()
            .push(value["count"].as_u64().unwrap());
    }
    let all: BTreeMap<String, Vec<u64>> = expected
        .produced
        .iter()
        .map(|(key, &n)| (key.clone(), (1..=n).collect()))
        .collect();
    assert_eq!(written, all, "{OUTPUT}: every key's counts once each");
}
