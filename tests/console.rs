//! The web console's server (`console` feature) over real HTTP: a broker built with
//! `console("127.0.0.1:0")`, asked with a small HTTP/1.1 client (`console/http.rs`). The
//! read API here; the writes, authentication, hostile input and Kafka clients' groups in the
//! modules beside it.
#![cfg(feature = "console")]

#[path = "common/client_batch.rs"]
mod client_batch;
#[path = "common/clients.rs"]
mod clients;
#[path = "console/hostile.rs"]
mod hostile;
#[path = "console/http.rs"]
mod http;
#[path = "console/kafka_groups.rs"]
mod kafka_groups;
#[path = "console/schemas.rs"]
mod schemas;
#[path = "common/tls.rs"]
mod tls_certs;
#[path = "console/writes.rs"]
mod writes;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use nanokafka::clock::ManualClock;
use nanokafka::{FsyncPolicy, Header, NanoKafka, NanoKafkaBuilder, TopicConfig};
use serde_json::{json, Value};

use http::get;

/// The clock every test broker starts on (ms since the epoch).
const T0: u64 = 1_700_000_000_000;

/// A broker in `dir` with a console on a free loopback port, from `builder`.
fn with_console(dir: &std::path::Path, builder: NanoKafkaBuilder) -> (NanoKafka, SocketAddr) {
    let broker = builder
        .data_dir(dir)
        .console("127.0.0.1:0")
        .build()
        .unwrap();
    let addr = broker.console_addr().expect("the console's address");
    (broker, addr)
}

fn manual_clock() -> (ManualClock, NanoKafkaBuilder) {
    let clock = ManualClock::new(T0);
    let builder = NanoKafka::builder().clock(Arc::new(clock.clone()));
    (clock, builder)
}

fn topic(partitions: u32) -> TopicConfig {
    TopicConfig {
        partitions,
        ..TopicConfig::default()
    }
}

/// Produces `values` raw to partition 0, one a millisecond from the clock's time.
fn produce_raw(broker: &NanoKafka, clock: &ManualClock, name: &str, values: &[&[u8]]) {
    for value in values {
        broker
            .produce_batch_raw(
                name,
                Some(0),
                vec![nanokafka::ProduceRecord {
                    key: Some(b"k".to_vec()),
                    value: value.to_vec(),
                }],
            )
            .unwrap();
        clock.advance(1);
    }
}

/// `group` with its committed offset on `partition` at `next` (the next record to read) and
/// no live member.
fn committed(broker: &NanoKafka, name: &str, group: &str, partition: u32, next: u64) {
    broker.join_group(name, group, "m").unwrap();
    // The blocking handle commits the offset of the last record processed.
    broker.commit(name, group, partition, next - 1).unwrap();
    broker.leave_group(name, group, "m").unwrap();
}

fn offsets(page: &Value) -> Vec<u64> {
    page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect()
}

#[test]
fn the_console_is_off_unless_asked_and_a_bare_port_is_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::open(dir.path()).unwrap();
    assert_eq!(broker.console_addr(), None);
    broker.shutdown().unwrap();
    for port_only in ["0", ":0"] {
        let broker = NanoKafka::builder()
            .data_dir(dir.path())
            .console(port_only)
            .build()
            .unwrap();
        let addr = broker.console_addr().expect("bound");
        assert!(addr.ip().is_loopback(), "{port_only}: {addr}");
        assert_eq!(http::get(addr, "/api/overview").status, 200);
        broker.shutdown().unwrap();
    }
    for bad in ["127.0.0.1:", "localhost", ":", ":x80"] {
        let refused = NanoKafka::builder()
            .data_dir(dir.path())
            .console(bad)
            .build()
            .unwrap_err();
        assert!(
            matches!(
                refused,
                nanokafka::Error::InvalidArgument {
                    name: "console",
                    ..
                }
            ),
            "{bad}: {refused}"
        );
    }
    let refused = NanoKafka::builder()
        .data_dir(dir.path())
        .console_writes(true)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            refused,
            nanokafka::Error::InvalidArgument {
                name: "console_writes",
                ..
            }
        ),
        "{refused}"
    );
    let refused = NanoKafka::builder()
        .kafka_bootstrap("127.0.0.1:1")
        .console("127.0.0.1:0")
        .build()
        .unwrap_err();
    assert!(
        matches!(
            refused,
            nanokafka::Error::InvalidArgument {
                name: "console",
                ..
            }
        ),
        "{refused}"
    );
    // A taken port fails the build, with nothing left running (the directory opens again).
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let refused = NanoKafka::builder()
        .data_dir(dir.path())
        .console(taken.local_addr().unwrap().to_string())
        .build()
        .unwrap_err();
    assert!(refused.to_string().contains("web console"), "{refused}");
    NanoKafka::open(dir.path()).unwrap().shutdown().unwrap();
}

