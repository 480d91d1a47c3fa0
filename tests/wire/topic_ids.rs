//! Topic ids (Kafka's KIP-516) in Metadata: each topic's id from v10, kept across a reopen,
//! new when a topic is deleted and created again, and topics asked for by id.

use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{MetadataRequest, MetadataResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::{TopicConfig, TopicId};
use uuid::Uuid;

use crate::client::WireClient;
use crate::common::listening_broker;

fn by_name(name: &str) -> MetadataRequestTopic {
    MetadataRequestTopic::default().with_name(Some(TopicName(StrBytes::from_string(name.into()))))
}

fn by_id(id: Uuid) -> MetadataRequestTopic {
    MetadataRequestTopic::default()
        .with_name(None)
        .with_topic_id(id)
}

fn uuid(id: TopicId) -> Uuid {
    Uuid::from_bytes(*id.as_bytes())
}

/// The id Metadata v12 reports for `name` when asked for every topic.
fn reported_id(client: &mut WireClient, name: &str) -> Uuid {
    let every = MetadataRequest::default().with_topics(None);
    let response: MetadataResponse = client.call(&every, 12);
    let topic = response
        .topics
        .iter()
        .find(|t| t.name.as_ref().map(|n| n.0.as_str()) == Some(name))
        .unwrap_or_else(|| panic!("{name} is listed"));
    assert_eq!(topic.error_code, 0);
    topic.topic_id
}

#[test]
fn metadata_reports_each_topics_id_from_v10_and_finds_a_topic_by_it() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("orders", TopicConfig::default().partitions(3))
        .unwrap();
    broker
        .create_topic("audit", TopicConfig::default())
        .unwrap();
    let ids = broker.topic_ids().unwrap();
    assert_ne!(ids["orders"], ids["audit"]);
    let mut client = WireClient::connect(addr);
    assert_eq!(reported_id(&mut client, "orders"), uuid(ids["orders"]));
    for version in [10, 11, 12] {
        let asked = MetadataRequest::default().with_topics(Some(vec![by_name("audit")]));
        let response: MetadataResponse = client.call(&asked, version);
        assert_eq!(
            response.topics[0].topic_id,
            uuid(ids["audit"]),
            "v{version}"
        );
    }

    let asked = MetadataRequest::default().with_topics(Some(vec![by_id(uuid(ids["orders"]))]));
    let response: MetadataResponse = client.call(&asked, 12);
    let topic = &response.topics[0];
    assert_eq!(topic.error_code, 0);
    assert_eq!(topic.name.as_ref().unwrap().0.as_str(), "orders");
    assert_eq!(topic.partitions.len(), 3);

    let unknown = Uuid::from_u128(0x1234_5678);
    let asked = MetadataRequest::default().with_topics(Some(vec![by_id(unknown)]));
    let response: MetadataResponse = client.call(&asked, 12);
    assert_eq!(response.topics.len(), 1);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicId.code()
    );
    assert_eq!(response.topics[0].topic_id, unknown);
    assert_eq!(broker.list_topics().unwrap().len(), 2, "nothing created");
}

#[test]
fn a_topics_id_survives_a_reopen_and_a_recreated_topic_gets_a_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let first = {
        let (broker, addr) = listening_broker(dir.path());
        broker.create_topic("t", TopicConfig::default()).unwrap();
        let id = reported_id(&mut WireClient::connect(addr), "t");
        broker.shutdown().unwrap();
        id
    };
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    assert_eq!(reported_id(&mut client, "t"), first, "kept across a reopen");

    broker.delete_topic("t").unwrap();
    broker.create_topic("t", TopicConfig::default()).unwrap();
    let second = reported_id(&mut client, "t");
    assert_ne!(second, first, "a new topic of the same name has a new id");
    let asked = MetadataRequest::default().with_topics(Some(vec![by_id(first)]));
    let response: MetadataResponse = client.call(&asked, 12);
    assert_eq!(
        response.topics[0].error_code,
        ResponseError::UnknownTopicId.code(),
        "the old id names nothing"
    );
}

#[test]
fn an_auto_created_topic_is_reported_with_its_new_id() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let asked = MetadataRequest::default()
        .with_topics(Some(vec![by_name("fresh")]))
        .with_allow_auto_topic_creation(true);
    let response: MetadataResponse = client.call(&asked, 12);
    assert_eq!(response.topics[0].error_code, 0);
    let id = broker.topic_ids().unwrap()["fresh"];
    assert_eq!(response.topics[0].topic_id, uuid(id));
}
