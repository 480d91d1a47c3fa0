//! Static membership (KIP-345) over the wire: a restarted instance takes its member's place
//! with no rebalance, Kafka's or native; the id it replaced, and any other pairing with its
//! instance id, is fenced; LeaveGroup by instance id; DescribeGroups v4 shows instance ids;
//! a restarted leader of a leader-assigned group syncs what its predecessor assigned.

use std::time::Duration;

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    DescribeGroupsRequest, GroupId, HeartbeatRequest, JoinGroupResponse, LeaveGroupRequest,
    SyncGroupRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::WireClient;
use crate::groups_common::*;
use crate::groups_offsets::commit_request;

const FENCED_INSTANCE_ID: i16 = 82;
const UNKNOWN_MEMBER_ID: i16 = 25;

fn some(s: &str) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.to_owned()))
}

/// JoinGroup v5 of the instance `instance` as `member` (empty: a new process).
fn join_static(client: &mut WireClient, member: &str, instance: &str) -> JoinGroupResponse {
    let request =
        join_request("g", member, &["t"], &["range"]).with_group_instance_id(some(instance));
    client.call(&request, 5)
}

/// A SyncGroup of generation 1 naming the instance.
fn sync_request(member: &str, instance: &str) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id(1)
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_group_instance_id(some(instance))
}

/// SyncGroup v3 naming the instance: (error, partitions of `t`).
fn sync_static(client: &mut WireClient, member: &str, instance: &str) -> (i16, Vec<i32>) {
    let synced = client.call(&sync_request(member, instance), 3);
    let partitions = match synced.error_code {
        0 => assignment(&synced.assignment)
            .remove("t")
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    (synced.error_code, partitions)
}

fn heartbeat_static(client: &mut WireClient, member: &str, instance: &str) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id(1)
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_group_instance_id(some(instance));
    client.call(&request, 3).error_code
}

/// LeaveGroup v3 of one member identity: its error.
fn leave_static(client: &mut WireClient, member: &str, instance: &str) -> i16 {
    let identity = MemberIdentity::default()
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_group_instance_id(some(instance));
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_members(vec![identity]);
    let left = client.call(&request, 3);
    assert_eq!(left.error_code, 0);
    assert_eq!(left.members[0].group_instance_id, some(instance), "echoed");
    left.members[0].error_code
}

/// OffsetCommit v7 naming the instance: its error on partition 0.
fn commit_static(client: &mut WireClient, member: &str, instance: &str) -> i16 {
    let request = commit_request("g", member, 1, &[(0, 1)]).with_group_instance_id(some(instance));
    client.call(&request, 7).topics[0].partitions[0].error_code
}

#[test]
fn a_restarted_instance_takes_its_place_with_no_rebalance_and_the_old_id_is_fenced() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 4);
    broker.join_group("t", "g", "native").unwrap();
    let mut first = WireClient::connect(addr);
    let joined = join_static(&mut first, "", "inst-a");
    assert_eq!(joined.error_code, 0, "no MEMBER_ID_REQUIRED detour");
    let old = joined.member_id.to_string();
    assert!(old.starts_with("inst-a-"), "Kafka's shape: {old}");
    let (code, partitions) = sync_static(&mut first, &old, "inst-a");
    assert_eq!((code, partitions.len()), (0, 2), "half of the partitions");
    let native_before = broker.stats().unwrap().topics["t"].groups["g"].clone();

    // The process restarts: a new connection, no member id, the same instance id.
    let mut second = WireClient::connect(addr);
    let rejoined = join_static(&mut second, "", "inst-a");
    assert_eq!(rejoined.error_code, 0);
    let new = rejoined.member_id.to_string();
    assert_ne!(new, old);
    assert_eq!(rejoined.generation_id, 1, "no rebalance");
    assert_eq!(
        sync_static(&mut second, &new, "inst-a"),
        (0, partitions.clone())
    );
    let native_after = broker.stats().unwrap().topics["t"].groups["g"].clone();
    assert_eq!(
        (native_after.generation, &native_after.assignment),
        (native_before.generation, &native_before.assignment),
        "the native group did not rebalance"
    );
    assert_eq!(heartbeat_static(&mut second, &new, "inst-a"), 0);
    assert_eq!(commit_static(&mut second, &new, "inst-a"), 0);

    // The replaced id, with the instance id, is fenced everywhere; nothing changes.
    assert_eq!(
        heartbeat_static(&mut first, &old, "inst-a"),
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        sync_static(&mut first, &old, "inst-a").0,
        FENCED_INSTANCE_ID
    );
    assert_eq!(
        commit_static(&mut first, &old, "inst-a"),
        FENCED_INSTANCE_ID
    );
    assert_eq!(leave_static(&mut first, &old, "inst-a"), FENCED_INSTANCE_ID);
    assert_eq!(
        join_static(&mut first, &old, "inst-a").error_code,
        FENCED_INSTANCE_ID
    );
    // The current id with an instance id the group does not know.
    assert_eq!(
        heartbeat_static(&mut second, &new, "inst-b"),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        heartbeat_static(&mut second, &new, "inst-a"),
        0,
        "still the member"
    );

    // DescribeGroups v4+ shows the instance id; the native membership is not a member apart.
    let request =
        DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("g"))]);
    let described = second.call(&request, 4);
    let members = &described.groups[0].members;
    let ids: Vec<(String, Option<StrBytes>)> = members
        .iter()
        .map(|m| (m.member_id.to_string(), m.group_instance_id.clone()))
        .collect();
    assert_eq!(
        ids,
        [(new.clone(), some("inst-a")), ("native".to_owned(), None)],
        "{members:?}"
    );
    assert_eq!(described.groups[0].group_state.as_str(), "Stable");
}

