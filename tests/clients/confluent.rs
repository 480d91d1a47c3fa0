//! confluent-kafka (librdkafka) against the listener: a producer reading its offsets from
//! delivery reports with every acks setting, idempotent or not; a group of three members
//! committing by hand; a cooperative-sticky handover from a slow member; the AdminClient; a
//! member fetching by topic id; a producer over its client quota told its throttle time.

use std::collections::BTreeSet;

use nanokafka::{TopicConfig, MIN_SEGMENT_BYTES};
use serde_json::Value;

use crate::clients::{self, Client, Running};
use crate::common::{
    args, assert_consecutive_per_partition, assert_read_back_natively, native_records,
    next_offsets, script_commits, script_records, Broker, RUN,
};

pub fn producer() -> Option<Client> {
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
pub fn assignment(stdout: &str) -> Vec<u32> {
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
pub fn record_events(stdout: &str) -> usize {
    complete_lines(stdout)
        .iter()
        .filter(|e| e["event"] == "record")
        .count()
}

/// The JSON lines of `stdout` that are complete (a chunk may end mid-line).
pub fn complete_lines(stdout: &str) -> Vec<Value> {
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
    // min.insync.replicas=1 is what Kafka Connect and Streams set: the replication factor.
    let created = admin.run_json(
        &[
            bs,
            "create-topics",
            "cfa:3",
            "scratch",
            "--config",
            "min.insync.replicas=1",
        ],
        RUN,
    );
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

/// librdkafka's admin tests create topics with `compression.type` and `max.message.bytes`:
/// the topic stores what the producer sends with its codec, and a batch over its limit is
/// refused to the producer (MSG_SIZE_TOO_LARGE) with nothing written.
#[test]
fn admin_creates_a_topic_with_a_codec_and_a_batch_limit_that_the_producer_meets() {
    let (Some(admin), Some(produce), Some(consume)) = (
        clients::python("confluent_admin.py"),
        producer(),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    let configs = ["compression.type=zstd", "max.message.bytes=2000"];
    let created = admin.run_json(
        &[
            bs,
            "create-topics",
            "capped",
            "--config",
            configs[0],
            "--config",
            configs[1],
        ],
        RUN,
    );
    assert_eq!(created["created"], serde_json::json!(["capped"]));
    let produced = produce.run_json(&args(bs, "capped", &["--count", "10"]), RUN);
    assert_read_back_natively(&b, "capped", &produced, "r");
    let consumed = consume.run_json(&args(bs, "capped", &["capped-group", "--count", "10"]), RUN);
    assert_eq!(script_records(&consumed), script_records(&produced));
    let codecs = b.stored_codecs("capped", 0);
    assert!(
        !codecs.is_empty() && codecs.iter().all(|c| c == "zstd"),
        "{codecs:?}"
    );
    // 100 records in one batch (about 5 kB): over the limit.
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
        .to_string();
    let more = [
        "--count",
        "100",
        "--prefix",
        "big",
        "--timestamp-ms",
        &now_ms,
    ];
    let refused = produce.run(&args(bs, "capped", &more), b"", RUN);
    let said = format!("{}{}", refused.stdout, refused.stderr);
    assert!(
        !refused.status.success() && said.contains("MSG_SIZE_TOO_LARGE"),
        "{said}"
    );
    let end = b.broker.stats().unwrap().topics["capped"].partitions[0].log_end_offset;
    assert_eq!(end, 10, "nothing of the refused batch was written: {said}");
}

#[test]
fn admin_deletes_records_and_describes_the_cluster() {
    let Some(admin) = clients::python("confluent_admin.py") else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    b.broker
        .create_topic("trim", nanokafka::TopicConfig::default().partitions(2))
        .unwrap();
    for p in 0..2 {
        let records = (0..4u8)
            .map(|i| nanokafka::ProduceRecord {
                key: None,
                value: vec![i],
            })
            .collect();
        b.broker
            .produce_batch_raw("trim", Some(p), records)
            .unwrap();
    }
    let deleted = admin.run_json(&[bs, "delete-records", "trim:0:3", "trim:1:-1"], RUN);
    assert_eq!(
        deleted["low_watermarks"],
        serde_json::json!({"trim:0": 3, "trim:1": 4})
    );
    let starts: Vec<u64> = b.broker.stats().unwrap().topics["trim"]
        .partitions
        .iter()
        .map(|p| p.log_start_offset)
        .collect();
    assert_eq!(starts, [3, 4]);
    let cluster = admin.run_json(&[bs, "describe-cluster"], RUN);
    assert_eq!(cluster["cluster"]["controller"], 0, "{cluster}");
    let port = bs.rsplit(':').next().unwrap().parse::<u64>().unwrap();
    assert_eq!(
        cluster["cluster"]["nodes"],
        serde_json::json!([{"id": 0, "host": "127.0.0.1", "port": port}])
    );
}

#[test]
fn admin_deletes_a_group_that_committed_and_left() {
    let (Some(admin), Some(consume)) = (
        clients::python("confluent_admin.py"),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    b.broker
        .create_topic("gone", nanokafka::TopicConfig::default())
        .unwrap();
    b.broker.produce_raw("gone", None, b"x".to_vec()).unwrap();
    consume.run_json(&args(bs, "gone", &["old-group", "--count", "1"]), RUN);
    let committed = |b: &Broker| {
        b.broker.stats().unwrap().topics["gone"].partitions[0]
            .committed
            .contains_key("old-group")
    };
    assert!(committed(&b));
    let deleted = admin.run_json(&[bs, "delete-groups", "old-group", "never-was"], RUN);
    assert_eq!(
        deleted["group_results"],
        serde_json::json!({"old-group": "deleted", "never-was": "GROUP_ID_NOT_FOUND"})
    );
    assert!(!committed(&b));
    let groups = admin.run_json(&[bs, "list-groups"], RUN);
    assert_eq!(groups["groups"], serde_json::json!([]), "{groups}");
}

/// CreateTimes that go back across segments (a backfill, a mirror that keeps its source's
/// timestamps): time retention and the max-timestamp ListOffsets weigh every segment's
/// largest timestamp, before a restart and after it.
#[test]
fn create_times_out_of_order_across_segments_survive_a_restart() {
    let (Some(admin), Some(produce)) = (clients::python("confluent_admin.py"), producer()) else {
        return;
    };
    const MINUTE_MS: u64 = 60_000;
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut b = Broker::start_on_fixed_port();
    let segments = TopicConfig::default().segment_bytes(MIN_SEGMENT_BYTES);
    let retained = segments.clone().retention_ms(60 * MINUTE_MS);
    b.broker.create_topic("skewed", retained).unwrap();
    b.broker.create_topic("future", segments).unwrap();
    // One batch of 40 records per run: each run's fills most of a 4 KiB segment, so the
    // next run's rolls it.
    let send = |b: &Broker, topic: &str, prefix: &str, timestamp_ms: u64| {
        let ts = timestamp_ms.to_string();
        let run = [
            b.bootstrap.as_str(),
            topic,
            "--count",
            "40",
            "--partition",
            "0",
        ];
        produce.run_json(
            &[&run[..], &["--prefix", prefix, "--timestamp-ms", &ts]].concat(),
            RUN,
        );
    };
    send(&b, "skewed", "fresh", now_ms);
    send(&b, "skewed", "old", now_ms - 120 * MINUTE_MS);
    for (prefix, minutes) in [("a", 10), ("b", 20), ("c", 5)] {
        send(&b, "future", prefix, now_ms + minutes * MINUTE_MS);
    }
    assert_eq!(b.segment_count("skewed", 0), 2);
    assert_eq!(b.segment_count("future", 0), 3);
    let offsets = |b: &Broker, topic: &str| {
        let partition = format!("{topic}:0");
        admin.run_json(&[&b.bootstrap, "list-offsets", &partition], RUN)["offsets"].clone()
    };
    let check = |b: &Broker, when: &str| {
        // Segment 0's records are within retention: the log starts at 0, and the freshest
        // record is the first of them.
        let skewed = offsets(b, "skewed");
        assert_eq!(skewed["earliest"]["offset"], 0, "{when}: {skewed}");
        assert_eq!(skewed["latest"]["offset"], 80, "{when}: {skewed}");
        let max = serde_json::json!({"offset": 0, "timestamp": now_ms});
        assert_eq!(skewed["max_timestamp"], max, "{when}: {skewed}");
        // The largest timestamp is the second run's, neither the first nor the last segment's.
        let future = offsets(b, "future");
        let max = serde_json::json!({"offset": 40, "timestamp": now_ms + 20 * MINUTE_MS});
        assert_eq!(future["max_timestamp"], max, "{when}: {future}");
    };
    check(&b, "before the restart");
    b = b.restart();
    check(&b, "after the restart");
}

/// The (partition, offset) of every record a `confluent_consume.py` member has started to
/// process so far.
pub fn processed(stdout: &str) -> BTreeSet<(u32, u64)> {
    complete_lines(stdout)
        .iter()
        .filter(|e| e["event"] == "record")
        .map(|e| {
            let partition = e["partition"].as_u64().unwrap() as u32;
            (partition, e["offset"].as_u64().unwrap())
        })
        .collect()
}

/// Produces three records to each of partitions 0 and 1 of `topic` with `produce` (a
/// `confluent_produce.py`); returns their (partition, offset).
pub fn three_records_in_each_of_two_partitions(
    produce: &Client,
    b: &Broker,
    topic: &str,
) -> BTreeSet<(u32, u64)> {
    let mut all = BTreeSet::new();
    for partition in ["0", "1"] {
        let more = [
            "--count",
            "3",
            "--prefix",
            partition,
            "--partition",
            partition,
        ];
        let produced = produce.run_json(&args(&b.bootstrap, topic, &more), RUN);
        all.extend(
            script_records(&produced)
                .iter()
                .map(|r| (r.partition, r.offset)),
        );
    }
    all
}

/// Incremental cooperative rebalancing: member A owns both partitions and is slow on
/// partition 1 when member B joins. The sticky assignment moves partition 1 to B, but B gets
/// it only in the generation after A revoked it (and committed what it processed), so no
/// record is processed by both.
#[test]
fn cooperative_handover_waits_for_the_slow_owner_to_revoke() {
    let (Some(produce), Some(consume)) = (producer(), clients::python("confluent_consume.py"))
    else {
        return;
    };
    let b = Broker::start();
    b.create("coop", 2);
    let all = three_records_in_each_of_two_partitions(&produce, &b, "coop");
    let member = |slow: &[&str]| {
        let mut more = vec![
            "coop-group",
            "--until-stdin-closes",
            "--strategy",
            "cooperative-sticky",
        ];
        more.extend_from_slice(slow);
        consume.spawn(&args(&b.bootstrap, "coop", &more))
    };
    // Each of A's partition-1 records takes longer than a few heartbeats of B's join.
    let a = member(&["--slow-partition", "1", "--slow-seconds", "2"]);
    a.wait_for_stdout("A processing partition 1", RUN, |out| {
        processed(out).iter().any(|&(p, _)| p == 1)
    });
    let b_member = member(&[]);
    b_member.wait_for_stdout(
        "B owning partition 1 and every record processed",
        RUN,
        |out| {
            let mut both = processed(out);
            both.extend(processed(&a.stdout()));
            assignment(out).contains(&1) && both == all
        },
    );
    let (a_out, b_out) = (a.finish(RUN).stdout, b_member.finish(RUN).stdout);
    let (by_a, by_b) = (processed(&a_out), processed(&b_out));
    let twice: Vec<_> = by_a.intersection(&by_b).collect();
    assert!(
        twice.is_empty(),
        "processed by both members: {twice:?}\nA:\n{a_out}\nB:\n{b_out}"
    );
    assert_eq!(by_a.union(&by_b).copied().collect::<BTreeSet<_>>(), all);
}

/// `describe_topics` reports each topic's id, the one the broker keeps, and a topic deleted
/// and created again is described with its new id.
#[test]
fn describe_topics_reports_each_topics_id() {
    let Some(admin) = clients::python("confluent_admin.py") else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    b.broker
        .create_topic("described", TopicConfig::default().partitions(3))
        .unwrap();
    let describe = || admin.run_json(&[bs, "describe-topics", "described"], RUN);
    let hex = |id: nanokafka::TopicId| -> String {
        id.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    };
    let first = describe();
    let id = hex(b.broker.topic_ids().unwrap()["described"]);
    assert_eq!(
        first["described"]["described"],
        serde_json::json!({"topic_id": id, "partitions": 3, "leaders": [0]}),
        "{first}"
    );
    b.broker.delete_topic("described").unwrap();
    b.broker
        .create_topic("described", TopicConfig::default())
        .unwrap();
    let second = describe();
    let new_id = hex(b.broker.topic_ids().unwrap()["described"]);
    assert_ne!(new_id, id);
    assert_eq!(
        second["described"]["described"]["topic_id"],
        new_id.as_str(),
        "{second}"
    );
}

/// Static membership: two members with a `group.instance.id` share four partitions; one is
/// closed (librdkafka sends no LeaveGroup for a static member) and started again with the
/// same instance id within its session timeout. It gets the same partitions back, and the
/// other member sees no rebalance: no revocation, no new assignment.
#[test]
fn a_restarted_static_member_gets_its_partitions_back_and_the_other_sees_no_rebalance() {
    let Some(consume) = clients::python("confluent_consume.py") else {
        return;
    };
    // A session timeout far longer than a restart takes, on a machine as busy as CI's.
    let session = std::time::Duration::from_secs(30);
    let b = Broker::start_with(|builder| builder.session_timeout(session));
    b.create("static", 4);
    let member = |instance: &str| {
        let more = [
            "static-group",
            "--until-stdin-closes",
            "--instance-id",
            instance,
            "--session-timeout-ms",
            "30000",
        ];
        consume.spawn(&args(&b.bootstrap, "static", &more))
    };
    let a = member("instance-a");
    a.wait_for_stdout("A owning every partition", RUN, |out| {
        assignment(out).len() == 4
    });
    let first_b = member("instance-b");
    first_b.wait_for_stdout("B owning two partitions", RUN, |out| {
        assignment(out).len() == 2
    });
    a.wait_for_stdout("A down to two partitions", RUN, |out| {
        assignment(out).len() == 2
    });
    let b_partitions = assignment(&first_b.stdout());
    let a_events_before = complete_lines(&a.stdout()).len();
    first_b.finish(RUN);

    let second_b = member("instance-b");
    second_b.wait_for_stdout("B assigned again", RUN, |out| !assignment(out).is_empty());
    assert_eq!(assignment(&second_b.stdout()), b_partitions);
    let a_out = a.stdout();
    let a_events_after = &complete_lines(&a_out)[a_events_before..];
    assert!(
        a_events_after.iter().all(|e| e["event"] == "record"),
        "A saw a rebalance when B restarted: {a_events_after:?}"
    );
    a.finish(RUN);
    second_b.finish(RUN);
}

/// The legacy AlterConfigs as librdkafka's own tests send it (test 0092): the described set
/// sent back whole, with a change and `message.format.version`, which Kafka 3 accepts and
/// ignores; and commits with metadata, past the log end too, read back by `committed()`
/// (tests 0099 and 0130).
#[test]
fn legacy_alter_configs_and_commits_with_metadata_as_librdkafkas_tests_send_them() {
    let Some(admin) = clients::python("confluent_admin.py") else {
        return;
    };
    let b = Broker::start();
    let bs = b.bootstrap.as_str();
    b.broker
        .create_topic("altered", TopicConfig::default().partitions(2))
        .unwrap();
    let altered = admin.run_json(
        &[
            bs,
            "alter-configs",
            "altered",
            "--config",
            "message.format.version=0.10.0.0",
            "--config",
            "retention.ms=60000",
        ],
        RUN,
    );
    assert_eq!(altered["configs"]["retention.ms"], "60000", "{altered}");
    assert_eq!(
        b.broker.list_topics().unwrap()["altered"].retention_ms,
        Some(60_000)
    );

    // Two records in each partition: 42 is past the log end of partition 0.
    for i in 0..4u8 {
        b.broker.produce_raw("altered", None, vec![i]).unwrap();
    }
    let committed = admin.run_json(
        &[
            bs,
            "commit",
            "meta-group",
            "altered:0:42:Hello world!",
            "altered:1:0",
        ],
        RUN,
    );
    assert_eq!(
        committed["committed"],
        serde_json::json!([
            {"topic": "altered", "partition": 0, "offset": 42, "metadata": "Hello world!"},
            {"topic": "altered", "partition": 1, "offset": 0, "metadata": null},
        ]),
        "{committed}"
    );
    // Lag counts from the log end, never below zero.
    let lag = b.broker.lag("altered", "meta-group").unwrap();
    assert_eq!((lag[&0], lag[&1]), (0, 2));
}

/// librdkafka names topics by id in Fetch (v13+, with the ids Metadata reports): a group
/// member reads a 4-partition topic through Fetch v16, every record once, in order per
/// partition, including those produced while it reads.
#[test]
fn a_consumer_reads_a_multi_partition_topic_by_topic_id() {
    let Some(consume) = clients::python("confluent_consume.py") else {
        return;
    };
    let b = Broker::start();
    b.create("ci", 4);
    b.produce_keyed("ci", 0..20);
    let member = consume.spawn(&args(
        &b.bootstrap,
        "ci",
        &["ci-group", "--count", "40", "--debug", "protocol"],
    ));
    member.wait_for_stdout("the first records", RUN, |out| record_events(out) >= 20);
    b.produce_keyed("ci", 20..40);
    let finished = member.finish(RUN);
    let result = finished.json();
    assert_eq!(result["event"], "done");
    assert!(
        finished.stderr.contains("Sent FetchRequest (v16,"),
        "librdkafka fetches by topic id: {}",
        finished
            .stderr
            .lines()
            .filter(|l| l.contains("FetchRequest"))
            .take(3)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_consecutive_per_partition(&result);
    assert_eq!(
        script_records(&result),
        native_records(&b.read_all("ci", 40)),
        "every record once"
    );
}

#[test]
fn a_producer_over_its_client_quota_sees_the_throttle_time_in_librdkafkas_callback() {
    let Some(produce) = producer() else { return };
    let b = Broker::start_on_fixed_port();
    // The quotas file as `nanokafka` writes it (format: src/security/quota/store.rs).
    let security = b.data_dir().join("security");
    std::fs::create_dir_all(&security).unwrap();
    let quota = r#"{"version":1,"quotas":[{"entity":{"client-id":"throttled"},"values":{"producer_byte_rate":20000}}]}"#;
    std::fs::write(security.join("quotas"), quota).unwrap();
    let b = b.restart();
    b.create("q", 1);
    // About 300 KB at once: over the 10 s a new client is measured on, 30 KB/s against
    // 20 KB/s.
    let more = [
        "--count",
        "300",
        "--pad",
        "1000",
        "--acks",
        "1",
        "--client-id",
        "throttled",
    ];
    let produced = produce.run_json(&args(&b.bootstrap, "q", &more), RUN);
    assert_eq!(produced["records"].as_array().unwrap().len(), 300);
    let throttles: Vec<i64> = (produced["throttles"].as_array().unwrap().iter())
        .map(|t| t.as_i64().unwrap())
        .collect();
    assert!(!throttles.is_empty(), "librdkafka reported no throttle");
    assert!(
        throttles.iter().all(|t| (1..=11_000).contains(t)),
        "{throttles:?}"
    );
}
