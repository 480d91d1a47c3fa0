//! Consumer groups whose assignor the broker does not know (Kafka Streams' `stream`, a custom
//! assignor): the group elects a leader, the leader gets every member's metadata, and the
//! leader's assignments reach the members byte for byte, as in Kafka. Also the bounds of a
//! member's session timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, DescribeGroupsRequest, GroupId,
    JoinGroupRequest, JoinGroupResponse, OffsetCommitRequest, SyncGroupRequest, SyncGroupResponse,
    TopicName,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use crate::client::WireClient;
use crate::groups_common::*;

const LONG: Duration = Duration::from_secs(60);
/// A client-side assignor's name, unknown to the broker.
const CUSTOM: &str = "stream";

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

/// A subscription to `t` carrying `user_data` (version 1, as Kafka Streams sends).
fn subscription_with(user_data: &[u8]) -> Bytes {
    let subscription = ConsumerProtocolSubscription::default()
        .with_topics(vec![s("t")])
        .with_user_data(Some(Bytes::copy_from_slice(user_data)));
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    subscription.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

/// An assignment of `partitions` of `t` carrying `user_data`.
fn assignment_with(partitions: &[i32], user_data: &[u8]) -> Bytes {
    let assignment = ConsumerProtocolAssignment::default()
        .with_assigned_partitions(vec![TopicPartition::default()
            .with_topic(TopicName(s("t")))
            .with_partitions(partitions.to_vec())])
        .with_user_data(Some(Bytes::copy_from_slice(user_data)));
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    assignment.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

fn custom_join(member: &str, metadata: &Bytes) -> JoinGroupRequest {
    let mut request = join_request("g", member, &["t"], &[CUSTOM]);
    request.protocols[0].metadata = metadata.clone();
    request
}

/// Joins through MEMBER_ID_REQUIRED; the answer of the second join.
fn join_custom(client: &mut WireClient, metadata: &Bytes) -> JoinGroupResponse {
    let first = client.call(&custom_join("", metadata), 5);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    client.call(&custom_join(&first.member_id, metadata), 5)
}

fn sync_with(
    client: &mut WireClient,
    member: &str,
    generation: i32,
    assignments: &[(&str, &Bytes)],
) -> SyncGroupResponse {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s(CUSTOM)))
        .with_assignments(
            assignments
                .iter()
                .map(|(id, bytes)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(id))
                        .with_assignment((*bytes).clone())
                })
                .collect(),
        );
    client.call(&request, 5)
}