#[test]
fn shutdown_stops_the_console() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = with_console(dir.path(), NanoKafka::builder());
    assert_eq!(get(addr, "/api/overview").status, 200);
    broker.shutdown().unwrap();
    assert!(std::net::TcpStream::connect(addr).is_err());
}

/// With TLS on the broker, the console serves HTTPS to a client trusting the CA, and the
/// listener and the console both speak TLS; plain HTTP gets no page.
#[test]
fn with_tls_the_console_serves_https() {
    let dir = tempfile::tempdir().unwrap();
    let certs = tls_certs::Certs::new();
    let (_broker, addr) = with_console(dir.path(), NanoKafka::builder().tls(certs.server(false)));
    let overview = http::get_https(addr, &certs.ca, "/api/overview");
    assert_eq!(overview.status, 200);
    assert!(
        overview.json()["topics"].is_array(),
        "{:?}",
        overview.json()
    );
    let plain = std::panic::catch_unwind(|| get(addr, "/api/overview"));
    assert!(
        plain.is_err() || plain.is_ok_and(|a| a.status != 200),
        "plain HTTP was served"
    );
}

#[test]
fn pages_are_served_and_unknown_routes_are_json_404s() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = with_console(dir.path(), NanoKafka::builder());
    let index = get(addr, "/");
    assert_eq!(index.status, 200);
    assert!(index
        .header("content-type")
        .unwrap()
        .starts_with("text/html"));
    assert!(String::from_utf8_lossy(&index.body).contains("app.js"));
    for (asset, kind) in [
        ("app.js", "text/javascript"),
        ("app.css", "text/css"),
        ("vendor/uplot.iife.min.js", "text/javascript"),
        ("vendor/uplot.min.css", "text/css"),
    ] {
        let answer = get(addr, &format!("/assets/{asset}"));
        assert_eq!(answer.status, 200, "{asset}");
        assert!(answer.header("content-type").unwrap().starts_with(kind));
    }
    for missing in [
        "/assets/../Cargo.toml",
        "/assets/nope.js",
        "/api/nope",
        "/nope",
    ] {
        let answer = get(addr, missing);
        assert_eq!(answer.status, 404, "{missing}");
        assert!(!answer.error().is_empty());
    }
}

#[test]
fn the_overview_reports_topics_groups_and_the_broker() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder.listen("127.0.0.1:0"));
    broker.create_topic("orders", topic(2)).unwrap();
    broker.create_topic("empty", topic(1)).unwrap();
    produce_raw(&broker, &clock, "orders", &[b"a", b"b", b"c"]);
    committed(&broker, "orders", "billing", 0, 1);
    clock.advance(5_000);

    let overview = get(addr, "/api/overview").json();
    let b = &overview["broker"];
    assert_eq!(b["uptime_ms"], 5_003);
    assert_eq!(b["data_dir"], dir.path().display().to_string());
    assert_eq!(b["listener"], broker.listener_addr().unwrap().to_string());
    assert_eq!(b["connections"], 0);
    assert_eq!(b["console_writes"], false);
    // As `nanokafka serve --fsync` takes it.
    assert_eq!(b["fsync"], "interval-ms 1000");
    let orders = overview["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "orders")
        .unwrap();
    assert_eq!(orders["partitions"], 2);
    assert_eq!(orders["records"], 3);
    assert!(orders["size_bytes"].as_u64().unwrap() > 0);
    assert_eq!(orders["records_per_sec"], Value::Null);
    assert_eq!(
        overview["groups"],
        json!([{"group": "billing", "topics": ["orders"], "members": 0, "lag": 2}])
    );
}

