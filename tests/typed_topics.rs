//! Typed topics: `Topic<T>` / `BlockingTopic<T>` record their payload type at creation, and
//! their subscribers of another type are refused before they join; the escape hatches
//! (`accept_any_payload_type`, raw access, `alter_topic`) work.

use std::any::type_name;
use std::time::Duration;

use actix::prelude::*;
use futures::StreamExt;
use nanokafka::messages::{Ack, Delivered, SubscribeOptions};
use nanokafka::{Error, Header, NanoKafka, TopicChanges, TopicConfig};
use serde::{Deserialize, Serialize};

#[path = "common/watchdog.rs"]
mod watchdog;
use watchdog::within;

const TOPIC: &str = "orders";
/// Bounds every wait of these tests; none is reached unless something is broken.
const PATIENCE: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u64,
    customer: String,
    total_cents: u64,
}

/// The fields of `Order` a reader needs: a subset struct.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct OrderId {
    id: u64,
}

/// Another type altogether.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Shipment {
    tracking: String,
}

fn order(id: u64) -> Order {
    Order {
        id,
        customer: format!("c{id}"),
        total_cents: id * 100,
    }
}

/// A broker with `orders` created through a `BlockingTopic<Order>`, holding `records` orders.
fn broker_with_orders(records: u64) -> (tempfile::TempDir, NanoKafka) {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let orders = broker.topic::<Order>(TOPIC);
    orders.create(TopicConfig::default().partitions(2)).unwrap();
    for id in 0..records {
        orders.produce(&order(id)).unwrap();
    }
    (dir, broker)
}

/// The members `group` has on the topic now (none when the group never had one).
fn members(broker: &NanoKafka, group: &str) -> Vec<String> {
    let stats = broker.stats().unwrap();
    stats.topics[TOPIC]
        .groups
        .get(group)
        .map(|g| g.assignment.keys().cloned().collect())
        .unwrap_or_default()
}

fn assert_mismatch<T>(result: Result<T, Error>, requested: &str) {
    match result {
        Err(Error::PayloadTypeMismatch {
            topic,
            recorded,
            requested: asked,
        }) => {
            assert_eq!(topic, TOPIC);
            assert_eq!(recorded, type_name::<Order>());
            assert_eq!(asked, requested);
        }
        Err(other) => panic!("expected PayloadTypeMismatch, got {other}"),
        Ok(_) => panic!("expected PayloadTypeMismatch, got Ok"),
    }
}

#[test]
fn create_records_the_payload_type_and_it_survives_a_reopen() {
    let (dir, broker) = broker_with_orders(0);
    let recorded = broker.describe_topic(TOPIC).unwrap().payload_type;
    assert_eq!(recorded.as_deref(), Some(type_name::<Order>()));
    assert_eq!(
        broker.list_topics().unwrap()[TOPIC].payload_type,
        recorded,
        "describe_topic agrees with list_topics"
    );
    broker.shutdown().unwrap();
    drop(broker);
    // `nanokafka topics describe` shows it too (cli/tests/cli/topics.rs).
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert_eq!(broker.describe_topic(TOPIC).unwrap().payload_type, recorded);
    assert!(matches!(
        broker.describe_topic("nope"),
        Err(Error::UnknownTopic { topic }) if topic == "nope"
    ));
}

#[test]
fn a_consumer_of_another_type_is_refused_and_does_not_join() {
    let (_dir, broker) = broker_with_orders(3);
    let refused = broker.topic::<Shipment>(TOPIC).consumer("g", "m");
    assert_mismatch(refused, type_name::<Shipment>());
    assert!(members(&broker, "g").is_empty(), "nobody joined");
    // The display says what to do.
    let message = broker
        .topic::<Shipment>(TOPIC)
        .consumer("g", "m")
        .unwrap_err()
        .to_string();
    assert!(message.contains("accept_any_payload_type"), "{message}");
    assert!(message.contains(type_name::<Order>()), "{message}");
    // The right type joins and reads.
    let mut consumer = broker.topic::<Order>(TOPIC).consumer("g", "m").unwrap();
    assert_eq!(members(&broker, "g"), ["m"]);
    let mut read = Vec::new();
    while read.len() < 3 {
        read.extend(consumer.poll_batch(10, PATIENCE).unwrap());
    }
    let mut ids: Vec<u64> = read.iter().map(|r| r.value.id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2]);
}

