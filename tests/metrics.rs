//! The broker's metrics as a service sees them: an embedded broker records into whatever
//! `metrics` recorder the process installed (here metrics-util's `DebuggingRecorder`), and
//! `nanokafka serve --metrics ADDR` serves them to a Prometheus scrape.

#[path = "wire/client.rs"]
#[allow(dead_code)] // the protocol tests use more of it than this binary does
mod client;
#[path = "common/client_batch.rs"]
mod client_batch;
#[path = "common/process.rs"]
mod process;
#[path = "wire/records.rs"]
#[allow(dead_code)]
mod records;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use client::WireClient;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use nanokafka::metrics::{
    ACTOR_RESTARTS, APPEND_SECONDS, FETCHED_RECORDS, FSYNC_SECONDS, GROUP_LAG, GROUP_REBALANCES,
    PRODUCED_BYTES, PRODUCED_RECORDS,
};
use nanokafka::{FsyncPolicy, NanoKafka, TopicConfig};
use process::{Process, BIN};

const DEADLINE: Duration = Duration::from_secs(30);

/// A metric's identity in a test: its name and its labels, sorted.
type Series = (String, BTreeMap<String, String>);

fn series(name: &str, labels: &[(&str, &str)]) -> Series {
    let labels = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (name.to_owned(), labels)
}

#[test]
fn an_embedded_broker_records_produces_polls_latencies_and_lag_into_the_installed_recorder() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // The only recorder of this test binary's process (the scrape test runs a child).
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

/// A port free a moment ago: the exporter takes a concrete address.
fn free_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `GET /metrics` over a plain socket; the body, parsed into `series -> value`.
fn scrape(addr: SocketAddr) -> BTreeMap<Series, f64> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(parse_sample)
        .collect()
}

/// One sample line of Prometheus's text format: `name{k="v",...} value`. Label values here
/// hold no quotes or commas, so a split suffices.
fn parse_sample(line: &str) -> (Series, f64) {
    let (key, value) = line.rsplit_once(' ').expect("name and value");
    let (name, labels) = match key.split_once('{') {
        Some((name, labels)) => (name, labels.trim_end_matches('}')),
        None => (key, ""),
    };
    let labels = labels
        .split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').expect("label=value");
            (k.to_owned(), v.trim_matches('"').to_owned())
        })
        .collect();
    ((name.to_owned(), labels), value.parse().expect("a number"))
}

fn commit(client: &mut WireClient, group: &str, topic: &str, offset: i64) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(-1)
        .with_member_id(StrBytes::from_static_str(""))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(records::name(topic))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    client.call(&request, 8).topics[0].partitions[0].error_code
}

#[test]
fn serve_metrics_exposes_produce_counters_and_lag_to_a_prometheus_scrape() {
    let dir = tempfile::tempdir().unwrap();
    // The topic is made through the library before the binary serves the directory.
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("events", TopicConfig::default().partitions(1))
        .unwrap();
    broker.shutdown().unwrap();
    let metrics = free_port();
    let mut served = Process::serve(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        &metrics.to_string(),
    ]);
    let mut client = WireClient::connect(served.listening_addr(DEADLINE));

    let produced = |client: &mut WireClient, values: &[&str]| {
        let batch = records::batch(values, Compression::None, -1, 0);
        let response = client.call(&records::produce("events", 0, batch, -1), 9);
        let partition = &response.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0, "{response:?}");
    };
    produced(&mut client, &["a", "b", "c"]);
    let records = series(
        "nanokafka_produced_records_total",
        &[("topic", "events"), ("partition", "0")],
    );
    let before = scrape(metrics);
    assert_eq!(before.get(&records), Some(&3.0), "{before:#?}");
    assert!(before.contains_key(&series("nanokafka_listener_connections", &[])));

    produced(&mut client, &["d", "e"]);
    assert_eq!(commit(&mut client, "readers", "events", 1), 0);
    let after = scrape(metrics);
    assert_eq!(after[&records] - before[&records], 2.0);
    let lag = series(
        "nanokafka_group_lag",
        &[
            ("topic", "events"),
            ("partition", "0"),
            ("group", "readers"),
        ],
    );
    assert_eq!(after.get(&lag), Some(&4.0), "{after:#?}");
    assert!(after.contains_key(&series(
        "nanokafka_append_seconds_count",
        &[("topic", "events"), ("partition", "0")],
    )));
}

#[test]
fn serve_refuses_a_bad_metrics_address_and_a_taken_port_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().to_str().unwrap();
    let run = |metrics: &str| {
        let out = Command::new(BIN)
            .args(["serve", "--data-dir", data_dir, "--listen", "127.0.0.1:0"])
            .args(["--metrics", metrics])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stderr) = run("localhost-ish");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("--metrics"), "{stderr}");

    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, stderr) = run(&addr);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot serve metrics on {addr}")),
        "{stderr}"
    );
    // Refused before the broker started: the directory holds no broker's files.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
