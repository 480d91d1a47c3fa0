//! kcat (librdkafka) against the listener: metadata, keyed produce in every codec and with
//! acks -1 and 0, the Java partitioner, consume with headers both ways, offsets for times.
//! Its group members are in `kcat_groups`.

use nanokafka::clock::ManualClock;
use nanokafka::{partition_for_key, Header, ProduceRecord};
use serde_json::Value;
use std::collections::BTreeSet;

use crate::clients::{self, Client};
use crate::common::{native_records, Broker, Seen, RUN};

/// kcat, or `None` when it is not installed (the harness says so; CI panics instead).
pub fn kcat() -> Option<Client> {
    clients::kcat()
}

/// `kcat -b B ARGS...` with `stdin`, which must exit 0; its stdout.
pub fn run(kcat: &Client, broker: &Broker, args: &[&str], stdin: &[u8]) -> String {
    let mut all = vec!["-b", broker.bootstrap.as_str()];
    all.extend_from_slice(args);
    kcat.run_ok(&all, stdin, RUN).stdout
}

/// Every record of `topic` read with `kcat -C -o beginning -e -J`, sorted.
pub fn consume(kcat: &Client, broker: &Broker, topic: &str) -> Vec<Seen> {
    let out = run(
        kcat,
        broker,
        &["-C", "-t", topic, "-o", "beginning", "-e", "-J"],
        b"",
    );
    let mut seen: Vec<Seen> = clients::json_lines(&out).iter().map(from_json).collect();
    seen.sort();
    seen
}

/// A record of kcat's `-J` output (text keys, values and headers).
pub fn from_json(r: &Value) -> Seen {
    let text = |v: &Value| v.as_str().map(|s| s.as_bytes().to_vec());
    let headers = r["headers"].as_array().cloned().unwrap_or_default();
    Seen {
        partition: r["partition"].as_u64().unwrap() as u32,
        offset: r["offset"].as_u64().unwrap(),
        key: text(&r["key"]),
        value: text(&r["payload"]).unwrap_or_default(),
        headers: headers
            .chunks(2)
            .map(|kv| (kv[0].as_str().unwrap().to_string(), text(&kv[1])))
            .collect(),
    }
}

/// `k0:v0\nk1:v1\n...`: `count` keyed lines for `kcat -P -K:`.
fn keyed_lines(prefix: &str, count: usize) -> String {
    (0..count)
        .map(|i| format!("{prefix}-k{i}:{prefix}-v{i}\n"))
        .collect()
}

/// The (key, value) pairs of `records`.
fn pairs(records: &[Seen]) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    records
        .iter()
        .map(|r| (r.key.clone().unwrap_or_default(), r.value.clone()))
        .collect()
}

fn expected_pairs(prefix: &str, count: usize) -> BTreeSet<(Vec<u8>, Vec<u8>)> {
    (0..count)
        .map(|i| {
            (
                format!("{prefix}-k{i}").into_bytes(),
                format!("{prefix}-v{i}").into_bytes(),
            )
        })
        .collect()
}

#[test]
fn metadata_lists_topics_and_partitions() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    b.create("alpha", 3);
    b.create("beta", 1);
    let meta: Value = serde_json::from_str(&run(&kcat, &b, &["-L", "-J"], b"")).unwrap();
    assert_eq!(meta["brokers"][0]["name"], b.bootstrap.as_str(), "{meta}");
    assert_eq!(meta["controllerid"], 0, "{meta}");
    let mut topics: Vec<(String, usize)> = meta["topics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let partitions = t["partitions"].as_array().unwrap();
            for p in partitions {
                assert_eq!(p["leader"], 0, "{t}");
                assert!(p.get("error").is_none(), "{t}");
            }
            (t["topic"].as_str().unwrap().to_string(), partitions.len())
        })
        .collect();
    topics.sort();
    assert_eq!(topics, [("alpha".to_string(), 3), ("beta".to_string(), 1)]);
}

#[test]
fn keyed_produce_in_every_codec_reads_back_natively() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        b.create(&format!("z-{codec}"), 2);
    }
    // One kcat per codec at once: each is a separate client and topic.
    std::thread::scope(|s| {
        for codec in codecs {
            let (kcat, b) = (&kcat, &b);
            s.spawn(move || {
                let topic = format!("z-{codec}");
                let lines = keyed_lines(codec, 20);
                run(
                    kcat,
                    b,
                    &["-P", "-t", &topic, "-K:", "-z", codec],
                    lines.as_bytes(),
                );
                let read = native_records(&b.read_all(&topic, 20));
                assert_eq!(pairs(&read), expected_pairs(codec, 20), "{codec}");
            });
        }
    });
}

