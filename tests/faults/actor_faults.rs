//! Actor faults under load: while producer threads and a consumer run, a panic is injected into
//! each actor kind in turn (broker, topic, partition, group coordinator). Every call gets a reply
//! or an error (a watchdog fails the test on a hang), nothing acknowledged is lost, and each
//! restart is counted.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use futures::executor::block_on;
use nanokafka::{Error, NanoKafka, TopicConfig};

const TOPIC: &str = "load";
const PRODUCERS: u64 = 3;
const PER_PRODUCER: u64 = 600;
const WATCHDOG: Duration = Duration::from_secs(60);

/// Errors a caller may meet while an actor restarts: nothing was acknowledged, retry.
fn retryable(e: &Error) -> bool {
    matches!(
        e,
        Error::PartitionRestarted { .. } | Error::UnknownMember { .. }
    )
}

#[test]
fn a_panic_in_each_actor_kind_under_load_loses_nothing_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(2))
        .unwrap();
    broker.join_group(TOPIC, "g", "c").unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let stop_consumer = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel();

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let (broker, acked, done) = (broker.clone(), acked.clone(), done_tx.clone());
            thread::spawn(move || {
                let mut mine = BTreeMap::new();
                for i in 0..PER_PRODUCER {
                    let value = p * 1_000_000 + i;
                    loop {
                        match broker.produce_keyed(TOPIC, format!("p{p}"), &value) {
                            Ok(d) => {
                                mine.insert(value, (d.partition, d.offset));
                                acked.fetch_add(1, Ordering::SeqCst);
                                break;
                            }
                            Err(e) if retryable(&e) => thread::yield_now(),
                            Err(e) => panic!("producer {p}: {e}"),
                        }
                    }
                }
                let _ = done.send(());
                mine
            })
        })
        .collect();

    let consumer = {
        let (broker, stop) = (broker.clone(), stop_consumer.clone());
        thread::spawn(move || {
            let mut consumed = 0u64;
            // Until the producers are done and this consumer has read something: on a loaded
            // machine it may not have been scheduled at all before they finish.
            let deadline = std::time::Instant::now() + WATCHDOG;
            while !(stop.load(Ordering::SeqCst) && consumed > 0)
                && std::time::Instant::now() < deadline
            {
                match broker.poll_batch::<u64>(TOPIC, "g", "c", 100, Duration::from_millis(50)) {
                    Ok(batch) => {
                        if let Some(last) = batch.last() {
                            match broker.commit(TOPIC, "g", last.partition, last.offset) {
                                Ok(()) => consumed += batch.len() as u64,
                                Err(e) if retryable(&e) => {}
                                Err(e) => panic!("consumer commit: {e}"),
                            }
                        }
                    }
                    // The coordinator restarted: memberships reset, join again.
                    Err(Error::UnknownMember { .. }) => {
                        broker.join_group(TOPIC, "g", "c").unwrap();
                    }
                    Err(e) if retryable(&e) => {}
                    Err(e) => panic!("consumer poll: {e}"),
                }
            }
            consumed
        })
    };

    // Crash each actor kind once the load has made some progress since the last crash.
    let handle = broker.async_handle();
    let wait_for = |count: u64| {
        let deadline = std::time::Instant::now() + WATCHDOG;
        while acked.load(Ordering::SeqCst) < count {
            assert!(
                std::time::Instant::now() < deadline,
                "producers stalled below {count}"
            );
            thread::yield_now();
        }
    };
    let step = PRODUCERS * PER_PRODUCER / 6;
    wait_for(step);
    block_on(handle.crash_broker()).unwrap();
    wait_for(2 * step);
    block_on(handle.crash_topic(TOPIC)).unwrap();
    wait_for(3 * step);
    block_on(handle.crash_partition(TOPIC, 0)).unwrap();
    wait_for(4 * step);
    block_on(handle.crash_group_coordinator(TOPIC, "g")).unwrap();

    // Every producer finishes: no call hung.
    for _ in 0..PRODUCERS {
        done_rx.recv_timeout(WATCHDOG).expect("a producer hung");
    }
    let mut acknowledged = BTreeMap::new();
    for p in producers {
        acknowledged.extend(p.join().unwrap());
    }
    stop_consumer.store(true, Ordering::SeqCst);
    let consumed = consumer.join().unwrap();
    assert!(
        consumed > 0,
        "the consumer made progress through the crashes"
    );

    // Nothing acknowledged was lost: read everything back through a fresh group.
    broker.join_group(TOPIC, "audit", "a").unwrap();
    let mut stored = BTreeMap::new();
    loop {
        let batch = broker
            .poll_batch::<u64>(TOPIC, "audit", "a", 1000, Duration::ZERO)
            .unwrap();
        let Some(last) = batch.last() else { break };
        broker
            .commit(TOPIC, "audit", last.partition, last.offset)
            .unwrap();
        stored.extend(
            batch
                .into_iter()
                .map(|r| (r.value, (r.partition, r.offset))),
        );
    }
    for (value, at) in &acknowledged {
        assert_eq!(
            stored.get(value),
            Some(at),
            "acknowledged record {value} lost or moved"
        );
    }

    let stats = broker.stats().unwrap();
    let topic = &stats.topics[TOPIC];
    assert_eq!(stats.restarts, 1, "broker restarts");
    assert_eq!(topic.restarts, 1, "topic restarts");
    assert_eq!(topic.partitions[0].restarts, 1, "partition restarts");
    assert_eq!(topic.groups["g"].restarts, 1, "coordinator restarts");
}
