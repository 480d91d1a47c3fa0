//! The web console's pages in a real browser: a headless Chromium (tests/console_browser/
//! browser.rs) opens the console of an embedded broker holding data produced through the
//! library, and each test checks what a user sees and does on a page. Every page is
//! screenshotted to `target/console-screenshots/`. Needs the `console` feature; skips
//! without Chromium outside CI.

#![cfg(feature = "console")]

#[path = "common/client_batch.rs"]
mod client_batch;
#[path = "common/process.rs"]
mod process;

#[path = "console_browser/browser.rs"]
mod browser;

use std::collections::BTreeMap;
use std::time::Duration;

use browser::Browser;
use nanokafka::{Header, NanoKafka, TopicConfig};
use tempfile::TempDir;

/// An embedded broker serving its console on a free loopback port.
struct Console {
    broker: NanoKafka,
    url: String,
    _dir: TempDir,
}

impl Console {
    fn create_topic(&self, topic: &str, partitions: u32) {
        let config = TopicConfig::default().partitions(partitions);
        self.broker.create_topic(topic, config).unwrap();
    }
}

/// The browser and a console, or `None` when the browser tests are skipped here.
fn browser_and_console(writes: bool) -> Option<(Browser, Console)> {
    Some((Browser::start()?, console(writes)))
}

fn console(writes: bool) -> Console {
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .console("127.0.0.1:0")
        .console_writes(writes)
        .build()
        .unwrap();
    let url = format!(
        "http://{}/",
        broker.console_addr().expect("the console's address")
    );
    Console {
        broker,
        url,
        _dir: dir,
    }
}

