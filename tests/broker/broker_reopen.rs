//! Reopening a broker's data directory, black-box: after `shutdown()`, after dropping the last
//! handle, and after a `kill -9` of the process that held it. Topics and their configs, records,
//! log start offsets and committed offsets come back; memberships do not.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nanokafka::{Backpressure, Error, FsyncPolicy, NanoKafka, TopicConfig};

const WATCHDOG: Duration = Duration::from_secs(60);

fn values(log: &BTreeMap<u64, u64>) -> Vec<(u64, u64)> {
    log.iter().map(|(o, v)| (*o, *v)).collect()
}

#[test]
fn topics_records_log_start_and_commits_come_back_after_shutdown() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        let kept = TopicConfig::default()
            .partitions(2)
            .retention_size(5)
            .segment_bytes(4096);
        broker.create_topic("kept", kept.clone()).unwrap();
        let bounded = TopicConfig::default()
            .max_size(3)
            .backpressure(Backpressure::Reject);
        broker.create_topic("bounded", bounded).unwrap();
        // Round-robin: partition 0 holds 0, 2, .., 18 and partition 1 holds 1, 3, .., 19 at
        // offsets 0..10; retention keeps the last 5 of each.
        for value in 0..20u64 {
            broker.produce("kept", &value).unwrap();
        }
        for value in 0..3u64 {
            broker.produce("bounded", &value).unwrap();
        }
        broker.join_group("kept", "g", "c").unwrap();
        broker.commit("kept", "g", 0, 6).unwrap();
        broker.commit("kept", "g", 1, 8).unwrap();
        let before = broker.stats().unwrap();
        assert_eq!(before.topics["kept"].partitions[0].log_start_offset, 5);
        broker.shutdown().unwrap();
        assert!(matches!(
            broker.produce("kept", &0u64),
            Err(Error::BrokerStopped)
        ));

        let broker = NanoKafka::open(dir.path()).unwrap();
        let after = broker.stats().unwrap();
        assert_eq!(
            after.topics.keys().collect::<Vec<_>>(),
            before.topics.keys().collect::<Vec<_>>()
        );
        for (name, topic) in &after.topics {
            // Log start and end, bytes, segments, committed offsets: exactly as they were.
            assert_eq!(topic.partitions, before.topics[name].partitions, "{name}");
            assert!(topic.groups.is_empty(), "memberships do not persist");
        }
        assert_eq!(
            broker.lag("kept", "g").unwrap(),
            BTreeMap::from([(0, 3), (1, 1)])
        );

        // Members must rejoin; the group then resumes at its committed offsets.
        for result in [
            broker.poll::<u64>("kept", "g", "c").map(|_| ()),
            broker.heartbeat("kept", "g", "c").map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(Error::UnknownMember { .. })),
                "{result:?}"
            );
        }
        assert_eq!(
            broker.join_group("kept", "g", "c").unwrap().partitions,
            [0, 1]
        );
        let mut resumed = BTreeMap::new();
        while let Some(r) = broker.poll::<u64>("kept", "g", "c").unwrap() {
            resumed.entry(r.partition).or_insert((r.offset, r.value));
            broker.commit("kept", "g", r.partition, r.offset).unwrap();
        }
        assert_eq!(resumed, BTreeMap::from([(0, (7, 14)), (1, (9, 19))]));

        // The records themselves, from the log start.
        let log = common::read_topic(&broker, "kept", "fresh");
        assert_eq!(
            values(&log[&0]),
            [(5, 10), (6, 12), (7, 14), (8, 16), (9, 18)]
        );
        assert_eq!(
            values(&log[&1]),
            [(5, 11), (6, 13), (7, 15), (8, 17), (9, 19)]
        );

        // The configs came back too: retention still keeps 5 records, the bounded topic still
        // rejects at its max_size.
        broker.produce("kept", &20u64).unwrap();
        let p = &broker.stats().unwrap().topics["kept"].partitions;
        assert_eq!(p.len(), kept.partitions as usize);
        let retained: Vec<u64> = p
            .iter()
            .map(|p| p.log_end_offset - p.log_start_offset)
            .collect();
        assert_eq!(retained, [5, 5]);
        let full = broker.produce("bounded", &3u64);
        assert!(
            matches!(full, Err(Error::PartitionFull { max_size: 3, .. })),
            "{full:?}"
        );
        broker.shutdown().unwrap();
    });
}

