//! Record validation against the schema registry (`schema-registry` feature): a topic with
//! `confluent.value.schema.validation` / `confluent.key.schema.validation` on takes a produce
//! only when every record is in Confluent's framing with an id registered under the topic's
//! subject (`<topic>-value`, `<topic>-key`) and decodes; a
//! failing batch is `INVALID_RECORD` with `record_errors`, and nothing of it is written. The
//! configs are created, described and altered in Confluent Server's names.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use bytes::Bytes;
use kafka_protocol::messages::ProduceResponse;
use kafka_protocol::ResponseError;
use nanokafka::{ListenerConfig, NanoKafka, TopicConfig};

use crate::admin::{
    alter_configs, creatable, create, describe, op, resource, value_of, whole_set, with_config,
};
use crate::client::WireClient;
use crate::client_batch::{self, BatchOptions, ClientRecord};
use crate::records::{produce, T0};

const SET: i8 = 0;
const VALUE: &str = "confluent.value.schema.validation";
const KEY: &str = "confluent.key.schema.validation";
const USER: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;
/// A `User` {"name": "ab", "age": 21} in Avro's binary encoding.
const AB_21: [u8; 4] = [4, b'a', b'b', 42];

/// A broker with a listener and the registry; `(broker, Kafka address, registry address)`.
fn open(dir: &std::path::Path) -> (NanoKafka, SocketAddr, SocketAddr) {
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .listener(ListenerConfig::new("127.0.0.1:0"))
        .schema_registry("127.0.0.1:0")
        .build()
        .unwrap();
    let kafka = broker.listener_addr().unwrap();
    let registry = broker.schema_registry_addr().unwrap();
    (broker, kafka, registry)
}

/// Registers `schema` (Avro) under `subject` through the REST API; its id.
fn register(registry: SocketAddr, subject: &str, schema: &str) -> u32 {
    let body = serde_json::json!({ "schema": schema }).to_string();
    let mut stream = TcpStream::connect(registry).unwrap();
    write!(
        stream,
        "POST /subjects/{subject}/versions HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/vnd.schemaregistry.v1+json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (_, json) = answer.split_once("\r\n\r\n").unwrap();
    let json: serde_json::Value = serde_json::from_str(json.trim()).unwrap_or_else(|e| {
        panic!("{e}: {answer}");
    });
    json["id"].as_u64().expect("an id") as u32
}

/// Confluent's framing of `payload` with schema `id`.
fn framed(id: u32, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0];
    bytes.extend_from_slice(&id.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn record(key: Option<Vec<u8>>, value: Option<Vec<u8>>) -> ClientRecord {
    ClientRecord {
        timestamp: T0,
        key: key.map(Bytes::from),
        value: value.map(Bytes::from),
        headers: Vec::new(),
    }
}

fn send(client: &mut WireClient, topic: &str, records: &[ClientRecord]) -> ProduceResponse {
    let batch = client_batch::encode(records, BatchOptions::default());
    client.call(&produce(topic, 0, batch, -1), 9)
}

fn log_end(broker: &NanoKafka, topic: &str) -> u64 {
    broker.stats().unwrap().topics[topic].partitions[0].log_end_offset
}

#[test]
fn a_validated_topic_takes_registered_decodable_values_and_refuses_the_rest_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr, registry) = open(dir.path());
    let id = register(registry, "users-value", USER);
    // A schema the registry knows, but under another topic's subject only.
    let elsewhere = register(registry, "orders-value", r#""string""#);
    let mut client = WireClient::connect(addr);
    let created = client.call(
        &create(vec![with_config(creatable("users", 1), VALUE, "true")]),
        5,
    );
    assert_eq!(created.topics[0].error_code, 0);
    assert!(broker.list_topics().unwrap()["users"].value_schema_validation);

    let good = || record(Some(b"k".to_vec()), Some(framed(id, &AB_21)));
    let response = send(&mut client, "users", &[good(), record(None, None), good()]);
    let p = &response.responses[0].partition_responses[0];
    assert_eq!((p.error_code, p.base_offset), (0, 0), "{p:?}");
    assert_eq!(log_end(&broker, "users"), 3);

    let refusals = [
        (b"plain text".to_vec(), "no magic byte".to_owned()),
        (
            framed(id + 100, &AB_21),
            format!("unknown schema id {}", id + 100),
        ),
        (
            framed(elsewhere, &[4, b'a', b'b']),
            format!("schema id {elsewhere} is not registered under the subject users-value"),
        ),
        (framed(id, &AB_21[..2]), "does not decode".to_owned()),
        (
            framed(id, &[4, b'a', b'b', 42, 0]),
            "1 bytes follow the value".to_owned(),
        ),
    ];
    for (value, why) in &refusals {
        let response = send(
            &mut client,
            "users",
            &[good(), record(None, Some(value.clone()))],
        );
        let p = &response.responses[0].partition_responses[0];
        assert_eq!(
            (p.error_code, p.base_offset),
            (ResponseError::InvalidRecord.code(), -1),
            "{why}"
        );
        let errors: Vec<(i32, &str)> = (p.record_errors.iter())
            .map(|e| {
                (
                    e.batch_index,
                    e.batch_index_error_message.as_deref().unwrap(),
                )
            })
            .collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, 1);
        assert!(errors[0].1.contains(why.as_str()), "{errors:?}");
        let message = p.error_message.as_deref().unwrap();
        assert!(
            message.contains("record 1") && message.contains(why.as_str()),
            "{message}"
        );
        assert_eq!(
            log_end(&broker, "users"),
            3,
            "nothing of the batch is written"
        );
    }

    // Keys are free until the key check is on too.
    let response = send(
        &mut client,
        "users",
        &[record(Some(b"k".to_vec()), Some(framed(id, &AB_21)))],
    );
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    let alter = alter_configs("users", vec![op(KEY, SET, Some("true"))]);
    assert_eq!(client.call(&alter, 1).responses[0].error_code, 0);
    let response = send(
        &mut client,
        "users",
        &[record(Some(b"k".to_vec()), Some(framed(id, &AB_21)))],
    );
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert!(
        p.error_message.as_deref().unwrap().contains("the key"),
        "{p:?}"
    );
    // A framed key is checked against the key's own subject.
    let framed_key = || record(Some(framed(id, &AB_21)), Some(framed(id, &AB_21)));
    let response = send(&mut client, "users", &[framed_key()]);
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    let why = format!("the key: schema id {id} is not registered under the subject users-key");
    assert!(p.error_message.as_deref().unwrap().contains(&why), "{p:?}");
    assert_eq!(
        register(registry, "users-key", USER),
        id,
        "one schema, one id"
    );
    let response = send(&mut client, "users", &[framed_key()]);
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(log_end(&broker, "users"), 5);
}

