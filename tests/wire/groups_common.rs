//! Helpers for the group tests: a broker with a chosen session timeout, and the classic
//! protocol's calls through a raw `WireClient`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, GroupId, HeartbeatRequest,
    JoinGroupRequest, JoinGroupResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use nanokafka::{ListenerConfig, NanoKafka, TopicConfig};

use crate::client::WireClient;

/// A broker listening on a free loopback port with this session timeout, no initial
/// rebalance delay, and `topic` created with `partitions` partitions.
pub fn broker_with_topic(
    dir: &Path,
    session_timeout: Duration,
    topic: &str,
    partitions: u32,
) -> (NanoKafka, SocketAddr) {
    let config = ListenerConfig::new("127.0.0.1:0").initial_rebalance_delay(Duration::ZERO);
    let broker = NanoKafka::builder()
        .data_dir(dir)
        .session_timeout(session_timeout)
        .listener(config)
        .build()
        .unwrap();
    broker
        .create_topic(topic, TopicConfig::default().partitions(partitions))
        .unwrap();
    let addr = broker.listener_addr().unwrap();
    (broker, addr)
}

pub fn subscription(topics: &[&str]) -> Bytes {
    let s = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from_string((*t).to_owned()))
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    s.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

/// A consumer's JoinGroup offering `protocols`, each with a subscription to `topics`.
pub fn join_request(
    group: &str,
    member: &str,
    topics: &[&str],
    protocols: &[&str],
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|p| {
                    JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_string((*p).to_owned()))
                        .with_metadata(subscription(topics))
                })
                .collect(),
        )
}

/// Joins as a new member through MEMBER_ID_REQUIRED (v5): the answer of the second join.
pub fn join_new(client: &mut WireClient, group: &str, topics: &[&str]) -> JoinGroupResponse {
    join_new_with_session(client, group, topics, 30_000)
}

/// [`join_new`] asking for this session timeout (at most the broker's).
pub fn join_new_with_session(
    client: &mut WireClient,
    group: &str,
    topics: &[&str],
    session_ms: i32,
) -> JoinGroupResponse {
    let request = join_request(group, "", topics, &["range", "roundrobin"]);
    let first = client.call(&request.with_session_timeout_ms(session_ms), 5);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    assert!(!first.member_id.is_empty());
    rejoin_with_session(client, group, &first.member_id, topics, session_ms)
}

pub fn rejoin(
    client: &mut WireClient,
    group: &str,
    member: &str,
    topics: &[&str],
) -> JoinGroupResponse {
    rejoin_with_session(client, group, member, topics, 30_000)
}

/// [`rejoin`] asking for this session timeout (at most the broker's).
pub fn rejoin_with_session(
    client: &mut WireClient,
    group: &str,
    member: &str,
    topics: &[&str],
    session_ms: i32,
) -> JoinGroupResponse {
    let request = join_request(group, member, topics, &["range", "roundrobin"]);
    client.call(&request.with_session_timeout_ms(session_ms), 5)
}

pub fn sync(
    client: &mut WireClient,
    group: &str,
    member: &str,
    generation: i32,
) -> SyncGroupResponse {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id(generation)
        .with_member_id(StrBytes::from_string(member.to_owned()));
    client.call(&request, 3)
}

/// Joins and syncs a new member: (member id, generation, its partitions by topic).
pub fn join_and_sync(
    client: &mut WireClient,
    group: &str,
    topics: &[&str],
) -> (String, i32, BTreeMap<String, Vec<i32>>) {
    let joined = join_new(client, group, topics);
    assert_eq!(joined.error_code, 0);
    let synced = sync(client, group, &joined.member_id, joined.generation_id);
    assert_eq!(synced.error_code, 0);
    (
        joined.member_id.to_string(),
        joined.generation_id,
        assignment(&synced.assignment),
    )
}

pub fn heartbeat(client: &mut WireClient, group: &str, member: &str, generation: i32) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id(generation)
        .with_member_id(StrBytes::from_string(member.to_owned()));
    client.call(&request, 3).error_code
}

/// A SyncGroup assignment, decoded by the independent codec: topic → partitions.
pub fn assignment(bytes: &Bytes) -> BTreeMap<String, Vec<i32>> {
    let mut buf = bytes.clone();
    let version = buf.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut buf, version).unwrap();
    decoded
        .assigned_partitions
        .into_iter()
        .map(|tp| (tp.topic.to_string(), tp.partitions))
        .collect()
}