#[test]
fn both_fsync_extremes_reopen_with_everything_after_a_clean_shutdown() {
    for policy in [FsyncPolicy::Always, FsyncPolicy::Never] {
        common::within(WATCHDOG, move || {
            let dir = tempfile::tempdir().unwrap();
            let open = || {
                NanoKafka::builder()
                    .data_dir(dir.path())
                    .fsync(policy)
                    .build()
                    .unwrap()
            };
            let broker = open();
            broker
                .create_topic("t", TopicConfig::default().partitions(2))
                .unwrap();
            let mut produced: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
            for value in 0..40u64 {
                let d = broker
                    .produce_keyed("t", format!("key-{}", value % 5), &value)
                    .unwrap();
                produced
                    .entry(d.partition)
                    .or_default()
                    .insert(d.offset, value);
            }
            broker.join_group("t", "g", "c").unwrap();
            broker.commit("t", "g", 0, 3).unwrap();
            let committed = |b: &NanoKafka| {
                b.stats().unwrap().topics["t"].partitions[0]
                    .committed
                    .clone()
            };
            let before = committed(&broker);
            broker.shutdown().unwrap();

            let broker = open();
            assert_eq!(
                common::read_topic(&broker, "t", "fresh"),
                produced,
                "{policy:?}"
            );
            assert_eq!(committed(&broker)["g"], 4, "{policy:?}");
            assert_eq!(committed(&broker).get("g"), before.get("g"));
            broker.shutdown().unwrap();
        });
    }
}

#[test]
fn the_lock_is_released_by_shutdown_and_by_dropping_the_last_handle() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let first = NanoKafka::open(dir.path()).unwrap();
        first.create_topic("t", TopicConfig::default()).unwrap();
        first.produce("t", &1u64).unwrap();
        let second = NanoKafka::open(dir.path());
        assert!(
            matches!(second, Err(Error::DataDirLocked { .. })),
            "{second:?}"
        );
        first.shutdown().unwrap();

        let reopened = NanoKafka::open(dir.path()).unwrap();
        reopened.produce("t", &2u64).unwrap();
        let clone = reopened.clone();
        drop(reopened);
        // A clone still holds the broker, and so the lock.
        assert!(matches!(
            NanoKafka::open(dir.path()),
            Err(Error::DataDirLocked { .. })
        ));
        clone.produce("t", &3u64).unwrap();
        drop(clone);

        let last = NanoKafka::open(dir.path()).unwrap();
        let log = common::read_topic(&last, "t", "g");
        assert_eq!(values(&log[&0]), [(0, 1), (1, 2), (2, 3)]);
        last.shutdown().unwrap();
    });
}

/// Whether the partition's `checkpoint` records a clean shutdown (byte 5 of its documented
/// layout, after the `NKCP` magic and the version).
fn closed_cleanly(partition_dir: &Path) -> bool {
    let checkpoint = std::fs::read(partition_dir.join("checkpoint")).unwrap();
    assert_eq!(&checkpoint[..4], b"NKCP");
    checkpoint[5] == 1
}

/// Code inside `#[actix::main]` or a tokio test may hold the last handle. Dropping it there
/// must still close the partitions cleanly and release the lock before the drop returns, so
/// the next open neither scans nor finds the directory locked; a `Shutdown` message sent
/// first changes nothing.
#[test]
fn dropping_the_last_handle_inside_a_runtime_closes_cleanly_before_it_returns() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        for round in 0..5u64 {
            let broker = NanoKafka::open(dir.path()).unwrap();
            if round == 0 {
                broker.create_topic("t", TopicConfig::default()).unwrap();
            }
            broker.produce("t", &round).unwrap();
            let send_shutdown_first = round % 2 == 1;
            actix_rt::System::new().block_on(async move {
                if send_shutdown_first {
                    let addr = broker.addr().unwrap();
                    addr.send(nanokafka::messages::Shutdown)
                        .await
                        .unwrap()
                        .unwrap();
                }
                drop(broker);
            });
            assert!(closed_cleanly(&dir.path().join("t_0")), "round {round}");
            // At once: the lock is already free.
            let reopened = NanoKafka::open(dir.path()).unwrap();
            assert_eq!(common::log_end(&reopened, "t", 0), round + 1);
            reopened.shutdown().unwrap();
        }
    });
}

