//! Consumer groups over the wire: the classic protocol's barrier, MEMBER_ID_REQUIRED,
//! server-side assignments, rebalances started by Kafka and native members, fencing,
//! leaving and session expiry; FindCoordinator, DescribeGroups and ListGroups.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{
    DescribeGroupsRequest, FindCoordinatorRequest, GroupId, LeaveGroupRequest, ListGroupsRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::WireClient;
use crate::groups_common::*;

const LONG: Duration = Duration::from_secs(60);

fn partitions_of(
    assignment: &std::collections::BTreeMap<String, Vec<i32>>,
    topic: &str,
) -> Vec<i32> {
    assignment.get(topic).cloned().unwrap_or_default()
}

#[test]
fn a_new_member_is_asked_for_its_id_then_answered_as_a_follower_with_the_brokers_assignment() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "orders", 4);
    let mut client = WireClient::connect(addr);
    let first = client.call(&join_request("g", "", &["orders"], &["range"]), 5);
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let id = first.member_id.to_string();
    assert!(
        id.starts_with("wire-test-"),
        "Kafka's shape: client id first: {id}"
    );
    // A made-up id is not a member.
    let made_up = client.call(&join_request("g", "made-up", &["orders"], &["range"]), 5);
    assert_eq!(made_up.error_code, 25, "UNKNOWN_MEMBER_ID");

    let joined = client.call(
        &join_request("g", &id, &["orders"], &["cooperative-sticky", "range"]),
        5,
    );
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_ne!(
        joined.leader, joined.member_id,
        "every member is a follower"
    );
    assert!(joined.members.is_empty());
    assert_eq!(
        joined.protocol_name.as_deref(),
        Some("range"),
        "eager first"
    );
    let synced = sync(&mut client, "g", &id, 1);
    assert_eq!(synced.error_code, 0);
    assert_eq!(
        partitions_of(&assignment(&synced.assignment), "orders"),
        [0, 1, 2, 3]
    );
    // The same membership natively: the native group of the topic has this member.
    let stats = broker.stats().unwrap();
    let group = &stats.topics["orders"].groups["g"];
    assert_eq!(group.assignment[&id], vec![0, 1, 2, 3]);
    // JoinGroup v0-3 take no detour: an id at once.
    let mut old = WireClient::connect(addr);
    let v3 = old.call(&join_request("h", "", &["orders"], &["range"]), 3);
    assert_eq!(v3.error_code, 0);
    assert!(!v3.member_id.is_empty());
}

#[test]
fn the_barrier_waits_for_every_member_then_both_get_disjoint_halves() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), LONG, "t", 4);
    let mut a = WireClient::connect(addr);
    let (a_id, generation, _) = join_and_sync(&mut a, "g", &["t"]);
    assert_eq!(heartbeat(&mut a, "g", &a_id, generation), 0);

    std::thread::scope(|s| {
        // b's JoinGroup waits at the barrier until a has joined again.
        let b = s.spawn(|| {
            let mut b = WireClient::connect(addr);
            let joined = join_new(&mut b, "g", &["t"]);
            let synced = sync(&mut b, "g", &joined.member_id, joined.generation_id);
            (joined.generation_id, assignment(&synced.assignment))
        });
        // a learns of the rebalance from its heartbeat (polling the protocol, not a clock).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match heartbeat(&mut a, "g", &a_id, generation) {
                27 => break,
                0 if Instant::now() < deadline => std::thread::yield_now(),
                other => panic!("heartbeat answered {other}"),
            }
        }
        let joined = rejoin(&mut a, "g", &a_id, &["t"]);
        assert_eq!(joined.generation_id, generation + 1);
        let synced = sync(&mut a, "g", &a_id, joined.generation_id);
        let a_parts = partitions_of(&assignment(&synced.assignment), "t");
        let (b_generation, b_assignment) = b.join().unwrap();
        let b_parts = partitions_of(&b_assignment, "t");
        assert_eq!(b_generation, generation + 1);
        assert_eq!((a_parts.len(), b_parts.len()), (2, 2));
        let all: BTreeSet<i32> = a_parts.iter().chain(&b_parts).copied().collect();
        assert_eq!(all, BTreeSet::from([0, 1, 2, 3]));
        // The old generation is fenced.
        assert_eq!(
            heartbeat(&mut a, "g", &a_id, generation),
            22,
            "ILLEGAL_GENERATION"
        );
        assert_eq!(heartbeat(&mut a, "g", &a_id, generation + 1), 0);
    });
}

