//! The schema registry with a real client: confluent-kafka's `SchemaRegistryClient`,
//! `AvroSerializer` and `AvroDeserializer` register schemas, produce and read back Avro
//! records in Confluent's wire format (magic byte 0, the schema id big-endian, the Avro
//! datum), and meet Confluent's 409 for a schema the subject's level refuses.
#![cfg(feature = "schema-registry")]

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
