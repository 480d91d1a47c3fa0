//! Order per producer under pipelining: one task with hundreds of produces in flight gets its
//! records appended, and its replies answered, in the order it sent them; threads of the blocking
//! handle each keep theirs. Both with the produce route known from the start (topic created through
//! the handle) and learned on the way (topic created through the actor face, so the first produces
//! go through the broker).

use crate::common;

use futures::StreamExt;
use nanokafka::messages::CreateTopic;
use nanokafka::{NanoKafka, TopicConfig};

/// Creates topic "t" through the handle (which learns its route) or, with `behind_the_handle`,
/// through the broker actor (the handle learns the route only from its first produces).
fn broker_with_topic(dir: &std::path::Path, behind_the_handle: bool) -> NanoKafka {
    let broker = NanoKafka::open(dir).unwrap();
    if behind_the_handle {
        let create = CreateTopic {
            topic: "t".into(),
            config: TopicConfig::default(),
        };
        let addr = broker.addr().unwrap();
        actix_rt::System::new()
            .block_on(async move { addr.send(create).await })
            .unwrap()
            .unwrap();
    } else {
        broker.create_topic("t", TopicConfig::default()).unwrap();
    }
    broker
}

#[test]
fn pipelined_produces_from_one_task_are_appended_in_call_order() {
    for behind_the_handle in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        pipelined_produces_keep_call_order(&broker_with_topic(dir.path(), behind_the_handle));
    }
}

#[test]
fn each_thread_of_the_blocking_handle_keeps_its_order() {
    const THREADS: u64 = 4;
    const PER_THREAD: u64 = 2_000;
    for behind_the_handle in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker_with_topic(dir.path(), behind_the_handle);
        std::thread::scope(|scope| {
            for thread in 0..THREADS {
                let broker = &broker;
                scope.spawn(move || {
                    let mut last = None;
                    for i in 0..PER_THREAD {
                        let value = (thread << 32 | i).to_le_bytes().to_vec();
                        let offset = broker.produce_raw("t", None, value).unwrap().offset;
                        assert!(last < Some(offset), "offsets grow per thread");
                        last = Some(offset);
                    }
                });
            }
        });
        let values = read_all(&broker, THREADS * PER_THREAD);
        for thread in 0..THREADS {
            let mine: Vec<u64> = values
                .iter()
                .filter(|v| *v >> 32 == thread)
                .map(|v| v & 0xffff_ffff)
                .collect();
            assert_eq!(mine, (0..PER_THREAD).collect::<Vec<_>>(), "thread {thread}");
        }
    }
}

/// Every value of topic "t", in log order.
fn read_all(broker: &NanoKafka, count: u64) -> Vec<u64> {
    broker.join_group("t", "g", "c").unwrap();
    let mut values = Vec::new();
    while (values.len() as u64) < count {
        let batch = broker
            .poll_batch_raw("t", "g", "c", 1000, std::time::Duration::ZERO)
            .unwrap();
        let last = batch.last().expect("records remain");
        broker
            .commit("t", "g", last.partition, last.offset)
            .unwrap();
        values.extend(
            batch
                .into_iter()
                .map(|r| u64::from_le_bytes(r.value.try_into().unwrap())),
        );
    }
    values
}

fn pipelined_produces_keep_call_order(broker: &NanoKafka) {
    let handle = broker.async_handle();
    let offsets = actix_rt::System::new().block_on(async move {
        futures::stream::iter(0..5_000u64)
            .map(|i| {
                let handle = handle.clone();
                async move {
                    handle
                        .produce_raw("t", None, i.to_le_bytes().to_vec())
                        .await
                }
            })
            .buffered(512)
            .map(|reply| reply.expect("produce").offset)
            .collect::<Vec<u64>>()
            .await
    });
    assert_eq!(
        offsets,
        (0..5_000).collect::<Vec<_>>(),
        "the i-th produce got offset i"
    );
    let values = read_all(broker, 5_000);
    assert_eq!(
        values,
        (0..5_000).collect::<Vec<_>>(),
        "the log holds them in call order"
    );
}