/// Produces `count` JSON records `{"n": i}` to `topic`, keyed `key-i`.
fn produce(broker: &NanoKafka, topic: &str, count: usize) {
    for i in 0..count {
        let value = format!(r#"{{"n": {i}}}"#);
        broker
            .produce_raw(
                topic,
                Some(format!("key-{i}").as_bytes()),
                value.into_bytes(),
            )
            .unwrap();
    }
}

/// Polls `count` records as `member` of `group` and commits each partition past them.
fn consume(broker: &NanoKafka, topic: &str, group: &str, member: &str, count: usize) {
    let mut next: BTreeMap<u32, u64> = BTreeMap::new();
    let mut seen = 0;
    while seen < count {
        let records = broker
            .poll_batch_raw(topic, group, member, count - seen, Duration::from_secs(5))
            .unwrap();
        assert!(
            !records.is_empty(),
            "{seen} of {count} records consumed, then none"
        );
        seen += records.len();
        for record in records {
            next.insert(record.partition, record.offset);
        }
    }
    for (partition, offset) in next {
        broker.commit(topic, group, partition, offset).unwrap();
    }
}

fn total_lag(broker: &NanoKafka, topic: &str, group: &str) -> u64 {
    broker.lag(topic, group).unwrap().values().sum()
}

#[test]
fn overview_lists_the_topics_and_a_topic_shows_its_partitions() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    c.create_topic("orders", 3);
    c.create_topic("payments", 1);
    produce(&c.broker, "orders", 30);
    produce(&c.broker, "payments", 4);
    c.broker
        .join_group("orders", "billing", "billing-1")
        .unwrap();

    browser.goto(&c.url);
    let records = browser.wait_for_text(r#"tr[data-topic="orders"] td:nth-child(3)"#, |t| {
        !t.is_empty()
    });
    assert_eq!(records, "30");
    assert_eq!(
        browser.texts(r#"[data-test="topic-row"] td:first-child"#),
        ["orders", "payments"]
    );
    browser.wait_for_text(r#"[data-test="group-row"] td:first-child"#, |t| {
        t == "billing"
    });
    browser.wait_for("the broker's uptime", |b| {
        b.text("#broker").filter(|t| t.contains("Uptime"))
    });
    browser.screenshot("overview");

    browser.click(r#"tr[data-topic="orders"] a"#);
    browser.wait_for_text("#topic-name", |t| t == "orders");
    browser.wait_for("three partition rows", |b| {
        (b.texts(r#"[data-test="partition-row"]"#).len() == 3).then_some(())
    });
    let ends: u64 = browser
        .texts(r#"[data-test="partition-row"] td:nth-child(3)"#)
        .iter()
        .map(|t| t.parse::<u64>().unwrap())
        .sum();
    assert_eq!(
        ends, 30,
        "the partitions' log ends add up to what was produced"
    );
    browser.screenshot("topic");

    browser.click("#nav-groups");
    browser.wait_for_text(r#"[data-test="group-row"] td:first-child"#, |t| {
        t == "billing"
    });
    browser.screenshot("groups");
}

#[test]
fn message_browser_shows_headers_trace_and_truncation_and_searches() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    c.create_topic("payments", 1);
    produce(&c.broker, "payments", 3);
    // Larger than the console's 64 KiB field cap: shown truncated, with its full size.
    let big = c
        .broker
        .produce_raw("payments", Some(b"big"), vec![b'x'; 100_000])
        .unwrap();

    let span_id = "00f067aa0ba902b7";
    let traced = c
        .broker
        .produce_raw_with_headers(
            "payments",
            Some(b"order-7"),
            br#"{"amount": 42, "currency": "EUR"}"#,
            &[
                Header::new("source", "checkout"),
                Header::new(
                    "traceparent",
                    format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span_id}-01"),
                ),
            ],
        )
        .unwrap();
    browser.goto(&format!("{}#/topics/payments", c.url));
    browser.click("#browse");
    let row = format!(r#"tr[data-test="record"][data-offset="{}"]"#, traced.offset);
    let key = browser.wait_for_text(&format!("{row} [data-test=header-key]"), |t| !t.is_empty());
    assert_eq!(key, "source");
    assert_eq!(
        browser.texts(&format!("{row} [data-test=header-key]")),
        ["source", "traceparent"]
    );
    let value = browser
        .text(&format!("{row} [data-test=header-value] pre"))
        .unwrap();
    assert_eq!(value, "checkout");
    assert_eq!(
        browser.text(&format!("{row} [data-test=span-id]")).unwrap(),
        span_id
    );
    let big_row = format!(r#"tr[data-test="record"][data-offset="{}"]"#, big.offset);
    let badge = browser
        .text(&format!("{big_row} [data-test=truncated]"))
        .expect("the 100,000-byte value is marked truncated");
    assert!(
        badge.contains("64.0 KiB of 97.7 KiB"),
        "what is shown and the full size: {badge}"
    );
    browser.screenshot("messages");

    browser.click(r#"[data-test="render-hex"]"#);
    let hex = browser.wait_for_text(&format!("{row} [data-test=record-value] pre"), |t| {
        t.starts_with("7b 22")
    });
    assert!(hex.starts_with("7b 22 61 6d 6f 75 6e 74"), "{hex}"); // {"amount
    browser.screenshot("messages-hex");

    browser.fill("#search-text", "order-7");
    browser.click("#search-go");
    browser.wait_for_text("#search-status", |t| t.contains("done"));
    let offsets: Vec<_> = browser
        .texts(r#"#search-matches [data-test="record"] td:first-child"#)
        .into_iter()
        .collect();
    assert_eq!(offsets, [traced.offset.to_string()]);
    assert_eq!(
        browser.attr("#search-progress", "value").as_deref(),
        Some("1")
    );
    browser.scroll_to("#search");
    browser.screenshot("search");

    // Following live: a record produced now appears without a reload.
    browser.click(r#"[data-test="render-text"]"#);
    browser.click("#follow");
    let late = c
        .broker
        .produce_raw("payments", Some(b"late"), b"after the page opened".to_vec())
        .unwrap();
    let late_row = format!(
        r#"#records tr[data-test="record"][data-offset="{}"] [data-test=record-value] pre"#,
        late.offset
    );
    browser.wait_for_text(&late_row, |t| t == "after the page opened");
}

#[test]
fn group_lag_chart_rises_with_produced_records_and_drops_when_consumed() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    c.create_topic("events", 2);
    c.broker.join_group("events", "audit", "audit-1").unwrap();
    produce(&c.broker, "events", 4);
    consume(&c.broker, "events", "audit", "audit-1", 4);

    browser.goto(&format!("{}#/groups/audit", c.url));
    let last_lag = |wanted: &'static str| {
        browser.wait_for(&format!("data-last-lag={wanted} on the lag chart"), |b| {
            b.attr("#lag-chart", "data-last-lag")
                .filter(|lag| lag == wanted)
        })
    };
    last_lag("0");

    produce(&c.broker, "events", 25);
    last_lag("25");
    assert_eq!(total_lag(&c.broker, "events", "audit"), 25);
    let (status, group) = browser.fetch("GET", "/api/groups/audit", None);
    assert_eq!(status, 200);
    let api_lag: u64 = group["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["lag"].as_u64().unwrap())
        .sum();
    assert_eq!(api_lag, 25);
    browser.wait_for_text("#members td:first-child", |t| t == "audit-1");
    browser.screenshot("group-lag");

    consume(&c.broker, "events", "audit", "audit-1", 25);
    last_lag("0");
    let points: usize = browser
        .attr("#lag-chart", "data-points")
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        points >= 3,
        "the chart has the history, not one point: {points}"
    );
}

/// A group of one member that has consumed and committed the 10 records of `orders`.
fn caught_up_group(c: &Console) {
    c.create_topic("orders", 1);
    c.broker.join_group("orders", "audit", "audit-1").unwrap();
    produce(&c.broker, "orders", 10);
    consume(&c.broker, "orders", "audit", "audit-1", 10);
}

#[test]
fn reset_offsets_through_the_page_after_a_confirmation() {
    let Some((browser, c)) = browser_and_console(true) else {
        return;
    };
    caught_up_group(&c);
    browser.goto(&format!("{}#/groups/audit", c.url));
    browser.select("#reset-to", "earliest");

    // Refused while the member is live; nothing changes.
    browser.click("#reset-submit");
    browser.wait_for("the confirmation dialog", |b| {
        b.is_shown("#confirm-dialog").then_some(())
    });
    let question = browser.text("#confirm-text").unwrap();
    assert!(
        question.contains("audit") && question.contains("earliest"),
        "{question}"
    );
    browser.screenshot("group-reset-confirm");
    browser.click("#confirm-ok");
    let refused = browser.wait_for_text("#reset-result", |t| !t.is_empty());
    assert!(
        refused.contains("member"),
        "the refusal says why: {refused}"
    );
    assert_eq!(
        browser.attr("#reset-result", "class").as_deref(),
        Some("mono error")
    );
    assert_eq!(total_lag(&c.broker, "orders", "audit"), 0);

    // Cancelling the dialog sends nothing.
    c.broker.leave_group("orders", "audit", "audit-1").unwrap();
    browser.click("#reset-submit");
    browser.click("#confirm-cancel");
    assert_eq!(total_lag(&c.broker, "orders", "audit"), 0);

    browser.click("#reset-submit");
    browser.click("#confirm-ok");
    browser.wait_for_text("#reset-result", |t| t == "Reset: partition 0 → offset 0");
    assert_eq!(total_lag(&c.broker, "orders", "audit"), 10);
    browser.wait_for_text(r#"[data-test="offset-row"] [data-test="committed"]"#, |t| {
        t == "0"
    });
    browser.scroll_to("#reset-result");
    browser.screenshot("group-reset-done");
}

#[test]
fn without_writes_the_reset_form_is_absent_and_a_reset_is_refused() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    caught_up_group(&c);
    c.broker.leave_group("orders", "audit", "audit-1").unwrap();
    browser.goto(&format!("{}#/groups/audit", c.url));
    browser.wait_for_text("#reset-disabled", |t| t.contains("--console-writes"));
    browser.wait_for_text(r#"[data-test="offset-row"] [data-test="committed"]"#, |t| {
        t == "10"
    });
    assert!(!browser.is_shown("#reset-form"));
    assert_eq!(browser.text("#nav-writes").as_deref(), Some("read-only"));

    let body = serde_json::json!({"topic": "orders", "to": "earliest", "confirm": true});
    let (status, reply) = browser.fetch("POST", "/api/groups/audit/reset", Some(body));
    assert_eq!(status, 403, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("--console-writes"),
        "{reply}"
    );
    assert_eq!(total_lag(&c.broker, "orders", "audit"), 0);
    browser.screenshot("group-read-only");
}

