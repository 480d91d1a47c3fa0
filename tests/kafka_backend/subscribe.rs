//! Push subscriptions from an actix System: an actor is sent `Delivered<T>` batches and its
//! `Ack::Commit` reply commits each, so the group's lag drains to 0 and a later member of
//! the group starts after everything acknowledged.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::channel::mpsc;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
use nanokafka::AsyncNanoKafka;

use crate::target::{on_every_target, Target};
use crate::wait::{self, PATIENCE};

/// A subscriber that reports every batch's (partition, offset, value)s and commits it.
struct Collector {
    batches: mpsc::UnboundedSender<Vec<(u32, u64, u64)>>,
}

impl Actor for Collector {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for Collector {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Context<Self>) -> Ack {
        let seen = batch
            .records
            .iter()
            .map(|r| (r.partition, r.offset, r.value))
            .collect();
        let _ = self.batches.unbounded_send(seen);
        Ack::Commit
    }
}

/// Subscribes a `Collector` as member `m` of `group`, receives `count` records, waits until
/// the group's lag is 0 (the acks committed), then unsubscribes. Runs on an actix System of
/// its own, as a service's actors would.
fn collect_and_commit(
    bus: AsyncNanoKafka,
    topic: &str,
    group: &str,
    count: usize,
) -> Vec<Vec<(u32, u64, u64)>> {
    let (topic, group) = (topic.to_owned(), group.to_owned());
    System::new().block_on(async move {
        let (tx, mut batches) = mpsc::unbounded();
        let collector = Collector { batches: tx }.start();
        let options = SubscribeOptions {
            max_batch: 7,
            poll_wait: Duration::from_millis(200),
            ..SubscribeOptions::default()
        };
        let subscription = bus
            .subscribe(&topic, &group, "m", collector.recipient(), options)
            .await
            .expect("subscribe");
        let mut seen = Vec::new();
        while seen.iter().map(Vec::len).sum::<usize>() < count {
            let batch = actix_rt::time::timeout(PATIENCE, batches.next()).await;
            seen.push(
                batch
                    .expect("a batch within PATIENCE")
                    .expect("collector alive"),
            );
        }
        let deadline = Instant::now() + PATIENCE;
        while bus
            .lag(&topic, &group)
            .await
            .unwrap()
            .values()
            .any(|&lag| lag > 0)
        {
            assert!(Instant::now() < deadline, "the acks' commits did not land");
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        subscription.unsubscribe();
        seen
    })
}

/// Every record is pushed once, in offset order per partition, in batches of at most
/// `max_batch` consecutive records of one partition; the acks commit them all; a later member of the group reads only what was
/// produced after.
fn a_subscribed_actor_gets_batches_and_its_acks_commit_them(t: &Target) {
    let topic = t.new_topic("subscribed", 2);
    for v in 0..30u64 {
        t.broker().produce_keyed(&topic, v.to_string(), &v).unwrap();
    }
    let batches = collect_and_commit(t.broker().async_handle(), &topic, "g", 30);
    for batch in &batches {
        assert!((1..=7).contains(&batch.len()), "max_batch 7: {batch:?}");
        let consecutive = batch
            .windows(2)
            .all(|w| w[1].0 == w[0].0 && w[1].1 == w[0].1 + 1);
        assert!(
            consecutive,
            "one partition's consecutive records: {batch:?}"
        );
    }
    let seen = batches.concat();
    assert_eq!(seen.len(), 30, "each record once: {seen:?}");
    let mut per_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (partition, offset, _) in &seen {
        per_partition.entry(*partition).or_default().push(*offset);
    }
    for (partition, offsets) in per_partition {
        let in_order: Vec<u64> = (0..offsets.len() as u64).collect();
        assert_eq!(offsets, in_order, "partition {partition}");
    }
    let mut values: Vec<u64> = seen.iter().map(|s| s.2).collect();
    values.sort_unstable();
    assert_eq!(values, (0..30).collect::<Vec<_>>());

    assert!(t
        .broker()
        .lag(&topic, "g")
        .unwrap()
        .values()
        .all(|&l| l == 0));
    t.broker().produce_keyed(&topic, "30", &30u64).unwrap();
    let mut later = t.broker().consumer::<u64>(&topic, "g", "later").unwrap();
    let read: Vec<u64> = wait::read(&mut later, 1).iter().map(|r| r.value).collect();
    assert_eq!(read, [30], "only what came after the acknowledged records");
}

on_every_target!(a_subscribed_actor_gets_batches_and_its_acks_commit_them);
