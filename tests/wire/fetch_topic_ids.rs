//! Fetch v13 and later: topics named by topic id (KIP-516), in full fetches and in fetch
//! sessions; an id no topic has, or a recreated topic's old one, is `UNKNOWN_TOPIC_ID`.

use kafka_protocol::messages::fetch_request::{FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{FetchRequest, FetchResponse};
use kafka_protocol::ResponseError;
use nanokafka::{NanoKafka, TopicConfig, TopicId};
use uuid::Uuid;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{decode, fetch, fetch_partitions, produce_to};

fn uuid(id: TopicId) -> Uuid {
    Uuid::from_bytes(*id.as_bytes())
}

fn id_of(broker: &NanoKafka, topic: &str) -> Uuid {
    uuid(broker.topic_ids().unwrap()[topic])
}

/// A fetch of `(partition, offset)`s of topic `id`, by id.
fn topic(id: Uuid, partitions: &[(i32, i64)]) -> FetchTopic {
    FetchTopic::default()
        .with_topic_id(id)
        .with_partitions(fetch_partitions(partitions))
}

fn by_id(topics: Vec<FetchTopic>) -> FetchRequest {
    let mut request = fetch("unused", &[], 0);
    request.topics = topics;
    request
}

/// Every `(topic id, partition, error, record values)` a response answers, in order.
fn answered(response: &FetchResponse) -> Vec<(Uuid, i32, i16, Vec<String>)> {
    response
        .responses
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let values = p.records.as_ref().map_or(Vec::new(), |r| {
                    decode(r)
                        .iter()
                        .map(|r| String::from_utf8(r.value.as_ref().unwrap().to_vec()).unwrap())
                        .collect()
                });
                (t.topic_id, p.partition_index, p.error_code, values)
            })
        })
        .collect()
}

#[test]
fn every_version_from_13_reads_topics_by_id_and_answers_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("a", TopicConfig::default().partitions(2))
        .unwrap();
    broker.create_topic("b", TopicConfig::default()).unwrap();
    produce_to(&broker, "a", 1, b"a1");
    produce_to(&broker, "b", 0, b"b0");
    let (a, b) = (id_of(&broker, "a"), id_of(&broker, "b"));
    let mut client = WireClient::connect(addr);
    for version in 13..=18 {
        let request = by_id(vec![topic(a, &[(0, 0), (1, 0)]), topic(b, &[(0, 0)])]);
        let response = client.call(&request, version);
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(
            answered(&response),
            [
                (a, 0, 0, vec![]),
                (a, 1, 0, vec!["a1".to_string()]),
                (b, 0, 0, vec!["b0".to_string()]),
            ],
            "v{version}"
        );
        assert!(response.responses.iter().all(|t| t.topic.0.is_empty()));
        assert!(response.node_endpoints.is_empty(), "no partition moved");
    }
}

#[test]
fn an_unknown_id_and_a_recreated_topics_old_id_are_unknown_topic_id() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let old = id_of(&broker, "t");
    broker.delete_topic("t").unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    produce_to(&broker, "t", 0, b"new");
    let new = id_of(&broker, "t");
    assert_ne!(old, new);
    let never = Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
    let mut client = WireClient::connect(addr);
    let request = by_id(vec![
        topic(old, &[(0, 0)]),
        topic(never, &[(0, 0), (3, 0)]),
        topic(Uuid::nil(), &[(0, 0)]),
        topic(new, &[(0, 0)]),
    ]);
    let response = client.call(&request, 13);
    let unknown = ResponseError::UnknownTopicId.code();
    assert_eq!(
        answered(&response),
        [
            (old, 0, unknown, vec![]),
            (never, 0, unknown, vec![]),
            (never, 3, unknown, vec![]),
            (Uuid::nil(), 0, unknown, vec![]),
            (new, 0, 0, vec!["new".to_string()]),
        ]
    );
    let p = &response.responses[0].partitions[0];
    assert_eq!((p.high_watermark, p.last_stable_offset), (-1, -1));
}

#[test]
fn a_session_by_id_is_answered_by_id_and_one_by_name_is_refused_at_v13() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    let t = id_of(&broker, "t");
    let mut client = WireClient::connect(addr);
    let full = by_id(vec![topic(t, &[(0, 0), (1, 0)])]).with_session_epoch(0);
    let response = client.call(&full, 13);
    let id = response.session_id;
    assert!(id > 0);
    produce_to(&broker, "t", 1, b"one");
    // Partition 0 forgotten by id: only partition 1's record is answered.
    let mut incremental = by_id(vec![]).with_session_id(id).with_session_epoch(1);
    incremental.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic_id(t)
        .with_partitions(vec![0])];
    let response = client.call(&incremental, 13);
    assert_eq!((response.error_code, response.session_id), (0, id));
    assert_eq!(answered(&response), [(t, 1, 0, vec!["one".to_string()])]);
    // The same session at v12, which names topics, is refused.
    let named = fetch("t", &[], 0).with_session_id(id).with_session_epoch(2);
    let response = client.call(&named, 12);
    assert_eq!(
        response.error_code,
        ResponseError::FetchSessionTopicIdError.code()
    );
    // And a session by name is refused at v13.
    let full = fetch("t", &[(0, 0)], 0).with_session_epoch(0);
    let by_name = client.call(&full, 12).session_id;
    let incremental = by_id(vec![]).with_session_id(by_name).with_session_epoch(1);
    let response = client.call(&incremental, 13);
    assert_eq!(
        response.error_code,
        ResponseError::FetchSessionTopicIdError.code()
    );
}

#[test]
fn a_session_partition_whose_topic_is_deleted_is_answered_unknown_topic_id() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.create_topic("u", TopicConfig::default()).unwrap();
    let (t, u) = (id_of(&broker, "t"), id_of(&broker, "u"));
    let mut client = WireClient::connect(addr);
    let full = by_id(vec![topic(t, &[(0, 0)]), topic(u, &[(0, 0)])]).with_session_epoch(0);
    let id = client.call(&full, 13).session_id;
    broker.delete_topic("t").unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    produce_to(&broker, "t", 0, b"under the new id");
    let unknown = ResponseError::UnknownTopicId.code();
    for epoch in [1, 2] {
        let incremental = by_id(vec![]).with_session_id(id).with_session_epoch(epoch);
        let response = client.call(&incremental, 13);
        assert_eq!(
            answered(&response),
            [(t, 0, unknown, vec![])],
            "an error is answered every time"
        );
    }
}
