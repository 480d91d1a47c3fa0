//! Fetch sessions (KIP-227) through the listener: a full fetch opens one, incremental fetches
//! name only what changed and are answered only what is new, and every misuse gets Kafka's
//! error.

use kafka_protocol::messages::fetch_request::{FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{decode, decode_fetch, fetch, fetch_partitions, name, produce_to};

/// Every `(topic, partition, record count)` a response answers, in its order.
fn answered(response: &FetchResponse) -> Vec<(String, i32, usize)> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let records = p.records.as_ref().map_or(0, |r| decode(r).len());
                (t.topic.0.to_string(), p.partition_index, records)
            })
        })
        .collect()
}

/// An incremental fetch of session `id` at `epoch`: `partitions` of `topic` added or changed
/// (`(partition, offset)`), `forget` forgotten.
fn incremental(
    id: i32,
    epoch: i32,
    topic: &str,
    partitions: &[(i32, i64)],
    forget: &[i32],
) -> FetchRequest {
    let mut request = fetch(topic, partitions, 0)
        .with_session_id(id)
        .with_session_epoch(epoch);
    if partitions.is_empty() {
        request.topics.clear();
    }
    if !forget.is_empty() {
        request.forgotten_topics_data = vec![ForgottenTopic::default()
            .with_topic(name(topic))
            .with_partitions(forget.to_vec())];
    }
    request
}

#[test]
fn a_full_fetch_opens_a_session_and_incremental_fetches_answer_only_what_is_new() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(3))
        .unwrap();
    produce_to(&broker, "t", 0, b"a");
    let mut client = WireClient::connect(addr);
    let full = fetch("t", &[(0, 0), (1, 0), (2, 0)], 0).with_session_epoch(0);
    let response = client.call(&full, 12);
    assert_eq!(response.error_code, 0);
    let id = response.session_id;
    assert!(id > 0, "a full fetch at epoch 0 opens a session");
    assert_eq!(
        answered(&response),
        [("t".into(), 0, 1), ("t".into(), 1, 0), ("t".into(), 2, 0)],
        "a full fetch answers every partition"
    );

    // The client moves partition 0 on; nothing is new anywhere.
    let response = client.call(&incremental(id, 1, "t", &[(0, 1)], &[]), 12);
    assert_eq!((response.error_code, response.session_id), (0, id));
    assert_eq!(answered(&response), [], "nothing new, nothing answered");

    // A record on partition 2: the request names nothing, the session remembers offset 0.
    produce_to(&broker, "t", 2, b"b");
    let response = client.call(&incremental(id, 2, "t", &[], &[]), 12);
    assert_eq!(answered(&response), [("t".into(), 2, 1)]);
    let p = &response.responses[0].partitions[0];
    assert_eq!(p.high_watermark, 1, "its new high watermark");

    // Partition 2 forgotten: its new record is not answered; partition 1's is.
    produce_to(&broker, "t", 2, b"c");
    produce_to(&broker, "t", 1, b"d");
    let response = client.call(&incremental(id, 3, "t", &[], &[2]), 12);
    assert_eq!(answered(&response), [("t".into(), 1, 1)]);

    // Added back at epoch 4: answered from the offset the request gives.
    let response = client.call(&incremental(id, 4, "t", &[(1, 1), (2, 1)], &[]), 12);
    assert_eq!(answered(&response), [("t".into(), 2, 1)]);
}

#[test]
fn a_wrong_epoch_an_unknown_session_and_a_closed_one_get_kafkas_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client, id) = session_on(dir.path(), 1);

    let response = client.call(&incremental(id, 2, "t", &[], &[]), 12);
    let invalid = ResponseError::InvalidFetchSessionEpoch.code();
    assert_eq!((response.error_code, response.session_id), (invalid, 0));
    assert!(response.responses.is_empty());
    // The refused request changed nothing: epoch 1 is still the one expected.
    let response = client.call(&incremental(id, 1, "t", &[], &[]), 12);
    assert_eq!((response.error_code, response.session_id), (0, id));
    // The same epoch again (a duplicate) is refused too.
    let response = client.call(&incremental(id, 1, "t", &[], &[]), 12);
    assert_eq!(response.error_code, invalid);

    let not_found = ResponseError::FetchSessionIdNotFound.code();
    let response = client.call(&incremental(id ^ 1, 1, "t", &[], &[]), 12);
    assert_eq!(response.error_code, not_found);

    // Epoch -1 closes the session and is answered as a sessionless full fetch.
    let close = fetch("t", &[(0, 0)], 0)
        .with_session_id(id)
        .with_session_epoch(-1);
    let response = client.call(&close, 12);
    assert_eq!((response.error_code, response.session_id), (0, 0));
    assert_eq!(answered(&response), [("t".into(), 0, 0)]);
    let response = client.call(&incremental(id, 2, "t", &[], &[]), 12);
    assert_eq!(response.error_code, not_found, "closed");
}

