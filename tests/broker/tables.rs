//! Keyed tables (`Table`, `LogTable`) over a compacted topic: restored from the topic at
//! open (across a cleaning and a restart), read-your-writes for `put` and `delete`, every
//! table of a topic seeing every writer, changes pushed to an actor in order, values read
//! from the log by a `LogTable`, records that are no entry skipped and counted, and the
//! errors of a table that cannot open.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use actix::prelude::*;
use nanokafka::clock::ManualClock;
use nanokafka::{AsyncNanoKafka, Error, LogTable, NanoKafka, Table, TableChange, TopicConfig};
use tokio::sync::mpsc;

use crate::common::compacted::{cleaning_broker, compacted, wait_for_cleaning, LAG_MS};

/// Bounds every wait of these tests; none is reached unless something is broken.
const PATIENCE: Duration = Duration::from_secs(30);

/// Runs `body` on an actix System of its own, within the patience bound.
fn run<F, T>(bus: AsyncNanoKafka, body: impl FnOnce(AsyncNanoKafka) -> F + Send + 'static) -> T
where
    F: Future<Output = T>,
    T: Send + 'static,
{
    crate::common::within(PATIENCE, move || System::new().block_on(body(bus)))
}

/// Writes 40 rounds of the keys `k0`..`k9` (typed `String` values `v<round>`), then
/// tombstones for `k3` and `k7`: what a table of the topic must hold.
fn produce_prices(broker: &NanoKafka, topic: &str) -> BTreeMap<String, String> {
    let mut latest = BTreeMap::new();
    for round in 0..40 {
        for key in 0..10 {
            let (key, value) = (format!("k{key}"), format!("v{round}"));
            broker.produce_keyed(topic, &key, &value).unwrap();
            latest.insert(key, value);
        }
    }
    for gone in ["k3", "k7"] {
        broker.produce_tombstone(topic, gone.as_bytes()).unwrap();
        latest.remove(gone);
    }
    latest
}

#[test]
fn a_table_is_restored_from_its_compacted_topic_after_a_cleaning_and_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let first = cleaning_broker(dir.path(), &clock);
    first.create_topic("prices", compacted()).unwrap();
    let latest = produce_prices(&first, "prices");
    clock.advance(LAG_MS);
    let cleaner = wait_for_cleaning(&first, "prices");
    assert!(cleaner.records_removed >= 300, "{cleaner:?}");

    let expected = latest.clone();
    let held = run(first.async_handle(), |bus| async move {
        let table: Table<String, String> = bus.topic("prices").table().await.unwrap();
        (table.to_map(), table.len(), table.skipped())
    });
    assert_eq!(held, (expected.clone(), 8, 0));
    first.shutdown().unwrap();

    let second = cleaning_broker(dir.path(), &clock);
    let held = run(second.async_handle(), |bus| async move {
        let table: Table<String, String> = bus.topic("prices").table().await.unwrap();
        let k3_gone = table.get(&"k3".to_owned()).is_none();
        (table.iter().collect::<BTreeMap<_, _>>(), k3_gone)
    });
    assert_eq!(held, (expected, true), "after a restart");
}

/// Forwards every change it is told of to the test.
struct Forward(mpsc::UnboundedSender<TableChange<String, u64>>);

impl Actor for Forward {
    type Context = Context<Self>;
}

impl Handler<TableChange<String, u64>> for Forward {
    type Result = ();

    fn handle(&mut self, change: TableChange<String, u64>, _: &mut Context<Self>) {
        let _ = self.0.send(change);
    }
}

#[test]
fn writes_through_one_table_reach_every_table_and_its_subscribers_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let config = TopicConfig::default().partitions(3);
    broker.topic::<u64>("stock").create(config).unwrap();
    run(broker.async_handle(), |bus| async move {
        let stock = bus.topic::<u64>("stock");
        let ours: Table<String, u64> = stock.table().await.unwrap();
        let theirs: Table<String, u64> = stock.table().await.unwrap();
        let (tx, mut changes) = mpsc::unbounded_channel();
        theirs.subscribe(Forward(tx).start().recipient());

        let apples = "apples".to_owned();
        ours.put(apples.clone(), &5).await.unwrap();
        // Read-your-writes: the writer's table has applied its own put.
        assert_eq!(ours.get(&apples), Some(5));
        ours.put(apples.clone(), &7).await.unwrap();
        ours.put("pears".to_owned(), &2).await.unwrap();
        ours.delete(&apples).await.unwrap();
        assert_eq!(ours.get(&apples), None);
        // A producer that is no table: the tables see it once they caught up.
        bus.produce_keyed("stock", "plums", &9u64).await.unwrap();
        theirs.catch_up().await.unwrap();
        assert_eq!(
            theirs.to_map(),
            BTreeMap::from([("pears".into(), 2), ("plums".into(), 9)])
        );

        let mut told = Vec::new();
        while told.len() < 5 {
            told.push(changes.recv().await.unwrap());
        }
        let updated = |key: &str, old, new| TableChange::Updated {
            key: key.to_owned(),
            old,
            new,
        };
        // Per key in order; apples and pears may interleave (another partition).
        let apples_told: Vec<_> = told.iter().filter(|c| key_of(c) == "apples").collect();
        assert_eq!(
            apples_told,
            [
                &updated("apples", None, 5),
                &updated("apples", Some(5), 7),
                &TableChange::Deleted {
                    key: "apples".to_owned(),
                    old: Some(7)
                },
            ]
        );
        assert!(told.contains(&updated("pears", None, 2)));
        assert!(told.contains(&updated("plums", None, 9)));
    });
}