/// Submits the write form `form` and returns the question its confirmation dialog asks.
fn ask(browser: &Browser, form: &str) -> String {
    browser.click(&format!("#{form}-submit"));
    browser.wait_for("the confirmation dialog", |b| {
        b.is_shown("#confirm-dialog").then_some(())
    });
    browser.text("#confirm-text").unwrap()
}

/// Submits the write form `form`, confirms, and returns the form's answer (a success).
fn confirm_write(browser: &Browser, form: &str, shot: &str) -> String {
    ask(browser, form);
    browser.screenshot(shot);
    browser.click("#confirm-ok");
    let answer = browser.wait_for_text(&format!("#{form}-result"), |t| !t.is_empty());
    assert_eq!(
        browser.attr(&format!("#{form}-result"), "class").as_deref(),
        Some("mono result"),
        "{form} failed: {answer}"
    );
    answer
}

#[test]
fn topic_writes_through_the_pages_create_produce_delete_records_and_delete() {
    let Some((browser, c)) = browser_and_console(true) else {
        return;
    };
    browser.goto(&c.url);
    browser.fill("#create-topic-name", "audit-log");
    browser.fill("#create-topic-partitions", "2");
    browser.fill(
        "#create-topic-config",
        "retention.ms=3600000\ncleanup.policy=delete",
    );
    let question = ask(&browser, "create-topic");
    assert!(
        question.contains("audit-log") && question.contains("retention.ms=3600000"),
        "{question}"
    );
    browser.screenshot("create-topic-confirm");
    browser.click("#confirm-ok");
    browser.wait_for_text("#create-topic-result", |t| t.contains("Created"));
    browser.wait_for_text(r#"tr[data-topic="audit-log"] td:nth-child(2)"#, |t| {
        t == "2"
    });
    browser.scroll_to("#create-topic");
    browser.screenshot("create-topic-done");

    browser.click(r#"tr[data-topic="audit-log"] a"#);
    browser.wait_for_text(r#"#config tr td:first-child"#, |t| !t.is_empty());
    assert!(browser
        .texts("#config td")
        .windows(2)
        .any(|w| w[0] == "retention.ms" && w[1] == "3600000"));
    // A value the broker refuses: its reason is shown, nothing changes.
    browser.fill("#alter-config", "retention.ms=soon");
    ask(&browser, "alter");
    browser.click("#confirm-ok");
    let refused = browser.wait_for_text("#alter-result", |t| !t.is_empty());
    assert!(refused.contains("retention.ms"), "{refused}");
    assert_eq!(
        browser.attr("#alter-result", "class").as_deref(),
        Some("mono result error")
    );
    browser.scroll_to("#alter");
    browser.screenshot("alter-refused");
    browser.fill("#alter-config", "retention.ms=7200000");
    let answer = confirm_write(&browser, "alter", "alter-confirm");
    assert_eq!(answer, "Set retention.ms=7200000.");
    browser.wait_for("the new retention.ms in the config table", |b| {
        let cells = b.texts("#config td");
        cells
            .windows(2)
            .any(|w| w[0] == "retention.ms" && w[1] == "7200000")
            .then_some(())
    });
    browser.select("#produce-partition", "1");
    browser.fill("#produce-key", "order-9");
    browser.fill("#produce-value", r#"{"amount": 9}"#);
    browser.fill("#produce-headers", "source=console\nattempt=1");
    let answer = confirm_write(&browser, "produce", "produce-confirm");
    assert_eq!(answer, "Produced to partition 1 at offset 0. Show it");
    browser.scroll_to("#produce");
    browser.screenshot("produce-done");
    browser.click("#produce-result a");
    let row = r#"tr[data-test="record"][data-offset="0"]"#;
    let value = browser.wait_for_text(&format!("{row} [data-test=record-value] pre"), |t| {
        !t.is_empty()
    });
    assert_eq!(value, "{\n  \"amount\": 9\n}");
    assert_eq!(
        browser
            .text(&format!("{row} [data-test=record-key] pre"))
            .as_deref(),
        Some("order-9")
    );
    assert_eq!(
        browser.texts(&format!("{row} [data-test=header-key]")),
        ["attempt", "source"]
    );
    assert_eq!(
        browser.texts(&format!("{row} [data-test=header-value] pre")),
        ["1", "console"]
    );
    browser.screenshot("produced-record");

    // Two more records on partition 1, then the first two deleted.
    let more = |v: &str| nanokafka::ProduceRecord {
        key: None,
        value: v.as_bytes().to_vec(),
    };
    c.broker
        .produce_batch_raw("audit-log", Some(1), vec![more("b"), more("c")])
        .unwrap();
    browser.goto(&format!("{}#/topics/audit-log", c.url));
    let log_start = r#"tr[data-partition="1"] td:nth-child(2)"#;
    browser.wait_for_text(r#"tr[data-partition="1"] td:nth-child(3)"#, |t| t == "3");
    assert_eq!(browser.text(log_start).as_deref(), Some("0"));
    browser.select("#delete-records-partition", "1");
    browser.fill("#delete-records-before", "2");
    let answer = confirm_write(&browser, "delete-records", "delete-records-confirm");
    assert_eq!(answer, "Partition 1 now starts at offset 2.");
    browser.wait_for_text(log_start, |t| t == "2");
    // The first record left is at offset 2: the log start moved for readers too.
    assert_eq!(
        c.broker.offset_for_timestamp("audit-log", 1, 0).unwrap(),
        Some(2)
    );
    assert_eq!(
        browser
            .text(r#"tr[data-partition="1"] td:nth-child(4)"#)
            .as_deref(),
        Some("1"),
        "one record left on partition 1"
    );
    browser.scroll_to("#partitions");
    browser.screenshot("delete-records-done");

    // Deleting takes the topic's name typed out, then the dialog.
    assert_eq!(
        browser.attr("#delete-topic-submit", "disabled").as_deref(),
        Some("true")
    );
    browser.fill("#delete-topic-confirm-name", "audit-lo");
    assert_eq!(
        browser.attr("#delete-topic-submit", "disabled").as_deref(),
        Some("true")
    );
    browser.fill("#delete-topic-confirm-name", "audit-log");
    let question = ask(&browser, "delete-topic");
    assert!(question.contains("Delete topic audit-log"), "{question}");
    browser.screenshot("delete-topic-confirm");
    browser.click("#confirm-ok");
    browser.wait_for_text("#notice", |t| t == "Deleted topic audit-log.");
    browser.wait_for_text("#topics tbody td", |t| t == "No topics yet.");
    assert!(c.broker.list_topics().unwrap().is_empty());
    browser.screenshot("delete-topic-done");
}

#[test]
fn browsing_a_partition_by_timestamp_starts_at_the_first_record_at_or_after_it() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    c.create_topic("ticks", 1);
    // Records a second apart with the timestamps their producer gave them, one batch each
    // so that the time index has an entry per record.
    const T0: i64 = 1_767_225_600_000; // 2026-01-01T00:00:00Z
    for i in 0..6 {
        let record = client_batch::ClientRecord {
            timestamp: T0 + i * 1_000,
            value: Some(format!("tick {i}").into()),
            ..Default::default()
        };
        let batch = client_batch::encode(&[record], client_batch::BatchOptions::default());
        c.broker.produce_kafka_batch("ticks", 0, batch).unwrap();
    }
    browser.goto(&format!(
        "{}#/topics/ticks/messages?partition=0&newest=true",
        c.url
    ));
    browser.wait_for_text(r#"#records [data-test="record"] td:first-child"#, |t| {
        t == "5"
    });
    browser.select("#mode", "timestamp");
    // Between the third and the fourth record: the fourth is the first at or after it.
    browser.fill("#at", "2026-01-01T00:00:02.500Z");
    browser.click("#go");
    let first = browser.wait_for_text(r#"#records [data-test="record"] td:first-child"#, |t| {
        t == "3"
    });
    assert_eq!(first, "3");
    assert_eq!(
        browser.texts(r#"#records [data-test="record"] td:first-child"#),
        ["3", "4", "5"]
    );
    assert_eq!(
        browser
            .text(r#"#records [data-test="record"] td:nth-child(2)"#)
            .as_deref(),
        Some("2026-01-01 00:00:03.000Z")
    );
    browser.screenshot("messages-by-time");
}

/// What the page would see when its tab is hidden or shown: `document.visibilityState`
/// says so and `visibilitychange` fires (the browser does both when a tab goes to the
/// background; a headless window never does).
const SET_VISIBILITY: &str = "
    const state = arguments[0];
    Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => state });
    document.dispatchEvent(new Event('visibilitychange'));";

#[test]
fn a_hidden_page_stops_asking_and_a_shown_one_resumes_at_once() {
    let Some((browser, c)) = browser_and_console(false) else {
        return;
    };
    c.create_topic("orders", 1);
    browser.goto(&c.url);
    browser.wait_for_text(r#"[data-test="topic-row"] td:first-child"#, |t| {
        t == "orders"
    });
    // Every API call the page makes from now on is counted.
    browser.execute(
        "window.apiCalls = 0; const fetch = window.fetch;
         window.fetch = (...args) => { window.apiCalls++; return fetch(...args); };",
        Vec::new(),
    );
    let calls = |b: &Browser| {
        b.execute("return window.apiCalls", Vec::new())
            .as_u64()
            .unwrap()
    };
    browser.wait_for("the overview polling", |b| (calls(b) >= 2).then_some(()));

    let set = |state: &str| browser.execute(SET_VISIBILITY, vec![state.into()]);
    set("hidden");
    // A call already on its way when the tab was hidden may still land; none after it.
    let hidden_at = calls(&browser);
    std::thread::sleep(Duration::from_millis(3_500)); // three and a half polling periods
    assert!(
        calls(&browser) <= hidden_at + 1,
        "the hidden page kept asking: {} calls after {hidden_at}",
        calls(&browser)
    );
    let before = calls(&browser);
    set("visible");
    browser.wait_for("polling to resume", |b| (calls(b) > before).then_some(()));
}

