//! Every client against the others through the broker: records produced natively read by
//! every client, records produced by every client read natively, a group mixing a native
//! member and a kcat member, a native member taking a partition over from a slow
//! confluent-kafka member, and `lag()` against what the clients committed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use nanokafka::Header;

use crate::clients::{self, Client};
use crate::common::{
    args, native_records, next_offsets, read_back_natively, script_commits, script_records, Broker,
    Stamps, RUN,
};
use crate::{confluent, kcat};

/// Every group consumer script: (name, client). `None` if any is missing.
fn consumers() -> Option<Vec<(&'static str, Client)>> {
    Some(vec![
        ("kafka-python", clients::python("kafka_python_consume.py")?),
        ("confluent", clients::python("confluent_consume.py")?),
        ("aiokafka", clients::python("aiokafka_consume.py")?),
        ("kafkajs", clients::node("kafkajs_consume.js")?),
    ])
}

#[test]
fn natively_produced_records_are_read_by_every_client() {
    let (Some(kcat), Some(consumers)) = (kcat::kcat(), consumers()) else {
        return;
    };
    let b = Broker::start();
    b.create("native", 3);
    for i in 0..30 {
        let key = format!("key-{i}");
        let headers = [
            Header::new("i", i.to_string()),
            Header::new("from", "native"),
        ];
        b.broker
            .produce_raw_with_headers(
                "native",
                Some(key.as_bytes()),
                format!("v{i}").as_bytes(),
                &headers,
            )
            .unwrap();
    }
    let stored = b.read_all("native", 30);
    let expected = native_records(&stored);
    let stamps: BTreeMap<(u32, u64), u64> = stored
        .iter()
        .map(|r| ((r.partition, r.offset), r.timestamp_ms))
        .collect();
    assert_eq!(kcat::consume(&kcat, &b, "native"), expected, "kcat");
    // The four group consumers at once, each in a group of its own.
    std::thread::scope(|s| {
        for (name, client) in &consumers {
            let (b, expected, stamps) = (&b, &expected, &stamps);
            s.spawn(move || {
                let group = format!("{name}-group");
                let result = client.run_json(
                    &args(&b.bootstrap, "native", &[&group, "--count", "30"]),
                    RUN,
                );
                let read = script_records(&result);
                assert_eq!(&read, expected, "{name}");
                for r in result["records"].as_array().unwrap() {
                    let at = (
                        r["partition"].as_u64().unwrap() as u32,
                        r["offset"].as_u64().unwrap(),
                    );
                    assert_eq!(r["timestamp"].as_u64(), Some(stamps[&at]), "{name}: {r}");
                }
                // lag() is what the client's commits leave: nothing.
                assert_eq!(script_commits(&result), next_offsets(&read), "{name}");
                let lag = b.broker.lag("native", &group).unwrap();
                assert_eq!(lag, (0..3).map(|p| (p, 0)).collect(), "{name}");
            });
        }
    });
}

#[test]
fn records_of_every_client_read_back_natively() {
    let (Some(kcat), Some(kp), Some(cf), Some(ak), Some(kj)) = (
        kcat::kcat(),
        clients::python("kafka_python_produce.py"),
        clients::python("confluent_produce.py"),
        clients::python("aiokafka_produce.py"),
        clients::node("kafkajs_produce.js"),
    ) else {
        return;
    };
    let b = Broker::start();
    let producers = [
        ("kp", &kp, Stamps::Exact),
        ("cf", &cf, Stamps::Exact),
        ("ak", &ak, Stamps::AtMost),
        ("kj", &kj, Stamps::Exact),
    ];
    for (topic, _, _) in &producers {
        b.create(topic, 2);
    }
    b.create("kc", 2);
    std::thread::scope(|s| {
        for (topic, client, stamps) in producers {
            let b = &b;
            s.spawn(move || {
                let produced = client.run_json(
                    &args(&b.bootstrap, topic, &["--count", "20", "--prefix", topic]),
                    RUN,
                );
                read_back_natively(b, topic, &produced, topic, stamps);
            });
        }
        let (b, kcat) = (&b, &kcat);
        s.spawn(move || {
            let lines: String = (0..20).map(|i| format!("kc-k{i}:kc-v{i}\n")).collect();
            kcat::run(
                kcat,
                b,
                &["-P", "-t", "kc", "-K:", "-H", "from=kcat"],
                lines.as_bytes(),
            );
            let read = b.read_all("kc", 20);
            let got: BTreeSet<_> = native_records(&read)
                .into_iter()
                .map(|r| (r.key, r.value, r.headers))
                .collect();
            let expected: BTreeSet<_> = (0..20)
                .map(|i| {
                    (
                        Some(format!("kc-k{i}").into_bytes()),
                        format!("kc-v{i}").into_bytes(),
                        vec![("from".to_string(), Some(b"kcat".to_vec()))],
                    )
                })
                .collect();
            assert_eq!(got, expected);
        });
    });
}

