//! The real-client scripts of `tests/tools/clients/` and the harness `tests/common/clients.rs`
//! run against tansu, an independent Kafka-API broker: proof that the scripts work with a
//! broker other than ours, so that a failure against NanoKafka's listener points at the
//! listener. Ignored: they prove the scripts, not the crate, and each group join waits on
//! tansu for half the clients' session timeout. Install tansu with
//! `benches/peers/tansu.sh install` (`.ci/run` does), then
//! `cargo test --test clients_vs_tansu -- --ignored --test-threads 1`.
//! Each test starts its own in-memory tansu on a free loopback port.

#[path = "common/clients.rs"]
mod clients;
#[path = "common/process.rs"]
mod process;
#[path = "common/tansu.rs"]
mod tansu;

use std::collections::BTreeMap;
use std::time::Duration;

use clients::{Client, Running};
use serde_json::Value;
use tansu::{tansu_binary, Tansu};

/// Bound of one script run (each script also bounds its own waits with `--timeout`).
const RUN: Duration = Duration::from_secs(60);
const SCRIPT_TIMEOUT: &str = "45";

/// A running tansu, or `None` after a line on stderr when it is not installed.
fn start_tansu() -> Option<Tansu> {
    match tansu_binary() {
        Ok(binary) => Some(Tansu::start(&binary, RUN)),
        Err(why) => {
            eprintln!("skipping: {why} (benches/peers/tansu.sh install)");
            None
        }
    }
}

/// (partition, offset) -> (key, value, headers) of a script's records, for comparing what a
/// producer reported with what a consumer read.
fn by_position(records: &Value) -> BTreeMap<(i64, i64), Value> {
    let records = records.as_array().expect("records is an array");
    records
        .iter()
        .map(|r| {
            let at = (
                r["partition"].as_i64().unwrap(),
                r["offset"].as_i64().unwrap(),
            );
            (at, serde_json::json!([r["key"], r["value"], r["headers"]]))
        })
        .collect()
}

/// The committed offset per partition a consumer that read `read` must have left: one past the
/// last offset read.
fn expected_commits(read: &BTreeMap<(i64, i64), Value>) -> BTreeMap<i64, i64> {
    let mut next = BTreeMap::new();
    for &(partition, offset) in read.keys() {
        let entry = next.entry(partition).or_insert(0);
        *entry = (*entry).max(offset + 1);
    }
    next
}

fn commits(result: &Value) -> BTreeMap<i64, i64> {
    let committed = result["committed"].as_array().unwrap();
    committed
        .iter()
        .map(|c| {
            (
                c["partition"].as_i64().unwrap(),
                c["offset"].as_i64().unwrap(),
            )
        })
        .collect()
}

/// Produces with `producer`, reads the same count back with `consumer` in a fresh group, and
/// checks that every record came back where the producer said, with the commits to match.
/// Returns the producer's and the consumer's result documents.
fn round_trip(
    producer: &Client,
    produce_args: &[&str],
    consumer: &Client,
    bootstrap: &str,
    topic: &str,
) -> (Value, Value) {
    let mut args = vec![bootstrap, topic, "--timeout", SCRIPT_TIMEOUT];
    args.extend_from_slice(produce_args);
    let produced = producer.run_json(&args, RUN);
    let sent = by_position(&produced["records"]);
    let count = sent.len().to_string();
    let group = format!("{topic}-group");
    let consumed = consumer.run_json(
        &[
            bootstrap,
            topic,
            &group,
            "--count",
            &count,
            "--timeout",
            SCRIPT_TIMEOUT,
        ],
        RUN,
    );
    let read = by_position(&consumed["records"]);
    assert_eq!(read, sent, "records read differ from those produced");
    let committed: BTreeMap<_, _> = commits(&consumed)
        .into_iter()
        .filter(|&(_, o)| o > 0)
        .collect();
    assert_eq!(committed, expected_commits(&read));
    eprintln!(
        "producer {} / consumer {}: {count} records",
        produced["version"], consumed["version"]
    );
    (produced, consumed)
}

#[test]
#[ignore = "needs tansu: benches/peers/tansu.sh install"]
fn kafka_python_idempotent_producer_and_group_consumer() {
    let (Some(tansu), Some(produce), Some(consume)) = (
        start_tansu(),
        clients::python("kafka_python_produce.py"),
        clients::python("kafka_python_consume.py"),
    ) else {
        return;
    };
    let (produced, _) = round_trip(
        &produce,
        &["--count", "20", "--compression", "gzip"],
        &consume,
        &tansu.bootstrap,
        "kp",
    );
    assert_eq!(produced["idempotent"], true);
}

#[test]
#[ignore = "needs tansu: benches/peers/tansu.sh install"]
fn aiokafka_acks_1_and_all() {
    let (Some(tansu), Some(produce), Some(consume)) = (
        start_tansu(),
        clients::python("aiokafka_produce.py"),
        clients::python("aiokafka_consume.py"),
    ) else {
        return;
    };
    round_trip(
        &produce,
        &["--acks", "1", "--compression", "lz4"],
        &consume,
        &tansu.bootstrap,
        "ak1",
    );
    round_trip(
        &produce,
        &["--acks", "all", "--compression", "snappy"],
        &consume,
        &tansu.bootstrap,
        "akall",
    );
}

