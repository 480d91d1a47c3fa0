//! DescribeTopicPartitions through the socket: topics by name with their ids, every topic
//! when none is named, pages of at most the asked-for number of partitions with a cursor,
//! and Kafka's errors for unknown topics and bad cursors.

use kafka_protocol::messages::describe_topic_partitions_request::{Cursor, TopicRequest};
use kafka_protocol::messages::{
    DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.into()))
}

fn asking(topics: &[&str]) -> DescribeTopicPartitionsRequest {
    let topics = topics
        .iter()
        .map(|t| TopicRequest::default().with_name(name(t)));
    DescribeTopicPartitionsRequest::default()
        .with_topics(topics.collect())
        .with_response_partition_limit(2000)
}

/// (topic, partitions) of an answer, in order.
fn listed(response: &DescribeTopicPartitionsResponse) -> Vec<(String, Vec<i32>)> {
    let topics = response.topics.iter().map(|t| {
        let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
        (t.name.as_ref().unwrap().0.to_string(), partitions)
    });
    topics.collect()
}

#[test]
fn topics_are_described_by_name_with_their_ids_and_unknown_ones_get_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("orders", TopicConfig::default().partitions(3))
        .unwrap();
    let ids = broker.topic_ids().unwrap();
    let mut client = WireClient::connect(addr);
    let response: DescribeTopicPartitionsResponse =
        client.call(&asking(&["orders", "nope", "bad/name"]), 0);
    let [bad, nope, orders] = &response.topics[..] else {
        panic!("three topics: {response:?}")
    };
    assert_eq!(orders.error_code, 0);
    assert_eq!(orders.topic_id.as_bytes(), ids["orders"].as_bytes());
    assert_eq!(orders.partitions.len(), 3);
    let p = &orders.partitions[2];
    assert_eq!(
        (p.partition_index, p.leader_id.0, p.leader_epoch),
        (2, 0, 0)
    );
    assert_eq!(p.isr_nodes.len(), 1);
    assert_eq!(
        nope.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(bad.error_code, ResponseError::InvalidTopicException.code());
    assert!(response.next_cursor.is_none());
}

#[test]
fn every_topic_is_paged_by_the_partition_limit_with_a_cursor() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    for (topic, partitions) in [("a", 2), ("b", 3), ("c", 1)] {
        let config = TopicConfig::default().partitions(partitions);
        broker.create_topic(topic, config).unwrap();
    }
    let mut client = WireClient::connect(addr);
    let mut pages = Vec::new();
    let mut request = asking(&[]).with_response_partition_limit(2);
    loop {
        let response: DescribeTopicPartitionsResponse = client.call(&request, 0);
        pages.push(listed(&response));
        let Some(next) = response.next_cursor else {
            break;
        };
        let cursor = Cursor::default()
            .with_topic_name(next.topic_name)
            .with_partition_index(next.partition_index);
        request = request.with_cursor(Some(cursor));
    }
    let page = |entries: &[(&str, &[i32])]| -> Vec<(String, Vec<i32>)> {
        entries
            .iter()
            .map(|(t, p)| (t.to_string(), p.to_vec()))
            .collect()
    };
    assert_eq!(
        pages,
        [
            page(&[("a", &[0, 1])]),
            page(&[("b", &[0, 1])]),
            page(&[("b", &[2]), ("c", &[0])]),
        ]
    );
}

#[test]
fn a_cursor_outside_the_topics_asked_for_is_an_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("a", TopicConfig::default()).unwrap();
    let mut client = WireClient::connect(addr);
    let elsewhere = Cursor::default().with_topic_name(name("z"));
    let negative = Cursor::default()
        .with_topic_name(name("a"))
        .with_partition_index(-1);
    for cursor in [elsewhere, negative] {
        let request = asking(&["a"]).with_cursor(Some(cursor));
        let response: DescribeTopicPartitionsResponse = client.call(&request, 0);
        assert_eq!(response.topics.len(), 1);
        assert_eq!(
            response.topics[0].error_code,
            ResponseError::InvalidRequest.code()
        );
        assert!(response.topics[0].partitions.is_empty());
    }
}