/// Batches pipelined from one task (of 1, 5 and 300 records, so that some are coalesced in
/// the partition's lane behind others) are appended and answered in call order.
#[test]
fn pipelined_batches_from_one_task_are_appended_in_call_order() {
    const BATCHES: u64 = 60;
    // Batch k holds `size(k)` records: 1, 5, 300 (about 20 KiB) or 1200 (about 85 KiB: large
    // enough to go as its own append while others are in flight, never queued behind them).
    let size = |k: u64| [1, 5, 300, 1200][(k % 4) as usize];
    for behind_the_handle in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let broker = broker_with_topic(dir.path(), behind_the_handle);
        let handle = broker.async_handle();
        let firsts: Vec<u64> = (0..BATCHES)
            .scan(0, |next, k| Some(std::mem::replace(next, *next + size(k))))
            .collect();
        let total = firsts.last().unwrap() + size(BATCHES - 1);
        let answered = actix_rt::System::new().block_on(async move {
            futures::stream::iter(0..BATCHES)
                .map(|k| {
                    let first = firsts[k as usize];
                    let mut batch = nanokafka::RecordBatch::new();
                    for i in first..first + size(k) {
                        let mut value = i.to_le_bytes().to_vec();
                        value.resize(64, 0);
                        batch.push_raw(None, &value);
                    }
                    handle.produce_batch("t", None, batch)
                })
                .buffered(8)
                .map(|reply| {
                    let offsets: Vec<u64> = reply.unwrap().iter().map(|d| d.offset).collect();
                    offsets
                })
                .collect::<Vec<_>>()
                .await
        });
        let offsets: Vec<u64> = answered.concat();
        assert_eq!(
            offsets,
            (0..total).collect::<Vec<_>>(),
            "record i at offset i"
        );
        broker.join_group("t", "g", "c").unwrap();
        let mut values = Vec::new();
        while (values.len() as u64) < total {
            let batch = broker
                .poll_batch_raw("t", "g", "c", 1000, std::time::Duration::ZERO)
                .unwrap();
            let last = batch.last().expect("records remain");
            broker.commit("t", "g", 0, last.offset).unwrap();
            values.extend(
                batch
                    .iter()
                    .map(|r| u64::from_le_bytes(r.value[..8].try_into().unwrap())),
            );
        }
        assert_eq!(
            values,
            (0..total).collect::<Vec<_>>(),
            "the log holds them in order"
        );
    }
}

/// Under `FsyncPolicy::Always` the sync is part of the produce: a lone producer's produce is
/// answered with its `fdatasync` counted (one each), and eight concurrent ones share syncs
/// (never more syncs than produces; every acknowledged record is in the log).
#[test]
fn always_syncs_once_per_lone_produce_and_concurrent_produces_share_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .fsync(nanokafka::FsyncPolicy::Always)
        .build()
        .unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let syncs = || common::partition_stats(&broker, "t", 0).fsyncs;
    for i in 0..5u64 {
        let before = syncs();
        broker
            .produce_raw("t", None, i.to_le_bytes().to_vec())
            .unwrap();
        assert_eq!(syncs(), before + 1, "produce {i} answered after its sync");
    }
    let before = syncs();
    std::thread::scope(|scope| {
        for t in 0..8u64 {
            let broker = &broker;
            scope.spawn(move || {
                for i in 0..50u64 {
                    let value = (t << 32 | i).to_le_bytes().to_vec();
                    broker.produce_raw("t", None, value).unwrap();
                }
            });
        }
    });
    let shared = syncs() - before;
    assert!(
        (1..=400).contains(&shared),
        "{shared} syncs for 400 produces"
    );
    assert_eq!(common::log_end(&broker, "t", 0), 405);
}

/// Produces queued in a partition's lane behind one in flight are answered when the
/// partition restarts under them: each gets its offset or `PartitionRestarted`, none hangs,
/// and the acknowledged ones are in the log once each, in call order.
#[test]
fn pipelined_produces_across_a_partition_restart_are_each_answered_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = broker_with_topic(dir.path(), false);
    let handle = broker.async_handle();
    let crasher = broker.async_handle();
    let answers = common::within(std::time::Duration::from_secs(60), move || {
        actix_rt::System::new().block_on(async move {
            // Produce 1000 signals the crash, which runs beside the produces (a produce that
            // awaited it first would be called out of order).
            let (reached, crash_now) = futures::channel::oneshot::channel::<()>();
            let mut reached = Some(reached);
            let produces = futures::stream::iter(0..3_000u64)
                .map(|i| {
                    if i == 1_000 {
                        let _ = reached.take().expect("once").send(());
                    }
                    let handle = handle.clone();
                    async move {
                        let value = i.to_le_bytes().to_vec();
                        (i, handle.produce_raw("t", None, value).await)
                    }
                })
                .buffered(256)
                .collect::<Vec<_>>();
            let crash = async {
                crash_now.await.expect("signal");
                crasher.crash_partition("t", 0).await.expect("crash");
            };
            futures::join!(produces, crash).0
        })
    });
    let mut acknowledged = Vec::new();
    let mut last_offset = None;
    for (i, answer) in answers {
        match answer {
            Ok(delivery) => {
                assert!(
                    last_offset < Some(delivery.offset),
                    "offsets follow call order: produce {i} got {} after {last_offset:?}",
                    delivery.offset
                );
                last_offset = Some(delivery.offset);
                acknowledged.push(i);
            }
            Err(nanokafka::Error::PartitionRestarted { .. }) => {}
            Err(other) => panic!("produce {i}: {other}"),
        }
    }
    assert!(
        acknowledged.len() > 1_000,
        "produces after the restart succeed"
    );
    let restarts = common::partition_stats(&broker, "t", 0).restarts;
    assert!(
        restarts >= 1,
        "the partition restarted while produces were in flight"
    );
    let in_log = read_all(&broker, acknowledged.len() as u64);
    assert_eq!(
        in_log, acknowledged,
        "each acknowledged record once, in call order"
    );
}
