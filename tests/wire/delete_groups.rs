//! OffsetDelete and DeleteGroups through the socket: a group with members is refused
//! (GROUP_SUBSCRIBED_TO_TOPIC, NON_EMPTY_GROUP), an unknown one is GROUP_ID_NOT_FOUND, and
//! otherwise the offsets named (or the whole group) go.

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{DeleteGroupsRequest, GroupId, OffsetDeleteRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;

fn offset_delete(group: &str, partitions: &[i32]) -> OffsetDeleteRequest {
    let topic = OffsetDeleteRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(
            partitions
                .iter()
                .map(|&p| OffsetDeleteRequestPartition::default().with_partition_index(p))
                .collect(),
        );
    OffsetDeleteRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(vec![topic])
}

fn codes(response: &kafka_protocol::messages::OffsetDeleteResponse) -> Vec<i16> {
    response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

#[test]
fn offsets_and_groups_are_deleted_only_once_the_group_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(2))
        .unwrap();
    broker.produce("t", &1u64).unwrap();
    broker.produce("t", &2u64).unwrap();
    broker.join_group("t", "g", "m").unwrap();
    for p in 0..2 {
        broker.commit("t", "g", p, 0).unwrap();
    }
    let mut client = WireClient::connect(addr);

    let subscribed = ResponseError::GroupSubscribedToTopic.code();
    let response = client.call(&offset_delete("g", &[0]), 0);
    assert_eq!(
        (response.error_code, codes(&response)),
        (0, vec![subscribed])
    );
    let groups = DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(StrBytes::from_static_str("g"))]);
    let response = client.call(&groups, 2);
    assert_eq!(
        response.results[0].error_code,
        ResponseError::NonEmptyGroup.code()
    );

    broker.leave_group("t", "g", "m").unwrap();
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    let response = client.call(&offset_delete("g", &[0, 9]), 0);
    assert_eq!(
        (response.error_code, codes(&response)),
        (0, vec![0, unknown])
    );
    let committed = |broker: &nanokafka::NanoKafka| -> Vec<bool> {
        let stats = broker.stats().unwrap();
        let partitions = &stats.topics["t"].partitions;
        partitions
            .iter()
            .map(|p| p.committed.contains_key("g"))
            .collect()
    };
    assert_eq!(committed(&broker), [false, true]);
    let response = client.call(&offset_delete("nobody", &[0]), 0);
    assert_eq!(response.error_code, ResponseError::GroupIdNotFound.code());

    for version in 0..=2 {
        let response = client.call(&groups, version);
        let expected = match version {
            0 => 0,
            _ => ResponseError::GroupIdNotFound.code(),
        };
        assert_eq!(response.results[0].error_code, expected, "v{version}");
    }
    assert_eq!(committed(&broker), [false, false]);
}
