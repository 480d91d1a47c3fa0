//! Fetch through the listener: whole batches as stored, the high watermark after the wait,
//! long polls woken by appends, and the protocol's pitfalls.

use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{batch, decode, decode_fetch, fetch, name, produce};

fn partition(
    response: &FetchResponse,
    index: usize,
) -> &kafka_protocol::messages::fetch_response::PartitionData {
    &response.responses[0].partitions[index]
}

#[test]
fn natively_produced_records_are_fetched_as_kafka_batches_with_the_watermarks() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    for i in 0..5 {
        broker
            .produce_raw(
                "t",
                Some(format!("k{i}").as_bytes()),
                format!("v{i}").into_bytes(),
            )
            .unwrap();
    }
    let mut client = WireClient::connect(addr);
    for version in [4, 7, 11, 12] {
        let response = client.call(&fetch("t", &[(0, 2)], 0), version);
        assert_eq!((response.error_code, response.throttle_time_ms), (0, 0));
        let p = partition(&response, 0);
        assert_eq!(p.error_code, 0);
        assert_eq!(
            (p.high_watermark, p.last_stable_offset),
            (5, 5),
            "v{version}"
        );
        if version >= 5 {
            assert_eq!(p.log_start_offset, 0);
        }
        if version >= 11 {
            assert_eq!(p.preferred_read_replica.0, -1);
        }
        assert!(p.aborted_transactions.is_none(), "read_uncommitted: null");
        let records = decode(p.records.as_ref().unwrap());
        // Whole batches: the first may start below the offset asked for; clients skip those.
        let wanted: Vec<_> = records.iter().filter(|r| r.offset >= 2).collect();
        assert_eq!(wanted.len(), 3);
        for r in wanted {
            assert_eq!(
                r.value.as_deref(),
                Some(format!("v{}", r.offset).as_bytes())
            );
            assert_eq!(r.key.as_deref(), Some(format!("k{}", r.offset).as_bytes()));
        }
    }
}

#[test]
fn an_empty_partition_answers_empty_records_not_null_and_every_partition_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    let mut client = WireClient::connect(addr);
    let mut request = fetch("t", &[(0, 0), (1, 0), (9, 0)], 0);
    request.topics.push(
        FetchTopic::default()
            .with_topic(name("missing"))
            .with_partitions(vec![FetchPartition::default().with_partition_max_bytes(100)]),
    );
    let started = Instant::now();
    let response = client.call(&request, 12);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "max_wait 0 does not wait"
    );
    assert_eq!(response.session_id, 0, "sessionless");
    assert_eq!(response.responses.len(), 2);
    let t = &response.responses[0].partitions;
    assert_eq!(t.len(), 3);
    for p in &t[..2] {
        assert_eq!((p.error_code, p.high_watermark), (0, 0));
        assert_eq!(
            p.records.as_ref().map(|r| r.len()),
            Some(0),
            "empty, not null"
        );
    }
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!((t[2].partition_index, t[2].error_code), (9, unknown));
    assert_eq!(response.responses[1].partitions[0].error_code, unknown);
}

#[test]
fn offsets_outside_the_log_are_offset_out_of_range_for_that_partition_only() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2).retention_size(2))
        .unwrap();
    for i in 0..4u8 {
        let record = nanokafka::ProduceRecord {
            key: None,
            value: vec![i],
        };
        broker
            .produce_batch_raw("t", Some(0), vec![record])
            .unwrap();
    }
    let mut client = WireClient::connect(addr);
    let response = client.call(&fetch("t", &[(0, 5), (0, 1), (0, -1), (1, 0)], 0), 12);
    let out = ResponseError::OffsetOutOfRange.code();
    let codes: Vec<i16> = response.responses[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, [out, out, out, 0]);
    for p in &response.responses[0].partitions[..3] {
        assert_eq!(p.records.as_ref().map(|r| r.len()), Some(0));
    }
}

#[test]
fn the_first_batch_is_whole_even_past_the_limits_and_later_ones_respect_them() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    for values in [["a", "b"], ["c", "d"]] {
        let response = client.call(
            &produce("t", 0, batch(&values, Compression::None, -1, 0), -1),
            9,
        );
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
    }
    let mut request = fetch("t", &[(0, 0)], 0);
    request.topics[0].partitions[0].partition_max_bytes = 1;
    let response = client.call(&request, 12);
    let offsets: Vec<i64> = decode(partition(&response, 0).records.as_ref().unwrap())
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, [0, 1], "one whole batch, no more");
    let mut request = fetch("t", &[(0, 0)], 0);
    request.max_bytes = 1;
    let response = client.call(&request, 12);
    assert_eq!(
        decode(partition(&response, 0).records.as_ref().unwrap()).len(),
        2
    );
}

#[test]
fn a_parked_fetch_is_woken_by_a_produce_on_another_connection_that_it_does_not_block() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let max_wait = Duration::from_secs(15);
    let mut waiting = WireClient::connect(addr);
    let started = Instant::now();
    waiting.send(&fetch("t", &[(0, 0)], max_wait.as_millis() as i32), 12);
    // Another connection is served while the fetch waits.
    let mut other = WireClient::connect(addr);
    let produced = other.call(
        &produce("t", 0, batch(&["late"], Compression::None, -1, 0), -1),
        9,
    );
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let frame = waiting.read_frame().expect("the fetch is answered");
    let elapsed = started.elapsed();
    assert!(elapsed < max_wait, "woken by the append after {elapsed:?}");
    let response = decode_fetch(frame, 12);
    let p = partition(&response, 0);
    assert_eq!(p.high_watermark, 1, "the watermark after the wait");
    let records = decode(p.records.as_ref().unwrap());
    assert_eq!(records[0].value.as_deref(), Some(&b"late"[..]));
}

#[test]
fn max_wait_and_min_bytes_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let started = Instant::now();
    let response = client.call(&fetch("t", &[(0, 0)], 300), 12);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "waited max_wait"
    );
    assert_eq!(
        partition(&response, 0).records.as_ref().map(|r| r.len()),
        Some(0)
    );
    broker.produce_raw("t", None, b"x".to_vec()).unwrap();
    // One record is fewer bytes than min_bytes: the fetch waits out max_wait, then answers
    // what there is.
    let mut request = fetch("t", &[(0, 0)], 300);
    request.min_bytes = 1 << 20;
    let started = Instant::now();
    let response = client.call(&request, 12);
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(
        decode(partition(&response, 0).records.as_ref().unwrap()).len(),
        1
    );
}

#[test]
fn read_committed_reads_as_read_uncommitted_and_an_unknown_session_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.produce_raw("t", None, b"x".to_vec()).unwrap();
    let mut client = WireClient::connect(addr);
    let request: FetchRequest = fetch("t", &[(0, 0)], 0).with_isolation_level(1);
    let response = client.call(&request, 12);
    let p = partition(&response, 0);
    assert_eq!((p.high_watermark, p.last_stable_offset), (1, 1));
    assert_eq!(p.aborted_transactions.as_ref().map(Vec::len), Some(0));
    assert_eq!(decode(p.records.as_ref().unwrap()).len(), 1);
    let incremental = fetch("t", &[], 0).with_session_id(42).with_session_epoch(1);
    let response = client.call(&incremental, 12);
    assert_eq!(
        response.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
}