#[test]
fn the_overview_names_the_fsync_policy_as_serve_takes_it() {
    for (policy, shown) in [
        (FsyncPolicy::Always, "always"),
        (FsyncPolicy::Never, "never"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_broker, addr) = with_console(dir.path(), NanoKafka::builder().fsync(policy));
        assert_eq!(get(addr, "/api/overview").json()["broker"]["fsync"], shown);
    }
}

#[test]
fn a_topic_shows_its_partitions_config_and_groups() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("orders", topic(2)).unwrap();
    produce_raw(&broker, &clock, "orders", &[b"a", b"b", b"c"]);
    broker.join_group("orders", "billing", "m1").unwrap();
    broker.commit("orders", "billing", 0, 1).unwrap();

    let t = get(addr, "/api/topics/orders").json();
    assert_eq!(t["name"], "orders");
    assert_eq!(t["config"]["cleanup.policy"], "delete");
    assert!(t["config"]["retention.ms"].is_string());
    assert_eq!(t["partitions"][0]["log_start"], 0);
    assert_eq!(t["partitions"][0]["log_end"], 3);
    assert_eq!(t["partitions"][0]["segments"], 1);
    assert_eq!(t["partitions"][1]["log_end"], 0);
    assert_eq!(
        t["groups"],
        json!([{"group": "billing", "lag": {"0": 1, "1": 0}, "committed": {"0": 2}}])
    );
    assert!(t["throughput"].is_array());
    assert_eq!(get(addr, "/api/topics/nope").status, 404);

    let groups = get(addr, "/api/groups").json();
    assert_eq!(
        groups,
        json!([{"group": "billing", "topics": ["orders"], "members": 1, "generation": 1, "lag": 1}])
    );
    let g = get(addr, "/api/groups/billing").json();
    assert_eq!(g["state"], "Stable");
    assert_eq!(g["generation"], 1);
    assert_eq!(g["members"][0]["member_id"], "m1");
    assert_eq!(g["members"][0]["partitions"].as_array().unwrap().len(), 2);
    assert_eq!(
        g["offsets"][0],
        json!({"topic": "orders", "partition": 0, "committed": 2, "log_end": 3, "lag": 1})
    );
    assert_eq!(g["offsets"][1]["committed"], Value::Null);
    assert!(g["lag_history"].is_array());
    assert_eq!(get(addr, "/api/groups/nobody").status, 404);
}

#[test]
fn records_are_read_by_offset_timestamp_and_newest_first() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("t", topic(1)).unwrap();
    let values: Vec<Vec<u8>> = (0..10).map(|i| format!("v{i}").into_bytes()).collect();
    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    produce_raw(&broker, &clock, "t", &values);
    let base = "/api/topics/t/partitions/0/records";

    let page = get(addr, &format!("{base}?offset=3&limit=4")).json();
    assert_eq!(offsets(&page), [3, 4, 5, 6]);
    assert_eq!(page["next_offset"], 7);
    assert_eq!(
        (page["log_start"].clone(), page["log_end"].clone()),
        (json!(0), json!(10))
    );
    assert_eq!(page["records"][0]["timestamp"], T0 + 3);
    assert_eq!(page["records"][0]["value"]["utf8"], "v3");
    assert_eq!(page["records"][0]["key"]["utf8"], "k");

    // The first record at or after the timestamp, through the time index.
    let page = get(addr, &format!("{base}?timestamp={}&limit=2", T0 + 7)).json();
    assert_eq!(offsets(&page), [7, 8]);
    let page = get(addr, &format!("{base}?timestamp={}", T0 + 60_000)).json();
    assert_eq!(
        (offsets(&page), page["next_offset"].clone()),
        (vec![], json!(10))
    );

    let page = get(addr, &format!("{base}?newest=true&limit=3")).json();
    assert_eq!(offsets(&page), [9, 8, 7]);

    // Following: at the log end an empty page comes back at once, then the new record.
    let page = get(addr, &format!("{base}?offset=10")).json();
    assert_eq!(
        (offsets(&page), page["next_offset"].clone()),
        (vec![], json!(10))
    );
    produce_raw(&broker, &clock, "t", &[b"late"]);
    let page = get(addr, &format!("{base}?offset=10")).json();
    assert_eq!(
        (offsets(&page), page["next_offset"].clone()),
        (vec![10], json!(11))
    );

    // Below the log start reads from it; the byte budget bounds a page (one batch at least).
    broker.delete_records("t", 0, 4).unwrap();
    let page = get(addr, &format!("{base}?offset=0&limit=2")).json();
    assert_eq!(offsets(&page), [4, 5]);
    let page = get(addr, &format!("{base}?offset=4&max_bytes=1")).json();
    assert_eq!(offsets(&page), [4]);
}