#[test]
fn a_native_member_joining_makes_the_kafka_member_rebalance_and_they_split_the_topic() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "t", 4);
    let mut a = WireClient::connect(addr);
    let (a_id, generation, parts) = join_and_sync(&mut a, "g", &["t"]);
    assert_eq!(partitions_of(&parts, "t"), [0, 1, 2, 3]);

    let native = broker.join_group("t", "g", "native-1").unwrap();
    assert_eq!(
        native.partitions,
        Vec::<u32>::new(),
        "the Kafka member reads all four until it joins again"
    );
    assert_eq!(
        heartbeat(&mut a, "g", &a_id, generation),
        27,
        "REBALANCE_IN_PROGRESS"
    );
    let joined = rejoin(&mut a, "g", &a_id, &["t"]);
    assert_eq!(joined.error_code, 0);
    let synced = sync(&mut a, "g", &a_id, joined.generation_id);
    let kafka_parts = partitions_of(&assignment(&synced.assignment), "t");
    let handed_over = broker.heartbeat("t", "g", "native-1").unwrap();
    let native_parts = handed_over.partitions;
    assert_eq!(
        handed_over.generation,
        native.generation + 1,
        "the partitions the Kafka member gave up reach the native member in a new generation"
    );
    assert_eq!((kafka_parts.len(), native_parts.len()), (2, 2));
    let all: BTreeSet<u32> = kafka_parts
        .iter()
        .map(|&p| p as u32)
        .chain(native_parts.iter().copied())
        .collect();
    assert_eq!(
        all,
        BTreeSet::from([0, 1, 2, 3]),
        "disjoint, and every partition owned"
    );
    assert_eq!(
        heartbeat(&mut a, "g", &a_id, joined.generation_id),
        0,
        "settled"
    );

    // The native member leaves: the Kafka member is told to rejoin and gets everything.
    broker.leave_group("t", "g", "native-1").unwrap();
    assert_eq!(heartbeat(&mut a, "g", &a_id, joined.generation_id), 27);
    let again = rejoin(&mut a, "g", &a_id, &["t"]);
    let synced = sync(&mut a, "g", &a_id, again.generation_id);
    assert_eq!(
        partitions_of(&assignment(&synced.assignment), "t"),
        [0, 1, 2, 3]
    );
}

