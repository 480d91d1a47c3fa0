//! Push subscriptions from an actix System: an actor is sent `Delivered<T>` batches and its
//! `Ack::Commit` reply commits each, so the group's lag drains to 0 and a later member of
//! the group starts after everything acknowledged.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::channel::mpsc;
use futures::StreamExt;
use nanokafka::messages::{
    Ack, DecodeAction, Delivered, SubscribeOptions, SubscriptionEnd, SubscriptionEvent,
};
use nanokafka::{AsyncNanoKafka, Header};

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
        // Unsubscribing is fire-and-forget; the end says the member has left, so the group's
        // next member (on Kafka, a join waits for the group) does not wait for this one.
        subscription.unsubscribe();
        let end = actix_rt::time::timeout(PATIENCE, subscription.ended()).await;
        assert!(matches!(end, Ok(SubscriptionEnd::Unsubscribed)), "{end:?}");
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

/// Answers the first batch that holds offset 2 with `Retry { offset: 2 }` and every other
/// with `Commit`; reports each record it is handed and each event.
struct Retrier {
    retried: bool,
    seen: mpsc::UnboundedSender<u64>,
    events: mpsc::UnboundedSender<SubscriptionEvent>,
}

impl Actor for Retrier {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for Retrier {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Context<Self>) -> Ack {
        for r in &batch.records {
            let _ = self.seen.unbounded_send(r.offset);
        }
        if !self.retried && batch.records.iter().any(|r| r.offset == 2) {
            self.retried = true;
            return Ack::Retry {
                offset: 2,
                after: Duration::from_millis(50),
            };
        }
        Ack::Commit
    }
}

impl Handler<SubscriptionEvent> for Retrier {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        let _ = self.events.unbounded_send(event);
    }
}

/// A retried record comes back first, its later records after it in order, the rest is
/// committed; a record that does not decode ends the subscription with its event and its
/// end.
fn a_retry_keeps_order_and_a_record_that_does_not_decode_ends_the_subscription(t: &Target) {
    let topic = t.new_topic("retried", 1);
    for v in 0..6u64 {
        t.broker().produce_keyed(&topic, "k", &v).unwrap();
    }
    t.broker()
        .produce_keyed(&topic, "k", "not a number")
        .unwrap();
    let bus = t.broker().async_handle();
    System::new().block_on(async move {
        let (seen_tx, mut seen) = mpsc::unbounded();
        let (events_tx, mut events) = mpsc::unbounded();
        let retrier = Retrier {
            retried: false,
            seen: seen_tx,
            events: events_tx,
        }
        .start();
        let options = SubscribeOptions::default()
            .poll_wait(Duration::from_millis(200))
            .events(retrier.clone().recipient());
        let subscription = bus
            .subscribe(&topic, "g", "m", retrier.recipient(), options)
            .await
            .expect("subscribe");
        let end = actix_rt::time::timeout(PATIENCE, subscription.ended())
            .await
            .expect("the end within PATIENCE");
        assert!(
            matches!(end, SubscriptionEnd::DecodeError { offset: 6, .. }),
            "{end:?}"
        );
        let mut offsets = Vec::new();
        while let Ok(offset) = seen.try_recv() {
            offsets.push(offset);
        }
        let back = offsets.windows(2).position(|w| w[1] <= w[0]).expect("a retry");
        let (first, again) = offsets.split_at(back + 1);
        assert_eq!(again, [2, 3, 4, 5], "2 again, then what follows, in order: {offsets:?}");
        assert!(first.starts_with(&[0, 1, 2]), "{offsets:?}");
        assert!(first.windows(2).all(|w| w[1] == w[0] + 1), "{offsets:?}");
        // The end event reaches the subscriber's mailbox after the end resolves: wait for it.
        let mut told = Vec::new();
        while !matches!(told.last(), Some(SubscriptionEvent::Ended(_))) {
            let event = actix_rt::time::timeout(PATIENCE, events.next()).await;
            told.push(event.expect("the end event").expect("subscriber alive"));
        }
        assert!(
            matches!(told.first(), Some(SubscriptionEvent::Assigned { partitions, .. }) if partitions == &[0]),
            "{told:?}"
        );
        assert!(told.iter().any(|e| matches!(
            e,
            SubscriptionEvent::DecodeFailed {
                offset: 6,
                action: DecodeAction::Stopped,
                ..
            }
        )));
        assert!(matches!(
            told.last(),
            Some(SubscriptionEvent::Ended(SubscriptionEnd::DecodeError { .. }))
        ));
        // Everything before the record that does not decode is committed.
        let lag = bus.lag(&topic, "g").await.unwrap();
        assert_eq!(lag[&0], 1, "{lag:?}");
    });
}

