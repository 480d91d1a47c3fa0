//! The schema registry's REST API (`schema-registry` feature) over real HTTP, as Confluent's
//! clients call it: registration and its ids, lookups, versions, compatibility levels and
//! checks, soft and permanent deletes, Confluent's error codes, the `_schemas` records, and
//! ids and versions kept across a reopen of the data directory; and, through the handles'
//! own registry (no HTTP), typed topics bound to a subject: Confluent's wire format written
//! and read back by id, a bind the subject's level refuses; and Protobuf schemas with
//! imports. Real clients' serializers are in `tests/clients/schema_registry.rs`.
#![cfg(feature = "schema-registry")]

// The console tests' HTTP client; this file uses only part of it.
#[allow(dead_code)]
#[path = "console/http.rs"]
mod http;
#[path = "common/tls.rs"]
mod tls_certs;

use std::net::SocketAddr;
use std::time::Duration;

use nanokafka::NanoKafka;
use serde_json::{json, Value};

use http::{request, Answer};

const CONTENT_TYPE: &str = "application/vnd.schemaregistry.v1+json";

fn open(dir: &std::path::Path) -> (NanoKafka, SocketAddr) {
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .schema_registry("127.0.0.1:0")
        .build()
        .unwrap();
    let addr = broker
        .schema_registry_addr()
        .expect("the registry's address");
    (broker, addr)
}