#[test]
fn unknown_members_and_old_generations_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), LONG, "t", 2);
    let mut a = WireClient::connect(addr);
    assert_eq!(heartbeat(&mut a, "nobody-here", "x", 1), 25);
    let (a_id, generation, _) = join_and_sync(&mut a, "g", &["t"]);
    assert_eq!(
        heartbeat(&mut a, "g", "stranger", generation),
        25,
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(
        heartbeat(&mut a, "g", &a_id, generation + 7),
        22,
        "ILLEGAL_GENERATION"
    );
    assert_eq!(sync(&mut a, "g", &a_id, generation - 1).error_code, 22);
    assert_eq!(sync(&mut a, "g", "stranger", generation).error_code, 25);
    // A bad group id.
    let bad = a.call(&join_request("", "", &["t"], &["range"]), 5);
    assert_eq!(bad.error_code, 24, "INVALID_GROUP_ID");
    // A consumer protocol without a protocol.
    let none = a.call(&join_request("g2", "", &["t"], &[]), 3);
    assert_eq!(none.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");
}

#[test]
fn leaving_rebalances_the_rest_and_the_leaver_is_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "t", 2);
    let mut a = WireClient::connect(addr);
    let mut b = WireClient::connect(addr);
    let (a_id, g1, _) = join_and_sync(&mut a, "g", &["t"]);
    // b joins while a is the only member: a must take part in the barrier.
    let (b_id, g2) = std::thread::scope(|s| {
        let joiner = s.spawn(|| join_new(&mut b, "g", &["t"]));
        while heartbeat(&mut a, "g", &a_id, g1) != 27 {
            std::thread::yield_now();
        }
        let joined = rejoin(&mut a, "g", &a_id, &["t"]);
        let b_joined = joiner.join().unwrap();
        (b_joined.member_id.to_string(), joined.generation_id)
    });
    sync(&mut b, "g", &b_id, g2);
    sync(&mut a, "g", &a_id, g2);

    let leave = LeaveGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_members(vec![
            MemberIdentity::default().with_member_id(StrBytes::from_string(b_id.clone())),
            MemberIdentity::default().with_member_id(StrBytes::from_static_str("ghost")),
        ]);
    let left = b.call(&leave, 4);
    let codes: Vec<i16> = left.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, [0, 25]);
    assert!(!broker.stats().unwrap().topics["t"].groups["g"]
        .assignment
        .contains_key(&b_id));
    assert_eq!(heartbeat(&mut b, "g", &b_id, g2), 25);
    assert_eq!(heartbeat(&mut a, "g", &a_id, g2), 27);
    let again = rejoin(&mut a, "g", &a_id, &["t"]);
    let synced = sync(&mut a, "g", &a_id, again.generation_id);
    assert_eq!(partitions_of(&assignment(&synced.assignment), "t"), [0, 1]);
}

#[test]
fn a_silent_kafka_member_is_evicted_and_the_other_rebalances() {
    let dir = tempfile::tempdir().unwrap();
    let session_ms = 400;
    let session = Duration::from_millis(session_ms as u64);
    let (broker, addr) = broker_with_topic(dir.path(), session, "t", 2);
    let mut a = WireClient::connect(addr);
    let mut b = WireClient::connect(addr);
    let first = join_new_with_session(&mut a, "g", &["t"], session_ms);
    let (a_id, g1) = (first.member_id.to_string(), first.generation_id);
    sync(&mut a, "g", &a_id, g1);
    let (b_id, g2) = std::thread::scope(|s| {
        let joiner = s.spawn(|| join_new_with_session(&mut b, "g", &["t"], session_ms));
        while heartbeat(&mut a, "g", &a_id, g1) != 27 {
            std::thread::yield_now();
        }
        let joined = rejoin_with_session(&mut a, "g", &a_id, &["t"], session_ms);
        (
            joiner.join().unwrap().member_id.to_string(),
            joined.generation_id,
        )
    });
    sync(&mut a, "g", &a_id, g2);
    sync(&mut b, "g", &b_id, g2);
    // b goes silent; a keeps heartbeating (its heartbeats pace the test) until told to
    // rejoin: b's session expired.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match heartbeat(&mut a, "g", &a_id, g2) {
            27 => break,
            0 => {
                assert!(Instant::now() < deadline, "b was never evicted");
                std::thread::sleep(Duration::from_millis(20)); // a heartbeat interval
            }
            other => panic!("heartbeat answered {other}"),
        }
    }
    let again = rejoin_with_session(&mut a, "g", &a_id, &["t"], session_ms);
    let synced = sync(&mut a, "g", &a_id, again.generation_id);
    assert_eq!(partitions_of(&assignment(&synced.assignment), "t"), [0, 1]);
    assert_eq!(heartbeat(&mut b, "g", &b_id, g2), 25, "b is gone");
    let members = broker.stats().unwrap().topics["t"].groups["g"]
        .assignment
        .clone();
    assert_eq!(
        members.keys().collect::<Vec<_>>(),
        [&a_id],
        "and gone natively too"
    );
}

