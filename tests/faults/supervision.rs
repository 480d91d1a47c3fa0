//! Supervision, black-box: partition and group-coordinator crashes (the fault-injection
//! API), what survives them, what is answered, and the restart budget.
//!
//! Every test runs its body under a watchdog: a request left hanging by a restart fails the
//! test after [`WATCHDOG`] instead of blocking the run.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};

use nanokafka::partition_for_key;
use nanokafka::MAX_RESTARTS;
use nanokafka::{Delivery, Error, NanoKafka, PartitionStats, ProduceRecord, TopicConfig};

const TOPIC: &str = "events";
const WATCHDOG: Duration = Duration::from_secs(60);
/// Far below the 30 s / 60 s waits the parked requests were given: an answer this fast came
/// from the restart, not from a deadline.
const PROMPT: Duration = Duration::from_secs(10);

fn open(dir: &tempfile::TempDir) -> NanoKafka {
    NanoKafka::open(dir.path()).unwrap()
}

fn partition_stats(broker: &NanoKafka, topic: &str) -> Vec<PartitionStats> {
    broker.stats().unwrap().topics[topic].partitions.clone()
}

/// Starts `request` on a background thread, returning only once its message is in the
/// broker's mailbox (the first poll of an actix `send` enqueues it), so that requests the
/// caller makes afterwards are queued behind it. The receiver gets the reply and how long
/// it took.
fn start_queued<T, F>(request: F) -> mpsc::Receiver<(T, Duration)>
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let started = Instant::now();
    let mut request = Box::pin(request);
    let mut cx = Context::from_waker(futures::task::noop_waker_ref());
    assert!(
        matches!(request.as_mut().poll(&mut cx), Poll::Pending),
        "the request was answered at once; it was meant to wait"
    );
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let reply = futures::executor::block_on(request);
        let _ = tx.send((reply, started.elapsed()));
    });
    rx
}

/// Returns once every partition of the topic serves again: right after a crash a partition
/// may still be waiting out its restart backoff and answer `PartitionRestarted` ("retry").
fn wait_until_serving(broker: &NanoKafka) {
    loop {
        // `lag` asks every partition; for a group that never existed, open partitions
        // answer "unknown group".
        match broker.lag(TOPIC, "no-such-group") {
            Err(Error::UnknownGroup { .. }) => return,
            Err(Error::PartitionRestarted { .. }) => thread::yield_now(),
            other => panic!("unexpected answer while waiting for a restart: {other:?}"),
        }
    }
}

/// Reads every record of the topic through a fresh group: (partition → offset → value).
fn read_all(broker: &NanoKafka, group: &str) -> BTreeMap<u32, BTreeMap<u64, u64>> {
    broker.join_group(TOPIC, group, "reader").unwrap();
    let mut log: BTreeMap<u32, BTreeMap<u64, u64>> = BTreeMap::new();
    loop {
        let batch = broker
            .poll_batch::<u64>(TOPIC, group, "reader", 1000, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else {
            return log;
        };
        broker
            .commit(TOPIC, group, last.partition, last.offset)
            .unwrap();
        for record in batch {
            let previous = log
                .entry(record.partition)
                .or_default()
                .insert(record.offset, record.value);
            assert_eq!(previous, None, "offset {} read twice", record.offset);
        }
    }
}

#[test]
fn a_crashed_partition_restarts_with_its_records_and_commits() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(&dir);
        broker
            .create_topic(TOPIC, TopicConfig::default().partitions(2))
            .unwrap();
        // Keyless: round-robin, so partition p holds values p, p + 2, ... at offsets 0..5.
        for value in 0..10u64 {
            let d = broker.produce(TOPIC, &value).unwrap();
            assert_eq!((d.partition, d.offset), ((value % 2) as u32, value / 2));
        }
        broker.join_group(TOPIC, "g", "c").unwrap();
        broker.commit(TOPIC, "g", 0, 2).unwrap();
        broker.commit(TOPIC, "g", 1, 4).unwrap();

        broker.crash_partition(TOPIC, 0).unwrap();

        // It serves again at once: new records take the next offsets.
        let mut after = Vec::new();
        for value in 10..14u64 {
            after.push(broker.produce(TOPIC, &value).unwrap());
        }
        let on = |p| {
            after
                .iter()
                .filter(|d| d.partition == p)
                .map(|d| d.offset)
                .collect::<Vec<_>>()
        };
        assert_eq!(on(0), [5, 6]);
        assert_eq!(on(1), [5, 6]);

        let stats = partition_stats(&broker, TOPIC);
        assert_eq!((stats[0].restarts, stats[1].restarts), (1, 0));
        assert!(stats.iter().all(|p| p.failed.is_none()), "{stats:?}");
        assert_eq!(stats[0].committed["g"], 3);
        assert_eq!(stats[1].committed["g"], 5);
        assert_eq!(
            broker.lag(TOPIC, "g").unwrap(),
            BTreeMap::from([(0, 4), (1, 2)])
        );

        // The group resumes at its committed offsets.
        let first = broker
            .poll_batch::<u64>(TOPIC, "g", "c", 100, Duration::ZERO)
            .unwrap();
        let expected_start = [3, 5][first[0].partition as usize];
        assert_eq!(first[0].offset, expected_start);

        // Everything written before and after the crash is there, in order.
        let log = read_all(&broker, "everything");
        let values = |p: u32| log[&p].values().copied().collect::<Vec<_>>();
        assert_eq!(values(0), [0, 2, 4, 6, 8, 10, 12]);
        assert_eq!(values(1), [1, 3, 5, 7, 9, 11, 13]);
        broker.shutdown().unwrap();
    });
}