fn key_of(change: &TableChange<String, u64>) -> &str {
    match change {
        TableChange::Updated { key, .. } | TableChange::Deleted { key, .. } => key,
    }
}

#[test]
fn a_log_table_reads_each_value_from_the_log_also_after_a_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_000_000);
    let broker = cleaning_broker(dir.path(), &clock);
    broker.create_topic("prices", compacted()).unwrap();
    let latest = produce_prices(&broker, "prices");
    run(broker.async_handle(), move |bus| async move {
        let table: LogTable<String, String> = bus.topic("prices").log_table().await.unwrap();
        assert_eq!(table.keys(), latest.keys().cloned().collect::<Vec<_>>());
        for (key, value) in &latest {
            assert_eq!(table.get(key).await.unwrap().as_ref(), Some(value), "{key}");
        }
        assert_eq!(table.get(&"k3".to_owned()).await.unwrap(), None);
        table
            .put("k3".to_owned(), &"back".to_owned())
            .await
            .unwrap();
        assert_eq!(
            table.get(&"k3".to_owned()).await.unwrap().as_deref(),
            Some("back")
        );
    });
    clock.advance(LAG_MS);
    wait_for_cleaning(&broker, "prices");
    run(broker.async_handle(), |bus| async move {
        let table: LogTable<String, String> = bus.topic("prices").log_table().await.unwrap();
        assert_eq!(table.len(), 9);
        assert_eq!(
            table.get(&"k0".to_owned()).await.unwrap().as_deref(),
            Some("v39")
        );
        assert_eq!(
            table.get(&"k3".to_owned()).await.unwrap().as_deref(),
            Some("back")
        );
    });
}

#[test]
fn records_that_are_no_entry_are_skipped_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic("mixed", TopicConfig::default().partitions(1))
        .unwrap();
    broker.produce_keyed("mixed", "a", &1u64).unwrap();
    broker.produce("mixed", &2u64).unwrap(); // no key
    broker.produce_keyed("mixed", "b", &"not a number").unwrap();
    broker
        .produce_raw("mixed", Some(&[0xff, 0xfe][..]), vec![3])
        .unwrap(); // a key that is not UTF-8
    run(broker.async_handle(), |bus| async move {
        let table: Table<String, u64> = bus.topic("mixed").table().await.unwrap();
        assert_eq!(table.to_map(), BTreeMap::from([("a".to_owned(), 1)]));
        assert_eq!(table.skipped(), 3);
        // Bytes take any key; the values still have to be u64s.
        let raw: Table<Vec<u8>, u64> = bus.topic("mixed").table().await.unwrap();
        assert_eq!(raw.len(), 1 + 1, "{:?}", raw.keys());
    });
}

#[test]
fn a_table_of_a_missing_topic_or_of_another_payload_type_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .topic::<u64>("counts")
        .create(TopicConfig::default())
        .unwrap();
    run(broker.async_handle(), |bus| async move {
        let missing = bus.topic::<u64>("nope").table::<String>().await;
        assert!(
            matches!(missing, Err(Error::UnknownTopic { ref topic }) if topic == "nope"),
            "{missing:?}"
        );
        let wrong = bus.topic::<String>("counts").table::<String>().await;
        assert!(
            matches!(wrong, Err(Error::PayloadTypeMismatch { .. })),
            "{wrong:?}"
        );
    });
}

#[test]
fn a_table_follows_partitions_added_after_it_opened() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .topic::<u64>("grows")
        .create(TopicConfig::default())
        .unwrap();
    run(broker.async_handle(), |bus| async move {
        let table: Table<String, u64> = bus.topic("grows").table().await.unwrap();
        let changes = nanokafka::TopicChanges::default().partitions(3);
        bus.alter_topic("grows", changes).await.unwrap();
        let record = nanokafka::ProduceRecord {
            key: Some(b"late".to_vec()),
            value: nanokafka::encode(&7u64).unwrap(),
        };
        let placed = bus
            .produce_batch_raw("grows", Some(2), vec![record])
            .await
            .unwrap();
        assert_eq!(placed[0].partition, 2);
        table.catch_up().await.unwrap();
        assert_eq!(table.get(&"late".to_owned()), Some(7));
    });
}