#[test]
#[ignore = "needs tansu: benches/peers/tansu.sh install"]
fn kafkajs_producer_and_run_consumer() {
    let (Some(tansu), Some(produce), Some(consume)) = (
        start_tansu(),
        clients::node("kafkajs_produce.js"),
        clients::node("kafkajs_consume.js"),
    ) else {
        return;
    };
    // Not idempotent: tansu answers kafkajs's InitProducerId v1 with UNKNOWN_SERVER_ERROR.
    let (_, consumed) = round_trip(
        &produce,
        &["--count", "12", "--compression", "gzip"],
        &consume,
        &tansu.bootstrap,
        "kj",
    );
    assert_eq!(consumed["isolation"], "read_committed");
}

#[test]
#[ignore = "needs tansu: benches/peers/tansu.sh install"]
fn confluent_admin_producer_and_three_member_group() {
    let (Some(tansu), Some(admin), Some(produce), Some(consume)) = (
        start_tansu(),
        clients::python("confluent_admin.py"),
        clients::python("confluent_produce.py"),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let b = tansu.bootstrap.as_str();
    let created = admin.run_json(&[b, "create-topics", "cf:3", "scratch"], RUN);
    assert_eq!(created["created"], serde_json::json!(["cf", "scratch"]));
    let listed = admin.run_json(&[b, "list-topics"], RUN);
    assert!(
        listed["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "cf" && t["partitions"] == 3),
        "{listed}"
    );

    // Three members; the group is stable once each holds exactly one of the three partitions.
    let members: Vec<Running> = (0..3)
        .map(|_| {
            consume.spawn(&[
                b,
                "cf",
                "cf-group",
                "--until-stdin-closes",
                "--timeout",
                "120",
            ])
        })
        .collect();
    for member in &members {
        member.wait_for_stdout("an assignment of one partition", RUN, |out| {
            assignment(out).len() == 1
        });
    }
    let produced = produce.run_json(
        &[
            b,
            "cf",
            "--count",
            "30",
            "--idempotent",
            "--compression",
            "zstd",
            "--timeout",
            SCRIPT_TIMEOUT,
        ],
        RUN,
    );
    let sent = by_position(&produced["records"]);
    let mut read = BTreeMap::new();
    for member in members {
        let partition = assignment(&member.stdout())[0];
        let expected = sent.keys().filter(|(p, _)| *p == partition).count();
        member.wait_for_stdout("its partition's records", RUN, |out| {
            records(out).len() == expected
        });
        let done = member.finish(RUN);
        let result = done.json();
        assert_eq!(result["event"], "done");
        let mine = by_position(&result["records"]);
        assert_eq!(
            commits(&result),
            expected_commits(&mine),
            "member of partition {partition}"
        );
        read.extend(mine);
    }
    assert_eq!(read, sent);

    let groups = admin.run_json(&[b, "list-groups"], RUN);
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["group_id"] == "cf-group"),
        "{groups}"
    );
    let deleted = admin.run_json(&[b, "delete-topics", "scratch"], RUN);
    assert_eq!(deleted["deleted"], serde_json::json!(["scratch"]));
    eprintln!(
        "confluent-kafka {} (librdkafka {})",
        produced["version"], produced["librdkafka"]
    );
}

/// The partitions a `confluent_consume.py` member holds after the events printed so far.
fn assignment(stdout: &str) -> Vec<i64> {
    let mut held = Vec::new();
    for event in complete_lines(stdout) {
        let partitions = event["partitions"]
            .as_array()
            .map(|p| p.iter().map(|p| p.as_i64().unwrap()));
        match event["event"].as_str() {
            Some("assigned") => held.extend(partitions.unwrap()),
            Some("revoked") => {
                let lost: Vec<i64> = partitions.unwrap().collect();
                held.retain(|p| !lost.contains(p));
            }
            _ => {}
        }
    }
    held
}

/// The record events printed so far.
fn records(stdout: &str) -> Vec<Value> {
    complete_lines(stdout)
        .into_iter()
        .filter(|e| e["event"] == "record")
        .collect()
}

/// The JSON lines of `stdout` that are complete (a chunk may end mid-line).
fn complete_lines(stdout: &str) -> Vec<Value> {
    let complete = &stdout[..stdout.rfind('\n').map_or(0, |i| i + 1)];
    clients::json_lines(complete)
}

#[test]
#[ignore = "needs tansu: benches/peers/tansu.sh install"]
fn kcat_refuses_tansus_api_versions() {
    let (Some(tansu), Some(kcat)) = (start_tansu(), clients::kcat()) else {
        return;
    };
    // kcat 1.7.1's librdkafka 2.0.2 cannot parse the tagged fields tansu puts at the end of its
    // ApiVersions v3 response; kcat is checked against NanoKafka's listener instead. This pins
    // the finding, and proves that a failing kcat run is reported, not hung.
    let done = kcat.run(&["-b", &tansu.bootstrap, "-L", "-m", "3"], b"", RUN);
    assert!(!done.status.success());
    assert!(
        done.stderr.contains("ApiVersionRequest failed"),
        "{}",
        done.stderr
    );
}
