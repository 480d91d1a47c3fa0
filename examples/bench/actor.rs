//! The actor developer's path: what an actix service pays per event when it produces through
//! [`Topic<T>`] / the broker's `Addr` and consumes through a push subscription.
//!
//! - [`low_rate`]: a producer actor sends keyed [`Event`]s through `Topic::produce_keyed`
//!   onto a 4-partition topic, paced at a fixed rate, while a subscriber actor
//!   (`Topic::subscribe`) takes each batch and answers `Ack::Commit`, and a `RecordStream`
//!   task of another group commits each record it reads through its `StreamCommitter`
//!   (coalesced, sent on the stream's commit interval and flushed once producing ends). The
//!   interval runs from the first produce until both groups read every event and their lag
//!   is 0; the figure is the
//!   process's CPU per event over it (what a steady trickle costs, spinning included), with
//!   the process's sleeps per event beside it (each is a wake-up paid for).
//!   [`bare_hops`] is its baseline: the same hops over actix mailboxes and a tokio channel,
//!   with no broker; [`produce_only`], its producer alone, shows what delivering adds. The
//!   three are measured in turns ([`low_rate_rows`]).
//! - [`awaited`]: an actor awaiting each `Topic::produce_keyed`, one at a time, as fast as it
//!   can; [`blocking_keyed`] is its baseline, one thread calling `NanoKafka::produce_keyed`
//!   with the same keys and values.
//! - [`batch_messages`]: an actor sending `ProduceBatch` messages of [`BATCH_RECORDS`] keyed
//!   records to the broker's `Addr`, and [`single_messages`], one record per `Produce`
//!   message, each awaited before the next: the figure is per record.
//!
//! Every measurement runs in an actix System on its own thread (the application's), talking
//! to the broker's System as an application would; every topic is fresh, with 4 partitions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, Produce, ProduceBatch, SubscribeOptions};
use nanokafka::{AsyncNanoKafka, NanoKafka, ProduceRecord, RecordBatch, Topic, TopicConfig};
use serde::{Deserialize, Serialize};

use crate::harness::{Meter, Rate, Tally, RETENTION_BYTES, VALUE_LEN};

/// Partitions of every topic here.
pub const PARTITIONS: u32 = 4;
/// Events per second of the low-rate row.
pub const LOW_RATE: u32 = 500;
/// Records per `ProduceBatch` message.
pub const BATCH_RECORDS: usize = 100;
/// Distinct keys, cycled through.
const KEYS: usize = 64;
/// How long the low-rate row waits for the last deliveries and commits after producing.
const DRAIN_DEADLINE: Duration = Duration::from_secs(10);
/// Produces awaited per clock check in the throughput rows.
const ROUND: u64 = 256;

/// The event the service produces: an id and a body of [`VALUE_LEN`] bytes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    pub id: u64,
    pub body: String,
}

impl Event {
    fn new(id: u64) -> Self {
        Event {
            id,
            body: "e".repeat(VALUE_LEN),
        }
    }
}

fn key(i: u64) -> String {
    format!("customer-{}", i % KEYS as u64)
}

fn config() -> TopicConfig {
    TopicConfig::default()
        .partitions(PARTITIONS)
        .retention_bytes(RETENTION_BYTES)
}

/// A paced run's events with the wall and CPU time they took, and the process's sleeps
/// (voluntary context switches) meanwhile: the slices of one measurement add up.
#[derive(Debug, Clone, Copy, Default)]
pub struct Paced {
    pub tally: Tally,
    pub sleeps: u64,
}

impl Paced {
    fn metered(meter: &Meter, events: u64) -> Self {
        Paced {
            tally: Tally {
                records: events,
                usage: meter.usage(),
            },
            sleeps: meter.sleeps(),
        }
    }

    pub fn rate(&self) -> Rate {
        self.tally.rate()
    }

    pub fn sleeps_per_event(&self) -> f64 {
        self.sleeps as f64 / self.tally.records.max(1) as f64
    }
}

impl std::ops::AddAssign for Paced {
    fn add_assign(&mut self, other: Paced) {
        self.tally += other.tally;
        self.sleeps += other.sleeps;
    }
}

