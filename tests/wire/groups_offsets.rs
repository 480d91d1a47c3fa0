//! OffsetCommit and OffsetFetch against the native group model: one set of committed
//! offsets, read alike by `lag()`, native commits and Kafka clients.

use std::time::Duration;

use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::{
    GroupId, OffsetCommitRequest, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::WireClient;
use crate::groups_common::*;

pub fn commit_request(
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(i32, i64)],
) -> OffsetCommitRequest {
    OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_generation_id_or_member_epoch(generation)
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(
                offsets
                    .iter()
                    .map(|&(p, o)| {
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(p)
                            .with_committed_offset(o)
                    })
                    .collect(),
            )])
}

fn commit(
    client: &mut WireClient,
    group: &str,
    member: &str,
    generation: i32,
    offsets: &[(i32, i64)],
) -> Vec<i16> {
    let response = client.call(&commit_request(group, member, generation, offsets), 8);
    response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect()
}

/// Committed offsets of `t`'s partitions 0..n through OffsetFetch v6.
fn fetch(client: &mut WireClient, group: &str, partitions: &[i32]) -> Vec<i64> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partition_indexes(partitions.to_vec())]));
    let response: OffsetFetchResponse = client.call(&request, 6);
    assert_eq!(response.error_code, 0);
    response.topics[0]
        .partitions
        .iter()
        .map(|p| p.committed_offset)
        .collect()
}

#[test]
fn kafka_commits_are_the_native_committed_offsets_and_lag_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 2);
    for i in 0..10u32 {
        broker.produce_keyed("t", [i as u8], &i).unwrap();
    }
    let ends: Vec<u64> = broker.stats().unwrap().topics["t"]
        .partitions
        .iter()
        .map(|p| p.log_end_offset)
        .collect();
    let mut client = WireClient::connect(addr);
    assert_eq!(
        fetch(&mut client, "g", &[0, 1]),
        [-1, -1],
        "nothing committed yet"
    );

    // A standalone commit (no member) of 0 and of the log end: stored as sent.
    let end1 = ends[1] as i64;
    assert_eq!(
        commit(&mut client, "g", "", -1, &[(0, 0), (1, end1)]),
        [0, 0]
    );
    assert_eq!(fetch(&mut client, "g", &[0, 1]), [0, end1]);
    let lag = broker.lag("t", "g").unwrap();
    assert_eq!((lag[&0], lag[&1]), (ends[0], 0));

    // A native commit of offset o is a committed offset of o + 1 on the wire.
    broker.join_group("t", "g", "native").unwrap();
    broker.commit("t", "g", 0, 1).unwrap();
    assert_eq!(fetch(&mut client, "g", &[0]), [2]);
    // Past the log end is stored as sent, as Kafka does; lag counts from the log end.
    assert_eq!(commit(&mut client, "g", "", -1, &[(1, end1 + 100)]), [0]);
    assert_eq!(fetch(&mut client, "g", &[1]), [end1 + 100]);
    assert_eq!(broker.lag("t", "g").unwrap()[&1], 0);
    // A rewind is a commit like any other; a negative offset is refused and changes nothing.
    assert_eq!(commit(&mut client, "g", "", -1, &[(1, 1)]), [0]);
    assert_eq!(broker.lag("t", "g").unwrap()[&1], ends[1] - 1);
    assert_eq!(
        commit(&mut client, "g", "", -1, &[(1, -5)]),
        [1],
        "OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(
        commit(&mut client, "g", "", -1, &[(9, 0)]),
        [3],
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(fetch(&mut client, "g", &[1, 9]), [1, -1]);

    // Null topics (v2+): every partition with a commit; v8 batches groups.
    let all = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_topics(None);
    let response = client.call(&all, 7);
    let offsets: Vec<(i32, i64)> = response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.committed_offset))
        .collect();
    assert_eq!(offsets, [(0, 2), (1, 1)]);
    let batched = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_topics(None),
        OffsetFetchRequestGroup::default()
            .with_group_id(GroupId(StrBytes::from_static_str("other")))
            .with_topics(None),
    ]);
    let response = client.call(&batched, 8);
    assert_eq!(response.groups.len(), 2);
    assert_eq!(response.groups[0].topics[0].partitions.len(), 2);
    assert!(response.groups[1].topics.is_empty());
}