fn call(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Answer {
    let body = body.map(Value::to_string);
    let answer = request(addr, method, path, body.as_deref(), &[]);
    assert_eq!(
        answer.header("content-type"),
        Some(CONTENT_TYPE),
        "{method} {path}"
    );
    answer
}

/// `(status, error_code)` of a refusal.
fn refused(answer: &Answer) -> (u16, u64) {
    (answer.status, answer.json()["error_code"].as_u64().unwrap())
}

fn user(extra_fields: &str) -> Value {
    let schema = format!(
        r#"{{"type":"record","name":"User","fields":[{{"name":"name","type":"string"}}{extra_fields}]}}"#
    );
    json!({ "schema": schema })
}

const AGE_DEFAULT: &str = r#",{"name":"age","type":"int","default":0}"#;
const AGE: &str = r#",{"name":"age","type":"int"}"#;

#[test]
fn registration_lookup_and_versions_answer_as_confluent() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    assert_eq!(call(addr, "GET", "/subjects", None).json(), json!([]));
    assert_eq!(
        call(addr, "GET", "/schemas/types", None).json(),
        json!(["AVRO", "JSON", "PROTOBUF"])
    );

    let registered = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&user("")),
    );
    assert_eq!(
        (registered.status, registered.json()),
        (200, json!({"id": 1}))
    );
    // The same schema again: the same id, no new version.
    let again = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&user("")),
    );
    assert_eq!(again.json(), json!({"id": 1}));
    let v2 = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&user(AGE_DEFAULT)),
    );
    assert_eq!(v2.json(), json!({"id": 2}));
    // Another subject with the first schema shares its id.
    let other = call(
        addr,
        "POST",
        "/subjects/admins-value/versions",
        Some(&user("")),
    );
    assert_eq!(other.json(), json!({"id": 1}));

    assert_eq!(
        call(addr, "GET", "/subjects", None).json(),
        json!(["admins-value", "users-value"])
    );
    assert_eq!(
        call(addr, "GET", "/subjects/users-value/versions", None).json(),
        json!([1, 2])
    );
    let latest = call(addr, "GET", "/subjects/users-value/versions/latest", None).json();
    assert_eq!(
        (&latest["subject"], &latest["version"], &latest["id"]),
        (&json!("users-value"), &json!(2), &json!(2))
    );
    assert!(
        latest.get("schemaType").is_none(),
        "AVRO is not named: {latest}"
    );
    let by_id = call(addr, "GET", "/schemas/ids/2", None).json();
    assert_eq!(by_id["schema"], latest["schema"]);
    let schema: Value = serde_json::from_str(by_id["schema"].as_str().unwrap()).unwrap();
    assert_eq!(schema["fields"][1]["default"], json!(0));
    let raw = call(addr, "GET", "/subjects/users-value/versions/1/schema", None);
    let raw: Value = serde_json::from_slice(&raw.body).unwrap();
    assert_eq!(raw["name"], json!("User"));
    assert_eq!(
        call(addr, "GET", "/schemas/ids/1/versions", None).json(),
        json!([{"subject": "admins-value", "version": 1}, {"subject": "users-value", "version": 1}])
    );
    let found = call(
        addr,
        "POST",
        "/subjects/users-value",
        Some(&user(AGE_DEFAULT)),
    )
    .json();
    assert_eq!((&found["version"], &found["id"]), (&json!(2), &json!(2)));

    assert_eq!(
        refused(&call(addr, "GET", "/subjects/nobody/versions", None)),
        (404, 40401)
    );
    assert_eq!(
        refused(&call(addr, "GET", "/subjects/users-value/versions/9", None)),
        (404, 40402)
    );
    assert_eq!(
        refused(&call(addr, "GET", "/schemas/ids/99", None)),
        (404, 40403)
    );
    assert_eq!(
        refused(&call(
            addr,
            "POST",
            "/subjects/users-value",
            Some(&json!({"schema": "\"int\""}))
        )),
        (404, 40403)
    );
    assert_eq!(
        refused(&call(
            addr,
            "GET",
            "/subjects/users-value/versions/zero",
            None
        )),
        (422, 42202)
    );
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = open(dir.path());
    let path = "/subjects/s/versions";
    let invalid = json!({"schema": r#"{"type":"record","name":"X"}"#});
    assert_eq!(
        refused(&call(addr, "POST", path, Some(&invalid))),
        (422, 42201)
    );
    // A JSON Schema whose `type` names no type.
    let json_schema = json!({"schema": r#"{"type":"whole"}"#, "schemaType": "JSON"});
    assert_eq!(
        refused(&call(addr, "POST", path, Some(&json_schema))),
        (422, 42201)
    );
    let unknown_type = json!({"schema": "{}", "schemaType": "XML"});
    assert_eq!(
        refused(&call(addr, "POST", path, Some(&unknown_type))),
        (422, 42201)
    );
    let not_json = request(addr, "POST", path, Some("{not json"), &[]);
    assert_eq!(not_json.status, 422);
    let missing_ref = json!({
        "schema": r#"{"type":"record","name":"P","fields":[{"name":"a","type":"Address"}]}"#,
        "references": [{"name": "Address", "subject": "address", "version": 1}],
    });
    assert_eq!(
        refused(&call(addr, "POST", path, Some(&missing_ref))),
        (422, 42201)
    );
    let level = json!({"compatibility": "SIDEWAYS"});
    assert_eq!(
        refused(&call(addr, "PUT", "/config", Some(&level))),
        (422, 42203)
    );
    let huge = json!({"schema": format!("\"{}\"", "x".repeat(3 << 20))});
    assert_eq!(call(addr, "POST", path, Some(&huge)).status, 413);
    assert_eq!(call(addr, "GET", "/no/such/route", None).status, 404);

    assert_eq!(
        call(addr, "GET", "/subjects?deleted=true", None).json(),
        json!([])
    );
    assert_eq!(
        call(addr, "GET", "/config", None).json(),
        json!({"compatibilityLevel": "BACKWARD"})
    );
    // Only the topic was made: no record was written.
    let stats = broker.stats().unwrap();
    assert_eq!(stats.topics["_schemas"].partitions[0].log_end_offset, 0);
}

#[test]
fn compatibility_levels_decide_and_the_check_endpoint_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    call(addr, "POST", "/subjects/s/versions", Some(&user("")));
    // BACKWARD by default: a field without a default cannot be added.
    let answer = call(addr, "POST", "/subjects/s/versions", Some(&user(AGE)));
    assert_eq!(refused(&answer), (409, 409));
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("BACKWARD") && message.contains("age"),
        "{message}"
    );
    let check = call(
        addr,
        "POST",
        "/compatibility/subjects/s/versions/latest?verbose=true",
        Some(&user(AGE)),
    )
    .json();
    assert_eq!(check["is_compatible"], json!(false));
    assert!(
        check["messages"][0].as_str().unwrap().contains("version 1"),
        "{check}"
    );
    let check = call(
        addr,
        "POST",
        "/compatibility/subjects/s/versions/1",
        Some(&user(AGE_DEFAULT)),
    );
    assert_eq!(check.json(), json!({"is_compatible": true}));

    // A subject's own level wins over the global one, until it is deleted.
    assert_eq!(refused(&call(addr, "GET", "/config/s", None)), (404, 40408));
    assert_eq!(
        call(addr, "GET", "/config/s?defaultToGlobal=true", None).json(),
        json!({"compatibilityLevel": "BACKWARD"})
    );
    let forward = json!({"compatibility": "FORWARD"});
    assert_eq!(
        call(addr, "PUT", "/config/s", Some(&forward)).json(),
        json!({"compatibility": "FORWARD"})
    );
    assert_eq!(
        call(addr, "GET", "/config/s", None).json(),
        json!({"compatibilityLevel": "FORWARD"})
    );
    // FORWARD: v1 reads data of a schema with a new field, default or not.
    let v2 = call(addr, "POST", "/subjects/s/versions", Some(&user(AGE)));
    assert_eq!(v2.json(), json!({"id": 2}));
    assert_eq!(
        call(addr, "DELETE", "/config/s", None).json(),
        json!({"compatibilityLevel": "FORWARD"})
    );
    let none = json!({"compatibility": "NONE"});
    call(addr, "PUT", "/config", Some(&none));
    let anything = json!({"schema": "\"string\""});
    assert_eq!(
        call(addr, "POST", "/subjects/s/versions", Some(&anything)).json(),
        json!({"id": 3})
    );
}

/// A JSON Schema for `orders-value`: an object with these properties (JSON of the map's
/// entries), laid out as a client might.
fn order(properties: &str, extra: &str) -> Value {
    let schema = format!(r#"{{ "type": "object", "properties": {{ {properties} }} {extra} }}"#);
    json!({ "schemaType": "JSON", "schema": schema })
}

const ID: &str = r#""id": {"type": "integer"}"#;

#[test]
fn json_schemas_register_evolve_by_their_rules_and_resolve_references() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    let path = "/subjects/orders-value/versions";
    let v1 = call(addr, "POST", path, Some(&order(ID, "")));
    assert_eq!((v1.status, v1.json()), (200, json!({"id": 1})));
    let latest = call(addr, "GET", "/subjects/orders-value/versions/latest", None).json();
    assert_eq!(latest["schemaType"], json!("JSON"));
    // Stored normalized: compact, keys sorted; another layout is the same schema.
    assert_eq!(
        latest["schema"],
        json!(r#"{"properties":{"id":{"type":"integer"}},"type":"object"}"#)
    );
    let relaid = json!({
        "schemaType": "JSON",
        "schema": r#"{"properties":{"id":{"type":"integer"}},"type":"object"}"#,
    });
    assert_eq!(
        call(addr, "POST", path, Some(&relaid)).json(),
        json!({"id": 1})
    );

    // BACKWARD: narrowing a type, or requiring a new property, is refused with the path.
    let narrowed = order(r#""id": {"type": "integer", "maximum": 100}"#, "");
    let answer = call(addr, "POST", path, Some(&narrowed));
    assert_eq!(refused(&answer), (409, 409));
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("#/properties/id: maximum added (100)"),
        "{message}"
    );
    let widened = order(r#""id": {"type": "number"}"#, "");
    assert_eq!(
        call(addr, "POST", path, Some(&widened)).json(),
        json!({"id": 2})
    );
    let found = call(addr, "POST", "/subjects/orders-value", Some(&order(ID, ""))).json();
    assert_eq!((&found["version"], &found["id"]), (&json!(1), &json!(1)));
    assert_eq!(found["schemaType"], json!("JSON"));

    // A `$ref` to "address.json" resolves to the reference of that name.
    let address = json!({
        "schemaType": "JSON",
        "schema": r#"{"type":"object","properties":{"city":{"type":"string"}}}"#,
    });
    call(addr, "POST", "/subjects/address/versions", Some(&address));
    let mut customer = order(r#""home": {"$ref": "address.json"}"#, "");
    let unresolved = call(
        addr,
        "POST",
        "/subjects/customer-value/versions",
        Some(&customer),
    );
    assert_eq!(refused(&unresolved), (422, 42201));
    customer["references"] = json!([{"name": "address.json", "subject": "address", "version": 1}]);
    let registered = call(
        addr,
        "POST",
        "/subjects/customer-value/versions",
        Some(&customer),
    );
    assert_eq!(registered.json(), json!({"id": 4}));
    let by_id = call(addr, "GET", "/schemas/ids/4", None).json();
    assert_eq!(by_id["references"], customer["references"]);
}

#[test]
fn deletes_are_soft_then_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    call(addr, "POST", "/subjects/s/versions", Some(&user("")));
    call(
        addr,
        "POST",
        "/subjects/s/versions",
        Some(&user(AGE_DEFAULT)),
    );
    assert_eq!(
        refused(&call(
            addr,
            "DELETE",
            "/subjects/s/versions/1?permanent=true",
            None
        )),
        (404, 40407)
    );
    assert_eq!(
        call(addr, "DELETE", "/subjects/s/versions/1", None).json(),
        json!(1)
    );
    assert_eq!(
        call(addr, "GET", "/subjects/s/versions", None).json(),
        json!([2])
    );
    assert_eq!(
        call(addr, "GET", "/subjects/s/versions?deleted=true", None).json(),
        json!([1, 2])
    );
    assert_eq!(
        refused(&call(addr, "DELETE", "/subjects/s/versions/1", None)),
        (404, 40406)
    );
    // A soft-deleted version's id still reads (deserializers of old records need it).
    assert_eq!(call(addr, "GET", "/schemas/ids/1", None).status, 200);
    assert_eq!(
        refused(&call(addr, "DELETE", "/subjects/s?permanent=true", None)),
        (404, 40405)
    );
    assert_eq!(call(addr, "DELETE", "/subjects/s", None).json(), json!([2]));
    assert_eq!(call(addr, "GET", "/subjects", None).json(), json!([]));
    assert_eq!(
        call(addr, "GET", "/subjects?deleted=true", None).json(),
        json!(["s"])
    );
    assert_eq!(
        refused(&call(addr, "DELETE", "/subjects/s", None)),
        (404, 40404)
    );
    assert_eq!(
        call(addr, "DELETE", "/subjects/s?permanent=true", None).json(),
        json!([1, 2])
    );
    assert_eq!(
        call(addr, "GET", "/subjects?deleted=true", None).json(),
        json!([])
    );
    assert_eq!(
        refused(&call(addr, "GET", "/schemas/ids/1", None)),
        (404, 40403)
    );
}

#[test]
fn ids_versions_and_levels_survive_a_reopen_and_live_in_schemas_records() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_broker, addr) = open(dir.path());
        call(addr, "POST", "/subjects/a/versions", Some(&user("")));
        call(
            addr,
            "POST",
            "/subjects/a/versions",
            Some(&user(AGE_DEFAULT)),
        );
        call(
            addr,
            "POST",
            "/subjects/b/versions",
            Some(&json!({"schema": "\"string\""})),
        );
        call(
            addr,
            "PUT",
            "/config/b",
            Some(&json!({"compatibility": "FULL"})),
        );
        call(addr, "DELETE", "/subjects/a/versions/1", None);
    }
    let (broker, addr) = open(dir.path());
    assert_eq!(
        call(addr, "GET", "/subjects/a/versions?deleted=true", None).json(),
        json!([1, 2])
    );
    assert_eq!(
        call(addr, "GET", "/subjects/a/versions", None).json(),
        json!([2])
    );
    assert_eq!(
        call(addr, "GET", "/subjects/b/versions/1", None).json()["id"],
        json!(3)
    );
    assert_eq!(
        call(addr, "GET", "/config/b", None).json(),
        json!({"compatibilityLevel": "FULL"})
    );
    // The next id follows the ones the topic holds.
    let next = call(
        addr,
        "POST",
        "/subjects/c/versions",
        Some(&json!({"schema": "\"int\""})),
    );
    assert_eq!(next.json(), json!({"id": 4}));

    // Confluent's record format: JSON keys with a keytype, and the values it writes.
    let mut keys = Vec::new();
    broker.join_group("_schemas", "check", "m").unwrap();
    let records =
        (broker.poll_batch_raw("_schemas", "check", "m", 100, Duration::from_secs(5))).unwrap();
    for record in records {
        let key: Value = serde_json::from_slice(record.key.as_deref().unwrap()).unwrap();
        keys.push(key["keytype"].as_str().unwrap().to_owned());
        if key["keytype"] == "SCHEMA" && key["subject"] == "b" {
            let value: Value = serde_json::from_slice(&record.value).unwrap();
            assert_eq!(value["id"], json!(3));
            assert_eq!(value["schema"], json!("\"string\""));
            assert_eq!(value["deleted"], json!(false));
            assert_eq!(key["magic"], json!(1));
        }
    }
    assert_eq!(
        keys,
        ["SCHEMA", "SCHEMA", "SCHEMA", "CONFIG", "SCHEMA", "SCHEMA"]
    );
}

