//! The broker's metrics as a service sees them: an embedded broker records into whatever
//! `metrics` recorder the process installed (here metrics-util's `DebuggingRecorder`).
//! `nanokafka serve --metrics ADDR` serving them to a Prometheus scrape is tested beside the
//! binary, in `cli/tests/metrics.rs`.

#[path = "common/series.rs"]
mod series;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use nanokafka::metrics::{
    ACTOR_RESTARTS, APPEND_SECONDS, FETCHED_RECORDS, FSYNC_SECONDS, GROUP_LAG, GROUP_REBALANCES,
    PRODUCED_BYTES, PRODUCED_RECORDS,
};
use nanokafka::{FsyncPolicy, NanoKafka, TopicConfig};
use series::{series, Series};

const DEADLINE: Duration = Duration::from_secs(30);

#[test]
fn an_embedded_broker_records_produces_polls_latencies_and_lag_into_the_installed_recorder() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The only recorder of this test binary's process.
    recorder.install().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .fsync(FsyncPolicy::Always)
        .build()
        .unwrap();
    broker
        .create_topic("orders", TopicConfig::default().partitions(1))
        .unwrap();
    for i in 0..7u64 {
        broker.produce("orders", &i).unwrap();
    }
    broker.join_group("orders", "billing", "m1").unwrap();
    let polled: Vec<nanokafka::Record<u64>> = broker
        .poll_batch("orders", "billing", "m1", 5, Duration::from_secs(5))
        .unwrap();
    assert_eq!(polled.len(), 5);
    broker
        .commit("orders", "billing", 0, polled[4].offset)
        .unwrap();
    // A crashed partition restarts under supervision; the produce after it moves the lag.
    futures::executor::block_on(broker.async_handle().crash_partition("orders", 0)).unwrap();
    let deadline = Instant::now() + DEADLINE;
    while let Err(e) = broker.produce("orders", &7u64) {
        assert!(
            Instant::now() < deadline,
            "no produce after the restart: {e}"
        );
    }
    broker.shutdown().unwrap();

    let snapshot: BTreeMap<Series, DebugValue> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            ((key.name().to_owned(), labels), value)
        })
        .collect();
    let partition = [("topic", "orders"), ("partition", "0")];
    let value = |name: &str, labels: &[(&str, &str)]| {
        snapshot
            .get(&series(name, labels))
            .unwrap_or_else(|| panic!("no {name} {labels:?} in {snapshot:#?}"))
    };
    assert_eq!(value(PRODUCED_RECORDS, &partition), &DebugValue::Counter(8));
    assert!(
        matches!(value(PRODUCED_BYTES, &partition), DebugValue::Counter(b) if *b > 7 * 8),
        "{snapshot:#?}"
    );
    assert_eq!(value(FETCHED_RECORDS, &partition), &DebugValue::Counter(5));
    // Seven single-record produces, each its own write, each synced under `Always`.
    for name in [APPEND_SECONDS, FSYNC_SECONDS] {
        match value(name, &partition) {
            DebugValue::Histogram(samples) => assert!(samples.len() >= 7, "{name}: {samples:?}"),
            other => panic!("{name} is {other:?}"),
        }
    }
    let lag = [
        ("topic", "orders"),
        ("partition", "0"),
        ("group", "billing"),
    ];
    // Committed at 5 of 8 records: the commit set it to 2, the last append to 3.
    assert_eq!(value(GROUP_LAG, &lag), &DebugValue::Gauge(3.0.into()));
    assert_eq!(
        value(ACTOR_RESTARTS, &[("actor", "partition")]),
        &DebugValue::Counter(1)
    );
    // The member's join was the group's first generation.
    let group = [("topic", "orders"), ("group", "billing")];
    assert!(
        matches!(value(GROUP_REBALANCES, &group), DebugValue::Counter(n) if *n >= 1),
        "{snapshot:#?}"
    );
}