#[test]
fn member_commits_are_fenced_by_the_classic_generation() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 1);
    for i in 0..5u32 {
        broker.produce("t", &i).unwrap();
    }
    let mut client = WireClient::connect(addr);
    let (member, generation, _) = join_and_sync(&mut client, "g", &["t"]);
    assert_eq!(
        commit(&mut client, "g", &member, generation, &[(0, 3)]),
        [0]
    );
    assert_eq!(broker.lag("t", "g").unwrap()[&0], 2);
    assert_eq!(
        commit(&mut client, "g", &member, generation - 1, &[(0, 4)]),
        [22]
    );
    assert_eq!(
        commit(&mut client, "g", "stranger", generation, &[(0, 4)]),
        [25]
    );
    assert_eq!(
        commit(&mut client, "g", "", -1, &[(0, 4)]),
        [25],
        "the group has members"
    );
    assert_eq!(
        broker.lag("t", "g").unwrap()[&0],
        2,
        "refused commits change nothing"
    );
}

/// The metadata of each partition of `t` through OffsetFetch `version`.
fn fetch_metadata(client: &mut WireClient, group: &str, version: i16) -> Vec<(i64, String)> {
    let topics = Some(vec![OffsetFetchRequestTopic::default()
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partition_indexes(vec![0, 1])]);
    let partitions: Vec<(i64, Option<StrBytes>)> = if version >= 8 {
        let request = OffsetFetchRequest::default().with_groups(vec![
            OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
                .with_topics(topics.map(|ts| {
                    ts.into_iter()
                        .map(|t| {
                            kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default()
                                .with_name(t.name)
                                .with_partition_indexes(t.partition_indexes)
                        })
                        .collect()
                })),
        ]);
        let response = client.call(&request, version);
        let partitions = &response.groups[0].topics[0].partitions;
        partitions
            .iter()
            .map(|p| (p.committed_offset, p.metadata.clone()))
            .collect()
    } else {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_topics(topics);
        let response = client.call(&request, version);
        let partitions = &response.topics[0].partitions;
        partitions
            .iter()
            .map(|p| (p.committed_offset, p.metadata.clone()))
            .collect()
    };
    partitions
        .into_iter()
        .map(|(offset, metadata)| {
            (
                offset,
                metadata.expect("metadata is never null").to_string(),
            )
        })
        .collect()
}

#[test]
fn a_commit_keeps_its_metadata_any_offset_and_both_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 2);
    broker.produce_keyed("t", [0u8], &0u32).unwrap();
    let mut client = WireClient::connect(addr);
    // As librdkafka's 0099 test commits: bytes with a NUL inside, past the log end.
    let with_metadata = |offsets: &[(i32, i64, &str)]| {
        let mut request = commit_request("g", "", -1, &[]);
        request.topics[0].partitions = offsets
            .iter()
            .map(|&(p, o, m)| {
                OffsetCommitRequestPartition::default()
                    .with_partition_index(p)
                    .with_committed_offset(o)
                    .with_committed_metadata(Some(StrBytes::from_string(m.to_owned())))
            })
            .collect();
        request
    };
    let request = with_metadata(&[(0, 42, "Hello\0world!"), (1, 0, "")]);
    let response = client.call(&request, 8);
    let codes: Vec<i16> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, [0, 0]);
    let expected = vec![(42, "Hello\0world!".to_owned()), (0, String::new())];
    for version in [1, 6, 8] {
        assert_eq!(
            fetch_metadata(&mut client, "g", version),
            expected,
            "v{version}"
        );
    }
    // Past Kafka's offset.metadata.max.bytes: OFFSET_METADATA_TOO_LARGE, nothing changes;
    // the other partition of the request is committed all the same.
    let long = "m".repeat(4097);
    let request = with_metadata(&[(0, 7, &long), (1, 1, "fits")]);
    let response = client.call(&request, 8);
    let codes: Vec<i16> = response.topics[0]
        .partitions
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!(codes, [12, 0], "OFFSET_METADATA_TOO_LARGE");
    let expected = vec![(42, "Hello\0world!".to_owned()), (1, "fits".to_owned())];
    assert_eq!(fetch_metadata(&mut client, "g", 6), expected);
    // A commit without metadata (null) clears it.
    let mut request = commit_request("g", "", -1, &[(1, 1)]);
    request.topics[0].partitions[0].committed_metadata = None;
    assert_eq!(
        client.call(&request, 2).topics[0].partitions[0].error_code,
        0
    );
    assert_eq!(fetch_metadata(&mut client, "g", 6)[1], (1, String::new()));

    // A restart keeps the metadata; the commit past the log end comes back at the log end.
    let request = with_metadata(&[(1, 0, "kept")]);
    assert_eq!(
        client.call(&request, 8).topics[0].partitions[0].error_code,
        0
    );
    drop(client);
    let end0 = broker.stats().unwrap().topics["t"].partitions[0].log_end_offset as i64;
    assert!(end0 < 42);
    broker.shutdown().unwrap();
    let (_broker, addr) = crate::common::listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let expected = vec![(end0, "Hello\0world!".to_owned()), (0, "kept".to_owned())];
    assert_eq!(fetch_metadata(&mut client, "g", 6), expected);
}