#[test]
fn acks_all_and_acks_zero() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    for acks in ["-1", "0"] {
        let topic = format!("acks{acks}");
        b.create(&topic, 1);
        let lines = keyed_lines("a", 10);
        let acks_setting = format!("acks={acks}");
        run(
            &kcat,
            &b,
            &["-P", "-t", &topic, "-K:", "-X", &acks_setting],
            lines.as_bytes(),
        );
        // With acks=0 nothing is answered: the records are there once read.
        let read = native_records(&b.read_all(&topic, 10));
        assert_eq!(pairs(&read), expected_pairs("a", 10), "acks={acks}");
        let offsets: Vec<u64> = read.iter().map(|r| r.offset).collect();
        assert_eq!(offsets, (0..10).collect::<Vec<_>>(), "acks={acks}");
    }
}

#[test]
fn murmur2_random_partitions_like_the_native_producer() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    b.create("keyed", 5);
    let lines = keyed_lines("m", 40);
    run(
        &kcat,
        &b,
        &[
            "-P",
            "-t",
            "keyed",
            "-K:",
            "-X",
            "partitioner=murmur2_random",
        ],
        lines.as_bytes(),
    );
    let read = native_records(&b.read_all("keyed", 40));
    assert_eq!(pairs(&read), expected_pairs("m", 40));
    let used: BTreeSet<u32> = read.iter().map(|r| r.partition).collect();
    assert!(used.len() > 1, "40 keys all in one partition: {used:?}");
    for r in &read {
        let key = r.key.as_deref().unwrap();
        assert_eq!(r.partition, partition_for_key(key, 5), "{r:?}");
        let native = b.broker.produce_keyed("keyed", key, &0u8).unwrap();
        assert_eq!(native.partition, r.partition, "{r:?}");
    }
}

#[test]
fn consumes_natively_produced_keys_values_and_headers() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    b.create("h", 3);
    let mut produced = Vec::new();
    for i in 0..12 {
        let key = format!("key-{i}");
        // A repeated header key, and an empty value, as Kafka allows.
        let headers = vec![
            Header::new("i", i.to_string()),
            Header::new("dup", "one"),
            Header::new("dup", "two"),
            Header::new("empty", ""),
        ];
        let value = format!("value-{i}");
        let d = b
            .broker
            .produce_raw_with_headers("h", Some(key.as_bytes()), value.as_bytes(), &headers)
            .unwrap();
        produced.push(Seen {
            partition: d.partition,
            offset: d.offset,
            key: Some(key.into_bytes()),
            value: value.into_bytes(),
            headers: headers.into_iter().map(|h| (h.key, h.value)).collect(),
        });
    }
    // A record without key.
    let d = b
        .broker
        .produce_raw("h", None, b"keyless".to_vec())
        .unwrap();
    produced.push(Seen {
        partition: d.partition,
        offset: d.offset,
        key: None,
        value: b"keyless".to_vec(),
        headers: Vec::new(),
    });
    produced.sort();
    assert_eq!(consume(&kcat, &b, "h"), produced);
}

#[test]
fn produced_headers_read_back_natively() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    b.create("hp", 1);
    let lines = keyed_lines("h", 5);
    run(
        &kcat,
        &b,
        &["-P", "-t", "hp", "-K:", "-H", "trace=abc", "-H", "n=1"],
        lines.as_bytes(),
    );
    let read = b.read_all("hp", 5);
    let expected = vec![Header::new("trace", "abc"), Header::new("n", "1")];
    for r in &read {
        assert_eq!(r.headers, expected, "{r:?}");
        assert!(r.timestamp_ms > 0, "kcat stamps CreateTime: {r:?}");
    }
    assert_eq!(pairs(&native_records(&read)), expected_pairs("h", 5));
}

#[test]
fn offsets_for_times() {
    let Some(kcat) = kcat() else { return };
    let clock = ManualClock::new(1_700_000_000_000);
    let b = Broker::start_with_clock(clock.clone());
    b.create("times", 2);
    // Partition 0 gets records at t, t+1000, t+2000; partition 1 stays empty.
    for _ in 0..3 {
        b.broker
            .produce_batch_raw(
                "times",
                Some(0),
                vec![ProduceRecord {
                    key: None,
                    value: b"x".to_vec(),
                }],
            )
            .unwrap();
        clock.advance(1000);
    }
    let t = 1_700_000_000_000u64;
    let cases = [
        (t - 5, 0i64),
        (t, 0),
        (t + 1, 1),
        (t + 1000, 1),
        (t + 2000, 2),
        (t + 2001, -1),
    ];
    for (at, expected) in cases {
        let q0 = format!("times:0:{at}");
        let q1 = format!("times:1:{at}");
        let out = run(&kcat, &b, &["-Q", "-J", "-t", &q0, "-t", &q1], b"");
        let answer: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(
            answer["times"]["0"]["offset"], expected,
            "at {at}: {answer}"
        );
        assert_eq!(answer["times"]["1"]["offset"], -1, "at {at}: {answer}");
        let native = b.broker.offset_for_timestamp("times", 0, at).unwrap();
        assert_eq!(native.map_or(-1, |o| o as i64), expected, "at {at}");
    }
}

