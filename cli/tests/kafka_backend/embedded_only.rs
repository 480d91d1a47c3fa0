//! The calls only the embedded broker serves: statistics, its description, crash injection,
//! Kafka producers' raw batches and the Kafka listener. On the Kafka backend each is
//! `Error::Unsupported { backend: "kafka" }` and does nothing; a listener beside
//! `kafka_bootstrap` is `InvalidArgument` at build.

use bytes::Bytes;
use nanokafka::{Error, NanoKafka};

use crate::client_batch::{self, BatchOptions, ClientRecord};
use crate::target::{on_every_target, Target};
use crate::wait::{self, STEP};

/// Two records, `a` and `b`, as a Kafka producer's RecordBatch v2 (kafka-protocol's encoder).
fn kafka_batch() -> Vec<u8> {
    let records: Vec<ClientRecord> = ["a", "b"]
        .iter()
        .map(|value| ClientRecord {
            timestamp: wait::now_ms() as i64,
            value: Some(Bytes::from(value.to_string())),
            ..ClientRecord::default()
        })
        .collect();
    client_batch::encode(&records, BatchOptions::default()).to_vec()
}

/// stats, describe_broker, crash_partition, produce_kafka_batch and a listener, served.
fn served_by_the_embedded_broker(t: &Target, topic: &str) {
    let stats = t.broker().stats().unwrap();
    let partitions = &stats.topics[topic].partitions;
    assert_eq!(partitions.iter().map(|p| p.log_end_offset).sum::<u64>(), 1);
    let bus = t.broker().async_handle();
    actix_rt::System::new().block_on(async move { bus.describe_broker().await.unwrap() });
    t.broker()
        .produce_kafka_batch(topic, 0, kafka_batch())
        .unwrap();
    // Last: a request racing the partition's restart could meet `PartitionRestarted`.
    t.broker().crash_partition(topic, 0).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let listening = NanoKafka::builder()
        .data_dir(dir.path())
        .listen("127.0.0.1:0")
        .build()
        .unwrap();
    assert!(listening.listener_addr().is_some());
}

fn assert_unsupported<T: std::fmt::Debug>(result: nanokafka::Result<T>) {
    let unsupported = matches!(
        result,
        Err(Error::Unsupported {
            backend: "kafka",
            ..
        })
    );
    assert!(unsupported, "Kafka: {result:?}");
}

/// The same calls, and the async handle's other crash injections: each `Unsupported`.
fn unsupported_on_kafka(t: &Target, topic: &str) {
    assert_unsupported(t.broker().stats());
    assert_unsupported(t.broker().crash_partition(topic, 0));
    assert_unsupported(t.broker().produce_kafka_batch(topic, 0, kafka_batch()));
    assert_unsupported(t.broker().reset_offset(topic, "g", 0, 0));
    let bus = t.broker().async_handle();
    let topic = topic.to_owned();
    actix_rt::System::new().block_on(async move {
        assert_unsupported(bus.describe_broker().await);
        assert_unsupported(bus.crash_topic(&topic).await);
        assert_unsupported(bus.crash_group_coordinator(&topic, "g").await);
        assert_unsupported(bus.crash_broker().await);
    });
    let listening = t.another_client_with(|b| b.listen("127.0.0.1:0"));
    assert!(
        matches!(listening, Err(Error::InvalidArgument { .. })),
        "a listener beside kafka_bootstrap: {listening:?}"
    );
}

/// Served by the embedded broker; `Unsupported` on Kafka, where nothing is done: the
/// topic holds exactly what was produced through the common API (and, embedded, the raw
/// batch's two records).
fn difference_embedded_only_calls(t: &Target) {
    let topic = t.new_topic("embedded-only", 1);
    t.broker()
        .produce_raw(&topic, None, b"common".to_vec())
        .unwrap();
    let mut expected = vec![b"common".to_vec()];
    match t.is_kafka() {
        false => {
            served_by_the_embedded_broker(t, &topic);
            expected.extend([b"a".to_vec(), b"b".to_vec()]);
        }
        true => unsupported_on_kafka(t, &topic),
    }
    // Raw bytes (not MessagePack): read with the flat raw poll.
    t.broker().join_group(&topic, "g", "m").unwrap();
    let mut read = Vec::new();
    wait::until("the topic's records", || {
        let batch = t
            .broker()
            .poll_batch_raw(&topic, "g", "m", 10, STEP)
            .unwrap();
        if let Some(last) = batch.last() {
            t.broker().commit(&topic, "g", 0, last.offset).unwrap();
        }
        read.extend(batch.into_iter().map(|r| r.value));
        (read.len() >= expected.len()).then_some(())
    });
    assert_eq!(read, expected);
}

/// The actor face: messages sent to `addr()` (or through `broker_ref()`) reach the broker
/// actor on the embedded broker; on Kafka no broker actor runs, and both answer
/// `Unsupported` naming themselves.
fn difference_actor_face(t: &Target) {
    let (addr, broker) = (t.broker().addr(), t.broker().broker_ref());
    match t.is_kafka() {
        false => {
            let (addr, broker) = (addr.unwrap(), broker.unwrap());
            let (sent, requested) = actix_rt::System::new().block_on(async move {
                let sent = addr.send(nanokafka::messages::ListTopics).await;
                (sent, broker.request(nanokafka::messages::ListTopics).await)
            });
            assert!(matches!(sent, Ok(Ok(_))), "{sent:?}");
            assert!(requested.is_ok(), "{requested:?}");
        }
        true => {
            assert!(
                matches!(addr, Err(nanokafka::Error::Unsupported { op: "addr", .. })),
                "Kafka: addr() gave {addr:?}"
            );
            assert!(
                matches!(
                    broker,
                    Err(nanokafka::Error::Unsupported { op: "addr", .. })
                ),
                "Kafka: broker_ref() gave {broker:?}"
            );
        }
    }
}

on_every_target!(difference_embedded_only_calls, difference_actor_face);
