//! The writes: refused unless enabled and confirmed, each done through the broker as its
//! API would; a reset refused while the group has live members; HTTP Basic when the
//! listener has SASL/PLAIN credentials.

use base64::Engine as _;
use nanokafka::{ListenerConfig, NanoKafka, ScramCredential, ScramMechanism, ScramStore};
use serde_json::json;

use super::http::{get, request};
use super::{offsets, topic, with_console};

fn post(addr: std::net::SocketAddr, path: &str, body: serde_json::Value) -> super::http::Answer {
    request(addr, "POST", path, Some(&body.to_string()), &[])
}

#[test]
fn writes_are_refused_unless_enabled() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder());
    broker.create_topic("t", topic(1)).unwrap();
    let confirmed = json!({"confirm": true});
    for (method, path, body) in [
        (
            "POST",
            "/api/topics",
            json!({"name": "x", "partitions": 1, "confirm": true}),
        ),
        (
            "PATCH",
            "/api/topics/t",
            json!({"config": {"retention.ms": "1000"}, "confirm": true}),
        ),
        ("DELETE", "/api/topics/t", confirmed.clone()),
        (
            "POST",
            "/api/topics/t/records",
            json!({"value": "v", "confirm": true}),
        ),
        (
            "POST",
            "/api/topics/t/partitions/0/delete-records",
            json!({"before": 0, "confirm": true}),
        ),
        (
            "POST",
            "/api/groups/g/reset",
            json!({"topic": "t", "to": "earliest", "confirm": true}),
        ),
    ] {
        let answer = request(addr, method, path, Some(&body.to_string()), &[]);
        assert_eq!(answer.status, 403, "{method} {path}");
        assert_eq!(
            answer.error(),
            "writes are disabled; start the console with --console-writes"
        );
    }
    assert_eq!(broker.list_topics().unwrap().len(), 1);
    assert_eq!(
        broker.stats().unwrap().topics["t"].partitions[0].log_end_offset,
        0
    );
}

#[test]
fn each_write_needs_a_confirmation_and_does_what_it_says() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder().console_writes(true));
    let create = json!({"name": "t", "partitions": 2, "config": {"retention.ms": "60000"}});
    let answer = post(addr, "/api/topics", create.clone());
    assert_eq!(
        (answer.status, answer.error().contains("confirm")),
        (400, true)
    );
    assert!(broker.list_topics().unwrap().is_empty());

    let mut confirmed = create;
    confirmed["confirm"] = json!(true);
    assert_eq!(post(addr, "/api/topics", confirmed.clone()).status, 201);
    let config = broker.describe_topic("t").unwrap();
    assert_eq!((config.partitions, config.retention_ms), (2, Some(60_000)));
    assert_eq!(post(addr, "/api/topics", confirmed).status, 409);

    let patch = json!({"config": {"retention.ms": "120000"}, "confirm": true}).to_string();
    let answer = request(addr, "PATCH", "/api/topics/t", Some(&patch), &[]);
    assert_eq!(answer.status, 200);
    assert_eq!(
        broker.describe_topic("t").unwrap().retention_ms,
        Some(120_000)
    );
    let bad = json!({"config": {"retention.ms": "soon"}, "confirm": true}).to_string();
    assert_eq!(
        request(addr, "PATCH", "/api/topics/t", Some(&bad), &[]).status,
        400
    );

    for i in 0..3 {
        let produced = post(
            addr,
            "/api/topics/t/records",
            json!({"partition": 1, "key": "k", "value": format!("v{i}"), "headers": {"h": "x"}, "confirm": true}),
        );
        assert_eq!(produced.json(), json!({"partition": 1, "offset": i}));
    }
    let page = get(addr, "/api/topics/t/partitions/1/records?offset=0").json();
    assert_eq!(offsets(&page), [0, 1, 2]);
    assert_eq!(page["records"][2]["value"]["utf8"], "v2");
    assert_eq!(page["records"][2]["headers"][0]["key"], "h");

    let deleted = post(
        addr,
        "/api/topics/t/partitions/1/delete-records",
        json!({"before": 2, "confirm": true}),
    );
    assert_eq!(deleted.json(), json!({"log_start": 2}));

    let answer = request(addr, "DELETE", "/api/topics/t", Some("{}"), &[]);
    assert_eq!(answer.status, 400);
    let answer = request(
        addr,
        "DELETE",
        "/api/topics/t",
        Some(r#"{"confirm": true}"#),
        &[],
    );
    assert_eq!(answer.status, 200);
    assert!(broker.list_topics().unwrap().is_empty());
    assert_eq!(
        request(
            addr,
            "DELETE",
            "/api/topics/t",
            Some(r#"{"confirm": true}"#),
            &[]
        )
        .status,
        404
    );
}

#[test]
fn offsets_are_reset_only_while_the_group_has_no_live_members() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder().console_writes(true));
    broker.create_topic("t", topic(2)).unwrap();
    for p in 0..2 {
        let records = (0..5)
            .map(|i| nanokafka::ProduceRecord {
                key: None,
                value: vec![i],
            })
            .collect();
        broker.produce_batch_raw("t", Some(p), records).unwrap();
    }
    broker.join_group("t", "g", "m1").unwrap();
    let reset = |body: serde_json::Value| post(addr, "/api/groups/g/reset", body);
    let answer = reset(json!({"topic": "t", "to": "latest", "confirm": true}));
    assert_eq!(answer.status, 409);
    broker.leave_group("t", "g", "m1").unwrap();

    let answer = reset(json!({"topic": "t", "to": "latest", "confirm": true}));
    assert_eq!(
        answer.json(),
        json!({"offsets": [{"partition": 0, "offset": 5}, {"partition": 1, "offset": 5}]})
    );
    let answer = reset(
        json!({"topic": "t", "to": "offset", "value": 2, "partitions": [1], "confirm": true}),
    );
    assert_eq!(
        answer.json(),
        json!({"offsets": [{"partition": 1, "offset": 2}]})
    );
    let answer = reset(
        json!({"topic": "t", "to": "offset", "value": 99, "partitions": [0], "confirm": true}),
    );
    assert_eq!(
        answer.json(),
        json!({"offsets": [{"partition": 0, "offset": 5}]})
    );
    assert_eq!(broker.lag("t", "g").unwrap(), [(0, 0), (1, 3)].into());
    let answer = reset(json!({"topic": "t", "to": "earliest", "confirm": true}));
    assert_eq!(answer.status, 200);
    assert_eq!(broker.lag("t", "g").unwrap(), [(0, 5), (1, 5)].into());
    for bad in [
        json!({"topic": "t", "to": "offset", "confirm": true}),
        json!({"topic": "t", "to": "sideways", "confirm": true}),
        json!({"topic": "t", "to": "earliest"}),
    ] {
        assert_eq!(reset(bad.clone()).status, 400, "{bad}");
    }
    assert_eq!(
        reset(json!({"topic": "t", "to": "earliest", "partitions": [9], "confirm": true})).status,
        404
    );
    assert_eq!(
        reset(json!({"topic": "nope", "to": "earliest", "confirm": true})).status,
        404
    );
}