/// What the low-rate row reached: its events, CPU and sleeps, and the events produced,
/// delivered (to the subscriber, to the stream) and left uncommitted.
#[derive(Debug, Clone, Copy, Default)]
pub struct LowRate {
    pub paced: Paced,
    pub delivered: u64,
    pub streamed: u64,
    /// Sum of both groups' lag over the partitions once the interval ended.
    pub lag: u64,
}

impl LowRate {
    pub fn produced(&self) -> u64 {
        self.paced.tally.records
    }

    pub fn rate(&self) -> Rate {
        self.paced.rate()
    }

    pub fn sleeps_per_event(&self) -> f64 {
        self.paced.sleeps_per_event()
    }
}

impl std::ops::AddAssign for LowRate {
    fn add_assign(&mut self, other: LowRate) {
        self.paced += other.paced;
        self.delivered += other.delivered;
        self.streamed += other.streamed;
        self.lag += other.lag;
    }
}

/// The low-rate row, its bare-hops baseline and its producer alone, over `duration` each.
pub struct LowRateRows {
    pub row: LowRate,
    pub bare: Paced,
    pub alone: Paced,
}

/// Measures [`low_rate_with`], [`bare_hops`] and [`produce_only`] in turns, each for
/// `duration / SLICES` at a time, `SLICES` times over (each slice of the row and of the
/// producer alone on a fresh topic): on this shared VM the host changes speed for seconds
/// at a time, so runs measured one after the other each catch another state of it, and
/// their ratio then measures the host. In turns, every run sees the same states.
pub fn low_rate_rows(
    broker: &NanoKafka,
    (rate, duration): (u32, Duration),
    readers: Readers,
) -> LowRateRows {
    let slice = duration / crate::produce::SLICES;
    let mut rows = LowRateRows {
        row: LowRate::default(),
        bare: Paced::default(),
        alone: Paced::default(),
    };
    for n in 0..crate::produce::SLICES {
        let row_topic = format!("actor-low-rate-{n}");
        rows.row += low_rate_with(broker, &row_topic, (rate, slice), readers);
        rows.bare += bare_hops(rate, slice);
        let alone_topic = format!("actor-produce-only-{n}");
        rows.alone += produce_only(broker, &alone_topic, rate, slice);
    }
    rows
}

/// Runs `work` in a fresh actix System on its own thread and returns what it returns.
fn in_system<R: Send + 'static, F: std::future::Future<Output = R> + 'static>(
    work: impl FnOnce() -> F + Send + 'static,
) -> R {
    std::thread::spawn(move || actix_rt::System::new().block_on(work()))
        .join()
        .expect("actix thread")
}

/// The subscriber: counts what it is given and commits every batch.
struct Sink {
    delivered: Arc<AtomicU64>,
}

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<Delivered<Event>> for Sink {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<Event>, _: &mut Context<Self>) -> Ack {
        self.delivered
            .fetch_add(batch.records.len() as u64, Ordering::Relaxed);
        Ack::Commit
    }
}

/// The producer actor of the low-rate row: sends event `n` at `start + n / rate` until
/// `duration` has passed, then reports how many it sent.
struct Pacer {
    topic: Topic<Event>,
    rate: u32,
    duration: Duration,
    done: Option<futures::channel::oneshot::Sender<u64>>,
}

impl Actor for Pacer {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (topic, rate, duration) = (self.topic.clone(), self.rate, self.duration);
        let paced = paced(rate, duration, move |n| {
            let topic = topic.clone();
            async move {
                topic
                    .produce_keyed(key(n), &Event::new(n))
                    .await
                    .expect("produce_keyed");
            }
        });
        ctx.wait(paced.into_actor(self).map(|sent, act, ctx| {
            if let Some(done) = act.done.take() {
                let _ = done.send(sent);
            }
            ctx.stop();
        }));
    }
}

impl Pacer {
    /// Starts a pacer producing to `topic` and returns how many events it sent.
    async fn run(topic: Topic<Event>, rate: u32, duration: Duration) -> u64 {
        let (done, sent) = futures::channel::oneshot::channel();
        Pacer {
            topic,
            rate,
            duration,
            done: Some(done),
        }
        .start();
        sent.await.expect("pacer")
    }
}

