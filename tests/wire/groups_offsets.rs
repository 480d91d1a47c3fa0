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

fn commit_request(
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
    // A rewind is a commit like any other; past the log end is refused and changes nothing.
    assert_eq!(commit(&mut client, "g", "", -1, &[(1, 1)]), [0]);
    assert_eq!(broker.lag("t", "g").unwrap()[&1], ends[1] - 1);
    assert_eq!(
        commit(&mut client, "g", "", -1, &[(1, end1 + 1)]),
        [1],
        "OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(commit(&mut client, "g", "", -1, &[(1, -5)]), [1]);
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