const PRODUCERS: u64 = 4;
const PER_PRODUCER: u64 = 500;
const CRASHES: u64 = 4;
/// Acknowledgements from partition 0 between two crashes: it must serve between them.
const CRASH_SPACING: u64 = 150;

/// Acknowledgements from partition 0 so far, and whether the producers are done.
#[derive(Default)]
struct Progress {
    acked_on_0: Mutex<u64>,
    changed: Condvar,
    producers_done: AtomicBool,
}

impl Progress {
    fn acknowledged(&self, delivery: Delivery) {
        if delivery.partition == 0 {
            *self.acked_on_0.lock().unwrap() += 1;
            self.changed.notify_all();
        }
    }

    fn finish(&self) {
        let _guard = self.acked_on_0.lock().unwrap();
        self.producers_done.store(true, Ordering::SeqCst);
        self.changed.notify_all();
    }

    /// Waits until partition 0 acknowledged `target` records; false if the producers
    /// finished first.
    fn wait_for(&self, target: u64) -> bool {
        let guard = self.acked_on_0.lock().unwrap();
        let guard = self
            .changed
            .wait_while(guard, |acked| {
                *acked < target && !self.producers_done.load(Ordering::SeqCst)
            })
            .unwrap();
        *guard >= target
    }
}

/// What one producer thread saw.
#[derive(Default)]
struct ProducerLog {
    /// Every acknowledged record, in the order the producer sent them.
    acked: Vec<(u64, Delivery)>,
    /// Attempts that failed with `PartitionRestarted`, per value: only these may have left
    /// an extra copy in the log.
    unacked_attempts: HashMap<u64, u64>,
}

/// A key of producer `thread`: even threads write to partition 0, odd ones to partition 1,
/// so partition 0 gets half the records however often it restarts (a keyless retry could
/// move to partition 1).
fn producer_key(thread: u64) -> String {
    (0..)
        .map(|n| format!("producer-{thread}-{n}"))
        .find(|key| partition_for_key(key.as_bytes(), 2) == (thread % 2) as u32)
        .expect("some key hashes to each partition")
}

fn produce_until_acked(broker: &NanoKafka, thread: u64, progress: &Progress) -> ProducerLog {
    let mut log = ProducerLog::default();
    let key = producer_key(thread);
    for seq in 0..PER_PRODUCER {
        let value = thread * 1_000_000 + seq;
        loop {
            match broker.produce_keyed(TOPIC, &key, &value) {
                Ok(delivery) => {
                    progress.acknowledged(delivery);
                    log.acked.push((value, delivery));
                    break;
                }
                Err(Error::PartitionRestarted { .. }) => {
                    *log.unacked_attempts.entry(value).or_default() += 1;
                    thread::yield_now();
                }
                Err(e) => panic!("producer {thread}: unexpected error for {value}: {e}"),
            }
        }
    }
    log
}