#[test]
fn modes_freeze_or_import_a_registry_and_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (_broker, addr) = open(dir.path());
        assert_eq!(
            call(addr, "GET", "/mode", None).json(),
            json!({"mode": "READWRITE"})
        );
        let bad = call(addr, "PUT", "/mode", Some(&json!({"mode": "SIDEWAYS"})));
        assert_eq!(refused(&bad), (422, 42204));
        // IMPORT on an empty registry: versions keep the ids and versions given.
        let set = call(addr, "PUT", "/mode", Some(&json!({"mode": "IMPORT"})));
        assert_eq!((set.status, set.json()), (200, json!({"mode": "IMPORT"})));
        let mut imported = user("");
        imported["id"] = json!(100);
        imported["version"] = json!(5);
        let answer = call(
            addr,
            "POST",
            "/subjects/old-value/versions",
            Some(&imported),
        );
        assert_eq!((answer.status, answer.json()), (200, json!({"id": 100})));
        let without_id = call(addr, "POST", "/subjects/x/versions", Some(&user("")));
        assert_eq!(refused(&without_id), (422, 42205));
        // READONLY: nothing changes, reads go on.
        call(addr, "PUT", "/mode", Some(&json!({"mode": "READONLY"})));
        let frozen = call(addr, "POST", "/subjects/new/versions", Some(&user("")));
        assert_eq!(refused(&frozen), (422, 42205));
        let delete = call(addr, "DELETE", "/subjects/old-value", None);
        assert_eq!(refused(&delete), (422, 42205));
        assert_eq!(
            call(addr, "GET", "/subjects", None).json(),
            json!(["old-value"])
        );
        // A subject's own mode wins over the global one.
        let subject_mode = call(addr, "GET", "/mode/new", None);
        assert_eq!(refused(&subject_mode), (404, 40409));
        call(
            addr,
            "PUT",
            "/mode/new",
            Some(&json!({"mode": "READWRITE"})),
        );
        let answer = call(addr, "POST", "/subjects/new/versions", Some(&user("")));
        assert_eq!((answer.status, answer.json()), (200, json!({"id": 100})));
        assert_eq!(
            call(addr, "GET", "/mode/old-value?defaultToGlobal=true", None).json(),
            json!({"mode": "READONLY"})
        );
    }
    let (_broker, addr) = open(dir.path());
    assert_eq!(
        call(addr, "GET", "/mode", None).json(),
        json!({"mode": "READONLY"})
    );
    assert_eq!(
        call(addr, "GET", "/subjects/old-value/versions/latest", None).json()["version"],
        json!(5)
    );
    let answer = call(addr, "DELETE", "/mode/new", None);
    assert_eq!(
        (answer.status, answer.json()),
        (200, json!({"mode": "READWRITE"}))
    );
    let frozen = call(
        addr,
        "POST",
        "/subjects/new/versions",
        Some(&user(AGE_DEFAULT)),
    );
    assert_eq!(refused(&frozen), (422, 42205));
}

