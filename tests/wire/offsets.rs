//! ListOffsets and OffsetForLeaderEpoch through the listener.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, OffsetForLeaderEpochRequest};
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;
use crate::records::{batch, name, produce, T0};

fn list(timestamps: &[i64]) -> ListOffsetsRequest {
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(name("t"))
            .with_partitions(
                timestamps
                    .iter()
                    .map(|&t| {
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(t)
                    })
                    .collect(),
            )])
}

#[test]
fn list_offsets_answers_the_log_start_the_log_end_and_lookups_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().retention_size(4))
        .unwrap();
    let mut client = WireClient::connect(addr);
    // Offsets 0..6, timestamps T0, T0+1, T0, T0+1, T0, T0+1; retention keeps 2..6.
    for _ in 0..3 {
        let records = batch(&["a", "b"], Compression::None, -1, 0);
        client.call(&produce("t", 0, records, -1), 9);
    }
    let request = list(&[-2, -1, T0 + 1, T0 + 5, 0]);
    for version in [1, 4, 7] {
        let response = client.call(&request, version);
        let got: Vec<(i16, i64, i64)> = response.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.offset, p.timestamp))
            .collect();
        assert_eq!(
            got,
            [
                (0, 2, -1),
                (0, 6, -1),
                (0, 3, T0 + 1),
                (0, -1, -1),
                (0, 2, T0),
            ],
            "v{version}"
        );
        if version >= 4 {
            assert_eq!(response.topics[0].partitions[0].leader_epoch, 0);
        }
    }
    // -3, the first record with the largest timestamp: v7 only.
    let response = client.call(&list(&[-3]), 7);
    let p = &response.topics[0].partitions[0];
    assert_eq!((p.error_code, p.offset, p.timestamp), (0, 3, T0 + 1));
    let response = client.call(&list(&[-3]), 6);
    assert_eq!(
        response.topics[0].partitions[0].error_code,
        ResponseError::UnsupportedVersion.code()
    );
}

#[test]
fn offset_for_leader_epoch_ends_epoch_0_at_the_log_end_and_knows_no_other() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker.create_topic("t", TopicConfig::default()).unwrap();
    broker.produce_raw("t", None, b"x".to_vec()).unwrap();
    let mut client = WireClient::connect(addr);
    let ask = |current: i32, epoch: i32, partition: i32| {
        OffsetForLeaderPartition::default()
            .with_partition(partition)
            .with_current_leader_epoch(current)
            .with_leader_epoch(epoch)
    };
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![OffsetForLeaderTopic::default()
            .with_topic(name("t"))
            .with_partitions(vec![
                ask(0, 0, 0),
                ask(-1, 3, 0),
                ask(1, 0, 0),
                ask(0, 0, 5),
            ])]);
    for version in 2..=4 {
        let response = client.call(&request, version);
        let got: Vec<(i16, i32, i64)> = response.topics[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.leader_epoch, p.end_offset))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 1),
                (0, -1, -1),
                (ResponseError::UnknownLeaderEpoch.code(), -1, -1),
                (ResponseError::UnknownTopicOrPartition.code(), -1, -1),
            ],
            "v{version}"
        );
    }
}
