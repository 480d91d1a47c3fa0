//! `nanokafka serve --metrics ADDR`: the broker's metrics served to a Prometheus scrape (the
//! produce counter moves by exactly the records produced, lag appears after a commit), and a
//! bad or taken metrics address refused before the broker starts. What an embedded broker
//! records is tested in the library's `tests/metrics.rs`.

#[path = "common/binary.rs"]
mod binary;
#[path = "../../tests/wire/client.rs"]
#[allow(dead_code)] // the protocol tests use more of it than this binary does
mod client;
#[path = "../../tests/common/client_batch.rs"]
mod client_batch;
#[path = "../../tests/common/process.rs"]
mod process;
#[path = "../../tests/wire/records.rs"]
#[allow(dead_code)]
mod records;

#[path = "../../tests/common/series.rs"]
mod series;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use binary::BIN;
use client::WireClient;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use nanokafka::{NanoKafka, TopicConfig};
use process::Process;
use series::{series, Series};

const DEADLINE: Duration = Duration::from_secs(30);

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
