//! Push subscriptions: the broker pushes typed batches to a subscribing actor, at most
//! `max_in_flight` unanswered, and the subscriber's `Ack` commits them.

use std::collections::BTreeMap;
use std::time::Duration;

use actix::prelude::*;
use futures::channel::{mpsc, oneshot};
use futures::future::{FutureExt, Shared};
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
use nanokafka::{AsyncNanoKafka, Error, NanoKafka, TopicConfig};

const TOPIC: &str = "events";
/// Bounds every wait of these tests; none is reached unless something is broken.
const PATIENCE: Duration = Duration::from_secs(20);

/// A subscriber that reports each batch and answers with `ack`, but only once `hold` (if
/// any) is released.
struct Recorder {
    ack: Ack,
    batches: mpsc::UnboundedSender<Vec<(u32, u64, u64)>>,
    hold: Option<Shared<oneshot::Receiver<()>>>,
}

impl Actor for Recorder {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for Recorder {
    type Result = ResponseFuture<Ack>;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Context<Self>) -> Self::Result {
        let seen = batch
            .records
            .iter()
            .map(|r| (r.partition, r.offset, r.value))
            .collect();
        let _ = self.batches.unbounded_send(seen);
        let (ack, hold) = (self.ack.clone(), self.hold.clone());
        Box::pin(async move {
            if let Some(hold) = hold {
                let _ = hold.await;
            }
            ack
        })
    }
}

fn broker_with(records: u64, partitions: u32) -> (tempfile::TempDir, NanoKafka) {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(partitions))
        .unwrap();
    for i in 0..records {
        broker.produce(TOPIC, &i).unwrap();
    }
    (dir, broker)
}

fn options(max_in_flight: usize, max_batch: usize) -> SubscribeOptions {
    SubscribeOptions {
        max_in_flight,
        max_batch,
        poll_wait: Duration::from_millis(200),
        ..SubscribeOptions::default()
    }
}

/// Receives batches until `count` records arrived.
async fn collect(
    batches: &mut mpsc::UnboundedReceiver<Vec<(u32, u64, u64)>>,
    count: usize,
) -> Vec<(u32, u64, u64)> {
    let mut all = Vec::new();
    while all.len() < count {
        let batch = actix_rt::time::timeout(PATIENCE, batches.next())
            .await
            .expect("a batch within the patience bound")
            .expect("subscriber alive");
        all.extend(batch);
    }
    all
}

async fn subscribe(
    bus: &AsyncNanoKafka,
    group: &str,
    member: &str,
    ack: Ack,
    opts: SubscribeOptions,
) -> (
    Addr<Recorder>,
    mpsc::UnboundedReceiver<Vec<(u32, u64, u64)>>,
    nanokafka::messages::Subscription,
) {
    let (tx, rx) = mpsc::unbounded();
    let recorder = Recorder {
        ack,
        batches: tx,
        hold: None,
    }
    .start();
    let subscription = bus
        .subscribe(TOPIC, group, member, recorder.clone().recipient(), opts)
        .await
        .unwrap();
    (recorder, rx, subscription)
}

#[test]
fn every_record_is_pushed_once_in_partition_order_and_commit_acks_commit() {
    let (_dir, broker) = broker_with(40, 2);
    let bus = broker.async_handle();
    let seen = System::new().block_on(async move {
        let (_recorder, mut batches, _sub) =
            subscribe(&bus, "g", "m", Ack::Commit, options(2, 7)).await;
        let seen = collect(&mut batches, 40).await;
        // Every batch was committed: the lag drains to zero.
        let deadline = std::time::Instant::now() + PATIENCE;
        while bus.lag(TOPIC, "g").await.unwrap().values().any(|&l| l > 0) {
            assert!(std::time::Instant::now() < deadline, "commits did not land");
            actix_rt::task::yield_now().await;
        }
        seen
    });
    assert_eq!(seen.len(), 40);
    let mut per_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (partition, offset, _) in &seen {
        per_partition.entry(*partition).or_default().push(*offset);
    }
    for offsets in per_partition.values() {
        assert_eq!(
            *offsets,
            (0..offsets.len() as u64).collect::<Vec<_>>(),
            "in order, once"
        );
    }
    let mut values: Vec<u64> = seen.iter().map(|s| s.2).collect();
    values.sort_unstable();
    assert_eq!(values, (0..40).collect::<Vec<_>>());
}