#[test]
fn referenced_versions_name_their_referrers_and_are_not_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    let address = json!({"schema":
        r#"{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}"#});
    call(addr, "POST", "/subjects/address/versions", Some(&address));
    let person = json!({
        "schema": r#"{"type":"record","name":"Person","fields":[{"name":"home","type":"Address"}]}"#,
        "references": [{"name": "Address", "subject": "address", "version": 1}],
    });
    let id = call(addr, "POST", "/subjects/person/versions", Some(&person)).json()["id"].clone();
    assert_eq!(
        call(
            addr,
            "GET",
            "/subjects/address/versions/1/referencedby",
            None
        )
        .json(),
        json!([id])
    );
    let missing = call(
        addr,
        "GET",
        "/subjects/address/versions/7/referencedby",
        None,
    );
    assert_eq!(refused(&missing), (404, 40402));
    let delete = call(addr, "DELETE", "/subjects/address/versions/1", None);
    assert_eq!(refused(&delete), (422, 42206));
    assert_eq!(
        call(addr, "GET", "/subjects/address/versions", None).json(),
        json!([1])
    );
}

// Typed topics bound to a subject, through the handle's own registry (no HTTP).

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Payment {
    id: i64,
    payer: String,
    memo: Option<String>,
}

const PAYMENT: &str = r#"{"type":"record","name":"Payment","namespace":"test","fields":[
    {"name":"id","type":"long"},
    {"name":"payer","type":"string"},
    {"name":"memo","type":["null","string"],"default":null}]}"#;

