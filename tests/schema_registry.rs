//! The schema registry's REST API (`schema-registry` feature) over real HTTP, as Confluent's
//! clients call it: registration and its ids, lookups, versions, compatibility levels and
//! checks, soft and permanent deletes, Confluent's error codes, the `_schemas` records, and
//! ids and versions kept across a reopen of the data directory. Real clients' serializers are
//! in `tests/clients/schema_registry.rs`.
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
        json!(["AVRO", "JSON"])
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