#[test]
fn no_more_than_max_in_flight_batches_are_unanswered_and_one_per_partition() {
    let (_dir, broker) = broker_with(12, 3);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (tx, mut batches) = mpsc::unbounded();
        let (release, held) = oneshot::channel::<()>();
        let recorder = Recorder {
            ack: Ack::Commit,
            batches: tx,
            hold: Some(held.shared()),
        }
        .start();
        let _sub = bus
            .subscribe(TOPIC, "g", "m", recorder.recipient(), options(2, 1))
            .await
            .unwrap();
        // Two batches arrive, of two partitions, and are held unanswered...
        let held = collect(&mut batches, 2).await;
        assert_ne!(held[0].0, held[1].0, "one unanswered batch per partition");
        // ...and with both credits spent, no third comes (it would within microseconds).
        let third = actix_rt::time::timeout(Duration::from_millis(300), batches.next()).await;
        assert!(
            third.is_err(),
            "a third batch was pushed while two were unanswered"
        );
        // Nothing was committed while held.
        let lag = bus.lag(TOPIC, "g").await.unwrap();
        assert_eq!(lag.values().sum::<u64>(), 12);
        drop(release); // answers the held batches, and every later one at once
        let rest = collect(&mut batches, 10).await;
        let mut all: Vec<(u32, u64)> = held.iter().chain(&rest).map(|s| (s.0, s.1)).collect();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12, "every record once");
    });
}

#[test]
fn one_partition_never_has_two_batches_unanswered() {
    let (_dir, broker) = broker_with(10, 1);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (tx, mut batches) = mpsc::unbounded();
        let (release, held) = oneshot::channel::<()>();
        let recorder = Recorder {
            ack: Ack::Commit,
            batches: tx,
            hold: Some(held.shared()),
        }
        .start();
        let _sub = bus
            .subscribe(TOPIC, "g", "m", recorder.recipient(), options(4, 1))
            .await
            .unwrap();
        assert_eq!(collect(&mut batches, 1).await[0].1, 0);
        let second = actix_rt::time::timeout(Duration::from_millis(300), batches.next()).await;
        assert!(
            second.is_err(),
            "a second batch of the partition while one was unanswered"
        );
        drop(release);
        let rest = collect(&mut batches, 9).await;
        assert_eq!(
            rest.iter().map(|s| s.1).collect::<Vec<_>>(),
            (1..10).collect::<Vec<_>>()
        );
    });
}

#[test]
fn deferred_batches_are_redelivered_to_the_next_member_after_a_rebalance() {
    let (_dir, broker) = broker_with(6, 1);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (_first, mut first_batches, first_sub) =
            subscribe(&bus, "g", "a", Ack::Defer, options(1, 100)).await;
        let seen_first = collect(&mut first_batches, 6).await;
        assert_eq!(seen_first.len(), 6);
        assert_eq!(
            bus.lag(TOPIC, "g").await.unwrap()[&0],
            6,
            "Defer commits nothing"
        );
        first_sub.unsubscribe(); // leaves the group: a rebalance
        let (_second, mut second_batches, _sub) =
            subscribe(&bus, "g", "b", Ack::Commit, options(1, 100)).await;
        let again = collect(&mut second_batches, 6).await;
        assert_eq!(
            again.iter().map(|s| s.1).collect::<Vec<_>>(),
            (0..6).collect::<Vec<_>>()
        );
    });
}

#[test]
fn two_groups_each_receive_every_record() {
    let (_dir, broker) = broker_with(12, 3);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        let (_a, mut a, _sa) = subscribe(&bus, "audit", "m", Ack::Commit, options(4, 5)).await;
        let (_b, mut b, _sb) = subscribe(&bus, "billing", "m", Ack::Commit, options(4, 5)).await;
        assert_eq!(collect(&mut a, 12).await.len(), 12);
        assert_eq!(collect(&mut b, 12).await.len(), 12);
    });
}

#[test]
fn a_subscription_with_zero_credits_or_batch_is_refused() {
    let (_dir, broker) = broker_with(0, 1);
    let bus = broker.async_handle();
    System::new().block_on(async move {
        for bad in [options(0, 10), options(1, 0)] {
            let (tx, _rx) = mpsc::unbounded();
            let recorder = Recorder {
                ack: Ack::Commit,
                batches: tx,
                hold: None,
            }
            .start();
            let refused = bus
                .subscribe(TOPIC, "g", "m", recorder.recipient(), bad.clone())
                .await;
            assert!(
                matches!(refused, Err(Error::InvalidArgument { .. })),
                "{bad:?}"
            );
        }
        // Nothing joined.
        assert!(matches!(
            bus.lag(TOPIC, "g").await,
            Err(Error::UnknownGroup { .. })
        ));
    });
}
