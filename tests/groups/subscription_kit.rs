//! What the push-subscription tests share: a scripted subscriber that reports what it is
//! handed and every event, the broker and topic they run on, and readers of the group's lag
//! and of the dead-letter topic.

use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::channel::{mpsc, oneshot};
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions, Subscription, SubscriptionEvent};
use nanokafka::{AsyncNanoKafka, Error, Header, NanoKafka, ProduceRecord, TopicConfig};

pub const TOPIC: &str = "events";
pub const DLQ: &str = "events.dlq";
/// Bounds every wait of these tests; none is reached unless something is broken.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// Decides the answer to each batch; `None` holds it until the test releases the subscriber.
pub type Script = Box<dyn FnMut(&Delivered<u64>) -> Ack>;

/// A subscriber that reports every record it is handed and every event, and answers as its
/// script says (after `hold`, if set, is released).
pub struct Scripted {
    pub script: Script,
    pub seen: mpsc::UnboundedSender<(u32, u64)>,
    pub events: mpsc::UnboundedSender<SubscriptionEvent>,
    pub hold: Option<oneshot::Receiver<()>>,
    /// Stop at the first batch (the subscriber goes away).
    pub stop_at_first: bool,
}

impl Actor for Scripted {
    type Context = Context<Self>;
}

impl Handler<Delivered<u64>> for Scripted {
    type Result = ResponseFuture<Ack>;

    fn handle(&mut self, batch: Delivered<u64>, ctx: &mut Context<Self>) -> Self::Result {
        for r in &batch.records {
            let _ = self.seen.unbounded_send((r.partition, r.offset));
        }
        let ack = (self.script)(&batch);
        if self.stop_at_first {
            ctx.stop();
        }
        let hold = self.hold.take();
        Box::pin(async move {
            if let Some(hold) = hold {
                let _ = hold.await;
            }
            ack
        })
    }
}

impl Handler<SubscriptionEvent> for Scripted {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        let _ = self.events.unbounded_send(event);
    }
}

/// What a test watches of one subscription.
pub struct Watch {
    pub subscription: Subscription,
    pub seen: mpsc::UnboundedReceiver<(u32, u64)>,
    pub events: mpsc::UnboundedReceiver<SubscriptionEvent>,
    pub subscriber: Addr<Scripted>,
}

impl Watch {
    /// The next `count` records handed over.
    pub async fn records(&mut self, count: usize) -> Vec<(u32, u64)> {
        let mut all = Vec::new();
        while all.len() < count {
            let next = actix_rt::time::timeout(PATIENCE, self.seen.next()).await;
            all.push(next.expect("a record in time").expect("subscriber alive"));
        }
        all
    }

    /// Events up to the first that `wanted` accepts, which is returned last.
    pub async fn events_until(
        &mut self,
        wanted: impl Fn(&SubscriptionEvent) -> bool,
    ) -> Vec<SubscriptionEvent> {
        let mut all = Vec::new();
        loop {
            let next = actix_rt::time::timeout(PATIENCE, self.events.next()).await;
            let event = next.expect("an event in time").expect("events open");
            let done = wanted(&event);
            all.push(event);
            if done {
                return all;
            }
        }
    }
}

pub async fn subscribe_with(
    bus: &AsyncNanoKafka,
    member: &str,
    script: Script,
    hold: Option<oneshot::Receiver<()>>,
    options: SubscribeOptions,
) -> Result<Watch, Error> {
    let (seen_tx, seen) = mpsc::unbounded();
    let (events_tx, events) = mpsc::unbounded();
    let subscriber = Scripted {
        script,
        seen: seen_tx,
        events: events_tx,
        hold,
        stop_at_first: false,
    }
    .start();
    let options = options.events(subscriber.clone().recipient());
    let subscription = bus
        .subscribe(TOPIC, "g", member, subscriber.clone().recipient(), options)
        .await?;
    Ok(Watch {
        subscription,
        seen,
        events,
        subscriber,
    })
}

pub fn options() -> SubscribeOptions {
    SubscribeOptions::default().poll_wait(Duration::from_millis(100))
}

pub fn commit_all() -> Script {
    Box::new(|_| Ack::Commit)
}

pub fn broker(partitions: u32) -> (tempfile::TempDir, NanoKafka) {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(partitions))
        .unwrap();
    (dir, broker)
}

/// Produces `values` to `partition`, each with key `k`.
pub fn produce(broker: &NanoKafka, partition: u32, values: &[u64]) {
    for value in values {
        let record = ProduceRecord {
            key: Some(b"k".to_vec()),
            value: nanokafka::encode(value).unwrap(),
        };
        broker
            .produce_batch_raw(TOPIC, Some(partition), vec![record])
            .unwrap();
    }
}

/// Waits until `group`'s lag on `topic` is `expected`.
pub async fn lag_becomes(bus: &AsyncNanoKafka, expected: &[(u32, u64)]) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let lag = bus.lag(TOPIC, "g").await.unwrap();
        if lag.into_iter().collect::<Vec<_>>() == expected {
            return;
        }
        assert!(Instant::now() < deadline, "lag never became {expected:?}");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Everything in the dead-letter topic.
pub async fn dead_letters(bus: &AsyncNanoKafka) -> Vec<nanokafka::Record<Vec<u8>>> {
    bus.join_group(DLQ, "inspect", "i").await.unwrap();
    let letters = bus
        .poll_batch_raw(DLQ, "inspect", "i", 10, Duration::from_secs(5))
        .await
        .unwrap();
    let end = bus.lag(DLQ, "inspect").await.unwrap()[&0];
    assert_eq!(end, letters.len() as u64, "every dead letter read");
    letters
}

pub fn header<'a>(headers: &'a [Header], key: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|h| h.key == key)
        .and_then(|h| std::str::from_utf8(h.value.as_deref()?).ok())
}

/// `headers` has each of `expected` (key, UTF-8 value).
pub fn assert_headers(headers: &[Header], expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(header(headers, key), Some(*value), "{key}");
    }
}
