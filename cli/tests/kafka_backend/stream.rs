//! `RecordStream<T>` from an actix System: every record once, in order per partition; a
//! record that does not decode is an error naming it and the stream moves past it; after
//! `leave`, a new stream of the group resumes after the commits.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use actix::System;
use futures::StreamExt;
use nanokafka::{AsyncNanoKafka, Error, Record, RecordStream, StreamOptions};

use crate::target::{on_every_target, Target};
use crate::wait::PATIENCE;

fn options() -> StreamOptions {
    StreamOptions {
        max_batch: 7,
        poll_wait: Duration::from_millis(200),
        ..StreamOptions::default()
    }
}

async fn next(stream: &mut RecordStream<u64>) -> nanokafka::Result<Record<u64>> {
    actix_rt::time::timeout(PATIENCE, stream.next())
        .await
        .expect("an item within PATIENCE")
        .expect("the stream goes on")
}

async fn lag_drains(bus: &AsyncNanoKafka, topic: &str, group: &str) {
    let deadline = Instant::now() + PATIENCE;
    while bus
        .lag(topic, group)
        .await
        .unwrap()
        .values()
        .any(|&l| l > 0)
    {
        assert!(Instant::now() < deadline, "the commits did not land");
        actix_rt::time::sleep(Duration::from_millis(5)).await;
    }
}

fn a_stream_reads_everything_skips_a_bad_record_and_the_group_resumes_after_it(t: &Target) {
    let topic = t.new_topic("stream", 2);
    for i in 0..20u64 {
        t.broker().produce_keyed(&topic, i.to_string(), &i).unwrap();
    }
    // Valid MessagePack, not a u64.
    let bad = nanokafka::encode("not a number").unwrap();
    let bad_at = t.broker().produce_raw(&topic, Some(b"7"), bad).unwrap();
    let bus = t.broker().async_handle();
    let producer = bus.clone();
    let topic_name = topic.clone();
    System::new().block_on(async move {
        let topic = topic_name;
        let mut first = bus
            .stream_with::<u64>(&topic, "g", "a", options())
            .await
            .unwrap();
        let mut per_partition: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        let mut values = BTreeSet::new();
        let mut errors = Vec::new();
        while values.len() < 20 || errors.is_empty() {
            match next(&mut first).await {
                Ok(r) => {
                    per_partition.entry(r.partition).or_default().push(r.offset);
                    values.insert(r.value);
                    first.commit(&r).await.unwrap();
                }
                Err(Error::Decode {
                    partition, offset, ..
                }) => errors.push((partition, offset)),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        assert_eq!(values, (0..20).collect());
        assert_eq!(errors, [(bad_at.partition, bad_at.offset)]);
        for offsets in per_partition.values() {
            let mut sorted = offsets.clone();
            sorted.sort_unstable();
            assert_eq!(*offsets, sorted, "in order per partition");
        }
        first
            .commit_offset(bad_at.partition, bad_at.offset)
            .await
            .unwrap();
        lag_drains(&bus, &topic, "g").await;
        first.leave().await.unwrap();

        for i in 20..25u64 {
            producer
                .produce_keyed(&topic, i.to_string(), &i)
                .await
                .unwrap();
        }
        let mut second = bus
            .stream_with::<u64>(&topic, "g", "b", options())
            .await
            .unwrap();
        let mut later = BTreeSet::new();
        while later.len() < 5 {
            later.insert(next(&mut second).await.unwrap().value);
        }
        assert_eq!(later, (20..25).collect());
    });
}

on_every_target!(a_stream_reads_everything_skips_a_bad_record_and_the_group_resumes_after_it);
