//! An order service on NanoKafka's actor API: typed topics, retries, a dead-letter topic,
//! an async `Stream`, rebalance events and linked traces, all inside `#[actix::main]`.
//!
//! - `Orders` publishes `OrderPlaced` events on the typed topic `placed-orders` (keyed by
//!   customer),
//!   each inside a `place_order` span: the record carries that span's context in a header.
//! - `Billing` has every order pushed to it (group `billing`). Its payment provider declines
//!   now and then: a declined charge is answered `Ack::Retry`, so that record (and everything
//!   after it on its partition, in order) comes again after a delay. A card that keeps being
//!   declined goes to the dead-letter topic `placed-orders.dlq` after its third attempt, with
//!   headers saying why and where it came from. Each batch is handled inside
//!   `batch.handler_span()`, which follows from the producers' spans.
//! - `Shipping` reads the same events as an async `Stream`, committing each record.
//! - `Audit` runs two members of one group; their subscription events show the partitions
//!   each is given and loses as the second joins and then leaves.
//! - A subscriber with another payload type is refused when it subscribes.
//!
//! Run: `cargo run --release --example order_service`; on a Kafka cluster instead of the
//! embedded broker: `NANOKAFKA_BOOTSTRAP=host:9092 cargo run --release --features kafka
//! --example order_service`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use actix::prelude::*;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions, SubscriptionEvent};
use nanokafka::{AsyncNanoKafka, Error, NanoKafka, Topic, TopicConfig};
use serde::{Deserialize, Serialize};
use tracing::Instrument;

#[path = "common/data_dir.rs"]
mod data_dir;

const TOPIC: &str = "placed-orders";
const DEAD_LETTERS: &str = "placed-orders.dlq";
const ORDERS: u64 = 12;
/// Orders whose card is declined twice before it goes through (a retry succeeds).
const FLAKY: [u64; 2] = [3, 8];
/// The order whose card is always declined (it ends in the dead-letter topic).
const STOLEN: u64 = 5;
const MAX_ATTEMPTS: u32 = 3;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderPlaced {
    id: u64,
    customer: String,
    cents: u64,
}

/// Another event type, to show the payload type check.
#[derive(Debug, Serialize, Deserialize)]
struct ShipmentBooked {
    id: u64,
    carrier: String,
}

/// What the service has done; `main` waits until every order is settled everywhere.
#[derive(Default)]
struct Progress {
    billed: BTreeSet<u64>,
    dead_lettered: BTreeSet<u64>,
    shipped: BTreeSet<u64>,
    audited: BTreeSet<u64>,
}

impl Progress {
    fn done(&self) -> bool {
        self.billed.len() + self.dead_lettered.len() == ORDERS as usize
            && self.shipped.len() == ORDERS as usize
            && self.audited.len() == ORDERS as usize
    }
}

/// Collects progress reports and fires `done` once every order is settled.
struct Tracker {
    progress: Progress,
    done: Option<futures::channel::oneshot::Sender<()>>,
}

impl Actor for Tracker {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "()")]
enum Report {
    Billed(u64),
    DeadLettered(u64),
    Shipped(u64),
    Audited(u64),
}

impl Handler<Report> for Tracker {
    type Result = ();

    fn handle(&mut self, report: Report, _: &mut Context<Self>) {
        let p = &mut self.progress;
        match report {
            Report::Billed(id) => p.billed.insert(id),
            Report::DeadLettered(id) => p.dead_lettered.insert(id),
            Report::Shipped(id) => p.shipped.insert(id),
            Report::Audited(id) => p.audited.insert(id),
        };
        if p.done() {
            if let Some(done) = self.done.take() {
                let _ = done.send(());
            }
        }
    }
}

/// Publishes the orders.
struct Orders {
    topic: Topic<OrderPlaced>,
}

impl Actor for Orders {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "Result<(), Error>")]
struct PlaceOrder(OrderPlaced);

impl Handler<PlaceOrder> for Orders {
    type Result = ResponseFuture<Result<(), Error>>;

    fn handle(&mut self, PlaceOrder(order): PlaceOrder, _: &mut Context<Self>) -> Self::Result {
        let topic = self.topic.clone();
        // The produce runs inside this span, so the record carries its context.
        let span = tracing::info_span!("place_order", id = order.id);
        let span_id = span.id().map_or(0, |id| id.into_u64());
        Box::pin(
            async move {
                let d = topic.produce_keyed(&order.customer, &order).await?;
                println!(
                    "orders: order {} -> partition {} offset {} (span {span_id:x})",
                    order.id, d.partition, d.offset
                );
                Ok(())
            }
            .instrument(span),
        )
    }
}