#[test]
fn a_group_of_a_native_member_and_a_kcat_member() {
    let Some(kcat) = kcat::kcat() else { return };
    let b = Broker::start();
    b.create("mix", 4);
    let native = b
        .broker
        .join_group("mix", "mixed", "native-member")
        .unwrap();
    assert_eq!(native.partitions.len(), 4);
    let member = kcat::group_member(&kcat, &b, "mixed", "mix");
    let theirs = kcat::wait_for_assignment(&member, "mix", 2);
    // The native member learns of the rebalance by its heartbeat.
    let deadline = Instant::now() + RUN;
    let ours = loop {
        let a = b.broker.heartbeat("mix", "mixed", "native-member").unwrap();
        if a.partitions.len() == 2 {
            break a.partitions.iter().copied().collect::<BTreeSet<u32>>();
        }
        assert!(
            Instant::now() < deadline,
            "no rebalance reached the native member: {a:?}"
        );
        pause();
    };
    assert!(ours.is_disjoint(&theirs), "{ours:?} {theirs:?}");
    let mut produced = BTreeSet::new();
    for i in 0..40 {
        let key = format!("k{i}");
        let d = b
            .broker
            .produce_raw("mix", Some(key.as_bytes()), key.clone().into_bytes())
            .unwrap();
        produced.insert((d.partition, d.offset));
    }
    let mine: BTreeSet<_> = produced
        .iter()
        .filter(|(p, _)| ours.contains(p))
        .copied()
        .collect();
    let mut read = BTreeSet::new();
    while read.len() < mine.len() {
        assert!(Instant::now() < deadline, "native member read {read:?}");
        for r in b
            .broker
            .poll_batch_raw(
                "mix",
                "mixed",
                "native-member",
                100,
                Duration::from_millis(200),
            )
            .unwrap()
        {
            b.broker
                .commit("mix", "mixed", r.partition, r.offset)
                .unwrap();
            read.insert((r.partition, r.offset));
        }
    }
    assert_eq!(read, mine, "the native member reads exactly its partitions");
    let theirs_expected: BTreeSet<_> = produced.difference(&mine).copied().collect();
    let out = member.wait_for_stdout("kcat's partitions' records", RUN, |out| {
        kcat::member_records(out).len() >= theirs_expected.len()
    });
    let kcat_read: BTreeSet<_> = kcat::member_records(&out)
        .iter()
        .map(|r| (r.partition, r.offset))
        .collect();
    assert_eq!(
        kcat_read, theirs_expected,
        "kcat reads exactly its partitions"
    );
    // The native member's commits are its partitions' lag of 0.
    let lag = b.broker.lag("mix", "mixed").unwrap();
    for p in &ours {
        assert_eq!(lag[p], 0, "{lag:?}");
    }
    // kcat leaves: the native member gets every partition back.
    member.terminate(RUN);
    let all = loop {
        let a = b.broker.heartbeat("mix", "mixed", "native-member").unwrap();
        if a.partitions.len() == 4 {
            break a;
        }
        assert!(
            Instant::now() < deadline,
            "kcat's leave never reached the native member: {a:?}"
        );
        pause();
    };
    assert_eq!(all.partitions.len(), 4);
}

/// Between two checks of a condition polled with a deadline: heartbeats answer at once, so
/// without a pause the loop would only burn a core the clients need.
fn pause() {
    std::thread::sleep(Duration::from_millis(20));
}

/// A native member joins a group whose Kafka member owns both partitions and is slow on
/// partition 1. The native assignment moves partition 1 to the native member, which reads
/// it only once the Kafka member has given it up (joined again after its revocation, having
/// committed what it processed): no record is processed by both.
#[test]
fn a_native_member_joining_waits_for_a_slow_kafka_member_to_give_up_its_partition() {
    let (Some(produce), Some(consume)) = (
        confluent::producer(),
        clients::python("confluent_consume.py"),
    ) else {
        return;
    };
    let b = Broker::start();
    b.create("handover", 2);
    let all = confluent::three_records_in_each_of_two_partitions(&produce, &b, "handover");
    // Each of the Kafka member's partition-1 records takes longer than a heartbeat interval.
    let more = [
        "handover-group",
        "--until-stdin-closes",
        "--slow-partition",
        "1",
        "--slow-seconds",
        "2",
    ];
    let kafka = consume.spawn(&args(&b.bootstrap, "handover", &more));
    kafka.wait_for_stdout("the Kafka member processing partition 1", RUN, |out| {
        confluent::processed(out).iter().any(|&(p, _)| p == 1)
    });
    // Sorted after the Kafka member's id, so round-robin deals it partition 1.
    let (topic, group, member) = ("handover", "handover-group", "zz-native");
    b.broker.join_group(topic, group, member).unwrap();
    let mut native = BTreeSet::new();
    let deadline = Instant::now() + RUN;
    loop {
        let batch = b
            .broker
            .poll_batch_raw(topic, group, member, 100, Duration::from_millis(200))
            .unwrap();
        for r in &batch {
            native.insert((r.partition, r.offset));
            b.broker
                .commit(topic, group, r.partition, r.offset)
                .unwrap();
        }
        let owned = b.broker.heartbeat(topic, group, member).unwrap().partitions;
        let mut both = native.clone();
        both.extend(confluent::processed(&kafka.stdout()));
        if owned.contains(&1) && both == all {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "native {native:?}, owns {owned:?}"
        );
    }
    let out = kafka.finish(RUN).stdout;
    let by_kafka = confluent::processed(&out);
    let twice: Vec<_> = by_kafka.intersection(&native).collect();
    assert!(
        twice.is_empty(),
        "processed by both members: {twice:?}\nKafka member:\n{out}"
    );
}