/// Runs `event(n)` for n = 0, 1, … at `start + n / rate` (each awaited before the next)
/// until `duration` has passed; returns how many ran.
async fn paced<F: std::future::Future<Output = ()>>(
    rate: u32,
    duration: Duration,
    mut event: impl FnMut(u64) -> F,
) -> u64 {
    let interval = Duration::from_secs(1) / rate;
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        let due = interval * sent as u32;
        if due >= duration {
            return sent;
        }
        actix_rt::time::sleep_until((start + due).into()).await;
        event(sent).await;
        sent += 1;
    }
}

/// Which readers the low-rate row runs: both (the row), or one of them alone, to split the
/// row's cost between them (`NANOKAFKA_BENCH_LOW_READERS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    Both,
    Subscription,
    Stream,
}

impl Readers {
    fn subscription(self) -> bool {
        self != Readers::Stream
    }

    fn stream(self) -> bool {
        self != Readers::Subscription
    }
}

/// The low-rate row: see the module docs.
pub fn low_rate(broker: &NanoKafka, topic: &str, rate: u32, duration: Duration) -> LowRate {
    low_rate_with(broker, topic, (rate, duration), Readers::Both)
}

/// [`low_rate`] with only the `readers` given: a reader left out counts as having taken and
/// committed every event.
pub fn low_rate_with(
    broker: &NanoKafka,
    topic: &str,
    (rate, duration): (u32, Duration),
    readers: Readers,
) -> LowRate {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    in_system(move || async move {
        let events: Topic<Event> = handle.topic(topic);
        events.create(config()).await.expect("create topic");
        let delivered = Arc::new(AtomicU64::new(0));
        let group = "low-rate";
        let subscription = match readers.subscription() {
            true => {
                let sink = Sink {
                    delivered: delivered.clone(),
                }
                .start();
                let options = SubscribeOptions::default();
                let subscribed = events.subscribe(group, "member-0", sink.recipient(), options);
                Some(subscribed.await.expect("subscribe"))
            }
            false => None,
        };
        let stream_group = "low-rate-stream";
        let streamed = Arc::new(AtomicU64::new(0));
        let stream = match readers.stream() {
            true => {
                let stream = events.stream(stream_group, "reader-0").await;
                let stream = stream.expect("stream");
                let committer = stream.committer();
                Some((
                    reader(stream, committer.clone(), streamed.clone()),
                    committer,
                ))
            }
            false => None,
        };
        let meter = Meter::start();
        let produced = Pacer::run(events.clone(), rate, duration).await;
        let mut lag = 0;
        if subscription.is_some() {
            lag += drained(&events, group, &delivered, produced).await;
        }
        if let Some((_, committer)) = &stream {
            lag += drained_stream(&events, stream_group, &streamed, committer, produced).await;
        }
        let paced = Paced::metered(&meter, produced);
        if let Some(subscription) = subscription {
            subscription.unsubscribe();
        } else {
            delivered.store(produced, Ordering::Relaxed);
        }
        match stream {
            Some((reader, _)) => reader.abort(),
            None => streamed.store(produced, Ordering::Relaxed),
        }
        LowRate {
            paced,
            delivered: delivered.load(Ordering::Relaxed),
            streamed: streamed.load(Ordering::Relaxed),
            lag,
        }
    })
}

/// The stream reader of [`low_rate`], a task on the application's thread: reads each event,
/// commits it through `committer` and counts it in `streamed`.
fn reader(
    mut stream: nanokafka::RecordStream<Event>,
    committer: nanokafka::StreamCommitter,
    streamed: Arc<AtomicU64>,
) -> actix_rt::task::JoinHandle<()> {
    actix_rt::spawn(async move {
        while let Some(record) = stream.next().await {
            let record = record.expect("stream read");
            committer.commit_record(&record).expect("stream commit");
            streamed.fetch_add(1, Ordering::Relaxed);
        }
    })
}

/// [`low_rate`]'s producer alone: the same paced `Topic::produce_keyed` onto a fresh topic with
/// no subscriber. Its CPU and sleeps per event, beside [`low_rate`]'s, split that row into
/// what producing costs and what delivering and committing add.
pub fn produce_only(broker: &NanoKafka, topic: &str, rate: u32, duration: Duration) -> Paced {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    in_system(move || async move {
        let events: Topic<Event> = handle.topic(topic);
        events.create(config()).await.expect("create topic");
        let meter = Meter::start();
        let produced = Pacer::run(events, rate, duration).await;
        Paced::metered(&meter, produced)
    })
}