/// Charges each order; a declined card is retried, a card declined on every attempt goes
/// to the dead-letter topic.
struct Billing {
    /// Declines so far per order (the payment provider's memory).
    declines: BTreeMap<u64, u32>,
    /// The order at each (partition, offset) answered with a retry, for the dead-letter event.
    retried: BTreeMap<(u32, u64), u64>,
    tracker: Addr<Tracker>,
}

impl Actor for Billing {
    type Context = Context<Self>;
}

impl Billing {
    /// The payment provider: the stolen card is always declined, the flaky ones twice.
    fn charge(&mut self, order: &OrderPlaced) -> bool {
        let declines = self.declines.entry(order.id).or_default();
        let approved = order.id != STOLEN && (!FLAKY.contains(&order.id) || *declines >= 2);
        if !approved {
            *declines += 1;
        }
        approved
    }
}

impl Handler<Delivered<OrderPlaced>> for Billing {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<OrderPlaced>, _: &mut Context<Self>) -> Ack {
        // The handler's span follows from the span each record was produced in.
        let _span = batch.handler_span().entered();
        for record in &batch.records {
            let order = &record.value;
            let producer = nanokafka::trace::producer_span(&record.headers);
            if !self.charge(order) {
                println!(
                    "billing: order {} declined (attempt {}), retry in 50 ms",
                    order.id, self.declines[&order.id]
                );
                self.retried
                    .insert((record.partition, record.offset), order.id);
                // This record and the rest of its partition come again after the delay; the
                // records before it are committed.
                return Ack::Retry {
                    offset: record.offset,
                    after: Duration::from_millis(50),
                };
            }
            println!(
                "billing: order {} charged {} cents (produced in span {:x})",
                order.id,
                order.cents,
                producer.map_or(0, |id| id.into_u64())
            );
            self.tracker.do_send(Report::Billed(order.id));
        }
        Ack::Commit
    }
}

impl Handler<SubscriptionEvent> for Billing {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        if let SubscriptionEvent::DeadLettered {
            partition,
            offset,
            attempts,
            ..
        } = event
        {
            let order = self.retried.get(&(partition, offset)).copied();
            println!(
                "billing: order {order:?} (partition {partition} offset {offset}) dead-lettered after {attempts} attempts"
            );
            if let Some(order) = order {
                self.tracker.do_send(Report::DeadLettered(order));
            }
        }
    }
}

/// One member of the audit group; prints its subscription's events.
struct Auditor {
    member: &'static str,
    tracker: Addr<Tracker>,
}

impl Actor for Auditor {
    type Context = Context<Self>;
}

impl Handler<Delivered<OrderPlaced>> for Auditor {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<OrderPlaced>, _: &mut Context<Self>) -> Ack {
        for record in &batch.records {
            self.tracker.do_send(Report::Audited(record.value.id));
        }
        Ack::Commit
    }
}

impl Handler<SubscriptionEvent> for Auditor {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        match event {
            SubscriptionEvent::Assigned {
                generation,
                partitions,
            } => println!(
                "audit/{}: assigned {partitions:?} in generation {generation}",
                self.member
            ),
            SubscriptionEvent::Revoked {
                generation,
                partitions,
            } => println!(
                "audit/{}: revoked {partitions:?} in generation {generation}",
                self.member
            ),
            SubscriptionEvent::Ended(why) => println!("audit/{}: ended ({why:?})", self.member),
            other => println!("audit/{}: {other:?}", self.member),
        }
    }
}

/// Subscribes an auditor as `member` of the audit group.
async fn audit(
    orders: &Topic<OrderPlaced>,
    member: &'static str,
    tracker: &Addr<Tracker>,
) -> Result<nanokafka::messages::Subscription, Error> {
    let auditor = Auditor {
        member,
        tracker: tracker.clone(),
    }
    .start();
    let options = SubscribeOptions::default().events(auditor.clone().recipient());
    orders
        .subscribe("audit", member, auditor.recipient(), options)
        .await
}

/// Shipping: an async stream of the orders, one commit per record.
async fn ship(orders: Topic<OrderPlaced>, tracker: Addr<Tracker>) -> Result<(), Error> {
    let mut stream = orders.stream("shipping", "shipper-1").await?;
    let mut shipped = BTreeSet::new();
    while shipped.len() < ORDERS as usize {
        let Some(record) = stream.next().await else {
            break;
        };
        let record = record?;
        println!("shipping: order {} booked", record.value.id);
        stream.commit(&record).await?;
        shipped.insert(record.value.id);
        tracker.do_send(Report::Shipped(record.value.id));
    }
    stream.leave().await
}

