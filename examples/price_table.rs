//! A keyed table for actors: the latest price of every symbol, kept in a compacted topic and
//! served from memory by a `Table<String, Price>`, across a restart.
//!
//! A feed `put`s prices into the table (each a record of the compacted topic `prices`,
//! keyed by symbol) and `delete`s a delisted symbol (a tombstone). A `Board` actor subscribes
//! to the table's changes and prints each one with the price it replaced. Then the broker is
//! shut down and opened again on the same data directory: the new table is restored from
//! the topic (no other state is kept) and holds the same prices. The log cleaner of a
//! compacted topic keeps the topic short: the latest record of each symbol, and tombstones
//! for `delete.retention.ms`.
//!
//! Run: `cargo run --example price_table`; on a Kafka cluster instead of the embedded
//! broker: `NANOKAFKA_BOOTSTRAP=host:9092 cargo run --features kafka --example price_table`.

use std::collections::BTreeMap;

use actix::prelude::*;
use nanokafka::{AsyncNanoKafka, CleanupPolicy, NanoKafka, Table, TableChange, TopicConfig};
use serde::{Deserialize, Serialize};

#[path = "common/data_dir.rs"]
mod data_dir;

const TOPIC: &str = "prices";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Price {
    cents: u64,
}

/// Prints every change of the table as it is applied.
struct Board;

impl Actor for Board {
    type Context = Context<Self>;
}

impl Handler<TableChange<String, Price>> for Board {
    type Result = ();

    fn handle(&mut self, change: TableChange<String, Price>, _: &mut Context<Self>) {
        match change {
            TableChange::Updated { key, old, new } => {
                let was = old.map_or("new".to_owned(), |p| format!("was {}", p.cents));
                println!("board: {key} {} ({was})", new.cents);
            }
            TableChange::Deleted { key, .. } => println!("board: {key} delisted"),
        }
    }
}

async fn open(dir: &std::path::Path) -> Result<AsyncNanoKafka, nanokafka::Error> {
    NanoKafka::builder()
        .data_dir(dir)
        .kafka_bootstrap_from_env()
        .build_async()
        .await
}

#[actix::main]
async fn main() -> Result<(), nanokafka::Error> {
    let dir = data_dir::ExampleDir::new();
    let bus = open(dir.path()).await?;
    println!("backend: {:?}", bus.backend());
    let prices = bus.topic::<Price>(TOPIC);
    let config = TopicConfig::default()
        .partitions(2)
        .cleanup_policy(CleanupPolicy::Compact);
    match prices.create(config).await {
        // A kept data directory or a Kafka cluster has it from an earlier run.
        Ok(()) | Err(nanokafka::Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }

    let table: Table<String, Price> = prices.table().await?;
    println!("restored {} prices at open", table.len());
    table.subscribe(Board.start().recipient());
    let feed = [
        ("AAPL", 19_012),
        ("MSFT", 41_544),
        ("TSLA", 24_870),
        ("AAPL", 19_030),
    ];
    for (symbol, cents) in feed {
        // Returns once the table has applied it: a `get` now reads it.
        table.put(symbol.to_owned(), &Price { cents }).await?;
    }
    table.delete(&"TSLA".to_owned()).await?;
    let before: BTreeMap<String, Price> = table.to_map();
    println!("before the restart: {before:?}");
    drop(table);
    bus.shutdown().await?;

    // A restart: the table is rebuilt from the topic.
    let bus = open(dir.path()).await?;
    let table: Table<String, Price> = bus.topic::<Price>(TOPIC).table().await?;
    let after = table.to_map();
    println!("after the restart: {after:?}");
    assert_eq!(after, before, "the table is restored from its topic");
    println!(
        "AAPL is {} cents",
        table.get(&"AAPL".to_owned()).map_or(0, |p| p.cents)
    );
    bus.shutdown().await
}
