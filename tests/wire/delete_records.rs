//! DeleteRecords through the socket: each partition answered on its own with its low
//! watermark, -1 meaning the high watermark, and each error in its place.

use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;

fn topic(name: &str, partitions: &[(i32, i64)]) -> DeleteRecordsTopic {
    DeleteRecordsTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.to_owned())))
        .with_partitions(
            partitions
                .iter()
                .map(|&(index, offset)| {
                    DeleteRecordsPartition::default()
                        .with_partition_index(index)
                        .with_offset(offset)
                })
                .collect(),
        )
}

#[test]
fn delete_records_moves_each_partitions_low_watermark_or_says_why_not() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("t", TopicConfig::default().partitions(3))
        .unwrap();
    for p in 0..3 {
        for i in 0..5u64 {
            broker
                .produce_batch_raw(
                    "t",
                    Some(p),
                    vec![nanokafka::ProduceRecord {
                        key: None,
                        value: i.to_be_bytes().to_vec(),
                    }],
                )
                .unwrap();
        }
    }
    let mut client = WireClient::connect(addr);
    for version in 0..=2 {
        let request = DeleteRecordsRequest::default()
            .with_topics(vec![
                topic("t", &[(0, 2), (1, -1), (2, 6), (7, 0)]),
                topic("missing", &[(0, 0)]),
            ])
            .with_timeout_ms(5000);
        let response = client.call(&request, version);
        let answers: Vec<(String, i32, i64, i16)> = response
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.low_watermark,
                        p.error_code,
                    )
                })
            })
            .collect();
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let out_of_range = ResponseError::OffsetOutOfRange.code();
        assert_eq!(
            answers,
            [
                ("t".to_owned(), 0, 2, 0),
                ("t".to_owned(), 1, 5, 0),
                ("t".to_owned(), 2, -1, out_of_range),
                ("t".to_owned(), 7, -1, unknown),
                ("missing".to_owned(), 0, -1, unknown),
            ],
            "v{version}"
        );
    }
    let stats = broker.stats().unwrap();
    let starts: Vec<u64> = stats.topics["t"]
        .partitions
        .iter()
        .map(|p| p.log_start_offset)
        .collect();
    assert_eq!(starts, [2, 5, 0]);
}