#[test]
fn a_topic_without_validation_takes_anything_and_the_embedded_api_is_not_checked() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr, _registry) = open(dir.path());
    broker.create_topic("free", TopicConfig::default()).unwrap();
    broker
        .create_topic("checked", TopicConfig::default().validate_value_schemas())
        .unwrap();
    let mut client = WireClient::connect(addr);
    let response = send(
        &mut client,
        "free",
        &[record(None, Some(b"not framed".to_vec()))],
    );
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(log_end(&broker, "free"), 1);
    // The embedded API is trusted.
    broker
        .produce_raw("checked", None, b"not framed".to_vec())
        .unwrap();
    assert_eq!(log_end(&broker, "checked"), 1);
    let response = send(
        &mut client,
        "checked",
        &[record(None, Some(b"not framed".to_vec()))],
    );
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, ResponseError::InvalidRecord.code());
    assert_eq!(log_end(&broker, "checked"), 1);
    // The embedded API's alter reaches the listener's next produce at once.
    let changes = nanokafka::TopicChanges::default().value_schema_validation(false);
    broker.alter_topic("checked", changes).unwrap();
    let response = send(
        &mut client,
        "checked",
        &[record(None, Some(b"not framed".to_vec()))],
    );
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    assert_eq!(log_end(&broker, "checked"), 2);
}

#[test]
fn the_configs_are_described_altered_and_kept_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (broker, addr, _registry) = open(dir.path());
        broker.create_topic("t", TopicConfig::default()).unwrap();
        let mut client = WireClient::connect(addr);
        let described = |client: &mut WireClient| {
            let response = client.call(&describe(vec![resource(2, "t", None)], false), 4);
            let result = response.results[0].clone();
            (
                value_of(&result, VALUE).map(str::to_owned),
                value_of(&result, KEY).map(str::to_owned),
            )
        };
        assert_eq!(
            described(&mut client),
            (Some("false".into()), Some("false".into()))
        );
        let alter = alter_configs("t", vec![op(VALUE, SET, Some("TRUE"))]);
        assert_eq!(client.call(&alter, 1).responses[0].error_code, 0);
        assert_eq!(
            described(&mut client),
            (Some("true".into()), Some("false".into()))
        );
        let bad = alter_configs("t", vec![op(VALUE, SET, Some("yes"))]);
        let response = client.call(&bad, 1);
        assert_eq!(
            response.responses[0].error_code,
            ResponseError::InvalidConfig.code()
        );
        // AlterConfigs sets the whole set: the key check on, the value check back to off.
        let whole = whole_set("t", &[(KEY, "true")]);
        assert_eq!(client.call(&whole, 1).responses[0].error_code, 0);
        assert_eq!(
            described(&mut client),
            (Some("false".into()), Some("true".into()))
        );
    }
    let (broker, _addr, _registry) = open(dir.path());
    let config = &broker.list_topics().unwrap()["t"];
    assert!(config.key_schema_validation && !config.value_schema_validation);
}