/// A subscriber actor of any payload type; it commits every batch.
struct Sink<T>(std::marker::PhantomData<T>);

impl<T: Unpin + 'static> Actor for Sink<T> {
    type Context = Context<Self>;
}

impl<T: Unpin + 'static> Handler<Delivered<T>> for Sink<T> {
    type Result = Ack;

    fn handle(&mut self, _: Delivered<T>, _: &mut Context<Self>) -> Ack {
        Ack::Commit
    }
}

#[test]
fn a_subscription_or_stream_of_another_type_is_refused_and_does_not_join() {
    let (_dir, broker) = broker_with_orders(2);
    let bus = broker.async_handle();
    let broker = within(PATIENCE, move || {
        System::new().block_on(async move {
            let shipments = bus.topic::<Shipment>(TOPIC);
            let sink = Sink::<Shipment>(std::marker::PhantomData).start();
            let subscribed = shipments
                .subscribe("g", "m", sink.recipient(), SubscribeOptions::default())
                .await;
            assert_mismatch(subscribed, type_name::<Shipment>());
            assert_mismatch(shipments.stream("g", "m").await, type_name::<Shipment>());
        });
        broker
    });
    // The group was never created: nobody joined, nobody read or committed.
    assert!(members(&broker, "g").is_empty());
    assert!(!broker.stats().unwrap().topics[TOPIC]
        .groups
        .contains_key("g"));
}

#[test]
fn accept_any_payload_type_reads_a_subset_struct() {
    let (_dir, broker) = broker_with_orders(4);
    // Checked: refused.
    assert_mismatch(
        broker.topic::<OrderId>(TOPIC).consumer("ids", "m"),
        type_name::<OrderId>(),
    );
    // Said so: the subset struct reads the payloads, the other fields ignored.
    let mut consumer = broker
        .topic::<OrderId>(TOPIC)
        .accept_any_payload_type()
        .consumer("ids", "m")
        .unwrap();
    let mut ids = Vec::new();
    while ids.len() < 4 {
        ids.extend(
            consumer
                .poll_batch(10, PATIENCE)
                .unwrap()
                .into_iter()
                .map(|r| r.value.id),
        );
    }
    ids.sort_unstable();
    assert_eq!(ids, [0, 1, 2, 3]);
    drop(consumer);
    // The async Topic's stream too.
    let bus = broker.async_handle();
    let streamed = within(PATIENCE, move || {
        System::new().block_on(async move {
            let ids = bus.topic::<OrderId>(TOPIC).accept_any_payload_type();
            let mut stream = ids.stream("ids-stream", "m").await.unwrap();
            let mut seen = Vec::new();
            while seen.len() < 4 {
                seen.push(stream.next().await.unwrap().unwrap().value.id);
            }
            seen.sort_unstable();
            seen
        })
    });
    assert_eq!(streamed, [0, 1, 2, 3]);
}

#[test]
fn raw_access_and_the_handles_own_calls_are_not_checked() {
    let (_dir, broker) = broker_with_orders(0);
    broker
        .produce_raw(TOPIC, Some(b"k"), b"not msgpack".to_vec())
        .unwrap();
    broker.join_group(TOPIC, "raw", "m").unwrap();
    let raw = broker
        .poll_batch_raw(TOPIC, "raw", "m", 10, PATIENCE)
        .unwrap();
    assert_eq!(raw[0].value, b"not msgpack");
    // The handle's typed consumer takes any type: it is the unchecked way.
    let consumer = broker.consumer::<Shipment>(TOPIC, "unchecked", "m");
    assert!(consumer.is_ok());
}

