//! NanoKafka as an event bus between actix actors.
//!
//! An `OrderDesk` actor publishes typed `OrderPlaced` events (keyed by customer, so one
//! customer's orders stay in order on one partition). Two subscriber actors receive them
//! pushed by the broker, each as the member of its own group, so each sees every event
//! (pub/sub): `fulfillment` and `audit`. Each batch is committed by the subscriber's
//! `Ack::Commit` reply, so a crash re-delivers only what was not committed (at-least-once).
//!
//! Run: `cargo run --release --example actor_bus`; on a Kafka cluster instead of the
//! embedded broker: `NANOKAFKA_BOOTSTRAP=host:9092 cargo run --release --features kafka
//! --example actor_bus` (the same actors, the Kafka backend underneath).

use actix::prelude::*;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
use nanokafka::{AsyncNanoKafka, NanoKafka, TopicConfig};
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
    bus: AsyncNanoKafka,
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
        let bus = self.bus.clone();
        Box::pin(async move {
            let d = bus.produce_keyed(TOPIC, &order.customer, &order).await?;
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

/// Stops the system once both groups have seen every order.
struct Finish {
    remaining: usize,
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
            System::current().stop();
        }
    }
}

fn main() -> Result<(), nanokafka::Error> {
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=warn")
        .init();
    let dir = data_dir::ExampleDir::new();
    // The broker runs its own actors on its own threads; this program's actors talk to it
    // through the async handle (blocking calls are refused on actix threads).
    // NANOKAFKA_BOOTSTRAP, when set, puts the same API on that Kafka cluster instead.
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .kafka_bootstrap_from_env()
        .build()?;
    println!("backend: {:?}", broker.backend());
    match broker.create_topic(TOPIC, TopicConfig::default().partitions(2)) {
        // A kept data directory or a Kafka cluster has it from an earlier run.
        Ok(()) | Err(nanokafka::Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }
    let bus = broker.async_handle();

    let system = System::new();
    system.block_on(async move {
        let finish = Finish { remaining: 2 }.start();
        for group in ["fulfillment", "audit"] {
            let subscriber = Subscriber {
                group,
                seen: 0,
                total_cents: 0,
                reported: false,
                done: finish.clone().recipient(),
            }
            .start();
            let options = SubscribeOptions::default();
            bus.subscribe(TOPIC, group, "member-1", subscriber.recipient(), options)
                .await?;
        }
        let desk = OrderDesk { bus }.start();
        for id in 0..ORDERS {
            let customer = format!("customer-{}", id % 3);
            desk.send(PlaceOrder(OrderPlaced {
                id,
                customer,
                cents: 100 * (id + 1),
            }))
            .await
            .expect("desk")?;
        }
        Ok::<(), nanokafka::Error>(())
    })?;
    system.run().expect("actor system");
    broker.shutdown()
}