/// Registers Avro `schema` under `subject` through the registry's REST API; its id.
#[cfg(feature = "schema-registry")]
fn register(registry: std::net::SocketAddr, subject: &str, schema: &str) -> u32 {
    use std::io::{Read, Write};
    let body = serde_json::json!({ "schema": schema }).to_string();
    let mut stream = std::net::TcpStream::connect(registry).unwrap();
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
    let json: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    json["id"].as_u64().expect("an id") as u32
}

#[cfg(feature = "schema-registry")]
#[test]
fn the_schemas_view_lists_subjects_and_records_read_as_their_schema_decodes_them() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let broker = NanoKafka::builder()
        .data_dir(dir.path())
        .console("127.0.0.1:0")
        .schema_registry("127.0.0.1:0")
        .build()
        .unwrap();
    let url = format!("http://{}/", broker.console_addr().unwrap());
    let user = r#"{"type":"record","name":"User","fields":[{"name":"name","type":"string"},{"name":"age","type":"int"}]}"#;
    let id = register(broker.schema_registry_addr().unwrap(), "users-value", user);
    broker
        .create_topic("users", TopicConfig::default())
        .unwrap();
    let mut framed = vec![0];
    framed.extend_from_slice(&id.to_be_bytes());
    framed.extend_from_slice(&[4, b'a', b'b', 42]);
    broker.produce_raw("users", None, framed).unwrap();

    browser.goto(&url);
    browser.wait_for("the Schemas link", |b| {
        b.is_shown("#nav-schemas").then_some(())
    });
    browser.click("#nav-schemas");
    let subject = browser.wait_for_text(r#"[data-test="subject-row"] td:first-child"#, |t| {
        !t.is_empty()
    });
    assert_eq!(subject, "users-value");
    browser.screenshot("schemas");
    browser.click(r#"[data-test="subject-row"] a"#);
    let text = browser.wait_for_text(r#"[data-test="schema-text"]"#, |t| t.contains("User"));
    assert!(text.contains("\"age\""), "{text}");
    browser.screenshot("schema-subject");

    browser.goto(&format!(
        "{url}#/topics/users/messages?partition=0&offset=0"
    ));
    let value = browser.wait_for_text(r#"[data-test="record-value"] pre"#, |t| !t.is_empty());
    let decoded: serde_json::Value = serde_json::from_str(&value).unwrap();
    assert_eq!(decoded, serde_json::json!({"name": "ab", "age": 21}));
    let meta = browser.text(r#"[data-test="record-value"] .meta"#).unwrap();
    assert!(meta.contains(&format!("schema id {id}")), "{meta}");
    browser.screenshot("schema-decoded-record");
}
