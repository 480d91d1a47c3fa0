//! The schema registry with a real client: confluent-kafka's `SchemaRegistryClient`,
//! `AvroSerializer` and `AvroDeserializer` register schemas, produce and read back Avro
//! records in Confluent's wire format (magic byte 0, the schema id big-endian, the Avro
//! datum), and meet Confluent's 409 for a schema the subject's level refuses; and read and
//! write the same records as a Rust `Topic<T>` bound to the subject. Its `JSONSerializer` /
//! `JSONDeserializer` do the same with JSON documents, and its `ProtobufSerializer` /
//! `ProtobufDeserializer` with a Protobuf message that imports another file (a reference),
//! and what they write passes the registry's payload check. A topic that validates its
//! values against the registry refuses what confluent-kafka sends unframed (INVALID_RECORD).
#![cfg(feature = "schema-registry")]

use std::time::Duration;

use nanokafka::schemas::{ParsedSchema, Referenced, SchemaType};
use nanokafka::TopicConfig;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::clients;
use crate::common::{Broker, RUN};

#[test]
fn confluent_kafkas_avro_serializers_register_write_and_read_through_the_registry() {
    let Some(script) = clients::python("confluent_avro.py") else {
        return;
    };
    let b = Broker::start_with(|builder| builder.schema_registry("127.0.0.1:0"));
    let registry = format!("http://{}", b.broker.schema_registry_addr().unwrap());
    let result = script.run_json(&[registry.as_str(), b.bootstrap.as_str(), "users"], RUN);
    assert_eq!(result["ids"], json!([1, 2]), "{result}");
    assert_eq!(result["subjects"], json!(["users-value"]));
    assert_eq!(result["versions"], json!([1, 2]));
    let read: Vec<_> = result["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(read[0], &json!({"name": "user-0", "age": 20}));
    assert_eq!(
        read[3],
        &json!({"name": "user-3", "age": 23, "email": "u3@example.com"})
    );
    assert_eq!(read.len(), 4);
    let refused = &result["refused"];
    assert_eq!(
        (&refused["status"], &refused["code"]),
        (&json!(409), &json!(409)),
        "{result}"
    );
    assert!(
        refused["message"].as_str().unwrap().contains("phone"),
        "{result}"
    );

    // What the serializer wrote, read natively: Confluent's framing with the ids the
    // registry gave.
    b.broker.join_group("users", "check", "m").unwrap();
    let records = b
        .broker
        .poll_batch_raw("users", "check", "m", 10, std::time::Duration::from_secs(5))
        .unwrap();
    let ids: Vec<(u8, u32)> = records
        .iter()
        .map(|r| {
            (
                r.value[0],
                u32::from_be_bytes(r.value[1..5].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(ids, [(0, 1), (0, 1), (0, 1), (0, 2)]);
    // The refused schema left nothing behind.
    let subjects = b.broker.stats().unwrap().topics["_schemas"].partitions[0].log_end_offset;
    assert_eq!(subjects, 2, "two SCHEMA records");
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: i64,
    customer: String,
    total_cents: i64,
    note: Option<String>,
}

/// The schema both languages use, from one file.
const ORDER_SCHEMA: &str = include_str!("../tools/clients/order.avsc");

#[test]
fn a_bound_rust_topic_and_confluent_kafkas_avro_serde_read_each_others_records() {
    let Some(script) = clients::python("confluent_avro_orders.py") else {
        return;
    };
    let b = Broker::start_with(|builder| builder.schema_registry("127.0.0.1:0"));
    let registry = format!("http://{}", b.broker.schema_registry_addr().unwrap());
    let orders = (b.broker.topic::<Order>("orders"))
        .with_avro_schema(ORDER_SCHEMA)
        .unwrap();
    orders.create(TopicConfig::default().partitions(1)).unwrap();
    let written: Vec<Order> = (1..=3)
        .map(|id| Order {
            id,
            customer: format!("rust-{id}"),
            total_cents: 1250 * id,
            note: (id == 2).then(|| "gift".to_owned()),
        })
        .collect();
    for order in &written {
        orders.produce(order).unwrap();
    }

    let schema_file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/tools/clients/order.avsc"
    );
    let args = [
        registry.as_str(),
        b.bootstrap.as_str(),
        "orders",
        schema_file,
        "--count",
        "3",
    ];
    let result = script.run_json(&args, RUN);
    // Python's AvroDeserializer read what the Rust topic wrote.
    let read: Vec<_> = result["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["value"].clone())
        .collect();
    let expected: Vec<_> = written
        .iter()
        .map(|o| json!({"id": o.id, "customer": o.customer, "total_cents": o.total_cents, "note": o.note}))
        .collect();
    assert_eq!(read, expected, "{result}");
    let bound_id = orders.schema().unwrap().1.id;
    assert_eq!(
        result["ids"][0],
        json!(bound_id),
        "Python found the Rust schema's id"
    );
    assert_eq!(result["produced"], json!([3, 4, 5]), "{result}");

    // The Rust readers read what Python's AvroSerializer wrote, the second version's record
    // resolved into the bound schema (its extra field dropped).
    let from_python = [
        Order {
            id: 100,
            customer: "py-0".into(),
            total_cents: 0,
            note: None,
        },
        Order {
            id: 101,
            customer: "py-1".into(),
            total_cents: 500,
            note: None,
        },
        Order {
            id: 102,
            customer: "py-2".into(),
            total_cents: 1000,
            note: Some("coupon".into()),
        },
    ];
    let mut consumer = orders.consumer("rust-readers", "rust-1").unwrap();
    let mut values = Vec::new();
    while values.len() < 6 {
        let batch = consumer.poll_batch(10, Duration::from_secs(5)).unwrap();
        assert!(!batch.is_empty(), "read {} of 6", values.len());
        values.extend(batch.into_iter().map(|r| r.value));
    }
    assert_eq!(values[..3], written[..]);
    assert_eq!(values[3..], from_python[..]);
    b.broker.join_group("orders", "poll", "poll-1").unwrap();
    let polled = orders
        .poll_batch("poll", "poll-1", 10, Duration::from_secs(5))
        .unwrap();
    let polled: Vec<Order> = polled.into_iter().map(|r| r.value).collect();
    assert_eq!(polled[3..], from_python[..]);
}

#[test]
fn confluent_kafkas_protobuf_serializers_register_write_and_read_through_the_registry() {
    let Some(script) = clients::python("confluent_protobuf.py") else {
        return;
    };
    let b = Broker::start_with(|builder| builder.schema_registry("127.0.0.1:0"));
    let registry = format!("http://{}", b.broker.schema_registry_addr().unwrap());
    let result = script.run_json(&[registry.as_str(), b.bootstrap.as_str(), "users"], RUN);
    // The serializer registered the imported file under its own subject, then the message's.
    assert_eq!(
        result["subjects"],
        json!(["address.proto", "users-value"]),
        "{result}"
    );
    assert_eq!(result["versions"], json!([1]));
    assert_eq!(result["id"], json!(2));
    let read: Vec<_> = result["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(read.len(), 3, "{result}");
    assert_eq!(
        read[2],
        &json!({"name": "user-2", "age": 22, "home": {"city": "city-2"}})
    );
    let refused = &result["refused"];
    assert_eq!(
        (&refused["status"], &refused["code"]),
        (&json!(409), &json!(409)),
        "{result}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("message User: field 2 (age) changed type from int32 to string"),
        "{result}"
    );

    // What the serializer wrote: Confluent's framing with the registry's id, then a payload
    // (message indexes and message) that the registry's own check accepts.
    let address = Referenced {
        name: "address.proto".into(),
        schema: result["schemas"]["address.proto"].as_str().unwrap().into(),
    };
    let user = result["schemas"]["user"].as_str().unwrap();
    let schema = ParsedSchema::parse(SchemaType::Protobuf, user, &[address]).unwrap();
    b.broker.join_group("users", "check", "m").unwrap();
    let records = b
        .broker
        .poll_batch_raw("users", "check", "m", 10, std::time::Duration::from_secs(5))
        .unwrap();
    assert_eq!(records.len(), 3);
    for record in &records {
        assert_eq!(record.value[0], 0);
        assert_eq!(
            u32::from_be_bytes(record.value[1..5].try_into().unwrap()),
            2
        );
        schema.check_payload(&record.value[5..]).unwrap();
    }
    let mut garbled = records[0].value[5..].to_vec();
    garbled.push(0xff);
    assert!(schema.check_payload(&garbled).is_err());
}

#[test]
fn confluent_kafkas_json_serializers_register_write_and_read_through_the_registry() {
    let Some(script) = clients::python("confluent_json.py") else {
        return;
    };
    let b = Broker::start_with(|builder| builder.schema_registry("127.0.0.1:0"));
    let registry = format!("http://{}", b.broker.schema_registry_addr().unwrap());
    let result = script.run_json(&[registry.as_str(), b.bootstrap.as_str(), "orders"], RUN);
    assert_eq!(result["ids"], json!([1, 2]), "{result}");
    assert_eq!(result["subjects"], json!(["orders-value"]));
    assert_eq!(result["versions"], json!([1, 2]));
    assert_eq!(result["schema_type"], json!("JSON"));
    let read: Vec<_> = result["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["value"])
        .collect();
    assert_eq!(read.len(), 4);
    assert_eq!(read[0], &json!({"id": 0, "item": "item-0"}));
    assert_eq!(read[3], &json!({"id": 3, "item": "item-3", "note": "gift"}));
    let refused = &result["refused"];
    assert_eq!(
        (&refused["status"], &refused["code"]),
        (&json!(409), &json!(409)),
        "{result}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("#/properties/item: property removed from a closed content model"),
        "{result}"
    );

    // What the serializer wrote: Confluent's framing, then the JSON document, which the
    // registry's schema for that id accepts.
    b.broker.join_group("orders", "check", "m").unwrap();
    let records = b
        .broker
        .poll_batch_raw(
            "orders",
            "check",
            "m",
            10,
            std::time::Duration::from_secs(5),
        )
        .unwrap();
    let ids: Vec<(u8, u32)> = records
        .iter()
        .map(|r| {
            (
                r.value[0],
                u32::from_be_bytes(r.value[1..5].try_into().unwrap()),
            )
        })
        .collect();
    assert_eq!(ids, [(0, 1), (0, 1), (0, 1), (0, 2)]);
    let last: serde_json::Value = serde_json::from_slice(&records[3].value[5..]).unwrap();
    assert_eq!(last["note"], json!("gift"));
    let subjects = b.broker.stats().unwrap().topics["_schemas"].partitions[0].log_end_offset;
    assert_eq!(subjects, 2, "two SCHEMA records");
}

#[test]
fn confluent_kafka_meets_invalid_record_for_a_value_the_registry_cannot_read() {
    let Some(script) = clients::python("confluent_validation.py") else {
        return;
    };
    let b = Broker::start_with(|builder| builder.schema_registry("127.0.0.1:0"));
    let config = nanokafka::TopicConfig::default().validate_value_schemas();
    b.broker.create_topic("checked", config).unwrap();
    let registry = format!("http://{}", b.broker.schema_registry_addr().unwrap());
    let result = script.run_json(&[registry.as_str(), b.bootstrap.as_str(), "checked"], RUN);
    assert_eq!(
        result["delivered"],
        json!([
            {"error": null, "offset": 0},
            {"error": "INVALID_RECORD", "offset": null},
            {"error": null, "offset": 1},
        ]),
        "{result}"
    );
}
