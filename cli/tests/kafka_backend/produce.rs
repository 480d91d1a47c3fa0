//! Producing: every produce path's deliveries, their (partition, offset) order, and where
//! keyed records land.

use std::collections::BTreeMap;

use nanokafka::{partition_for_key, Delivery, Header, RecordBatch};

use crate::target::{on_every_target, Target};
use crate::wait;

/// Deliveries per partition must be the consecutive offsets from 0, in call order; keeps
/// what was produced where, to compare with what is read back.
#[derive(Default)]
struct Ledger {
    next: BTreeMap<u32, u64>,
    produced: BTreeMap<(u32, u64), u64>,
}

impl Ledger {
    fn record(&mut self, delivery: Delivery, value: u64) {
        let next = self.next.entry(delivery.partition).or_insert(0);
        assert_eq!(delivery.offset, *next, "{delivery:?} for value {value}");
        *next += 1;
        self.produced
            .insert((delivery.partition, delivery.offset), value);
    }

    fn records(&mut self, deliveries: Vec<Delivery>, values: impl IntoIterator<Item = u64>) {
        let values: Vec<u64> = values.into_iter().collect();
        assert_eq!(deliveries.len(), values.len(), "one delivery per record");
        for (delivery, value) in deliveries.into_iter().zip(values) {
            self.record(delivery, value);
        }
    }
}

/// produce, produce_keyed, produce_with_headers, produce_raw and produce_batch (pinned and
/// routed) each answer with where the record is: consecutive offsets per partition in call
/// order, a batch's deliveries in the batch's order; and the records are read back there.
fn every_produce_path_delivers_consecutive_offsets_in_call_order(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("deliveries", 2);
    let mut ledger = Ledger::default();
    for v in 0..4u64 {
        ledger.record(broker.produce(&topic, &v).unwrap(), v);
    }
    for v in 4..8u64 {
        let key = format!("key-{v}");
        ledger.record(broker.produce_keyed(&topic, &key, &v).unwrap(), v);
    }
    let header = [Header::new("via", "produce_with_headers")];
    let d = broker.produce_with_headers(&topic, Some(b"h"), &8u64, &header);
    ledger.record(d.unwrap(), 8);
    let raw = nanokafka::encode(&9u64).unwrap();
    ledger.record(broker.produce_raw(&topic, Some(b"r"), raw).unwrap(), 9);

    let mut pinned = RecordBatch::new();
    for v in 10..15u64 {
        pinned.push(&v).unwrap();
    }
    let deliveries = broker.produce_batch(&topic, Some(1), pinned).unwrap();
    assert!(
        deliveries.iter().all(|d| d.partition == 1),
        "{deliveries:?}"
    );
    ledger.records(deliveries, 10..15);

    let mut routed = RecordBatch::new();
    for v in 15..25u64 {
        routed.push_keyed(format!("key-{v}"), &v).unwrap();
    }
    let deliveries = broker.produce_batch(&topic, None, routed).unwrap();
    for (d, v) in deliveries.iter().zip(15..25u64) {
        let key = format!("key-{v}");
        assert_eq!(d.partition, partition_for_key(key.as_bytes(), 2), "{key}");
    }
    ledger.records(deliveries, 15..25);

    let mut consumer = broker.consumer::<u64>(&topic, "reader", "r1").unwrap();
    let read = wait::read(&mut consumer, ledger.produced.len());
    assert_eq!(wait::by_position(&read), ledger.produced);
}

/// A keyed record lands on `partition_for_key(key, partitions)`, Kafka's Java partitioner
/// (murmur2), whichever path produced it, and reads back with its key.
fn keyed_records_land_where_partition_for_key_says(t: &Target) {
    let broker = t.broker();
    let partitions = 5;
    let topic = t.new_topic("keyed", partitions);
    let keys: Vec<String> = (0..40).map(|i| format!("customer-{i}")).collect();
    let mut expected = BTreeMap::new();
    for (i, key) in keys.iter().enumerate() {
        let d = broker.produce_keyed(&topic, key, &(i as u64)).unwrap();
        assert_eq!(
            d.partition,
            partition_for_key(key.as_bytes(), partitions),
            "{key}"
        );
        expected.insert(i as u64, (d.partition, key.clone()));
    }
    let mut batch = RecordBatch::new();
    for (i, key) in keys.iter().enumerate() {
        batch.push_keyed(key, &(100 + i as u64)).unwrap();
    }
    let deliveries = broker.produce_batch(&topic, None, batch).unwrap();
    for ((i, key), d) in keys.iter().enumerate().zip(deliveries) {
        assert_eq!(
            d.partition,
            partition_for_key(key.as_bytes(), partitions),
            "{key}"
        );
        expected.insert(100 + i as u64, (d.partition, key.clone()));
    }
    // Every partition got some of the 40 keys: the check covers the whole modulo.
    let used: std::collections::BTreeSet<u32> = expected.values().map(|(p, _)| *p).collect();
    assert_eq!(used.len(), partitions as usize, "{used:?}");

    let mut consumer = broker.consumer::<u64>(&topic, "reader", "r1").unwrap();
    let read = wait::read(&mut consumer, expected.len());
    let seen: BTreeMap<u64, (u32, String)> = read
        .into_iter()
        .map(|r| {
            let key = String::from_utf8(r.key.expect("a key")).unwrap();
            (r.value, (r.partition, key))
        })
        .collect();
    assert_eq!(seen, expected);
}

on_every_target!(
    every_produce_path_delivers_consecutive_offsets_in_call_order,
    keyed_records_land_where_partition_for_key_says,
);
