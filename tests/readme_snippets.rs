//! The README's Rust snippets compile against the current API: each is here as the README
//! has it, inside the few definitions it assumes (`Order`, `Billing`, `order`, ...), and a
//! test checks that every line of every ```rust block of README.md is in this file, so a
//! snippet changed in one place and not the other fails.

#[rustfmt::skip] // The snippets as the README has them.
#[allow(unused, clippy::all)]
mod snippets {
use std::time::Duration;

use actix::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Price {
    cents: u64,
}

struct Billing;

impl Actor for Billing {
    type Context = Context<Self>;
}

impl Billing {
    fn charge(&self, order: &Order) -> bool {
        order.cents > 0
    }
}

struct Board;

impl Actor for Board {
    type Context = Context<Self>;
}

impl Handler<nanokafka::TableChange<String, Price>> for Board {
    type Result = ();
    fn handle(&mut self, _: nanokafka::TableChange<String, Price>, _: &mut Context<Self>) {}
}

mod in_an_actix_service {
    use super::*;

use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions, SubscriptionEvent};
use nanokafka::{AsyncNanoKafka, Topic, TopicConfig};

#[actix::main]
async fn main() -> nanokafka::Result<()> {
    let billing = Billing.start();
    let order = Order { cents: 1 };
    let bus = AsyncNanoKafka::open("data").await?;     // or NanoKafka::builder()..build_async().await
    let orders: Topic<Order> = bus.topic("orders");   // the name and the payload type, once
    orders.create(TopicConfig::default().partitions(4)).await?; // records the type's name

    orders.produce_keyed("user1", &order).await?;     // inside a span: its context rides along

    // Push: an actor has batches delivered, answers each with an Ack, and hears what happens.
    let options = SubscribeOptions::default()
        .max_attempts(3)                              // Ack::Retry at most 3 deliveries...
        .dead_letter_topic("orders.dlq")              // ...then the record goes here
        .events(billing.clone().recipient());         // assigned, revoked, dead-lettered, ended
    let subscription = orders.subscribe("billing", "billing-1", billing.recipient(), options).await?;

    // Pull: a Stream of records, committed one by one.
    let mut stream = orders.stream("shipping", "shipper-1").await?;
    while let Some(record) = stream.next().await {
        let record = record?;                         // Record<Order>
        stream.commit(&record).await?;
    }

    subscription.unsubscribe();
    let why = subscription.await;                     // SubscriptionEnd::Unsubscribed
    bus.shutdown().await                              // returns with the lock released
}

impl Handler<Delivered<Order>> for Billing {
    type Result = Ack;
    fn handle(&mut self, batch: Delivered<Order>, _: &mut Context<Self>) -> Ack {
        let _span = batch.handler_span().entered();   // follows from the producers' spans
        for r in &batch.records {
            if !self.charge(&r.value) {
                // r and the rest of its partition come again in 1 s, in order; those before
                // it are committed.
                return Ack::Retry { offset: r.offset, after: Duration::from_secs(1) };
            }
        }
        Ack::Commit                     // or CommitUpTo(offset), Defer, DeadLetter { offset, reason }
    }
}

impl Handler<SubscriptionEvent> for Billing {
    type Result = ();
    fn handle(&mut self, event: SubscriptionEvent, _: &mut Context<Self>) {
        // Assigned / Revoked { generation, partitions }, DecodeFailed, DeadLettered { key,
        // headers, .. }, CommitRefused, RequestFailed, Ended(why); `_ =>` for the rest
    }
}
}

async fn a_table(bus: nanokafka::AsyncNanoKafka, board: Addr<Board>, price: Price) -> nanokafka::Result<()> {
    use nanokafka::{CleanupPolicy, Table, TopicConfig};
let prices = bus.topic::<Price>("prices");
prices.create(TopicConfig::default().cleanup_policy(CleanupPolicy::Compact)).await?;
let table: Table<String, Price> = prices.table().await?;  // or log_table(): values stay on disk
table.put("AAPL".into(), &price).await?;                  // returns once the table applied it
table.delete(&"TSLA".into()).await?;                      // a tombstone
table.subscribe(board.recipient());                       // TableChange::Updated / Deleted
let aapl: Option<Price> = table.get(&"AAPL".into());
    Ok(())
}