#[test]
fn fields_are_rendered_as_text_json_messagepack_and_hex_with_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder.max_record_bytes(11 << 20));
    broker.create_topic("t", topic(1)).unwrap();
    broker.produce("t", &json!({"id": 7})).unwrap(); // MessagePack, as typed produces write
    broker
        .produce_raw("t", None, br#"{"a": [1, 2]}"#.to_vec())
        .unwrap();
    broker
        .produce_raw("t", None, vec![0xff, 0x00, 0x41])
        .unwrap();
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    broker
        .produce_raw_with_headers(
            "t",
            None,
            b"traced",
            &[
                Header::new("traceparent", traceparent),
                Header {
                    key: "null".into(),
                    value: None,
                },
            ],
        )
        .unwrap();
    broker.produce_raw("t", None, vec![b'x'; 10 << 20]).unwrap();

    let page = get(addr, "/api/topics/t/partitions/0/records?offset=0").json();
    // The 10 MB record's batch is past the page's byte budget (1 MiB by default).
    assert_eq!(offsets(&page), [0, 1, 2, 3]);
    assert_eq!(page["next_offset"], 4);
    let value = |i: usize| page["records"][i]["value"].clone();
    assert_eq!(value(0)["msgpack"], json!({"id": 7}));
    assert_eq!(value(1)["json"], json!({"a": [1, 2]}));
    assert_eq!(value(1)["msgpack"], Value::Null);
    assert_eq!(
        (value(2)["utf8"].clone(), value(2)["hex"].clone()),
        (Value::Null, json!("ff0041"))
    );
    let traced = &page["records"][3];
    assert_eq!(
        traced["trace"],
        json!({"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"})
    );
    assert_eq!(traced["headers"][0]["key"], "traceparent");
    assert_eq!(traced["headers"][1], json!({"key": "null", "value": null}));
    assert_eq!(page["records"][0]["key"], Value::Null);
    // 10 MB shown as its first 64 KiB, with its size: a page's first batch is read whole.
    let page = get(addr, "/api/topics/t/partitions/0/records?offset=4").json();
    let big = page["records"][0]["value"].clone();
    assert_eq!(
        (big["size"].clone(), big["truncated"].clone()),
        (json!(10 << 20), json!(true))
    );
    assert_eq!(big["utf8"].as_str().unwrap().len(), 64 << 10);
    assert_eq!(big["hex"].as_str().unwrap().len(), 128 << 10);
    let small = get(
        addr,
        "/api/topics/t/partitions/0/records?offset=4&max_field_bytes=10",
    )
    .json();
    assert_eq!(small["records"][0]["value"]["utf8"], "xxxxxxxxxx");
}