#[test]
fn topic_produce_calls_carry_keys_and_headers() {
    let (_dir, broker) = broker_with_orders(0);
    let orders = broker.topic::<Order>(TOPIC);
    let keyed = orders.produce_keyed("customer-1", &order(1)).unwrap();
    let again = orders.produce_keyed("customer-1", &order(2)).unwrap();
    assert_eq!(keyed.partition, again.partition, "one key, one partition");
    let headers = [Header::new("trace", "abc")];
    let with_headers = orders
        .produce_with_headers(Some(b"customer-1"), &order(3), &headers)
        .unwrap();
    let mut consumer = orders.consumer("g", "m").unwrap();
    let mut read = Vec::new();
    while read.len() < 3 {
        read.extend(consumer.poll_batch(10, PATIENCE).unwrap());
    }
    let last = read
        .iter()
        .find(|r| r.offset == with_headers.offset)
        .unwrap();
    assert_eq!(last.value, order(3));
    assert_eq!(last.headers, headers);
    assert_eq!(last.key.as_deref(), Some(&b"customer-1"[..]));
    assert_eq!(orders.lag("g").unwrap().values().sum::<u64>(), 3);
    assert_eq!(orders.name(), TOPIC);
}

#[test]
fn alter_topic_records_a_new_type_name_or_clears_it() {
    let (dir, broker) = broker_with_orders(1);
    let renamed = type_name::<OrderId>().to_owned();
    let config = broker
        .alter_topic(
            TOPIC,
            TopicChanges::default().payload_type(Some(renamed.clone())),
        )
        .unwrap();
    assert_eq!(config.payload_type.as_deref(), Some(renamed.as_str()));
    assert!(broker.topic::<OrderId>(TOPIC).consumer("a", "m").is_ok());
    let refused = broker.topic::<Order>(TOPIC).consumer("b", "m");
    assert!(matches!(
        refused,
        Err(Error::PayloadTypeMismatch { recorded, .. }) if recorded == renamed
    ));
    // Persisted.
    broker.shutdown().unwrap();
    drop(broker);
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert_eq!(
        broker.describe_topic(TOPIC).unwrap().payload_type,
        Some(renamed)
    );
    // Cleared: every type is accepted again.
    broker
        .alter_topic(TOPIC, TopicChanges::default().payload_type(None))
        .unwrap();
    assert_eq!(broker.describe_topic(TOPIC).unwrap().payload_type, None);
    assert!(broker.topic::<Shipment>(TOPIC).consumer("c", "m").is_ok());
    // An empty name is refused and changes nothing.
    assert!(matches!(
        broker.alter_topic(
            TOPIC,
            TopicChanges::default().payload_type(Some(String::new()))
        ),
        Err(Error::InvalidConfig {
            field: "payload_type",
            ..
        })
    ));
    assert_eq!(broker.describe_topic(TOPIC).unwrap().payload_type, None);
}

#[test]
fn a_topic_config_file_written_before_payload_type_existed_loads_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    broker
        .create_topic(TOPIC, TopicConfig::default().partitions(2))
        .unwrap();
    broker.topic::<Order>(TOPIC).produce(&order(7)).unwrap();
    broker.shutdown().unwrap();
    drop(broker);
    // The file exactly as earlier versions wrote it: no payload_type field.
    let old = r#"{
  "partitions": 2,
  "max_size": null,
  "retention_size": null,
  "retention_bytes": null,
  "retention_ms": null,
  "backpressure": "Block",
  "segment_bytes": 67108864,
  "timestamp_type": "CreateTime"
}"#;
    std::fs::write(dir.path().join(format!("{TOPIC}.json")), old).unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let config = broker.describe_topic(TOPIC).unwrap();
    assert_eq!(config, TopicConfig::default().partitions(2));
    assert_eq!(config.payload_type, None);
    // Nothing recorded, nothing checked: any typed consumer joins; the right one reads.
    assert!(broker.topic::<Shipment>(TOPIC).consumer("s", "m").is_ok());
    let mut consumer = broker.topic::<Order>(TOPIC).consumer("g", "m").unwrap();
    let read = consumer.poll_batch(10, PATIENCE).unwrap();
    assert_eq!(read[0].value, order(7));
    // And a config written now without a payload type is byte-for-byte the old format.
    broker
        .alter_topic(TOPIC, TopicChanges::default().partitions(3))
        .unwrap();
    assert!(
        !std::fs::read_to_string(dir.path().join(format!("{TOPIC}.json")))
            .unwrap()
            .contains("payload_type")
    );
}
