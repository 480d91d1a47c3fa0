//! Crash a `PartitionActor` on purpose in the middle of a stream: its supervisor restarts it,
//! it reloads its log and offsets from disk, and the producer carries on. At the end every
//! acknowledged record is read back and checked: nothing acknowledged was lost.
//!
//! Run: `cargo run --release --example supervision`

use std::collections::BTreeMap;
use std::time::Duration;

use nanokafka::{Error, NanoKafka, TopicConfig};

#[path = "common/data_dir.rs"]
mod data_dir;

const RECORDS: u64 = 2_000;

fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=info")
        .init();
    let dir = data_dir::ExampleDir::new();
    let broker = NanoKafka::open(dir.path())?;
    broker.create_topic("ticks", TopicConfig::default())?;

    let mut acknowledged = BTreeMap::new();
    let mut retries = 0;
    for i in 0..RECORDS {
        if i == RECORDS / 2 {
            println!("--- crashing partition 0 after {i} acknowledged records ---");
            broker.crash_partition("ticks", 0)?;
        }
        loop {
            match broker.produce("ticks", &i) {
                Ok(d) => {
                    acknowledged.insert(d.offset, i);
                    break;
                }
                // The request met the restart; nothing of it was acknowledged: retry.
                Err(Error::PartitionRestarted { .. }) => retries += 1,
                Err(e) => return Err(e),
            }
        }
    }

    broker.join_group("ticks", "checker", "c1")?;
    let mut seen = BTreeMap::new();
    loop {
        let batch =
            broker.poll_batch::<u64>("ticks", "checker", "c1", 500, Duration::from_millis(200))?;
        let Some(last) = batch.last() else { break };
        broker.commit("ticks", "checker", last.partition, last.offset)?;
        seen.extend(batch.into_iter().map(|r| (r.offset, r.value)));
    }

    let stats = broker.stats()?;
    let restarts = stats.topics["ticks"].partitions[0].restarts;
    println!("restarts of partition 0: {restarts}; produce retries: {retries}");
    println!(
        "acknowledged {} records, read back {}",
        acknowledged.len(),
        seen.len()
    );
    assert_eq!(
        seen, acknowledged,
        "every acknowledged record, at its offset, once"
    );
    assert_eq!(restarts, 1);
    println!("nothing acknowledged was lost");
    broker.shutdown()
}
