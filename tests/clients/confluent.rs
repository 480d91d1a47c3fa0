//! confluent-kafka (librdkafka) against the listener: a producer reading its offsets from
//! delivery reports with every acks setting, idempotent or not; a group of three members
//! committing by hand; the AdminClient.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::clients::{self, Client, Running};
use crate::common::{
    args, assert_read_back_natively, next_offsets, script_commits, script_records, Broker, RUN,
};

fn producer() -> Option<Client> {
    clients::python("confluent_produce.py")
}

#[test]
fn producer_delivery_reports_with_each_acks() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    let runs: [(&str, &[&str]); 4] = [
        (
            "all-idem",
            &["--acks", "all", "--idempotent", "--compression", "zstd"],
        ),
        ("all", &["--acks", "all", "--compression", "gzip"]),
        ("one", &["--acks", "1", "--compression", "lz4"]),
        ("zero", &["--acks", "0", "--compression", "snappy"]),
    ];
    std::thread::scope(|s| {
        for (topic, extra) in runs {
            let (b, produce) = (&b, &produce);
            s.spawn(move || {
                b.create(topic, 2);
                let mut more = vec!["--count", "25", "--partitioner", "murmur2_random"];
                more.extend_from_slice(extra);
                let produced = produce.run_json(&args(&b.bootstrap, topic, &more), RUN);
                let offsets_known = produced["records"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|r| r["offset"].as_i64() >= Some(0));
                assert_eq!(offsets_known, topic != "zero", "{produced}");
                assert_read_back_natively(b, topic, &produced, "r");
            });
        }
    });
}

#[test]
fn an_acks_0_produce_the_broker_refuses_drops_the_connection_so_librdkafka_sees_it() {
    let Some(produce) = producer() else { return };
    let b = Broker::start();
    b.create("late", 1);
    // Two hours ahead: past the hour a CreateTime may lead the broker's clock.
    let ahead = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        + 2 * 3_600_000;
    let ahead = ahead.to_string();
    let more = [
        "--count",
        "3",
        "--acks",
        "0",
        "--timestamp-ms",
        &ahead,
        "--until-disconnected",
        "--timeout",
        "15",
    ];
    let produced = produce.run_json(&args(&b.bootstrap, "late", &more), RUN);
    assert!(
        produced["disconnects"].as_u64() >= Some(1),
        "the broker closed the connection: {produced}"
    );
    let stats = b.broker.stats().unwrap();
    assert_eq!(stats.topics["late"].partitions[0].log_end_offset, 0);
}

/// The partitions a `confluent_consume.py` member holds after the events printed so far.
fn assignment(stdout: &str) -> Vec<u32> {
    let mut held = Vec::new();
    for event in complete_lines(stdout) {
        let partitions = event["partitions"]
            .as_array()
            .map(|p| p.iter().map(|p| p.as_u64().unwrap() as u32));
        match event["event"].as_str() {
            Some("assigned") => held.extend(partitions.unwrap()),
            Some("revoked") => {
                let lost: Vec<u32> = partitions.unwrap().collect();
                held.retain(|p| !lost.contains(p));
            }
            _ => {}
        }
    }
    held
}

/// The record events printed so far.
fn record_events(stdout: &str) -> usize {
    complete_lines(stdout)
        .iter()
        .filter(|e| e["event"] == "record")
        .count()
}

/// The JSON lines of `stdout` that are complete (a chunk may end mid-line).
fn complete_lines(stdout: &str) -> Vec<Value> {
    clients::json_lines(&stdout[..stdout.rfind('\n').map_or(0, |i| i + 1)])
}

#[test]
fn three_member_group_splits_partitions_and_commits() {
    let (Some(produce), Some(consume)) = (producer(), clients::python("confluent_consume.py"))
    else {
        return;
    };
    let b = Broker::start();
    b.create("cf", 3);
    let members: Vec<Running> = (0..3)
        .map(|_| {
            consume.spawn(&args(
                &b.bootstrap,
                "cf",
                &["cf-group", "--until-stdin-closes"],
            ))
        })
        .collect();
    for member in &members {
        member.wait_for_stdout("an assignment of one partition", RUN, |out| {
            assignment(out).len() == 1
        });
    }
    let held: BTreeSet<u32> = members
        .iter()
        .flat_map(|m| assignment(&m.stdout()))
        .collect();
    assert_eq!(held, (0..3).collect(), "each member one partition");
    let produced = produce.run_json(
        &args(
            &b.bootstrap,
            "cf",
            &["--count", "30", "--idempotent", "--compression", "zstd"],
        ),
        RUN,
    );
    let sent = script_records(&produced);
    // Every member reads its partition's records before any leaves: a leave rebalances the
    // others onto other partitions.
    let mut partitions = Vec::new();
    for member in &members {
        let partition = assignment(&member.stdout())[0];
        let expected = sent.iter().filter(|r| r.partition == partition).count();
        member.wait_for_stdout("its partition's records", RUN, |out| {
            record_events(out) == expected
        });
        partitions.push(partition);
    }
    let mut read = Vec::new();
    for (member, partition) in members.into_iter().zip(partitions) {
        let result = member.finish(RUN).json();
        assert_eq!(result["event"], "done");
        let mine = script_records(&result);
        // The member reports commits of every partition it ever held; while the group
        // formed, or as the others left, it may have held another one for a generation.
        let committed = script_commits(&result).remove(&partition);
        let expected = next_offsets(&mine).remove(&partition);
        assert_eq!(committed, expected, "partition {partition}");
        read.extend(mine);
    }
    read.sort();
    assert_eq!(read, sent);
    let lag = b.broker.lag("cf", "cf-group").unwrap();
    assert!(lag.values().all(|&l| l == 0), "{lag:?}");
}

/// AdminClient: CreateTopics, Metadata, ListGroups (a Kafka client's group and a native
/// one), DeleteTopics; each checked against the broker's own view.
#[test]
fn admin_creates_and_deletes_topics_and_lists_groups() {
    let (Some(admin), Some(consume)) = (
        clients::python("confluent_admin.py"),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    let created = admin.run_json(&[bs, "create-topics", "cfa:3", "scratch"], RUN);
    assert_eq!(created["created"], serde_json::json!(["cfa", "scratch"]));
    let native = b.broker.list_topics().unwrap();
    assert_eq!(native["cfa"].partitions, 3);
    assert_eq!(native["scratch"].partitions, 1);
    let listed = admin.run_json(&[bs, "list-topics"], RUN);
    assert_eq!(
        listed["topics"],
        serde_json::json!([{"name": "cfa", "partitions": 3}, {"name": "scratch", "partitions": 1}])
    );
    // A group of a Kafka client (with a commit) and a native group.
    b.broker.produce_raw("cfa", None, b"x".to_vec()).unwrap();
    consume.run_json(&args(bs, "cfa", &["cfa-group", "--count", "1"]), RUN);
    b.broker.join_group("cfa", "native-group", "m").unwrap();
    let groups = admin.run_json(&[bs, "list-groups"], RUN);
    let ids: BTreeSet<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains("cfa-group") && ids.contains("native-group"),
        "{groups}"
    );
    let deleted = admin.run_json(&[bs, "delete-topics", "scratch"], RUN);
    assert_eq!(deleted["deleted"], serde_json::json!(["scratch"]));
    assert!(!b.broker.list_topics().unwrap().contains_key("scratch"));
    let listed = admin.run_json(&[bs, "list-topics"], RUN);
    assert_eq!(
        listed["topics"],
        serde_json::json!([{"name": "cfa", "partitions": 3}])
    );
}