/// A commit while the group rebalances is answered at once, as Kafka's group coordinator
/// answers it: the generation that is ending still commits while the members join again
/// (librdkafka commits from its revoke callback then), the new generation gets
/// REBALANCE_IN_PROGRESS until its assignment is handed out, the old one
/// ILLEGAL_GENERATION, a stranger UNKNOWN_MEMBER_ID.
#[test]
fn commits_during_a_rebalance_are_answered_at_once_with_kafkas_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = broker_with_topic(dir.path(), Duration::from_secs(60), "t", 2);
    for i in 0..10u32 {
        broker.produce_keyed("t", [i as u8], &i).unwrap();
    }
    let mut a = WireClient::connect(addr);
    let (member_a, first, _) = join_and_sync(&mut a, "g", &["t"]);

    // B joins: the group waits for A to join again, B's JoinGroup parked meanwhile.
    let mut b = WireClient::connect(addr);
    let request = join_request("g", "", &["t"], &["range"]);
    let member_b = b.call(&request, 5).member_id;
    b.send(&join_request("g", &member_b, &["t"], &["range"]), 5);
    let rebalancing = |a: &mut WireClient| heartbeat(a, "g", &member_a, first) == 27;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !rebalancing(&mut a) {
        assert!(
            std::time::Instant::now() < deadline,
            "B's join never began a rebalance"
        );
    }
    // The ending generation commits, as in Kafka's PreparingRebalance.
    assert_eq!(commit(&mut a, "g", &member_a, first, &[(0, 1)]), [0]);
    assert_eq!(commit(&mut a, "g", "stranger", first, &[(0, 2)]), [25]);

    // A joins again: the new generation is being handed out (both joined, none synced).
    let joined = rejoin(&mut a, "g", &member_a, &["t"]);
    assert_eq!(joined.error_code, 0);
    let second = joined.generation_id;
    assert!(second > first);
    assert_eq!(
        commit(&mut a, "g", &member_a, second, &[(0, 3)]),
        [27],
        "REBALANCE_IN_PROGRESS"
    );
    assert_eq!(
        commit(&mut a, "g", &member_a, first, &[(0, 3)]),
        [22],
        "ILLEGAL_GENERATION"
    );
    assert_eq!(commit(&mut a, "g", "stranger", second, &[(0, 3)]), [25]);
    assert_eq!(
        fetch(&mut a, "g", &[0]),
        [1],
        "refused commits change nothing"
    );

    // Once synced, the new generation commits.
    assert_eq!(sync(&mut a, "g", &member_a, second).error_code, 0);
    let parked = b.read_frame().expect("B's JoinGroup was answered");
    assert!(!parked.is_empty());
    assert_eq!(sync(&mut b, "g", &member_b, second).error_code, 0);
    assert_eq!(commit(&mut a, "g", &member_a, second, &[(0, 3)]), [0]);
    assert_eq!(fetch(&mut a, "g", &[0]), [3]);

    // A group the broker never saw: a generation there is from one that is gone.
    assert_eq!(commit(&mut a, "never", "m", 5, &[(0, 3)]), [22]);
    // Generation -1 is a standalone commit, whatever member id it names (a KIP-848 client
    // reading by assign() sends its own): Kafka takes it for a group without members.
    assert_eq!(commit(&mut a, "never", "m", -1, &[(0, 3)]), [0]);
}
