//! NanoKafka as an event bus between actix actors, on the typed-topic API.
//!
//! An `OrderDesk` actor publishes `OrderPlaced` events on the typed topic `orders` (keyed by
//! customer, so one customer's orders stay in order on one partition). Two subscriber actors
//! have them pushed by the broker, each as the member of its own group, so each sees every
//! event (pub/sub): `fulfillment` and `audit`. Each batch is committed by the subscriber's
//! `Ack::Commit` reply, so a crash re-delivers only what was not committed (at-least-once).
//! The subscribers also receive their subscription's events: the partitions they are given
//! (and would lose in a rebalance), and the subscription's end.
//!
//! Everything runs inside `#[actix::main]`: the broker is opened and shut down with `.await`.
//! A `Topic<OrderPlaced>` names the topic and the payload type once; a subscriber of another
//! type would be refused when it subscribes.
//!
//! Run: `cargo run --release --example actor_bus`; on a Kafka cluster instead of the
//! embedded broker: `NANOKAFKA_BOOTSTRAP=host:9092 cargo run --release --features kafka
//! --example actor_bus` (the same actors, the Kafka backend underneath).

use actix::prelude::*;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions, SubscriptionEvent};
use nanokafka::{NanoKafka, Topic, TopicConfig};
use serde::{Deserialize, Serialize};

#[path = "common/data_dir.rs"]
mod data_dir;

const TOPIC: &str = "orders";
const ORDERS: u64 = 20;

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderPlaced {
    id: u64,
    customer: String,
    cents: u64,
}

/// Publishes an order event for each `PlaceOrder` it receives.
struct OrderDesk {
    orders: Topic<OrderPlaced>,
}

impl Actor for OrderDesk {
    type Context = Context<Self>;
}

#[derive(Message)]
#[rtype(result = "Result<(), nanokafka::Error>")]
struct PlaceOrder(OrderPlaced);

impl Handler<PlaceOrder> for OrderDesk {
    type Result = ResponseFuture<Result<(), nanokafka::Error>>;

    fn handle(&mut self, PlaceOrder(order): PlaceOrder, _: &mut Context<Self>) -> Self::Result {
        let orders = self.orders.clone();
        Box::pin(async move {
            let d = orders.produce_keyed(&order.customer, &order).await?;
            println!(
                "desk: order {} -> partition {} offset {}",
                order.id, d.partition, d.offset
            );
            Ok(())
        })
    }
}

/// A consumer actor. The broker pushes it batches of events as a member of `group` (at most
/// a few batches unanswered, so a slow subscriber slows the broker, not its memory); its
/// `Ack::Commit` reply commits the batch.
struct Subscriber {
    group: &'static str,
    seen: u64,
    total_cents: u64,
    reported: bool,
    done: Recipient<Finished>,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Finished {
    group: &'static str,
    total_cents: u64,
}

impl Actor for Subscriber {
    type Context = Context<Self>;
}

impl Handler<Delivered<OrderPlaced>> for Subscriber {
    type Result = Ack;

    fn handle(&mut self, batch: Delivered<OrderPlaced>, _: &mut Context<Self>) -> Ack {
        for record in &batch.records {
            let order = &record.value;
            self.seen += 1;
            self.total_cents += order.cents;
            println!(
                "{}: order {} for {} ({} cents, partition {})",
                self.group, order.id, order.customer, order.cents, record.partition
            );
        }
        // At-least-once: records whose commit had not landed when an earlier run (on a kept
        // data directory or a Kafka cluster) stopped come again first, so the count may pass
        // ORDERS within a batch (and include those re-deliveries); report once.
        if self.seen >= ORDERS && !self.reported {
            self.reported = true;
            self.done.do_send(Finished {
                group: self.group,
                total_cents: self.total_cents,
            });
        }
        Ack::Commit
    }
}

/// What happens to the subscription: partitions given and taken (like Kafka's
/// ConsumerRebalanceListener), records that do not decode, refused commits, its end.
impl Handler<SubscriptionEvent> for Subscriber {
    type Result = ();

    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        match event {
            SubscriptionEvent::Assigned {
                generation,
                partitions,
            } => println!(
                "{}: assigned partitions {partitions:?} (generation {generation})",
                self.group
            ),
            SubscriptionEvent::Revoked {
                generation,
                partitions,
            } => println!(
                "{}: revoked partitions {partitions:?} (generation {generation})",
                self.group
            ),
            other => println!("{}: {other:?}", self.group),
        }
    }
}

/// Stops waiting once both groups have seen every order.
struct Finish {
    remaining: usize,
    all_done: Option<futures::channel::oneshot::Sender<()>>,
}

impl Actor for Finish {
    type Context = Context<Self>;
}

impl Handler<Finished> for Finish {
    type Result = ();

    fn handle(&mut self, msg: Finished, _: &mut Context<Self>) {
        println!("{} finished: {} cents in total", msg.group, msg.total_cents);
        self.remaining -= 1;
        if self.remaining == 0 {
            if let Some(all_done) = self.all_done.take() {
                let _ = all_done.send(());
            }
        }
    }
}

#[actix::main]
async fn main() -> Result<(), nanokafka::Error> {
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=warn")
        .init();
    let dir = data_dir::ExampleDir::new();
    // Opened from inside the actor system: the open runs on a helper thread, awaited here.
    // NANOKAFKA_BOOTSTRAP, when set, puts the same API on that Kafka cluster instead.
    let bus = NanoKafka::builder()
        .data_dir(dir.path())
        .kafka_bootstrap_from_env()
        .build_async()
        .await?;
    println!("backend: {:?}", bus.backend());
    // The topic and its payload type, named once. `create` records the type's name, so a
    // subscriber of another type is refused when it subscribes.
    let orders = bus.topic::<OrderPlaced>(TOPIC);
    match orders.create(TopicConfig::default().partitions(2)).await {
        // A kept data directory or a Kafka cluster has it from an earlier run.
        Ok(()) | Err(nanokafka::Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }

    let (all_done, finished) = futures::channel::oneshot::channel();
    let finish = Finish {
        remaining: 2,
        all_done: Some(all_done),
    }
    .start();
    let mut subscriptions = Vec::new();
    for group in ["fulfillment", "audit"] {
        let subscriber = Subscriber {
            group,
            seen: 0,
            total_cents: 0,
            reported: false,
            done: finish.clone().recipient(),
        }
        .start();
        // The subscriber receives the records and, named as the events' recipient, what
        // happens to its subscription.
        let options = SubscribeOptions::default().events(subscriber.clone().recipient());
        let subscription = orders
            .subscribe(group, "member-1", subscriber.recipient(), options)
            .await?;
        subscriptions.push(subscription);
    }
    let desk = OrderDesk {
        orders: orders.clone(),
    }
    .start();
    for id in 0..ORDERS {
        let customer = format!("customer-{}", id % 3);
        let order = OrderPlaced {
            id,
            customer,
            cents: 100 * (id + 1),
        };
        // `send` answers `Result<Result<(), Error>, MailboxError>` for any actor; the desk
        // lives as long as this function, so its mailbox does not close.
        desk.send(PlaceOrder(order)).await.expect("desk")?;
    }
    let _ = finished.await;
    // Each subscription leaves its group; its end can be awaited.
    for subscription in subscriptions {
        subscription.unsubscribe();
        println!("subscription ended: {:?}", subscription.await);
    }
    bus.shutdown().await
}
