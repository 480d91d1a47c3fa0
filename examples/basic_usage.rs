//! The basic demo: a producer thread and a consumer thread on a 2-partition topic.
//! The producer sends 10 keyed messages; the consumer polls, prints and commits each one,
//! and the program ends once all 10 are consumed.
//!
//! Run: `cargo run --release --example basic_usage`; on a Kafka cluster instead of the
//! embedded broker: `NANOKAFKA_BOOTSTRAP=host:9092 cargo run --release --features kafka
//! --example basic_usage` (the same code, the Kafka backend underneath).

use std::thread;
use std::time::Duration;

use nanokafka::{Header, NanoKafka, TopicConfig};

#[path = "common/data_dir.rs"]
mod data_dir;

const MESSAGES: usize = 10;

fn main() -> Result<(), nanokafka::Error> {
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=warn")
        .init();
    // A fresh directory per run keeps the demo repeatable; set NANOKAFKA_DATA_DIR to keep it
    // and see a restart pick up where the last run stopped.
    let dir = data_dir::ExampleDir::new();
    // NANOKAFKA_BOOTSTRAP, when set, puts the same API on that Kafka cluster instead.
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .kafka_bootstrap_from_env()
        .build()?;
    println!("backend: {:?}", broker.backend());
    match broker.create_topic("events", TopicConfig::default().partitions(2)) {
        // A kept data directory or a Kafka cluster has it from an earlier run.
        Ok(()) | Err(nanokafka::Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }
    broker.join_group("events", "group1", "consumer1")?;

    let producer = {
        let broker = broker.clone();
        thread::spawn(move || -> Result<(), nanokafka::Error> {
            for i in 0..MESSAGES {
                // A key picks the partition (Kafka's partitioner); a header travels beside
                // the payload (here, who produced it).
                let key = i.to_string();
                let d = broker.produce_with_headers(
                    "events",
                    Some(key.as_bytes()),
                    &format!("msg-{i}"),
                    &[Header::new("producer", "basic_usage")],
                )?;
                println!(
                    "produced msg-{i} -> partition {} offset {}",
                    d.partition, d.offset
                );
            }
            Ok(())
        })
    };

    let consumer = {
        let broker = broker.clone();
        thread::spawn(move || -> Result<(), nanokafka::Error> {
            let mut consumed = 0;
            while consumed < MESSAGES {
                // Woken by the next produce; the timeout only bounds an idle wait.
                let Some(record) = broker.poll_timeout::<String>(
                    "events",
                    "group1",
                    "consumer1",
                    Duration::from_secs(5),
                )?
                else {
                    continue;
                };
                let from = record
                    .headers
                    .iter()
                    .find(|h| h.key == "producer")
                    .and_then(|h| h.value.as_deref())
                    .map(String::from_utf8_lossy);
                println!(
                    "consumed {} (partition {} offset {}, from {})",
                    record.value,
                    record.partition,
                    record.offset,
                    from.unwrap_or_default()
                );
                broker.commit("events", "group1", record.partition, record.offset)?;
                consumed += 1;
            }
            Ok(())
        })
    };

    producer.join().expect("producer thread")?;
    consumer.join().expect("consumer thread")?;
    println!(
        "lag after consuming everything: {:?}",
        broker.lag("events", "group1")?
    );
    broker.shutdown()
}
