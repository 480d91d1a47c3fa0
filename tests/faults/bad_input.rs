//! Every bad input gets its named error and changes nothing. The table runs each bad call against
//! one broker and compares `stats()` and the files on disk before and after it; the cases that need
//! a broker of their own (stopped, locked, no actix thread) follow.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{self, log_end};
use nanokafka::{Assignor, Error, NanoKafka, ProduceRecord, RecordBatch, Result, TopicConfig};

/// One bad call and the error it must get.
struct Case {
    what: &'static str,
    call: fn(&NanoKafka) -> Result<()>,
    expected: fn(&Error) -> bool,
}

macro_rules! case {
    ($what:expr, |$broker:ident| $call:expr, $pattern:pat $(if $guard:expr)?) => {
        Case {
            what: $what,
            call: |$broker: &NanoKafka| $call.map(drop),
            expected: |e| matches!(e, $pattern $(if $guard)?),
        }
    };
}

const MAX_RECORD_BYTES: usize = 1024;
/// Small enough that a batch of records each within `MAX_RECORD_BYTES` can exceed it.
const MAX_REQUEST_BYTES: usize = 8 * MAX_RECORD_BYTES;

/// Every path under `root`, to show that nothing was created (or escaped to) on disk.
fn files(root: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut pending = vec![root.to_owned()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path.clone());
            }
            found.insert(path);
        }
    }
    found
}

fn raw(value: &[u8]) -> Vec<ProduceRecord> {
    vec![ProduceRecord {
        key: None,
        value: value.to_vec(),
    }]
}

fn batch(values: &[&[u8]]) -> RecordBatch {
    let mut batch = RecordBatch::new();
    for value in values {
        batch.push_raw(None, value);
    }
    batch
}