#[test]
fn a_client_side_assignor_gets_a_leader_every_members_metadata_and_its_bytes_relayed() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "t", 1);
    for i in 0..3 {
        broker.produce("t", &i).unwrap();
    }
    let (meta_a, meta_b) = (
        subscription_with(b"a's state"),
        subscription_with(b"b's \0"),
    );
    let mut a = WireClient::connect(addr);
    let mut b = WireClient::connect(addr);
    let alone = join_custom(&mut a, &meta_a);
    assert_eq!(alone.error_code, 0);
    let a_id = alone.member_id.to_string();
    assert_eq!(alone.leader.as_str(), a_id, "a lone member leads");
    let only_a = assignment_with(&[0], b"all yours");
    let synced = sync_with(&mut a, &a_id, alone.generation_id, &[(&a_id, &only_a)]);
    assert_eq!((synced.error_code, synced.assignment.clone()), (0, only_a));

    let (joined_b, joined_a) = std::thread::scope(|scope| {
        let joiner = scope.spawn(|| join_custom(&mut b, &meta_b));
        while heartbeat(&mut a, "g", &a_id, alone.generation_id) != 27 {
            std::thread::yield_now();
        }
        let rejoined = a.call(&custom_join(&a_id, &meta_a), 5);
        (joiner.join().unwrap(), rejoined)
    });
    assert_eq!((joined_a.error_code, joined_b.error_code), (0, 0));
    let b_id = joined_b.member_id.to_string();
    let generation = joined_a.generation_id;
    assert_eq!(joined_b.generation_id, generation);
    for joined in [&joined_a, &joined_b] {
        assert_eq!(joined.leader.as_str(), a_id, "the leader stays");
        assert_eq!(
            joined.protocol_name.as_ref().map(|p| p.as_str()),
            Some(CUSTOM)
        );
    }
    let handed: BTreeMap<String, Bytes> = joined_a
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.clone()))
        .collect();
    assert_eq!(
        handed,
        BTreeMap::from([(a_id.clone(), meta_a), (b_id.clone(), meta_b)]),
        "the leader gets every member's metadata as sent"
    );
    assert!(joined_b.members.is_empty(), "a follower gets none");

    // The leader's assignments, user data and all, reach each member as sent.
    let (to_a, to_b) = (
        assignment_with(&[0], b"\x01a"),
        assignment_with(&[], b"\x02b"),
    );
    let (synced_b, synced_a) = std::thread::scope(|scope| {
        let follower = scope.spawn(|| sync_with(&mut b, &b_id, generation, &[]));
        let leader = sync_with(&mut a, &a_id, generation, &[(&a_id, &to_a), (&b_id, &to_b)]);
        (follower.join().unwrap(), leader)
    });
    assert_eq!(
        (synced_a.error_code, synced_a.assignment),
        (0, to_a.clone())
    );
    assert_eq!(
        (synced_b.error_code, synced_b.assignment),
        (0, to_b.clone())
    );

    // DescribeGroups shows the members and what their leader gave them.
    let described = a.call(
        &DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
        5,
    );
    let group = &described.groups[0];
    assert_eq!(
        (group.group_state.as_str(), group.protocol_data.as_str()),
        ("Stable", CUSTOM)
    );
    let shown: BTreeMap<String, Bytes> = group
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.member_assignment.clone()))
        .collect();
    assert_eq!(shown, BTreeMap::from([(a_id.clone(), to_a), (b_id, to_b)]));
    // The broker dealt nothing: the group is no member of the topic's native group.
    let native = broker.stats().unwrap().topics["t"].groups.get("g").cloned();
    assert!(
        native.as_ref().is_none_or(|g| g.assignment.is_empty()),
        "{native:?}"
    );

    // Members commit as in any group, and lag() reads the commit.
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(s("g")))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(s(&a_id))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s("t")))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(2)])]);
    let committed = a.call(&commit, 8);
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    assert_eq!(broker.lag("t", "g").unwrap(), BTreeMap::from([(0, 1)]));
}

#[test]
fn a_session_timeout_above_the_brokers_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(10), "t", 1);
    let mut client = WireClient::connect(addr);
    for session_ms in [10_001, 0, -1] {
        let request = join_request("g", "", &["t"], &["range"]).with_session_timeout_ms(session_ms);
        let refused = client.call(&request, 5);
        assert_eq!(
            refused.error_code, 26,
            "INVALID_SESSION_TIMEOUT for {session_ms} ms"
        );
        assert!(refused.member_id.is_empty(), "no member id handed out");
    }
    let request = join_request("g", "", &["t"], &["range"]).with_session_timeout_ms(10_000);
    assert_eq!(client.call(&request, 5).error_code, 79, "the maximum fits");
}

#[test]
fn a_group_turning_to_a_client_side_assignor_leaves_the_native_group() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "t", 2);
    let mut a = WireClient::connect(addr);
    let (a_id, _, partitions) = join_and_sync(&mut a, "g", &["t"]);
    assert_eq!(partitions["t"], [0, 1], "the broker assigned range");
    let native = |broker: &nanokafka::NanoKafka| {
        let stats = broker.stats().unwrap();
        stats.topics["t"].groups["g"].assignment.clone()
    };
    assert!(native(&broker).contains_key(&a_id));

    let meta = subscription_with(b"now mine");
    let joined = a.call(&custom_join(&a_id, &meta), 5);
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), a_id);
    assert_eq!(joined.members.len(), 1);
    assert!(native(&broker).is_empty(), "{:?}", native(&broker));
}