/// An `Authorization: Basic` header for `user:password`.
fn basic(user_password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_password)
    )
}

#[test]
fn with_sasl_scram_the_console_asks_for_a_scram_user() {
    let dir = tempfile::tempdir().unwrap();
    let path = ScramStore::path(dir.path());
    let mut store = ScramStore::load_or_new(&path).unwrap();
    let salt = ScramStore::random_salt().unwrap();
    let mechanism = ScramMechanism::ScramSha512;
    let credential = ScramCredential::from_password(mechanism, b"s3cret", &salt, 4096);
    store.upsert("alice", mechanism, credential).unwrap();
    store.save(&path).unwrap();
    let listener = ListenerConfig::new("127.0.0.1:0").sasl_scram();
    let (_broker, addr) = with_console(dir.path(), NanoKafka::builder().listener(listener));
    let overview = |authorization: &[(&str, &str)]| {
        request(addr, "GET", "/api/overview", None, authorization).status
    };
    assert_eq!(overview(&[]), 401);
    // Twice: the second is admitted by the remembered login.
    for _ in 0..2 {
        assert_eq!(overview(&[("Authorization", &basic("alice:s3cret"))]), 200);
    }
    for wrong in ["alice:s3cre", "bob:s3cret", "alice:", "alice:s3cret!"] {
        assert_eq!(
            overview(&[("Authorization", &basic(wrong))]),
            401,
            "{wrong}"
        );
    }
    // The wrong logins pause other checks, not the login already admitted.
    assert_eq!(overview(&[("Authorization", &basic("alice:s3cret"))]), 200);
}

#[test]
fn with_sasl_plain_every_route_asks_for_the_same_user() {
    let dir = tempfile::tempdir().unwrap();
    let listener = ListenerConfig::new("127.0.0.1:0").sasl_plain("alice", "s3cret");
    let (_broker, addr) = with_console(dir.path(), NanoKafka::builder().listener(listener));
    for path in ["/", "/assets/app.js", "/api/overview", "/api/nope"] {
        let answer = get(addr, path);
        assert_eq!(answer.status, 401, "{path}");
        assert_eq!(
            answer.header("www-authenticate"),
            Some("Basic realm=\"nanokafka\"")
        );
    }
    for wrong in ["alice:s3cre", "alice:s3cret!", "bob:s3cret", ":"] {
        let answer = request(
            addr,
            "GET",
            "/api/overview",
            None,
            &[("Authorization", &basic(wrong))],
        );
        assert_eq!(answer.status, 401, "{wrong}");
    }
    let answer = request(
        addr,
        "GET",
        "/api/overview",
        None,
        &[("Authorization", &basic("alice:s3cret"))],
    );
    assert_eq!(answer.status, 200);
}
