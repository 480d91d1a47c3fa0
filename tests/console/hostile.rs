//! Input a browser would not send: every bad parameter a 400 with a JSON error, huge offsets
//! answered with what exists, oversized URLs and bodies refused, and the broker unchanged.

use nanokafka::NanoKafka;
use serde_json::json;

use super::http::{get, raw, request};
use super::{manual_clock, offsets, produce_raw, topic, with_console};

#[test]
fn bad_parameters_are_400s_and_huge_offsets_answer_the_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("t", topic(1)).unwrap();
    produce_raw(&broker, &clock, "t", &[b"a", b"b"]);
    let base = "/api/topics/t/partitions/0/records";
    for bad in [
        "",
        "?offset=-1",
        "?offset=1&newest=true",
        "?offset=1&timestamp=5",
        "?offset=abc",
        "?offset=99999999999999999999999",
        "?offset=0&limit=0",
        "?offset=0&limit=501",
        "?offset=0&max_bytes=8388609",
        "?offset=0&max_field_bytes=0",
        "?offset=%zz",
    ] {
        let answer = get(addr, &format!("{base}{bad}"));
        assert_eq!(answer.status, 400, "{bad}");
        assert!(!answer.error().is_empty(), "{bad}");
    }
    let page = get(addr, &format!("{base}?offset={}", u64::MAX)).json();
    assert_eq!(
        (
            offsets(&page),
            page["log_start"].clone(),
            page["log_end"].clone(),
            page["next_offset"].clone()
        ),
        (vec![], json!(0), json!(2), json!(2))
    );
    assert_eq!(
        get(addr, "/api/topics/t/partitions/7/records?offset=0").status,
        404
    );
    assert_eq!(
        get(addr, "/api/topics/t/partitions/-1/records?offset=0").status,
        400
    );
    assert_eq!(
        get(
            addr,
            "/api/topics/t/partitions/99999999999/records?offset=0"
        )
        .status,
        400
    );
    assert_eq!(get(addr, "/api/topics/n%zzope").status, 404);
    assert_eq!(get(addr, "/api/topics/%F0%28%8C%28").status, 404);
    // Nothing changed.
    assert_eq!(
        broker.stats().unwrap().topics["t"].partitions[0].log_end_offset,
        2
    );
}

#[test]
fn oversized_urls_and_bodies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder().console_writes(true));
    let long = format!("/api/overview?pad={}", "x".repeat(9 << 10));
    let answer = get(addr, &long);
    assert!(
        answer.status == 414 || answer.status == 431,
        "{}",
        answer.status
    );
    let body = format!(
        r#"{{"name": "big", "partitions": 1, "confirm": true, "pad": "{}"}}"#,
        "x".repeat(1 << 20)
    );
    let answer = request(addr, "POST", "/api/topics", Some(&body), &[]);
    assert_eq!(answer.status, 413);
    let answer = request(addr, "POST", "/api/topics", Some("{not json"), &[]);
    assert_eq!(answer.status, 400);
    assert!(answer.error().contains("JSON"));
    assert!(broker.list_topics().unwrap().is_empty());
}

#[test]
fn a_method_a_route_does_not_take_is_a_json_405() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = with_console(dir.path(), NanoKafka::builder());
    for (method, path) in [
        ("POST", "/api/overview"),
        ("PUT", "/api/topics/t"),
        ("DELETE", "/"),
    ] {
        let answer = request(addr, method, path, Some("{}"), &[]);
        assert_eq!(answer.status, 405, "{method} {path}");
        assert!(answer.error().contains(method), "{method} {path}");
    }
}

#[test]
fn a_compressed_batch_cannot_make_a_page_larger_than_its_byte_budget() {
    use super::client_batch::{encode, BatchOptions, ClientRecord};
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder());
    broker.create_topic("t", topic(1)).unwrap();
    // 20 values of 1,000 KiB of zeros: ~20 MB shown from a batch of a few tens of KB.
    let records: Vec<ClientRecord> = (0..20)
        .map(|_| ClientRecord {
            timestamp: 1,
            value: Some(vec![0u8; 1000 << 10].into()),
            ..ClientRecord::default()
        })
        .collect();
    let options = BatchOptions {
        compression: kafka_protocol::records::Compression::Gzip,
        producer: None,
    };
    broker
        .produce_kafka_batch("t", 0, encode(&records, options))
        .unwrap();
    let answer = get(
        addr,
        "/api/topics/t/partitions/0/records?offset=0&limit=500&max_field_bytes=1048576",
    );
    // The page stops after the record whose shown bytes pass the 1 MiB budget: two records,
    // each rendered as text (a zero byte is six in JSON) and hex. Unbounded, 163 MB.
    assert!(answer.body.len() < 20 << 20, "{} bytes", answer.body.len());
    let page = answer.json();
    let shown = offsets(&page).len() as u64;
    assert!((1..=2).contains(&shown), "{shown}");
    assert_eq!(page["next_offset"], shown);
}

/// What a page of another site could make the operator's browser send: a request to a name
/// it rebound to 127.0.0.1, a write from its own origin, a form or `text/plain` body (which
/// needs no CORS preflight). Each is refused and changes nothing; the console's own page and
/// scripts without an `Origin` are served.
#[test]
fn requests_another_site_could_make_a_browser_send_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder().console_writes(true));
    let create = r#"{"name": "t", "partitions": 1, "confirm": true}"#;
    let rebound = raw(
        addr,
        "GET /api/overview HTTP/1.1\r\nHost: evil.example:8080",
        "",
    );
    assert_eq!(rebound.status, 403);
    assert!(
        rebound.error().contains("evil.example"),
        "{}",
        rebound.error()
    );
    let foreign = [("Origin", "http://evil.example")];
    let answer = request(addr, "POST", "/api/topics", Some(create), &foreign);
    assert_eq!(answer.status, 403);
    let null_origin = [("Origin", "null")];
    let answer = request(addr, "POST", "/api/topics", Some(create), &null_origin);
    assert_eq!(answer.status, 403);
    let host = format!("Host: {addr}");
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let head = format!("POST /api/topics HTTP/1.1\r\n{host}\r\nContent-Type: {content_type}");
        let answer = raw(addr, &head, create);
        assert_eq!(answer.status, 415, "{content_type}");
    }
    assert!(broker.list_topics().unwrap().is_empty());
    // The console's own origin, and a script that sends none, are served.
    let own = format!("http://{addr}");
    let answer = request(
        addr,
        "POST",
        "/api/topics",
        Some(create),
        &[("Origin", &own)],
    );
    assert_eq!(
        answer.status,
        201,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    let localhost = raw(
        addr,
        &format!(
            "GET /api/overview HTTP/1.1\r\nHost: localhost:{}",
            addr.port()
        ),
        "",
    );
    assert_eq!(localhost.status, 200);
    assert!(broker.list_topics().unwrap().contains_key("t"));
}