/// Answers a batch that starts at offset 0 with `CommitUpTo(0)`, one that starts at offset
/// 1 with `Retry { offset: 1 }` (always), every other with `Commit`; reports each event.
struct AlwaysFails {
    events: mpsc::UnboundedSender<SubscriptionEvent>,
}

impl Actor for AlwaysFails {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for AlwaysFails {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Context<Self>) -> Ack {
        match batch.records[0].offset {
            0 => Ack::CommitUpTo(0),
            1 => Ack::Retry {
                offset: 1,
                after: Duration::ZERO,
            },
            _ => Ack::Commit,
        }
    }
}

impl Handler<SubscriptionEvent> for AlwaysFails {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        let _ = self.events.unbounded_send(event);
    }
}

/// A record retried to its last attempt, and one that does not decode, go to the
/// dead-letter topic (created at subscribe time) with their key, value and headers and
/// where they came from; the source is committed past both.
fn dead_letters_keep_the_record_and_say_where_it_came_from(t: &Target) {
    let topic = t.new_topic("dead", 1);
    let dlq = t.topic("dead-letters");
    t.broker().produce_keyed(&topic, "k", &0u64).unwrap();
    let origin = [Header::new("origin", "test")];
    t.broker()
        .produce_with_headers(&topic, Some(b"k"), &1u64, &origin)
        .unwrap();
    t.broker()
        .produce_keyed(&topic, "k", "not a number")
        .unwrap();
    t.broker().produce_keyed(&topic, "k", &3u64).unwrap();
    let bus = t.broker().async_handle();
    let (topic_name, dlq_name) = (topic.clone(), dlq.clone());
    let told = System::new().block_on(async move {
        let (events_tx, mut events) = mpsc::unbounded();
        let fails = AlwaysFails { events: events_tx }.start();
        let options = SubscribeOptions::default()
            .poll_wait(Duration::from_millis(200))
            .max_attempts(2)
            .dead_letter_topic(&dlq_name)
            .events(fails.clone().recipient());
        let subscription = bus
            .subscribe(&topic_name, "g", "m", fails.recipient(), options)
            .await
            .expect("subscribe");
        let mut told = Vec::new();
        let deadline = Instant::now() + PATIENCE;
        while bus.lag(&topic_name, "g").await.unwrap()[&0] > 0 {
            assert!(Instant::now() < deadline, "not committed past: {told:?}");
            while let Ok(event) = events.try_recv() {
                told.push(event);
            }
            actix_rt::time::sleep(Duration::from_millis(5)).await;
        }
        subscription.unsubscribe();
        subscription.ended().await;
        while !matches!(told.last(), Some(SubscriptionEvent::Ended(_))) {
            let event = actix_rt::time::timeout(PATIENCE, events.next()).await;
            told.push(event.expect("the end event").expect("subscriber alive"));
        }
        told
    });
    // The event names the record (key, headers) and where its dead letter is.
    let dead_lettered = told.iter().find_map(|e| match e {
        SubscriptionEvent::DeadLettered {
            partition: 0,
            offset: 1,
            attempts: 2,
            key,
            headers,
            dead_letter_offset,
            ..
        } => Some((key.clone(), headers.clone(), *dead_letter_offset)),
        _ => None,
    });
    let Some((key, headers, dead_letter_offset)) = dead_lettered else {
        panic!("no dead letter of offset 1 told: {told:?}");
    };
    assert_eq!(key.as_deref(), Some(&b"k"[..]));
    assert_eq!(headers, origin);
    assert!(
        told.iter().any(|e| matches!(
            e,
            SubscriptionEvent::DecodeFailed {
                offset: 2,
                action: DecodeAction::DeadLettered,
                ..
            }
        )),
        "{told:?}"
    );
    // The first dead letter is the retried record (the second, the string, is not a u64).
    let mut reader = t.broker().consumer::<u64>(&dlq, "inspect", "i").unwrap();
    let letters = wait::read(&mut reader, 1);
    let letter = &letters[0];
    assert_eq!(letter.value, 1);
    assert_eq!(letter.offset, dead_letter_offset);
    assert_eq!(letter.key.as_deref(), Some(&b"k"[..]));
    let header = |key: &str| {
        letter
            .headers
            .iter()
            .find(|h| h.key == key)
            .and_then(|h| String::from_utf8(h.value.clone()?).ok())
    };
    assert_eq!(header("origin").as_deref(), Some("test"));
    assert_eq!(header("nanokafka.dlq.topic"), Some(topic));
    assert_eq!(header("nanokafka.dlq.offset").as_deref(), Some("1"));
    assert_eq!(
        header("nanokafka.dlq.reason").as_deref(),
        Some("retries-exhausted")
    );
    assert_eq!(header("nanokafka.dlq.attempts").as_deref(), Some("2"));
}