/// Selects the child mode of this test binary (see [`kill_9_child`]) and names its data dir.
const CHILD_DIR_ENV: &str = "NANOKAFKA_KILL9_CHILD_DIR";
const KILL9_TOPIC: &str = "kill9";
const KILL9_ROUNDS: usize = 3;
/// Acknowledgements the parent reads before it kills the child.
const ACKS_BEFORE_KILL: usize = 300;

/// The child process of [`acknowledged_records_survive_kill_9`]: opens the broker, then
/// produces value = offset forever, printing `ack <offset> <value>` after each
/// acknowledgement, until it is killed (or its parent stops reading).
#[test]
#[ignore = "child process of acknowledged_records_survive_kill_9, which runs it"]
fn kill_9_child() {
    let Some(dir) = std::env::var_os(CHILD_DIR_ENV) else {
        return;
    };
    let broker = NanoKafka::open(&dir).unwrap();
    let mut next = broker.stats().unwrap().topics[KILL9_TOPIC].partitions[0].log_end_offset;
    let mut out = std::io::stdout().lock();
    loop {
        let d = broker.produce(KILL9_TOPIC, &next).unwrap();
        writeln!(out, "ack {} {next}", d.offset).unwrap();
        out.flush().unwrap();
        next += 1;
    }
}

/// Kills the child if the test fails before it does.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the child producer on `dir` and kills it (SIGKILL) after `acks` acknowledgements;
/// returns the (offset, value) pairs it acknowledged.
fn produce_in_child_then_kill(dir: &Path, acks: usize) -> Vec<(u64, u64)> {
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "broker_reopen::kill_9_child",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_DIR_ENV, dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut child = KillOnDrop(child);
    let stdout = BufReader::new(child.0.stdout.take().unwrap());
    let mut acknowledged = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let Some(ack) = line.strip_prefix("ack ") else {
            continue; // the test harness's own output
        };
        let (offset, value) = ack.split_once(' ').unwrap();
        acknowledged.push((offset.parse().unwrap(), value.parse().unwrap()));
        if acknowledged.len() == acks {
            break;
        }
    }
    assert_eq!(acknowledged.len(), acks, "the child stopped early");
    child.0.kill().unwrap(); // SIGKILL: no shutdown, no flush, no checkpoint
    child.0.wait().unwrap();
    acknowledged
}

#[test]
fn acknowledged_records_survive_kill_9() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::open(dir.path()).unwrap();
        // Small segments: the kill may land around a roll too.
        let config = TopicConfig::default().segment_bytes(4096);
        broker.create_topic(KILL9_TOPIC, config).unwrap();
        broker.shutdown().unwrap();

        let mut acknowledged = 0;
        for round in 0..KILL9_ROUNDS {
            let acks = produce_in_child_then_kill(dir.path(), ACKS_BEFORE_KILL);
            // The child went on from the end of the log the previous round left.
            assert!(acks[0].0 >= acknowledged, "round {round}");
            acknowledged = acks.last().unwrap().0 + 1;

            // The kill released the lock. Every acknowledged record is there at its offset;
            // beyond them the child may have written more before it died, but the log is
            // contiguous from 0 and holds only what the child produced, in order.
            let broker = NanoKafka::open(dir.path()).unwrap();
            let log = common::read_topic(&broker, KILL9_TOPIC, &format!("round-{round}"))
                .remove(&0)
                .unwrap_or_default();
            for (offset, value) in &acks {
                assert_eq!(log.get(offset), Some(value), "round {round}");
            }
            let end = broker.stats().unwrap().topics[KILL9_TOPIC].partitions[0].log_end_offset;
            assert!(end >= acknowledged, "round {round}: log end {end}");
            assert_eq!(
                values(&log),
                (0..end).map(|o| (o, o)).collect::<Vec<_>>(),
                "round {round}"
            );
            broker.shutdown().unwrap();
        }
    });
}
