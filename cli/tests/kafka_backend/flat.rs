//! The flat calls of the seed API, as `examples/basic_usage.rs` uses them: `join_group`,
//! `poll_timeout` and `commit` per record, then `lag`.

use std::collections::BTreeSet;
use std::time::Duration;

use nanokafka::Header;

use crate::target::{on_every_target, Target};
use crate::wait;

/// A member joins, records are produced with keys and headers, and a poll_timeout + commit
/// loop consumes each of them once; the group's lag is then 0 on every partition.
fn join_poll_timeout_commit_and_lag_as_basic_usage_does(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("events", 2);
    broker.join_group(&topic, "group1", "consumer1").unwrap();
    for i in 0..10 {
        let key = i.to_string();
        let header = [Header::new("producer", "flat")];
        broker
            .produce_with_headers(&topic, Some(key.as_bytes()), &format!("msg-{i}"), &header)
            .unwrap();
    }
    let mut consumed = BTreeSet::new();
    wait::until("10 records polled and committed one by one", || {
        let polled = broker.poll_timeout::<String>(
            &topic,
            "group1",
            "consumer1",
            Duration::from_millis(200),
        );
        if let Some(record) = polled.unwrap() {
            assert_eq!(record.headers, [Header::new("producer", "flat")]);
            let key = String::from_utf8(record.key.clone().unwrap()).unwrap();
            assert_eq!(record.value, format!("msg-{key}"));
            broker
                .commit(&topic, "group1", record.partition, record.offset)
                .unwrap();
            assert!(
                consumed.insert(record.value),
                "consumed twice after its commit"
            );
        }
        (consumed.len() == 10).then_some(())
    });
    let lag = broker.lag(&topic, "group1").unwrap();
    assert_eq!(lag.into_iter().collect::<Vec<_>>(), [(0, 0), (1, 0)]);
    broker.leave_group(&topic, "group1", "consumer1").unwrap();
}

/// `poll_batch` of the flat API reads up to its maximum, and a commit of the last record
/// moves the group past the whole batch.
fn poll_batch_then_commit_the_last_record(t: &Target) {
    let broker = t.broker();
    let topic = t.new_topic("flat-batch", 1);
    broker.join_group(&topic, "g", "m").unwrap();
    for i in 0..12u64 {
        broker.produce(&topic, &i).unwrap();
    }
    let mut read = Vec::new();
    wait::until("12 records in batches of at most 5", || {
        let batch = broker
            .poll_batch::<u64>(&topic, "g", "m", 5, Duration::from_millis(200))
            .unwrap();
        assert!(batch.len() <= 5, "{batch:?}");
        if let Some(last) = batch.last() {
            broker
                .commit(&topic, "g", last.partition, last.offset)
                .unwrap();
        }
        read.extend(batch.into_iter().map(|r| r.value));
        (read.len() >= 12).then_some(())
    });
    assert_eq!(read, (0..12).collect::<Vec<_>>());
    assert_eq!(broker.lag(&topic, "g").unwrap()[&0], 0);
}

/// The largest timeouts a caller can give (`Duration::MAX` for the block timeout and a
/// poll's wait) neither panic nor wrap: a poll with a record waiting returns it.
fn the_largest_timeouts_work(t: &Target) {
    let topic = t.new_topic("extreme", 1);
    let client = t
        .another_client_with(|b| b.block_timeout(Duration::MAX))
        .expect("a client with the largest block timeout");
    client.produce(&topic, &7u64).unwrap();
    client.join_group(&topic, "g", "m").unwrap();
    let record = client
        .poll_timeout::<u64>(&topic, "g", "m", Duration::MAX)
        .unwrap()
        .expect("the record");
    assert_eq!(record.value, 7);
}

on_every_target!(
    the_largest_timeouts_work,
    join_poll_timeout_commit_and_lag_as_basic_usage_does,
    poll_batch_then_commit_the_last_record,
);
