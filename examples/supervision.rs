//! Crash a `PartitionActor` on purpose in the middle of a stream: its supervisor restarts it,
//! it reloads its log and offsets from disk, and the producer carries on. At the end every
//! acknowledged record is read back and checked: nothing acknowledged was lost.
//!
//! Run: `cargo run --release --example supervision`. With `NANOKAFKA_BOOTSTRAP=host:9092`
//! (and `--features kafka`) it runs on that Kafka cluster, where crash injection is
//! embedded-only: it says so, skips the crash and still checks that every acknowledged record
//! is read back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use nanokafka::{Error, NanoKafka, TopicConfig};

#[path = "common/data_dir.rs"]
mod data_dir;

const RECORDS: u64 = 2_000;
/// How long the read-back may take: on Kafka the checker's group join comes first, and some
/// brokers complete a new group's join only after half the session timeout (45 s).
const READ_BACK: Duration = Duration::from_secs(120);

fn main() -> Result<(), Error> {
    tracing_subscriber::fmt()
        .with_env_filter("nanokafka=info")
        .init();
    let dir = data_dir::ExampleDir::new();
    // NANOKAFKA_BOOTSTRAP, when set, puts the same API on that Kafka cluster instead.
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .kafka_bootstrap_from_env()
        .build()?;
    println!("backend: {:?}", broker.backend());
    match broker.create_topic("ticks", TopicConfig::default()) {
        // A kept data directory or a Kafka cluster has it from an earlier run.
        Ok(()) | Err(Error::TopicExists { .. }) => {}
        Err(e) => return Err(e),
    }

    let mut acknowledged = BTreeMap::new();
    let mut retries = 0;
    let mut crashed = false;
    for i in 0..RECORDS {
        if i == RECORDS / 2 {
            crashed = crash(&broker, i)?;
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

    let seen = read_back(&broker, acknowledged.len())?;
    println!(
        "acknowledged {} records, read back {}; produce retries: {retries}",
        acknowledged.len(),
        seen.len()
    );
    assert_eq!(
        seen, acknowledged,
        "every acknowledged record, at its offset, once"
    );
    if crashed {
        let restarts = broker.stats()?.topics["ticks"].partitions[0].restarts;
        println!("restarts of partition 0: {restarts}");
        assert_eq!(restarts, 1);
    }
    println!("nothing acknowledged was lost");
    broker.shutdown()
}

/// Crashes partition 0's actor; returns whether it did (crash injection is embedded-only).
fn crash(broker: &NanoKafka, acknowledged: u64) -> Result<bool, Error> {
    match broker.crash_partition("ticks", 0) {
        Ok(()) => {
            println!("--- crashed partition 0 after {acknowledged} acknowledged records ---");
            Ok(true)
        }
        Err(Error::Unsupported { backend, .. }) => {
            println!("--- crash injection is embedded-only: not on the {backend} backend ---");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Reads `count` records as group `checker`, committing each batch; offset -> value.
fn read_back(broker: &NanoKafka, count: usize) -> Result<BTreeMap<u64, u64>, Error> {
    broker.join_group("ticks", "checker", "c1")?;
    let mut seen = BTreeMap::new();
    let deadline = Instant::now() + READ_BACK;
    while seen.len() < count && Instant::now() < deadline {
        let batch =
            broker.poll_batch::<u64>("ticks", "checker", "c1", 500, Duration::from_millis(200))?;
        if let Some(last) = batch.last() {
            broker.commit("ticks", "checker", last.partition, last.offset)?;
        }
        seen.extend(batch.into_iter().map(|r| (r.offset, r.value)));
    }
    Ok(seen)
}