/// A subscriber that reports each batch's (first offset, attempt), retries offset 1 (soon
/// on its first attempt, after a minute on later ones, so the test decides what comes next)
/// and commits everything else.
struct Attempts {
    seen: mpsc::UnboundedSender<(u64, u32)>,
}

impl Actor for Attempts {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for Attempts {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<u64>, _: &mut Context<Self>) -> Ack {
        let offset = batch.records[0].offset;
        let _ = self.seen.unbounded_send((offset, batch.attempt));
        match (offset, batch.attempt) {
            (1, 1) => Ack::Retry {
                offset,
                after: Duration::from_millis(10),
            },
            (1, _) => Ack::Retry {
                offset,
                after: Duration::from_secs(60),
            },
            _ => Ack::Commit,
        }
    }
}

/// Member `member` of group "g" on `topic` as an `Attempts` subscriber, one record a batch;
/// stops once it has seen `until`, unsubscribes, and returns what it saw.
async fn attempts_seen(
    bus: &AsyncNanoKafka,
    topic: &str,
    member: &str,
    until: (u64, u32),
) -> Vec<(u64, u32)> {
    let (tx, mut seen_rx) = mpsc::unbounded();
    let subscriber = Attempts { seen: tx }.start();
    let options = SubscribeOptions::default()
        .poll_wait(Duration::from_millis(200))
        .max_batch(1)
        .max_in_flight(1)
        .max_attempts(5);
    let subscription = bus
        .subscribe(topic, "g", member, subscriber.recipient(), options)
        .await
        .expect("subscribe");
    let mut seen = Vec::new();
    while seen.last() != Some(&until) {
        let next = actix_rt::time::timeout(PATIENCE, seen_rx.next()).await;
        let Ok(Some(delivery)) = next else {
            panic!("{member}: no delivery within PATIENCE after {seen:?}");
        };
        seen.push(delivery);
    }
    // Leaving waits for the retry's commit, which carries the count.
    subscription.unsubscribe();
    subscription.ended().await;
    seen
}

/// A retried record's attempt count goes with its commit: the member that reads the
/// partition next delivers it as the next attempt, not as the first.
fn the_attempt_count_goes_with_the_commit_to_the_next_member(t: &Target) {
    let topic = t.new_topic("attempts", 1);
    for value in [0u64, 1] {
        t.broker().produce(&topic, &value).unwrap();
    }
    // tansu 0.6.0 keeps no commit metadata (its OffsetFetch answers none), so there the
    // count starts again.
    let next_attempt = if t.is_tansu() { 1 } else { 3 };
    let bus = t.broker().async_handle();
    let (first, second) = System::new().block_on(async move {
        let first = attempts_seen(&bus, &topic, "a", (1, 2)).await;
        let second = attempts_seen(&bus, &topic, "b", (1, next_attempt)).await;
        (first, second)
    });
    assert_eq!(first, [(0, 1), (1, 1), (1, 2)]);
    assert_eq!(
        second,
        [(1, next_attempt)],
        "read on from the commit, on the next attempt"
    );
}

on_every_target!(
    the_attempt_count_goes_with_the_commit_to_the_next_member,
    dead_letters_keep_the_record_and_say_where_it_came_from,
    a_subscribed_actor_gets_batches_and_its_acks_commit_them,
    a_retry_keeps_order_and_a_record_that_does_not_decode_ends_the_subscription
);
