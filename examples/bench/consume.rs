//! Consume throughput of a pre-filled topic, hot in the page cache: the raw group poll
//! (`poll_batch_raw`, then a commit to move on, since a raw poll re-delivers until one) and the
//! `Consumer<T>` handle (its own positions, no commit needed; payloads decoded as `String`).

use std::time::Duration;

use nanokafka::encode;
use nanokafka::{NanoKafka, RecordBatch};

use crate::harness::{Meter, Rate, BATCH, POLL_BATCH, VALUE_LEN};

/// Records put in a topic before it is consumed: more than one measurement reads at the rates
/// seen so far, and a measurement that runs out stops early (still ~1 s of reading).
pub const PREFILL_RECORDS: u64 = 6_000_000;

/// Fills `topic` with `records` 100-byte payloads: raw bytes, or with `typed`, a MessagePack
/// string of 98 characters (100 bytes encoded) that a `Consumer<String>` decodes.
pub fn prefill(broker: &NanoKafka, topic: &str, records: u64, typed: bool) {
    let value = if typed {
        let text = "x".repeat(VALUE_LEN - 2);
        let bytes = encode(&text).expect("encode");
        assert_eq!(bytes.len(), VALUE_LEN);
        bytes
    } else {
        vec![0xa5; VALUE_LEN]
    };
    let mut left = records;
    while left > 0 {
        let n = left.min(BATCH as u64);
        let mut batch = RecordBatch::with_capacity(n as usize, n as usize * VALUE_LEN);
        for _ in 0..n {
            batch.push_raw(None, &value);
        }
        broker
            .produce_batch(topic, Some(0), batch)
            .expect("prefill");
        left -= n;
    }
}

/// `poll_batch_raw` of [`POLL_BATCH`] records, then a commit of the last one, until the
/// topic is drained or `budget` has passed.
pub fn poll_batch_raw(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let (group, member) = ("bench-raw", "member-0");
    broker.join_group(topic, group, member).expect("join");
    let meter = Meter::start();
    let mut consumed = 0u64;
    while meter.elapsed() < budget {
        let records = broker
            .poll_batch_raw(topic, group, member, POLL_BATCH, Duration::ZERO)
            .expect("poll_batch_raw");
        let Some(last) = records.last() else { break };
        broker
            .commit(topic, group, last.partition, last.offset)
            .expect("commit");
        consumed += records.len() as u64;
    }
    meter.rate(consumed)
}

/// `Consumer<String>::poll_batch` of [`POLL_BATCH`] records until the topic is drained or
/// `budget` has passed.
pub fn consumer_poll_batch(broker: &NanoKafka, topic: &str, budget: Duration) -> Rate {
    let mut consumer = broker
        .consumer::<String>(topic, "bench-consumer", "member-0")
        .expect("consumer");
    let meter = Meter::start();
    let mut consumed = 0u64;
    while meter.elapsed() < budget {
        let records = consumer
            .poll_batch(POLL_BATCH, Duration::ZERO)
            .expect("poll_batch");
        if records.is_empty() {
            break;
        }
        consumed += records.len() as u64;
    }
    meter.rate(consumed)
}