fn cases() -> Vec<Case> {
    vec![
        // Topic names: [A-Za-z0-9._-]{1,249}, not "." or "..".
        case!(
            "empty topic name",
            |b| b.create_topic("", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic .",
            |b| b.create_topic(".", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic ..",
            |b| b.create_topic("..", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic a/b",
            |b| b.create_topic("a/b", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic ../x",
            |b| b.create_topic("../x", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic of 250 chars",
            |b| b.create_topic(&"x".repeat(250), TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "non-ASCII topic",
            |b| b.create_topic("tópico", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic with a space",
            |b| b.create_topic("a b", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        case!(
            "topic with NUL",
            |b| b.create_topic("a\0b", TopicConfig::default()),
            Error::InvalidTopicName { .. }
        ),
        // Topic configs.
        case!(
            "0 partitions",
            |b| b.create_topic("new", TopicConfig::default().partitions(0)),
            Error::InvalidConfig {
                field: "partitions",
                ..
            }
        ),
        case!("existing topic", |b| b.create_topic("t", TopicConfig::default().partitions(5)), Error::TopicExists { ref topic } if topic == "t"),
        // Unknown topic, whatever the call.
        case!("produce to unknown topic", |b| b.produce("nope", &1u64), Error::UnknownTopic { ref topic } if topic == "nope"),
        case!(
            "keyed produce to unknown topic",
            |b| b.produce_keyed("nope", "k", &1u64),
            Error::UnknownTopic { .. }
        ),
        case!(
            "raw produce to unknown topic",
            |b| b.produce_raw("nope", None, vec![1]),
            Error::UnknownTopic { .. }
        ),
        case!(
            "join unknown topic",
            |b| b.join_group("nope", "g", "m"),
            Error::UnknownTopic { .. }
        ),
        case!(
            "poll unknown topic",
            |b| b.poll::<u64>("nope", "g", "m"),
            Error::UnknownTopic { .. }
        ),
        case!(
            "commit unknown topic",
            |b| b.commit("nope", "g", 0, 0),
            Error::UnknownTopic { .. }
        ),
        case!(
            "lag of unknown topic",
            |b| b.lag("nope", "g"),
            Error::UnknownTopic { .. }
        ),
        case!(
            "heartbeat unknown topic",
            |b| b.heartbeat("nope", "g", "m"),
            Error::UnknownTopic { .. }
        ),
        case!(
            "leave unknown topic",
            |b| b.leave_group("nope", "g", "m"),
            Error::UnknownTopic { .. }
        ),
        case!(
            "path-like unknown topic",
            |b| b.produce("../t", &1u64),
            Error::UnknownTopic { .. }
        ),
        // Unknown partition.
        case!(
            "produce to partition 2 of 2",
            |b| b.produce_batch_raw("t", Some(2), raw(b"x")),
            Error::UnknownPartition { partition: 2, .. }
        ),
        case!(
            "commit partition 2 of 2",
            |b| b.commit("t", "g", 2, 0),
            Error::UnknownPartition { partition: 2, .. }
        ),
        // Unknown group.
        case!("commit for unknown group", |b| b.commit("t", "nogroup", 0, 0), Error::UnknownGroup { ref group, .. } if group == "nogroup"),
        case!(
            "lag of unknown group",
            |b| b.lag("t", "nogroup"),
            Error::UnknownGroup { .. }
        ),
        // Unknown member.
        case!("poll as a stranger", |b| b.poll::<u64>("t", "g", "stranger"), Error::UnknownMember { ref member, .. } if member == "stranger"),
        case!(
            "poll in unknown group",
            |b| b.poll::<u64>("t", "nogroup", "m"),
            Error::UnknownMember { .. }
        ),
        case!(
            "long poll as a stranger",
            |b| b.poll_timeout::<u64>("t", "g", "stranger", Duration::from_secs(30)),
            Error::UnknownMember { .. }
        ),
        case!(
            "heartbeat as a stranger",
            |b| b.heartbeat("t", "g", "stranger"),
            Error::UnknownMember { .. }
        ),
        case!(
            "leave as a stranger",
            |b| b.leave_group("t", "g", "stranger"),
            Error::UnknownMember { .. }
        ),
        case!(
            "leave unknown group",
            |b| b.leave_group("t", "nogroup", "m"),
            Error::UnknownMember { .. }
        ),
        // Commit out of range: offset >= log end (partition 0 holds offsets 0 and 1).
        case!(
            "commit at the log end",
            |b| b.commit("t", "g", 0, 2),
            Error::OffsetOutOfRange {
                offset: 2,
                log_end_offset: 2,
                ..
            }
        ),
        case!(
            "commit far past the log end",
            |b| b.commit("t", "g", 0, u64::MAX),
            Error::OffsetOutOfRange { .. }
        ),
        case!(
            "commit on an emptier partition",
            |b| b.commit("t", "g", 1, 1),
            Error::OffsetOutOfRange {
                offset: 1,
                log_end_offset: 1,
                ..
            }
        ),
        // Record size: key + value over the builder's max_record_bytes.
        case!(
            "raw value over the max",
            |b| b.produce_raw("t", None, vec![0; MAX_RECORD_BYTES + 1]),
            Error::RecordTooLarge {
                size: 1025,
                max: MAX_RECORD_BYTES
            }
        ),
        case!(
            "key + value over the max",
            |b| b.produce_raw("t", Some(&[1; 600]), vec![0; 600]),
            Error::RecordTooLarge { size: 1200, .. }
        ),
        case!(
            "typed value over the max",
            |b| b.produce("t", &"y".repeat(2000)),
            Error::RecordTooLarge { .. }
        ),
        case!(
            "oversized record in a batch",
            |b| b.produce_batch_raw(
                "t",
                Some(0),
                vec![raw(b"ok").remove(0), raw(&[0; 2000]).remove(0)]
            ),
            Error::RecordTooLarge { .. }
        ),
        case!(
            "oversized keyless record in a RecordBatch spread over partitions",
            |b| b.produce_batch("t", None, batch(&[b"ok", &[0; 2000], b"ok"])),
            Error::RecordTooLarge { size: 2000, .. }
        ),
        case!(
            "RecordBatch over the request size, each record within the record size",
            |b| b.produce_batch("t", Some(0), batch(&[&[0u8; 1000][..]; 10])),
            Error::RequestTooLarge {
                max: MAX_REQUEST_BYTES,
                ..
            }
        ),
        case!(
            "raw batch over the request size, spread over partitions",
            |b| b.produce_batch_raw("t", None, vec![raw(&[0; 1000]).remove(0); 10]),
            Error::RequestTooLarge {
                max: MAX_REQUEST_BYTES,
                ..
            }
        ),
        case!(
            "RecordBatch to partition 2 of 2",
            |b| b.produce_batch("t", Some(2), batch(&[b"x"])),
            Error::UnknownPartition { partition: 2, .. }
        ),
        // poll_batch of nothing.
        case!(
            "poll_batch max 0",
            |b| b.poll_batch::<u64>("t", "g", "m", 0, Duration::ZERO),
            Error::InvalidArgument {
                name: "max_records",
                ..
            }
        ),
        case!(
            "poll_batch_raw max 0",
            |b| b.poll_batch_raw("t", "g", "m", 0, Duration::ZERO),
            Error::InvalidArgument {
                name: "max_records",
                ..
            }
        ),
        // Group and member ids.
        case!(
            "empty group id",
            |b| b.join_group("t", "", "m"),
            Error::InvalidId { kind: "group", .. }
        ),
        case!(
            "group id with newline",
            |b| b.join_group("t", "g\n", "m"),
            Error::InvalidId { kind: "group", .. }
        ),
        case!(
            "empty member id",
            |b| b.join_group("t", "g", ""),
            Error::InvalidId { kind: "member", .. }
        ),
        case!(
            "member id with BEL",
            |b| b.join_group("t", "g", "m\u{7}"),
            Error::InvalidId { kind: "member", .. }
        ),
        case!(
            "member id with DEL",
            |b| b.join_group("t", "g2", "m\u{7f}"),
            Error::InvalidId { kind: "member", .. }
        ),
        // Joining with another assignor than the group's.
        case!(
            "assignor mismatch",
            |b| b.join_group_with("t", "g", "m2", Assignor::Range),
            Error::GroupOptionsMismatch { .. }
        ),
    ]
}

#[test]
fn every_bad_input_gets_its_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path().join("data"))
        .max_record_bytes(MAX_RECORD_BYTES)
        .max_request_bytes(MAX_REQUEST_BYTES)
        .build()
        .unwrap();
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    for i in 0..3u64 {
        broker.produce("t", &i).unwrap(); // partition 0: offsets 0, 1; partition 1: offset 0
    }
    broker.join_group("t", "g", "m").unwrap();
    broker.commit("t", "g", 0, 0).unwrap();

    for case in cases() {
        let (stats, on_disk) = (broker.stats().unwrap(), files(dir.path()));
        match (case.call)(&broker) {
            Ok(()) => panic!("{}: accepted", case.what),
            Err(e) => assert!((case.expected)(&e), "{}: wrong error {e:?}", case.what),
        }
        assert_eq!(
            broker.stats().unwrap(),
            stats,
            "{}: stats changed",
            case.what
        );
        assert_eq!(files(dir.path()), on_disk, "{}: files changed", case.what);
    }

    // And the broker still serves the good calls.
    let r = broker.poll::<u64>("t", "g", "m").unwrap().unwrap();
    assert_eq!(r.offset, if r.partition == 0 { 1 } else { 0 });
}

#[test]
fn a_topic_name_of_249_allowed_characters_is_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let name = format!("{}.-_9Z", "a".repeat(244));
    assert_eq!(name.len(), 249);
    broker.create_topic(&name, TopicConfig::default()).unwrap();
    broker.produce(&name, &1u64).unwrap();
    assert_eq!(log_end(&broker, &name, 0), 1);
}

#[test]
fn calls_after_shutdown_are_broker_stopped_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.produce("t", &1u64).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    broker.shutdown().unwrap();

    let stopped = |what: &str, result: Result<()>| {
        assert!(
            matches!(result, Err(Error::BrokerStopped)),
            "{what}: {result:?}"
        );
    };
    stopped(
        "create_topic",
        broker.create_topic("u", TopicConfig::default()),
    );
    stopped("produce", broker.produce("t", &2u64).map(drop));
    stopped(
        "produce_raw",
        broker.produce_raw("t", None, vec![1]).map(drop),
    );
    stopped("join_group", broker.join_group("t", "g", "n").map(drop));
    stopped("heartbeat", broker.heartbeat("t", "g", "m").map(drop));
    stopped("poll", broker.poll::<u64>("t", "g", "m").map(drop));
    stopped("commit", broker.commit("t", "g", 0, 0));
    stopped("lag", broker.lag("t", "g").map(drop));
    stopped("leave_group", broker.leave_group("t", "g", "m"));
    stopped("stats", broker.stats().map(drop));
    stopped(
        "clone's produce",
        broker.clone().produce("t", &3u64).map(drop),
    );
    broker.shutdown().expect("shutdown is idempotent");
    drop(broker);

    let reopened = NanoKafka::open(dir.path()).unwrap();
    let stats = reopened.stats().unwrap();
    assert_eq!(stats.topics.keys().collect::<Vec<_>>(), vec!["t"]);
    assert_eq!(stats.topics["t"].partitions[0].log_end_offset, 1);
    assert!(stats.topics["t"].partitions[0].committed.is_empty());
}

#[test]
fn a_second_open_of_a_data_dir_in_use_is_data_dir_locked() {
    let dir = tempfile::tempdir().unwrap();
    let first = NanoKafka::open(dir.path()).unwrap();
    first.create_topic("t", TopicConfig::default()).unwrap();

    let err = NanoKafka::open(dir.path()).unwrap_err();
    assert!(
        matches!(err, Error::DataDirLocked { ref path, .. } if path == dir.path()),
        "{err:?}"
    );
    // The failed open disturbed nothing.
    first.produce("t", &1u64).unwrap();
    assert_eq!(log_end(&first, "t", 0), 1);

    first.shutdown().unwrap();
    let second = NanoKafka::open(dir.path()).expect("free once the first shut down");
    assert_eq!(log_end(&second, "t", 0), 1);
}

#[test]
fn a_data_dir_path_that_is_a_file_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"precious").unwrap();
    for path in [file.clone(), file.join("below")] {
        let err = NanoKafka::open(&path).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{path:?}: {err:?}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"precious");
}

#[test]
fn a_blocking_call_inside_an_actix_system_is_refused_without_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path().join("data")).unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();

    let (tx, rx) = mpsc::channel();
    let (inside, other_dir) = (broker.clone(), dir.path().join("other"));
    // Its own thread: a System, once created, stays this thread's current one.
    std::thread::spawn(move || {
        let results = actix_rt::System::new().block_on(async move {
            vec![
                ("produce", inside.produce("t", &1u64).map(drop)),
                ("poll", inside.poll::<u64>("t", "g", "m").map(drop)),
                ("stats", inside.stats().map(drop)),
                ("open", NanoKafka::open(&other_dir).map(drop)),
                ("shutdown", inside.shutdown()),
            ]
        });
        tx.send(results).unwrap();
    });
    let results = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("no deadlock: the calls return");
    for (what, result) in results {
        assert!(
            matches!(result, Err(Error::BlockingInActorContext)),
            "{what}: {result:?}"
        );
    }
    assert_eq!(
        log_end(&broker, "t", 0),
        0,
        "the refused produce wrote nothing"
    );
    assert!(
        !dir.path().join("other").exists(),
        "the refused open created nothing"
    );
    broker
        .produce("t", &1u64)
        .expect("still serving plain threads: the refused shutdown stopped nothing");
}

#[test]
fn builder_values_out_of_range_are_invalid_arguments_and_start_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let builder = || NanoKafka::builder().data_dir(dir.path().join("data"));
    let refused: Vec<(&str, Result<NanoKafka>)> = vec![
        (
            "idle_spin of an hour",
            builder().idle_spin(Duration::from_secs(3600)).build(),
        ),
        ("idle_spin MAX", builder().idle_spin(Duration::MAX).build()),
        (
            "max_request_bytes 0",
            builder().max_request_bytes(0).build(),
        ),
        (
            "max_request_bytes below max_record_bytes",
            builder()
                .max_record_bytes(4096)
                .max_request_bytes(1024)
                .build(),
        ),
        (
            "max_request_bytes 2 GiB",
            builder().max_request_bytes(2 << 30).build(),
        ),
    ];
    for (what, result) in refused {
        assert!(
            // Each case is named after the argument it gets wrong.
            matches!(result, Err(Error::InvalidArgument { name, .. })
                if Some(name) == what.split(' ').next()),
            "{what}: {:?}",
            result.map(drop)
        );
    }
    assert!(
        !dir.path().join("data").exists(),
        "a refused build creates nothing"
    );
}