#[test]
fn a_session_left_with_no_partitions_is_closed() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, mut client, id) = session_on(dir.path(), 1);
    let response = client.call(&incremental(id, 1, "t", &[], &[0]), 12);
    assert_eq!((response.error_code, response.session_id), (0, 0));
    let response = client.call(&incremental(id, 2, "t", &[], &[]), 12);
    assert_eq!(
        response.error_code,
        ResponseError::FetchSessionIdNotFound.code()
    );
}

#[test]
fn an_incremental_fetch_waits_on_every_partition_of_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, mut client, id) = session_on(dir.path(), 2);
    let max_wait = std::time::Duration::from_secs(15);
    let mut waiting = incremental(id, 1, "t", &[], &[]);
    waiting.max_wait_ms = max_wait.as_millis() as i32;
    let started = std::time::Instant::now();
    client.send(&waiting, 12);
    produce_to(&broker, "t", 1, b"late");
    let response = decode_fetch(client.read_frame().expect("answered"), 12);
    assert!(started.elapsed() < max_wait, "woken by the append");
    assert_eq!(answered(&response), [("t".into(), 1, 1)]);
}

/// `topic`'s partitions `0..count` at offset 0, for a full fetch.
fn whole_topic(topic: &str, count: i32) -> FetchTopic {
    let partitions: Vec<(i32, i64)> = (0..count).map(|p| (p, 0)).collect();
    FetchTopic::default()
        .with_topic(name(topic))
        .with_partitions(fetch_partitions(&partitions))
}

/// A broker with topic `t` of `partitions` partitions, a client, and the id of the session
/// that client's full fetch of every partition (at offset 0) opened.
fn session_on(dir: &std::path::Path, partitions: u32) -> (nanokafka::NanoKafka, WireClient, i32) {
    let (broker, addr) = listening_broker(dir);
    broker
        .create_topic("t", TopicConfig::default().partitions(partitions))
        .unwrap();
    let mut client = WireClient::connect(addr);
    let mut full = fetch("t", &[], 0).with_session_epoch(0);
    full.topics = vec![whole_topic("t", partitions as i32)];
    let id = client.call(&full, 12).session_id;
    assert!(id > 0, "a full fetch at epoch 0 opens a session");
    (broker, client, id)
}

#[test]
fn a_full_fetch_over_the_partition_cap_is_answered_without_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let config = nanokafka::ListenerConfig::new("127.0.0.1:0").fetch_session_max_partitions(2);
    let (broker, addr) = crate::common::listening_broker_with(dir.path(), config);
    broker
        .create_topic("t", TopicConfig::default().partitions(3))
        .unwrap();
    let mut client = WireClient::connect(addr);
    let mut full = fetch("t", &[], 0).with_session_epoch(0);
    full.topics = vec![whole_topic("t", 3)];
    let response = client.call(&full, 12);
    assert_eq!((response.error_code, response.session_id), (0, 0));
    assert_eq!(answered(&response).len(), 3);
    full.topics = vec![whole_topic("t", 2)];
    let id = client.call(&full, 12).session_id;
    assert!(id > 0, "within the cap");
    // Growing past the cap closes the session; the request's partitions are answered.
    let response = client.call(&incremental(id, 1, "t", &[(2, 0)], &[]), 12);
    assert_eq!((response.error_code, response.session_id), (0, 0));
    assert_eq!(answered(&response), [("t".into(), 2, 0)]);
}