/// A message of [`bare_hops`]: "produce" to the actor on the other arbiter, "deliver" back.
struct Hop;

impl Message for Hop {
    type Result = ();
}

/// [`bare_hops`]' stand-in for the subscriber: answers each delivery.
struct Answerer;

impl Actor for Answerer {
    type Context = Context<Self>;
}

impl Handler<Hop> for Answerer {
    type Result = ();

    fn handle(&mut self, _: Hop, _: &mut Context<Self>) {}
}

/// [`bare_hops`]' stand-in for the broker: answers each produce, then delivers it to the
/// subscriber (and awaits its answer) and hands it to the stream reader's channel.
struct Bouncer {
    subscriber: Recipient<Hop>,
    stream: tokio::sync::mpsc::UnboundedSender<Hop>,
}

impl Actor for Bouncer {
    type Context = Context<Self>;
}

impl Handler<Hop> for Bouncer {
    type Result = ();

    fn handle(&mut self, _: Hop, ctx: &mut Context<Self>) {
        let answer = self.subscriber.send(Hop);
        ctx.spawn(answer.into_actor(self).map(|_, _, _| ()));
        self.stream.send(Hop).expect("stream reader");
    }
}

/// The low-rate row's hops with no broker: on the application's thread, a paced loop sends
/// each event to an actor on another arbiter and awaits its answer; that actor sends it back
/// to an actor on the application's thread (awaiting that answer) and over a tokio channel
/// to a task there. It is what those cross-thread hand-offs alone cost per event (CPU,
/// sleeps) at `rate`, on this host, in this run, until the task has received every event.
pub fn bare_hops(rate: u32, duration: Duration) -> Paced {
    in_system(move || async move {
        let subscriber = Answerer.start().recipient();
        let (stream, mut received) = tokio::sync::mpsc::unbounded_channel();
        let streamed = Arc::new(AtomicU64::new(0));
        let counted = streamed.clone();
        actix_rt::spawn(async move {
            while received.recv().await.is_some() {
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        let arbiter = Arbiter::new();
        let bouncer =
            Bouncer::start_in_arbiter(&arbiter.handle(), move |_| Bouncer { subscriber, stream });
        let meter = Meter::start();
        let sent = paced(rate, duration, |_| {
            let hop = bouncer.send(Hop);
            async move { hop.await.expect("bouncer") }
        })
        .await;
        while streamed.load(Ordering::Relaxed) < sent {
            actix_rt::time::sleep(Duration::from_millis(1)).await;
        }
        let measured = Paced::metered(&meter, sent);
        arbiter.stop();
        measured
    })
}

/// Waits (up to [`DRAIN_DEADLINE`]) until `produced` events were delivered and the group's
/// lag is 0; returns the lag left.
async fn drained(events: &Topic<Event>, group: &str, delivered: &AtomicU64, produced: u64) -> u64 {
    let deadline = Instant::now() + DRAIN_DEADLINE;
    loop {
        let lag: u64 = match delivered.load(Ordering::Relaxed) >= produced {
            true => events.lag(group).await.expect("lag").values().sum(),
            false => u64::MAX,
        };
        if lag == 0 || Instant::now() >= deadline {
            return lag;
        }
        actix_rt::time::sleep(Duration::from_millis(1)).await;
    }
}

/// [`drained`] for the stream reader of [`low_rate`]: once it read every event, its pending
/// commits are flushed (as a service does when it stops), then its lag is waited for.
async fn drained_stream(
    events: &Topic<Event>,
    group: &str,
    streamed: &AtomicU64,
    committer: &nanokafka::StreamCommitter,
    produced: u64,
) -> u64 {
    let deadline = Instant::now() + DRAIN_DEADLINE;
    while streamed.load(Ordering::Relaxed) < produced && Instant::now() < deadline {
        actix_rt::time::sleep(Duration::from_millis(1)).await;
    }
    committer.flush().await.expect("stream flush");
    drained(events, group, streamed, produced).await
}

/// Runs `work` (given its actor's context) inside an actor started for it, and returns what
/// it returns: the code under measurement runs as an actor's future, as a service's would.
async fn in_actor<R: 'static, F: std::future::Future<Output = R> + 'static>(work: F) -> R {
    struct Runner<R: 'static> {
        work: Option<std::pin::Pin<Box<dyn std::future::Future<Output = R>>>>,
        done: Option<futures::channel::oneshot::Sender<R>>,
    }
    impl<R: 'static> Actor for Runner<R> {
        type Context = Context<Self>;

        fn started(&mut self, ctx: &mut Context<Self>) {
            let work = self.work.take().expect("work");
            ctx.wait(work.into_actor(self).map(|result, act, ctx| {
                if let Some(done) = act.done.take() {
                    let _ = done.send(result);
                }
                ctx.stop();
            }));
        }
    }
    let (done, result) = futures::channel::oneshot::channel();
    Runner {
        work: Some(Box::pin(work)),
        done: Some(done),
    }
    .start();
    result.await.expect("runner actor")
}

/// An actor awaiting each `Topic::produce_keyed`, one at a time, for `budget`.
pub fn awaited(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let handle = broker.async_handle();
    let topic = topic.to_owned();
    in_system(move || async move {
        let events: Topic<Event> = handle.topic(topic);
        events.create(config()).await.expect("create topic");
        in_actor(async move {
            let meter = Meter::start();
            let mut sent = 0u64;
            while meter.elapsed() < budget {
                for _ in 0..ROUND {
                    events
                        .produce_keyed(key(sent), &Event::new(sent))
                        .await
                        .expect("produce_keyed");
                    sent += 1;
                }
            }
            meter.rate(sent)
        })
        .await
    })
}

/// The baseline of [`awaited`]: one blocking thread calling `NanoKafka::produce_keyed` with
/// the same keys and values on a fresh 4-partition topic.
pub fn blocking_keyed(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    broker.create_topic(topic, config()).expect("create topic");
    let meter = Meter::start();
    let mut sent = 0u64;
    while meter.elapsed() < budget {
        for _ in 0..ROUND {
            broker
                .produce_keyed(topic, key(sent), &Event::new(sent))
                .expect("produce_keyed");
            sent += 1;
        }
    }
    meter.rate(sent)
}

/// A keyed raw record as both message rows send it: the same bytes the typed rows encode.
fn record(i: u64) -> ProduceRecord {
    ProduceRecord {
        key: Some(key(i).into_bytes()),
        value: rmp_serde::to_vec_named(&Event::new(i)).expect("encode"),
    }
}

/// An actor sending `ProduceBatch` messages of [`BATCH_RECORDS`] keyed records to the
/// broker's `Addr`, each awaited before the next (building the batch is inside the loop).
pub fn batch_messages(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    message_rows(broker, topic, budget, |addr, topic, sent| {
        let mut batch = RecordBatch::with_capacity(BATCH_RECORDS, BATCH_RECORDS * VALUE_LEN);
        for i in 0..BATCH_RECORDS as u64 {
            let r = record(sent + i);
            batch.push_raw(r.key.as_deref(), &r.value);
        }
        let request = addr.send(ProduceBatch {
            topic,
            partition: None,
            batch,
        });
        Box::pin(async move {
            let deliveries = request.await.expect("mailbox").expect("ProduceBatch");
            deliveries.len() as u64
        })
    })
}

/// The same actor sending one record per `Produce` message, each awaited before the next.
pub fn single_messages(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    message_rows(broker, topic, budget, |addr, topic, sent| {
        let request = addr.send(Produce {
            topic,
            partition: None,
            records: vec![record(sent)],
        });
        Box::pin(async move {
            let deliveries = request.await.expect("mailbox").expect("Produce");
            deliveries.len() as u64
        })
    })
}

type Sent = std::pin::Pin<Box<dyn std::future::Future<Output = u64>>>;

/// An actor calling `send(addr, topic, records sent so far)` and awaiting each until
/// `budget` has passed.
fn message_rows(
    broker: &NanoKafka,
    topic: &str,
    budget: Duration,
    send: fn(&Addr<nanokafka::BrokerActor>, String, u64) -> Sent,
) -> Rate {
    let handle: AsyncNanoKafka = broker.async_handle();
    let topic = topic.to_owned();
    in_system(move || async move {
        handle
            .create_topic(&topic, config())
            .await
            .expect("create topic");
        let addr = handle.addr().unwrap().clone();
        in_actor(async move {
            let meter = Meter::start();
            let mut sent = 0u64;
            while meter.elapsed() < budget {
                sent += send(&addr, topic.clone(), sent).await;
            }
            meter.rate(sent)
        })
        .await
    })
}