#[test]
fn find_coordinator_names_this_broker_for_groups_and_none_for_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = broker_with_topic(dir.path(), LONG, "t", 1);
    let mut client = WireClient::connect(addr);
    for version in 0..=3 {
        let request = FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g"));
        let response = client.call(&request, version);
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(
            (response.node_id.0, response.port),
            (0, i32::from(addr.port()))
        );
        assert_eq!(response.host.as_str(), "127.0.0.1");
    }
    let batched = FindCoordinatorRequest::default().with_coordinator_keys(vec![
        StrBytes::from_static_str("g1"),
        StrBytes::from_static_str("g2"),
    ]);
    let response = client.call(&batched, 4);
    assert_eq!(response.coordinators.len(), 2);
    assert!(response
        .coordinators
        .iter()
        .all(|c| c.error_code == 0 && c.node_id.0 == 0));
    let transaction = FindCoordinatorRequest::default()
        .with_key(StrBytes::from_static_str("tx"))
        .with_key_type(1);
    assert_eq!(
        client.call(&transaction, 3).error_code,
        15,
        "COORDINATOR_NOT_AVAILABLE"
    );
}

#[test]
fn describe_and_list_show_kafka_and_native_members_of_one_group() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), LONG, "t", 2);
    broker.join_group("t", "native-only", "n1").unwrap();
    let mut a = WireClient::connect(addr);
    let (a_id, generation, _) = join_and_sync(&mut a, "mixed", &["t"]);
    broker.join_group("t", "mixed", "native-2").unwrap();
    assert_eq!(heartbeat(&mut a, "mixed", &a_id, generation), 27);
    let joined = rejoin(&mut a, "mixed", &a_id, &["t"]);
    sync(&mut a, "mixed", &a_id, joined.generation_id);

    let request = DescribeGroupsRequest::default().with_groups(vec![
        GroupId(StrBytes::from_static_str("mixed")),
        GroupId(StrBytes::from_static_str("native-only")),
        GroupId(StrBytes::from_static_str("unheard-of")),
    ]);
    let described = a.call(&request, 5);
    let mixed = &described.groups[0];
    assert_eq!(mixed.group_state.as_str(), "Stable");
    assert_eq!(mixed.protocol_type.as_str(), "consumer");
    assert_eq!(mixed.protocol_data.as_str(), "range");
    let members: BTreeSet<String> = mixed
        .members
        .iter()
        .map(|m| m.member_id.to_string())
        .collect();
    assert_eq!(
        members,
        BTreeSet::from([a_id.clone(), "native-2".to_owned()])
    );
    let kafka = mixed
        .members
        .iter()
        .find(|m| m.member_id.as_str() == a_id)
        .unwrap();
    assert_eq!(kafka.client_id.as_str(), "wire-test");
    // Kafka's form of the connection's address.
    assert_eq!(kafka.client_host.as_str(), "/127.0.0.1");
    let owned: usize = mixed
        .members
        .iter()
        .map(|m| partitions_of(&assignment(&m.member_assignment), "t").len())
        .sum();
    assert_eq!(owned, 2, "each partition once");
    assert_eq!(described.groups[1].group_state.as_str(), "Stable");
    assert_eq!(described.groups[1].members.len(), 1);
    assert_eq!(described.groups[2].group_state.as_str(), "Dead");

    let listed = a.call(&ListGroupsRequest::default(), 3);
    let names: BTreeSet<String> = listed
        .groups
        .iter()
        .map(|g| g.group_id.to_string())
        .collect();
    assert_eq!(
        names,
        BTreeSet::from(["mixed".to_owned(), "native-only".to_owned()])
    );
    let filtered = a.call(
        &ListGroupsRequest::default().with_states_filter(vec![StrBytes::from_static_str("Empty")]),
        4,
    );
    assert!(filtered.groups.is_empty());
}