/// The partitions of `topic` a `kcat -G` member holds after the rebalances it reported so far
/// on stderr (`% Group G rebalanced (memberid M): assigned: T [0], T [1]`, or `revoked:`).
fn kcat_assignment(stderr: &str, topic: &str) -> Option<BTreeSet<u32>> {
    // Complete lines only: a chunk may end inside a list of partitions.
    let complete = &stderr[..stderr.rfind('\n').map_or(0, |i| i + 1)];
    let last = complete.lines().rev().find(|l| l.contains("rebalanced"))?;
    if last.contains("revoked:") {
        return Some(BTreeSet::new());
    }
    let listed = last.split("assigned:").nth(1)?;
    let prefix = format!("{topic} [");
    Some(
        listed
            .split(',')
            .filter_map(|p| {
                p.trim()
                    .strip_prefix(&prefix)?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .collect(),
    )
}

/// Starts `kcat -G group topic` from the earliest offset, records as `-J` lines on stdout.
pub fn group_member(kcat: &Client, b: &Broker, group: &str, topic: &str) -> clients::Running {
    kcat.spawn(&[
        "-b",
        &b.bootstrap,
        "-G",
        group,
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        "session.timeout.ms=6000",
        "-J",
        // Unbuffered: each record is on the pipe as it is read.
        "-u",
        topic,
    ])
}

/// Waits until `member` reports holding `count` partitions of `topic`; returns them.
pub fn wait_for_assignment(member: &clients::Running, topic: &str, count: usize) -> BTreeSet<u32> {
    let what = format!("an assignment of {count} partitions");
    let err = member.wait_for_stderr(&what, RUN, |e| {
        kcat_assignment(e, topic).is_some_and(|a| a.len() == count)
    });
    kcat_assignment(&err, topic).unwrap()
}

/// The records a `kcat -G -J` member printed so far (complete lines only).
pub fn member_records(stdout: &str) -> Vec<Seen> {
    let complete = &stdout[..stdout.rfind('\n').map_or(0, |i| i + 1)];
    clients::json_lines(complete)
        .iter()
        .map(from_json)
        .collect()
}

#[test]
fn two_group_members_split_partitions_and_rebalance_when_one_leaves() {
    let Some(kcat) = kcat() else { return };
    let b = Broker::start();
    b.create("g", 4);
    let first = group_member(&kcat, &b, "kg", "g");
    let second = group_member(&kcat, &b, "kg", "g");
    let a = wait_for_assignment(&first, "g", 2);
    let c = wait_for_assignment(&second, "g", 2);
    assert!(
        a.is_disjoint(&c),
        "{a:?} and {c:?} overlap\nfirst:\n{}\nsecond:\n{}",
        first.stderr(),
        second.stderr()
    );
    let mut produced = Vec::new();
    for i in 0..40 {
        let key = format!("k{i}");
        let d = b
            .broker
            .produce_raw("g", Some(key.as_bytes()), key.clone().into_bytes())
            .unwrap();
        produced.push((d.partition, d.offset));
    }
    // Each member reads exactly its partitions' records.
    for (member, mine) in [(&first, &a), (&second, &c)] {
        let expected: BTreeSet<_> = produced
            .iter()
            .filter(|(p, _)| mine.contains(p))
            .copied()
            .collect();
        let out = member.wait_for_stdout("its partitions' records", RUN, |out| {
            member_records(out).len() >= expected.len()
        });
        let read: BTreeSet<_> = member_records(&out)
            .iter()
            .map(|r| (r.partition, r.offset))
            .collect();
        assert_eq!(read, expected);
    }
    // SIGTERM: the member leaves the group; the other one takes every partition.
    let left = second.terminate(RUN);
    assert!(left.stderr.contains("revoked"), "{}", left.stderr);
    let all = wait_for_assignment(&first, "g", 4);
    assert_eq!(all, (0..4).collect());
    let d = b
        .broker
        .produce_raw("g", Some(b"after".as_slice()), b"after".to_vec())
        .unwrap();
    first.wait_for_stdout("the record produced after the rebalance", RUN, |out| {
        member_records(out)
            .iter()
            .any(|r| (r.partition, r.offset) == (d.partition, d.offset))
    });
    first.terminate(RUN);
}