/// The key test: producers keep producing while partition 0 is crashed repeatedly. Every
/// acknowledged record is in the log at its acknowledged place; the log has no holes; extra
/// copies exist only for attempts that were not acknowledged; nobody hangs.
#[test]
fn acknowledged_records_survive_repeated_crashes_under_load() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(&dir);
        broker
            .create_topic(TOPIC, TopicConfig::default().partitions(2))
            .unwrap();
        let progress = Arc::new(Progress::default());

        let producers: Vec<_> = (0..PRODUCERS)
            .map(|t| {
                let (broker, progress) = (broker.clone(), progress.clone());
                thread::spawn(move || produce_until_acked(&broker, t, &progress))
            })
            .collect();
        let crasher = {
            let (broker, progress) = (broker.clone(), progress.clone());
            thread::spawn(move || {
                let mut crashes = 0;
                while crashes < CRASHES && progress.wait_for((crashes + 1) * CRASH_SPACING) {
                    broker.crash_partition(TOPIC, 0).unwrap();
                    crashes += 1;
                }
                crashes
            })
        };
        let logs: Vec<ProducerLog> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        progress.finish();
        assert_eq!(crasher.join().unwrap(), CRASHES, "not every crash happened");
        wait_until_serving(&broker);

        let stats = partition_stats(&broker, TOPIC);
        assert_eq!((stats[0].restarts, stats[1].restarts), (CRASHES, 0));
        assert!(stats.iter().all(|p| p.failed.is_none()), "{stats:?}");

        let log = read_all(&broker, "verify");
        // No holes: each partition holds offsets 0..log_end, all readable.
        for p in &stats {
            let offsets: Vec<u64> = log[&p.partition].keys().copied().collect();
            assert_eq!(p.log_start_offset, 0);
            assert_eq!(offsets, (0..p.log_end_offset).collect::<Vec<_>>());
        }
        // Every acknowledged record is exactly where its acknowledgement said.
        for (thread, producer) in logs.iter().enumerate() {
            assert_eq!(producer.acked.len() as u64, PER_PRODUCER);
            for &(value, d) in &producer.acked {
                assert_eq!(
                    log[&d.partition].get(&d.offset),
                    Some(&value),
                    "producer {thread}: acknowledged {value} at {d:?}"
                );
            }
            // One producer's records all went to its key's partition, in order.
            let offsets: Vec<u64> = producer.acked.iter().map(|(_, d)| d.offset).collect();
            assert!(offsets.windows(2).all(|w| w[0] < w[1]), "producer {thread}");
            assert!(producer
                .acked
                .iter()
                .all(|(_, d)| d.partition == (thread % 2) as u32));
        }
        // Duplicates: a value may occur more than once only through attempts that failed
        // (`PartitionRestarted`: nothing acknowledged) and were retried; at most one extra
        // copy per failed attempt. Every value in the log was produced by someone.
        let mut copies: HashMap<u64, u64> = HashMap::new();
        for value in log.values().flat_map(|p| p.values()) {
            *copies.entry(*value).or_default() += 1;
        }
        let failed_attempts: HashMap<u64, u64> = logs
            .iter()
            .flat_map(|l| l.unacked_attempts.iter().map(|(v, n)| (*v, *n)))
            .collect();
        assert_eq!(copies.len() as u64, PRODUCERS * PER_PRODUCER);
        for (value, count) in copies {
            let allowed = 1 + failed_attempts.get(&value).copied().unwrap_or(0);
            assert!(
                count <= allowed,
                "{value} appears {count} times, {allowed} allowed"
            );
            assert!(value % 1_000_000 < PER_PRODUCER && value / 1_000_000 < PRODUCERS);
        }
        broker.shutdown().unwrap();
    });
}

#[test]
fn a_parked_long_poll_is_answered_when_its_partition_restarts() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(&dir);
        broker.create_topic(TOPIC, TopicConfig::default()).unwrap();
        broker.join_group(TOPIC, "g", "c").unwrap();

        let handle = broker.async_handle();
        let parked = start_queued(async move {
            handle
                .poll_timeout::<u64>(TOPIC, "g", "c", Duration::from_secs(30))
                .await
        });
        // Barrier: a zero-wait poll by the same member follows the long poll through the same
        // actors one step behind it, so once it is answered (empty) the long poll's wait is
        // queued at the partition ahead of the crash below.
        assert!(broker.poll::<u64>(TOPIC, "g", "c").unwrap().is_none());
        broker.crash_partition(TOPIC, 0).unwrap();

        let (reply, waited) = parked.recv().unwrap();
        assert!(waited < PROMPT, "the parked poll waited {waited:?}");
        match reply {
            Ok(None) | Err(Error::PartitionRestarted { .. }) => {}
            other => panic!("unexpected answer to the parked poll: {other:?}"),
        }

        // The restarted partition serves long polls again, woken by the produce.
        let handle = broker.async_handle();
        let waiting = start_queued(async move {
            handle
                .poll_timeout::<u64>(TOPIC, "g", "c", Duration::from_secs(30))
                .await
        });
        broker.produce(TOPIC, &7u64).unwrap();
        let (reply, waited) = waiting.recv().unwrap();
        assert_eq!(reply.unwrap().map(|r| r.value), Some(7));
        assert!(waited < PROMPT);
        broker.shutdown().unwrap();
    });
}