#[test]
fn search_scans_bounded_windows_until_done() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("t", topic(1)).unwrap();
    for i in 0..25u32 {
        let key = format!("user-{}", i % 5);
        let value = if i == 17 {
            "needle here".to_owned()
        } else {
            format!("v{i}")
        };
        broker
            .produce_batch_raw(
                "t",
                Some(0),
                vec![nanokafka::ProduceRecord {
                    key: Some(key.into_bytes()),
                    value: value.into_bytes(),
                }],
            )
            .unwrap();
        clock.advance(1);
    }
    let first = get(
        addr,
        "/api/topics/t/search?partition=0&key=user-2&window=10",
    )
    .json();
    assert_eq!(offsets(&json!({"records": first["matches"]})), [2, 7]);
    assert_eq!(
        (
            first["scanned_from"].clone(),
            first["scanned_to"].clone(),
            first["done"].clone()
        ),
        (json!(0), json!(10), json!(false))
    );
    let rest = get(
        addr,
        "/api/topics/t/search?partition=0&key=user-2&from=10&window=100",
    )
    .json();
    assert_eq!(offsets(&json!({"records": rest["matches"]})), [12, 17, 22]);
    assert_eq!(
        (rest["scanned_to"].clone(), rest["done"].clone()),
        (json!(25), json!(true))
    );
    let found = get(addr, "/api/topics/t/search?partition=0&contains=needle").json();
    assert_eq!(offsets(&json!({"records": found["matches"]})), [17]);
    for bad in [
        "partition=0",
        "partition=0&key=a&contains=b",
        "partition=0&key=a&window=0",
        "partition=0&key=a&window=100001",
        "key=a",
    ] {
        let answer = get(addr, &format!("/api/topics/t/search?{bad}"));
        assert_eq!(answer.status, 400, "{bad}: {}", answer.error());
    }
}

#[test]
fn the_charts_series_fill_while_the_api_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (clock, builder) = manual_clock();
    let builder = builder.console_sampling(Duration::from_millis(5), Duration::from_secs(60));
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("t", topic(1)).unwrap();
    produce_raw(&broker, &clock, "t", &[b"x"]);
    committed(&broker, "t", "g", 0, 1);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        // Ten records a (manual) second between samples.
        produce_raw(&broker, &clock, "t", &[b"x".as_slice(); 10]);
        clock.advance(990);
        let t = get(addr, "/api/topics/t").json();
        let series = t["throughput"].as_array().unwrap();
        if series.iter().any(|point| point[1].as_f64().unwrap() > 0.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no throughput after 20 s"
        );
    }
    let overview = get(addr, "/api/overview").json();
    assert!(overview["topics"][0]["records_per_sec"].is_f64());
    let g = get(addr, "/api/groups/g").json();
    let history = g["lag_history"].as_array().unwrap();
    assert!(history.last().unwrap()[1].as_f64().unwrap() > 0.0);
}

#[test]
fn newest_first_shows_the_newest_records_when_the_byte_budget_runs_out() {
    let dir = tempfile::tempdir().unwrap();
    let (_clock, builder) = manual_clock();
    let (broker, addr) = with_console(dir.path(), builder);
    broker.create_topic("t", topic(1)).unwrap();
    for i in 0..10u8 {
        broker.produce_raw("t", None, vec![i; 300 << 10]).unwrap();
    }
    // 3 MB of records, a 1 MiB budget: the page holds the newest, newest first.
    let page = get(
        addr,
        "/api/topics/t/partitions/0/records?newest=true&limit=10",
    )
    .json();
    let shown = offsets(&page);
    assert_eq!(shown.first(), Some(&9), "{shown:?}");
    assert!(shown.windows(2).all(|w| w[0] == w[1] + 1), "{shown:?}");
    assert_eq!(page["next_offset"], 10);
}

#[test]
fn an_async_built_broker_reports_its_console_and_stops_it_on_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    actix_rt::System::new().block_on(async move {
        let bus = NanoKafka::builder()
            .data_dir(&path)
            .console("127.0.0.1:0")
            .build_async()
            .await
            .unwrap();
        let addr = bus.console_addr().expect("the console's address");
        // The blocking client runs off the runtime, as a browser would.
        let answer = std::thread::spawn(move || get(addr, "/api/overview").status)
            .join()
            .unwrap();
        assert_eq!(answer, 200);
        bus.shutdown().await.unwrap();
        assert!(std::net::TcpStream::connect(addr).is_err());
    });
}