/// PAYMENT with a new required field (no default): BACKWARD refuses it.
const PAYMENT_WITH_CURRENCY: &str = r#"{"type":"record","name":"Payment","namespace":"test","fields":[
    {"name":"id","type":"long"},
    {"name":"payer","type":"string"},
    {"name":"memo","type":["null","string"],"default":null},
    {"name":"currency","type":"string"}]}"#;

fn payments() -> Vec<Payment> {
    (1..=3)
        .map(|id| Payment {
            id,
            payer: format!("payer-{id}"),
            memo: (id % 2 == 0).then(|| "even".to_owned()),
        })
        .collect()
}

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn a_bound_topic_writes_confluents_wire_format_and_its_readers_decode_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let topic = broker
        .topic::<Payment>("payments")
        .with_avro_schema(PAYMENT)
        .unwrap();
    topic
        .create(nanokafka::TopicConfig::default().partitions(1))
        .unwrap();
    let latest = broker.schemas().latest("payments-value").unwrap();
    let (subject, registered) = topic.schema().unwrap();
    assert_eq!(
        (subject, registered.id, registered.version),
        ("payments-value", latest.id, 1)
    );
    assert_eq!(
        broker.schemas().schema_by_id(latest.id).unwrap().schema,
        latest.schema
    );

    for payment in &payments() {
        topic.produce(payment).unwrap();
    }

    broker.join_group("payments", "raw", "raw-1").unwrap();
    broker.join_group("payments", "poller", "poller-1").unwrap();
    let raw = broker
        .poll_batch_raw("payments", "raw", "raw-1", 10, WAIT)
        .unwrap();
    assert_eq!(raw.len(), 3);
    for record in &raw {
        assert_eq!(record.value[0], 0, "the magic byte");
        assert_eq!(record.value[1..5], latest.id.to_be_bytes(), "the schema id");
    }
    let polled = topic.poll_batch("poller", "poller-1", 10, WAIT).unwrap();
    let values: Vec<Payment> = polled.into_iter().map(|r| r.value).collect();
    assert_eq!(values, payments());
    let mut consumer = topic.consumer("consumer", "consumer-1").unwrap();
    let consumed = consumer.poll_batch(10, WAIT).unwrap();
    let values: Vec<Payment> = consumed.into_iter().map(|r| r.value).collect();
    assert_eq!(values, payments());

    // A value without the header, and one with an id the registry does not have, do not
    // decode: the typed readers' `Decode`, naming the record and why.
    broker.produce_raw("payments", None, vec![1, 2, 3]).unwrap();
    broker
        .produce_raw("payments", None, vec![0, 0, 0, 0x30, 0x39, 2])
        .unwrap();
    let error = consumer.poll_batch(10, WAIT).unwrap_err();
    assert!(
        matches!(error, nanokafka::Error::Decode { offset: 3, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("wire format"), "{error}");
    consumer.commit_offset(0, 3).unwrap();
    let error = consumer.poll_batch(10, WAIT).unwrap_err();
    assert!(
        matches!(error, nanokafka::Error::Decode { offset: 4, .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("schema id 12345"), "{error}");
}

#[test]
fn a_bind_the_subjects_level_refuses_fails_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let topic = broker
        .topic::<Payment>("ledger")
        .with_avro_schema(PAYMENT)
        .unwrap();
    topic
        .create(nanokafka::TopicConfig::default().partitions(1))
        .unwrap();
    topic.produce(&payments()[0]).unwrap();
    let log_end = || broker.stats().unwrap().topics["ledger"].partitions[0].log_end_offset;
    assert_eq!(log_end(), 1);

    let refused = broker
        .topic::<Payment>("ledger")
        .with_avro_schema(PAYMENT_WITH_CURRENCY)
        .unwrap_err();
    let nanokafka::Error::Schema { code, message } = &refused else {
        panic!("{refused:?}");
    };
    assert_eq!(*code, 409);
    assert!(message.contains("BACKWARD"), "the level: {message}");
    assert!(message.contains("currency"), "the field: {message}");
    assert!(refused.to_string().contains("409"), "{refused}");

    let latest = broker.schemas().latest("ledger-value").unwrap();
    assert_eq!(latest.version, 1, "the subject still has one version");
    assert_eq!(log_end(), 1, "nothing written");

    // The registry's other refusals carry Confluent's codes too.
    let invalid = broker
        .topic::<Payment>("other")
        .with_avro_schema("{not json");
    assert!(
        matches!(invalid, Err(nanokafka::Error::Schema { code: 42201, .. })),
        "{invalid:?}"
    );
    let missing = broker.schemas().latest("nothing-value").unwrap_err();
    assert!(
        matches!(missing, nanokafka::Error::Schema { code: 40401, .. }),
        "{missing:?}"
    );
}

#[test]
fn the_async_topic_binds_produces_and_streams_by_schema_id() {
    use futures::StreamExt;

    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    let bus = broker.async_handle();
    let read = std::thread::spawn(move || {
        actix::System::new().block_on(async move {
            let topic = bus
                .topic::<Payment>("transfers")
                .with_avro_schema(PAYMENT)
                .await
                .unwrap();
            topic
                .create(nanokafka::TopicConfig::default().partitions(1))
                .await
                .unwrap();
            for payment in &payments() {
                topic.produce_keyed("k", payment).await.unwrap();
            }
            let registered = bus.schemas().latest("transfers-value").await.unwrap();
            assert_eq!(topic.schema().unwrap().1.id, registered.id);

            let mut stream = topic.stream("audit", "audit-1").await.unwrap();
            let mut read = Vec::new();
            while read.len() < 3 {
                let record = tokio::time::timeout(WAIT, stream.next())
                    .await
                    .expect("a record within the wait")
                    .unwrap()
                    .unwrap();
                read.push(record.value);
            }
            stream.leave().await.unwrap();
            read
        })
    });
    assert_eq!(read.join().unwrap(), payments());
}

fn protobuf(schema: &str, references: Value) -> Value {
    json!({"schemaType": "PROTOBUF", "schema": schema, "references": references})
}

const ADDRESS_PROTO: &str = r#"syntax = "proto3";
package geo;
message Address { string city = 1; }
"#;

const USER_PROTO: &str = r#"syntax = "proto3";
package shop;
import "address.proto";
import "google/protobuf/timestamp.proto";
message User {
  string name = 1;
  int32 age = 2;
  geo.Address home = 3;
  google.protobuf.Timestamp joined = 4;
}
"#;

#[test]
fn protobuf_schemas_register_with_imports_and_incompatible_ones_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = open(dir.path());
    let address = protobuf(ADDRESS_PROTO, json!([]));
    let answer = call(
        addr,
        "POST",
        "/subjects/address.proto/versions",
        Some(&address),
    );
    assert_eq!((answer.status, answer.json()), (200, json!({"id": 1})));

    // The import resolves by the reference's name; the well-known one needs none.
    let reference = json!([{"name": "address.proto", "subject": "address.proto", "version": 1}]);
    let without = protobuf(USER_PROTO, json!([]));
    let answer = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&without),
    );
    assert_eq!(refused(&answer), (422, 42201));
    assert!(
        answer.json()["message"]
            .as_str()
            .unwrap()
            .contains("address.proto"),
        "{:?}",
        answer.json()
    );
    let user = protobuf(USER_PROTO, reference.clone());
    let answer = call(addr, "POST", "/subjects/users-value/versions", Some(&user));
    assert_eq!((answer.status, answer.json()), (200, json!({"id": 2})));
    let latest = call(addr, "GET", "/subjects/users-value/versions/latest", None).json();
    assert_eq!(latest["schemaType"], json!("PROTOBUF"));
    assert_eq!(latest["references"], reference);
    assert_eq!(latest["schema"], json!(USER_PROTO.trim()));
    // `format=serialized`, as Confluent's Protobuf deserializer asks: the file's descriptor.
    for path in [
        "/schemas/ids/2?format=serialized",
        "/subjects/users-value/versions/1?format=serialized",
    ] {
        let serialized = call(addr, "GET", path, None).json();
        let serialized = serialized["schema"].as_str().unwrap().to_owned();
        use base64::Engine as _;
        let descriptor = base64::engine::general_purpose::STANDARD
            .decode(&serialized)
            .unwrap();
        let has = |needle: &[u8]| descriptor.windows(needle.len()).any(|w| w == needle);
        assert!(
            has(b"address.proto") && has(b"User"),
            "{path}: {serialized}"
        );
    }
    let found = call(addr, "POST", "/subjects/users-value", Some(&user)).json();
    assert_eq!((&found["version"], &found["id"]), (&json!(1), &json!(2)));

    // BACKWARD: field 2 changing from int32 to string is refused, with the message and field.
    let incompatible = protobuf(
        &USER_PROTO.replace("int32 age", "string age"),
        reference.clone(),
    );
    let answer = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&incompatible),
    );
    assert_eq!(refused(&answer), (409, 409));
    let message = answer.json()["message"].as_str().unwrap().to_owned();
    assert!(
        message.contains("message User: field 2 (age) changed type from int32 to string"),
        "{message}"
    );
    // Removing a field is compatible; so is a wire-compatible type (int32 to int64).
    let compatible = protobuf(
        &USER_PROTO
            .replace("int32 age = 2;", "int64 age = 2;")
            .replace("string name = 1;", ""),
        reference,
    );
    let answer = call(
        addr,
        "POST",
        "/subjects/users-value/versions",
        Some(&compatible),
    );
    assert_eq!((answer.status, answer.json()), (200, json!({"id": 3})));
    assert_eq!(
        call(addr, "GET", "/subjects/users-value/versions", None).json(),
        json!([1, 2])
    );
    let not_proto = protobuf("message {", json!([]));
    let answer = call(addr, "POST", "/subjects/bad/versions", Some(&not_proto));
    assert_eq!(refused(&answer), (422, 42201));
}