#[test]
fn leave_group_by_instance_id_removes_the_member_from_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 4);
    let mut client = WireClient::connect(addr);
    let member = join_static(&mut client, "", "inst-a").member_id.to_string();
    assert_eq!(sync_static(&mut client, &member, "inst-a").1, [0, 1, 2, 3]);
    assert_eq!(leave_static(&mut client, "", "inst-b"), UNKNOWN_MEMBER_ID);
    assert_eq!(
        heartbeat_static(&mut client, &member, "inst-a"),
        0,
        "nothing changed"
    );
    assert_eq!(leave_static(&mut client, "", "inst-a"), 0);
    assert_eq!(
        heartbeat_static(&mut client, &member, "inst-a"),
        UNKNOWN_MEMBER_ID
    );
    let native = &broker.stats().unwrap().topics["t"].groups["g"];
    assert!(native.assignment.is_empty(), "{native:?}");
}

#[test]
fn an_instance_id_kafkas_clients_would_refuse_is_an_invalid_request() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 1);
    let mut client = WireClient::connect(addr);
    for bad in [String::new(), "x".repeat(250), "a\nb".to_owned()] {
        let joined = join_static(&mut client, "", &bad);
        assert_eq!(joined.error_code, 42, "INVALID_REQUEST for {bad:?}");
    }
    let request =
        DescribeGroupsRequest::default().with_groups(vec![GroupId(StrBytes::from_static_str("g"))]);
    assert_eq!(
        client.call(&request, 4).groups[0].group_state.as_str(),
        "Dead"
    );
}

/// Kafka's leader special case: a restarted leader of a leader-assigned group (a custom
/// assignor) is told the leader it replaced, with no member list, so it assigns nothing and
/// syncs the assignment its predecessor made, byte for byte; no rebalance.
#[test]
fn a_restarted_leader_of_a_leader_assigned_group_syncs_its_predecessors_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 2);
    let join = |client: &mut WireClient, member: &str| {
        let request =
            join_request("g", member, &["t"], &["custom"]).with_group_instance_id(some("lead"));
        client.call(&request, 5)
    };
    let mut first = WireClient::connect(addr);
    let joined = join(&mut first, "");
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader, joined.member_id, "the leader");
    assert_eq!(joined.members.len(), 1);
    let old = joined.member_id.to_string();
    let assigned = bytes::Bytes::from_static(b"its predecessor's bytes");
    let request =
        sync_request(&old, "lead").with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(joined.member_id)
            .with_assignment(assigned.clone())]);
    assert_eq!(first.call(&request, 3).assignment, assigned);

    let mut second = WireClient::connect(addr);
    let rejoined = join(&mut second, "");
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(rejoined.generation_id, 1, "no rebalance");
    assert_eq!(rejoined.leader.as_str(), old, "the leader it replaced");
    assert!(rejoined.members.is_empty(), "nothing to assign");
    let synced = second.call(&sync_request(&rejoined.member_id, "lead"), 3);
    assert_eq!((synced.error_code, synced.assignment), (0, assigned));
}
