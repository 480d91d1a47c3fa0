//! What a `Consumer<T>` hands back: each record's key, typed value, headers (repeated keys,
//! empty and null values, in produced order) and timestamp.

use nanokafka::{Header, RecordBatch};
use serde::{Deserialize, Serialize};

use crate::target::{on_every_target, Target};
use crate::wait;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Order {
    id: u64,
    customer: String,
    lines: Vec<String>,
}

fn order(id: u64) -> Order {
    Order {
        id,
        customer: format!("customer-{}", id % 3),
        lines: (0..id % 4).map(|l| format!("line-{l}")).collect(),
    }
}

/// The headers of record `id`: a repeated key, an empty value and Kafka's null value, in an
/// order that is not sorted.
fn headers(id: u64) -> Vec<Header> {
    vec![
        Header::new("trace", format!("t-{id}")),
        Header::null("deleted-by"),
        Header::new("empty", ""),
        Header::new("trace", "second value, same key"),
    ]
}

/// Records produced with and without keys and headers, singly and in a batch, read back by
/// `Consumer::poll_batch` exactly: key, value, headers (order, repeats, null and empty values
/// kept) and a timestamp taken between the produce and the read.
fn records_keep_keys_values_headers_and_timestamps(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("records", 2);
    let before = wait::now_ms();
    let mut expected = Vec::new();
    for id in 0..6u64 {
        let key = (id % 2 == 0).then(|| format!("customer-{}", id % 3).into_bytes());
        let d = broker
            .produce_with_headers(&topic, key.as_deref(), &order(id), &headers(id))
            .unwrap();
        expected.push((d.partition, d.offset, key, order(id), headers(id)));
    }
    let d = broker.produce(&topic, &order(6)).unwrap();
    expected.push((d.partition, d.offset, None, order(6), Vec::new()));
    let mut batch = RecordBatch::new();
    for id in 7..10u64 {
        let key = format!("customer-{}", id % 3);
        batch
            .push_with_headers(Some(key.as_bytes()), &order(id), &headers(id))
            .unwrap();
    }
    let deliveries = broker.produce_batch(&topic, Some(0), batch).unwrap();
    for (d, id) in deliveries.into_iter().zip(7..10u64) {
        let key = format!("customer-{}", id % 3).into_bytes();
        expected.push((d.partition, d.offset, Some(key), order(id), headers(id)));
    }

    let mut consumer = broker.consumer::<Order>(&topic, "reader", "r1").unwrap();
    let mut read = wait::read(&mut consumer, expected.len());
    let after = wait::now_ms();
    for record in &read {
        assert!(
            (before..=after).contains(&record.timestamp_ms),
            "timestamp {} outside [{before}, {after}]: {record:?}",
            record.timestamp_ms
        );
    }
    read.sort_by_key(|r| (r.partition, r.offset));
    expected.sort_by_key(|e| (e.0, e.1));
    let read: Vec<_> = read
        .into_iter()
        .map(|r| (r.partition, r.offset, r.key, r.value, r.headers))
        .collect();
    assert_eq!(read, expected);
}

/// Within a partition, records come back in offset order, each once, across many polls of a
/// few records.
fn a_consumer_reads_each_partition_in_offset_order(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("ordered", 3);
    for i in 0..60u64 {
        broker
            .produce_keyed(&topic, format!("k{}", i % 7), &i)
            .unwrap();
    }
    let mut consumer = broker.consumer::<u64>(&topic, "reader", "r1").unwrap();
    let mut read = Vec::new();
    wait::until("60 records, 4 at a time", || {
        read.extend(consumer.poll_batch(4, wait::STEP).unwrap());
        (read.len() >= 60).then_some(())
    });
    assert_eq!(read.len(), 60, "each record once");
    for partition in 0..3 {
        let offsets: Vec<u64> = read
            .iter()
            .filter(|r| r.partition == partition)
            .map(|r| r.offset)
            .collect();
        let in_order: Vec<u64> = (0..offsets.len() as u64).collect();
        assert_eq!(offsets, in_order, "partition {partition}");
    }
}

on_every_target!(
    records_keep_keys_values_headers_and_timestamps,
    a_consumer_reads_each_partition_in_offset_order,
);