#[test]
fn a_blocked_produce_gets_partition_restarted_when_its_partition_restarts() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .block_timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        broker
            .create_topic(TOPIC, TopicConfig::default().max_size(2))
            .unwrap();
        broker.produce(TOPIC, &0u64).unwrap();
        broker.produce(TOPIC, &1u64).unwrap();

        let handle = broker.async_handle();
        let blocked = start_queued(async move { handle.produce(TOPIC, &2u64).await });
        // Barrier: `stats` reaches the partition behind the queued produce, which is parked
        // (the backlog is at max_size) before the crash arrives.
        assert_eq!(partition_stats(&broker, TOPIC)[0].log_end_offset, 2);
        broker.crash_partition(TOPIC, 0).unwrap();

        let (reply, waited) = blocked.recv().unwrap();
        assert!(
            matches!(reply, Err(Error::PartitionRestarted { partition: 0, .. })),
            "{reply:?}"
        );
        assert!(waited < PROMPT, "the blocked produce waited {waited:?}");
        // Not acknowledged, and not written either.
        let stats = partition_stats(&broker, TOPIC);
        assert_eq!((stats[0].log_end_offset, stats[0].restarts), (2, 1));
        broker.shutdown().unwrap();
    });
}

#[test]
fn a_partition_crashing_beyond_its_budget_fails_alone() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(&dir);
        broker
            .create_topic(TOPIC, TopicConfig::default().partitions(2))
            .unwrap();
        broker.produce(TOPIC, &0u64).unwrap(); // partition 0
        broker.join_group(TOPIC, "g", "c").unwrap();

        let started = Instant::now();
        for _ in 0..=MAX_RESTARTS {
            broker.crash_partition(TOPIC, 0).unwrap();
        }

        let one = |value: u64| ProduceRecord {
            key: None,
            value: nanokafka::encode(&value).unwrap(),
        };
        let on_0 = broker.produce_batch_raw(TOPIC, Some(0), vec![one(1)]);
        assert!(
            matches!(on_0, Err(Error::PartitionFailed { partition: 0, .. })),
            "{on_0:?}"
        );
        assert!(matches!(
            broker.commit(TOPIC, "g", 0, 0),
            Err(Error::PartitionFailed { .. })
        ));
        let stats = partition_stats(&broker, TOPIC);
        assert!(stats[0].failed.is_some(), "{:?}", stats[0]);
        assert_eq!(stats[0].restarts, MAX_RESTARTS as u64 + 1);

        // Partition 1 keeps serving: produce, poll (not starved by the failed partition),
        // commit.
        let d = broker
            .produce_batch_raw(TOPIC, Some(1), vec![one(2)])
            .unwrap();
        assert_eq!((d[0].partition, d[0].offset), (1, 0));
        let record = broker.poll::<u64>(TOPIC, "g", "c").unwrap().unwrap();
        assert_eq!((record.partition, record.value), (1, 2));
        broker.commit(TOPIC, "g", 1, 0).unwrap();
        let stats = partition_stats(&broker, TOPIC);
        assert_eq!((stats[1].failed.as_deref(), stats[1].restarts), (None, 0));
        assert_eq!(stats[1].committed["g"], 1);
        // No crash loop and no waiting out backoffs for the healthy partition.
        assert!(started.elapsed() < PROMPT, "took {:?}", started.elapsed());
        broker.shutdown().unwrap();
    });
}

#[test]
fn a_coordinator_crash_resets_memberships_and_keeps_commits() {
    common::within(WATCHDOG, || {
        let dir = tempfile::tempdir().unwrap();
        let broker = open(&dir);
        broker.create_topic(TOPIC, TopicConfig::default()).unwrap();
        for value in 0..3u64 {
            broker.produce(TOPIC, &value).unwrap();
        }
        broker.join_group(TOPIC, "g", "c").unwrap();
        let first = broker.poll::<u64>(TOPIC, "g", "c").unwrap().unwrap();
        broker.commit(TOPIC, "g", 0, first.offset).unwrap();

        futures::executor::block_on(broker.async_handle().crash_group_coordinator(TOPIC, "g"))
            .unwrap();

        let polled = broker.poll::<u64>(TOPIC, "g", "c");
        assert!(
            matches!(polled, Err(Error::UnknownMember { .. })),
            "{polled:?}"
        );
        assert!(matches!(
            broker.heartbeat(TOPIC, "g", "c"),
            Err(Error::UnknownMember { .. })
        ));
        let stats = broker.stats().unwrap();
        assert_eq!(stats.topics[TOPIC].groups["g"].restarts, 1);
        assert!(stats.topics[TOPIC].groups["g"].assignment.is_empty());
        assert_eq!(stats.topics[TOPIC].partitions[0].committed["g"], 1);
        assert_eq!(broker.lag(TOPIC, "g").unwrap()[&0], 2);

        // Rejoining resumes at the committed offset.
        let assignment = broker.join_group(TOPIC, "g", "c").unwrap();
        assert_eq!(assignment.partitions, [0]);
        let next = broker.poll::<u64>(TOPIC, "g", "c").unwrap().unwrap();
        assert_eq!((next.offset, next.value), (1, 1));
        broker.shutdown().unwrap();
    });
}
