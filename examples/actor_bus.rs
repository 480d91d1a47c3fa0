//! NanoKafka as an event bus between actix actors.
//!
//! An `OrderDesk` actor publishes typed `OrderPlaced` events (keyed by customer, so one
//! customer's orders stay in order on one partition). Two consumer actors read them in two
//! groups, so each sees every event (pub/sub): `Fulfillment` ships orders, `Audit` totals
//! them. Both long-poll (woken by the produce, no busy loop) and commit after handling a
//! batch, so a crash re-delivers only what was not committed (at-least-once).
//!
//! Run: `cargo run --release --example actor_bus`

use std::time::Duration;

use actix::prelude::*;
use nanokafka::{AsyncNanoKafka, NanoKafka, Record, TopicConfig};
use serde::{Deserialize, Serialize};

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

/// A consumer actor: joins `group`, polls batches, hands each event to `on_event`, commits.
struct Subscriber {
    bus: AsyncNanoKafka,
    group: &'static str,
    seen: u64,
    total_cents: u64,
    done: Recipient<Finished>,
}

#[derive(Message)]
#[rtype(result = "()")]
struct Finished {
    group: &'static str,
    total_cents: u64,
}

impl Subscriber {
    fn poll_next(&mut self, ctx: &mut Context<Self>) {
        let (bus, group) = (self.bus.clone(), self.group);
        let poll = async move {
            bus.poll_batch::<OrderPlaced>(TOPIC, group, "member-1", 8, Duration::from_secs(5))
                .await
        };
        ctx.spawn(
            poll.into_actor(self)
                .then(|batch, act, _| {
                    let bus = act.bus.clone();
                    let group = act.group;
                    let batch = batch.expect("poll");
                    let last = batch
                        .last()
                        .map(|r: &Record<OrderPlaced>| (r.partition, r.offset));
                    for record in &batch {
                        act.seen += 1;
                        act.total_cents += record.value.cents;
                        println!(
                            "{group}: order {} for {} ({} cents)",
                            record.value.id, record.value.customer, record.value.cents
                        );
                    }
                    async move {
                        if let Some((partition, offset)) = last {
                            bus.commit(TOPIC, group, partition, offset)
                                .await
                                .expect("commit");
                        }
                    }
                    .into_actor(act)
                })
                .map(|(), act, ctx| {
                    if act.seen >= ORDERS {
                        act.done.do_send(Finished {
                            group: act.group,
                            total_cents: act.total_cents,
                        });
                    } else {
                        act.poll_next(ctx);
                    }
                }),
        );
    }
}

impl Actor for Subscriber {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let (bus, group) = (self.bus.clone(), self.group);
        let join = async move { bus.join_group(TOPIC, group, "member-1").await };
        ctx.wait(join.into_actor(self).map(|assignment, act, _| {
            println!(
                "{}: joined, partitions {:?}",
                act.group,
                assignment.expect("join").partitions
            );
        }));
        self.poll_next(ctx);
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
    let dir = tempfile::tempdir().expect("temporary directory");
    // The broker runs its own actors on its own threads; this program's actors talk to it
    // through the async handle (blocking calls are refused on actix threads).
    let broker = NanoKafka::open(dir.path())?;
    broker.create_topic(TOPIC, TopicConfig::default().partitions(2))?;
    let bus = broker.async_handle();

    let system = System::new();
    system.block_on(async move {
        let finish = Finish { remaining: 2 }.start();
        for group in ["fulfillment", "audit"] {
            Subscriber {
                bus: bus.clone(),
                group,
                seen: 0,
                total_cents: 0,
                done: finish.clone().recipient(),
            }
            .start();
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
