//! DescribeCluster and DescribeLogDirs through the socket: the one broker as the cluster,
//! and the data directory as its log directory with each partition's size.

use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeLogDirsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use nanokafka::TopicConfig;

use crate::client::WireClient;
use crate::common::listening_broker;

#[test]
fn describe_cluster_names_this_broker_as_the_cluster_and_its_controller() {
    let dir = tempfile::tempdir().unwrap();
    let (_broker, addr) = listening_broker(dir.path());
    let mut client = WireClient::connect(addr);
    let metadata = client.call(&MetadataRequest::default(), 12);
    for version in 0..=2 {
        let request = DescribeClusterRequest::default().with_endpoint_type(1);
        let response = client.call(&request, version);
        assert_eq!(response.error_code, 0, "v{version}");
        assert_eq!(Some(&response.cluster_id), metadata.cluster_id.as_ref());
        assert_eq!(response.controller_id, BrokerId(0));
        let broker = &response.brokers[0];
        assert_eq!(response.brokers.len(), 1);
        assert_eq!(
            (broker.host.as_str(), broker.port),
            ("127.0.0.1", addr.port() as i32)
        );
    }
    // Controller endpoints (KRaft's) are not something this broker has.
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    let response = client.call(&controllers, 1);
    assert_eq!(
        response.error_code,
        ResponseError::UnsupportedEndpointType.code()
    );
    assert!(response.brokers.is_empty());
}

#[test]
fn describe_log_dirs_gives_each_partitions_size_in_the_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("sized", TopicConfig::default().partitions(2))
        .unwrap();
    broker
        .create_topic("empty", TopicConfig::default())
        .unwrap();
    for i in 0..10u64 {
        broker.produce_keyed("sized", "same-key", &i).unwrap();
    }
    let stats = broker.stats().unwrap();
    let sizes: Vec<u64> = stats.topics["sized"]
        .partitions
        .iter()
        .map(|p| p.size_bytes)
        .collect();
    assert!(sizes.iter().any(|&s| s > 0), "{sizes:?}");
    let mut client = WireClient::connect(addr);
    for version in 1..=4 {
        // Every partition: a null list.
        let everything = DescribeLogDirsRequest::default().with_topics(None);
        let response = client.call(&everything, version);
        assert_eq!(response.error_code, 0, "v{version}");
        let result = &response.results[0];
        assert_eq!(response.results.len(), 1);
        let data_dir = dir.path().canonicalize().unwrap();
        let log_dir = std::path::Path::new(result.log_dir.as_str())
            .canonicalize()
            .unwrap();
        assert_eq!(log_dir, data_dir);
        let sized = result
            .topics
            .iter()
            .find(|t| t.name.0.as_str() == "sized")
            .unwrap();
        let listed: Vec<(i32, i64)> = sized
            .partitions
            .iter()
            .map(|p| (p.partition_index, p.partition_size))
            .collect();
        assert_eq!(listed, [(0, sizes[0] as i64), (1, sizes[1] as i64)]);
        assert!(result.topics.iter().any(|t| t.name.0.as_str() == "empty"));
    }
    // Named partitions: only those that exist.
    let topic = DescribableLogDirTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str("sized")))
        .with_partitions(vec![1, 7]);
    let missing = DescribableLogDirTopic::default()
        .with_topic(TopicName(StrBytes::from_static_str("missing")))
        .with_partitions(vec![0]);
    let request = DescribeLogDirsRequest::default().with_topics(Some(vec![topic, missing]));
    let response = client.call(&request, 4);
    let topics = &response.results[0].topics;
    assert_eq!(topics.len(), 1, "{topics:?}");
    let indexes: Vec<i32> = topics[0]
        .partitions
        .iter()
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(indexes, [1]);
}

#[test]
fn describe_producers_lists_each_partitions_idempotent_producers() {
    use crate::client_batch::{encode, BatchOptions, ClientRecord, Idempotent};
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::DescribeProducersRequest;

    let dir = tempfile::tempdir().unwrap();
    let (broker, addr) = listening_broker(dir.path());
    broker
        .create_topic("idem", TopicConfig::default().partitions(2))
        .unwrap();
    let record = |timestamp| ClientRecord {
        timestamp,
        key: None,
        value: Some(bytes::Bytes::from_static(b"v")),
        headers: Vec::new(),
    };
    // Producer 7 (epoch 2) writes two batches of three to partition 0; a producer without
    // idempotence writes to partition 1.
    for (base_sequence, timestamp) in [(0, 1_700_000_000_000), (3, 1_700_000_000_500)] {
        let options = BatchOptions {
            producer: Some(Idempotent {
                producer_id: 7,
                producer_epoch: 2,
                base_sequence,
            }),
            ..BatchOptions::default()
        };
        let batch = encode(
            &[record(timestamp), record(timestamp), record(timestamp)],
            options,
        );
        broker
            .produce_kafka_batch("idem", 0, batch.to_vec())
            .unwrap();
    }
    let plain = encode(&[record(1)], BatchOptions::default());
    broker
        .produce_kafka_batch("idem", 1, plain.to_vec())
        .unwrap();

    let mut client = WireClient::connect(addr);
    let topic = |name: &'static str, partitions: Vec<i32>| {
        TopicRequest::default()
            .with_name(TopicName(StrBytes::from_static_str(name)))
            .with_partition_indexes(partitions)
    };
    let request = DescribeProducersRequest::default().with_topics(vec![
        topic("idem", vec![0, 1, 5]),
        topic("missing", vec![0]),
    ]);
    let response = client.call(&request, 0);
    let idem = &response.topics[0].partitions;
    assert_eq!(idem[0].error_code, 0);
    let producer = &idem[0].active_producers[..];
    assert_eq!(producer.len(), 1, "{producer:?}");
    let p = &producer[0];
    assert_eq!(
        (
            p.producer_id.0,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp
        ),
        (7, 2, 5, 1_700_000_000_500)
    );
    assert_eq!((p.coordinator_epoch, p.current_txn_start_offset), (-1, -1));
    assert!(idem[1].active_producers.is_empty());
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(idem[2].error_code, unknown);
    assert_eq!(response.topics[1].partitions[0].error_code, unknown);
}