/// Prints what the dead-letter topic holds: the record as it was, and headers saying why.
async fn show_dead_letters(bus: &AsyncNanoKafka, count: usize) -> Result<(), Error> {
    // The dead letters keep the source's bytes, so they decode as the source's type.
    let dead_letters = bus
        .topic::<OrderPlaced>(DEAD_LETTERS)
        .accept_any_payload_type();
    let mut stream = dead_letters.stream("dlq-reader", "reader-1").await?;
    for _ in 0..count {
        let Some(record) = stream.next().await else {
            break;
        };
        let record = record?;
        let about: Vec<String> = record
            .headers
            .iter()
            .filter(|h| h.key.starts_with("nanokafka.dlq."))
            .map(|h| {
                let value = h.value.as_deref().unwrap_or_default();
                format!("{}={}", h.key, String::from_utf8_lossy(value))
            })
            .collect();
        println!(
            "dead letter: order {}: {}",
            record.value.id,
            about.join(" ")
        );
        stream.commit(&record).await?;
    }
    stream.leave().await
}

#[actix::main]
async fn main() -> Result<(), Error> {
    // The example's own spans are enabled (info), so its records carry their context; the
    // broker logs only warnings (a dead letter is one).
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=warn,order_service=info")
        .init();
    let dir = data_dir::ExampleDir::new();
    let bus = NanoKafka::builder()
        .data_dir(dir.path())
        // Members poll at least every second (`poll_wait`), so a short session is safe; on a
        // Kafka cluster it also shortens a new group's first join on brokers that hold it for
        // part of the session timeout.
        .session_timeout(Duration::from_secs(10))
        .kafka_bootstrap_from_env()
        .build_async()
        .await?;
    println!("backend: {:?}", bus.backend());
    let orders = bus.topic::<OrderPlaced>(TOPIC);
    match orders.create(TopicConfig::default().partitions(2)).await {
        Ok(()) | Err(Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }

    // A subscriber of another type is refused before it joins anything.
    let wrong = bus
        .topic::<ShipmentBooked>(TOPIC)
        .stream("wrong-type", "x")
        .await;
    match wrong {
        Err(e) => println!("a ShipmentBooked reader is refused: {e}"),
        // Kafka keeps no payload type with a topic: nothing to check against.
        Ok(stream) => {
            println!("a ShipmentBooked reader is not checked on the Kafka backend");
            stream.leave().await?;
        }
    }

    let (done_tx, done) = futures::channel::oneshot::channel();
    let tracker = Tracker {
        progress: Progress::default(),
        done: Some(done_tx),
    }
    .start();
    let billing = Billing {
        declines: BTreeMap::new(),
        retried: BTreeMap::new(),
        tracker: tracker.clone(),
    }
    .start();
    let options = SubscribeOptions::default()
        .max_attempts(MAX_ATTEMPTS)
        .dead_letter_topic(DEAD_LETTERS)
        .events(billing.clone().recipient());
    let billing_subscription = orders
        .subscribe("billing", "billing-1", billing.recipient(), options)
        .await?;
    let shipping = actix::spawn(ship(orders.clone(), tracker.clone()));
    let auditor_a = audit(&orders, "auditor-a", &tracker).await?;

    let desk = Orders {
        topic: orders.clone(),
    }
    .start();
    let mut auditor_b = None;
    for id in 0..ORDERS {
        let order = OrderPlaced {
            id,
            customer: format!("customer-{}", id % 4),
            cents: 250 * (id + 1),
        };
        desk.send(PlaceOrder(order)).await.expect("orders actor")?;
        if id == ORDERS / 3 {
            // A second auditor joins: the group rebalances and the two split the partitions.
            auditor_b = Some(audit(&orders, "auditor-b", &tracker).await?);
        }
        if id == 2 * ORDERS / 3 {
            // ... and leaves again: its partitions go back to auditor-a, which reads what
            // auditor-b had not committed.
            if let Some(auditor_b) = auditor_b.take() {
                auditor_b.unsubscribe();
                println!("audit/auditor-b: gone ({:?})", auditor_b.await);
            }
        }
    }
    let _ = done.await;
    shipping.await.expect("shipping task")?;
    show_dead_letters(&bus, 1).await?;
    billing_subscription.unsubscribe();
    auditor_a.unsubscribe();
    println!(
        "billing ended: {:?}; audit ended: {:?}",
        billing_subscription.await,
        auditor_a.await
    );
    bus.shutdown().await
}
