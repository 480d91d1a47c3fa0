//! A greedy producer (client id `greedy`, quota 1 MB/s, sending as fast as the broker
//! answers and ignoring its throttle time) beside a well-behaved one without a quota: the
//! well-behaved one keeps at least 80 % of the rate it has alone, measured in the same run,
//! and the greedy one is held near its quota.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::AlterClientQuotasRequest;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{batch, produce};

const QUOTA_BYTES_PER_SEC: f64 = 1_048_576.0;
/// Each measured period; alone and side by side alternate `ROUNDS` times, so a change in the
/// host's load between them weighs on both.
const MEASURED: Duration = Duration::from_secs(1);
const ROUNDS: usize = 3;

/// Produces `records` to `topic` until `stop`; the bytes the broker acknowledged.
fn produce_until(
    client: &mut WireClient,
    topic: &str,
    records: &Bytes,
    stop: &AtomicBool,
) -> usize {
    let mut acked = 0;
    while !stop.load(Ordering::Relaxed) {
        let response = client.call(&produce(topic, 0, records.clone(), 1), 9);
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        acked += records.len();
    }
    acked
}

/// Bytes per second a client acknowledged while the others ran for `MEASURED`.
fn rate(bytes: usize, took: Duration) -> f64 {
    bytes as f64 / took.as_secs_f64()
}

/// Runs `polite` (and `greedy`, if given, already past its first burst) for `MEASURED`;
/// their rates.
fn side_by_side(
    polite: &mut WireClient,
    greedy: Option<&mut WireClient>,
    records: &Bytes,
) -> (f64, Option<f64>) {
    let stop = AtomicBool::new(false);
    let start = Barrier::new(if greedy.is_some() { 3 } else { 2 });
    std::thread::scope(|s| {
        let greedy = greedy.map(|g| {
            s.spawn(|| {
                start.wait();
                produce_until(g, "greedy", records, &stop)
            })
        });
        let polite = s.spawn(|| {
            start.wait();
            produce_until(polite, "polite", records, &stop)
        });
        start.wait();
        let began = Instant::now();
        std::thread::sleep(MEASURED); // the measuring period itself, not a wait for a result
        stop.store(true, Ordering::Relaxed);
        let took = began.elapsed();
        let polite = rate(polite.join().unwrap(), took);
        (polite, greedy.map(|g| rate(g.join().unwrap(), took)))
    })
}

#[test]
fn a_greedy_producer_over_its_quota_does_not_starve_a_polite_one() {
    let _quiet = crate::measuring_alone();
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    for topic in ["polite", "greedy"] {
        broker.create_topic(topic, TopicConfig::default()).unwrap();
    }
    let s = |v: &str| StrBytes::from_string(v.to_owned());
    let quota = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("client-id"))
            .with_entity_name(Some(s("greedy")))])
        .with_ops(vec![OpData::default()
            .with_key(s("producer_byte_rate"))
            .with_value(QUOTA_BYTES_PER_SEC)])]);
    let mut admin = WireClient::connect_as(addr, "admin");
    assert_eq!(admin.call(&quota, 1).entries[0].error_code, 0);

    let value = "v".repeat(64 << 10);
    let records = batch(&[&value], Compression::None, -1, 0);
    let mut polite = WireClient::connect_as(addr, "polite");
    let mut greedy = WireClient::connect_as(addr, "greedy");

    // Kafka measures a new client over at least ten windows, so the greedy one may first
    // send ten seconds' worth of its quota at once; let it, before measuring.
    let burst = (10.0 * QUOTA_BYTES_PER_SEC) as usize;
    let mut sent = 0;
    while sent < burst {
        let response = greedy.call(&produce("greedy", 0, records.clone(), 1), 9);
        sent += records.len();
        if response.throttle_time_ms > 0 {
            break;
        }
    }
    let (mut alone, mut beside, mut greedy_rate) = (0.0, 0.0, 0.0);
    for _ in 0..ROUNDS {
        alone += side_by_side(&mut polite, None, &records).0 / ROUNDS as f64;
        let (polite_rate, greedy) = side_by_side(&mut polite, Some(&mut greedy), &records);
        beside += polite_rate / ROUNDS as f64;
        greedy_rate += greedy.unwrap() / ROUNDS as f64;
    }
    eprintln!(
        "polite alone {:.1} MB/s, beside greedy {:.1} MB/s; greedy {:.2} MB/s (quota 1 MB/s)",
        alone / 1e6,
        beside / 1e6,
        greedy_rate / 1e6
    );
    assert!(
        beside >= 0.8 * alone,
        "the polite producer kept {:.0} % of its rate",
        100.0 * beside / alone
    );
    assert!(
        greedy_rate <= 2.0 * QUOTA_BYTES_PER_SEC,
        "the greedy producer ran at {:.2} MB/s against a 1 MB/s quota",
        greedy_rate / 1e6
    );
}