fn from_plain_threads(order: Order) -> nanokafka::Result<()> {
use std::time::Duration;
use nanokafka::{Backpressure, FsyncPolicy, NanoKafka, TopicChanges, TopicConfig};

let broker = NanoKafka::open("data")?;                    // creates or reloads the data dir
let broker = NanoKafka::builder().data_dir("data").fsync(FsyncPolicy::Always).build()?;

broker.create_topic("orders", TopicConfig::default()
    .partitions(2).max_size(1000).retention_size(5000)
    .backpressure(Backpressure::Block))?;                 // Error::TopicExists if present
broker.alter_topic("orders", TopicChanges::default()
    .partitions(4).retention_ms(Some(86_400_000)))?;       // grow, retune; Error::InvalidConfig
broker.delete_topic("scratch")?;                           // records, groups, files; Error::UnknownTopic

let d = broker.produce("orders", &order)?;                 // no key: round-robin
let d = broker.produce_keyed("orders", "user1", &order)?;  // key: Kafka's partitioner
broker.join_group("orders", "group1", "consumerA")?;       // -> Assignment { generation, partitions }
let r = broker.poll::<Order>("orders", "group1", "consumerA")?;            // Option<Record<Order>>, no wait
let r = broker.poll_timeout::<Order>("orders", "group1", "consumerA", Duration::from_secs(1))?;
let v = broker.poll_batch::<Order>("orders", "group1", "consumerA", 500, Duration::from_secs(1))?;
broker.commit("orders", "group1", v[0].partition, v[0].offset)?; // committed = offset + 1
let lag = broker.lag("orders", "group1")?;                 // BTreeMap<partition, lag>
broker.shutdown()?;                                        // flush, stop actors, release lock
    Ok(())
}

fn from_kafka_clients() -> nanokafka::Result<()> {
    use nanokafka::NanoKafka;
let broker = NanoKafka::builder()
    .data_dir("data")
    .listen("127.0.0.1:9092") // or ListenerConfig::new(addr) with caps, SASL, ... via .listener(..)
    .build()?;
println!("Kafka clients connect to {}", broker.listener_addr().unwrap());
    Ok(())
}

#[cfg(feature = "schema-registry")]
async fn a_topic_with_a_schema(bus: nanokafka::AsyncNanoKafka, order: Order) -> nanokafka::Result<()> {
    const ORDER_AVSC: &str = r#"{"type":"record","name":"Order","fields":[{"name":"cents","type":"long"}]}"#;
let orders = bus.topic::<Order>("orders").with_avro_schema(ORDER_AVSC).await?; // orders-value
orders.produce(&order).await?;                    // 0, the schema id, the Avro datum
    Ok(())
}

#[cfg(feature = "kafka")]
fn on_a_kafka_cluster() -> nanokafka::Result<()> {
    use nanokafka::NanoKafka;
// The one place the backend is chosen: Kafka when NANOKAFKA_BOOTSTRAP is set, else embedded.
let bus = NanoKafka::builder()
    .data_dir("data")
    .kafka_bootstrap_from_env()                        // or .kafka_bootstrap("kafka-1:9092")
    .kafka_setting("security.protocol", "sasl_ssl")    // any librdkafka setting, passed through
    .build()?;
assert_eq!(bus.backend(), nanokafka::Backend::Kafka);  // when NANOKAFKA_BOOTSTRAP is set
    Ok(())
}
}

/// The ```rust blocks of README.md, each a list of its lines.
fn readme_rust_blocks() -> Vec<Vec<&'static str>> {
    let mut blocks = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in include_str!("../README.md").lines() {
        match (&mut block, line.trim()) {
            (None, "```rust") => block = Some(Vec::new()),
            (Some(_), "```") => blocks.extend(block.take()),
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn every_line_of_every_readme_rust_snippet_is_compiled_here() {
    let here: Vec<&str> = include_str!("readme_snippets.rs")
        .lines()
        .map(str::trim)
        .collect();
    let blocks = readme_rust_blocks();
    assert!(
        blocks.len() >= 5,
        "the README's Rust snippets: {}",
        blocks.len()
    );
    for block in blocks {
        for line in block.iter().map(|l| l.trim()).filter(|l| !l.is_empty()) {
            assert!(
                here.contains(&line),
                "README line not compiled by this test: {line}"
            );
        }
    }
}
