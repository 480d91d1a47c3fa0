//! The Schemas view (`schema-registry` feature): subjects and their versions as the registry
//! keeps them, and a record value in Confluent's framing decoded on the records page.
#![cfg(feature = "schema-registry")]

use nanokafka::{NanoKafka, TopicConfig};
use serde_json::{json, Value};

use crate::http::{get, request};

const USER: &str = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;

fn register(registry: std::net::SocketAddr, subject: &str, schema: &str) -> u32 {
    let body = json!({ "schema": schema }).to_string();
    let path = format!("/subjects/{subject}/versions");
    let answer = request(registry, "POST", &path, Some(&body), &[]);
    assert_eq!(
        answer.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&answer.body)
    );
    answer.json()["id"].as_u64().unwrap() as u32
}

#[test]
fn subjects_versions_and_a_decoded_avro_value_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .console("127.0.0.1:0")
        .schema_registry("127.0.0.1:0")
        .build()
        .unwrap();
    let console = broker.console_addr().unwrap();
    let registry = broker.schema_registry_addr().unwrap();
    assert_eq!(
        get(console, "/api/overview").json()["broker"]["schema_registry"],
        true
    );
    assert_eq!(get(console, "/api/schemas").json(), json!({"subjects": []}));

    let id = register(registry, "users-value", USER);
    let listed = get(console, "/api/schemas").json();
    assert_eq!(
        listed,
        json!({"subjects": [{"subject": "users-value",
            "versions": [{"version": 1, "id": id, "type": "AVRO"}]}]})
    );
    let versions = get(console, "/api/schemas/users-value").json();
    assert_eq!(versions["versions"][0]["id"], id);
    let text: Value =
        serde_json::from_str(versions["versions"][0]["schema"].as_str().unwrap()).unwrap();
    assert_eq!(text["name"], "User");
    assert_eq!(get(console, "/api/schemas/nobody").status, 404);

    broker
        .create_topic("users", TopicConfig::default())
        .unwrap();
    let mut framed = vec![0];
    framed.extend_from_slice(&id.to_be_bytes());
    framed.extend_from_slice(&[4, b'a', b'b', 42]);
    broker.produce_raw("users", None, framed.clone()).unwrap();
    let mut unknown = vec![0, 0, 0, 0, 99];
    unknown.extend_from_slice(b"x");
    broker.produce_raw("users", None, unknown).unwrap();
    let mut broken = framed[..6].to_vec();
    broken[5] = 40; // a string of 20 bytes, of which none follow
    broker.produce_raw("users", None, broken).unwrap();

    let page = get(console, "/api/topics/users/partitions/0/records?offset=0").json();
    let values: Vec<&Value> = (page["records"].as_array().unwrap().iter())
        .map(|r| &r["value"])
        .collect();
    assert_eq!(
        values[0]["schema"],
        json!({"id": id, "type": "AVRO", "json": {"name": "ab", "age": 21}})
    );
    assert_eq!(values[0]["size"], 9);
    assert!(
        values[1].get("schema").is_none(),
        "an id the registry does not know: {}",
        values[1]
    );
    assert_eq!(values[2]["schema"]["id"], id);
    assert!(values[2]["schema"]["error"].is_string(), "{}", values[2]);
}