/// "Wait forever" is `Duration::MAX`. Every wait a caller passes is added to a clock reading
/// somewhere; none of them may overflow and take an actor (or the broker) down.
#[test]
fn duration_max_means_wait_forever_and_stops_no_actor() {
    common::within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .block_timeout(Duration::MAX)
            .session_timeout(Duration::MAX)
            .build()
            .unwrap();
        broker
            .create_topic("t", TopicConfig::default().max_size(1))
            .unwrap();
        broker.join_group("t", "g", "m").unwrap();

        // A long poll parked "forever" is answered by the next produce.
        let poller = {
            let broker = broker.clone();
            std::thread::spawn(move || broker.poll_timeout::<u64>("t", "g", "m", Duration::MAX))
        };
        broker.produce("t", &1u64).unwrap();
        let polled = poller
            .join()
            .unwrap()
            .unwrap()
            .expect("the produce wakes the poll");
        assert_eq!(polled.value, 1);
        let batch = broker
            .poll_batch::<u64>("t", "g", "m", 10, Duration::MAX)
            .unwrap();
        assert_eq!(batch.len(), 1, "data present: no wait at all");

        // Backpressure with an unbounded block timeout: parked until a commit frees room.
        let producer = {
            let broker = broker.clone();
            std::thread::spawn(move || broker.produce("t", &2u64))
        };
        broker.commit("t", "g", 0, 0).unwrap();
        assert_eq!(producer.join().unwrap().unwrap().offset, 1);

        // A consumer waiting forever on a partition with data returns it at once.
        let mut consumer = broker.consumer::<u64>("t", "g2", "c").unwrap();
        let values: Vec<u64> = consumer
            .poll_batch(10, Duration::MAX)
            .unwrap()
            .into_iter()
            .map(|r| r.value)
            .collect();
        assert_eq!(values, [1, 2]);

        // Nothing stopped: the broker, the topic, the coordinators and the partition answer.
        assert_eq!(broker.heartbeat("t", "g", "m").unwrap().partitions, [0]);
        assert_eq!(broker.lag("t", "g").unwrap()[&0], 1);
        let stats = broker.stats().unwrap();
        assert_eq!(stats.topics["t"].partitions[0].log_end_offset, 2);
        assert_eq!(stats.topics["t"].partitions[0].restarts, 0);
        assert_eq!(stats.restarts, 0);
    });
}
